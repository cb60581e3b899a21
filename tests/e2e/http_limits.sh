#!/usr/bin/env bash
# http_limits.sh PAYONCE — payonce serve's limits, with clear answers:
# header memory (431), body size (413), connection count (refused beyond
# --max-connections), per-connection idle timeout (--request-timeout frees
# the slots again). Backend-independent: SQLite.
set -uo pipefail
. "$(dirname "$0")/lib.sh" "$1" sqlite http_limits
"$BIN" migrate >/dev/null || exit 1
"$BIN" serve --listen 127.0.0.1:0 --insecure-dev --max-connections 2 --request-timeout 2 \
  > server.out 2> server.log & bg_pids+=($!)
for _ in $(seq 1 100); do grep -q "listening on port" server.out && break; sleep 0.05; done
port=$(sed -n 's/^listening on port //p' server.out)
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
check "the refusals were logged" "$(grep -c 'connection limit\|too big' server.log | awk '{print ($1 >= 2)}')" 1
fig "# http-limits: header 431, body 413, connection limit refuses, idle timeout frees"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
