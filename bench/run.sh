#!/usr/bin/env bash
# bench/run.sh — `make bench`: `payonce bench` on a fresh SQLite file and on
# PostgreSQL with production durability, in one run on this machine.
#   PAYONCE_BENCH_PG   an EMPTY PostgreSQL database to use instead of the
#                      throwaway server this script starts (initdb + pg_ctl
#                      in a temporary directory, fsync=on,
#                      synchronous_commit=on, shared_buffers=1GB,
#                      pg_stat_statements preloaded (the statements per
#                      credit of the work table), as a
#                      non-root user, on a free loopback port; stopped and
#                      removed at the end)
#   BENCH_ORDERS       payments per scenario (default 10000)
#   BENCH_ARGS         more options for `payonce bench` (e.g. --committers 2)
# Results: the tables on stdout, JSON in bench/results/. See
# docs/performance.md for the method and how to read them.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/build/payonce
out=$root/bench/results
orders=${BENCH_ORDERS:-10000}
mkdir -p "$out"
# shellcheck disable=SC2086
"$bin" bench --orders "$orders" --out "$out" ${BENCH_ARGS:-}
echo
if [ -n "${PAYONCE_BENCH_PG:-}" ]; then
  # shellcheck disable=SC2086
  "$bin" bench --db "$PAYONCE_BENCH_PG" --orders "$orders" --out "$out" ${BENCH_ARGS:-}
  exit 0
fi
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
if [ ! -x "$bindir/pg_ctl" ]; then
  echo "bench: PostgreSQL server not installed (scripts/deps.sh installs it); SQLite only"
  exit 0
fi
pgdir=$(mktemp -d /tmp/payonce-bench-pg.XXXXXX)
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  [ -d "$pgdir/data" ] && as_pg "$bindir/pg_ctl" -D "$pgdir/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$pgdir"
}
trap cleanup EXIT
[ "$(id -u)" -eq 0 ] && chown postgres: "$pgdir"
as_pg "$bindir/initdb" -D "$pgdir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
  >"$pgdir/initdb.log" 2>&1 || { cat "$pgdir/initdb.log"; exit 1; }
started=
for _ in 1 2 3 4 5; do
  port=$(( (RANDOM % 20000) + 30000 ))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
  # Production durability: every commit is flushed to disk before it returns.
  if as_pg "$bindir/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $pgdir -c max_connections=300 \
          -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c shared_buffers=1GB \
          -c shared_preload_libraries=pg_stat_statements" \
      >/dev/null; then started=1; break; fi
done
[ -n "$started" ] || { tail -n 20 "$pgdir/server.log"; exit 1; }
psql -q "postgresql://postgres@127.0.0.1:$port/postgres" -c "CREATE DATABASE payonce_bench"
# shellcheck disable=SC2086
"$bin" bench --db "postgresql://postgres@127.0.0.1:$port/payonce_bench" --orders "$orders" \
  --out "$out" ${BENCH_ARGS:-}
