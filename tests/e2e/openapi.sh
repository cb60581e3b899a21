#!/usr/bin/env bash
# openapi.sh lint|api PAYONCE [TEST_API TEST_OPENAPI] — the tenant API's description
# (docs/openapi.json, issue 45 item 6) judged by tools that are not payonce's:
#   lint  Redocly CLI's recommended rules, each one an error (but one)
#         (tests/openapi/redocly.yaml): no problem at all.
#   api   test_api on SQLite, every tenant-API request and answer through
#         Prism's validating proxy (tests/support/prism.h): an answer the
#         description does not allow, or a request it refuses that payonce
#         takes, fails its case and is printed with Prism's words; then
#         test_openapi, which calls the routes test_api does not (webhook
#         endpoints, events) the same way. Before both, a description made
#         wrong on purpose must fail test_api (the judge is judged).
# The tools are npm packages pinned in tests/openapi/package-lock.json
# (installed with `npm ci` on first use; Node.js 20 or later).
set -uo pipefail
MODE=${1:?lint|api}
BIN=$(realpath "${2:?payonce binary}")
HERE=$(cd "$(dirname "$0")" && pwd)
OA=$(cd "$HERE/../openapi" && pwd)
DOC=$(cd "$HERE/../../docs" && pwd)/openapi.json
node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' ||
  { echo "openapi: Node.js 20 or later is needed (Redocly CLI, Prism)"; exit 1; }
# once for both tests, which CTest may run at the same time
flock "$OA/package.json" sh -c 'cd "$1" && { [ -d node_modules/@redocly/cli ] &&
  [ -d node_modules/@stoplight/prism-cli ] || npm ci --no-audit --no-fund >/dev/null; }' sh "$OA" ||
  { echo "openapi: npm ci failed in tests/openapi"; exit 1; }
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
case $MODE in
  lint)
    cd "$OA" && node_modules/.bin/redocly lint --config redocly.yaml --format stylish "$DOC"
    rc=$?
    [ "$rc" -eq 0 ] && echo "# openapi lint: docs/openapi.json passes Redocly's recommended rules (as errors; info-license off)"
    exit $rc ;;
  api)
    TEST_API=$(realpath "${3:?test_api binary}")
    PRISM=$OA/node_modules/.bin/prism
    # First the judge is judged: test_api's close case against a description
    # wrong in three ways must fail with each — a balance with a member it
    # does not name (Prism's 500), the close's 404 undocumented (its
    # warning), alerts' state=acknowledged refused while payonce takes it.
    work=$(mktemp -d "${TMPDIR:-/tmp}/payonce-openapi.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    python3 - "$DOC" "$work/mutant.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
s = d["components"]["schemas"]["Balance"]
del s["properties"]["updated_at"]
s["required"].remove("updated_at")
del d["paths"]["/v1/orders/{out_trade_no}/close"]["post"]["responses"]["404"]
d["components"]["parameters"]["AlertState"]["schema"]["enum"].remove("acknowledged")
json.dump(d, open(sys.argv[2], "w"))
PY
    # (every check of the case counted, none ending it: all three must show)
    PAYONCE_TEST_KEEP_GOING=1 PAYONCE_PRISM=$PRISM PAYONCE_OPENAPI=$work/mutant.json \
      "$TEST_API" sqlite "$BIN" close \
      > "$work/mutant.out" 2>&1
    mrc=$? mfails=0
    for why in "payonce's answer is not what the description allows" "prism's warnings" \
      "payonce accepts a request the description refuses"; do
      grep -q "FAIL: openapi: .*: $why" "$work/mutant.out" ||
        { echo "FAIL: a wrong description went unnoticed: no '$why'"; mfails=$((mfails+1)); }
    done
    [ "$mrc" -ne 0 ] || { echo "FAIL: test_api passed against a wrong description"; mfails=$((mfails+1)); }
    if [ "$mfails" -ne 0 ]; then grep "FAIL\|^# " "$work/mutant.out" | head -40; exit 1; fi
    echo "# openapi: a description wrong in 3 ways fails test_api's close case with each ($(grep -c 'FAIL: openapi:' "$work/mutant.out") violations)"
    # test_api's every case, then the routes it does not call (test_openapi)
    PAYONCE_PRISM=$PRISM PAYONCE_OPENAPI=$DOC "$TEST_API" sqlite "$BIN"
    rc=$?
    PAYONCE_PRISM=$PRISM PAYONCE_OPENAPI=$DOC "$(realpath "${4:?test_openapi binary}")" sqlite ||
      rc=1
    exit $rc ;;
  *) echo "usage: openapi.sh lint|api PAYONCE [TEST_API TEST_OPENAPI]"; exit 2 ;;
esac
