#!/usr/bin/env bash
# test.sh — the whole suite, as `make test` and CI run it:
#   1. Debian packages (scripts/deps.sh), lint for banned functions
#   2. AddressSanitizer + UBSan build; every test on SQLite and PostgreSQL
#   3. ThreadSanitizer build; the thread races on both backends
#   4. the libFuzzer targets, each for a bounded time (PAYONCE_FUZZ_SECONDS)
#   5. the release build (`make build`, -O2: what `make demo` uses), the
#      allocation-failure sweeps in it (they replace malloc, which the
#      sanitizers own) and bench_smoke's every scenario (the ASan stage
#      runs eight of them), the demo with it (its output compared with the
#      README's sample), then the demo again under ASan
#   6. the operator's console in a real headless browser (Chromium +
#      playwright-core): the release build on SQLite, the ASan build on
#      PostgreSQL; its screenshots regenerate docs/img/console-*.png
#   7. the Debian package (`make deb`) installed, run and purged (as root)
# A throwaway PostgreSQL 15 is started for the run (scripts/pg.sh) and
# stopped on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc 2>/dev/null || echo 2)

scripts/deps.sh
# The tests run the interpreters deps.sh installed: a python3 found earlier
# on PATH is not Debian's (on a machine with pyenv its shim took 0.3 s to
# start against 0.04 s, and the shell tests start it for most checks:
# `cli` alone 107 -> 78 s).
export PATH=/usr/bin:$PATH
scripts/lint.sh

pgdir=$(mktemp -d /tmp/payonce-pg.XXXXXX)
# Every temporary file of the run (databases, keys, logs of passing tests,
# fuzzing scratch) goes under one TMPDIR, removed on exit — kept, and named,
# when the run failed.
tmp=$(mktemp -d /tmp/payonce-test.XXXXXX); chmod 755 "$tmp"
cleanup() {
  rc=$?
  "$root/scripts/pg.sh" stop "$pgdir" >/dev/null || true
  rm -rf "$pgdir"
  if [ "$rc" -eq 0 ]; then rm -rf "$tmp"; else echo "test: failed; temporary files kept in $tmp"; fi
}
trap cleanup EXIT
export TMPDIR=$tmp
PAYONCE_TEST_PG=$(scripts/pg.sh start "$pgdir")
export PAYONCE_TEST_PG PAYONCE_REQUIRE_PG=1
echo "test: PostgreSQL for tests at $PAYONCE_TEST_PG"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

echo "== ASan + UBSan build (a few minutes; quiet until the tests start)"
cmake -S . -B build-asan -DPO_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug -DPO_WERROR=ON >/dev/null
cmake --build build-asan -j"$jobs" >/dev/null
export PAYONCE_FIGURES=$root/build-asan/figures.txt; rm -f "$PAYONCE_FIGURES"
# the history checker's reports (issue 28 item 2), one JSON per suite: the
# run's artifact, kept whether the suite passed or not
export PAYONCE_REPORTS=$root/build-asan/reports; rm -rf "$PAYONCE_REPORTS"
# two at a time (most tests wait on servers, sockets and sleeps more than they
# compute), the cluster's test among them (tests/CMakeLists.txt says why)
ctest --test-dir build-asan --output-on-failure -j"$jobs"
echo "== figures (races, seed incident, fault injection)"
cat "$PAYONCE_FIGURES"
echo "== the history checker's reports (build-asan/reports; mutant-*: the planted bug, refused on purpose)"
python3 - "$PAYONCE_REPORTS"/history-*.json <<'PY'
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    bad = sum(c["violations"] for c in r["checks"].values())
    print("%-30s %-8s %4d payments sent, %5d attempts, %4d credits, %3d checks, %d violations"
          % (r["name"], "clean" if r["ok"] else "VIOLATED", r["payments_sent"], r["attempts"],
             r["credits"], sum(c["checked"] for c in r["checks"].values()), bad))
PY

echo "== ThreadSanitizer build (a few minutes; quiet until the tests start)"
cmake -S . -B build-tsan -DPO_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug -DPO_WERROR=ON >/dev/null
cmake --build build-tsan -j"$jobs" >/dev/null
export PAYONCE_FIGURES=$root/build-tsan/figures.txt; rm -f "$PAYONCE_FIGURES"
ctest --test-dir build-tsan --output-on-failure -j"$jobs"
cat "$PAYONCE_FIGURES"

echo "== fuzz targets (libFuzzer, ASan + UBSan; clang build first), 8 targets: kept crash inputs and the committed corpus replayed, then ${PAYONCE_FUZZ_SECONDS:-10} s each; a line per target with its coverage"
scripts/fuzz.sh "${PAYONCE_FUZZ_SECONDS:-10}"
echo "== fuzzing keeps what it learns: a planted crash found, kept and replayed; coverage merged back within bounds"
tests/e2e/fuzz_keep.sh

echo "== release build (make build) and the demo with it, as 'make demo' runs it"
make build PO_WERROR=ON | tee build-progress.log
# the build speaks while it works (a fresh machine's first build is long)
grep -Eq '^payonce: building build/ on [0-9]+ cores:.* [0-9]+% \([0-9]+ s\)$' build-progress.log \
  || { echo "make build printed no progress line"; exit 1; }
rm -f build-progress.log
echo "== allocation failures (the k-th allocation fails, every k; release build) and bench_smoke's whole run (every scenario; the ASan stage ran eight)"
export PAYONCE_FIGURES=$root/build/figures.txt; rm -f "$PAYONCE_FIGURES"
ctest --test-dir build -L 'alloc|bench' --output-on-failure -j"$jobs"
cat "$PAYONCE_FIGURES"
scripts/demo.sh | tee build/demo.log
python3 tests/e2e/readme_demo.py README.md build/demo.log
echo "== the demo again under AddressSanitizer"
PAYONCE_BIN=$root/build-asan/payonce scripts/demo.sh > build-asan/demo.log 2>&1 || { cat build-asan/demo.log; exit 1; }
tail -n 1 build-asan/demo.log
echo "== the operator's console in Debian's Chromium (playwright-core): release build on SQLite, ASan build on PostgreSQL; screenshots docs/img/console-*.png"
tests/e2e/console_test.sh build/payonce sqlite
CONSOLE_SHOTS=$tmp/console-pg tests/e2e/console_test.sh build-asan/payonce postgres
echo "== the Debian package (make deb): installed with dpkg -i, migrate and serve from its config, purged"
tests/e2e/deb_test.sh
# Servers and simulators stop by themselves: none of this run's may be left.
sleep 1
left=$(pgrep -af "$root/build[a-z-]*/payonce" || true)
if [ -n "$left" ]; then echo "test: processes left running:"; echo "$left"; exit 1; fi
echo "test: all suites passed"
