#!/usr/bin/env python3
"""money_check.py FILE... — money in the text a person reads carries its
currency (issue 45 item 4).

The files hold the human (not --json, not --csv) output of the payonce
commands a test ran, each command's output after a "## NAME: COMMAND" line.
Every amount is printed in major units with its ISO 4217 code (po_money_format,
"696.29 CNY", "0.11 CNY"); a number that is money without one is a finding:

  * a decimal number ("11.000", "0.11000", "696.29") not followed by a
    currency code — unless it is plainly something else: part of a version,
    an address or a time (a dotted or colon token), or followed by a unit of
    time, size or ratio ("0.5 s", "1.5x", "12.3%");
  * any number right after a money word (amount, gross, refunds, fees, net,
    balance, suspense, paid, refunded, postings, cached, reserved, sum)
    without a currency code after it.

JSON lines (outcomes) keep minor units by contract and are skipped. Prints
each finding with the command that printed it; exit 1 when there is one, 2
when the files hold no command at all (a check that saw nothing proves
nothing).
"""
import re
import sys

CURRENCY = r"[A-Z]{3}\b"
# a decimal number that is a token of its own (not in 1.2.3, 10:00:00.123, a path, an id)
DECIMAL = re.compile(r"(?<![\w.:/@#-])(-?\d+\.\d+)(?![\w.:/@-]|\.\d)")
# units that say a decimal is not money
NOT_MONEY = re.compile(r"\s*(?:s|ms|us|µs|x|%|KiB|MiB|GiB|kB|MB|GB|bytes?|seconds?|days?|"
                       r"hours?|minutes?|/s|rows?/s|per second)\b|\s*%|\s*x\b")
# (not the end of an option's name: webhook-allow-net = 10.2.0.0/16)
MONEY_WORD = re.compile(r"(?<![\w-])(amount|gross|refunds?|fees?|net|balance|suspense|paid|refunded|"
                        r"postings|cached|reserved|sum)"
                        r"(?:\s+of)?(?:\s*[:=]\s*|\s+)(-?\d[\d.]*)(?![\w.])")


def findings(text):
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("## ") or s.startswith("{") or s.startswith("["):
            continue
        for m in DECIMAL.finditer(line):
            rest = line[m.end():]
            if re.match(r"\s+" + CURRENCY, rest) or NOT_MONEY.match(rest):
                continue
            out.append((m.group(1), line))
        for m in MONEY_WORD.finditer(line):
            rest = line[m.end():]
            if not re.match(r"\s+" + CURRENCY, rest):
                out.append((m.group(0), line))
    return out


# What the check must catch — the report's and recon's outputs before issue
# 45 — and what it must let through (--self-test: a check proven able to fail).
SELF_TEST_BAD = [
    "2026-12-04  m1  wechatpay  CNY  2  696.29  0.00  0.00  696.29  0.00  0.00    11.000",
    "  channel fees                                            0.11000",
    "payonce: order ORD-1 exists with amount 100 (conflict)",
    "refund of 50 exceeds what remains refundable on order O-1 (20)",
    "VIOLATION balance_mismatch: tenant t1: merchant_payable:m1 CNY: postings -100 cached -99 (…)",
    "the first: merchant_payable:m1 CNY: the postings say -2700, the balance -2701",
]
SELF_TEST_GOOD = [
    "2026-12-04  m1  wechatpay  2  696.29 CNY  0.00 CNY  0.11 CNY",
    "  channel fees                                         0.00011 CNY",
    "payonce 0.1.0; serving on 127.0.0.1:8080 at 2026-12-04T10:00:00.123Z, 0.5 s, 1.5x, 12.3%",
    '{"outcome":"applied","amount":100}',
    "reconciled 2026-12-01 .. 2026-12-01, 12 rows; 3 orders, 1 refund",
    "webhook-allow-net        = 10.2.0.0/16                              # command line",
]


def self_test():
    bad = [line for line in SELF_TEST_BAD if not findings(line)]
    good = [line for line in SELF_TEST_GOOD if findings(line)]
    for line in bad:
        print(f"FAIL money check self-test: not caught: {line}")
    for line in good:
        print(f"FAIL money check self-test: wrongly caught {findings(line)}: {line}")
    print(f"money check self-test: {len(SELF_TEST_BAD) - len(bad)} of {len(SELF_TEST_BAD)} caught,"
          f" {len(SELF_TEST_GOOD) - len(good)} of {len(SELF_TEST_GOOD)} let through")
    return 1 if bad or good else 0


def main(paths):
    if paths == ["--self-test"]:
        return self_test()
    commands, bad = 0, []
    for path in paths:
        cmd = "?"
        with open(path, encoding="utf-8", errors="replace") as f:
            block = []
            for line in f:
                if line.startswith("## "):
                    bad += [(cmd, w, l) for w, l in findings("".join(block))]
                    cmd, block = line[3:].strip(), []
                    commands += 1
                else:
                    block.append(line)
            bad += [(cmd, w, l) for w, l in findings("".join(block))]
    for cmd, what, line in bad:
        print(f"FAIL money without its currency: '{what}' in: {line.strip()}\n     (from {cmd})")
    if commands == 0:
        print("FAIL money check: no command output to check")
        return 2
    print(f"money check: {commands} command outputs, {len(bad)} amounts without a currency")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
