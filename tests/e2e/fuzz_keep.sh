#!/usr/bin/env bash
# fuzz_keep.sh — the fuzzing that keeps what it learns (scripts/fuzz.sh),
# on the form target with a planted bug (PAYONCE_FUZZ_PLANT, fuzz_form.c),
# from a one-input seed corpus and a scratch regression directory:
#   1. the fuzzer finds the planted crash by itself; the run fails and the
#      input is kept as a regression input (one file, a form with the field);
#   2. the next run replays it before fuzzing: it fails at once, keeps no
#      second copy;
#   3. the bug "fixed" (no plant): the run passes over the kept input;
#   4. --merge adds what gained coverage to the corpus, within its bounds
#      (a bound of files is held to), and the coverage line is real numbers;
#   5. --plateau stops by itself and says why.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
t=$(mktemp -d "${TMPDIR:-/tmp}/payonce-fuzzkeep.XXXXXX")
trap 'rm -rf "$t"' EXIT
# a seed corpus of its own (one form): the committed corpus is at its
# plateau, where a few seconds add nothing to merge
mkdir -p "$t/corpus/form"
printf 'trade_status=TRADE_SUCCESS&total_amount=1.00' >"$t/corpus/form/seed"
export PAYONCE_FUZZ_TARGETS=form PAYONCE_FUZZ_CORPUS=$t/corpus PAYONCE_FUZZ_REGRESSIONS=$t/reg
pass=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
die() { echo "FAIL: $*"; exit 1; }

# 1
if PAYONCE_FUZZ_PLANT=zq scripts/fuzz.sh 120 >"$t/1.log" 2>&1; then
  die "the planted bug was not found in 120 s"
fi
grep -q "kept as a regression input" "$t/1.log" || { tail -n 20 "$t/1.log"; die "no regression input kept"; }
kept=("$t"/reg/form/*)
[ "${#kept[@]}" -eq 1 ] || die "expected one kept input, found ${#kept[@]}"
PAYONCE_FUZZ_PLANT=zq build-fuzz/tests/fuzz/fuzz_form "${kept[0]}" >/dev/null 2>&1 \
  && die "the kept input does not crash the planted target"
build-fuzz/tests/fuzz/fuzz_form "${kept[0]}" >/dev/null 2>&1 || die "the kept input crashes without the plant"
ok "planted crash found and kept: $(basename "${kept[0]}")"

# 2
if PAYONCE_FUZZ_PLANT=zq scripts/fuzz.sh 30 >"$t/2.log" 2>&1; then die "the kept input was not replayed"; fi
grep -aq "INITED" "$t/2.log" && die "the replay failed only after start-up: it was found again, not replayed"
[ "$(ls "$t/reg/form" | wc -l)" -eq 1 ] || die "a replayed crash was kept twice"
ok "the next run replays it first and fails before fuzzing"

# 3
scripts/fuzz.sh 2 >"$t/3.log" 2>&1 || { cat "$t/3.log"; die "the run over the kept input failed without the bug"; }
grep -q "^# fuzz form: 2s" "$t/3.log" || die "no result line: $(cat "$t/3.log")"
ok "fixed: $(cat "$t/3.log")"

# 4
before=$(ls "$t/corpus/form" | wc -l)
bound=$((before + 4))
PAYONCE_FUZZ_CORPUS_FILES=$bound scripts/fuzz.sh --merge 5 >"$t/4.log" 2>&1 || { cat "$t/4.log"; die "merge failed"; }
after=$(ls "$t/corpus/form" | wc -l)
[ "$after" -gt "$before" ] || die "nothing merged back: $(cat "$t/4.log")"
[ "$after" -le "$bound" ] || die "the corpus passed its bound of $bound files: $after"
read -r c0 c1 f0 f1 < <(sed -n 's/.*cov \([0-9]*\) -> \([0-9]*\), ft \([0-9]*\) -> \([0-9]*\),.*/\1 \2 \3 \4/p' "$t/4.log")
[ "${c0:-0}" -gt 0 ] && [ "${f1:-0}" -ge "${f0:-1}" ] || die "coverage not read: $(cat "$t/4.log")"
ok "merged back within the bound ($before -> $after files, bound $bound): $(cat "$t/4.log")"
grown=$(PAYONCE_FUZZ_CORPUS_FILES=1000 scripts/fuzz.sh --merge 1 | sed -n 's/.*cov \([0-9]*\) -> .*/\1/p')
[ "$grown" -ge "$c0" ] || die "a grown corpus starts with less coverage ($grown < $c0)"
ok "the grown corpus starts from more coverage ($c0 -> $grown edges)"

# 5
scripts/fuzz.sh --plateau 2 30 >"$t/5.log" 2>&1 || { cat "$t/5.log"; die "plateau run failed"; }
grep -Eq "in [0-9]+ rounds of 2s \((plateau|time bound)\)" "$t/5.log" || die "no plateau line: $(cat "$t/5.log")"
ok "$(cat "$t/5.log")"
echo "fuzz_keep: $pass checks passed"
