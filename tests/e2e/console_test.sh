#!/usr/bin/env bash
# console_test.sh PAYONCE [BACKEND] — issue 26 item 1: the operator's
# console. `payonce serve --console` on an operations listener, three
# operators (viewer, operator, admin) made with the CLI, a run made with the
# simulator (3 payments each delivered 3 times; serve restarted; then one
# callback with a tampered amount, so the history must come from the
# database), then the console in Debian's Chromium (tests/browser/
# console.mjs) as each of them. Here, with curl: who may ask what (401,
# 403 without the CSRF token or from another origin, JSON-only sign-in,
# five wrong passwords lock the name), the cookie's flags (Secure behind TLS),
# the page's Content-Security-Policy, /admin absent from the callback
# listener; and afterwards, in the database, the acknowledgement and the
# resolution audited under alice's name with her notes as she wrote them.
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
start() {
  "$BIN" serve --listen 127.0.0.1:0 --ops-listen 127.0.0.1:0 --console --admin-token-file admin.token \
    > server.out 2>> server.log &
  srv=$!; bg_pids+=("$srv")
  ops=$(port_of server.out "operations on port"); port=$(port_of server.out)
  [ -n "$ops" ] || { echo "server did not start"; cat server.log; exit 1; }
}
start
for i in 1 2 3; do "$BIN" order create --tenant t1 --merchant m1 --out-trade-no "D-$i" --amount $((100 * i)) >/dev/null; done
"$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --order D-1:100 --order D-2:200 \
  --order D-3:300 --copies 3 --time-factor 1000 > pay.out 2>&1
check "the run: 3 credited" "$(sed -n 's/^sim: //p' pay.out | python3 -c 'import json,sys; print(json.load(sys.stdin)["credited"])')" 3
# a restart: what the console shows must come from the database
kill -TERM "$srv"; wait "$srv"
check "serve stops cleanly (no leak, no error)" "$?" 0
start
"$BIN" order create --tenant t1 --merchant m1 --out-trade-no D-4 --amount 400 >/dev/null
"$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --order D-4:400 --tamper-amount 1 \
  --time-factor 1000 > tamper.out 2>&1
# the second serve writes its counts every 10 s: wait for them
sql() { if [ "$BACKEND" = sqlite ]; then sqlite3 "${PAYONCE_DB#sqlite:}" "$1"; else psql -XAtq "$PAYONCE_DB" -c "$1"; fi; }
for _ in $(seq 1 150); do [ "$(sql "SELECT COALESCE(SUM(n),0) FROM traffic WHERE kind = 'rejected'")" = 1 ] && break; sleep 0.1; done
check "the history in the database: applied, duplicates, rejected" \
  "$(sql "SELECT kind || '=' || SUM(n) FROM traffic WHERE kind IN ('applied','duplicate:1','rejected') GROUP BY kind ORDER BY kind" | tr '\n' ' ')" \
  "applied=3 duplicate:1=6 rejected=1 "

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
check "nothing changed by the refused POSTs" "$(sql "SELECT state FROM alert")" open
txn=$(curl -s -b jar "$A/api/search?q=D-2" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["channel_txn_id"])')

mkdir -p "$shots"
note='<img src=x onerror="window.__pwned=1">checked with the payer & the channel'
VIC_PW=$(cat vic.pw) ALICE_PW=$(cat alice.pw) ROOT_PW=$(cat root.pw) WANT_APPLIED=3 WANT_DUPLICATES=6 \
  WANT_REJECTED=1 WANT_VOLUME="6.00 CNY" WANT_PAYABLE="-6.00 CNY" WANT_CLEARING="6.00 CNY" WANT_NET="6.00 CNY" \
  SEARCH_TXN="$txn" SEARCH_ORDER=D-2 HOSTILE_NOTE="$note" \
  node "$here/../browser/console.mjs" "$A" "$shots" > browser.out 2> browser.err
rc=$?
check "the browser: every page as each role" "$rc" 0
[ "$rc" -eq 0 ] || { cat browser.err; head -c 3000 browser.out; echo; }
check "audited under alice's name, her note as she wrote it" \
  "$(sql "SELECT action || '|' || actor || '|' || note FROM alert_action ORDER BY seq" | head -1)" "acknowledge|alice|$note"
check "then resolved by her" "$(sql "SELECT state || '|' || state_by FROM alert")" "resolved|alice"
# five wrong passwords lock the name for a minute (the right one too) — and
# the answer is a wrong password's, the one an unknown name gets (issue 44)
for _ in 1 2 3 4 5; do login jar.bad nope -o /dev/null; done
check "after five wrong passwords: the right one refused as a wrong one (401)" "$(login jar.bad "$(cat alice.pw)" -o /dev/null -w '%{http_code}')" 401
for s in overview money search alerts report operators; do
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
