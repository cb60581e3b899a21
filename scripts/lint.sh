#!/usr/bin/env bash
# lint.sh — the rules a compiler does not check (run by `make test`):
#   1. banned unsafe C functions in src/, tests/ and bench/ (curl's habit):
#      use the bounded helpers of src/core/core.h instead (po_strcpy,
#      po_fmt, po_parse_i64). A test line may opt out with "lint-ok".
#   2. the module dependency rules of docs/internals.md: which module may
#      include which (direct includes), and where the third-party headers
#      may appear (OpenSSL only in crypto/, the database client libraries
#      only in store/, libmicrohttpd only in the two servers, ...).
#   3. the house format: clang-format (.clang-format) in check mode.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

banned='\b(strcpy|strcat|sprintf|vsprintf|gets|atoi|atol|atoll|atof|strtok|strncpy|strncat|tmpnam|mktemp)\s*\('
hits=$(grep -rnE "$banned" src tests bench --include='*.c' --include='*.h' | grep -v 'lint-ok' || true)
if [ -n "$hits" ]; then
  echo "lint: banned functions (see scripts/lint.sh for the safe replacements):" >&2
  echo "$hits" >&2
  fail=1
fi

# Module -> the modules it may include directly (docs/internals.md).
# service/ is split into rooms (src/service/<room>/), each a module of its
# own here, listed from the bottom up: a room includes only the rooms
# under it. service.h (the folder's one header outside the rooms) includes
# every room; the modules above service/ may include any of its headers.
svc_base="core crypto store event ledger engine channel recon runtime"
declare -A allowed=(
  [core]=""
  [crypto]="core"
  [store]="core"
  [event]="core"
  [ledger]="core store"
  [engine]="core crypto event ledger store"
  [channel]="core crypto event"
  [recon]="core crypto store event engine channel"
  [runtime]="core"
  [service/accounts]="$svc_base"
  [service/payments]="$svc_base service/accounts"
  [service/webhooks]="$svc_base service/accounts"
  [service/alerts]="$svc_base service/accounts service/payments service/webhooks"
  [service/jobs]="$svc_base service/accounts service/payments service/webhooks service/alerts"
  [service/console]="$svc_base service/accounts service/payments service/webhooks service/alerts service/jobs"
  [service/gateway]="$svc_base service/accounts service/payments service/webhooks service/alerts service/jobs service/console"
  [service]="service/accounts service/payments service/webhooks service/alerts service/jobs service/console service/gateway"
  [http]="core crypto store event engine channel recon runtime service"
  [sim]="core crypto"
  [bench]="core crypto store event ledger engine channel recon runtime service sim"
  [cli]="core crypto store event ledger engine channel recon runtime service http sim bench"
)
# The module a path under src/ belongs to: its folder, or service/<room>.
module_of() {
  case $1 in
    service/*/*) echo "service/$(echo "$1" | cut -d/ -f2)" ;;
    *) echo "${1%%/*}" ;;
  esac
}
for dir in src/*/ src/service/*/; do
  rel=${dir#src/}
  mod=${rel%/}
  [ "$mod" != service ] || [ -n "$(ls "$dir"*.[ch] 2>/dev/null)" ] || continue
  if [ -z "${allowed[$mod]+set}" ]; then
    echo "lint: module src/$mod is not in the dependency table (scripts/lint.sh, docs/internals.md)" >&2
    fail=1
    continue
  fi
  while IFS=: read -r file line inc; do
    [ -n "$file" ] || continue
    # The included file's path under src/, resolved from the including file.
    path=$(realpath -m --relative-to=src "$(dirname "$file")/$inc")
    dep=$(module_of "$path")
    [ "$dep" != "$mod" ] || continue
    case $mod:$dep in service/*:*|service:*) ;; *:service/*) dep=service ;; esac
    case " ${allowed[$mod]} " in
      *" $dep "*) ;;
      *) echo "lint: $file:$line: $mod/ may not include $dep/ (allowed: ${allowed[$mod]:-nothing})" >&2
         fail=1 ;;
    esac
  done < <(grep -HnE '^#include "[a-z./_]+/' "$dir"*.[ch] 2>/dev/null |
           sed -E 's|^([^:]+):([0-9]+):#include "([^"]+)".*|\1:\2:\3|')
done

# Third-party headers: pattern -> the only places allowed to include it.
check_header() {
  local pattern=$1 where=$2
  local hits
  hits=$(grep -rnE "^#include <$pattern" src --include='*.c' --include='*.h' | grep -vE "^($where)" || true)
  if [ -n "$hits" ]; then
    echo "lint: <$pattern> outside $where:" >&2
    echo "$hits" >&2
    fail=1
  fi
}
check_header 'openssl/' 'src/crypto/'
check_header 'crack\.h' 'src/crypto/'
check_header 'sqlite3\.h' 'src/store/sqlite\.c'
check_header 'libpq-fe\.h' 'src/store/postgres\.c'
check_header 'microhttpd\.h' 'src/http/server\.c|src/sim/listen\.h'
check_header 'zlib\.h' 'src/channel/wechatpay_api\.c|src/sim/|tests/'
check_header 'zip\.h' 'src/channel/alipay_bill\.c|src/sim/|tests/'
check_header 'curl/' 'src/channel/api_http\.c|src/channel/egress\.c|src/sim/|src/cli/'
check_header 'jansson\.h' 'src/channel/|src/recon/|src/service/|src/http/|src/sim/|src/bench/|src/cli/'

# SQL lives below the transport and the command line: none in http/ or cli/
# (a statement may begin with WITH, too).
sql=$(grep -rnE '"(SELECT|INSERT|UPDATE|DELETE|WITH) ' src/http src/cli || true)
if [ -n "$sql" ]; then
  echo "lint: SQL in http/ or cli/ (put the query in service/, engine/, ledger/ or recon/):" >&2
  echo "$sql" >&2
  fail=1
fi

# The engine's one door (engine.h, "the engine's one door"): outside the
# engine's own batch.c and engine.c, only the committer (serve) and door.c
# (serve through the committer; the offline CLI on its own connection) call
# the engine's apply and alert entries. Anything else inside serve would be
# a second writer beside the committer.
door=$(grep -rnE 'po_engine_(apply|apply_batch|apply_mixed|apply_recorded|alert)\(' src \
         --include='*.c' --include='*.h' |
       grep -vE '^src/engine/(engine\.h|engine\.c|batch\.c|committer\.c|door\.c):' || true)
if [ -n "$door" ]; then
  echo "lint: the engine called past its door (use po_door_apply / po_door_alert / po_door_work):" >&2
  echo "$door" >&2
  fail=1
fi

# A po_ function is declared in its module's header, never by hand in a .c
# file: a hand-written prototype hides a dependency (often an upward one)
# from the headers and from this script's module check.
protos=$(find src -name '*.c' -print0 | xargs -0 awk '
  FNR == 1 { inp = 0 }
  /^[a-z]/ && !/^static/ && /[ *]po_[a-z0-9_]+\(/ { buf = $0; inp = 1 }
  inp { if ($0 ~ /\{/) inp = 0; else if ($0 ~ /;[[:space:]]*$/) { print FILENAME ":" FNR ": " buf; inp = 0 } }')
if [ -n "$protos" ]; then
  echo "lint: a po_ prototype written in a .c file (include the header that declares it):" >&2
  echo "$protos" >&2
  fail=1
fi

# One assertion style (issue 46): every C test program runs its cases as a
# cmocka group (cmocka_run_group_tests*, or T_RUN_GROUP/t_run_group from
# tests/support/testutil.h, which sits on cmocka); a main that reports its
# own "N passed, M failed" is the old second style coming back.
tmains=$(grep -l '^int main' tests/*/*.c 2>/dev/null | xargs -r grep -L \
  'cmocka_run_group_tests\|T_RUN_GROUP\|t_run_group\|LLVMFuzzerTestOneInput' 2>/dev/null || true)
if [ -n "$tmains" ]; then
  echo "lint: a C test program that does not run its cases as a cmocka group (docs/testing.md, one assertion style):" >&2
  echo "$tmains" >&2
  fail=1
fi

if command -v clang-format >/dev/null; then
  files=$(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h' 'bench/*.c' 2>/dev/null ||
          find src tests bench -name '*.[ch]')
  if ! out=$(clang-format --dry-run --Werror $files 2>&1); then
    echo "lint: not in the house format (run: clang-format -i \$(git ls-files '*.c' '*.h')):" >&2
    echo "$out" | grep -E '^[^ ].*: (error|warning):' | cut -d: -f1 | sort -u | head -20 >&2
    fail=1
  fi
else
  echo "lint: clang-format not installed (scripts/deps.sh installs it)" >&2
  fail=1
fi

[ "$fail" -eq 0 ] || exit 1
echo "lint: ok (banned functions, module dependencies, third-party headers, SQL placement, the engine's door, prototypes, cmocka groups, format)"
