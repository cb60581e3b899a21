#!/usr/bin/env python3
"""tcp_proxy.py TARGET_PORT PORT_FILE — a loopback TCP proxy that can go silent.

Forwards 127.0.0.1:<its port> to 127.0.0.1:TARGET_PORT and writes its port to
PORT_FILE. SIGUSR1 makes the path silent: nothing is read or forwarded any
more and no connection is closed (new ones are accepted by the kernel and left
waiting), as a network path that stops answering without a reset. SIGUSR2
restores it. SIGTERM stops it. Bounded: it exits by itself after 10 minutes."""
import select, signal, socket, sys, time

target = int(sys.argv[1])
silent = False
stop = False


def on_signal(sig, frame):
    global silent, stop
    if sig == signal.SIGUSR1:
        silent = True
    elif sig == signal.SIGUSR2:
        silent = False
    else:
        stop = True


for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT):
    signal.signal(s, on_signal)
lst = socket.socket()
lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("127.0.0.1", 0))
lst.listen(256)
with open(sys.argv[2], "w") as f:
    f.write(str(lst.getsockname()[1]))
peer = {}  # socket -> its other end
started = time.monotonic()


def close_pair(s):
    o = peer.pop(s, None)
    for x in (s, o):
        if x is not None:
            peer.pop(x, None)
            try:
                x.close()
            except OSError:
                pass


while not stop and time.monotonic() - started < 600:
    if silent:
        time.sleep(0.05)
        continue
    try:
        r, _, _ = select.select([lst] + list(peer), [], [], 0.05)
    except (InterruptedError, ValueError):
        continue
    for s in r:
        if silent:
            break
        if s is lst:
            c, _ = lst.accept()
            try:
                u = socket.create_connection(("127.0.0.1", target), timeout=2)
            except OSError:
                c.close()
                continue
            peer[c], peer[u] = u, c
            continue
        if s not in peer:
            continue
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            close_pair(s)
            continue
        try:
            peer[s].sendall(data)
        except OSError:
            close_pair(s)
