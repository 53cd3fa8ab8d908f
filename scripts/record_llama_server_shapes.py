#!/usr/bin/env python3
"""Record the key structure of a server's answers, and diff two recordings.

`serve` claims llama-server compatibility. This script makes the claim
checkable: it sends a fixed list of requests to a running server and writes
down, for each answer, its status, its content type and the *structure* of
its body (keys and value types, never values). Recorded once from a real
llama-server, the file says what a client of llama-server may rely on; the
same recording of `serve` says what it lacks.

  # record (llama-server or serve, any base URL on this machine)
  python3 scripts/record_llama_server_shapes.py record \
      --base-url http://127.0.0.1:8080 --out shapes.json \
      --server llama-server --commit <llama.cpp commit> \
      --command '<how the server was started>' --model-export '<how the model was made>'

  # key-by-key differences of the second recording against the first
  python3 scripts/record_llama_server_shapes.py diff \
      common/server/testdata/llama_server_shapes.json serve_shapes.json

Only the standard library; it talks to the base URL and nothing else.

The request list (common/server/testdata/llama_server_requests.json)
-------------------------------------------------------------------
{
  "comment": "...",
  "requests": [
    {"name": "health", "method": "GET", "path": "/health"},
    {"name": "tokenize", "method": "POST", "path": "/tokenize", "body": {"content": "Hello"}},
    {"name": "malformed_json", "method": "POST", "path": "/completion", "raw_body": "{\"prompt\": "},
    {"name": "metrics", "method": "GET", "path": "/metrics", "status_only": true}
  ]
}
Requests are sent in order, one at a time (the slot save, restore and erase
requests depend on it). `body` is sent as JSON with Content-Type
application/json; `raw_body` is sent as it is, with the same content type;
neither: no body. `headers` (an object of strings) are sent too, a CORS
preflight's Origin say. `status_only`: record the status and content type, not
the body's structure. Names are unique.

The recording (common/server/testdata/llama_server_shapes.json)
---------------------------------------------------------------
{
  "source": {"server": ..., "llama_cpp_commit": ..., "commands": [...],
             "model_export": ..., "date": "YYYY-MM-DD", "base_url_note": ...},
  "format": 1,
  "responses": {
    "<name>": {
      "method": "POST", "path": "/completion",
      "status": 200,
      "content_type": "application/json",      # media type, lower case, no parameters; "" when absent
      "body": "json" | "sse" | "text" | "empty" | "skipped",
      "shape": TREE,                           # body "json" only
      "first": TREE, "last": TREE,             # body "sse" only: the first data event and the
      "done": true                             # last one that is not [DONE]; done: [DONE] ended it
    }
  }
}
TREE is the key structure of one JSON value:
  - an object is an object with the same keys, each mapped to its TREE
    (keys sorted);
  - an array is a list: [] when empty, else [TREE of its first element];
  - a string is "string", a number "number" (integers and fractions alike:
    JSON does not tell them apart reliably across encoders), true and false
    "boolean", null "null".
An SSE event's data that is not JSON is recorded as the TREE "text". A body
is "sse" when the content type is text/event-stream, "json" when it parses
as JSON, "empty" when it has no bytes, "text" otherwise.

The diff prints one line per difference, by request name, with paths such
as choices[].delta.content (an object key after a dot, [] for an array's
element) and, for streams, first: or last: in front:
  - <path>: type T       the key is in the first recording only
  + <path>: type T       the key is in the second recording only
  ~ <path>: T1 -> T2     the value's type differs
  ! status 200 -> 404    (also content type, body kind, [DONE])
An empty array matches any array (it shows no element to compare), and a
key whose subtree is missing is reported once, not key by key below it.
It exits 1 when there is any difference, 0 otherwise.
"""

import argparse
import datetime
import http.client
import json
import sys
import urllib.parse

FORMAT = 1


def shape(v):
    """The TREE of a decoded JSON value."""
    if isinstance(v, dict):
        return {k: shape(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    raise TypeError(f"not a JSON value: {v!r}")


def media_type(header):
    return (header or "").split(";")[0].strip().lower()


def sse_events(text):
    """The data of each server-sent event, in order."""
    events, data = [], []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line == "":
            if data:
                events.append("\n".join(data))
                data = []
            continue
        if line.startswith("data:"):
            d = line[5:]
            data.append(d[1:] if d.startswith(" ") else d)
    if data:
        events.append("\n".join(data))
    return events


def event_shape(data):
    try:
        return shape(json.loads(data))
    except ValueError:
        return "text"


def send(base, req, timeout):
    """Sends one request; returns (status, content type header, body bytes)."""
    u = urllib.parse.urlsplit(base)
    if u.scheme != "http":
        raise SystemExit(f"--base-url must be http://host:port, have {base}")
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    headers = {}
    body = None
    if "body" in req:
        body = json.dumps(req["body"]).encode()
    elif "raw_body" in req:
        body = req["raw_body"].encode()
    if body is not None:
        headers["Content-Type"] = "application/json"
    headers.update(req.get("headers", {}))
    try:
        conn.request(req["method"], u.path.rstrip("/") + req["path"], body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, resp.getheader("Content-Type"), data
    finally:
        conn.close()


def describe(req, status, ctype, data):
    out = {"method": req["method"], "path": req["path"], "status": status, "content_type": media_type(ctype)}
    if req.get("status_only"):
        out["body"] = "skipped"
        return out
    if out["content_type"] == "text/event-stream":
        events = sse_events(data.decode("utf-8", "replace"))
        done = bool(events) and events[-1].strip() == "[DONE]"
        payload = [e for e in events if e.strip() != "[DONE]"]
        out["body"] = "sse"
        out["first"] = event_shape(payload[0]) if payload else None
        out["last"] = event_shape(payload[-1]) if payload else None
        out["done"] = done
        return out
    if not data:
        out["body"] = "empty"
        return out
    try:
        v = json.loads(data)
    except ValueError:
        out["body"] = "text"
        return out
    out["body"] = "json"
    out["shape"] = shape(v)
    return out


def load_requests(path):
    with open(path) as f:
        reqs = json.load(f)["requests"]
    seen = set()
    for r in reqs:
        for k in ("name", "method", "path"):
            if k not in r:
                raise SystemExit(f"{path}: a request has no {k}: {r}")
        if r["name"] in seen:
            raise SystemExit(f"{path}: request name {r['name']} is used twice")
        if "body" in r and "raw_body" in r:
            raise SystemExit(f"{path}: {r['name']} has both body and raw_body")
        h = r.get("headers", {})
        if not isinstance(h, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in h.items()):
            raise SystemExit(f"{path}: {r['name']}: headers must map names to strings")
        seen.add(r["name"])
    return reqs


def record(args):
    reqs = load_requests(args.requests)
    responses = {}
    for r in reqs:
        try:
            status, ctype, data = send(args.base_url, r, args.timeout)
        except OSError as e:
            raise SystemExit(f"{r['name']}: {r['method']} {r['path']}: {e}")
        responses[r["name"]] = describe(r, status, ctype, data)
        if not args.quiet:
            d = responses[r["name"]]
            print(f"{r['name']:<32} {d['status']} {d['content_type'] or '-':<20} {d['body']}", file=sys.stderr)
    source = {
        "server": args.server,
        "llama_cpp_commit": args.commit,
        "commands": args.command,
        "model_export": args.model_export,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    }
    if args.note:
        source["note"] = args.note
    doc = {"source": source, "format": FORMAT, "requests_file": args.requests_name or args.requests, "responses": responses}
    text = json.dumps(doc, indent=1, sort_keys=False, ensure_ascii=False) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w") as f:
            f.write(text)


def type_name(t):
    if isinstance(t, dict):
        return "object"
    if isinstance(t, list):
        return "array"
    if t is None:
        return "none"
    return t


def diff_tree(a, b, path, out):
    ta, tb = type_name(a), type_name(b)
    if ta != tb:
        out.append(f"~ {path or '.'}: {ta} -> {tb}")
        return
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else k
            if k not in b:
                out.append(f"- {p}: {type_name(a[k])}")
            elif k not in a:
                out.append(f"+ {p}: {type_name(b[k])}")
            else:
                diff_tree(a[k], b[k], p, out)
    elif isinstance(a, list):
        # An empty array says nothing of its elements' structure: it
        # matches any array.
        if a and b:
            diff_tree(a[0], b[0], path + "[]", out)


def diff_response(a, b):
    out = []
    for k in ("status", "content_type", "body"):
        if a.get(k) != b.get(k):
            out.append(f"! {k} {a.get(k)!r} -> {b.get(k)!r}")
    if a.get("body") != b.get("body"):
        return out
    if a["body"] == "json":
        diff_tree(a["shape"], b["shape"], "", out)
    elif a["body"] == "sse":
        for part in ("first", "last"):
            sub = []
            diff_tree(a.get(part), b.get(part), "", sub)
            out.extend(line[:2] + part + ":" + line[2:] for line in sub)
        if a.get("done") != b.get("done"):
            out.append(f"! [DONE] at the end {a.get('done')} -> {b.get('done')}")
    return out


def diff(args):
    with open(args.first) as f:
        a = json.load(f)
    with open(args.second) as f:
        b = json.load(f)
    ra, rb = a["responses"], b["responses"]
    total = 0
    same = 0
    for name in list(ra) + [n for n in rb if n not in ra]:
        if name not in rb:
            print(f"{name}: only in {args.first}")
            total += 1
            continue
        if name not in ra:
            print(f"{name}: only in {args.second}")
            total += 1
            continue
        lines = diff_response(ra[name], rb[name])
        if not lines:
            same += 1
            continue
        total += len(lines)
        print(f"{name} ({ra[name]['method']} {ra[name]['path']}):")
        for line in lines:
            print("  " + line)
    print(f"{same} of {len(ra)} requests answered with the same structure; {total} differences")
    return 1 if total else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="send the request list to a running server and write the shapes")
    r.add_argument("--base-url", required=True, help="the server, e.g. http://127.0.0.1:8080")
    r.add_argument("--requests", default="common/server/testdata/llama_server_requests.json")
    r.add_argument("--requests-name", default="", help="how the header names the request list (default: --requests)")
    r.add_argument("--out", required=True, help="the recording to write (- for stdout)")
    r.add_argument("--server", default="", help="what answered, for the header: llama-server, serve ...")
    r.add_argument("--commit", default="", help="llama.cpp commit, for the header")
    r.add_argument("--command", action="append", default=[], help="a command line that made the recording (repeatable)")
    r.add_argument("--model-export", default="", help="how the model was made, for the header")
    r.add_argument("--note", default="", help="anything else the header should say")
    r.add_argument("--timeout", type=float, default=120, help="seconds per request")
    r.add_argument("--quiet", action="store_true")
    d = sub.add_parser("diff", help="print the key-by-key differences of the second recording against the first")
    d.add_argument("first")
    d.add_argument("second")
    args = ap.parse_args()
    if args.cmd == "record":
        record(args)
        return 0
    return diff(args)


if __name__ == "__main__":
    sys.exit(main())
