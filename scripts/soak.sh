#!/usr/bin/env bash
# soak.sh — the long versions of the reliability suite (`make soak`), on the
# release build, against a throwaway PostgreSQL and SQLite:
#   kill -9 under load      PAYONCE_KILLS (default 100) kills per store
#   seeded histories        PAYONCE_SEEDS (default 100000) on SQLite,
#                           PAYONCE_PG_SEEDS (default 20000) on PostgreSQL
#   fuzzing                 each target in rounds of 60 s until a round adds
#                           under 1% new features (at most PAYONCE_FUZZ_SECONDS,
#                           default 900), coverage reported, what gained
#                           coverage merged into tests/fuzz/corpus (commit it)
#   the races' other modes  test_race --mode nolayers, refund and share,
#                           PAYONCE_RACE_ROUNDS (default 1000) rounds each per
#                           store: `make test` runs 100 of each (300 until
#                           issue 46) — each round is the same race again, so
#                           more rounds are more chances
#   the race through PgBouncer  tests/e2e/pgbouncer.sh, 1,000 rounds
#                           (PAYONCE_PGBOUNCER_ROUNDS; `make test`: 200)
#   the cluster, asynchronous   tests/e2e/cluster.sh with PAYONCE_CLUSTER_SYNC=false:
#                           what a primary's death loses without synchronous
#                           replication (docs/scaling.md)
# Hours, not minutes: not part of `make test`. Prints the figures at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/deps.sh
pgdir=$(mktemp -d /tmp/payonce-soak-pg.XXXXXX)
cleanup() { "$root/scripts/pg.sh" stop "$pgdir" || true; }
trap cleanup EXIT
PAYONCE_TEST_PG=$(scripts/pg.sh start "$pgdir")
export PAYONCE_TEST_PG PAYONCE_REQUIRE_PG=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
export PAYONCE_FIGURES=$root/build/soak-figures.txt; rm -f "$PAYONCE_FIGURES"
export PAYONCE_KILLS=${PAYONCE_KILLS:-100}
for b in sqlite postgres; do tests/e2e/kill9.sh build/payonce "$b"; done
PAYONCE_SEEDS=${PAYONCE_SEEDS:-100000} build/tests/test_history sqlite
PAYONCE_SEEDS=${PAYONCE_PG_SEEDS:-20000} build/tests/test_history postgres
rounds=${PAYONCE_RACE_ROUNDS:-1000}
for b in sqlite postgres; do
  for m in nolayers refund share; do
    build/tests/test_race "$b" --threads 16 --procs 4 --rounds "$rounds" --mode "$m"
  done
done
PAYONCE_PGBOUNCER_ROUNDS=${PAYONCE_PGBOUNCER_ROUNDS:-1000} tests/e2e/pgbouncer.sh build/payonce build/tests/test_race
scripts/fuzz.sh --plateau 60 "${PAYONCE_FUZZ_SECONDS:-900}" | tee -a "$PAYONCE_FIGURES"
PAYONCE_CLUSTER_SYNC=false PAYONCE_CLUSTER_ONCE_ORDERS=240 tests/e2e/cluster.sh build/payonce
echo "== soak figures"
cat "$PAYONCE_FIGURES"
