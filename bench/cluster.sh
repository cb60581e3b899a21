#!/usr/bin/env bash
# bench/cluster.sh — `make bench-cluster` (issue 22, docs/scaling.md), on the
# local cluster of scripts/cluster.sh (release build):
#  1. `payonce bench --nodes 3`: credited/s through HAProxy with 1, 2 and 3
#     serve nodes over the cluster's PostgreSQL (synchronous replication);
#  2. a failover timeline: callbacks through the cluster's HAProxy (each
#     delivered 3 times at once, the channel's retries compressed) while the
#     Patroni primary is SIGKILLed; credited per second (from the ledger's
#     own timestamps: the node's clock as it wrote the credit), answers per second by class (HAProxy's counters,
#     sampled every 500 ms), the time from the kill to the first credit
#     after it. A table on stdout and a chart, docs/img/failover.svg.
#   BENCH_ORDERS        payments per --nodes run (default 8000): 16 and 64
#                       connections with HAProxy's round robin and `first`,
#                       128 with `first`; one committer a node
#   BENCH_FAIL_ORDERS   payments of the timeline (default 480: 16 senders of 30)
# Results: bench/results/cluster-DATE.txt and the chart.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/build/payonce
[ -x "$bin" ] || { echo "bench-cluster: build first (make build)"; exit 1; }
work=$(mktemp -d /tmp/payonce-bench-cluster.XXXXXX)
chmod 755 "$work"
export PAYONCE_CLUSTER_DIR=$work/cluster
cleanup() { "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true; rm -rf "$work" || true; }
trap cleanup EXIT
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=$root/bench/results/cluster-$stamp.txt
mkdir -p "$root/bench/results" "$root/docs/img"
exec > >(tee "$out") 2>&1
PAYONCE_NODE_ARGS="--recon-interval 0 --keys-interval 0" scripts/cluster.sh up "$bin" >/dev/null
eval "$(scripts/cluster.sh env)"
echo "# bench-cluster: 3 x PostgreSQL 15 under Patroni (synchronous_mode_strict), 3 x payonce serve, HAProxy; $(nproc) cores; $(date -u)"

# --- 1. nodes ---
# connections:HAProxy's balance, one committer a node (the database's
# concurrent committers are nodes x committers). Round robin splits the
# connections over the nodes; `first` (the cluster's default) fills node 1
# up to 64 requests (its --workers) before node 2 gets any: 128
# connections spill over to a second node.
for cb in 16:roundrobin 16:first 64:roundrobin 64:first 128:first; do
  c=${cb%:*} b=${cb#*:} # an empty database each (the bench's own tenants)
  psql -X -q -d "${PAYONCE_DB/\/payonce\?//postgres?}" -c "CREATE DATABASE bench${c}_$b" >/dev/null
  "$bin" bench --db "${PAYONCE_DB/\/payonce\?//bench${c}_$b?}" --nodes 3 --orders "${BENCH_ORDERS:-8000}" \
    --connections "$c" --committers 1 --balance "$b" --plan-rows 0 2> "$work/bench-nodes-$cb.err" ||
    { tail -5 "$work/bench-nodes-$cb.err"; exit 1; }
  echo
done

# --- 2. the failover timeline ---
cd "$work"
export PAYONCE_DB PAYONCE_MASTER_KEY_FILE=$PAYONCE_CLUSTER_DIR/master.key
"$bin" tenant add --tenant t1 >/dev/null && "$bin" merchant add --tenant t1 --merchant m1 >/dev/null
"$bin" sim keys --dir sim --tenant t1 --mode pubkey > keys.out
grep -A20 '^Configure' keys.out | grep -E '^payonce|^  ' | sed "s#^payonce #$bin #" | bash >/dev/null
N=${BENCH_FAIL_ORDERS:-480}
for i in $(seq 1 "$N"); do
  "$bin" order create --tenant t1 --merchant m1 --out-trade-no "T-$i" --amount $((100 + i)) >/dev/null
done
sample() { # every 500 ms: unix ms, HAProxy frontend's 2xx and 5xx answers so far
  while :; do "$root/scripts/cluster.sh" answers; sleep 0.5; done
}
sample > samples.txt & sampler=$!
t_start=$(date +%s%3N)
sims=()
ns=$(((N + 29) / 30)) # senders of at most 30 payments (the command line's limit)
for s in $(seq 0 $((ns - 1))); do
  args=(); for i in $(seq $((s + 1)) "$ns" "$N"); do args+=(--order "T-$i:$((100 + i))"); done
  "$bin" sim pay --dir sim "${args[@]}" --copies 3 --concurrent --time-factor 1000 --max-attempts 40 \
    --pace-ms 800 --notify-url "http://127.0.0.1:$HAPROXY/notify/wechatpay/t1" > "sim-$s.out" 2>&1 &
  sims+=($!)
done
sleep 6
killed=$("$root/scripts/cluster.sh" kill-primary)
t_kill=$(date +%s%3N) # the SIGKILL is kill-primary's last step
new=$("$root/scripts/cluster.sh" wait-primary 120)
t_writable=$(date +%s%3N)
"$root/scripts/cluster.sh" rejoin >/dev/null
for p in "${sims[@]}"; do wait "$p" || true; done
sleep 1
kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
psql -X -At -F ' ' -d "$PAYONCE_DB" -c "SELECT created_at FROM journal WHERE tenant_id = 't1' AND kind = 'PAY'" > credits.txt
paid=$("$bin" order list --tenant t1 --status PAID --limit 10000 --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)['data']))")
verify=$("$bin" verify >/dev/null 2>&1 && echo clean || echo VIOLATIONS)
python3 - "$t_start" "$t_kill" "$t_writable" "$killed" "$new" "$N" "$paid" "$verify" "$root/docs/img/failover.svg" <<'EOF'
import sys, datetime
t_start, t_kill, t_writable = (int(x) for x in sys.argv[1:4])
killed, new, n, paid, verify, svg = sys.argv[4], sys.argv[5], int(sys.argv[6]), int(sys.argv[7]), sys.argv[8], sys.argv[9]
def ms(iso):
    return int(datetime.datetime.strptime(iso.strip(), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
credits = sorted(ms(l) for l in open("credits.txt") if l.strip())
samples = [tuple(int(x) for x in l.split()) for l in open("samples.txt") if len(l.split()) == 3]
end = max(credits[-1] if credits else t_kill, samples[-1][0] if samples else t_kill)
secs = (end - t_start) // 1000 + 1
cred = [0] * secs
for c in credits:
    if c >= t_start:
        cred[(c - t_start) // 1000] += 1
ok = [0] * secs; fail = [0] * secs
for (a, b) in zip(samples, samples[1:]):
    s = (b[0] - t_start) // 1000
    if 0 <= s < secs:
        ok[s] += b[1] - a[1]; fail[s] += b[2] - a[2]
first_after = next((c for c in credits if c > t_kill), None)
gap_first = (first_after - t_kill) if first_after else -1
print()
print(f"failover timeline: {n} payments x 3 copies through HAProxy; primary {killed} SIGKILLed at +{(t_kill - t_start) / 1000:.1f} s, {new} accepting writes {t_writable - t_kill} ms later;")
print(f"first credit after the kill: {gap_first} ms after it; FAIL (5xx) answers: {sum(fail)}; {paid} of {n} paid, each once; verify {verify}")
print(f"{'second':>6} {'credited':>9} {'2xx':>6} {'5xx':>6}")
for i in range(secs):
    mark = "  <- primary killed" if i == (t_kill - t_start) // 1000 else ("  <- writes again" if i == (t_writable - t_start) // 1000 else "")
    print(f"{i:>6} {cred[i]:>9} {ok[i]:>6} {fail[i]:>6}{mark}")
# the chart: credited/s (bars) and FAIL answers/s (line), the kill and the recovery marked
W, H, L, B, T = 760, 300, 50, 40, 30
top = max(max(cred + fail + [1]), 1)
sx = (W - L - 20) / max(secs, 1); sy = (H - B - T) / top
o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{L}" y="18" font-size="13">Credited per second across a Patroni primary SIGKILL (3 nodes, synchronous replication)</text>']
for k in range(5):
    v = top * k / 4; y = H - B - v * sy
    o.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W-20}" y2="{y:.1f}" stroke="#ddd"/><text x="{L-6}" y="{y+4:.1f}" text-anchor="end">{v:.0f}</text>')
for i in range(secs):
    x = L + i * sx; h = cred[i] * sy
    o.append(f'<rect x="{x+1:.1f}" y="{H-B-h:.1f}" width="{max(sx-2,1):.1f}" height="{h:.1f}" fill="#4a7fb5"/>')
    if i % 5 == 0:
        o.append(f'<text x="{x:.1f}" y="{H-B+14}" >{i}s</text>')
pts = " ".join(f"{L + (i + 0.5) * sx:.1f},{H - B - fail[i] * sy:.1f}" for i in range(secs))
o.append(f'<polyline points="{pts}" fill="none" stroke="#c0392b" stroke-width="2"/>')
for (t, label, col) in ((t_kill, f"{killed} killed", "#c0392b"), (t_writable, f"{new} writable", "#27ae60")):
    x = L + (t - t_start) / 1000 * sx
    o.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H-B}" stroke="{col}" stroke-dasharray="4,3"/><text x="{x+3:.1f}" y="{T+44}" fill="{col}">{label}</text>')
o.append(f'<rect x="{W-300}" y="{T}" width="10" height="10" fill="#4a7fb5"/><text x="{W-286}" y="{T+9}">payments credited / s (ledger timestamps)</text>')
o.append(f'<line x1="{W-300}" y1="{T+22}" x2="{W-290}" y2="{T+22}" stroke="#c0392b" stroke-width="2"/><text x="{W-286}" y="{T+26}">FAIL (5xx) answers / s (HAProxy)</text>')
o.append(f'<text x="{L}" y="{H-8}">seconds since the load began; first credit {gap_first} ms after the kill; {paid}/{n} paid, each once; verify {verify}</text>')
o.append('</svg>')
open(svg, "w").write("\n".join(o) + "\n")
print(f"chart: {svg}")
EOF
echo "results: $out"
