#!/usr/bin/env bash
# What HTTP adds to time to first token: the radix tree's engine run in
# process (`bench`) and behind `serve --prefix-caching` (`bench --url`),
# alternately, ROUNDS times each on the same workload; prints each round's
# TTFT p50 and the ratio of the medians. A fresh server per round, so every
# round starts with an empty cache. Usage: scripts/http-overhead.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/serve.sh
rounds="${1:-5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
go build -o "$work/phase08_prefix" ./phase08_prefix
bin="$work/phase08_prefix"
args=(--workload prefix_caching --quiet --plot "")
for i in $(seq 1 "$rounds"); do
  "$bin" bench "${args[@]}" --json "$work/in-$i.json" >/dev/null 2>&1
  start_server "$work/server-$i.log" "$bin" --prefix-caching
  "$bin" bench --url "$SERVER_URL" "${args[@]}" --json "$work/http-$i.json" >/dev/null 2>&1
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID"
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def p50(kind, i):
    return json.load(open(f"{work}/{kind}-{i}.json"))[0]["summary"]["ttft"]["p50_ns"] / 1e6
inp = [p50("in", i) for i in range(1, rounds + 1)]
http = [p50("http", i) for i in range(1, rounds + 1)]
print("in-process TTFT p50 (ms):", " ".join(f"{v:.1f}" for v in inp))
print("over HTTP  TTFT p50 (ms):", " ".join(f"{v:.1f}" for v in http))
a, b = statistics.median(inp), statistics.median(http)
print(f"medians: in process {a:.1f} ms, over HTTP {b:.1f} ms; HTTP / in process = {b / a:.2f}")
PY
