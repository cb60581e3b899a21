#!/usr/bin/env bash
# prom_rules.sh PAYONCE — contrib/prometheus-payonce-rules.yml (issue 26
# item 2) loaded into promtool (Debian's prometheus): its syntax
# (check rules), its unit tests (tests/prometheus/payonce_rules_test.yml:
# each rule fires on what should page and not on a quiet gateway), and every
# payonce_* metric it names is one a running serve exports on /metrics — a
# copy with one metric renamed is caught.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh" "$1" sqlite prom_rules
RULES=$ROOT/contrib/prometheus-payonce-rules.yml
command -v promtool >/dev/null || { echo "FAIL: promtool is not installed (scripts/deps.sh installs prometheus)"; exit 1; }
promtool check rules "$RULES" > check.out 2>&1; check "promtool check rules" "$?" 0
grep -q "SUCCESS: [0-9]* rules found" check.out && passes=$((passes+1)) || { cat check.out; fails=$((fails+1)); }
(cd "$ROOT/tests/prometheus" && promtool test rules payonce_rules_test.yml) > test.out 2>&1; check "promtool test rules" "$?" 0
grep -q "SUCCESS" test.out && passes=$((passes+1)) || { cat test.out; fails=$((fails+1)); }
# the metrics a serve exports
$BIN migrate >/dev/null
$BIN serve --listen 127.0.0.1:0 --insecure-dev --query-interval 0 --recon-interval 0 --keys-interval 0 > gw.out 2> gw.log & gw=$!; bg_pids+=($gw)
port=$(port_of gw.out)
curl -s "http://127.0.0.1:$port/metrics" > metrics.txt
sed -n 's/^# TYPE \(payonce_[a-z_]*\) .*/\1/p' metrics.txt | sort -u > exported.txt
[ -s exported.txt ] && passes=$((passes+1)) || { echo "FAIL: no metrics from serve"; fails=$((fails+1)); }
unknown() { # the payonce_* names in a rules file that serve does not export
  grep -E '^ *expr:' "$1" | grep -o 'payonce_[a-z_]*' | sed 's/_\(bucket\|sum\|count\)$//' | sort -u | while read -r m; do
    grep -qx "$m" exported.txt || echo "$m"; done
}
check "every metric the rules name is exported" "$(unknown "$RULES" | tr '\n' ' ')" ""
sed 's/payonce_webhook_oldest_pending_seconds/payonce_webhook_oldest_seconds/' "$RULES" > renamed.yml
check "a renamed metric is caught" "$(unknown renamed.yml | tr '\n' ' ')" "payonce_webhook_oldest_seconds "
fig "# prom_rules: $(grep -c '^      - alert:' "$RULES") rules pass promtool check and their unit tests; every metric they name is exported by serve"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
