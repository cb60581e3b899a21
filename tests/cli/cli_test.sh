#!/usr/bin/env bash
# cli_test.sh PAYONCE — the command line contract (DESIGN §10) end to end,
# on SQLite and (when PAYONCE_TEST_PG is set) PostgreSQL: exit codes,
# outputs, --json documents, and verify failing on a tampered ledger.
set -uo pipefail
BIN=${1:?path to payonce}
fails=0; passes=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

check() { # check NAME EXPECTED_STATUS CMD... ; stdout+stderr in $tmp/out
  local name=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL $name: exit $got, expected $want"; sed 's/^/  | /' "$tmp/out" "$tmp/err"; fails=$((fails+1))
  else passes=$((passes+1)); fi
}
has() { # has NAME FILE PATTERN
  if grep -q -- "$3" "$2"; then passes=$((passes+1)); else
    echo "FAIL $1: '$3' not in output"; sed 's/^/  | /' "$2"; fails=$((fails+1)); fi
}
json() { # json NAME PYTHON_EXPR_ON_d  (reads $tmp/out)
  if python3 -c "import json,sys; d=json.load(open('$tmp/out')); sys.exit(0 if ($2) else 1)"; then
    passes=$((passes+1)); else echo "FAIL $1: $2"; sed 's/^/  | /' "$tmp/out"; fails=$((fails+1)); fi
}

run_suite() { # run_suite DB_URL TAMPER_CMD...
  local db=$1; shift
  local P=("$BIN" --db "$db")
  echo "# cli on $db"
  check no-schema 1 "$BIN" tenant add --db "$db" --tenant t1; has no-schema "$tmp/err" "payonce migrate"
  check migrate 0 "$BIN" migrate --db "$db"; has migrate "$tmp/out" "([1-9][0-9]* migrations\? applied now)"
  check migrate-again 0 "$BIN" migrate --db "$db"; has migrate-again "$tmp/out" "0 migrations applied now"
  check tenant 0 "$BIN" tenant add --db "$db" --tenant t1 --name "Tenant One"
  check tenant-dup 1 "$BIN" tenant add --db "$db" --tenant t1; has tenant-dup "$tmp/err" "already exists"
  check tenant-bad 1 "$BIN" tenant add --db "$db" --tenant "bad id"
  check merchant-no-tenant 1 "$BIN" merchant add --db "$db" --tenant nobody --merchant m1
  check merchant 0 "$BIN" merchant add --db "$db" --tenant t1 --merchant m1
  # channel set: the API options are validated before anything is stored
  local A=(channel set --db "$db" --tenant t1 --channel alipay --master-key-file "$tmp/master.key"
           --app-id 2021000000000001 --alipay-public-key-file "$tmp/sim/alipay_public_key.pem")
  check alipay-serial 2 "$BIN" "${A[@]}" --merchant-private-key-file "$tmp/sim/merchant_private_key.pem" --merchant-serial 5A
  has alipay-serial "$tmp/err" "for wechatpay only"
  check alipay-base 2 "$BIN" "${A[@]}" --api-base-url http://example.com/gateway.do
  check alipay-notify 2 "$BIN" "${A[@]}" --notify-url "ftp://example.com/x"
  check alipay-pubkey-as-key 1 "$BIN" "${A[@]}" --merchant-private-key-file "$tmp/sim/alipay_public_key.pem"
  check alipay 0 "$BIN" "${A[@]}" --merchant-private-key-file "$tmp/sim/merchant_private_key.pem" \
    --notify-url http://127.0.0.1:1/notify/alipay/t1 --api-base-url https://openapi.alipay.com/gateway.do
  if grep -q "PRIVATE KEY" "$tmp/out" "$tmp/err"; then echo "FAIL alipay: the key was printed"; fails=$((fails+1)); else passes=$((passes+1)); fi
  for a in -1 0 1.5 abc 1e3 100000000000000000000; do
    check "amount-$a" 2 "$BIN" order create --db "$db" --tenant t1 --merchant m1 --out-trade-no X --amount "$a"
  done
  check currency-bad 1 "$BIN" order create --db "$db" --tenant t1 --merchant m1 --out-trade-no X --amount 1 --currency XYZ
  check merchant-unknown 1 "$BIN" order create --db "$db" --tenant t1 --merchant m9 --out-trade-no X --amount 1
  check order 0 "$BIN" order create --db "$db" --tenant t1 --merchant m1 --out-trade-no ORD-1 --amount 100
  check order-same 0 "$BIN" order create --db "$db" --tenant t1 --merchant m1 --out-trade-no ORD-1 --amount 100
  has order-same "$tmp/out" "already exists with the same fields"
  check order-diff 1 "$BIN" order create --db "$db" --tenant t1 --merchant m1 --out-trade-no ORD-1 --amount 101
  has order-diff "$tmp/err" "exists with amount 100"

  cat >"$tmp/ev.json" <<'EOF'
{"tenant":"t1","channel":"wechatpay","type":"PAY_SUCCESS",
 "channel_txn_id":"4200001234202612020000000001","out_trade_no":"ORD-1",
 "amount":100,"currency":"CNY","source":"callback","occurred_at":"2026-12-02T10:00:00+08:00"}
EOF
  check apply-1 0 "$BIN" apply --db "$db" --event "$tmp/ev.json"; json apply-1 'd=={"outcome":"applied"}'
  check apply-2 0 "$BIN" apply --db "$db" --event "$tmp/ev.json"; json apply-2 'd=={"outcome":"duplicate","layer":1}'
  sed 's/"source":"callback"/"source":"reconciliation"/' "$tmp/ev.json" >"$tmp/replay.json"
  check apply-replay 0 "$BIN" apply --db "$db" --event "$tmp/replay.json"; json apply-replay 'd["outcome"]=="duplicate"'
  sed 's/"amount":100/"amount":1/; s/ORD-1/ORD-2/' "$tmp/ev.json" >"$tmp/bad.json"
  check order2 0 "$BIN" order create --db "$db" --tenant t1 --merchant m1 --out-trade-no ORD-2 --amount 200
  check apply-mismatch 0 "$BIN" apply --db "$db" --event "$tmp/bad.json"
  json apply-mismatch 'd=={"outcome":"rejected","reason":"amount_mismatch"}'
  echo '{"tenant":"t1"' >"$tmp/broken.json"
  check apply-malformed 1 "$BIN" apply --db "$db" --event "$tmp/broken.json"; has apply-malformed "$tmp/err" "malformed JSON"
  check apply-missing 1 "$BIN" apply --db "$db" --event "$tmp/nope.json"
  head -c 70000 /dev/zero | tr '\0' ' ' >"$tmp/huge.json"
  check apply-huge 1 "$BIN" apply --db "$db" --event "$tmp/huge.json"; has apply-huge "$tmp/err" "64 KiB"

  check show 0 "$BIN" order show --db "$db" --tenant t1 --out-trade-no ORD-1 --json
  json show 'd["status"]=="PAID" and d["amount"]==100 and d["channel_txn_id"]=="4200001234202612020000000001"'
  check show-missing 1 "$BIN" order show --db "$db" --tenant t1 --out-trade-no NOPE
  check show-other-tenant 1 "$BIN" order show --db "$db" --tenant t2 --out-trade-no ORD-1
  check balances 0 "$BIN" ledger balances --db "$db" --tenant t1 --json
  json balances '{b["account"]:b["balance"] for b in d["balances"]}=={"channel_clearing:wechatpay":100,"merchant_payable:m1":-100}'
  check alerts 0 "$BIN" alerts --db "$db" --tenant t1 --json
  json alerts 'len(d["alerts"])==1 and d["alerts"][0]["reason"]=="amount_mismatch"'
  check verify 0 "$BIN" verify --db "$db"
  check verify-json 0 "$BIN" verify --db "$db" --json; json verify-json 'd["ok"] is True and d["violations"]==[]'
  check env-db 0 env PAYONCE_DB="$db" "$BIN" verify
  "$@" # tamper: one cached balance off by one
  check verify-broken 3 "$BIN" verify --db "$db" --json
  json verify-broken 'd["ok"] is False and d["violations"][0]["check"]=="balance_mismatch"'
  check verify-broken-text 3 "$BIN" verify --db "$db"; has verify-broken-text "$tmp/err" "VIOLATION balance_mismatch"
}

check usage-none 2 "$BIN"
check usage-unknown 2 "$BIN" frobnicate
check usage-option 2 "$BIN" verify --bogus 1
check usage-missing 2 "$BIN" tenant add --db "sqlite:$tmp/u.db"
check help 0 "$BIN" --help; has help "$tmp/out" "order create"
check bad-url 1 "$BIN" verify --db "mysql://x"

# payonce sim receiver, driven as payonce's webhook worker would, signed
# here with openssl (docs/webhooks.md's shell recipe, reversed): down for
# a while (connections refused), then --fail 1, then the event once however
# often it comes; a tampered or stale delivery is refused.
receiver_suite() {
  local port secret=whsec_clitest body sig t
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf '%s\n' "$secret" > "$tmp/hook.secret"
  "$BIN" sim receiver --listen "127.0.0.1:$port" --secret-file "$tmp/hook.secret" \
    --record "$tmp/events.jsonl" --fail 1 --down-ms 700 --duration-s 20 > "$tmp/rx.out" 2>&1 &
  local rx=$!
  body='{"id":"evt_cli1","object":"event","type":"payment.credited","created":1,"tenant":"t1","data":{"object":{"object":"payment","out_trade_no":"O-1"}}}'
  send() { # send BODY T [SENT_BODY] -> HTTP status (000: no connection); signs BODY, sends SENT_BODY
    local s; s=$(printf '%s.%s' "$2" "$1" | openssl dgst -sha256 -hmac "$secret" | awk '{print $2}')
    curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/events" \
      -H "Payonce-Signature: t=$2,v1=$s" -H 'Content-Type: application/json' -d "${3:-$1}"; }
  t=$(date +%s)
  got=$(send "$body" "$t"); [ "$got" = 000 ] && passes=$((passes+1)) || { echo "FAIL receiver down: $got"; fails=$((fails+1)); }
  for _ in $(seq 1 60); do grep -q "listening on port" "$tmp/rx.out" && break; sleep 0.05; done
  got="$(send "$body" "$t") $(send "$body" "$t") $(send "$body" "$t")"
  [ "$got" = "500 200 200" ] && passes=$((passes+1)) || { echo "FAIL receiver --fail 1, then twice: $got"; fails=$((fails+1)); }
  got=$(send "$body" "$t" "${body/O-1/O-2}"); sig=$(send "$body" "$((t - 400))")
  [ "$got $sig" = "400 400" ] && passes=$((passes+1)) || { echo "FAIL receiver tampered/stale: $got $sig"; fails=$((fails+1)); }
  kill "$rx"; wait "$rx" 2>/dev/null
  [ "$(wc -l < "$tmp/events.jsonl")" = 1 ] && passes=$((passes+1)) || { echo "FAIL receiver recorded $(wc -l < "$tmp/events.jsonl") events, expected 1"; fails=$((fails+1)); }
  has receiver-summary "$tmp/rx.out" "5 deliveries, 1 events acted on, 1 duplicates ignored, 2 bad signatures"
}
receiver_suite

TAMPER_SQL="UPDATE account_balance SET balance = balance + 1 WHERE account = 'merchant_payable:m1'"
"$BIN" sim keys --dir "$tmp/sim" --tenant t1 >/dev/null || { echo "FAIL sim keys"; exit 1; }
head -c 32 /dev/urandom > "$tmp/master.key"
run_suite "sqlite:$tmp/cli.db" python3 -c "import sqlite3; c=sqlite3.connect('$tmp/cli.db'); c.execute(\"$TAMPER_SQL\"); c.commit()"
if [ -n "${PAYONCE_TEST_PG:-}" ]; then
  dbname="po_cli_$$"
  psql -q "$PAYONCE_TEST_PG" -c "CREATE DATABASE $dbname" >/dev/null
  pgurl="${PAYONCE_TEST_PG%/*}/$dbname"
  run_suite "$pgurl" psql -q "$pgurl" -c "$TAMPER_SQL"
  psql -q "$PAYONCE_TEST_PG" -c "DROP DATABASE $dbname WITH (FORCE)" >/dev/null
elif [ -n "${PAYONCE_REQUIRE_PG:-}" ]; then
  echo "FAIL: PAYONCE_REQUIRE_PG set but no PAYONCE_TEST_PG"; fails=$((fails+1))
fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
