#!/usr/bin/env bash
# fuzz.sh — the libFuzzer targets (clang, ASan + UBSan), built into build-fuzz.
#
#   scripts/fuzz.sh [SECONDS]          (make test) each target replays its kept
#                                      crash inputs and its committed corpus, then
#                                      fuzzes SECONDS (default 15); new inputs go
#                                      to a scratch directory
#   scripts/fuzz.sh --merge [SECONDS]  the same, then what added coverage is
#                                      merged back into the committed corpus
#                                      (libFuzzer -merge=1, size-bounded)
#   scripts/fuzz.sh --plateau [ROUND] [MAX]
#                                      (make soak, make fuzz-corpus) rounds of
#                                      ROUND seconds (default 60) until a round
#                                      adds under 1% new features or MAX seconds
#                                      (default 900) have passed; then merges
#
# Every run prints a line per target with its coverage (libFuzzer's cov: edges
# and ft: features) at the start and at the end. A crash fails the run, leaves
# the input in build-fuzz/crashes/ and copies it to
# tests/fuzz/regressions/<target>/: every later run replays it first, so the
# bug stays fixed once the input is committed with its fix.
#
# Environment (the defaults are the repository's):
#   PAYONCE_FUZZ_TARGETS      targets to run (default: all eight)
#   PAYONCE_FUZZ_CORPUS       the committed corpus (tests/fuzz/corpus)
#   PAYONCE_FUZZ_REGRESSIONS  the kept crash inputs (tests/fuzz/regressions)
#   PAYONCE_FUZZ_CORPUS_KB    the bound on one target's committed corpus (256;
#                             bill: 4×, a real bill is ~15 KB)
#   PAYONCE_FUZZ_CORPUS_FILES the bound on its files (300)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=run
case "${1:-}" in
--merge) mode=merge; shift ;;
--plateau) mode=plateau; shift ;;
esac
if [ "$mode" = plateau ]; then
  round=${1:-60}; max=${2:-900}
else
  round=${1:-15}; max=$round
fi
case "$round$max" in *[!0-9]*) echo "fuzz.sh: seconds must be whole numbers" >&2; exit 2 ;; esac
targets=${PAYONCE_FUZZ_TARGETS:-wechatpay alipay stripe http api bill form json}
corpus=${PAYONCE_FUZZ_CORPUS:-$root/tests/fuzz/corpus}
regressions=${PAYONCE_FUZZ_REGRESSIONS:-$root/tests/fuzz/regressions}
bound_kb=${PAYONCE_FUZZ_CORPUS_KB:-256}
bound_files=${PAYONCE_FUZZ_CORPUS_FILES:-300}

CC=clang cmake -S . -B build-fuzz -DPO_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug -DPO_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
mkdir -p build-fuzz/crashes
# The HTTP and API targets keep a database in TMPDIR; libFuzzer exits
# without cleaning up, so they get a directory of their own, removed here.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/payonce-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# cov and ft of libFuzzer's INITED (start) or last (end) status line in LOG.
coverage() { # LOG INITED|last
  local line
  if [ "$2" = INITED ]; then line=$(grep -aE '[[:space:]]INITED[[:space:]]' "$1" | tail -n1 || true)
  else line=$(grep -aE '^#[0-9]+[[:space:]].*cov: ' "$1" | tail -n1 || true); fi
  local cov ft
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line"); ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$line")
  echo "${cov:-0} ${ft:-0}"
}

# Merges what in WORK adds coverage into the committed corpus of target T,
# smallest new inputs first, within the bounds. Prints "+N files (K KB)".
merge_back() { # T WORK
  local t=$1 work=$2 cand kb files added=0 addbytes=0 f size
  cand=$(mktemp -d "$scratch/merge-$t.XXXXXX")
  cp "$corpus/$t"/* "$cand/"
  TMPDIR=$scratch "build-fuzz/tests/fuzz/fuzz_$t" -merge=1 -max_len="$maxlen" -timeout=10 \
    "$cand" "$work" >"build-fuzz/fuzz_$t.merge.log" 2>&1 \
    || { tail -n 20 "build-fuzz/fuzz_$t.merge.log"; echo "fuzz: $t merge FAILED"; return 1; }
  kb=$bound_kb; [ "$t" = bill ] && kb=$((bound_kb * 4))
  local limit=$((kb * 1024)) have
  have=$(cat "$corpus/$t"/* | wc -c); files=$(ls "$corpus/$t" | wc -l)
  while read -r size f; do
    [ -e "$corpus/$t/$f" ] && continue
    if [ $((have + size)) -gt "$limit" ] || [ "$files" -ge "$bound_files" ]; then break; fi
    cp "$cand/$f" "$corpus/$t/$f"
    have=$((have + size)); files=$((files + 1)); added=$((added + 1)); addbytes=$((addbytes + size))
  done < <(cd "$cand" && find . -maxdepth 1 -type f -printf '%s %f\n' | sort -n)
  rm -rf "$cand"
  echo "+$added files ($((addbytes / 1024)) KB; corpus $files files, $((have / 1024)) KB of $kb)"
}

for t in $targets; do
  [ -d "$corpus/$t" ] || { echo "fuzz.sh: no corpus $corpus/$t" >&2; exit 2; }
done

# One target: its kept crash inputs and corpus replayed, then fuzzed for
# the rounds' time; a line with its coverage (or its crash, and 1).
fuzz_one() { # T
  local t=$1
  maxlen=8192; [ "$t" = bill ] && maxlen=20000 # a real bill is ~15 KB
  work=$(mktemp -d "$scratch/corpus-$t.XXXXXX")
  cp "$corpus/$t"/* "$work/"
  dirs=("$work")
  [ -d "$regressions/$t" ] && [ -n "$(ls -A "$regressions/$t")" ] && dirs+=("$regressions/$t")
  log=build-fuzz/fuzz_$t.log; : >"$log"
  rm -f build-fuzz/crashes/"$t"-*
  spent=0; rounds=0; start=""; prev_ft=0; runs=0
  while :; do
    secs=$round; [ $((spent + secs)) -gt "$max" ] && secs=$((max - spent))
    [ "$secs" -ge 1 ] || break
    if ! TMPDIR=$scratch "build-fuzz/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=$maxlen \
        -timeout=10 -print_final_stats=1 -artifact_prefix="build-fuzz/crashes/$t-" "${dirs[@]}" \
        >"$log.round" 2>&1; then
      cat "$log.round" >>"$log"; tail -n 40 "$log.round"
      mkdir -p "$regressions/$t"
      kept=""
      for c in build-fuzz/crashes/"$t"-*; do
        [ -f "$c" ] || continue
        n=$(basename "$c"); n=${n#"$t"-}
        if [ ! -e "$regressions/$t/$n" ]; then cp "$c" "$regressions/$t/$n"; kept="$kept $regressions/$t/$n"; fi
      done
      echo "fuzz: $t FAILED (input in build-fuzz/crashes/)"
      [ -n "$kept" ] && echo "fuzz: kept as a regression input:$kept — fix the bug, commit the input with the fix; every run replays it"
      return 1
    fi
    cat "$log.round" >>"$log"
    read -r c0 f0 < <(coverage "$log.round" INITED)
    read -r c1 f1 < <(coverage "$log.round" last)
    [ -n "$start" ] || start="$c0 $f0"
    r=$(grep -aoE 'stat::number_of_executed_units: [0-9]+' "$log.round" | awk '{print $2}' || true)
    runs=$((runs + ${r:-0})); spent=$((spent + secs)); rounds=$((rounds + 1))
    [ "$mode" = plateau ] || break
    # A plateau: this round added under 1% to the features of the last.
    if [ "$rounds" -gt 1 ] && [ $(( (f1 - prev_ft) * 100 )) -lt "$prev_ft" ]; then break; fi
    prev_ft=$f1
  done
  rm -f "$log.round"
  read -r c0 f0 <<<"$start"
  line="# fuzz $t: ${spent}s"
  [ "$mode" = plateau ] && line="$line in $rounds rounds of ${round}s$([ "$spent" -lt "$max" ] && echo ' (plateau)' || echo ' (time bound)')"
  line="$line, $runs inputs, cov $c0 -> $c1, ft $f0 -> $f1, corpus $(ls "$corpus/$t" | wc -l) -> $(ls "$work" | wc -l) files, no crash"
  if [ "$mode" != run ]; then line="$line; merged back: $(merge_back "$t" "$work")"; fi
  echo "$line"
  rm -rf "$work"
}

# The targets side by side, as many at a time as there are cores (each
# libFuzzer process is one busy thread), their lines printed in order.
par=$(nproc 2>/dev/null || echo 2)
pids=() failed=0
for t in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n || true; done
  fuzz_one "$t" >"$scratch/out-$t" 2>&1 &
  pids+=("$!")
done
i=0
for t in $targets; do
  wait "${pids[$i]}" || failed=1
  cat "$scratch/out-$t"
  i=$((i + 1))
done
[ "$failed" -eq 0 ] || exit 1

