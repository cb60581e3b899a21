#!/usr/bin/env bash
# bench/run.sh — `make bench`: the benchmarks on a fresh SQLite database and,
# when PAYONCE_BENCH_PG names an empty PostgreSQL database, on it too.
# Prints their conditions and results; see bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/payonce-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The gateway's access log (one line per request) goes to a file, not the terminal.
build/bench_api "sqlite:$work/bench.db" "${BENCH_REQUESTS:-2000}" "${BENCH_CLIENTS:-8}" 2>"$work/sqlite.log" ||
  { tail -n 20 "$work/sqlite.log"; exit 1; }
if [ -n "${PAYONCE_BENCH_PG:-}" ]; then
  build/bench_api "$PAYONCE_BENCH_PG" "${BENCH_REQUESTS:-2000}" "${BENCH_CLIENTS:-8}" 2>"$work/pg.log" ||
    { tail -n 20 "$work/pg.log"; exit 1; }
fi
