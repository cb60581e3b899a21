#!/usr/bin/env python3
"""lagproxy.py — replication lag between the cluster's PostgreSQL servers
(scripts/cluster.sh, docs/scaling.md), for measuring what asynchronous
replication loses when a primary dies.

    lagproxy.py LAGFILE LISTEN_PORT:TARGET_PORT ...

Each member's `connect_address` (what replicas, pg_rewind and base backups
connect to) is a port of this proxy; it forwards to the member's real port
on 127.0.0.1. Bytes from the client (a replica's feedback, its queries) go
at once; bytes from the server (the WAL stream) are held for the number of
milliseconds in LAGFILE (read on every chunk; absent or 0: no lag) — a
replica that is that far behind, as one across a slow or busy network is.
When the server's side closes (its machine died: SIGKILL), whatever the
proxy still holds is dropped, as the bytes still in a dead machine's send
path are: the replica never sees them. On one machine's loopback a killed
primary's kernel still delivers everything its walsender wrote, so without
this the window that asynchronous replication loses is too short to see.
Loopback only; stops when killed (cluster.sh down).
"""
import asyncio
import sys
import time


def lag_s(path):
    try:
        with open(path) as f:
            return max(0, min(int(f.read().strip() or 0), 60000)) / 1000.0
    except (OSError, ValueError):
        return 0.0


async def client_to_server(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def server_to_client(reader, writer, lagfile):
    queue = asyncio.Queue()

    async def release():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.ensure_future(release())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            queue.put_nowait((time.monotonic() + lag_s(lagfile), data))
    except (ConnectionError, OSError):
        pass
    # the server is gone: what is still held never arrives
    sender.cancel()
    try:
        await sender
    except (asyncio.CancelledError, ConnectionError, OSError):
        pass
    writer.close()


def handler(target, lagfile):
    async def handle(creader, cwriter):
        try:
            sreader, swriter = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            cwriter.close()
            return
        await asyncio.gather(client_to_server(creader, swriter),
                             server_to_client(sreader, cwriter, lagfile))
    return handle


async def main():
    if len(sys.argv) < 3:
        sys.exit("usage: lagproxy.py LAGFILE LISTEN_PORT:TARGET_PORT ...")
    lagfile = sys.argv[1]
    servers = []
    for pair in sys.argv[2:]:
        listen, target = (int(x) for x in pair.split(":"))
        servers.append(await asyncio.start_server(handler(target, lagfile), "127.0.0.1", listen))
    print("lagproxy listening", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    asyncio.run(main())
