#!/usr/bin/env bash
# lint.sh — bans unsafe C functions in src/ and tests/ (curl's habit).
# Use the bounded helpers in src/core/core.h instead: po_strcpy, po_fmt,
# po_parse_i64. A test line may opt out with the comment "lint-ok".
set -euo pipefail
cd "$(dirname "$0")/.."
banned='\b(strcpy|strcat|sprintf|vsprintf|gets|atoi|atol|atoll|atof|strtok|strncpy|strncat|tmpnam|mktemp)\s*\('
hits=$(grep -rnE "$banned" src tests --include='*.c' --include='*.h' | grep -v 'lint-ok' || true)
if [ -n "$hits" ]; then
  echo "lint: banned functions (see scripts/lint.sh for the safe replacements):" >&2
  echo "$hits" >&2
  exit 1
fi
echo "lint: ok"
