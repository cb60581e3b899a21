#!/usr/bin/env python3
"""alert_sink.py PORTFILE RECORD [FAIL_FIRST] — the operator's receiver for
tests/e2e/alert_notify.sh: an HTTP server on a free loopback port (written to
PORTFILE) that records every POST as one JSON line in RECORD
({"t": unix time, "path", "status", "body"}) and answers 500 to the first
FAIL_FIRST posts, 200 after. Stops by itself after 120 s."""
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

portfile, record = sys.argv[1], sys.argv[2]
fail_first = int(sys.argv[3]) if len(sys.argv) > 3 else 0
lock = threading.Lock()
seen = [0]

class H(BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n).decode("utf-8", "replace")
        with lock:
            seen[0] += 1
            status = 500 if seen[0] <= fail_first else 200
            with open(record, "a") as f:
                f.write(json.dumps({"t": time.time(), "path": self.path, "status": status,
                                    "body": body}) + "\n")
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(portfile + ".tmp", portfile)
threading.Timer(120, srv.shutdown).start()
srv.serve_forever()
