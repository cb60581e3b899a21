#!/usr/bin/env bash
# kill9.sh PAYONCE BACKEND — kill -9 under load (issue 11's reliability
# suite). Eight `payonce sim pay` processes deliver N orders (default 160, one
# every 80 ms each), each 3 times at
# once, re-signing every attempt and retrying on the channel's schedule
# (compressed), while the gateway is SIGKILLed at random moments and
# restarted on the same port, PAYONCE_KILLS times (default 6; `make soak`:
# 100). Afterwards every payment is credited exactly once and nothing else,
# every delivery was finally acknowledged, and `payonce verify` is clean.
#
# The callback record (issue 48): the history checker matches every acked
# answer to its record by the answer's X-Request-Id. An answer a batch gave
# has its record (the batch committed it before the answer); a duplicate
# answered from the committer's memory ("; remembered") gets its record in
# the next batch, after the answer, so it may lack one only when a kill
# came right after it (the kills' times are the checker's --outages). A
# second, shorter phase runs the gateway with --known-events 0 — no answer
# from memory, so every acked delivery must have its record.
set -uo pipefail
. "$(dirname "$0")/lib.sh" "$1" "$2" kill9
KILLS=${PAYONCE_KILLS:-6}
N=${PAYONCE_KILL_ORDERS:-160}
tenant_with_sim || exit 1
server_pid=
port=0
start_server() { # start_server PORT [SERVE ARGS...]
  local p=$1; shift
  : > server.out
  "$BIN" serve --listen "127.0.0.1:$p" --insecure-dev "$@" > server.out 2>> server.log & server_pid=$!
  bg_pids+=("$server_pid")
  port=$(port_of server.out)
}
now_ms() { date +%s%3N; }
summary() { sed -n 's/^sim: //p' "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
# phase PREFIX ORDERS KILLS [SERVE ARGS...]: orders PREFIX-1..ORDERS paid by
# 8 simulators (3 concurrent copies each) while the gateway, started with
# the serve args, is killed KILLS times; its outages in outages-PREFIX.txt,
# the simulators' histories in history-PREFIX-*.jsonl
phase() {
  local prefix=$1 n=$2 k=$3 s i
  shift 3
  make_orders "$prefix" 1 "$n" 100 || exit 1
  start_server "$port" "$@"
  [ -n "$port" ] || { cat server.log; exit 1; }
  local sims=()
  for s in 0 1 2 3 4 5 6 7; do
    local args=()
    for i in $(seq $((s + 1)) 8 "$n"); do args+=(--order "$prefix-$i:$((100 + i))"); done
    "$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --channel wechatpay \
      "${args[@]}" --copies 3 --concurrent --time-factor 1000 --max-attempts 40 --pace-ms 80 \
      --history "history-$prefix-$s.jsonl" > "sim-$prefix-$s.out" 2>&1 &
    sims+=($!); bg_pids+=($!)
  done
  local kills=0 from
  : > "outages-$prefix.txt"
  while [ "$kills" -lt "$k" ]; do
    sleep "0.$(printf %02d $(( RANDOM % 20 + 5 )))" # 0.05-0.24 s
    from=$(now_ms)
    kill -9 "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null
    kills=$((kills + 1))
    for _ in 1 2 3 4 5; do start_server "$port" "$@"; [ -n "$port" ] && break; sleep 0.2; done
    echo "$from $(now_ms)" >> "outages-$prefix.txt"
  done
  for p in "${sims[@]}"; do wait "$p"; done
  acked=0; unacked=0; attempts=0
  for s in 0 1 2 3 4 5 6 7; do
    acked=$((acked + $(summary "sim-$prefix-$s.out" acked))); unacked=$((unacked + $(summary "sim-$prefix-$s.out" unacked)))
    attempts=$((attempts + $(summary "sim-$prefix-$s.out" attempts)))
  done
  check "$prefix: every delivery finally acknowledged" "$acked/$unacked" "$((3 * n))/0"
  check "$prefix: the kills hit deliveries in flight (attempts > deliveries)" "$(( attempts > 3 * n ))" 1
  paid=$("$BIN" order list --tenant t1 --status PAID --limit 10000 --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin); assert not d["has_more"]; print(len({o["out_trade_no"] for o in d["data"] if o["out_trade_no"].startswith(sys.argv[1] + "-")}))' "$prefix")
  check "$prefix: every order PAID" "$paid" "$n"
  kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null
}
# history PREFIX: the history checker over a phase's simulators and outages
history() {
  local prefix=$1 s hargs=()
  for s in 0 1 2 3 4 5 6 7; do hargs+=(--history "history-$prefix-$s.jsonl"); done
  history_check "kill9-$prefix-$BACKEND" --tenant t1 --payments sim/payments.jsonl --scope "$prefix-" \
    --outages "outages-$prefix.txt" "${hargs[@]}" > "history-$prefix.out"
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "${PAYONCE_REPORTS:-$work}/history-kill9-$1-$BACKEND.json" "$2"; }

phase K "$N" "$KILLS"
k_acked=$acked k_attempts=$attempts k_paid=$paid
N0=$(( N / 4 )); K0=$(( KILLS / 2 > 0 ? KILLS / 2 : 1 ))
phase Z "$N0" "$K0" --known-events 0

credits=$("$BIN" ledger balances --tenant t1 --json | python3 -c "import json,sys; print({b['account']:b['balance'] for b in json.load(sys.stdin)['balances']}.get('channel_clearing:wechatpay',0))")
check "clearing balance: each payment once" "$credits" $(( 100 * N + N * (N + 1) / 2 + 100 * N0 + N0 * (N0 + 1) / 2 ))
check "verify" "$("$BIN" verify >/dev/null 2>&1; echo $?)" 0
# The callback record across the kills: its chains whole, nothing left unsealed.
read -r aok arecords aunsealed <<< "$(audit_settled)"
check "audit: the chain whole after the kills, all sealed" "$aok $aunsealed" "True 0"
# The history checker (issue 28 item 2): every attempt of the 8 simulators
# and its answer, the channel's payments, the database — and each acked
# answer's record (issue 48).
history K
check "history checker: clean across the kills" "$?" 0
sed -n 1p history-K.out
history Z
check "history checker, --known-events 0: clean across the kills" "$?" 0
sed -n 1p history-Z.out
check "--known-events 0: no answer from memory" "$(field Z remembered)" 0
check "--known-events 0: every acked delivery's record checked" "$(field Z acked_answers)" "$((3 * N0))"
fig "# kill9[$BACKEND]: $KILLS kill -9 of the gateway under 8 simulators, $N orders x 3 concurrent copies -> $k_attempts attempts for $k_acked acked deliveries, $k_paid paid, each credited once, verify clean; $(field K remembered) answered from memory, $(field K unrecorded_near_outage) of them without a record (each within 1 s of a kill); then $K0 kills with --known-events 0 over $N0 orders: all $(field Z acked_answers) acked deliveries recorded; $arecords callback records, their chain whole"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
