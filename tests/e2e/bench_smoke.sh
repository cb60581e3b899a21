#!/usr/bin/env bash
# bench_smoke.sh PAYONCE BACKEND [short] — `payonce bench` end to end, small:
# every scenario and baseline runs, every payment is credited exactly once,
# the ledger verifies, the JSON result is written with the machine's
# description. On the test suite's PostgreSQL (fsync=off) the run must say
# its figures are not comparable. No figure is checked: speed is shown by
# `make bench`, never asserted by a test.
#
# The whole of it runs on the release build (`make test` step 5, label
# `bench`): every scenario of 300 orders under AddressSanitizer was 213 s
# on SQLite and 277 s on PostgreSQL of the ASan stage, and what it checks
# (rows, exactly once, the ledger, the work per credit, --nodes) is the
# same at -O2. `short` (the ASan build's bench_smoke[*]) runs eight
# scenarios — unique merchants, their redelivery, one hot merchant, every
# callback 3 times at once, API orders with an Idempotency-Key, the engine
# alone and the article's and the plain design's baselines: serve's
# callback and API paths under load, the load generator and the baselines'
# code under the sanitizers (13 s) — exactly once with the ledger clean,
# and the refusals (not an empty database, bad options). Left to the
# release build: the connection counts (64, 256), the sign-in floods, the
# tenants' share, the rate-limited and one-at-a-time runs, --batch-max 1,
# the runs without the record or the ledger, the work per credit, the idle
# connections' memory and --nodes.
set -uo pipefail
. "$(dirname "$0")/lib.sh" "$1" "$2" bench_smoke
short=${3:-}
args=(--orders 300 --out "$work/results" --plan-rows 2000)
[ "$short" = short ] && args+=(--only unique,dup3,api,redelivery,hot,engine,article,plain)
# bench takes only a database named with --db, and it must be empty.
[ "$BACKEND" = postgres ] && args+=(--db "$PAYONCE_DB")
"$BIN" bench "${args[@]}" > report.txt 2> bench.err
check "bench exits 0" "$?" 0
json=$(ls results/*.json 2>/dev/null | head -n1)
if [ "$short" = short ]; then
  check "a JSON result is written" "$([ -n "$json" ] && echo yes)" yes
  python3 - "$json" "$BACKEND" > verdict.txt 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pg = sys.argv[2] == "postgres"
names = [r["scenario"] for r in d["rows"]]
want = ["unique merchants", "redelivery of credited callbacks", "one hot merchant",
        "every callback 3 times at once", "API orders with Idempotency-Key", "engine alone"] + (
        ["plain design", "plain design, hot merchant", "article design"] if pg else
        ["article design, batched", "plain design, batched"])
missing = [n for n in want if n not in names]
assert not missing, "missing rows: %s (rows: %s)" % (missing, names)
assert d["exactly_once"] is True, "not exactly once"
assert d["ledger_violations"] == 0, "ledger violations"
assert all(r.get("exactly_once", True) for r in d["rows"]), "a row not exactly once"
assert all(r["deliveries"] > 0 and r["deliveries_per_s"] > 0 for r in d["rows"])
print("ok")
PY
  check "the short run: its eight scenarios, exactly once, ledger clean" "$(tail -n1 verdict.txt)" ok
  if [ "$BACKEND" = postgres ]; then
    "$BIN" bench --db "$PAYONCE_DB" --orders 300 > again.txt 2>&1
    check "a database that is not empty is refused" "$?:$(grep -c 'needs an empty database' again.txt)" "1:1"
  fi
  "$BIN" bench --db sqlite:x.db > usage.txt 2>&1
  check "bench --db takes PostgreSQL only" "$?" 2
  [ "$fails" -eq 0 ] || { cat report.txt bench.err verdict.txt | tail -n 40; }
  fig "# bench-smoke[$BACKEND] short (ASan): eight scenarios exactly once, ledger clean; the whole run is the release build's"
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ]
  exit
fi
check "progress on stderr: each scenario as it starts" "$(grep -c '^bench: payonce: unique merchants \.\.\.$' bench.err)" 1
check "progress on stderr: the final verify" "$(grep -c '^bench: payonce verify over every row' bench.err)" 1
check "a JSON result is written" "$([ -n "$json" ] && echo yes)" yes
python3 - "$json" "$BACKEND" > verdict.txt 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pg = sys.argv[2] == "postgres"
names = [r["scenario"] for r in d["rows"]]
want = ["unique merchants", "redelivery of credited callbacks", "one hot merchant",
        "every callback 3 times at once", "API orders with Idempotency-Key",
        "half of peak, rate-limited", "idle server, one at a time", "--batch-max 1",
        "engine alone", "unique merchants, 64 conns", "unique merchants, 256 conns",
        "callbacks, sign-in row alone", "callbacks, sign-in flood",
        "tenant API, sign-in row alone", "tenant API, sign-in flood",
        "sign-in flood, 96 conns", "unique merchants, measured alone"] + (
        ["plain design", "plain design, hot merchant", "plain design, 64 conns",
         "plain design, 256 conns", "article design", "article design, 64 conns",
         "article design, 256 conns"] if pg else
        ["article design, batched", "plain design, batched"])
missing = [n for n in want if n not in names]
assert not missing, "missing rows: %s" % missing
assert d["exactly_once"] is True, "not exactly once"
assert d["ledger_violations"] == 0, "ledger violations"
assert all(r.get("exactly_once", True) for r in d["rows"]), "a row not exactly once"
assert d["machine"]["cores"] >= 1 and d["fsync_us"]["p50"] > 0
assert all(r["deliveries"] > 0 and r["deliveries_per_s"] > 0 for r in d["rows"])
assert len(d["targets"]) >= 4
idle = d["idle_connections"]  # serve's memory with idle keep-alive connections
assert idle["connections"] >= 1000 and idle["rss_kb_with_them"] > idle["rss_kb_started"] > 0, idle
assert any(t["target"].startswith("RSS of serve") for t in d["targets"])
# Work per credit (issue 47): payonce and both designs, measured alone.
work = {w["design"].split(",")[0]: w for w in d["work_per_credit"]}
assert sorted(work) == ["article design", "payonce", "plain design"], sorted(work)
for w in work.values():
    assert w["credits"] == 300 and w["round_trips_per_credit"] > 0, w
if pg:
    # what each design writes, row by row: the views must see exactly that
    a, p, o = work["article design"], work["plain design"], work["payonce"]
    assert (a["rows_inserted_per_credit"], a["rows_updated_per_credit"]) == (3.0, 1.0), a
    assert (p["rows_inserted_per_credit"], p["rows_updated_per_credit"]) == (5.0, 1.0), p
    assert a["tables"]["article_ledger"]["inserted"] == 300, a["tables"]
    assert o["tables"]["journal"]["inserted"] == 300 and o["tables"]["posting"]["inserted"] == 600
    assert o["tables"]["pay_order"]["updated"] >= 300, o["tables"]["pay_order"]
    assert all(w["wal_bytes_per_credit"] > 0 and w["commits_per_credit"] > 0 for w in work.values())
    assert a["round_trips_per_credit"] >= 6, a  # BEGIN, 5 statements, COMMIT
    assert any(t["target"].startswith("WAL bytes per credit vs article") for t in d["targets"])
else:
    assert all(w["wal_frames_per_credit"] > 0 for w in work.values()), work
    assert work["article design"]["transactions_per_credit"] == 0.01  # 100 a transaction
    assert any(t["target"].startswith("unique merchants vs article design, batched")
               for t in d["targets"])
if pg:
    assert d["comparable"] is False, "fsync=off must not be comparable"
print("ok")
PY
check "the result: every scenario, exactly once, ledger clean" "$(tail -n1 verdict.txt)" ok
if [ "$BACKEND" = postgres ]; then
  check "fsync=off is called not comparable" "$(grep -c 'NOT COMPARABLE' report.txt)" 1
  # A database that is not empty is refused, and left as it was.
  "$BIN" bench --db "$PAYONCE_DB" --orders 300 > again.txt 2>&1
  check "a database that is not empty is refused" "$?:$(grep -c 'needs an empty database' again.txt)" "1:1"
fi
if [ "$BACKEND" = postgres ]; then
  # bench --nodes 2 (issue 22 item 7): HAProxy before one node, then two.
  # With `balance first` the 16 connections stay on node 1 (64 a node),
  # with round robin both nodes commit; exactly once either way.
  for b in first roundrobin; do
    psql -q "$PAYONCE_TEST_PG" -c "CREATE DATABASE ${dbname}_$b" >/dev/null
    "$BIN" bench --db "${PAYONCE_TEST_PG%/*}/${dbname}_$b" --nodes 2 --balance "$b" --orders 300 \
      --plan-rows 0 --committers 1 > "nodes-$b.txt" 2> "nodes-$b.err"
    check "bench --nodes 2 --balance $b exits 0" "$?" 0
    # the two-node runs (1, 2, 2, 1 nodes): run, nodes, credited/s, p50, p99,
    # batch, 2 CPUs, 2 counts, HAProxy, database, exactly once
    read -r one two exact <<<"$(awk '$2 == 2 && NF == 13 { a += $9; b += $10; n++; y += $13 == "yes" }
      END { print a, b, (n == 2 && y == 2) ? "yes" : "no" }' "nodes-$b.txt")"
    check "bench --nodes 2 --balance $b: both two-node runs exactly once" "${exact:-}" yes
    check "bench --nodes 2 --balance $b: the rate per node count, both runs together" \
      "$(grep -cE '^(1|2) +[0-9]+ +[0-9.]+x ' "nodes-$b.txt")" 2
    if [ "$b" = first ]; then
      check "balance first: node 1 committed the callbacks, node 2 (almost) none" \
        "$([ "${one:-0}" -ge 600 ] && [ "${two:-999}" -lt 60 ] && echo yes)" yes
    else
      check "round robin: both nodes committed callbacks" \
        "$([ "${one:-0}" -ge 200 ] && [ "${two:-0}" -ge 200 ] && echo yes)" yes
    fi
    [ "$fails" -eq 0 ] || cat "nodes-$b.txt" "nodes-$b.err"
    psql -q "$PAYONCE_TEST_PG" -c "DROP DATABASE IF EXISTS ${dbname}_$b WITH (FORCE)" >/dev/null
  done
fi
"$BIN" bench --db sqlite:x.db > usage.txt 2>&1
check "bench --db takes PostgreSQL only" "$?" 2
"$BIN" bench --db "postgresql://127.0.0.1:1/x" --nodes 2 --balance leastconn > usage.txt 2>&1
check "bench --balance takes first or roundrobin" "$?:$(grep -c "'first' or 'roundrobin'" usage.txt)" "2:1"
[ "$fails" -eq 0 ] || { cat report.txt bench.err verdict.txt | tail -n 40; }
fig "# bench-smoke[$BACKEND]: every scenario and baseline ran, exactly once, ledger clean"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
