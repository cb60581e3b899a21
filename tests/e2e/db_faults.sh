#!/usr/bin/env bash
# db_faults.sh PAYONCE — a sick database never makes payonce ack a callback
# it did not commit, never makes it miss the channel's deadline, and the
# gateway heals by itself (issue 11, finding 3). PostgreSQL only (its own
# throwaway cluster, so that it can be crashed), reached through
# tcp_proxy.py so that the path can go silent:
#   1. healthy: a payment is credited
#   2. the path goes silent (no RST) under 6 concurrent callbacks: every one
#      is answered FAIL (5xx) within the 5 s deadline, none acked
#   3. the path comes back: the channel's retries are credited, once each
#   4. PostgreSQL crashes (pg_ctl stop -m immediate): callbacks FAIL at once;
#      it restarts (recovery): the retries are credited
#   5. verify: every invariant holds, every payment credited exactly once
set -uo pipefail
. "$(dirname "$0")/lib.sh" "$1" postgres db_faults
here=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
root=$(realpath "$here/../..")
[ -n "${PAYONCE_TEST_PG:-}" ] || { echo "db_faults: needs PostgreSQL (PAYONCE_TEST_PG)"; exit 77; }
pgdir=$(mktemp -d /tmp/payonce-dbf-pg.XXXXXX)
pgsh() { (cd / && "$root/scripts/pg.sh" "$@"); }
direct=$(pgsh start "$pgdir") || exit 1
e2e_pg_cleanup() { pgsh stop "$pgdir" >/dev/null 2>&1; e2e_cleanup; }
trap e2e_pg_cleanup EXIT
pgport=$(echo "$direct" | sed -n 's#.*:\([0-9]*\)/postgres$#\1#p')
python3 "$here/tcp_proxy.py" "$pgport" proxy.port & proxy=$!; bg_pids+=($proxy)
for _ in $(seq 1 100); do [ -s proxy.port ] && break; sleep 0.05; done
export PAYONCE_DB="postgresql://postgres@127.0.0.1:$(cat proxy.port)/postgres"
"$BIN" migrate >/dev/null && "$BIN" tenant add --tenant t1 >/dev/null &&
  "$BIN" merchant add --tenant t1 --merchant m1 >/dev/null || exit 1
"$BIN" sim keys --dir sim --tenant t1 --mode pubkey > keys.out || exit 1
grep -A20 '^Configure' keys.out | grep -E '^payonce|^  ' | sed "s#^payonce #$BIN #" | bash >/dev/null 2>configure.err || { cat configure.err; exit 1; }
make_orders F 1 8 200 || exit 1
# t2: a tenant whose channel account is not loaded yet when the path goes
# silent (its first callback needs the database before the committer).
"$BIN" tenant add --tenant t2 >/dev/null && "$BIN" merchant add --tenant t2 --merchant m1 >/dev/null || exit 1
"$BIN" sim keys --dir sim2 --tenant t2 --mode pubkey > keys2.out || exit 1
grep -A20 '^Configure' keys2.out | grep -E '^payonce|^  ' | sed "s#^payonce #$BIN #" | bash >/dev/null 2>configure2.err || { cat configure2.err; exit 1; }
"$BIN" order create --tenant t2 --merchant m1 --out-trade-no G-1 --amount 333 >/dev/null || exit 1
"$BIN" serve --listen 127.0.0.1:0 --insecure-dev --callback-deadline-ms 3000 > server.out 2> server.log & bg_pids+=($!)
port=$(port_of server.out)
[ -n "$port" ] || { cat server.log; exit 1; }
summary() { sed -n 's/^sim: //p' "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
status() { "$BIN" order show --tenant t1 --out-trade-no "$1" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null; }
pay() { # pay OUT_FILE MAX_ATTEMPTS ORDER...
  local out=$1 k=$2; shift 2
  local args=(); for o in "$@"; do args+=(--order "$o:$((200 + ${o#F-}))"); done
  "$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" --channel wechatpay \
    "${args[@]}" --max-attempts "$k" --deadline-ms 5000 --time-factor 1000 --concurrent > "$out" 2>&1
}

# 1. healthy
pay healthy.out 1 F-1
check "healthy: acked" "$(summary healthy.out acked)" 1

# 2. silent path: one attempt each for 6 orders, concurrently
kill -USR1 $proxy
sleep 0.2
t0=$(date +%s%N)
pay silent.out 1 F-2 F-3 F-4 F-5 F-6 F-7
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "silent path: none acked" "$(summary silent.out acked)" 0
check "silent path: every callback answered FAIL (5xx) within the 5 s deadline" "$(summary silent.out answered_fail)" 6
check "silent path: no callback left without an answer" "$(summary silent.out no_answer)" 0
"$BIN" sim pay --dir sim2 --notify-url "http://127.0.0.1:$port/notify/wechatpay/t2" --channel wechatpay \
  --order G-1:333 --max-attempts 1 --deadline-ms 5000 > silent2.out 2>&1
check "silent path: a tenant's first callback (its account to load) answered FAIL in time" \
  "$(summary silent2.out answered_fail)/$(summary silent2.out no_answer)" 1/0

# 3. the path comes back; the channel retries
kill -USR2 $proxy
sleep 0.5
pay back.out 10 F-2 F-3 F-4 F-5 F-6 F-7
check "path back: every retry acked" "$(summary back.out acked)" 6
paid=0; for i in 2 3 4 5 6 7; do [ "$(status F-$i)" = PAID ] && paid=$((paid+1)); done
check "path back: all six paid" "$paid" 6
"$BIN" sim pay --dir sim2 --notify-url "http://127.0.0.1:$port/notify/wechatpay/t2" --channel wechatpay \
  --order G-1:333 --max-attempts 10 --time-factor 1000 > back2.out 2>&1
check "path back: t2's payment credited" "$("$BIN" order show --tenant t2 --out-trade-no G-1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')" PAID

# 4. PostgreSQL crashes and restarts
pgsh crash "$pgdir"
pay crashed.out 1 F-8
check "database down: not acked" "$(summary crashed.out acked)" 0
check "database down: answered FAIL (5xx)" "$(summary crashed.out answered_fail)" 1
pgsh restart "$pgdir"
pay restarted.out 10 F-8
check "database back: the retry is acked" "$(summary restarted.out acked)" 1
check "database back: paid" "$(status F-8)" PAID

# 5. exactly once
credits=$("$BIN" ledger balances --tenant t1 --json | python3 -c "import json,sys; print({b['account']:b['balance'] for b in json.load(sys.stdin)['balances']}.get('channel_clearing:wechatpay',0))")
check "clearing balance = the 8 payments once each" "$credits" $(( 8 * 200 + 36 ))
check "verify" "$("$BIN" verify >/dev/null 2>&1; echo $?)" 0
check "the silent path was logged" "$(grep -c 'abandoning the session\|deadline' server.log | awk '{print ($1 >= 1)}')" 1
fig "# db-faults[postgres]: silent path -> $(summary silent.out answered_fail)/6 callbacks answered FAIL at the 3 s deadline (one after another: ${ms} ms), 0 acked; path back -> 6 credited once; crash + restart -> FAIL then credited; verify clean"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
