#!/usr/bin/env bash
# dashboard_test.sh PAYONCE — issue 13 item 11: `payonce serve` with an
# admin token, a run made with the simulator (3 payments each delivered 3
# times, one callback with a tampered amount), then the dashboard in a real
# headless browser (tests/browser/dashboard.mjs: Debian's Chromium driven
# by playwright-core from npm): it shows this run's figures, and its
# Acknowledge button moves the alert (checked here in the database).
# The screenshot is kept: build/dashboard.png. Without the token /admin's
# data is 401. Also: every metric contrib/grafana-payonce.json plots is
# served by /metrics.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" sqlite dashboard
shot=${DASHBOARD_SCREENSHOT:-$here/../../build/dashboard.png}
node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' ||
  { echo "dashboard: Node.js 20 or later is needed (playwright-core)"; exit 1; }
[ -x /usr/bin/chromium ] || { echo "dashboard: /usr/bin/chromium missing (scripts/deps.sh installs it)"; exit 1; }
( cd "$here/../browser" && [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund >/dev/null ) ||
  { echo "dashboard: npm ci failed"; exit 1; }
"$BIN" migrate >/dev/null && "$BIN" tenant add --tenant t1 >/dev/null && "$BIN" merchant add --tenant t1 --merchant m1 >/dev/null || exit 1
"$BIN" sim keys --dir sim --tenant t1 > keys.out || exit 1
grep -A20 '^Configure' keys.out | grep -E '^payonce|^  ' | sed "s#^payonce #$BIN #" | bash >/dev/null 2>configure.err || { cat configure.err; exit 1; }
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > admin.token
"$BIN" serve --listen 127.0.0.1:0 --admin-token-file admin.token > server.out 2> server.log &
srv=$!; bg_pids+=("$srv")
for _ in $(seq 1 100); do grep -q "listening on port" server.out && break; sleep 0.05; done
port=$(sed -n 's/^listening on port //p' server.out)
[ -n "$port" ] || { echo "server did not start"; cat server.log; exit 1; }
for i in 1 2 3; do "$BIN" order create --tenant t1 --merchant m1 --out-trade-no "D-$i" --amount $((100 * i)) >/dev/null; done
"$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --order D-1:100 --order D-2:200 \
  --order D-3:300 --copies 3 --time-factor 1000 > pay.out 2>&1
check "the run: 3 credited" "$(sed -n 's/^sim: //p' pay.out | python3 -c 'import json,sys; print(json.load(sys.stdin)["credited"])')" 3
"$BIN" order create --tenant t1 --merchant m1 --out-trade-no D-4 --amount 400 >/dev/null
"$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --order D-4:400 --tamper-amount 1 \
  --time-factor 1000 > tamper.out 2>&1
check "without the token: 401" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/admin/api/summary")" 401
check "a wrong token: 401" "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer nope-nope-nope-nope' "http://127.0.0.1:$port/admin/api/summary")" 401
check "the page: no external resource allowed" "$(curl -s -D - -o /dev/null "http://127.0.0.1:$port/admin" | grep -ci "^content-security-policy: default-src 'none'")" 1
mkdir -p "$(dirname "$shot")"
WANT_APPLIED=3 WANT_DUPLICATES=6 WANT_BALANCE="-6.00 CNY" \
  node "$here/../browser/dashboard.mjs" "http://127.0.0.1:$port/admin" "$(cat admin.token)" "$shot" > browser.out 2> browser.err
rc=$?
check "the browser saw this run's figures and acknowledged the alert" "$rc" 0
[ "$rc" -eq 0 ] || { cat browser.err; cat browser.out; }
check "the alert acknowledged, by the dashboard, in the database" \
  "$("$BIN" alerts --tenant t1 --state acknowledged --json | python3 -c 'import json,sys; a=json.load(sys.stdin)["alerts"]; print(len(a), a[0]["state_by"] if a else "")')" "1 dashboard"
check "a screenshot kept" "$([ -s "$shot" ] && echo yes)" yes
fig "# dashboard: $(cat browser.out | head -c 300) — screenshot $shot"
# contrib/grafana-payonce.json: every metric it plots is one /metrics serves
# (series appear once counted: a forged callback and an API request first)
"$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --order D-1:100 --forge > forge.out 2>&1
curl -s -o /dev/null "http://127.0.0.1:$port/v1/balances"
curl -s "http://127.0.0.1:$port/metrics" > metrics.txt
missing=$(grep -o 'payonce_[a-z_]*' "$here/../../contrib/grafana-payonce.json" | sort -u | while read -r m; do
  grep -q "^$m" metrics.txt || echo "$m"; done)
check "the Grafana dashboard's metrics are all served" "${missing:-none}" none
check "the Grafana dashboard is JSON with panels" "$(python3 -c "import json; print(len(json.load(open('$here/../../contrib/grafana-payonce.json'))['panels']) > 0)")" True
kill -TERM "$srv"; wait "$srv" 2>/dev/null
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
