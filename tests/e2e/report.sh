#!/usr/bin/env bash
# report.sh PAYONCE BACKEND — money reports (issue 26 item 3;
# docs/operations.md, "Money reports"): two merchants, two channels, a
# refund and a payment parked in suspense; payonce report's rows are the
# payments to the minor unit, its totals equal the ledger's balances (as
# `ledger balances` gives them), CSV and JSON say the same, a date range
# outside the journals is empty, and a balance changed by hand makes it
# say it does not reconcile (exit 3) naming the account.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh" "$1" "$2" report
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
P=$BIN
$P migrate >/dev/null && $P tenant add --tenant t1 >/dev/null || exit 1
for m in m1 m2; do $P merchant add --tenant t1 --merchant $m >/dev/null; done
$P order create --tenant t1 --merchant m1 --out-trade-no R-1 --amount 1000 >/dev/null
$P order create --tenant t1 --merchant m1 --out-trade-no R-2 --amount 2000 >/dev/null
$P order create --tenant t1 --merchant m2 --out-trade-no R-3 --amount 500 >/dev/null
$P order create --tenant t1 --merchant m2 --out-trade-no R-4 --amount 700 >/dev/null
pay() { printf '{"tenant":"t1","channel":"%s","type":"PAY_SUCCESS","channel_txn_id":"%s","out_trade_no":"%s","amount":%d,"currency":"CNY","source":"callback","occurred_at":"2026-12-04T10:00:00+08:00"}' "$1" "$2" "$3" "$4" | $P apply --event -; }
check "R-1 paid" "$(pay wechatpay 4200000000000000000000000011 R-1 1000)" '{"outcome":"applied"}'
check "R-2 paid" "$(pay alipay 2026120422001400000000000012 R-2 2000)" '{"outcome":"applied"}'
check "R-3 paid" "$(pay wechatpay 4200000000000000000000000013 R-3 500)" '{"outcome":"applied"}'
$P refund create --tenant t1 --out-trade-no R-1 --out-refund-no RF-1 --amount 300 >/dev/null
printf '{"tenant":"t1","channel":"wechatpay","type":"REFUND_SUCCESS","channel_refund_id":"50300000000000000000000011","out_trade_no":"R-1","out_refund_no":"RF-1","amount":300,"currency":"CNY","source":"callback","occurred_at":"2026-12-04T11:00:00+08:00"}' | $P apply --event - > rf.json
check "RF-1 refunded" "$(cat rf.json)" '{"outcome":"applied"}'
$P order close --tenant t1 --out-trade-no R-4 >/dev/null
check "R-4 paid after close: suspense" "$(pay wechatpay 4200000000000000000000000014 R-4 700 | jq_ 'd["outcome"]')" suspense
day=$(date -u +%F)
$P report --tenant t1 --json > r.json; check "report: exit 0" "$?" 0
check "report: rows (day, merchant, channel: journals, gross, refunds, net, suspense in)" \
  "$(jq_ 'sorted((r["day"], r["merchant"], r["channel"], r["journals"], r["gross"], r["refunds"], r["net"], r["suspense_in"]) for r in d["rows"])' < r.json)" \
  "[('$day', '-', 'wechatpay', 1, 0, 0, 0, 700), ('$day', 'm1', 'alipay', 1, 2000, 0, 2000, 0), ('$day', 'm1', 'wechatpay', 2, 1000, 300, 700, 0), ('$day', 'm2', 'wechatpay', 1, 500, 0, 500, 0)]"
check "report: reconciled, every payable and clearing account checked" "$(jq_ '(d["reconciled"], d["accounts_checked"])' < r.json)" "(True, 4)"
# the same totals from the ledger itself: each merchant's net is what its payable owes
nets=$(jq_ 'sorted({m: sum(r["net"] for r in d["rows"] if r["merchant"] == m) for m in ("m1", "m2")}.items())' < r.json)
owed=$($P ledger balances --tenant t1 --json | jq_ 'sorted((b["account"].split(":")[1], -b["balance"]) for b in d["balances"] if b["account"].startswith("merchant_payable:"))')
check "report nets = the merchants' payables" "$nets" "$owed"
clear=$($P ledger balances --tenant t1 --json | jq_ 'sorted((b["account"], b["balance"]) for b in d["balances"] if b["account"].startswith("channel_clearing:") or b["account"] == "suspense")')
check "report: clearing and suspense = the ledger's" "$(jq_ 'sorted([("channel_clearing:alipay", sum(r["gross"] for r in d["rows"] if r["channel"] == "alipay")), ("channel_clearing:wechatpay", sum(r["gross"] - r["refunds"] + r["suspense_in"] for r in d["rows"] if r["channel"] == "wechatpay")), ("suspense", -sum(r["suspense_in"] - r["suspense_out"] for r in d["rows"]))])' < r.json)" "$clear"
$P report --tenant t1 --csv > r.csv; check "csv: exit 0" "$?" 0
check "csv: header and rows" "$(head -1 r.csv),$(($(wc -l < r.csv) - 1))" "day,tenant,merchant,channel,currency,journals,gross_minor,refunds_minor,profit_shares_minor,net_minor,suspense_in_minor,suspense_out_minor,fees_milli,4"
check "csv: m1 wechatpay" "$(grep "^$day,t1,m1,wechatpay," r.csv)" "$day,t1,m1,wechatpay,CNY,2,1000,300,0,700,0,0,0"
$P report --tenant t1 > r.txt; check "text: exit 0" "$?" 0
grep -q "^reconciles to the ledger: 4 accounts" r.txt && passes=$((passes+1)) || { echo "FAIL text: $(cat r.txt)"; fails=$((fails+1)); }
# every amount in major units with its currency (issue 45 item 4)
grep -q "^$day  m1  *wechatpay  *2  *10.00 CNY  *3.00 CNY  *0.00 CNY  *7.00 CNY  *0.00 CNY  *0.00 CNY  *0.00 CNY$" r.txt &&
  passes=$((passes+1)) || { echo "FAIL text: m1 wechatpay's row"; cat r.txt; fails=$((fails+1)); }
{ echo "## report: report --tenant t1"; cat r.txt; } > human.txt
tomorrow=$(date -u -d tomorrow +%F)
$P report --tenant t1 --from "$tomorrow" --json > later.json
check "a range after the journals: no rows, still reconciled" "$(jq_ '(len(d["rows"]), d["reconciled"])' < later.json)" "(0, True)"
$P report --tenant t1 --from "$day" --to "$day" --json > today.json
check "a range of today: the same rows" "$(jq_ 'len(d["rows"])' < today.json)" 4
$P report --tenant t1 --from 2026-13-01 2>/dev/null; check "a bad date: refused" "$?" 2
$P report --tenant t1 --from "$tomorrow" --to "$day" 2>/dev/null; check "from after to: refused" "$?" 2
# a balance changed by hand: the report does not reconcile, and says which
if [ "$BACKEND" = postgres ]; then psql -qX "$PAYONCE_DB" -c "UPDATE account_balance SET balance = balance - 1 WHERE account = 'merchant_payable:m1'"
else python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE account_balance SET balance = balance - 1 WHERE account = 'merchant_payable:m1'\"); c.commit()" "${PAYONCE_DB#sqlite:}"; fi
$P report --tenant t1 > bad.txt 2> bad.err; check "tampered: exit 3" "$?" 3
{ echo "## tampered: report --tenant t1"; cat bad.txt bad.err; } >> human.txt
python3 "$E2E_DIR/../support/money_check.py" human.txt && passes=$((passes+1)) || fails=$((fails+1))
grep -q "does NOT reconcile to the ledger: 1 of 4 accounts differ; the first: merchant_payable:m1 CNY: the postings say -27.00 CNY, the balance -27.01 CNY" bad.err && passes=$((passes+1)) || { echo "FAIL tampered: $(cat bad.err)"; fails=$((fails+1)); }
fig "# report[$BACKEND]: 4 rows (2 merchants, 2 channels, a refund, a suspense payment) to the minor unit; nets = the payables, clearing and suspense = the ledger's; CSV and JSON agree; a hand-changed balance: exit 3 naming merchant_payable:m1"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
