#!/usr/bin/env bash
# history_mutant.sh PAYONCE PAYONCE_MUTANT BACKEND — the history checker
# catches a planted bug (issue 28 item 2). The same load twice on one
# database: 8 orders paid through `payonce serve`, each callback delivered
# 3 times at once, the channel's side recorded (`sim pay --history`): the
# checker finds it clean. Then 8 more through payonce_mutant (tests/
# CMakeLists.txt: the same sources with PO_MUTANT_DOUBLE_CREDIT — a payment
# keyed by the delivery's nonce, the state guard off), whose race credits a
# payment once per delivery: the checker fails and its report names each
# of those payments, and none of the first eight.
set -uo pipefail
MUTANT=$(realpath "${2:?payonce_mutant binary}")
. "$(dirname "$0")/lib.sh" "$1" "$3" history_mutant
tenant_with_sim || exit 1
make_orders H 1 16 500 || exit 1
run_load() { # run_load BINARY FIRST LAST HISTORY
  "$1" serve --listen 127.0.0.1:0 --insecure-dev > server.out 2> server.log & local pid=$!
  bg_pids+=("$pid")
  local port
  port=$(port_of server.out)
  [ -n "$port" ] || { cat server.log; exit 1; }
  local args=()
  for i in $(seq "$2" "$3"); do args+=(--order "H-$i:$((500 + i))"); done
  "$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --channel wechatpay \
    "${args[@]}" --copies 3 --concurrent --time-factor 1000 --max-attempts 10 --history "$4" > "sim-$2.out" 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null
}
run_load "$BIN" 1 8 real.jsonl
history_check "mutant-control-$BACKEND" --tenant t1 --payments sim/payments.jsonl --history real.jsonl > control.out
check "the real engine's history is clean" "$?" 0
run_load "$MUTANT" 9 16 mutant.jsonl
history_check "mutant-$BACKEND" --tenant t1 --payments sim/payments.jsonl --history real.jsonl \
  --history mutant.jsonl > mutant.out
check "the mutant's history is refused" "$?" 1
report=${PAYONCE_REPORTS:-$work}/history-mutant-$BACKEND.json
# each of H-9..H-16 named as credited more than once, none of H-1..H-8
named=$(python3 -c "
import json, re, sys
r = json.load(open('$report'))
v = r['checks']['no_double_credit']['listed'] + r['checks']['acked_credited_once']['listed']
twice = {m.group(1) for s in v for m in [re.match(r'order (H-\d+) credited ([2-9]) times', s)] if m}
acked = {m.group(1) for s in v for m in [re.match(r'payment (H-\d+) ', s)] if m}
print(len(twice), len(acked), sum(int(n.split('-')[1]) <= 8 for n in twice | acked))")
check "the report names each double-credited payment (credited twice or more, acked)" "$named" "8 8 0"
check "the mutant credited more than the channel paid (clearing above the payments)" \
  "$(python3 -c "import json; r = json.load(open('$report')); print(r['credits'] > 16)")" True
cat control.out mutant.out | head -12
fig "# history_mutant[$BACKEND]: the history checker clean on the real engine (8 payments x 3 concurrent deliveries); on the mutant it named all 8 double-credited payments ($(python3 -c "import json; print(json.load(open('$report'))['credits'])") credits for 16 payments)"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
