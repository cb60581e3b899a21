#!/usr/bin/env bash
# slow_clients.sh PAYONCE — slow clients cannot starve anyone (issue 11,
# finding 1). While slow_clients.py runs its attacks — 300 connections from
# one address sending a request head one line a second, 20 whose body comes
# one byte a second, one declaring a 1 GB body — honest traffic from another
# address is served: /healthz answers and a WeChat Pay callback is credited.
# The per-address cap refuses most of the 300 at once, the head and body
# deadlines (absolute, not reset by a trickle) close the rest, the 1 GB
# body is answered 413 before a byte of it is read. SQLite.
set -uo pipefail
. "$(dirname "$0")/lib.sh" "$1" sqlite slow_clients
here=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
"$BIN" migrate >/dev/null && "$BIN" tenant add --tenant t1 >/dev/null &&
  "$BIN" merchant add --tenant t1 --merchant m1 >/dev/null || exit 1
"$BIN" sim keys --dir sim --tenant t1 --mode pubkey > keys.out || exit 1
grep -A20 '^Configure' keys.out | grep -E '^payonce|^  ' | sed "s#^payonce #$BIN #" | bash >/dev/null 2>configure.err || { cat configure.err; exit 1; }
"$BIN" order create --tenant t1 --merchant m1 --out-trade-no SLOW-1 --amount 321 >/dev/null || exit 1
"$BIN" serve --listen 127.0.0.1:0 --max-connections 256 --max-connections-per-ip 32 \
  --header-timeout 2 --body-timeout 2 --request-timeout 30 > server.out 2> server.log & bg_pids+=($!)
port=$(port_of server.out)
[ -n "$port" ] || { cat server.log; exit 1; }

python3 "$here/slow_clients.py" "$port" 8 > attack.json 2> attack.err & attack=$!
sleep 1.5
ok=0
for _ in 1 2 3 4 5; do
  [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")" = 200 ] && ok=$((ok+1))
  sleep 0.3
done
check "during the attack: /healthz answered" "$ok" 5
"$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --channel wechatpay \
  --order SLOW-1:321 --time-factor 1000 > pay.out 2>&1
check "during the attack: a WeChat Pay callback is credited" \
  "$("$BIN" order show --tenant t1 --out-trade-no SLOW-1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')" PAID
wait $attack
cat attack.err
r() { python3 -c "import json; print(json.load(open('attack.json'))['$1'])"; }
check "attack ran: 300 connections opened" "$(r opened)" 300
check "per-address cap: at most 32 (+1 per event thread) of them accepted" "$(( $(r accepted) <= 36 ))" 1
check "slow heads closed by the 2 s header deadline (lived <= 4.5 s of 8)" "$(python3 -c "print(int($(r heads_max_lived) <= 4.5))")" 1
check "slow bodies closed by the 2 s body deadline (lived <= 5 s of 8)" "$(python3 -c "print(int($(r bodies_max_lived) <= 5))")" 1
check "1 GB declared: 413 at once" "$(r big_status)" 413
check "1 GB declared: answered within 1 s" "$(( $(r big_ms) < 1000 ))" 1
check "the deadline closes were logged" "$(grep -c 'did not send their request in time' server.log | awk '{print ($1 >= 1)}')" 1
check "verify" "$("$BIN" verify >/dev/null 2>&1; echo $?)" 0
fig "# slow-clients: $(r opened) slowloris sockets ($(r accepted) accepted, closed after <= $(r heads_max_lived) s), 20 slow bodies (<= $(r bodies_max_lived) s), 1 GB body -> $(r big_status) in $(r big_ms) ms; healthz $ok/5 and a WeChat callback credited meanwhile"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
