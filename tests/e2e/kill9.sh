#!/usr/bin/env bash
# kill9.sh PAYONCE BACKEND — kill -9 under load (issue 11's reliability
# suite). Eight `payonce sim pay` processes deliver N orders (default 160, one
# every 80 ms each), each 3 times at
# once, re-signing every attempt and retrying on the channel's schedule
# (compressed), while the gateway is SIGKILLed at random moments and
# restarted on the same port, PAYONCE_KILLS times (default 6; `make soak`:
# 100). Afterwards every payment is credited exactly once and nothing else,
# every delivery was finally acknowledged, and `payonce verify` is clean.
set -uo pipefail
. "$(dirname "$0")/lib.sh" "$1" "$2" kill9
KILLS=${PAYONCE_KILLS:-6}
N=${PAYONCE_KILL_ORDERS:-160}
tenant_with_sim || exit 1
make_orders K 1 "$N" 100 || exit 1
server_pid=
start_server() { # start_server PORT
  : > server.out
  "$BIN" serve --listen "127.0.0.1:$1" --insecure-dev > server.out 2>> server.log & server_pid=$!
  bg_pids+=("$server_pid")
  port=$(port_of server.out)
}
start_server 0
[ -n "$port" ] || { cat server.log; exit 1; }
# The load: 8 simulators, N/8 orders each (at most 64), 3 concurrent copies per order.
sims=()
for s in 0 1 2 3 4 5 6 7; do
  args=()
  for i in $(seq $((s + 1)) 8 "$N"); do args+=(--order "K-$i:$((100 + i))"); done
  "$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --channel wechatpay \
    "${args[@]}" --copies 3 --concurrent --time-factor 1000 --max-attempts 40 --pace-ms 80 \
    --history "history-$s.jsonl" > "sim-$s.out" 2>&1 &
  sims+=($!); bg_pids+=($!)
done
kills=0
while [ "$kills" -lt "$KILLS" ]; do
  sleep "0.$(printf %02d $(( RANDOM % 20 + 5 )))" # 0.05-0.24 s
  kill -9 "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null
  kills=$((kills + 1))
  for _ in 1 2 3 4 5; do start_server "$port"; [ -n "$port" ] && break; sleep 0.2; done
done
for p in "${sims[@]}"; do wait "$p"; done
summary() { sed -n 's/^sim: //p' "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
acked=0; unacked=0; attempts=0
for s in 0 1 2 3 4 5 6 7; do
  acked=$((acked + $(summary sim-$s.out acked))); unacked=$((unacked + $(summary sim-$s.out unacked)))
  attempts=$((attempts + $(summary sim-$s.out attempts)))
done
check "every delivery finally acknowledged" "$acked/$unacked" "$((3 * N))/0"
check "the kills hit deliveries in flight (attempts > deliveries)" "$(( attempts > 3 * N ))" 1
credits=$("$BIN" ledger balances --tenant t1 --json | python3 -c "import json,sys; print({b['account']:b['balance'] for b in json.load(sys.stdin)['balances']}.get('channel_clearing:wechatpay',0))")
check "clearing balance: each payment once" "$credits" $(( 100 * N + N * (N + 1) / 2 ))
# one listing of the PAID orders (not an `order show` per order: a process each)
paid=$("$BIN" order list --tenant t1 --status PAID --limit 10000 --json |
  python3 -c 'import json,sys; d=json.load(sys.stdin); assert not d["has_more"]; print(len({o["out_trade_no"] for o in d["data"] if o["out_trade_no"].startswith("K-")}))')
check "every order PAID" "$paid" "$N"
check "verify" "$("$BIN" verify >/dev/null 2>&1; echo $?)" 0
# The callback record across the kills: its chains whole, nothing left
# unsealed, and a record for every acked delivery (its batch committed it;
# a kill between a commit and its ack leaves a record more)
read -r aok arecords aunsealed <<< "$(audit_settled)"
check "audit: the chain whole after the kills, all sealed" "$aok $aunsealed" "True 0"
check "audit: a record for every acked delivery" "$(( arecords >= acked ))" 1
# The history checker (issue 28 item 2): every attempt of the 8
# simulators and its answer, the channel's payments, the database.
hargs=(); for s in 0 1 2 3 4 5 6 7; do hargs+=(--history "history-$s.jsonl"); done
history_check "kill9-$BACKEND" --tenant t1 --payments sim/payments.jsonl "${hargs[@]}" > history.out
check "history checker: clean across the kills" "$?" 0
sed -n 1p history.out
kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null
fig "# kill9[$BACKEND]: $kills kill -9 of the gateway under 8 simulators, $N orders x 3 concurrent copies -> $attempts attempts for $acked acked deliveries, $paid paid, each credited once, verify clean; $arecords callback records, their chain whole"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
