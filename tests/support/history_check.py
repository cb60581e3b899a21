#!/usr/bin/env python3
"""history_check.py — the history checker (issue 28 item 2).

The e2e, kill -9 and cluster suites record, on the client's side, every
callback attempt the simulated channel made and what came back (`payonce sim
pay --history FILE`, one JSON line per attempt), beside the channel's own
record of what it was paid (the simulator's payments.jsonl, lost payments
included) and, where a webhook receiver runs, every event it acted on. This
program reads that history and the final database — with its own SQL, not
payonce's code — and checks:

  acked_credited_once   every payment payonce acked as applied or duplicate
                        is credited exactly once: one PAY journal of the
                        amount the channel sent, the order PAID with that
                        transaction id
  no_double_credit      no order and no channel transaction has more than
                        one PAY journal; the clearing balance is the sum of
                        the credits
  credited_only_if_sent nothing is credited that the channel never paid, and
                        a credit from a callback has an attempt that sent it
                        (a credit from the active query or reconciliation is
                        a replay of a payment the channel has: allowed)
  refunds_bounded       per order the refunds that succeeded never exceed
                        the payment (rows and journals)
  event_order           per order the outbox events are numbered 1, 2, … in
                        order, payment.credited first, at most one each
  webhook_once_per_id   (with --events) every outbox event of the receiver's
                        types reached it, and each payment reached it under
                        one event id
  acked_recorded        the callback record's promise (docs/operations.md,
                        "Disputes: the callback record"): every acked
                        delivery a batch answered has its record (matched by
                        the X-Request-Id of its answer), and every credit
                        from a callback has a record of its order; a
                        duplicate answered from memory ("; remembered") may
                        lack its record only when it was answered in the
                        moments (--record-window-ms) around an outage listed
                        in --outages (a kill -9 of the gateway, a failover of
                        its database), since its record is written after the
                        answer

Usage:
  history_check.py --db URL --tenant T --payments FILE [--payments FILE …]
                   [--history FILE …] [--events FILE [--event-types a,b]
                   [--events-scope PREFIX …]] [--scope PREFIX …] [--name NAME]
                   [--outages FILE [--record-window-ms MS]] [--report FILE]
URL is PAYONCE_DB's form: sqlite:PATH or a libpq URL (read with psql).
--scope limits the orders checked to those whose out_trade_no starts with
one of the prefixes (default: every order of the tenant); --events-scope
limits the webhook check to the orders paid while the receiver listened.
--outages FILE: one outage a line, "FROM_MS [TO_MS [all]]" (milliseconds
since the epoch, the clock the history's answered_ms uses; TO defaults to
FROM); "all": an outage that may lose committed transactions (a primary
killed under asynchronous replication), around which any answer's record
may be missing.
Exit 0: clean; 1: a violation (the report names each); 2: usage or input.
"""
import argparse
import csv
import io
import json
import sqlite3
import subprocess
import sys
from collections import defaultdict

MAX_LISTED = 25  # violations listed per check in the report


def query(db, sql, params=()):
    """The rows of sql, its ? placeholders bound to params: by sqlite3, or
    as psql variables (:'p1', …), which psql quotes as literals."""
    if db.startswith("sqlite:"):
        con = sqlite3.connect("file:%s?mode=ro" % db[len("sqlite:"):], uri=True, timeout=30)
        try:
            return [tuple(r) for r in con.execute(sql, params)]
        finally:
            con.close()
    parts = sql.split("?")
    if len(parts) != len(params) + 1:
        raise SystemExit("history_check: %d placeholders for %d values" %
                         (len(parts) - 1, len(params)))
    args = ["psql", "-X", "-q", "--csv", "-v", "ON_ERROR_STOP=1", "-d", db]
    text = parts[0]
    for i, (p, rest) in enumerate(zip(params, parts[1:]), 1):
        args += ["-v", "p%d=%s" % (i, p)]
        text += ":'p%d'" % i + rest
    # psql interpolates variables in what it reads, not in -c: the query on stdin
    out = subprocess.run(args, input=text + ";\n", capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise SystemExit("history_check: psql: %s" % out.stderr.strip())
    rows = list(csv.reader(io.StringIO(out.stdout)))
    return [tuple(r) for r in rows[1:]]


def lines(paths, what):
    for path in paths or []:
        try:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        yield json.loads(line)
                    except ValueError:
                        # a process killed mid-line leaves a torn last line
                        print("history_check: %s:%d: not a JSON line (%s), skipped" %
                              (path, n, what), file=sys.stderr)
        except OSError as e:
            raise SystemExit("history_check: %s: %s" % (path, e)) from e


class Check:
    def __init__(self, name, proves):
        self.name, self.proves, self.checked, self.violations = name, proves, 0, []

    def ok(self, cond, message):
        self.checked += 1
        if not cond:
            self.violations.append(message)
        return cond

    def as_json(self):
        return {"proves": self.proves, "checked": self.checked,
                "violations": len(self.violations),
                "listed": self.violations[:MAX_LISTED]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--tenant", required=True)
    ap.add_argument("--payments", action="append", required=True)
    ap.add_argument("--history", action="append")
    ap.add_argument("--events")
    ap.add_argument("--event-types", default="payment.credited")
    ap.add_argument("--scope", action="append")
    ap.add_argument("--events-scope", action="append")
    ap.add_argument("--name", default="history")
    ap.add_argument("--outages")
    ap.add_argument("--record-window-ms", type=int, default=1000)
    ap.add_argument("--report")
    a = ap.parse_args()
    scope = tuple(a.scope or ())

    def in_scope(no):
        return not scope or (no or "").startswith(scope)

    # --- the channel's side: what it was paid, what it sent and heard ---
    paid = {}  # (channel, txn) -> payment
    for p in lines(a.payments, "payment"):
        if in_scope(p.get("out_trade_no")):
            paid[(p["channel"], p["txn"])] = p
    attempts = defaultdict(list)  # (channel, txn) -> attempts of payment callbacks
    n_attempts = 0
    answered = []  # acked attempts (payments and refunds) whose answer named its request
    for h in lines(a.history, "attempt"):
        if not in_scope(h.get("out_trade_no")):
            continue
        if h.get("op") == "payment":
            attempts[(h["channel"], h["txn"])].append(h)
            n_attempts += 1
        if h.get("acked") and h.get("request_id"):
            answered.append(h)
    outages = []  # (from_ms, to_ms, may lose committed transactions)
    if a.outages:
        with open(a.outages, encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if parts:
                    outages.append((int(parts[0]), int(parts[min(1, len(parts) - 1)]),
                                    parts[2:] == ["all"]))

    # --- the database, read with plain SQL ---
    t = a.tenant
    orders = {r[0]: {"amount": int(r[1]), "status": r[2], "txn": r[3], "reserved": int(r[4]),
                     "refunded": int(r[5]), "channel": r[6]}
              for r in query(a.db, "SELECT out_trade_no, amount, status,"
                             " COALESCE(channel_txn_id, ''), refund_reserved, refunded_amount,"
                             " COALESCE(channel, '') FROM pay_order WHERE tenant_id = ?", (t,))
              if in_scope(r[0])}
    journals = defaultdict(list)  # (kind, out_trade_no) -> [(idem_key, amount)]
    for key, kind, no, amount in query(
            a.db, "SELECT j.idem_key, j.kind, COALESCE(j.out_trade_no, ''),"
            " SUM(CASE WHEN p.amount > 0 THEN p.amount ELSE 0 END) FROM journal j"
            " JOIN posting p ON p.tenant_id = j.tenant_id AND p.idem_key = j.idem_key"
            " WHERE j.tenant_id = ? GROUP BY j.idem_key, j.kind, j.out_trade_no", (t,)):
        if in_scope(no):
            journals[(kind, no)].append((key, int(amount)))
    sources = {r[0]: r[1] for r in query(
        a.db, "SELECT idem_key, source FROM notify_log WHERE tenant_id = ? AND outcome ="
        " 'applied'", (t,))}
    refunds = defaultdict(int)
    for no, amount in query(a.db, "SELECT out_trade_no, amount FROM refund WHERE tenant_id = ?"
                            " AND status = 'SUCCESS'", (t,)):
        if in_scope(no):
            refunds[no] += int(amount)
    events = defaultdict(list)  # out_trade_no -> [(obj_seq, type, event_id)]
    for eid, typ, obj, seq in query(a.db, "SELECT event_id, type, object_id, obj_seq FROM"
                                    " outbox_event WHERE tenant_id = ?", (t,)):
        if in_scope(obj):
            events[obj].append((int(seq), typ, eid))
    clearing = defaultdict(int)
    for account, balance in query(a.db, "SELECT account, balance FROM account_balance WHERE"
                                  " tenant_id = ? AND account LIKE 'channel_clearing:%'", (t,)):
        clearing[account] = int(balance)

    checks = [
        Check("acked_credited_once", "every payment acked as applied or duplicate is credited"
              " exactly once, for the amount sent, its order PAID by that transaction"),
        Check("no_double_credit", "no order and no channel transaction credited twice; the"
              " clearing balance is the sum of the credits"),
        Check("credited_only_if_sent", "nothing credited that the channel never paid; a credit"
              " from a callback had an attempt that sent it"),
        Check("refunds_bounded", "refunds that succeeded never exceed the payment"),
        Check("event_order", "per order the events are numbered 1, 2, ... in order,"
              " payment.credited first and once"),
    ]
    c_acked, c_double, c_sent, c_refund, c_order = checks
    acked_ok = 0
    for (ch, txn), atts in sorted(attempts.items()):
        said = [h for h in atts if h.get("acked") and
                h.get("outcome", "").startswith(("applied", "duplicate"))]
        if not said:
            continue
        acked_ok += 1
        no, amount = atts[0]["out_trade_no"], atts[0]["amount"]
        pays = journals.get(("PAY", no), [])
        o = orders.get(no)
        c_acked.ok(len(pays) == 1 and pays[0][1] == amount and o is not None and
                   o["status"] == "PAID" and o["txn"] == txn,
                   "payment %s (%s %s, %d) acked %d times as applied/duplicate but: %d PAY"
                   " journals %s, order %s" %
                   (no, ch, txn, amount, len(said), len(pays), [j[1] for j in pays],
                    "missing" if o is None else "%s by %s" % (o["status"], o["txn"] or "-")))
    by_txn = defaultdict(list)
    credited_sum = defaultdict(int)
    for (kind, no), js in sorted(journals.items()):
        if kind != "PAY":
            continue
        c_double.ok(len(js) == 1, "order %s credited %d times: journals %s (amounts %s)" %
                    (no, len(js), [j[0] for j in js], [j[1] for j in js]))
        for key, amount in js:
            parts = key.split(":")
            credited_sum[parts[0]] += amount
            txn = parts[1] if len(parts) >= 3 else ""
            by_txn[(parts[0], txn)].append(no)
            p = paid.get((parts[0], txn))
            if not c_sent.ok(p is not None and p["out_trade_no"] == no and
                             p["amount"] == amount,
                             "order %s credited %d by %s: the channel has no such payment%s" %
                             (no, amount, key, "" if p is None else
                              " (it paid %s for %d)" % (p["out_trade_no"], p["amount"]))):
                continue
            source = sources.get(key, "")
            if source == "callback":
                c_sent.ok(bool(attempts.get((parts[0], txn))),
                          "order %s credited from a callback (%s) no attempt of the history"
                          " sent" % (no, key))
            else:
                c_sent.ok(source in ("query", "reconciliation"),
                          "order %s credited by %s with source %r" % (no, key, source))
    for (ch, txn), nos in sorted(by_txn.items()):
        c_double.ok(len(nos) == 1, "transaction %s:%s credited %d times (orders %s)" %
                    (ch, txn, len(nos), nos))
    # The clearing account against the credits, where nothing else moved it
    # (no scope, no refund or suspense journal in the tenant).
    if not scope and all(k == "PAY" for (k, _) in journals):
        for ch in sorted(set(credited_sum) | {a.split(":", 1)[1] for a in clearing}):
            c_double.ok(clearing["channel_clearing:" + ch] == credited_sum[ch],
                        "channel_clearing:%s is %d, the credits sum to %d" %
                        (ch, clearing["channel_clearing:" + ch], credited_sum[ch]))
    for no, o in sorted(orders.items()):
        pay = sum(j[1] for j in journals.get(("PAY", no), []))
        back = sum(j[1] for j in journals.get(("REFUND", no), []))
        c_refund.ok(refunds[no] <= o["amount"] and 0 <= o["refunded"] <= o["reserved"] <=
                    o["amount"] and back <= pay,
                    "order %s (%d): refunds succeeded %d, refunded %d of %d reserved, refund"
                    " journals %d against %d credited" %
                    (no, o["amount"], refunds[no], o["refunded"], o["reserved"], back, pay))
    for no, evs in sorted(events.items()):
        evs.sort()
        seqs = [e[0] for e in evs]
        credited = [e for e in evs if e[1] == "payment.credited"]
        c_order.ok(seqs == list(range(1, len(evs) + 1)) and len(credited) <= 1 and
                   (not credited or credited[0] == evs[0]) and
                   len(credited) == (1 if journals.get(("PAY", no)) else 0),
                   "order %s: events %s" % (no, [(e[0], e[1]) for e in evs]))
    if a.events:
        c_hook = Check("webhook_once_per_id", "every event of the receiver's types reached it;"
                       " each payment under one event id")
        checks.append(c_hook)
        types = set(a.event_types.split(","))
        escope = tuple(a.events_scope or ())

        def in_escope(no):
            return in_scope(no) and (not escope or (no or "").startswith(escope))
        got = defaultdict(set)  # (type, out_trade_no) -> event ids received
        received = set()
        for e in lines([a.events], "event"):
            no = ((e.get("data") or {}).get("object") or {}).get("out_trade_no")
            if in_escope(no):
                got[(e.get("type"), no)].add(e.get("id"))
                received.add(e.get("id"))
        for no, evs in sorted(events.items()):
            for _, typ, eid in evs:
                if typ in types and in_escope(no):
                    c_hook.ok(eid in received and got[(typ, no)] == {eid},
                              "order %s: %s %s %s; the receiver has ids %s" %
                              (no, typ, eid, "reached it" if eid in received else "never arrived",
                               sorted(got[(typ, no)])))
        for (typ, no), ids in sorted(got.items()):
            c_hook.ok(len(ids) == 1, "order %s: %s arrived under %d ids %s" %
                      (no, typ, len(ids), sorted(ids)))

    # The callback record: a batch's answer has its record, a remembered
    # duplicate's record may be lost only by an outage right after its answer.
    c_rec = Check("acked_recorded", "every acked delivery a batch answered has its callback"
                  " record, every credit from a callback a record of its order; a duplicate"
                  " answered from memory lacks its record only when answered around an outage")
    checks.append(c_rec)
    recorded = {}  # request_id -> out_trade_no
    for rid, no in query(a.db, "SELECT request_id, out_trade_no FROM callback_record WHERE"
                         " tenant_id = ?", (t,)):
        recorded[rid] = no
    w = a.record_window_ms

    def outage_near(h, any_answer):
        at = h["answered_ms"]
        return any(o[0] - w <= at <= o[1] + w and (o[2] or not any_answer) for o in outages)
    remembered = lost = 0
    for h in answered:
        rid, said = h["request_id"], h.get("outcome", "")
        if "remembered" in said.split("; "):
            remembered += 1
            if rid in recorded:
                continue
            lost += 1
            c_rec.ok(outage_near(h, False), "request %s (%s %s, copy %s) answered %r at %d"
                     " without a record, no outage within %d ms" %
                     (rid, h["op"], h["out_trade_no"], h.get("copy"), said, h["answered_ms"], w))
        elif rid not in recorded and outage_near(h, True):
            lost += 1
        else:
            c_rec.ok(recorded.get(rid) == h["out_trade_no"],
                     "request %s (%s %s, copy %s, attempt %s) answered %r: %s" %
                     (rid, h["op"], h["out_trade_no"], h.get("copy"), h.get("attempt"), said,
                      "no callback record" if rid not in recorded else
                      "its record names order %s" % recorded[rid]))
    recorded_orders = set(recorded.values())
    for (kind, no), js in sorted(journals.items()):
        if kind == "PAY":
            for key, _ in js:
                if sources.get(key) == "callback":
                    c_rec.ok(no in recorded_orders, "order %s credited from a callback (%s) has"
                             " no callback record" % (no, key))

    ok = all(not c.violations for c in checks)
    report = {"name": a.name, "tenant": t, "ok": ok, "payments_paid": len(paid),
              "payments_sent": len(attempts), "attempts": n_attempts, "acked_ok": acked_ok,
              "acked_answers": len(answered), "remembered": remembered,
              "unrecorded_near_outage": lost, "outages": len(outages),
              "orders": len(orders), "credits": sum(len(js) for (k, _), js in journals.items()
                                                    if k == "PAY"),
              "checks": {c.name: c.as_json() for c in checks}}
    if a.report:
        with open(a.report, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    print("history %s: %d payments paid, %d sent in %d attempts, %d acked as credited, %d"
          " credits; %d acked answers, %d from memory, %d without a record around %d outages: %s" %
          (a.name, len(paid), len(attempts), n_attempts, acked_ok, report["credits"],
           len(answered), remembered, lost, len(outages), "clean" if ok else "VIOLATED"))
    for c in checks:
        print("  %-22s %5d checked, %d violated" % (c.name, c.checked, len(c.violations)))
        for v in c.violations[:MAX_LISTED]:
            print("    " + v)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
