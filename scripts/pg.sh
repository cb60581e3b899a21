#!/usr/bin/env bash
# pg.sh — a throwaway PostgreSQL 15 for the test suite.
#   scripts/pg.sh start DIR   initdb + pg_ctl start in DIR on a free loopback
#                             port, as a non-root user; prints the URL and
#                             writes it to DIR/url
#   scripts/pg.sh stop DIR    stops it and removes DIR
#   scripts/pg.sh crash DIR   stops it at once (-m immediate: no shutdown
#                             checkpoint, as a crash), keeping DIR
#   scripts/pg.sh restart DIR starts it again on the same port (recovery)
# As root the server runs as the 'postgres' user (created by the Debian
# package). The cluster is for tests only: trust auth on 127.0.0.1, fsync
# off (durability is not what these tests measure; SQLite's tests keep
# synchronous=FULL).
set -euo pipefail
cmd=${1:?start|stop}; dir=${2:?directory}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
[ -x "$bindir/pg_ctl" ] || { echo "pg.sh: PostgreSQL server not installed" >&2; exit 1; }

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( (RANDOM % 20000) + 30000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  echo "pg.sh: no free port" >&2; return 1
}

case "$cmd" in
start)
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  as_pg "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=400 -c fsync=off -c full_page_writes=off" >/dev/null; then
      url="postgresql://postgres@127.0.0.1:$port/postgres"
      echo "$url" > "$dir/url"
      echo "$url"
      exit 0
    fi
    tail -n 5 "$dir/server.log" >&2 || true
  done
  echo "pg.sh: could not start PostgreSQL" >&2; exit 1 ;;
crash)
  as_pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null ;;
restart)
  port=$(sed -n 's#.*:\([0-9]*\)/postgres$#\1#p' "$dir/url")
  as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=400 -c fsync=off -c full_page_writes=off" >/dev/null ;;
stop)
  [ -d "$dir/data" ] && as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir" ;;
*) echo "usage: pg.sh start|stop|crash|restart DIR" >&2; exit 2 ;;
esac
