# lib.sh — sourced by the e2e shell tests: BIN, BACKEND, a temporary work
# directory, and a fresh database on the chosen backend (PostgreSQL through
# PAYONCE_TEST_PG; exit 77, CTest's "skipped", without it unless
# PAYONCE_REQUIRE_PG is set). Defines check and fig.
#   usage: . lib.sh PAYONCE BACKEND NAME
BIN=$(realpath "${1:?payonce binary}"); BACKEND=${2:?sqlite|postgres}
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/payonce-$3.XXXXXX")
bg_pids=()
e2e_cleanup() { for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; cd /; rm -rf "$work"; }
trap e2e_cleanup EXIT
cd "$work"
fails=0; passes=0
check() { if [ "$2" == "$3" ]; then passes=$((passes+1)); else echo "FAIL $1: got $2, expected $3"; fails=$((fails+1)); fi; }
# audit_settled: "OK RECORDS UNSEALED" of `audit verify` once serve sealed
# everything (waits up to 10 s for it)
audit_settled() {
  local out=
  for _ in $(seq 1 100); do
    out=$("$BIN" audit verify --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["ok"], d["records"], d["unsealed"])')
    case "$out" in "True "*" 0") break ;; esac
    sleep 0.1
  done
  echo "$out"
}
# sim_faults DIR: DIR/faults (the simulator's failures, docs/simulator.md)
# from standard input, each line keyed by the caller its channel's requests
# carry — DIR's WeChat Pay mchid for a /v3/ line, its Alipay app_id for
# /gateway.do, its Stripe secret key for /v1/ — so that only this test's
# merchant takes them (issue 46); other lines as they are
sim_faults() {
  python3 -c '
import json, os, sys
d = sys.argv[1]
sim = json.load(open(os.path.join(d, "sim.json")))
try:
    stripe = open(os.path.join(d, "stripe_api_key")).read().strip()
except OSError:
    stripe = ""
out = []
for line in sys.stdin.read().splitlines():
    path = line.split()[1] if len(line.split()) > 1 else ""
    who = (sim["mchid"] if path.startswith("/v3/") else stripe if path.startswith("/v1/")
           else sim["app_id"] if path.startswith("/gateway.do") else "")
    out.append(("@%s " % who if who else "") + line)
open(os.path.join(d, "faults"), "w").write("".join(l + "\n" for l in out))
' "$1"
}
# tenant_with_sim: the database migrated, tenant t1 with merchant m1, and the
# simulator's keys (./sim) configured as t1's channel accounts
tenant_with_sim() {
  "$BIN" migrate >/dev/null && "$BIN" tenant add --tenant t1 >/dev/null &&
    "$BIN" merchant add --tenant t1 --merchant m1 >/dev/null || return 1
  "$BIN" sim keys --dir sim --tenant t1 --mode pubkey > keys.out || return 1
  grep -A20 '^Configure' keys.out | grep -E '^payonce|^  ' | sed "s#^payonce #$BIN #" | bash >/dev/null 2>configure.err ||
    { cat configure.err; return 1; }
}
# history_check NAME ARGS...: the history checker (tests/support/history_check.py)
# over this run and the database; its report kept as
# $PAYONCE_REPORTS/history-NAME.json (make test: build-*/reports), else in
# the work directory; its summary printed. Its exit status is the checker's.
history_check() {
  local name=$1; shift
  local dir=${PAYONCE_REPORTS:-$work}
  mkdir -p "$dir"
  python3 "$E2E_DIR/../support/history_check.py" --db "$PAYONCE_DB" --name "$name" \
    --report "$dir/history-$name.json" "$@"
}
# make_orders PREFIX FIRST LAST BASE [ARGS...]: orders PREFIX-FIRST..PREFIX-LAST
# of tenant t1, merchant m1, amount BASE+i, in one `order import` (ARGS: to
# it, --db URL); a process per order was half of a long test's time under
# ASan. Fails when the import does.
make_orders() {
  local prefix=$1 first=$2 last=$3 base=$4 i; shift 4
  for ((i = first; i <= last; i++)); do echo "m1,$prefix-$i,$((base + i))"; done |
    "$BIN" order import --tenant t1 --file - "$@" >/dev/null
}
# sim_with_api DIR KEYS [ARGS...]: the simulator serving DIR in the
# background (its port in sim_port, its output DIR.out and DIR.log), and the
# WeChat Pay account of KEYS (the output of `sim keys --dir DIR`) set again
# with the simulator's API; ARGS: more `channel set` options (no spaces)
sim_with_api() {
  local dir=$1 keys=$2 mser; shift 2
  "$BIN" sim serve --dir "$dir" --listen 127.0.0.1:0 > "$dir.out" 2> "$dir.log" & bg_pids+=($!)
  sim_port=$(port_of "$dir.out" "simulator listening on port")
  [ -n "$sim_port" ] || { echo "FAIL: the simulator did not start"; cat "$dir.log"; return 1; }
  mser=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["merchant_serial"])' "$dir/sim.json")
  # the account's command (its continued lines), with the API added
  { awk '/^payonce channel set .*--channel wechatpay/ {on=1} on {print; if ($0 !~ /\\$/) exit}' "$keys" |
      sed "s#^payonce #\"\$BIN\" #" | tr -d '\\\n'
    echo " --api-base-url http://127.0.0.1:$sim_port --merchant-private-key-file $dir/merchant_private_key.pem --merchant-serial $mser $*"
  } > "$dir.api"
  BIN=$BIN bash "$dir.api" > /dev/null || { echo "FAIL: channel set with the API"; return 1; }
}
# wx_get DIR TARGET: GET TARGET (path and query, or an absolute URL on the
# simulator) from the simulated WeChat Pay API (sim_port) as the merchant of
# DIR (its sim.json and merchant_private_key.pem), the way the strict
# simulator — like WeChat Pay — requires: User-Agent, Accept, and the
# WECHATPAY2-SHA256-RSA2048 Authorization over "GET\nTARGET\nTS\nNONCE\n\n";
# the answer's body on stdout
wx_get() {
  local dir=$1 target=${2#http://127.0.0.1:*/} ts nonce sig mchid serial
  [ "$target" = "$2" ] || target=/$target
  ts=$(date +%s)
  nonce=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  sig=$(printf 'GET\n%s\n%s\n%s\n\n' "$target" "$ts" "$nonce" |
    openssl dgst -sha256 -sign "$dir/merchant_private_key.pem" | base64 -w0)
  read -r mchid serial < <(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["mchid"], d["merchant_serial"])' "$dir/sim.json")
  curl -s -A 'payonce-tests (wx_get)' -H 'Accept: application/json' \
    -H "Authorization: WECHATPAY2-SHA256-RSA2048 mchid=\"$mchid\",nonce_str=\"$nonce\",signature=\"$sig\",timestamp=\"$ts\",serial_no=\"$serial\"" \
    "http://127.0.0.1:$sim_port$target"
}
# port_of FILE [LINE]: the port a server started in the background prints
# in FILE as "LINE N" (default "listening on port": `payonce serve`; the
# simulator's is "simulator listening on port", the operations listener's
# "operations on port"), waiting up to 10 s for it; empty if it never came
port_of() {
  local file=$1 line=${2:-listening on port} p=
  for _ in $(seq 1 200); do
    p=$(sed -n "s/^$line //p" "$file" 2>/dev/null | tail -n1)
    [ -n "$p" ] && break
    sleep 0.05
  done
  echo "$p"
}
fig() { echo "$*"; [ -n "${PAYONCE_FIGURES:-}" ] && echo "$*" >> "$PAYONCE_FIGURES"; return 0; }
if [ "$BACKEND" = postgres ]; then
  if [ -z "${PAYONCE_TEST_PG:-}" ]; then
    [ -n "${PAYONCE_REQUIRE_PG:-}" ] && { echo "FAIL: no PAYONCE_TEST_PG"; exit 1; }
    echo "skipping: PAYONCE_TEST_PG not set"; exit 77
  fi
  dbname="po_$3_$$"
  psql -q "$PAYONCE_TEST_PG" -c "CREATE DATABASE $dbname" >/dev/null || exit 1
  export PAYONCE_DB="${PAYONCE_TEST_PG%/*}/$dbname"
  trap 'e2e_cleanup; psql -q "$PAYONCE_TEST_PG" -c "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" >/dev/null' EXIT
else
  export PAYONCE_DB="sqlite:$work/$3.db"
fi
head -c 32 /dev/urandom > master.key && chmod 600 master.key
export PAYONCE_MASTER_KEY_FILE=$work/master.key
