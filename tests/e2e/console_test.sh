#!/usr/bin/env bash
# console_test.sh PAYONCE [BACKEND] — issue 26 item 1 and issue 45 item 3: the
# operator's console. `payonce serve --console` on an operations listener,
# three operators (viewer, operator, admin) made with the CLI, a run made with
# the simulator (3 payments each delivered 3 times to a tenant whose webhook
# endpoint does not answer, so their events end as dead letters; serve
# restarted; then one callback with a tampered amount, so the history must
# come from the database), then what triage needs: orders to search by
# prefix and substring (and 25 to page through), one past its expiry still
# PAYING, a refund PROCESSING, an order closed whose event is still being
# retried (failing), a second tenant, reconciliation days fetched from the
# simulated channel (one done, one failed while the channel was down); then
# the console in Debian's Chromium (tests/browser/console.mjs) as each of
# them, which compares what the pages show with the database and the CLI,
# works an alert, sends the dead letters again and fetches the failed day
# again. Here, with curl: who may ask what (401, 403 without the CSRF token
# or from another origin, a viewer's actions, JSON-only sign-in, five wrong
# passwords lock the name), the cookie's flags (Secure behind TLS), the
# page's Content-Security-Policy, /admin absent from the callback listener,
# the new views' bounds (a bad cursor, page size, field: 400); and
# afterwards, in the database, the acknowledgement and the resolution
# audited under alice's name with her notes as she wrote them, the redrive
# and the re-fetch in console_action with what came of them.
# Screenshots: docs/img/console-*.png (docs/operations.md's walkthrough;
# CONSOLE_SHOTS moves them). Also: every metric contrib/grafana-payonce.json
# plots is served by /metrics.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-sqlite}" console
shots=${CONSOLE_SHOTS:-$here/../../docs/img}
node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' ||
  { echo "console: Node.js 20 or later is needed (playwright-core)"; exit 1; }
[ -x /usr/bin/chromium ] || { echo "console: /usr/bin/chromium missing (scripts/deps.sh installs it)"; exit 1; }
( cd "$here/../browser" && [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund >/dev/null ) ||
  { echo "console: npm ci failed"; exit 1; }
"$BIN" migrate >/dev/null && "$BIN" tenant add --tenant t1 >/dev/null && "$BIN" merchant add --tenant t1 --merchant m1 >/dev/null || exit 1
"$BIN" sim keys --dir sim --tenant t1 > keys.out || exit 1
grep -A20 '^Configure' keys.out | grep -E '^payonce|^  ' | sed "s#^payonce #$BIN #" | bash >/dev/null 2>configure.err || { cat configure.err; exit 1; }
# the tenant's webhook endpoint: a port nothing listens on (plain http on
# loopback: --insecure-dev, here and for serve; the master key still seals)
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# (not alert.raised: each dead letter's alert would be one more event to it)
"$BIN" webhook add --tenant t1 --url "http://127.0.0.1:$rport/hook" --insecure-dev \
  --events payment.credited,order.closed \
  > hook.secret 2> hook.err || { cat hook.err; exit 1; }
endpoint=$(sed -n 's/^payonce: endpoint \(we_[0-9a-f]*\) .*/\1/p' hook.err)
# the operators, passwords from files (never on the command line)
for who in vic:viewer alice:operator root:admin; do
  head -c 18 /dev/urandom | base64 | tr -d '/+=' > "${who%%:*}.pw"
  "$BIN" operator add --name "${who%%:*}" --role "${who#*:}" --password-file "${who%%:*}.pw" >/dev/null || exit 1
done
check "the password is stored as a real scrypt hash (Python's hashlib.scrypt agrees)" "$(python3 - "$PAYONCE_DB" "$(cat alice.pw)" "$BACKEND" <<'PY'
import base64, hashlib, subprocess, sys
url, pw, backend = sys.argv[1:]
q = "SELECT pw_hash FROM operator WHERE name = 'alice'"
if backend == 'sqlite':
    import sqlite3; h = sqlite3.connect(url[7:]).execute(q).fetchone()[0]
else:
    h = subprocess.run(['psql', '-XAtq', url, '-c', q], capture_output=True, text=True).stdout.strip()
_, _, params, salt, key = h.split('$')
p = dict(kv.split('=') for kv in params.split(','))
d = lambda x: base64.b64decode(x + '=' * (-len(x) % 4))
print(hashlib.scrypt(pw.encode(), salt=d(salt), n=2 ** int(p['ln']), r=int(p['r']), p=int(p['p']), maxmem=2 ** 26, dklen=32) == d(key))
PY
)" True
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > admin.token
# start MAX_AGE_S: retries every 100-400 ms, dead letters after MAX_AGE_S; no
# active query nor expiry round (an order past its expiry stays PAYING), no
# daily reconciliation, no refund submission (a refund stays PROCESSING)
start() {
  "$BIN" serve --listen 127.0.0.1:0 --ops-listen 127.0.0.1:0 --console --admin-token-file admin.token \
    --insecure-dev --webhook-retry-base-ms 100 --webhook-retry-cap-ms 400 \
    --webhook-max-age-s "$1" --query-interval 0 --recon-interval 0 --refund-retry-interval 0 \
    > server.out 2>> server.log &
  srv=$!; bg_pids+=("$srv")
  ops=$(port_of server.out "operations on port"); port=$(port_of server.out)
  [ -n "$ops" ] || { echo "server did not start"; cat server.log; exit 1; }
}
start 3
for i in 1 2 3; do "$BIN" order create --tenant t1 --merchant m1 --out-trade-no "D-$i" --amount $((100 * i)) >/dev/null; done
"$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --order D-1:100 --order D-2:200 \
  --order D-3:300 --copies 3 --time-factor 1000 > pay.out 2>&1
check "the run: 3 credited" "$(sed -n 's/^sim: //p' pay.out | python3 -c 'import json,sys; print(json.load(sys.stdin)["credited"])')" 3
sql() { if [ "$BACKEND" = sqlite ]; then sqlite3 "${PAYONCE_DB#sqlite:}" "$1"; else psql -XAtq "$PAYONCE_DB" -c "$1"; fi; }
# their events to an endpoint that does not answer: dead letters after 3 s
for _ in $(seq 1 150); do [ "$(sql "SELECT COUNT(*) FROM webhook_delivery WHERE state = 'dead'")" = 3 ] && break; sleep 0.1; done
check "three dead letters" "$(sql "SELECT COUNT(*) FROM webhook_delivery WHERE state = 'dead'")" 3
# a restart: what the console shows must come from the database
kill -TERM "$srv"; wait "$srv"
check "serve stops cleanly (no leak, no error)" "$?" 0
start 3600
"$BIN" order create --tenant t1 --merchant m1 --out-trade-no D-4 --amount 400 >/dev/null
"$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --order D-4:400 --tamper-amount 1 \
  --time-factor 1000 > tamper.out 2>&1
# the second serve writes its counts every 10 s: wait for them
for _ in $(seq 1 150); do [ "$(sql "SELECT COALESCE(SUM(n),0) FROM traffic WHERE kind = 'rejected'")" = 1 ] && break; sleep 0.1; done
check "the history in the database: applied, duplicates, rejected" \
  "$(sql "SELECT kind || '=' || SUM(n) FROM traffic WHERE kind IN ('applied','duplicate:1','rejected') GROUP BY kind ORDER BY kind" | tr '\n' ' ')" \
  "applied=3 duplicate:1=6 rejected=1 "

# ---- what triage needs ----
# orders to find ("20": 20-A, 20-B and t2's 2077 start with it; 120 and
# X-2003 contain it) and 25 to page through
{ for n in 20-A 20-B 120 X-2003; do echo "m1,$n,100"; done
  for i in $(seq -w 1 25); do echo "m1,P-$i,$((1000 + 10#$i))"; done; } | "$BIN" order import --tenant t1 --file - >/dev/null
"$BIN" tenant add --tenant t2 >/dev/null && "$BIN" merchant add --tenant t2 --merchant m1 >/dev/null &&
  "$BIN" order create --tenant t2 --merchant m1 --out-trade-no 2077 --amount 77 >/dev/null || exit 1
# one past its expiry, still PAYING (serve's expiry round is off)
"$BIN" tenant set --tenant t1 --order-ttl 1 >/dev/null && "$BIN" order create --tenant t1 --merchant m1 \
  --out-trade-no EXP-1 --amount 300 >/dev/null && "$BIN" tenant set --tenant t1 --order-ttl 0 >/dev/null || exit 1
# a refund PROCESSING (never submitted: refund-retry-interval 0)
"$BIN" refund create --tenant t1 --out-trade-no D-1 --out-refund-no R-20-1 --amount 50 >/dev/null || exit 1
# an order closed: its event to the endpoint that does not answer, retried (failing)
"$BIN" order create --tenant t1 --merchant m1 --out-trade-no C-1 --amount 100 >/dev/null &&
  "$BIN" order close --tenant t1 --out-trade-no C-1 >/dev/null || exit 1
for _ in $(seq 1 100); do [ "$(sql "SELECT COUNT(*) FROM webhook_delivery WHERE state = 'pending' AND attempts > 0")" = 1 ] && break; sleep 0.1; done
check "one delivery failing" "$(sql "SELECT COUNT(*) FROM webhook_delivery WHERE state = 'pending' AND attempts > 0")" 1
# reconciliation days: the channel's API (sim serve); one day done (no
# trades that day), then the channel down and another day failed
sim_with_api sim keys.out || exit 1
d3=$(date -u -d '3 days ago' +%F); d2=$(date -u -d '2 days ago' +%F)
"$BIN" recon fetch --tenant t1 --channel wechatpay --date "$d3" > fetch3.out 2>&1
check "recon fetch: a day without trades is done" "$?" 0
kill "${bg_pids[-1]}"; wait "${bg_pids[-1]}" 2>/dev/null
"$BIN" recon fetch --tenant t1 --channel wechatpay --date "$d2" > fetch2.out 2>&1
check "recon fetch: the channel down, the day fails" "$(sql "SELECT state || ' ' || last_fetch FROM recon_day WHERE bill_date = '$d2'")" "pending failed"
sim_with_api sim keys.out || exit 1 # up again, for the console's re-fetch

A="http://127.0.0.1:$ops/admin"
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check "the console is not on the callback listener" "$(code "http://127.0.0.1:$port/admin")" 404
check "without a session: 401" "$(code "$A/api/summary")" 401
check "a wrong bearer: 401" "$(code -H 'Authorization: Bearer nope-nope-nope-nope' "$A/api/summary")" 401
check "the admin token as a bearer (scripts): 200" "$(code -H "Authorization: Bearer $(cat admin.token)" "$A/api/summary")" 200
check "the page: nothing from elsewhere, no inline script" \
  "$(curl -s -D - -o /dev/null "$A" | grep -ci "^content-security-policy: default-src 'none'; script-src 'self'; style-src 'self'")" 1
check "the page loads its script from the console only" "$(curl -s "$A" | grep -c '<script src="/admin/console.js" defer></script>')" 1
check "sign-in as a form (what another site could post): refused" \
  "$(code -H 'Content-Type: application/x-www-form-urlencoded' --data 'name=alice&password=x' "$A/login")" 403
login() { curl -s -c "$1" -D "$1.h" -H 'Content-Type: application/json' "${@:3}" \
  -d "{\"name\":\"alice\",\"password\":\"$2\"}" "$A/login"; }
check "a wrong password: 401" "$(login jar.bad wrong -o /dev/null -w '%{http_code}')" 401
csrf=$(login jar "$(cat alice.pw)" | python3 -c 'import json,sys; print(json.load(sys.stdin)["csrf"])')
check "the cookie: HttpOnly, SameSite=Strict, Path=/admin, not Secure over plain HTTP" \
  "$(grep -i '^set-cookie:' jar.h | grep -c 'po_session=[A-Za-z0-9_-]\{43\}; Path=/admin; Max-Age=43200; HttpOnly; SameSite=Strict.$')" 1
login jar.tls "$(cat alice.pw)" -H 'X-Forwarded-Proto: https' > /dev/null
check "behind TLS (X-Forwarded-Proto: https) the cookie is Secure" "$(grep -ci '^set-cookie:.*; Secure' jar.tls.h)" 1
id=$(curl -s -b jar "$A/api/alerts?tenant=t1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
post() { curl -s -o /dev/null -w '%{http_code}' -b jar -H 'Content-Type: application/json' "$@" \
  -d "{\"tenant\":\"t1\",\"id\":\"$id\",\"note\":\"x\"}" "$A/api/alerts/ack"; }
check "a POST with the cookie but no CSRF token: 403" "$(post)" 403
check "a POST with a wrong CSRF token: 403" "$(post -H 'X-CSRF-Token: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')" 403
check "a POST from another origin: 403" "$(post -H "X-CSRF-Token: $csrf" -H 'Origin: http://evil.example')" 403
check "send again (redrive) is for a dead webhook's alert only: 409, saying so" \
  "$(curl -s -b jar -H 'Content-Type: application/json' -H "X-CSRF-Token: $csrf" \
     -d "{\"tenant\":\"t1\",\"id\":\"$id\",\"note\":\"x\"}" "$A/api/alerts/redrive" |
     python3 -c 'import json,sys; e=json.load(sys.stdin)["error"]; print(e["code"], "webhook_dead_letter" in e["message"])')" \
  "conflict True"
check "an unknown tenant: 404, not an empty answer" "$(code -b jar "$A/api/accounts?tenant=nobody")" 404
check "nothing changed by the refused POSTs" "$(sql "SELECT state FROM alert WHERE reason = 'amount_mismatch'")" open
# the new views and actions check what they are given (400, nothing read)
B() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat admin.token)" "$@"; }
check "find: a cursor that is not one: 400" "$(B "$A/api/find?q=20&after=x%20y%20z%20w%20v")" 400
check "find: a page of 101: 400" "$(B "$A/api/find?q=20&limit=101")" 400
check "find: q with a quote: 400" "$(B "$A/api/find?q=20%27")" 400
check "find: no such field: 400" "$(B "$A/api/find?q=20&field=amount")" 400
check "list: no such list: 400" "$(B "$A/api/list?name=everything")" 400
check "entry: a key with a space: 400" "$(B "$A/api/entry?tenant=t1&key=a%20b")" 400
check "recon: no such status: 400" "$(B "$A/api/recon?status=lost")" 400
check "webhooks/redrive without a note: 400" "$(B -H 'Content-Type: application/json' \
  -d "{\"tenant\":\"t1\",\"endpoint\":\"$endpoint\"}" "$A/api/webhooks/redrive")" 400
check "webhooks/redrive of an endpoint of nobody's: 404" "$(B -H 'Content-Type: application/json' \
  -d '{"tenant":"t1","endpoint":"we_0000","note":"x"}' "$A/api/webhooks/redrive")" 404
check "recon/fetch of a day that is not one: 400" "$(B -H 'Content-Type: application/json' \
  -d '{"tenant":"t1","channel":"wechatpay","date":"2026-02-30","note":"x"}' "$A/api/recon/fetch")" 400
check "nothing redriven, nothing fetched by those" "$(sql "SELECT COUNT(*) FROM console_action"):$(sql "SELECT COUNT(*) FROM webhook_delivery WHERE state = 'dead'")" "0:3"
txn=$(curl -s -b jar "$A/api/search?q=D-2" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["channel_txn_id"])')

mkdir -p "$shots"
note='<img src=x onerror="window.__pwned=1">checked with the payer & the channel'
VIC_PW=$(cat vic.pw) ALICE_PW=$(cat alice.pw) ROOT_PW=$(cat root.pw) WANT_APPLIED=3 WANT_DUPLICATES=6 \
  WANT_REJECTED=1 WANT_VOLUME="6.00 CNY" WANT_PAYABLE="-6.00 CNY" WANT_CLEARING="6.00 CNY" WANT_NET="6.00 CNY" \
  SEARCH_TXN="$txn" SEARCH_ORDER=D-2 HOSTILE_NOTE="$note" PAYONCE_BIN="$BIN" BACKEND="$BACKEND" \
  ENDPOINT="$endpoint" FAILED_DAY="$d2" DONE_DAY="$d3" \
  node "$here/../browser/console.mjs" "$A" "$shots" > browser.out 2> browser.err
rc=$?
check "the browser: every page as each role" "$rc" 0
[ "$rc" -eq 0 ] || { cat browser.err; head -c 3000 browser.out; echo; }
tamper="alert_key IN (SELECT alert_key FROM alert WHERE reason = 'amount_mismatch')"
check "audited under alice's name, her note as she wrote it" \
  "$(sql "SELECT action || '|' || actor || '|' || note FROM alert_action WHERE $tamper ORDER BY seq" | head -1)" "acknowledge|alice|$note"
check "then resolved by her" "$(sql "SELECT state || '|' || state_by FROM alert WHERE reason = 'amount_mismatch'")" "resolved|alice"
check "the dead letters sent again by her, audited with what came of it" \
  "$(sql "SELECT actor || '|' || target || '|' || result FROM console_action WHERE action = 'webhook_redrive'")" \
  "alice|$endpoint|3 dead deliveries sent again (all of them)"
check "none dead any more (pending again, or delivered)" "$(sql "SELECT COUNT(*) FROM webhook_delivery WHERE state = 'dead'")" 0
check "the failed day fetched again by her: done (the channel has no bill: no trades)" \
  "$(sql "SELECT state || ' ' || last_fetch || ' ' || attempts FROM recon_day WHERE bill_date = '$d2'")" "none none 2"
check "the re-fetch audited" "$(sql "SELECT actor || '|' || target || '|' || result FROM console_action WHERE action = 'recon_fetch'")" \
  "alice|wechatpay $d2|none: 0 rows, 0 matched, 0 replayed"
# five wrong passwords lock the name for a minute (the right one too) — and
# the answer is a wrong password's, the one an unknown name gets (issue 44)
for _ in 1 2 3 4 5; do login jar.bad nope -o /dev/null; done
check "after five wrong passwords: the right one refused as a wrong one (401)" "$(login jar.bad "$(cat alice.pw)" -o /dev/null -w '%{http_code}')" 401
for s in login overview triage search order alert event money webhooks endpoint recon keys report operators; do
  check "screenshot $s" "$([ -s "$shots/console-$s.png" ] && echo yes)" yes
done
fig "# console: $(head -c 400 browser.out) — screenshots $shots/console-*.png"
# contrib/grafana-payonce.json: every metric it plots is one /metrics serves
"$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --order D-1:100 --forge > forge.out 2>&1
curl -s -o /dev/null "http://127.0.0.1:$port/v1/balances"
curl -s "http://127.0.0.1:$ops/metrics" > metrics.txt
missing=$(grep -o 'payonce_[a-z_]*' "$here/../../contrib/grafana-payonce.json" | sort -u | while read -r m; do
  grep -q "^$m" metrics.txt || echo "$m"; done)
check "the Grafana dashboard's metrics are all served" "${missing:-none}" none
check "the Grafana dashboard is JSON with panels" "$(python3 -c "import json; print(len(json.load(open('$here/../../contrib/grafana-payonce.json'))['panels']) > 0)")" True
kill -TERM "$srv"; wait "$srv"
check "serve stops cleanly again" "$?" 0
grep -q '"level":"error"' server.log && { echo "serve logged errors:"; grep '"level":"error"' server.log; }
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
