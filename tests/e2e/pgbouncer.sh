#!/usr/bin/env bash
# pgbouncer.sh PAYONCE TEST_RACE — payonce through a real PgBouncer (Debian's
# 1.18) in transaction pooling mode, with payonce_pooling=transaction in the
# database URL (docs/scaling.md): the engine's race test, then the gateway
# (three copies of each callback at once) over PgBouncer — every payment
# credited once, verify clean — with fewer server connections than clients.
# Needs PAYONCE_TEST_PG (the server behind PgBouncer). The race runs
# PAYONCE_PGBOUNCER_ROUNDS rounds (default 200; `make soak`: 1,000, which
# make test ran until issue 46: each round is the same race again, through
# the same pooled connections, and more of them is the soak's job).
set -uo pipefail
TEST_RACE=$(realpath "${2:?test_race binary}")
command -v pgbouncer >/dev/null || {
  [ -n "${PAYONCE_REQUIRE_PG:-}" ] && { echo "FAIL: pgbouncer is not installed (scripts/deps.sh)"; exit 1; }
  echo "skipping: pgbouncer is not installed"; exit 77; }
. "$(dirname "$0")/lib.sh" "$1" postgres pgbouncer
chmod 755 "$work"
hostport=${PAYONCE_TEST_PG#*@}; hostport=${hostport%%/*}
bport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo '"postgres" ""' > userlist.txt
cat > pgbouncer.ini <<EOF
[databases]
* = host=${hostport%:*} port=${hostport#*:}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $work/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = 6
max_client_conn = 400
ignore_startup_parameters = extra_float_digits
logfile = $work/pgbouncer.log
EOF
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$work" "$work"/pgbouncer.ini "$work"/userlist.txt; fi
if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- pgbouncer pgbouncer.ini & else pgbouncer pgbouncer.ini & fi
bg_pids+=($!)
for _ in $(seq 1 100); do psql -X -q "postgresql://postgres@127.0.0.1:$bport/pgbouncer" -c "SHOW VERSION" >/dev/null 2>&1 && break; sleep 0.1; done
admin() { psql -X -At "postgresql://postgres@127.0.0.1:$bport/pgbouncer" -c "$1"; }
check "pgbouncer is up in transaction mode" "$(admin 'SHOW CONFIG' | grep '^pool_mode|' | cut -d'|' -f2)" transaction

# 1. the engine's race test through PgBouncer (its databases made through it too)
PAYONCE_TEST_PG="postgresql://postgres@127.0.0.1:$bport/postgres?payonce_pooling=transaction" \
  CMOCKA_MESSAGE_OUTPUT=stdout "$TEST_RACE" postgres --rounds "${PAYONCE_PGBOUNCER_ROUNDS:-200}" > race.out 2>&1
rc=$?
check "test_race through PgBouncer (${PAYONCE_PGBOUNCER_ROUNDS:-200} rounds)" "$rc" 0
[ "$rc" -eq 0 ] || tail -30 race.out

# 2. the gateway through PgBouncer
export PAYONCE_DB="postgresql://postgres@127.0.0.1:$bport/$dbname?payonce_pooling=transaction"
"$BIN" migrate >/dev/null && "$BIN" tenant add --tenant t1 >/dev/null &&
  "$BIN" merchant add --tenant t1 --merchant m1 >/dev/null || exit 1
"$BIN" sim keys --dir sim --tenant t1 --mode pubkey > keys.out || exit 1
grep -A20 '^Configure' keys.out | grep -E '^payonce|^  ' | sed "s#^payonce #$BIN #" | bash >/dev/null || exit 1
N=60
make_orders B 1 "$N" 100 || exit 1
"$BIN" serve --listen 127.0.0.1:0 --insecure-dev --pool-size 16 > serve.out 2> serve.log & bg_pids+=($!)
port=$(port_of serve.out)
sims=()
for s in 0 1 2 3; do
  args=(); for i in $(seq $((s + 1)) 4 "$N"); do args+=(--order "B-$i:$((100 + i))"); done
  "$BIN" sim pay --dir sim --notify-url "http://127.0.0.1:$port/notify/wechatpay/t1" "${args[@]}" \
    --copies 3 --concurrent --time-factor 1000 --max-attempts 20 > "sim-$s.out" 2>&1 & sims+=($!)
done
for p in "${sims[@]}"; do wait "$p"; done
acked=0; for s in 0 1 2 3; do acked=$((acked + $(sed -n 's/^sim: //p' "sim-$s.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["acked"])'))); done
check "through PgBouncer: every copy acked" "$acked" $((3 * N))
credits=$("$BIN" ledger balances --tenant t1 --json | python3 -c "import json,sys; print({b['account']:b['balance'] for b in json.load(sys.stdin)['balances']}.get('channel_clearing:wechatpay',0))")
check "through PgBouncer: each payment credited once" "$credits" $((100 * N + N * (N + 1) / 2))
check "through PgBouncer: verify" "$("$BIN" verify >/dev/null 2>&1; echo $?)" 0
check "no named-statement errors in the gateway's log" "$(grep -c 'prepared statement' serve.log)" 0
# the pool at work: the gateway's 16 connections (and the committer's) over at most 6 server ones
clients=$(admin 'SHOW CLIENTS' | grep -c "|$dbname|")
servers=$(admin 'SHOW SERVERS' | grep -c "|$dbname|")
check "more clients than server connections ($clients over $servers)" "$((clients > servers && servers <= 6))" 1
fig "# pgbouncer: test_race (${PAYONCE_PGBOUNCER_ROUNDS:-200} rounds) and $N payments x 3 concurrent copies through PgBouncer 1.18 in transaction mode ($clients client connections over $servers server connections): each credited once, verify clean"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
