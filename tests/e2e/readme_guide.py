#!/usr/bin/env python3
"""readme_guide.py PAYONCE README — the README's "Run it for real" guide,
run as written (issue 45 item 2).

The block is the fenced one after the marker comment `<!-- readme_guide:`
(exactly one). It runs verbatim under `bash` with `set -eo pipefail` in a
scratch directory, with a `payonce` on PATH that is PAYONCE (a symlink) and
no other payonce configuration in reach (PAYONCE_* unset, the default
config file pointed at a path that does not exist). Its fixed loopback
ports (8080, 8090, 8091) are its own: it runs in a new network namespace
(`unshare --net`, as root; `unshare --user --map-root-user --net`
otherwise); where neither is possible it runs in the host's only when those
ports are free, else it is skipped (exit 77).

The run is bounded (RUN_S); whatever the block leaves running — and it must
leave nothing: its last line stops its servers — is stopped, then reported
as a failure. Then what the guide promises is checked against the run:
  - every `…` its comments say to look for is in its output;
  - the order PAID once: one payment journal, one refund journal, the
    balances 7.80 CNY / -7.80 CNY, `payonce verify` clean;
  - the refund SUCCESS, submitted to the (simulated) channel;
  - the receiver recorded exactly one payment.credited and one
    refund.succeeded for them, with distinct event ids;
  - the report's row: gross 1280, refunds 500, net 780, reconciled;
  - the backup exists and restores (restore checks its manifest and
    chains), and the restored ledger equals the live one;
  - no sanitizer report in any output or log, and no webhook endpoint that
    serve says it refuses.
Exits 1 naming each failure."""
import glob
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

MARKER = "<!-- readme_guide:"
RUN_S = 60  # the whole block (about 4 s under ASan on 2 cores)
PORTS = (8080, 8090, 8091)
failures = []


def fail(what):
    failures.append(what)
    print("FAIL " + what)


def ok(what):
    print("ok   " + what)


def check(what, cond, detail=""):
    if cond:
        ok(what)
    else:
        fail(what + (": " + detail if detail else ""))


def block(readme):
    """The fenced block after the marker, verbatim."""
    text = open(readme, encoding="utf-8").read()
    if text.count(MARKER) != 1:
        sys.exit("readme_guide: %s must hold exactly one %r marker" % (readme, MARKER))
    at = text.index(MARKER)
    start = text.index("```sh\n", at) + len("```sh\n")
    end = text.index("\n```", start)
    if text[at:start].count("\n") > 2:
        sys.exit("readme_guide: the marker must be right before the ```sh block")
    return text[start:end + 1]


def isolation():
    """The command prefix that gives the run its own loopback, or None."""
    for prefix in (["unshare", "--net"], ["unshare", "--user", "--map-root-user", "--net"]):
        try:
            if subprocess.run(prefix + ["true"], capture_output=True, timeout=10).returncode == 0:
                return prefix
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None


def port_free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def session_pids(sid):
    """Processes still running in the run's session (its background
    servers); an exited one not reaped yet (a zombie) is not running."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                state = open("/proc/%s/stat" % d).read().rsplit(")", 1)[1].split()[0]
                if os.getsid(int(d)) == sid and state != "Z":
                    pids.append(int(d))
            except (OSError, IndexError):
                pass
    return pids


def wait_session(sid, seconds):
    """Waits for the session's processes to exit by themselves (a server
    stops gracefully: it finishes what is in flight)."""
    for _ in range(int(seconds * 10)):
        if not session_pids(sid):
            return
        time.sleep(0.1)


def stop_session(sid):
    """Stops what is left of the run; returns what was left (pid: command)."""
    left = {}
    for pid in session_pids(sid):
        try:
            left[pid] = open("/proc/%d/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            left[pid] = "?"
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in session_pids(sid):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        for _ in range(50):
            if not session_pids(sid):
                break
            time.sleep(0.1)
    return left


def main():
    binary = os.path.realpath(sys.argv[1])
    guide = block(sys.argv[2])
    work = tempfile.mkdtemp(prefix="payonce-guide.")
    os.mkdir(os.path.join(work, "bin"))
    run_dir = os.path.join(work, "run")
    os.mkdir(run_dir)
    os.symlink(binary, os.path.join(work, "bin", "payonce"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYONCE_")}
    env["PATH"] = os.path.join(work, "bin") + ":/usr/bin:/bin"
    # the guide's own config only: never /etc/payonce/payonce.conf
    env["PAYONCE_TEST_DEFAULT_CONFIG"] = os.path.join(work, "no-such.conf")
    prefix = isolation()
    ip = shutil.which("ip") or "/usr/sbin/ip"
    if prefix:
        pre = "%s link set lo up\n" % ip
    else:
        busy = [p for p in PORTS if not port_free(p)]
        if busy:
            print("readme_guide: SKIP: no network namespace here (unshare) and 127.0.0.1 ports"
                  " %s are in use" % busy)
            return 77
        prefix, pre = [], ""
        print("readme_guide: no network namespace (unshare); on the host's loopback")
    script = os.path.join(work, "guide.sh")
    with open(script, "w") as f:
        f.write(pre + "set -eo pipefail\n" + guide)
    started = time.time()
    # into a file, not a pipe: a server the guide leaves running holds its
    # output open, and the guide's end is its shell's exit
    output = os.path.join(work, "output.txt")
    with open(output, "wb") as f:
        p = subprocess.Popen(prefix + ["bash", script], cwd=run_dir, env=env, stdout=f,
                             stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc = p.wait(timeout=RUN_S)
    except subprocess.TimeoutExpired:
        rc = None
        stop_session(p.pid)
        p.wait()
    wait_session(p.pid, 10)  # the guide's last line stops its servers
    left = stop_session(p.pid)
    out = open(output, encoding="utf-8", errors="replace").read()
    took = time.time() - started
    print("---- the guide's output (%.1f s) ----\n%s---- end ----" % (took, out))
    check("the guide ran to its end within %d s" % RUN_S, rc == 0,
          "timed out" if rc is None else "exit %d" % rc)
    check("the guide stopped every server it started", not left,
          "; ".join("%d %s" % kv for kv in left.items()))
    os.chdir(run_dir)

    # what the comments say to look for
    wanted = []
    for line in guide.splitlines():
        if line.lstrip().startswith("#"):
            wanted += re.findall(r"`([^`]+)`", line)
    check("the guide says what to look for", len(wanted) >= 10, "%d items" % len(wanted))
    for w in wanted:
        check("the output has `%s`" % w, w in out)

    # the books, read with the guide's own configuration
    cenv = dict(env, PAYONCE_CONFIG=os.path.join(run_dir, "payonce.conf"))

    def payonce(*args):
        r = subprocess.run([binary] + list(args), env=cenv, capture_output=True, text=True,
                           timeout=60)
        return r.returncode, r.stdout, r.stderr

    def doc(*args):
        rc_, so, se = payonce(*args)
        try:
            return json.loads(so) if rc_ == 0 else {"exit": rc_, "stderr": se}
        except ValueError:
            return {"stdout": so}

    order = doc("order", "show", "--tenant", "acme", "--out-trade-no", "ORD-1001", "--json")
    check("ORD-1001 PAID, 12.80 CNY, 5.00 refunded",
          (order.get("status"), order.get("amount"), order.get("currency"),
           order.get("refunded_amount")) == ("PAID", 1280, "CNY", 500), str(order))
    refund = doc("refund", "show", "--tenant", "acme", "--out-refund-no", "RF-1001", "--json")
    check("RF-1001 SUCCESS, submitted to the channel",
          (refund.get("status"), refund.get("amount"),
           (refund.get("submission") or {}).get("state")) == ("SUCCESS", 500, "submitted"),
          str(refund))
    db = sqlite3.connect(os.path.join(run_dir, "payonce.db"))
    journals = db.execute("SELECT kind, COUNT(*) FROM journal WHERE tenant_id = 'acme' AND"
                          " out_trade_no = 'ORD-1001' GROUP BY kind ORDER BY kind").fetchall()
    check("one payment journal and one refund journal for ORD-1001",
          journals == [("PAY", 1), ("REFUND", 1)], str(journals))
    db.close()

    def balances(*db_args):
        d = doc("ledger", "balances", "--tenant", "acme", "--json", *db_args)
        return {b["account"]: b["balance"] for b in d.get("balances", [])}

    live = balances()
    check("balances: 7.80 CNY held at WeChat Pay, owed to shop-1",
          live == {"channel_clearing:wechatpay": 780, "merchant_payable:shop-1": -780}, str(live))
    rc_, so, se = payonce("verify")
    check("payonce verify", rc_ == 0, so + se)
    report = doc("report", "--tenant", "acme", "--json")
    rows = [(r["merchant"], r["channel"], r["gross"], r["refunds"], r["net"])
            for r in report.get("rows", [])]
    check("the report: gross 12.80, refunds 5.00, net 7.80, reconciled",
          rows == [("shop-1", "wechatpay", 1280, 500, 780)] and report.get("reconciled") is True,
          str(report))

    try:
        events = [json.loads(l) for l in open("events.jsonl", encoding="utf-8")]
    except (OSError, ValueError) as e:
        events = []
        fail("the receiver's record events.jsonl: %s" % e)
    told = sorted((e["type"], e["data"]["object"].get("out_trade_no"),
                   e["data"]["object"].get("out_refund_no"), e["data"]["object"]["amount"])
                  for e in events)
    check("the receiver acted on one payment.credited and one refund.succeeded",
          told == [("payment.credited", "ORD-1001", None, 1280),
                   ("refund.succeeded", "ORD-1001", "RF-1001", 500)], str(told))
    check("each event id once", len({e["id"] for e in events}) == len(events))

    backups = glob.glob("backup-*.db")
    check("one backup file", len(backups) == 1, str(backups))
    if backups:
        rc_, so, se = payonce("restore", "--from", backups[0], "--db", "sqlite:restored.db")
        check("the backup restores (its manifest and chains checked)", rc_ == 0, so + se)
        rc_, so, se = payonce("verify", "--db", "sqlite:restored.db")
        check("the restored ledger verifies", rc_ == 0, so + se)
        check("the restored balances are the live ones",
              balances("--db", "sqlite:restored.db") == live)

    logs = {n: open(n, encoding="utf-8", errors="replace").read()
            for n in ("serve.log", "sim.log", "receiver.log") if os.path.exists(n)}
    logs["output"] = out
    for name, text in sorted(logs.items()):
        check("no sanitizer report in %s" % name,
              not re.search(r"AddressSanitizer|LeakSanitizer|runtime error:", text))
    check("serve refuses no webhook endpoint", "refuses every delivery" not in
          logs.get("serve.log", ""))

    if failures:
        print("readme_guide: %d check(s) FAILED; the run is kept in %s" % (len(failures), work))
        return 1
    shutil.rmtree(work)
    print("readme_guide: the README's guide ran as written (%.1f s) and did what it says"
          % took)
    return 0


if __name__ == "__main__":
    sys.exit(main())
