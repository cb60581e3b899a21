#!/usr/bin/env bash
# http_limits.sh PAYONCE — payonce serve's limits, with clear answers:
# header memory (431 beyond 8 KiB), body size (413), connection count (refused beyond
# --max-connections), per-connection idle timeout (--request-timeout frees
# the slots again); every request's access-log line whatever the bytes of its
# path; libmicrohttpd's own messages rate-limited. Backend-independent: SQLite.
set -uo pipefail
. "$(dirname "$0")/lib.sh" "$1" sqlite http_limits
"$BIN" migrate >/dev/null || exit 1
"$BIN" serve --listen 127.0.0.1:0 --insecure-dev --max-connections 2 --request-timeout 2 \
  > server.out 2> server.log & bg_pids+=($!)
port=$(port_of server.out)
# The request head's memory is 8 KiB a connection (PO_HEADER_MEMORY_MAX):
# 6 KB of headers and a body are served, 9 KB are refused with 431.
six=$(head -c 6000 /dev/zero | tr '\0' a); nine=$(head -c 9000 /dev/zero | tr '\0' a)
check "6 KB of headers with a body: served (404: no tenant t1)" "$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $six" -H 'Content-Type: application/json' -d '{"a":1}' http://127.0.0.1:$port/notify/wechatpay/t1)" 404
check "9 KB of headers: 431" "$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $nine" http://127.0.0.1:$port/healthz)" 431
big=$(head -c 40000 /dev/zero | tr '\0' a)
check "header too large: 431" "$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $big" -X POST -d '{}' http://127.0.0.1:$port/notify/wechatpay/t1)" 431
head -c 70000 /dev/zero | tr '\0' ' ' > body.bin
check "body too large: 413 FAIL" "$(curl -s -w ' %{http_code}' --data-binary @body.bin http://127.0.0.1:$port/notify/wechatpay/t1)" '{"code":"FAIL","message":"body too large"} 413'
# Two idle connections fill the limit; a third is refused.
( exec 3<>/dev/tcp/127.0.0.1/$port; sleep 5 ) & bg_pids+=($!)
( exec 4<>/dev/tcp/127.0.0.1/$port; sleep 5 ) & bg_pids+=($!)
sleep 0.5
check "beyond --max-connections: refused" "$(curl -s -m 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/healthz)" 000
# After --request-timeout the idle connections are closed and the slots free.
sleep 2.5
check "after --request-timeout: served again" "$(curl -s -m 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/healthz)" 200
# A second server with room for many connections.
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > admin.token
"$BIN" serve --listen 127.0.0.1:0 --insecure-dev --max-connections 512 --ops-listen 127.0.0.1:0 \
  --admin-token-file admin.token > server2.out 2> server2.log & bg_pids+=($!)
ops=$(port_of server2.out "operations on port"); port2=$(port_of server2.out)
# --ops-listen: metrics only there; health on both; nothing else there.
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check "ops listener: /metrics" "$(code http://127.0.0.1:$ops/metrics)" 200
check "ops listener: /healthz" "$(code http://127.0.0.1:$ops/healthz)" 200
check "ops listener: no callbacks" "$(code -X POST -d '{}' http://127.0.0.1:$ops/notify/wechatpay/t1)" 404
check "ops listener: no tenant API" "$(code http://127.0.0.1:$ops/v1/orders/x)" 404
check "main listener: no /metrics when --ops-listen is given" "$(code http://127.0.0.1:$port2/metrics)" 404
check "main listener: /healthz" "$(code http://127.0.0.1:$port2/healthz)" 200
check "first server (no --ops-listen): /metrics" "$(code http://127.0.0.1:$port/metrics)" 200
# The operator's console too is on the operations listener only (issue 27),
# and may not be framed by another site.
check "main listener: no /admin when --ops-listen is given" "$(code http://127.0.0.1:$port2/admin)" 404
check "main listener: no /admin API when --ops-listen is given" "$(code -H "Authorization: Bearer $(cat admin.token)" http://127.0.0.1:$port2/admin/api/summary)" 404
check "ops listener: /admin" "$(code http://127.0.0.1:$ops/admin)" 200
check "ops listener: /admin API" "$(code -H "Authorization: Bearer $(cat admin.token)" http://127.0.0.1:$ops/admin/api/summary)" 200
check "the console may not be framed" "$(curl -s -D - -o /dev/null http://127.0.0.1:$ops/admin | grep -ci "frame-ancestors 'none'")" 1
# A refused header's name is in the 400 body escaped: the body is JSON.
curl -s -o bad.json -H $'X-"q\\: a\x01b' http://127.0.0.1:$port2/healthz
check "a hostile header's 400 body is JSON" "$(python3 -c 'import json; d=json.load(open("bad.json")); print(d["error"]["code"], chr(34) in d["error"]["message"])' 2>&1)" "invalid_header True"
# A path that is not UTF-8 (with a quote and a control character) still
# gets its access-log line, escaped, and every line stays valid JSON.
check "invalid UTF-8 path: 404" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port2/x%ff%fe%22%01y")" 404
check "invalid UTF-8 path: logged, escaped" "$(grep -c '"path":"/x\\\\xff\\\\xfe\\"\\u0001y"' server2.log)" 1
# libmicrohttpd's own messages are rate-limited: 150 broken requests in
# about a second write at most a handful of lines.
for _ in $(seq 1 150); do
  ( exec 5<>/dev/tcp/127.0.0.1/$port2 && printf 'BROKEN \x01 request\r\n\r\n' >&5 && sleep 0.2 ) 2>/dev/null &
done
wait_bg() { for p in $(jobs -p); do case " ${bg_pids[*]} " in *" $p "*) ;; *) wait "$p" 2>/dev/null;; esac; done; }
wait_bg
sleep 0.5
lib=$(grep -c '"msg":"http: ' server2.log)
check "libmicrohttpd messages rate-limited (<= 20 lines for 150 broken requests)" "$(( lib <= 20 ))" 1
sleep 1.1
check "what was left out is counted" "$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $big" http://127.0.0.1:$port2/healthz; grep -c 'similar messages left out' server2.log | awk '{print ($1 >= 1)}')" "4311"
check "every log line is JSON" "$(python3 -c '
import json,sys
bad=0
for l in open("server.log", encoding="utf-8", errors="strict").readlines() + open("server2.log", encoding="utf-8", errors="strict").readlines():
    try: json.loads(l)
    except Exception: bad+=1
print(bad)')" 0
check "the refusals were logged" "$(grep -c 'connection limit\|too big' server.log | awk '{print ($1 >= 2)}')" 1
fig "# http-limits: header 431, body 413, connection limit refuses, idle timeout frees"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
