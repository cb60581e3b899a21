#!/usr/bin/env python3
"""readme_demo.py README DEMO_OUTPUT — the README's sample of `make demo`
output (the block under "What `make demo` shows") must match what the demo
printed (issue 13 item 15).

Every line of the sample other than "..." must appear in the output, in the
same order, after normalising what differs from run to run: event ids
(evt_ + 32 hex digits, derived from random transaction ids), the simulator's
timings (+0.15s) and runs of spaces. The Summary figures are compared
exactly. Exits 1 and prints the first line that does not match."""
import re
import sys


def norm(line):
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # bold on a terminal
    line = re.sub(r"evt_[0-9a-f]{32}", "evt_*", line)
    line = re.sub(r"\+\s*[0-9]+\.[0-9]+s", "+*s", line)
    return " ".join(line.split())


def sample(readme):
    text = open(readme, encoding="utf-8").read()
    at = text.index("## What `make demo` shows")
    start = text.index("```\n", at) + 4
    end = text.index("```", start)
    return text[start:end].splitlines()


def main():
    want = [norm(l) for l in sample(sys.argv[1])]
    got = [norm(l) for l in open(sys.argv[2], encoding="utf-8", errors="replace")]
    want = [l for l in want if l and l != "..."]
    if len(want) < 10:
        print("readme_demo: the README's demo sample is missing or too short")
        return 1
    i = 0
    for w in want:
        while i < len(got) and got[i] != w:
            i += 1
        if i == len(got):
            print("readme_demo: the README's demo sample has a line the demo did not print"
                  " (in this order):\n  %s" % w)
            return 1
        i += 1
    print("readme_demo: the README's sample (%d lines) matches the demo's output" % len(want))
    return 0


if __name__ == "__main__":
    sys.exit(main())
