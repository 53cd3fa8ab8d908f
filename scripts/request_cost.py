#!/usr/bin/env python3
"""Send the requests whose cost a body's size used not to bound, to a running `serve`.

1. /v1/completions with a prompt of one-element arrays nested 1,000 to
   9,990 deep (a body of at most 20 KB): the status and the time each
   takes. A prompt reader that tries each shape at each level costs the
   depth times the size; this project's server refuses anything deeper
   than 2 levels with a 400 naming `prompt` (docs/serving.md, "Request
   cost").
2. six /tokenize requests with_pieces at once, each 7.9 MB of text: their
   statuses, the size of each answer, and, given the server's pid, its
   peak resident memory (VmHWM) before and after. An answer built whole in
   memory is ~74 MB of JSON for each; this project's server writes it as
   it is made, at most --max-text-requests (4) at once, the others 503.

  go build -o bin/ ./phase08_prefix
  bin/phase08_prefix serve --port 8124 &
  python3 scripts/request_cost.py 8124 $!

Only the standard library; loopback only; Linux's /proc for the memory.
"""

import http.client
import json
import sys
import threading
import time

port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
pid = int(sys.argv[2]) if len(sys.argv) > 2 else None


def post(path, body, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def peak_mb():
    if pid is None:
        return None
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return None


for depth in (1000, 2000, 4000, 8000, 9990):
    body = ('{"max_tokens": 1, "prompt": ' + "[" * depth + "1" + "]" * depth + "}").encode()
    t0 = time.time()
    status, data = post("/v1/completions", body)
    print(f"depth {depth:5d} ({len(body)} bytes): {status} in {time.time() - t0:.2f} s {data[:90].decode(errors='replace')}")

text = "the shared prefix hello " * (7_900_000 // 24)
body = json.dumps({"content": text, "with_pieces": True}).encode()
print(f"peak RSS before: {peak_mb()} MB; six /tokenize of {len(body)} bytes at once")
answers = []


def one():
    status, data = post("/tokenize", body)
    answers.append((status, len(data)))


threads = [threading.Thread(target=one) for _ in range(6)]
t0 = time.time()
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"answers (status, bytes): {sorted(answers)} in {time.time() - t0:.1f} s")
print(f"peak RSS after: {peak_mb()} MB")
