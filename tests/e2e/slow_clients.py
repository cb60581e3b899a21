#!/usr/bin/env python3
"""slow_clients.py PORT SECONDS — the slow-client attacks of slow_clients.sh.

From 127.0.0.2: 300 connections that each send a request head one line a
second (slowloris). From 127.0.0.3: 20 connections with a complete head
(Content-Length: 1000) whose body arrives one byte a second. From
127.0.0.4: one request declaring a 1 GB body. Prints one JSON object: how
many connections were accepted, and how long the server let each kind live.
Bounded: every socket is closed after SECONDS, whatever happens."""
import json, select, socket, sys, time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
start = time.monotonic()


def connect(src):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(2)
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    return s


def closed_by_server(s):
    """True once the server closed the connection (EOF or reset)."""
    try:
        r, _, _ = select.select([s], [], [], 0)
        if not r:
            return False
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def attack(conns, first, trickle):
    """Sends first, then trickle every second; returns seconds each lived."""
    lived = {}
    for s in conns:
        try:
            s.send(first)
        except OSError:
            lived[s] = 0.0
    while time.monotonic() - start < seconds and len(lived) < len(conns):
        time.sleep(0.1)
        for s in conns:
            if s in lived:
                continue
            if closed_by_server(s):
                lived[s] = time.monotonic() - start
        if int((time.monotonic() - start) * 10) % 10 == 0:
            for s in conns:
                if s not in lived:
                    try:
                        s.send(trickle)
                    except OSError:
                        lived[s] = time.monotonic() - start
    return [lived.get(s, seconds) for s in conns]


heads, bodies = [], []
for _ in range(300):
    try:
        heads.append(connect("127.0.0.2"))
    except OSError:
        pass
for _ in range(20):
    bodies.append(connect("127.0.0.3"))
# the per-address cap shows as connections closed at once
time.sleep(0.3)
refused = sum(1 for s in heads if closed_by_server(s))

# 1 GB declared: the answer must come before any body byte is sent.
big = connect("127.0.0.4")
big.setblocking(True)
big.settimeout(3)
big.send(b"POST /notify/wechatpay/t1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n"
         b"Content-Type: application/json\r\n\r\n")
t0 = time.monotonic()
try:
    answer = big.recv(4096).decode("latin-1")
except OSError:
    answer = ""
big_status = answer.split(" ")[1] if answer.startswith("HTTP/1.1 ") else "none"
big_ms = int((time.monotonic() - t0) * 1000)
big.close()

live_heads = [s for s in heads if not closed_by_server(s)]
import threading
res = {}
def run_heads():
    res["heads"] = attack(live_heads, b"POST /notify/wechatpay/t1 HTTP/1.1\r\nHost: x\r\n",
                          b"X-Slow: 1\r\n")
def run_bodies():
    res["bodies"] = attack(bodies, b"POST /notify/wechatpay/t1 HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n", b"a")
th = [threading.Thread(target=run_heads), threading.Thread(target=run_bodies)]
[t.start() for t in th]
[t.join() for t in th]
for s in heads + bodies:
    s.close()
print(json.dumps({
    "opened": len(heads), "refused_at_once": refused, "accepted": len(live_heads),
    "heads_max_lived": round(max(res["heads"] or [0]), 1),
    "bodies_max_lived": round(max(res["bodies"] or [0]), 1),
    "big_status": big_status, "big_ms": big_ms,
}))
