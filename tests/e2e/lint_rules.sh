#!/usr/bin/env bash
# lint_rules.sh SRCDIR — scripts/lint.sh refuses what it says it refuses:
# on a copy of the tree it passes as committed, then fails on each planted
# violation, naming it. Today: the engine called past its door (engine.h,
# "the engine's one door") from inside serve (service/, http/) and from the
# command line; a C test program that is not a cmocka group.
set -euo pipefail
src=${1:?source dir}
work=$(mktemp -d "${TMPDIR:-/tmp}/lint-rules.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0
copy() {
  rm -rf "$work/tree"; mkdir -p "$work/tree/tests" "$work/tree/bench"
  cp -r "$src/src" "$src/scripts" "$src/.clang-format" "$work/tree/"
}
expect() { # expect ok WHAT: lint passes the copy
  local out rc=0
  out=$("$work/tree/scripts/lint.sh" 2>&1) || rc=$?
  if [ "$rc" -ne 0 ]; then echo "FAIL $1: lint refused the tree: $out"; fails=$((fails + 1))
  else echo "ok   $1"; fi
}
plant() { # plant FILE: a well-formatted call of the engine's apply entry
  cat >>"$work/tree/$1" <<'C'

static void planted(struct po_store *s, const struct po_event *ev, struct po_outcome *out)
{
    po_engine_apply(s, NULL, ev, out);
}
C
}
copy
expect ok "the tree as committed"
# every planting in one copy (lint reads the whole tree each run), each named
planted=(src/service/jobs/jobs.c src/http/admin_api.c src/cli/cmd_ledger.c src/recon/recon.c)
for f in "${planted[@]}"; do plant "$f"; done
sed -i 's/po_door_alert(d, &ev, PO_R_MISSING_FROM_BILL, detail)/po_engine_alert(d->s, \&ev, PO_R_MISSING_FROM_BILL, detail, NULL)/' "$work/tree/src/recon/recon.c"
grep -q 'po_engine_alert(d->s' "$work/tree/src/recon/recon.c" || { echo "FAIL: the recon alert to plant was not found"; exit 1; }
# a test program that counts its own passes instead of running a cmocka group
mkdir -p "$work/tree/tests/unit"
cat >"$work/tree/tests/unit/test_planted.c" <<'C'
#include <stdio.h>

int main(void)
{
    printf("1 passed, 0 failed\n");
    return 0;
}
C
out=$("$work/tree/scripts/lint.sh" 2>&1) && { echo "FAIL: lint passed the planted tree"; exit 1; }
grep -q "the engine called past its door" <<<"$out" || { echo "FAIL: lint did not name the door: $out"; exit 1; }
for f in "${planted[@]}"; do
  if grep -qE "^$f:[0-9]+: +po_engine_apply\(s, NULL, ev, out\);" <<<"$out"; then echo "ok   po_engine_apply planted in $f refused"
  else echo "FAIL po_engine_apply planted in $f not refused"; fails=$((fails + 1)); fi
done
if grep -qE "^src/recon/recon.c:[0-9]+: .*po_engine_alert\(d->s" <<<"$out"; then echo "ok   po_engine_alert in recon.c refused"
else echo "FAIL po_engine_alert in recon.c not refused"; fails=$((fails + 1)); fi
if grep -q "does not run its cases as a cmocka group" <<<"$out" && grep -qx "tests/unit/test_planted.c" <<<"$out"; then
  echo "ok   a test program outside cmocka refused"
else echo "FAIL a test program outside cmocka not refused"; fails=$((fails + 1)); fi
[ "$fails" -eq 0 ] && echo "# lint_rules: the engine's door and the one assertion style are enforced (6 plantings refused, the tree passes)"
exit "$fails"
