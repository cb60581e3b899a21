#!/usr/bin/env bash
# demo.sh — `make demo`: the exactly-once promise, shown on a fresh SQLite
# database with the payonce command line.
#
# The story: payment results delivered three times (one after the other,
# and three at once from separate processes), a callback lost and recovered
# by a reconciliation replay that races the late original, a tampered
# amount, and a refund result delivered three times. It checks every
# expected outcome and the ledger, runs `payonce verify`, prints a summary,
# and exits non-zero if anything differs.
#
# This drives the engine through `payonce apply` (normalised events). The
# HTTP callback endpoints and the channel simulator build on the same entry.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${PAYONCE_BIN:-$PWD/build/payonce}
[ -x "$BIN" ] || { echo "demo: $BIN not built; run 'make demo'" >&2; exit 1; }
work=$(mktemp -d /tmp/payonce-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
export PAYONCE_DB="sqlite:$work/demo.db"
T=demo; M=coffee-shop
failures=0
declare -A count=([applied]=0 [dup1]=0 [dup2]=0 [dup3]=0 [rejected]=0 [suspense]=0 [retry]=0)
deliveries=0

if [ -t 1 ]; then bold=$'\033[1m'; off=$'\033[0m'; else bold=; off=; fi
say() { printf '\n%s%s%s\n' "$bold" "$*" "$off"; }
expect() { # expect WHAT GOT WANT
  if [ "$2" == "$3" ]; then printf '   ok   %-58s %s\n' "$1" "$2"
  else printf '   FAIL %-58s got %s, expected %s\n' "$1" "$2" "$3"; failures=$((failures+1)); fi
}
tally() { # tally OUTCOME_JSON
  deliveries=$((deliveries+1))
  case "$1" in
    *'"applied"'*) count[applied]=$((count[applied]+1)) ;;
    *'"layer":1'*) count[dup1]=$((count[dup1]+1)) ;;
    *'"layer":2'*) count[dup2]=$((count[dup2]+1)) ;;
    *'"layer":3'*) count[dup3]=$((count[dup3]+1)) ;;
    *'"rejected"'*) count[rejected]=$((count[rejected]+1)) ;;
    *'"suspense"'*) count[suspense]=$((count[suspense]+1)) ;;
    *) count[retry]=$((count[retry]+1)) ;;
  esac
}
event() { # event FILE TYPE OUT_TRADE_NO ID AMOUNT SOURCE [OUT_REFUND_NO]
  if [ "$2" = PAY_SUCCESS ]; then
    printf '{"tenant":"%s","channel":"wechatpay","type":"PAY_SUCCESS","channel_txn_id":"%s","out_trade_no":"%s","amount":%s,"currency":"CNY","source":"%s","occurred_at":"2026-12-02T10:00:00+08:00"}\n' \
      "$T" "$4" "$3" "$5" "$6" >"$1"
  else
    printf '{"tenant":"%s","channel":"wechatpay","type":"%s","channel_refund_id":"%s","out_trade_no":"%s","out_refund_no":"%s","amount":%s,"currency":"CNY","source":"%s"}\n' \
      "$T" "$2" "$4" "$3" "$7" "$5" "$6" >"$1"
  fi
}
deliver() { # deliver FILE: applies it, sets $r to the outcome JSON, counts it
  r=$("$BIN" apply --event "$1" 2>>"$work/log")
  tally "$r"
}

say "1. A fresh database, a tenant, a merchant, four orders (amounts in fen)"
"$BIN" migrate >/dev/null && "$BIN" tenant add --tenant $T --name "Demo SaaS" >/dev/null &&
  "$BIN" merchant add --tenant $T --merchant $M >/dev/null || exit 1
for o in ORD-1001:1280 ORD-1002:4500 ORD-1003:990 ORD-1004:2000; do
  "$BIN" order create --tenant $T --merchant $M --out-trade-no "${o%%:*}" --amount "${o##*:}" || exit 1
done

say "2. ORD-1001: the channel delivers the same payment callback three times"
event "$work/p1.json" PAY_SUCCESS ORD-1001 4200000001202612020001 1280 callback
for i in 1 2 3; do deliver "$work/p1.json"; printf '   delivery %d -> %s\n' $i "$r"; done

say "3. ORD-1002: three identical callbacks at the same moment, from three processes"
event "$work/p2.json" PAY_SUCCESS ORD-1002 4200000001202612020002 4500 callback
for i in 1 2 3; do ("$BIN" apply --event "$work/p2.json" >"$work/c$i.out" 2>>"$work/log") & done
wait
for i in 1 2 3; do r=$(cat "$work/c$i.out"); tally "$r"; printf '   concurrent %d -> %s\n' $i "$r"; done
expect "ORD-1002 credited exactly once" "$(grep -l applied "$work"/c?.out | wc -l)" 1

say "4. ORD-1003: the callback was lost; the reconciliation replay finds the payment"
event "$work/p3r.json" PAY_SUCCESS ORD-1003 4200000001202612020003 990 reconciliation
event "$work/p3.json" PAY_SUCCESS ORD-1003 4200000001202612020003 990 callback
deliver "$work/p3r.json"; echo "   replay        -> $r"
deliver "$work/p3.json"; echo "   late callback -> $r   (same key: a duplicate)"

say "5. ORD-1004: a callback with a tampered amount (1 fen), then the genuine one"
event "$work/p4bad.json" PAY_SUCCESS ORD-1004 4200000001202612020004 1 callback
event "$work/p4.json" PAY_SUCCESS ORD-1004 4200000001202612020004 2000 callback
deliver "$work/p4bad.json"; echo "   tampered -> $r   (nothing credited, alert recorded)"
deliver "$work/p4.json"; echo "   genuine  -> $r"

say "6. ORD-1001: a refund of 500 is requested; its result arrives three times"
"$BIN" refund create --tenant $T --out-trade-no ORD-1001 --out-refund-no RF-1001 --amount 500 || exit 1
event "$work/r1.json" REFUND_SUCCESS ORD-1001 5030000001202612020001 500 callback RF-1001
for i in 1 2 3; do deliver "$work/r1.json"; printf '   delivery %d -> %s\n' $i "$r"; done

say "7. What the ledger says"
"$BIN" ledger balances --tenant $T
"$BIN" alerts --tenant $T
balances=$("$BIN" ledger balances --tenant $T --json)
bal() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print({b['account']:b['balance'] for b in d['balances']}.get(sys.argv[2],0))" "$balances" "$1"; }

say "8. Checks"
expect "deliveries sent (3 + 3 + 2 + 2 + 3)"               "$deliveries" 13
expect "credits/refunds applied (4 payments + 1 refund)"   "${count[applied]}" 5
expect "duplicates caught"                                 "$((count[dup1]+count[dup2]+count[dup3]))" 7
expect "rejected (tampered amount)"                        "${count[rejected]}" 1
expect "transient failures"                                "${count[retry]}" 0
expect "channel_clearing:wechatpay = 1280+4500+990+2000-500" "$(bal channel_clearing:wechatpay)" 8270
expect "merchant_payable:$M"                               "$(bal merchant_payable:$M)" -8270
expect "alerts recorded"                                   "$("$BIN" alerts --tenant $T --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["alerts"]))')" 1
if "$BIN" verify; then expect "payonce verify" pass pass; else expect "payonce verify" fail pass; fi

say "Summary"
printf '   %-34s %6s\n' "deliveries sent" "$deliveries" \
  "applied (credited / refunded)" "${count[applied]}" \
  "duplicates caught by layer 1" "${count[dup1]}" \
  "duplicates caught by layer 2" "${count[dup2]}" \
  "duplicates caught by layer 3" "${count[dup3]}" \
  "rejected by business checks" "${count[rejected]}" \
  "parked in suspense" "${count[suspense]}"
if [ "$failures" -ne 0 ]; then echo; echo "demo: $failures expectation(s) FAILED"; exit 1; fi
echo; echo "demo: every delivery credited at most once; the ledger balances."
