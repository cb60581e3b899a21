#!/usr/bin/env bash
# recon_e2e.sh PAYONCE BACKEND — reconciliation end to end, on sqlite or
# postgres (PAYONCE_TEST_PG):
#   1. the real WeChat Pay bill (tests/data/vectors/wechatpay_tradebill_all.csv)
#      against orders created to match it: 45 rows, summary agrees, every row
#      through the engine; importing it again changes nothing
#   2. tampered bills (summary mismatch, bad amount, truncated, wrong column
#      count) are refused with clear errors and change nothing
#   3. payments the simulator "lost" are found by active query and by bill
#      import and credited once; a replay racing the late live callback (both
#      orders of arrival, and concurrently) credits once
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); VECTORS=$HERE/../data/vectors
. "$HERE/lib.sh" "$1" "$2" recon_e2e
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

P=$BIN
$P migrate >/dev/null || exit 1
count() { # count SQL: one number from the database
  if [ "$BACKEND" = postgres ]; then psql -qtA "$PAYONCE_DB" -c "$1"
  else python3 -c "import sqlite3,sys; print(sqlite3.connect('$work/recon_e2e.db').execute(sys.argv[1]).fetchone()[0])" "$1"; fi
}
fingerprint() { # everything an import could change
  for t in notify_log journal posting alert recon_run recon_fee pay_order refund; do
    printf '%s ' "$(count "SELECT COUNT(*) FROM $t")"
  done
  printf '%s ' "$(count "SELECT COALESCE(SUM(balance * balance), 0) FROM account_balance")"
  count "SELECT COUNT(*) FROM pay_order WHERE status = 'PAID'"
}

# ---- 1. the real bill ----
$P tenant add --tenant vec >/dev/null && $P merchant add --tenant vec --merchant m1 >/dev/null
head -c 32 /dev/urandom | base64 | head -c 32 > apiv3.key
$P channel set --tenant vec --channel wechatpay --mchid 1921000401 --apiv3-key-file apiv3.key \
  --platform-cert-file "$VECTORS/wechatpay_test_platform_cert.pem" >/dev/null || exit 1
python3 - "$VECTORS/wechatpay_tradebill_all.csv" "$P" > setup.sh <<'EOF'
import sys
raw = open(sys.argv[1], 'rb').read().decode('utf-8-sig').replace('\r\n', '\n').split('\n')
rows = [l for l in raw[1:] if l.startswith('`')][:-1]
P = sys.argv[2]
# every order in one `order import`, then the earlier payments and refunds
print(f"{P} order import --tenant vec --file - >/dev/null <<'ORDERS'")
for r in rows:
    f = [x[1:] for x in r.split(',')]
    fen = lambda s: int(round(float(s) * 100))
    print(f"m1,{f[6]},{fen(f[24]) if f[9] == 'SUCCESS' else fen(f[16])}")
print("ORDERS")
for r in rows:
    f = [x[1:] for x in r.split(',')]
    fen = lambda s: int(round(float(s) * 100))
    # SUCCESS: the order the payment is for, still PAYING: the callback was missed;
    # else an order paid earlier, with the refund requested and not yet confirmed
    if f[9] != 'SUCCESS':
        amt = fen(f[16])
        print(f"""printf '%s' '{{"tenant":"vec","channel":"wechatpay","type":"PAY_SUCCESS","channel_txn_id":"{f[5]}","out_trade_no":"{f[6]}","amount":{amt},"currency":"CNY"}}' > ev.json && {P} apply --event ev.json >/dev/null""")
        print(f"{P} refund create --tenant vec --out-trade-no {f[6]} --out-refund-no {f[15]} --amount {amt} >/dev/null")
EOF
bash setup.sh || exit 1
$P recon import --tenant vec --channel wechatpay "$VECTORS/wechatpay_tradebill_all.csv" --json > import1.json
check "vector: rows" "$(jq_ 'd["rows"]' < import1.json)" 45
check "vector: payments / refunds" "$(jq_ '(d["payments"]["count"], d["refunds"]["count"])' < import1.json)" "(31, 14)"
check "vector: totals (fen)" "$(jq_ '(d["payments"]["amount"], d["refunds"]["amount"])' < import1.json)" "(47, 14)"
# Two SUCCESS rows of this real bill carry one 微信订单号 for two orders: the
# second is a conflict (alert), never a silent duplicate.
check "vector: replayed (29 payments + 14 refunds)" "$(jq_ 'd["replayed"]["count"]' < import1.json)" 43
check "vector: conflicting rows alerted" "$(jq_ 'd["mismatched"]' < import1.json)" 2
check "vector: fees 0.08 yuan" "$(jq_ 'd["fees_milli"]' < import1.json)" 8000
check "vector: conflict alerts" "$($P alerts --tenant vec --json | jq_ 'sum(1 for a in d["alerts"] if a["reason"] == "conflicting_duplicate")')" 2
check "vector: verify" "$($P verify >/dev/null 2>&1; echo $?)" 0
# the money report over the bill's tenant (issue 26 item 3): the bill's fees
# by its trade dates, the payments and refunds it credited, reconciled
$P report --tenant vec --json > report.json
check "report: the bill's fees (milli-fen)" "$(jq_ 'sum(r["fees_milli"] for r in d["rows"])' < report.json)" 8000
check "report: fee days are the bill's trade dates" "$(jq_ 'sorted(set(r["day"] for r in d["rows"] if r["fees_milli"]))' < report.json)" "['2019-02-19']"
check "report: reconciled" "$(jq_ '(d["reconciled"], d["accounts_checked"])' < report.json)" "(True, 2)"
before=$(fingerprint)
$P recon import --tenant vec --channel wechatpay "$VECTORS/wechatpay_tradebill_all.csv" --json > import2.json
check "vector: second import changes nothing" "$(jq_ 'd["already_imported"]' < import2.json) $(fingerprint)" "True $before"
# what a person reads (issue 45 item 4): the fees in yuan with the currency,
# as every amount, in the import's report and the money report
$P recon import --tenant vec --channel wechatpay "$VECTORS/wechatpay_tradebill_all.csv" > import3.txt
$P report --tenant vec > report.txt
fees=$(sed -n 's/^  channel fees  *//p' import3.txt)
check "vector: the text report's fees" "$fees" "0.08 CNY"
check "report: the text's fees" "$(grep -c '^2019-02-19 .* 0.0[0-9]* CNY$' report.txt)" "$(jq_ 'sum(1 for r in d["rows"] if r["day"] == "2019-02-19")' < report.json)"
{ echo "## recon import (text)"; cat import3.txt; echo "## report --tenant vec"; cat report.txt; } > human.txt
python3 "$E2E_DIR/../support/money_check.py" human.txt && passes=$((passes+1)) || fails=$((fails+1))
fig "# recon-e2e[$BACKEND] vector bill: $(jq_ '"%d rows, %d replayed, %d conflicts alerted"%(d["rows"], d["replayed"]["count"], d["mismatched"])' < import1.json), fees $fees; re-import unchanged"

# A large bill (3,000 rows, generated with its summary): progress is shown.
python3 - "$VECTORS/wechatpay_tradebill_all.csv" > large.csv <<'PYEOF'
import sys
raw = open(sys.argv[1], 'rb').read().decode('utf-8-sig').replace('\r\n', '\n').split('\n')
out = ['\ufeff' + raw[0]]
n, total, fee = 3000, 0, 0
for i in range(n):
    amt = 100 + i % 50
    total += amt
    f = ['2019-02-20 10:00:00', 'wxab8acd895ab1638a', '1921000401', '0', '', '42%026d' % i,
         'LARGE-%d' % i, 'oPayer', 'JSAPI', 'SUCCESS', 'OTHERS', 'CNY', '%d.%02d' % (amt // 100, amt % 100),
         '0.00', '0', '0', '0.00', '0.00', '', '', 'item', '', '0.00000', '0.60%',
         '%d.%02d' % (amt // 100, amt % 100), '0.00', '']
    out.append(','.join('`' + x for x in f))
out.append('总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额')
t = '%d.%02d' % (total // 100, total % 100)
out.append(','.join('`' + x for x in ['%d' % n, t, '0.00', '0.00', '0.00', t, '0.00']))
sys.stdout.write('\r\n'.join(out) + '\r\n')
PYEOF
$P recon import --tenant vec --channel wechatpay large.csv --json > large.json 2> large.err
check "large bill: 3000 rows imported" "$(jq_ 'd["rows"]' < large.json)" 3000
check "large bill: progress shown" "$(grep -c 'rows$' large.err)" 3
check "large bill: rows for orders we do not have are alerted" "$(jq_ 'd["mismatched"]' < large.json)" 3000
fig "# recon-e2e[$BACKEND] a 3,000-row bill: progress shown, $(jq_ 'd["mismatched"]' < large.json) unknown transactions alerted"

# ---- 2. tampered bills ----
python3 - "$VECTORS/wechatpay_tradebill_all.csv" <<'EOF'
import sys
raw = open(sys.argv[1], 'rb').read()
lines = raw.split(b'\r\n')
open('t-summary.csv', 'wb').write(raw.replace(b'`45.0,`0.47', b'`45.0,`0.48'))
open('t-amount.csv', 'wb').write(raw.replace(b'`0.03,`0.00,`0,', b'`0.0x,`0.00,`0,', 1))
open('t-truncated.csv', 'wb').write(b'\r\n'.join(lines[:-3]) + b'\r\n')
bad = lines[5].split(b',')
open('t-columns.csv', 'wb').write(b'\r\n'.join(lines[:5] + [b','.join(bad[:-2])] + lines[6:]))
open('t-merchant.csv', 'wb').write(raw.replace(b'`1921000401,', b'`1921000999,', 1))
EOF
before=$(fingerprint)
for t in summary:"does not agree" amount:"not a decimal" truncated:"truncated" columns:"columns, the header has 27" merchant:"row 1 is for merchant 1921000999, the tenant's is 1921000401"; do
  f=t-${t%%:*}.csv; want=${t#*:}
  $P recon import --tenant vec --channel wechatpay --force "$f" > out.txt 2> err.txt; rc=$?
  check "tampered ${t%%:*}: refused" "$rc" 1
  check "tampered ${t%%:*}: message" "$(grep -c "$want" err.txt)" 1
done
check "tampered bills changed nothing" "$(fingerprint)" "$before"
fig "# recon-e2e[$BACKEND] tampered bills (summary, amount, truncated, columns, another merchant's row) refused, nothing changed"

# ---- 3. lost payments, the simulator, active query, races ----
$P tenant add --tenant t2 >/dev/null && $P merchant add --tenant t2 --merchant m1 >/dev/null
$P sim keys --dir sim --tenant t2 > keys.out || exit 1
sim_with_api sim keys.out || exit 1
$P serve --listen 127.0.0.1:0 --query-interval 0 > gw.out 2>gw.log & gw_pid=$!; bg_pids+=($gw_pid)
gport=$(port_of gw.out)
URL=http://127.0.0.1:$gport/notify/wechatpay/t2
orders() { for o in "$@"; do echo "m1,${o%%:*},${o##*:}"; done | $P order import --tenant t2 --file - >/dev/null; }
orders Q-0001:100 Q-0002:200
status() { $P order show --tenant t2 --out-trade-no "$1" --json | jq_ 'd["status"]'; }
# Q-0001 lost; Q-0002 delivered: active query finds Q-0001 and leaves Q-0002 alone.
$P sim pay --dir sim --order Q-0001:100 --lose >/dev/null
$P sim pay --dir sim --order Q-0002:200 --notify-url "$URL" >/dev/null
$P recon query --tenant t2 --min-age 0 --json > q1.json
check "active query: found the lost payment" "$(jq_ '(d["queried"], d["paid"], d["replayed"])' < q1.json)" "(1, 1, 1)"
check "active query: Q-0001 paid" "$(status Q-0001)" PAID
$P recon query --tenant t2 --min-age 0 --json > q2.json
check "active query again: nothing left" "$(jq_ 'd["queried"]' < q2.json)" 0
# A failing query says why without --log-level (issue 26): the channel
# answers 500 once; the exit is 1, the first failure named; then it credits.
orders F-0001:150
$P sim pay --dir sim --order F-0001:150 --lose >/dev/null
echo "GET /v3/pay/transactions/out-trade-no 500 1" | sim_faults sim
$P recon query --tenant t2 --min-age 0 --json > qf.json 2> qf.err; qrc=$?
check "failed query: exit 1" "$qrc" 1
check "failed query: counted, the first named" "$(jq_ '(d["failed"], d["first_failure"])' < qf.json)" "(1, 'F-0001: HTTP 500 SYSTEM_ERROR')"
check "failed query: said on stderr" "$(cat qf.err)" "payonce: 1 order queries failed; the first: F-0001: HTTP 500 SYSTEM_ERROR"
$P recon query --tenant t2 --min-age 0 --json > qf2.json
check "failed query, again: credited" "$(jq_ '(d["failed"], d["replayed"])' < qf2.json)" "(0, 1)"
# B-0001 lost, found by the bill.
orders B-0001:300 R-0001:400 R-0002:500 R-0003:600
$P sim pay --dir sim --order B-0001:300 --lose >/dev/null
today=$(date -u -d '+8 hours' +%F)   # bills are dated in Beijing time
wx_get sim "/v3/bill/tradebill?bill_date=$today&bill_type=ALL" > bill.json
wx_get sim "$(jq_ 'd["download_url"]' < bill.json)" > sim-bill-1.csv
check "bill: SHA1 as announced" "$(sha1sum sim-bill-1.csv | cut -c1-40)" "$(jq_ 'd["hash_value"]' < bill.json)"
$P recon import --tenant t2 --channel wechatpay sim-bill-1.csv --json > b1.json
check "bill import: B-0001 replayed, Q-0001/Q-0002/F-0001 already there" "$(jq_ '(d["replayed"]["count"], d["matched"])' < b1.json)" "(1, 3)"
check "bill import: B-0001 paid" "$(status B-0001)" PAID
# Races: the replay and the late live callback carry the same key.
$P sim pay --dir sim --order R-0001:400 --txn 4200000000000000000000000R01 --lose >/dev/null
$P sim pay --dir sim --order R-0002:500 --txn 4200000000000000000000000R02 --lose >/dev/null
$P sim pay --dir sim --order R-0003:600 --txn 4200000000000000000000000R03 --lose >/dev/null
wx_get sim "$(wx_get sim "/v3/bill/tradebill?bill_date=$today" | jq_ 'd["download_url"]')" > sim-bill-2.csv
# R-0001: the late callback first, then the replay.
$P sim pay --dir sim --order R-0001:400 --txn 4200000000000000000000000R01 --notify-url "$URL" --copies 2 > late1.out
# R-0002: the replay first (below), then the late callback. R-0003: both at once.
$P sim pay --dir sim --order R-0003:600 --txn 4200000000000000000000000R03 --notify-url "$URL" --copies 4 --concurrent > late3.out &
lp=$!
$P recon import --tenant t2 --channel wechatpay sim-bill-2.csv --json > b2.json
wait $lp
$P sim pay --dir sim --order R-0002:500 --txn 4200000000000000000000000R02 --notify-url "$URL" --copies 2 > late2.out
for o in R-0001 R-0002 R-0003; do check "race: $o paid" "$(status $o)" PAID; done
check "race: every live delivery acked" "$(cat late1.out late2.out late3.out | grep -c '^sim: .*"ok":true')" 3
check "race: one credit per order (verify: one payment journal per PAID order)" "$($P verify >/dev/null 2>&1; echo $?)" 0
bal=$($P ledger balances --tenant t2 --json | jq_ "{b['account']:b['balance'] for b in d['balances']}.get('channel_clearing:wechatpay')")
check "race: clearing = 100+200+150+300+400+500+600" "$bal" 2250
# Differences: the channel's amount differs; a transaction we have no order
# for; our PAID order the channel's bill does not have.
orders A-0001:700 M-0001:800
$P sim pay --dir sim --order A-0001:701 --lose >/dev/null
$P sim pay --dir sim --order X-0001:900 --lose >/dev/null
printf '%s' '{"tenant":"t2","channel":"wechatpay","type":"PAY_SUCCESS","channel_txn_id":"4200000000000000000000000M01","out_trade_no":"M-0001","amount":800,"currency":"CNY"}' > m1.json
$P apply --event m1.json >/dev/null
wx_get sim "$(wx_get sim "/v3/bill/tradebill?bill_date=$today" | jq_ 'd["download_url"]')" > sim-bill-3.csv
$P recon import --tenant t2 --channel wechatpay sim-bill-3.csv --json > b3.json
check "differences: 2 mismatched rows, 1 order missing from the bill" "$(jq_ '(d["mismatched"], d["missing_from_bill"])' < b3.json)" "(2, 1)"
alerts_of() { $P alerts --tenant t2 --json | jq_ "sorted(a['reason'] for a in d['alerts'] if a['out_trade_no'] == '$1')"; }
check "differences: amount alert, no credit" "$(alerts_of A-0001) $(status A-0001)" "['amount_mismatch'] PAYING"
check "differences: unknown transaction alert" "$(alerts_of X-0001)" "['unknown_order']"
check "differences: missing-from-bill alert" "$(alerts_of M-0001)" "['missing_from_bill']"
check "runs recorded" "$($P recon runs --tenant t2 --json | jq_ 'len(d["runs"])')" 3
# The other bill types of the day parse and reconcile alike (all already applied).
for type in SUCCESS REFUND; do
  wx_get sim "$(wx_get sim "/v3/bill/tradebill?bill_date=$today&bill_type=$type" | jq_ 'd["download_url"]')" > "bill-$type.csv"
  $P recon import --tenant t2 --channel wechatpay "bill-$type.csv" --json > "b-$type.json" 2> "b-$type.err"
  check "bill type $type imports" "$?" 0
done
check "SUCCESS bill: nothing new to credit" "$(jq_ 'd["replayed"]["count"]' < b-SUCCESS.json)" 0
fig "# recon-e2e[$BACKEND] differences: amount mismatch, unknown transaction, our PAID order missing from the bill -> alerts, no credit"

# The periodic active query inside payonce serve.
kill $gw_pid; wait $gw_pid 2>/dev/null
orders P-0001:1000
$P sim pay --dir sim --order P-0001:1000 --lose >/dev/null
$P serve --listen 127.0.0.1:0 --query-interval 1 --query-min-age 0 > gw2.out 2>gw2.log & gw_pid=$!; bg_pids+=($gw_pid)
for _ in $(seq 1 100); do [ "$(status P-0001)" = PAID ] && break; sleep 0.1; done
check "serve's periodic query credited P-0001" "$(status P-0001)" PAID
check "serve logged the round" "$(grep -c 'active query: .* credited now' gw2.log | awk '{print ($1 > 0)}')" 1
fig "# recon-e2e[$BACKEND] periodic active query inside payonce serve credited a lost payment"

fig "# recon-e2e[$BACKEND] lost payments: found by active query (Q-0001) and by the simulator's bill (B-0001); replay vs late callback before/after/concurrent (R-0001..R-0003): each credited once, clearing $bal"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
