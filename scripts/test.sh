#!/usr/bin/env bash
# test.sh — the whole suite, as `make test` and CI run it:
#   1. Debian packages (scripts/deps.sh), lint for banned functions
#   2. AddressSanitizer + UBSan build; every test on SQLite and PostgreSQL
#   3. ThreadSanitizer build (begun beside stage 2's tests, which mostly
#      wait); the thread races on both backends
#   4. the libFuzzer targets (built beside stage 2's tests too), side by side,
#      each for a bounded time (PAYONCE_FUZZ_SECONDS)
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
# Each stage's heading says when it starts (seconds into the run), so a
# run's log shows where its time went (docs/testing.md keeps the figures).
stage() { echo "== $1 [at ${SECONDS} s]"; }
# A build in the background while a stage's tests wait (CMD: its configure
# command; then built one compiler at a time, and one such build at a time:
# they queue on a lock), its output in build-NAME.log; await_build NAME
# finishes it with all cores and fails the run when it did.
declare -A bg_build
background_build() { # NAME CMD...
  local name=$1; shift
  ( flock 9 && "$@" >/dev/null && cmake --build "build-$name" -j1 >/dev/null
  ) 9>>"$tmp/background-build.lock" >"build-$name.log" 2>&1 &
  bg_build[$name]=$!
  sleep 0.2 # the first queued takes the lock first
}
await_build() { # NAME
  wait "${bg_build[$1]}" && cmake --build "build-$1" -j"$jobs" >/dev/null 2>>"build-$1.log" ||
    { echo "test: the $1 build failed:"; cat "build-$1.log"; exit 1; }
  rm -f "build-$1.log"
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

stage "ASan + UBSan build (a few minutes; quiet until the tests start)"
cmake -S . -B build-asan -DPO_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug -DPO_WERROR=ON >/dev/null
cmake --build build-asan -j"$jobs" >/dev/null
stage "ASan + UBSan: the tests (CTest)"
export PAYONCE_FIGURES=$root/build-asan/figures.txt; rm -f "$PAYONCE_FIGURES"
# the history checker's reports (issue 28 item 2), one JSON per suite: the
# run's artifact, kept whether the suite passed or not
export PAYONCE_REPORTS=$root/build-asan/reports; rm -rf "$PAYONCE_REPORTS"
# The tests compute more than they wait: at four at a time (two cores) each
# took twice as long as at two, summed 3,343 s against 1,698, and the stage
# was as long (843 s against 850). What two at a time leaves idle (a
# quarter of the cores, by vmstat) goes to the TSan and then the fuzz build,
# one compiler, and to a third test at a time.
ctest_jobs=$((jobs + 1))
background_build tsan cmake -S . -B build-tsan -DPO_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug \
  -DPO_WERROR=ON
background_build fuzz env CC=clang cmake -S . -B build-fuzz -DPO_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
  -DPO_WERROR=ON
ctest --test-dir build-asan --output-on-failure -j"$ctest_jobs"
stage "figures (races, seed incident, fault injection)"
cat "$PAYONCE_FIGURES"
stage "the history checker's reports (build-asan/reports; mutant-*: the planted bug, refused on purpose)"
python3 - "$PAYONCE_REPORTS"/history-*.json <<'PY'
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    bad = sum(c["violations"] for c in r["checks"].values())
    print("%-30s %-8s %4d payments sent, %5d attempts, %4d credits, %3d checks, %d violations"
          % (r["name"], "clean" if r["ok"] else "VIOLATED", r["payments_sent"], r["attempts"],
             r["credits"], sum(c["checked"] for c in r["checks"].values()), bad))
PY

stage "ThreadSanitizer build (begun beside the ASan tests; its rest now)"
await_build tsan
stage "ThreadSanitizer: the tests (CTest)"
export PAYONCE_FIGURES=$root/build-tsan/figures.txt; rm -f "$PAYONCE_FIGURES"
# Two at a time: under ThreadSanitizer the tests compute (4 at a time took
# as long, and made the webhook case's compressed schedules miss their
# bounds).
ctest --test-dir build-tsan --output-on-failure -j"$jobs"
cat "$PAYONCE_FIGURES"

await_build fuzz
stage "fuzz targets (libFuzzer, ASan + UBSan; clang build first), 8 targets: kept crash inputs and the committed corpus replayed, then ${PAYONCE_FUZZ_SECONDS:-10} s each; a line per target with its coverage"
scripts/fuzz.sh "${PAYONCE_FUZZ_SECONDS:-10}"
stage "fuzzing keeps what it learns: a planted crash found, kept and replayed; coverage merged back within bounds"
tests/e2e/fuzz_keep.sh

stage "release build (make build) and the demo with it, as 'make demo' runs it"
make build PO_WERROR=ON | tee build-progress.log
# the build speaks while it works (a fresh machine's first build is long)
grep -Eq '^payonce: building build/ on [0-9]+ cores:.* [0-9]+% \([0-9]+ s\)$' build-progress.log \
  || { echo "make build printed no progress line"; exit 1; }
rm -f build-progress.log
scripts/demo.sh | tee build/demo.log
python3 tests/e2e/readme_demo.py README.md build/demo.log
# Two lanes side by side, each its stages in order: the release build's
# allocation sweeps and bench_smoke (they compute), and the demo under ASan,
# the console in Chromium twice and the Debian package (they wait on a
# browser, servers and dpkg more than they compute). A lane's output is
# printed when both are done, each stage under its heading; a failed stage
# ends its lane and fails the run.
lane() { # NAME: the lane's stages, its output into $tmp/lane-NAME.log
  case $1 in
    release)
      stage "allocation failures (the k-th allocation fails, every k; release build) and bench_smoke's whole run (every scenario; the ASan stage ran eight)"
      export PAYONCE_FIGURES=$root/build/figures.txt; rm -f "$PAYONCE_FIGURES"
      ctest --test-dir build -L 'alloc|bench' --output-on-failure -j"$jobs" || return 1
      cat "$PAYONCE_FIGURES" ;;
    browser)
      stage "the demo again under AddressSanitizer"
      PAYONCE_BIN=$root/build-asan/payonce scripts/demo.sh > build-asan/demo.log 2>&1 ||
        { cat build-asan/demo.log; return 1; }
      tail -n 1 build-asan/demo.log
      stage "the operator's console in Debian's Chromium (playwright-core): release build on SQLite, ASan build on PostgreSQL; screenshots docs/img/console-*.png"
      tests/e2e/console_test.sh build/payonce sqlite || return 1
      CONSOLE_SHOTS=$tmp/console-pg tests/e2e/console_test.sh build-asan/payonce postgres || return 1
      stage "the Debian package (make deb): installed with dpkg -i, migrate and serve from its config, purged"
      tests/e2e/deb_test.sh || return 1 ;;
  esac
}
stage "two lanes side by side: the release build's sweeps and bench_smoke | the ASan demo, the console in Chromium twice, the Debian package"
lane release > "$tmp/lane-release.log" 2>&1 & release_pid=$!
lane browser > "$tmp/lane-browser.log" 2>&1 & browser_pid=$!
lanes_ok=1
wait "$release_pid" || lanes_ok=0
wait "$browser_pid" || lanes_ok=0
cat "$tmp/lane-release.log" "$tmp/lane-browser.log"
[ "$lanes_ok" -eq 1 ] || { echo "test: a lane failed (above)"; exit 1; }
stage "the lanes done"
# Servers and simulators stop by themselves: none of this run's may be left.
sleep 1
left=$(pgrep -af "$root/build[a-z-]*/payonce" || true)
if [ -n "$left" ]; then echo "test: processes left running:"; echo "$left"; exit 1; fi
echo "test: all suites passed in ${SECONDS} s"
