#!/usr/bin/env python3
"""Play a client that stops reading, against a running `serve`.

It sends one streaming completion (n samples, 2000 tokens each, ignore_eos)
on a socket with a small receive buffer and never reads it; every 3 s it
prints kvlab:engine_steps_total until the count stops moving; then it sends
three small completions, each with a 15 s timeout, and says how many were
answered. A server whose loop waits for its readers stops stepping once the
stuck request's buffers fill, and the three small requests time out; this
project's server goes on (docs/serving.md, "Slow clients").

  go run ./phase08_prefix serve --prefix-caching --port 8123 &
  python3 scripts/slow_reader.py 8123 16

The second argument is n (default 16, the server's --max-n).
Only the standard library; loopback only.
"""

import json
import socket
import sys
import time
import urllib.request

port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
n = int(sys.argv[2]) if len(sys.argv) > 2 else 16
base = f"http://127.0.0.1:{port}"


def steps():
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith("kvlab:engine_steps_total "):
            return int(float(line.split()[1]))
    return None


body = json.dumps({"prompt": [1, 2, 3, 4], "n": n, "max_tokens": 2000, "stream": True, "ignore_eos": True}).encode()
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
head = f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
s.sendall(head.encode() + body)
print(f"a client asked for {n} streams of 2000 tokens and reads nothing")
prev = None
for i in range(40):
    time.sleep(3)
    now = steps()
    print(f"t={3 * (i + 1)}s engine steps {now}")
    if now == prev:
        print("engine steps stopped moving")
        break
    prev = now
ok = 0
for k in range(3):
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps({"prompt": [5, 6, 7], "max_tokens": 4}).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.time()
    try:
        urllib.request.urlopen(req, timeout=15).read()
        ok += 1
        print(f"small request {k}: answered in {time.time() - t:.2f}s")
    except Exception as e:  # a stalled server: the timeout
        print(f"small request {k}: {e} after {time.time() - t:.1f}s")
print(f"engine steps {steps()}; {ok}/3 small requests answered")
s.close()
sys.exit(0 if ok == 3 else 1)
