#!/usr/bin/env bash
# cluster.sh — a local, production-shaped payonce cluster on loopback
# (docs/scaling.md): etcd, three PostgreSQL 15 servers under Patroni
# (synchronous_mode + synchronous_mode_strict, use_pg_rewind), three
# `payonce serve` nodes, HAProxy in front of them health-checked on /readyz.
#
#   scripts/cluster.sh up [PAYONCE]     start everything (PAYONCE: the binary,
#                                       default build/payonce); prints the URLs
#   scripts/cluster.sh down             stop every process, remove the directory
#   scripts/cluster.sh status           Patroni's members, HAProxy's view of the nodes
#   scripts/cluster.sh primary          the name of the Patroni leader (pg1..pg3)
#   scripts/cluster.sh kill-primary     SIGKILL the leader's Patroni and every
#                                       process of its PostgreSQL (a machine dying);
#                                       prints its name
#   scripts/cluster.sh wait-primary [S] wait (default 60 s) for a leader that
#                                       accepts writes; prints its name
#   scripts/cluster.sh rejoin           start the Patroni of every dead member again
#                                       (it rejoins as a replica, pg_rewind if needed)
#   scripts/cluster.sh wait-healthy [S] wait (default 120 s) for a leader, a synchronous
#                                       standby and a third member streaming, no lag
#   scripts/cluster.sh kill-node N      SIGKILL payonce node N (1..3)
#   scripts/cluster.sh start-node N     start payonce node N again
#   scripts/cluster.sh switchover [S]   a planned switchover to a healthy replica; waits
#                                       (default 60 s) for the new primary to take writes
#                                       and prints "OLD -> NEW in SECONDS s"
#   scripts/cluster.sh lag MS           replication lag: the WAL stream to every replica
#                                       held MS milliseconds (0: none) by scripts/lagproxy.py,
#                                       dropped when its primary dies (measures what
#                                       asynchronous replication loses, docs/scaling.md)
#   scripts/cluster.sh answers          one line: unix ms, HAProxy's 2xx and 5xx answers
#                                       so far (its frontend's counters; sample it in a loop)
#   scripts/cluster.sh env              the cluster's variables (PAYONCE_DB, ports) as
#                                       shell assignments, for `eval`
# PAYONCE_NODE_ARGS (at `up`): more `payonce serve` options for every node.
# PAYONCE_CLUSTER_BALANCE (at `up`): HAProxy's balance, `first` (default: a
# node takes up to 64 requests at once, its --workers, before the next gets
# any, so the nodes' batches stay full; docs/scaling.md) or `roundrobin`.
# The nodes run one committer each (the database sees nodes x committers
# concurrent committers; docs/scaling.md, "Throughput with more nodes").
#
# The directory is $PAYONCE_CLUSTER_DIR (default ./payonce-cluster). As root,
# etcd, Patroni and PostgreSQL run as the 'postgres' user. Test timings, not
# production ones: Patroni ttl 8 s, loop_wait 1 s, retry_timeout 3 s (a
# primary's death is noticed within ~8 s; production: ttl 30, loop_wait 10);
# HAProxy checks /readyz every 500 ms (fall 2, rise 2); fsync is off (a
# SIGKILL loses no page cache; a power cut would: production keeps fsync on).
set -euo pipefail
cmd=${1:-status}
D=$(realpath -m "${PAYONCE_CLUSTER_DIR:-./payonce-cluster}")
bindir=$(ls -d /usr/lib/postgresql/15/bin 2>/dev/null || true)

die() { echo "cluster.sh: $*" >&2; exit 1; }
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Below the kernel's ephemeral range (the ports outgoing connections take:
# replication, Patroni, curl), so that a port free when picked stays free.
eph_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
pick_ports() { # pick_ports N: N distinct free loopback ports, from 10000 up to the ephemeral range
  local n=$1 got=() p span=$((eph_low - 10000))
  while [ ${#got[@]} -lt "$n" ]; do
    p=$(((RANDOM % span) + 10000))
    port_free "$p" && [[ " ${got[*]} " != *" $p "* ]] && got+=("$p")
  done
  echo "${got[@]}"
}
load() { [ -f "$D/ports.env" ] || die "no cluster in $D (scripts/cluster.sh up)"; . "$D/ports.env"; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() { # wait_for SECONDS COMMAND...: until COMMAND succeeds
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [ $SECONDS -lt $end ] || return 1; sleep 0.2; done
}
rest() { curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1$2" || true; }

member_yml() { # member_yml I
  local i=$1 pg rp
  pg=$(eval echo "\$PG$i"); rp=$(eval echo "\$REST$i")
  # maximum_lag_on_failover: a replica further behind is not promoted; with
  # `lag MS` and asynchronous replication it must still be (what it lacks is
  # what is measured)
  cat <<EOF
scope: payonce
namespace: /payonce-$CLUSTER_ID/
name: pg$i
log: {level: WARNING}
restapi: {listen: "127.0.0.1:$rp", connect_address: "127.0.0.1:$rp"}
etcd: {host: "127.0.0.1:$ETCD"}
bootstrap:
  dcs:
    ttl: 8
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: $([ "${PAYONCE_CLUSTER_SYNC:-true}" = true ] && echo 1048576 || echo 268435456)
    synchronous_mode: ${PAYONCE_CLUSTER_SYNC:-true}
    synchronous_mode_strict: ${PAYONCE_CLUSTER_SYNC:-true}
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 300
        fsync: "off"
        full_page_writes: "on"
  initdb: [{encoding: UTF8}, {locale: C.UTF-8}, data-checksums]
postgresql:
  listen: "127.0.0.1:$pg"
  connect_address: "127.0.0.1:$(eval echo "\$LAG$i")"
  data_dir: $D/pg$i/data
  bin_dir: $bindir
  pgpass: $D/pg$i/pgpass
  pg_hba:
    - local all all trust
    - host replication all 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: replicator, password: replicator}
    rewind: {username: rewinder, password: rewinder}
  parameters: {unix_socket_directories: "$D/pg$i"}
EOF
}

start_member() { # start_member I
  local i=$1
  as_pg bash -c "nohup patroni '$D/pg$i.yml' >> '$D/pg$i/patroni.log' 2>&1 & echo \$! > '$D/pg$i/patroni.pid'"
}

start_node() { # start_node I
  local i=$1 np
  np=$(eval echo "\$NODE$i")
  nohup "$PAYONCE" serve --listen "127.0.0.1:$np" --db "$PAYONCE_DB" --master-key-file "$D/master.key" \
    --max-connections-per-ip 0 --committers 1 ${PAYONCE_NODE_ARGS:-} > "$D/node$i.out" 2>> "$D/node$i.log" &
  echo $! > "$D/node$i.pid"
  wait_for 30 grep -q "listening on port" "$D/node$i.out" || { tail -5 "$D/node$i.log" >&2; die "node $i did not start"; }
}

primary_name() { # the member whose REST API answers /primary with 200, else nothing
  local i
  for i in 1 2 3; do
    [ "$(rest "$(eval echo "\$REST$i")" /primary)" = 200 ] && { echo "pg$i"; return 0; }
  done
  return 1
}
healthy() { # a leader, a synchronous standby and the third member streaming, none lagging
  local i r
  for i in 1 2 3; do
    r=$(eval echo "\$REST$i")
    curl -s -m 2 "http://127.0.0.1:$r/cluster" 2>/dev/null | python3 -c '
import json, sys
m = json.load(sys.stdin)["members"]
roles = sorted(x["role"] for x in m if x.get("state") in ("running", "streaming") and x.get("lag", 0) != "unknown" and x.get("lag", 0) < 1048576)
sync = sys.argv[1] == "true"
sys.exit(0 if roles == (["leader", "replica", "sync_standby"] if sync else ["leader", "replica", "replica"]) else 1)
' "${PAYONCE_CLUSTER_SYNC:-true}" 2>/dev/null && return 0
  done
  return 1
}
writable() { psql -X -q -d "$PAYONCE_DB" -c "CREATE TEMP TABLE po_probe(x int)" >/dev/null 2>&1; }

case "$cmd" in
up)
  PAYONCE=$(realpath "${2:-build/payonce}")
  [ -x "$PAYONCE" ] || die "no payonce binary at $PAYONCE (make build)"
  for b in etcd patroni haproxy psql curl; do command -v "$b" >/dev/null || die "$b is not installed (scripts/deps.sh)"; done
  [ -x "$bindir/pg_ctl" ] || die "PostgreSQL 15 is not installed"
  [ -f "$D/ports.env" ] && die "a cluster exists in $D (scripts/cluster.sh down first)"
  balance=${PAYONCE_CLUSTER_BALANCE:-first}
  [[ $balance = first || $balance = roundrobin ]] || die "PAYONCE_CLUSTER_BALANCE: first or roundrobin, not '$balance'"
  mkdir -p "$D"
  read -r ETCD ETCDP PG1 PG2 PG3 REST1 REST2 REST3 NODE1 NODE2 NODE3 HAPROXY STATS LAG1 LAG2 LAG3 <<<"$(pick_ports 16)"
  CLUSTER_ID=$$
  PAYONCE_DB="postgresql://postgres@127.0.0.1:$PG1,127.0.0.1:$PG2,127.0.0.1:$PG3/payonce?target_session_attrs=read-write"
  cat > "$D/ports.env" <<EOF
PAYONCE=$PAYONCE
CLUSTER_ID=$CLUSTER_ID
ETCD=$ETCD ETCDP=$ETCDP
PG1=$PG1 PG2=$PG2 PG3=$PG3
REST1=$REST1 REST2=$REST2 REST3=$REST3
NODE1=$NODE1 NODE2=$NODE2 NODE3=$NODE3
HAPROXY=$HAPROXY STATS=$STATS
LAG1=$LAG1 LAG2=$LAG2 LAG3=$LAG3
PAYONCE_DB='$PAYONCE_DB'
PAYONCE_NODE_ARGS='$(echo ${PAYONCE_NODE_ARGS:-})'
EOF
  for i in 1 2 3; do mkdir -p "$D/pg$i"; done
  [ "$(id -u)" -eq 0 ] && chown -R postgres: "$D"
  as_pg test -w "$D" -a -x "$D" || die "$D must be reachable by the postgres user (a parent directory is private?)"
  # etcd: Patroni 3.0's etcd client speaks the v2 API.
  as_pg bash -c "nohup etcd --name po-etcd --data-dir '$D/etcd' --enable-v2=true \
    --listen-client-urls http://127.0.0.1:$ETCD --advertise-client-urls http://127.0.0.1:$ETCD \
    --listen-peer-urls http://127.0.0.1:$ETCDP --initial-advertise-peer-urls http://127.0.0.1:$ETCDP \
    --initial-cluster po-etcd=http://127.0.0.1:$ETCDP > '$D/etcd.log' 2>&1 & echo \$! > '$D/etcd.pid'"
  wait_for 30 curl -sf "http://127.0.0.1:$ETCD/health" || die "etcd did not start ($D/etcd.log)"
  # replication (and pg_rewind, base backups) through the lag proxy: no lag until `lag MS`
  echo 0 > "$D/lag_ms"
  nohup python3 "$(dirname "$(realpath "$0")")/lagproxy.py" "$D/lag_ms" "$LAG1:$PG1" "$LAG2:$PG2" "$LAG3:$PG3" \
    > "$D/lagproxy.log" 2>&1 &
  echo $! > "$D/lagproxy.pid"
  wait_for 10 grep -q listening "$D/lagproxy.log" || die "the lag proxy did not start ($D/lagproxy.log)"
  for i in 1 2 3; do member_yml "$i" > "$D/pg$i.yml"; done
  [ "$(id -u)" -eq 0 ] && chown postgres: "$D"/pg*.yml
  start_member 1
  wait_for 90 bash -c "[ \$(curl -s -m 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:$REST1/primary) = 200 ]" ||
    { tail -20 "$D/pg1/patroni.log" >&2; die "the first PostgreSQL did not become primary"; }
  start_member 2; start_member 3
  for i in 2 3; do
    r=$(eval echo "\$REST$i")
    wait_for 120 bash -c "[ \$(curl -s -m 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:$r/replica) = 200 ]" ||
      { tail -20 "$D/pg$i/patroni.log" >&2; die "pg$i did not become a replica"; }
  done
  psql -X -q -d "postgresql://postgres@127.0.0.1:$PG1/postgres" -c "CREATE DATABASE payonce" >/dev/null
  head -c 32 /dev/urandom > "$D/master.key"; chmod 600 "$D/master.key"
  "$PAYONCE" migrate --db "$PAYONCE_DB" >/dev/null
  for i in 1 2 3; do start_node "$i"; done
  cat > "$D/haproxy.cfg" <<EOF
global
  maxconn 8192
defaults
  mode http
  timeout connect 1s
  timeout client 30s
  timeout server 10s
  timeout http-request 10s
frontend payonce
  bind 127.0.0.1:$HAPROXY
  default_backend nodes
backend nodes
  balance $balance
  # a request whose connection a dead node refused goes to another node
  # (measured: node 1 SIGKILLed under load, balance first: 48 FAIL answers
  # without these two lines, none with them; docs/scaling.md)
  option redispatch
  retries 2
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 500ms fall 2 rise 2 maxconn 64
  server node1 127.0.0.1:$NODE1 check
  server node2 127.0.0.1:$NODE2 check
  server node3 127.0.0.1:$NODE3 check
listen stats
  bind 127.0.0.1:$STATS
  stats enable
  stats uri /
EOF
  haproxy -f "$D/haproxy.cfg" -D -p "$D/haproxy.pid" 2> "$D/haproxy.log" || die "haproxy did not start ($D/haproxy.log)"
  wait_for 10 bash -c "curl -s 'http://127.0.0.1:$STATS/;csv' | grep -c '^nodes,node[0-9],.*,UP,' | grep -qx 3" ||
    die "HAProxy does not see three healthy nodes"
  echo "payonce cluster up in $D"
  echo "  gateway (HAProxy):  http://127.0.0.1:$HAPROXY"
  echo "  nodes:              http://127.0.0.1:$NODE1 http://127.0.0.1:$NODE2 http://127.0.0.1:$NODE3"
  echo "  HAProxy stats:      http://127.0.0.1:$STATS/"
  echo "  database:           $PAYONCE_DB"
  echo "  master key:         $D/master.key"
  ;;
down)
  # (a half-removed directory: only the sweep below)
  [ -f "$D/ports.env" ] || { pkill -9 -f -- "$D/" 2>/dev/null || true; rm -rf "$D"; exit 0; }
  . "$D/ports.env"
  for f in "$D"/node*.pid "$D/haproxy.pid"; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  for i in 1 2 3; do
    [ -f "$D/pg$i/patroni.pid" ] && kill "$(cat "$D/pg$i/patroni.pid")" 2>/dev/null || true
  done
  for i in 1 2 3; do # Patroni stops its PostgreSQL; whatever is left is stopped here
    for _ in $(seq 1 50); do alive "$D/pg$i/patroni.pid" || break; sleep 0.2; done
    [ -f "$D/pg$i/patroni.pid" ] && kill -9 "$(cat "$D/pg$i/patroni.pid")" 2>/dev/null || true
    if [ -f "$D/pg$i/data/postmaster.pid" ]; then
      pm=$(head -1 "$D/pg$i/data/postmaster.pid")
      kill -0 "$pm" 2>/dev/null && as_pg "$bindir/pg_ctl" -D "$D/pg$i/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
  done
  for f in "$D/etcd.pid" "$D/lagproxy.pid"; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  for f in "$D"/node*.pid "$D/haproxy.pid" "$D/etcd.pid" "$D/lagproxy.pid"; do
    for _ in $(seq 1 50); do alive "$f" || break; sleep 0.1; done
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  # whatever a member was starting when its Patroni stopped (pg_rewind, a
  # PostgreSQL coming up) and still runs in the directory
  pkill -9 -f -- "$D/" 2>/dev/null || true
  sleep 0.3
  rm -rf "$D"
  ;;
status)
  load
  patronictl -c "$D/pg1.yml" list 2>/dev/null || echo "(patronictl: no answer)"
  echo "HAProxy:"
  curl -s -m 2 "http://127.0.0.1:$STATS/;csv" | awk -F, '$1=="nodes" && $2 ~ /^node/ {print "  " $2 " " $18}'
  for i in 1 2 3; do
    np=$(eval echo "\$NODE$i")
    echo "  node$i pid $(cat "$D/node$i.pid" 2>/dev/null) $(alive "$D/node$i.pid" && echo running || echo dead), /readyz $(rest "$np" /readyz)"
  done
  ;;
primary)
  load; primary_name ;;
lag)
  load
  [[ "${2:-}" =~ ^[0-9]{1,5}$ ]] || die "lag MS: milliseconds, 0 to 99999"
  echo "$2" > "$D/lag_ms" ;;
answers)
  load
  curl -s -m 1 "http://127.0.0.1:$STATS/;csv" |
    awk -F, -v t="$(date +%s%3N)" 'NR==1 {for (i=1;i<=NF;i++) h[$i]=i} $1=="payonce" && $2=="FRONTEND" {print t, $h["hrsp_2xx"], $h["hrsp_5xx"]}' ;;
wait-primary)
  load
  end=$((SECONDS + ${2:-60}))
  until p=$(primary_name) && writable; do
    [ $SECONDS -lt $end ] || die "no writable primary after ${2:-60} s"
    sleep 0.2
  done
  echo "$p" ;;
kill-primary)
  load
  p=$(primary_name) || die "no primary to kill"
  i=${p#pg}
  pm=$(head -1 "$D/pg$i/data/postmaster.pid")
  kids=$(pgrep -P "$pm" || true)
  # shellcheck disable=SC2086
  kill -9 "$(cat "$D/pg$i/patroni.pid")" "$pm" $kids 2>/dev/null || true
  echo "$p" ;;
wait-healthy)
  load
  wait_for "${2:-120}" healthy || die "the cluster is not healthy after ${2:-120} s"
  ;;
rejoin)
  load
  for i in 1 2 3; do
    alive "$D/pg$i/patroni.pid" && continue
    start_member "$i"
    echo "pg$i"
  done ;;
kill-node)
  load; i=${2:?node number}
  kill -9 "$(cat "$D/node$i.pid")" 2>/dev/null || true ;;
start-node)
  load; i=${2:?node number}
  alive "$D/node$i.pid" && die "node $i is running"
  start_node "$i" ;;
switchover)
  # "OLD -> NEW in S s": from the command to the new primary taking writes
  load
  p=$(primary_name) || die "no primary"
  t0=$(date +%s%3N)
  patronictl -c "$D/pg1.yml" switchover --leader "$p" --force >/dev/null
  end=$((SECONDS + ${2:-60}))
  until n=$(primary_name) && [ "$n" != "$p" ] && writable; do
    [ $SECONDS -lt $end ] || die "switchover from $p: no other writable primary after ${2:-60} s"
    sleep 0.1
  done
  ms=$(($(date +%s%3N) - t0))
  printf '%s -> %s in %d.%03d s\n' "$p" "$n" $((ms / 1000)) $((ms % 1000)) ;;
env)
  load; cat "$D/ports.env" ;;
*) die "usage: cluster.sh up|down|status|primary|kill-primary|wait-primary|wait-healthy|rejoin|kill-node N|start-node N|switchover|lag MS|answers|env" ;;
esac
