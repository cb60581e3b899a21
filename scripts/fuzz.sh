#!/usr/bin/env bash
# fuzz.sh [SECONDS] — builds the libFuzzer targets with clang (ASan + UBSan)
# and runs each for SECONDS (default 15) from its seed corpus in
# tests/fuzz/corpus/<target>. New inputs go to a temporary directory, not
# into the repository. A crash fails the run and leaves the input in
# build-fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15}
CC=clang cmake -S . -B build-fuzz -DPO_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug -DPO_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
mkdir -p build-fuzz/crashes
# The HTTP and API targets keep a database in TMPDIR; libFuzzer exits
# without cleaning up, so they get a directory of their own, removed here.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/payonce-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for t in wechatpay alipay stripe http api bill form json; do
  work=$(mktemp -d "$scratch/corpus-$t.XXXXXX")
  cp tests/fuzz/corpus/$t/* "$work/"
  maxlen=8192; [ "$t" = bill ] && maxlen=20000 # a real bill is ~15 KB
  if ! TMPDIR=$scratch build-fuzz/tests/fuzz/fuzz_$t -max_total_time="$secs" -max_len=$maxlen -timeout=10 \
      -artifact_prefix=build-fuzz/crashes/$t- "$work" >build-fuzz/fuzz_$t.log 2>&1; then
    tail -n 40 build-fuzz/fuzz_$t.log
    echo "fuzz: $t FAILED (input in build-fuzz/crashes/)"
    rm -rf "$work"; exit 1
  fi
  runs=$(grep -aoE 'stat::number_of_executed_units: [0-9]+' build-fuzz/fuzz_$t.log | awk '{print $2}' || true)
  [ -n "$runs" ] || runs=$(grep -aoE '^Done [0-9]+ runs' build-fuzz/fuzz_$t.log | awk '{print $2}' || true)
  [ -n "$runs" ] || runs=$(grep -aoE '^#[0-9]+' build-fuzz/fuzz_$t.log | tail -n1 | tr -d '#')
  echo "# fuzz $t: ${secs}s, ${runs:-?} inputs, corpus $(ls "$work" | wc -l) files, no crash"
  rm -rf "$work"
done
