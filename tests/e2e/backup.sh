#!/usr/bin/env bash
# backup.sh PAYONCE BACKEND — backup and restore (docs/operations.md,
# "Backup and restore"):
#   sqlite    payonce backup while payments are being credited (the copy is
#             one consistent moment: verify clean, as many journals as paid
#             orders), payonce restore into a new file (verify clean, the
#             balances of the live database once it is quiet); refusals that
#             change nothing: an existing target, a truncated backup, a file
#             that is not a payonce database, PostgreSQL URLs; and a backup
#             tampered with (a planted admin operator, session or API key, a
#             moved webhook URL, a channel account, an edited callback body,
#             its manifest remade, none, another master key): restore refuses
#             it (exit 3), naming what differs, writing nothing
#   postgres  the documented procedure: pg_dump -Fc, pg_restore into a new
#             database, payonce verify and the same balances; and payonce
#             migrate-store of a SQLite tenant set into a new PostgreSQL
#             database, verified on both sides, every listing equal
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh" "$1" "$2" backup
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
P=$BIN
$P migrate >/dev/null || exit 1
$P tenant add --tenant t1 >/dev/null && $P merchant add --tenant t1 --merchant m1 >/dev/null || exit 1
N=40
make_orders B 1 "$N" 100 || exit 1
event() { printf '{"tenant":"t1","channel":"wechatpay","type":"PAY_SUCCESS","channel_txn_id":"42000000000000000000000%05d","out_trade_no":"B-%d","amount":%d,"currency":"CNY","source":"callback","occurred_at":"2026-12-04T10:00:00+08:00"}' "$1" "$1" "$((100 + $1))"; }
balances() { $P ledger balances --tenant t1 --json --db "$1" | jq_ 'sorted((b["account"], b["balance"]) for b in d["balances"])'; }

if [ "$BACKEND" = sqlite ]; then
  live=${PAYONCE_DB#sqlite:}
  # payments credited one after another while the backups are taken
  (for i in $(seq 1 $N); do event "$i" | $P apply --event - >/dev/null; done) & writer=$!; bg_pids+=($writer)
  sleep 0.5
  $P backup --to mid.db --json > mid.json; rc=$?
  check "backup while writing: exit 0" "$rc" 0
  check "backup while writing: verify clean" "$(jq_ '(d["ok"], d["violations"])' < mid.json)" "(True, 0)"
  wait "$writer"
  $P backup --to end.db > end.out; check "backup after: exit 0" "$?" 0
  check "backup: mode 0600" "$(stat -c %a end.db)" 600
  check "backup: one file (no -wal or -shm beside it)" "$(ls end.db* mid.db* | tr '\n' ' ')" "end.db mid.db "
  count() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])" "$@"; }
  paid_mid=$(count mid.db "SELECT COUNT(*) FROM pay_order WHERE status = 'PAID'")
  pay_mid=$(count mid.db "SELECT COUNT(*) FROM journal WHERE kind = 'PAY'")
  check "mid backup: a moment (as many payment journals as paid orders)" "$pay_mid" "$paid_mid"
  [ "$paid_mid" -ge 1 ] && [ "$paid_mid" -le "$N" ] && passes=$((passes+1)) || { echo "FAIL mid backup: $paid_mid paid"; fails=$((fails+1)); }
  # restore: a new database, checked, the live balances
  $P restore --from end.db --db "sqlite:$work/restored.db" > r.out; check "restore: exit 0" "$?" 0
  grep -q "verify: ok" r.out && passes=$((passes+1)) || { echo "FAIL restore said: $(cat r.out)"; fails=$((fails+1)); }
  check "restore: every payment" "$(count restored.db "SELECT COUNT(*) FROM pay_order WHERE status = 'PAID'")" "$N"
  check "restore: the live balances" "$(balances "sqlite:$work/restored.db")" "$(balances "$PAYONCE_DB")"
  $P verify --db "sqlite:$work/restored.db" >/dev/null; check "restore: payonce verify" "$?" 0
  # the restored database takes payments: it is a payonce database, not a dump
  $P order create --db "sqlite:$work/restored.db" --tenant t1 --merchant m1 --out-trade-no B-NEW --amount 5 >/dev/null
  check "restored: writable" "$?" 0
  $P restore --from mid.db --db "sqlite:$work/restored.db" 2> exists.err; check "restore over a database: refused" "$?" 1
  grep -q "exists: name a new file" exists.err && passes=$((passes+1)) || { echo "FAIL: $(cat exists.err)"; fails=$((fails+1)); }
  check "restore over a database: untouched" "$(count restored.db "SELECT COUNT(*) FROM pay_order")" "$((N + 1))"
  $P backup --to end.db 2>/dev/null; check "backup over a file: refused" "$?" 1
  head -c 20000 end.db > trunc.db
  $P restore --from trunc.db --db "sqlite:$work/t.db" 2> trunc.err; check "truncated backup: refused" "$?" 1
  [ ! -e t.db ] && passes=$((passes+1)) || { echo "FAIL truncated backup: a target was created"; fails=$((fails+1)); }
  python3 -c "import sqlite3; c=sqlite3.connect('other.db'); c.execute('CREATE TABLE x(a)'); c.commit()"
  $P restore --from other.db --db "sqlite:$work/o.db" 2> other.err; check "not payonce's: refused" "$?" 1
  grep -q "not a payonce database" other.err && passes=$((passes+1)) || { echo "FAIL: $(cat other.err)"; fails=$((fails+1)); }
  [ ! -e o.db ] && passes=$((passes+1)) || { echo "FAIL not payonce's: a target was created"; fails=$((fails+1)); }
  # a backup of a database whose ledger is broken says so (exit 3) and keeps the copy
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE account_balance SET balance = balance + 1 WHERE account = 'merchant_payable:m1'\"); c.commit()" "$live"
  $P backup --to broken.db > /dev/null 2> broken.err; check "backup of a broken ledger: exit 3" "$?" 3
  [ -s broken.db ] && passes=$((passes+1)) || { echo "FAIL: the broken ledger's copy was not kept"; fails=$((fails+1)); }
  # --- a tampered backup is refused, naming what differs (issue 44 item 5) ---
  # The live database gets what a backup must vouch for: an admin operator,
  # an API key, a webhook endpoint, channel accounts, and callback records
  # sealed into a keyed chain (a payment through serve and the simulator).
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE account_balance SET balance = balance - 1 WHERE account = 'merchant_payable:m1'\"); c.commit()" "$live"
  printf 'Bk7!rT9-Qm2wZx\n' > root.pw
  $P operator add --name root --role admin --password-file root.pw >/dev/null || exit 1
  $P apikey create --tenant t1 > key.txt || exit 1
  $P webhook add --tenant t1 --url https://hooks.example/payonce >/dev/null || exit 1
  $P sim keys --dir sim --tenant t1 --mode pubkey > keys.out || exit 1
  grep -A20 '^Configure' keys.out | grep -E '^payonce|^  ' | sed "s#^payonce #$P #" | bash >/dev/null || exit 1
  $P order create --tenant t1 --merchant m1 --out-trade-no BK-PAID-1 --amount 300 >/dev/null
  $P serve --listen 127.0.0.1:0 --insecure-dev > serve.out 2> serve.log & spid=$!; bg_pids+=($spid)
  sport=$(port_of serve.out)
  $P sim pay --dir sim --notify-url "http://127.0.0.1:$sport/notify/wechatpay/t1" --order BK-PAID-1:300 --copies 2 > pay.out 2>&1
  # a backup while serve has not sealed the callback just recorded (it seals
  # every two seconds; stopped here so that it cannot): the copy seals it,
  # the live database is left as it is, and the copy restores (issue 45:
  # such a backup was refused, "record(s) … are not sealed")
  kill -STOP "$spid"
  unsealed=$(count "$live" "SELECT COUNT(*) FROM callback_record WHERE seq IS NULL")
  $P backup --to live-unsealed.db > lu.out 2> lu.err; rc=$?
  if [ "$unsealed" -gt 0 ]; then
    check "backup of a live gateway's records not sealed yet: exit 0" "$rc $(cat lu.err)" "0 "
    check "  the copy's records sealed" "$(count live-unsealed.db "SELECT COUNT(*) FROM callback_record WHERE seq IS NULL")" 0
    check "  the live database left as it was" "$(count "$live" "SELECT COUNT(*) FROM callback_record WHERE seq IS NULL")" "$unsealed"
    $P restore --from live-unsealed.db --db "sqlite:$work/lu-r.db" > /dev/null 2> lu-r.err
    check "  the copy restores" "$? $(cat lu-r.err)" "0 "
  else
    echo "note: serve sealed the record before it was stopped: the unsealed backup was not exercised this time"
  fi
  kill -CONT "$spid"
  kill "$spid"; wait "$spid" 2>/dev/null
  $P audit seal >/dev/null
  check "tamper: the live chain keyed and whole" "$($P audit verify --json | jq_ '(d["ok"], d["records"] >= 2, d["unkeyed_chains"])')" "(True, True, 0)"
  $P backup --to good.db > good.out; check "tamper: a backup with its manifest" "$?" 0
  $P restore --from good.db --db "sqlite:$work/good-r.db" > /dev/null; check "tamper: the untouched backup restores" "$?" 0
  # tamper FILE SQL: a copy of the backup changed by SQL, then restored;
  # prints the exit status and keeps restore's stderr in FILE.err
  tamper() {
    cp good.db "$1.db"
    python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()" "$1.db" "$2"
    $P restore --from "$1.db" --db "sqlite:$work/$1-r.db" > /dev/null 2> "$1.err"; echo "$?"
    [ ! -e "$1-r.db" ] || echo "a target was written"
  }
  known_hash=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT pw_hash FROM operator WHERE name = 'root'\").fetchone()[0])" good.db)
  check "tamper: a planted admin operator refused" "$(tamper op "INSERT INTO operator (name, role, pw_hash, created_at) VALUES ('eve', 'admin', '$known_hash', '2026-01-01T00:00:00Z')")" 3
  check "tamper: the planted admin named" "$(grep -c 'operator eve: added after the backup was made' op.err)" 1
  check "tamper: a planted session refused" "$(tamper ses "INSERT INTO operator_session (token_hash, name, csrf, created_at, expires_at) VALUES ('$(printf %064d 7)', 'root', 'x', '2026-01-01T00:00:00Z', '2999-01-01T00:00:00Z')")" 3
  check "tamper: a planted API key refused" "$(tamper key "INSERT INTO api_key (tenant_id, key_id, key_hash, created_at) VALUES ('t1', 'ak_planted', '$(printf %064d 1)', '2026-01-01T00:00:00Z')")" 3
  check "tamper: the planted key named" "$(grep -c 'api_key t1/ak_planted: added' key.err)" 1
  check "tamper: a moved webhook URL refused" "$(tamper hook "UPDATE webhook_endpoint SET url = 'https://evil.example/x'")" 3
  check "tamper: the endpoint named as changed" "$(grep -c 'webhook_endpoint t1/.*: changed after the backup was made' hook.err)" 1
  check "tamper: a channel account changed refused" "$(tamper acct "UPDATE channel_account SET config = replace(config, 'mchid', 'mchid') || ' ' WHERE channel = 'wechatpay'")" 3
  check "tamper: an edited callback body refused" "$(tamper body "UPDATE callback_body SET body = 'eyJhbW91bnQiOjF9' WHERE rowid = (SELECT MIN(rowid) FROM callback_body)")" 3
  check "tamper: the edited record named by the chain" "$(grep -c 'callback chain of t1: record .* was changed' body.err)" 1
  check "tamper: the manifest edited to match: its MAC refuses it" "$(tamper mac "INSERT INTO operator (name, role, pw_hash, created_at) VALUES ('eve', 'admin', '$known_hash', '2026-01-01T00:00:00Z'); UPDATE backup_manifest SET manifest = replace(manifest, '\"operator\":{', '\"operator\":{\"eve\":\"x\",')")" 3
  check "tamper: the MAC named" "$(grep -c 'does not match its MAC' mac.err)" 1
  check "tamper: no manifest refused" "$(tamper none "DELETE FROM backup_manifest")" 3
  check "tamper: no manifest named" "$(grep -c 'has no manifest' none.err)" 1
  head -c 32 /dev/urandom > other.key && chmod 600 other.key
  $P backup --to otherkey.db --master-key-file other.key > /dev/null 2>&1
  $P restore --from otherkey.db --db "sqlite:$work/otherkey-r.db" > /dev/null 2> otherkey.err; check "tamper: a backup of another master key refused" "$?" 3
  check "tamper: another master key named" "$(grep -c 'made under another master key' otherkey.err)" 1
  fig "# backup[sqlite]: backup while $N payments were credited one by one (a consistent moment: $paid_mid paid, $pay_mid payment journals), restore into a new file (verify clean, balances equal); existing target, truncated backup, foreign file refused with nothing written"
else
  $P backup --to x.db 2> pg.err; check "backup of PostgreSQL: refused, pointing at pg_dump" "$?" 2
  grep -q "pg_dump" pg.err && passes=$((passes+1)) || { echo "FAIL: $(cat pg.err)"; fails=$((fails+1)); }
  for i in $(seq 1 $N); do event "$i" | $P apply --event - >/dev/null; done
  # the documented procedure (docs/operations.md)
  pg_dump -Fc -f payonce.dump "$PAYONCE_DB"; check "pg_dump" "$?" 0
  rdb="${dbname}_r"
  psql -q "$PAYONCE_TEST_PG" -c "CREATE DATABASE $rdb" >/dev/null
  restored="${PAYONCE_TEST_PG%/*}/$rdb"
  pg_restore --no-owner -d "$restored" payonce.dump; check "pg_restore" "$?" 0
  $P verify --db "$restored" >/dev/null; check "restored: payonce verify" "$?" 0
  check "restored: the balances" "$(balances "$restored")" "$(balances "$PAYONCE_DB")"
  $P order create --db "$restored" --tenant t1 --merchant m1 --out-trade-no B-NEW --amount 5 >/dev/null
  check "restored: writable" "$?" 0
  psql -q "$PAYONCE_TEST_PG" -c "DROP DATABASE $rdb WITH (FORCE)" >/dev/null
  fig "# backup[postgres]: pg_dump -Fc / pg_restore of $N payments into a new database: verify clean, balances equal, writable"
  # migrate-store: a SQLite tenant set (payments, a refused one with its
  # alert, a webhook endpoint and its events, an API key) into a new
  # PostgreSQL database, proved by verify on both sides and equal answers
  S="sqlite:$work/src.db"
  $P migrate --db "$S" >/dev/null && $P tenant add --db "$S" --tenant t1 >/dev/null && $P merchant add --db "$S" --tenant t1 --merchant m1 >/dev/null
  make_orders B 1 "$N" 100 --db "$S" || exit 1
  for i in $(seq 1 $N); do event "$i" | $P apply --db "$S" --event - >/dev/null; done
  $P order create --db "$S" --tenant t1 --merchant m1 --out-trade-no B-BAD --amount 500 >/dev/null
  printf '{"tenant":"t1","channel":"wechatpay","type":"PAY_SUCCESS","channel_txn_id":"4200000000000000000000099999","out_trade_no":"B-BAD","amount":1,"currency":"CNY","source":"callback","occurred_at":"2026-12-04T10:00:00+08:00"}' | $P apply --db "$S" --event - >/dev/null
  $P webhook add --db "$S" --tenant t1 --url https://hooks.example/h >/dev/null
  $P apikey create --db "$S" --tenant t1 >/dev/null
  mdb="${dbname}_m"
  psql -q "$PAYONCE_TEST_PG" -c "CREATE DATABASE $mdb" >/dev/null
  moved="${PAYONCE_TEST_PG%/*}/$mdb"
  $P migrate-store --from "$S" --to "$moved" --json > mv.json; check "migrate-store: exit 0" "$?" 0
  check "migrate-store: verify both sides, nothing written after" "$(jq_ '(d["ok"], d["source_violations"], d["target_violations"], d["written_after"])' < mv.json)" "(True, 0, 0, 0)"
  check "migrate-store: every payment journal" "$(jq_ 'd["tables"]["journal"]' < mv.json)" "$N"
  check "migrate-store: the balances" "$(balances "$moved")" "$(balances "$S")"
  same() { check "migrate-store: $1" "$($P "$@" --db "$moved" --json 2>&1)" "$($P "$@" --db "$S" --json 2>&1)"; }
  same alerts --tenant t1
  same webhook list --tenant t1
  same apikey list --tenant t1
  same order list --tenant t1
  $P verify --db "$moved" >/dev/null; check "moved: payonce verify" "$?" 0
  # the moved database goes on: a new payment credited there
  $P order create --db "$moved" --tenant t1 --merchant m1 --out-trade-no B-NEXT --amount 7 >/dev/null
  printf '{"tenant":"t1","channel":"wechatpay","type":"PAY_SUCCESS","channel_txn_id":"4200000000000000000000088888","out_trade_no":"B-NEXT","amount":7,"currency":"CNY","source":"callback","occurred_at":"2026-12-04T10:00:00+08:00"}' | $P apply --db "$moved" --event - > next.json
  check "moved: a new payment applied" "$(cat next.json)" '{"outcome":"applied"}'
  # into a database that has rows: refused, nothing written
  $P migrate-store --from "$S" --to "$moved" 2> again.err; check "migrate-store into rows: refused" "$?" 1
  grep -q "the target is not empty" again.err && passes=$((passes+1)) || { echo "FAIL: $(cat again.err)"; fails=$((fails+1)); }
  check "migrate-store into rows: unchanged" "$(psql -qtA "$moved" -c "SELECT COUNT(*) FROM pay_order")" "$((N + 2))"
  psql -q "$PAYONCE_TEST_PG" -c "DROP DATABASE $mdb WITH (FORCE)" >/dev/null
  fig "# migrate-store: $(jq_ 'd["rows"]' < mv.json) rows of a SQLite tenant set ($N payments, an alert, a webhook endpoint, an API key) into a new PostgreSQL database: verify clean on both sides, balances and every listing equal, the moved database credits a new payment; a target with rows refused"
fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
