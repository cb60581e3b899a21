#!/usr/bin/env bash
# alipay_shared.sh PAYONCE BACKEND — two tenants on one Alipay app (issue 44
# item 6). Alipay signs both's notifications with one key and names one
# app_id: only the seller id tells whose a notification is. So an app id
# shared by tenants needs a seller id on each, different: channel set
# refuses the account without one (and the one whose partner lacks one, and
# the same seller id twice), nothing stored. Then tenant t1's signed
# notification posted to t2's path is not t2's: acked, rejected
# (seller_id_mismatch), nothing credited there; posted to t1's, credited.
set -uo pipefail
. "$(dirname "$0")/lib.sh" "$1" "$2" alipay_shared
"$BIN" migrate >/dev/null || exit 1
for t in t1 t2; do
  "$BIN" tenant add --tenant "$t" >/dev/null && "$BIN" merchant add --tenant "$t" --merchant m1 >/dev/null || exit 1
done
"$BIN" sim keys --dir sim --tenant t1 --mode pubkey > keys.out || exit 1
sim_json() { python3 -c "import json,sys; print(json.load(open('sim/sim.json'))[sys.argv[1]])" "$1"; }
APP=$(sim_json app_id); SELLER=$(sim_json seller_id)
ali() { # ali TENANT [ARGS...]: channel set alipay with the simulator's app; exit status, stderr in set.err
  local t=$1; shift
  "$BIN" channel set --tenant "$t" --channel alipay --app-id "$APP" --alipay-public-key-file sim/alipay_public_key.pem "$@" >/dev/null 2>set.err
  echo $?
}
accounts() { "$BIN" tenant list --json | python3 -c "import json,sys; print(sorted(t['tenant'] for t in json.load(sys.stdin) if 'alipay' in t.get('channels', [])))"; }
check "t1 on the app with its seller id" "$(ali t1 --seller-id "$SELLER")" 0
check "t2 on the same app without a seller id: refused" "$(ali t2)" 1
check "says why" "$(grep -c 'another tenant.s too: give --seller-id' set.err)" 1
check "t2 on the same app with t1's seller id: refused" "$(ali t2 --seller-id "$SELLER")" 1
check "says why" "$(grep -c 'app id and seller id are another tenant.s' set.err)" 1
check "nothing stored for t2" "$(accounts)" "['t1']"
check "t2 with its own seller id" "$(ali t2 --seller-id 2088000000000099)" 0
check "t1 again without its seller id, now that t2 shares the app: refused" "$(ali t1)" 1
check "t1's account unchanged (still names its seller)" "$("$BIN" channel show --tenant t1 --channel alipay --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["config"]["seller_id"])')" "$SELLER"
# t1's payment notification posted to t2's path
for t in t1 t2; do "$BIN" order create --tenant "$t" --merchant m1 --out-trade-no SHARED-1 --amount 300 >/dev/null; done
"$BIN" serve --listen 127.0.0.1:0 --insecure-dev > serve.out 2> serve.log & bg_pids+=($!)
port=$(port_of serve.out)
[ -n "$port" ] || { cat serve.log; exit 1; }
status() { "$BIN" order show --tenant "$1" --out-trade-no SHARED-1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])'; }
"$BIN" sim pay --dir sim --channel alipay --notify-url "http://127.0.0.1:$port/notify/alipay/t2" --order SHARED-1:300 \
  --max-attempts 1 > cross.out 2>&1
check "t1's notification at t2's path: acked, rejected as another seller's" "$(grep -c 'payonce: rejected; reason=seller_id_mismatch' cross.out)" 1
check "t2's order not credited" "$(status t2)" PAYING
"$BIN" sim pay --dir sim --channel alipay --notify-url "http://127.0.0.1:$port/notify/alipay/t1" --order SHARED-1:300 \
  --again --max-attempts 1 > own.out 2>&1
check "at t1's own path: credited" "$(status t1)" PAID
check "t2's still not" "$(status t2)" PAYING
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
