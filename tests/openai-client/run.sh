#!/usr/bin/env bash
# Builds the phase-8 radix-tree runnable, serves the built-in model with
# --prefix-caching on a free loopback port, runs the official OpenAI Node
# client against it (npm ci installs the pinned version), then stops the
# server with SIGTERM and checks that it shut down cleanly.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=../../scripts/lib/serve.sh
. "$root/scripts/lib/serve.sh"
(cd "$root" && go build -o "$work/phase08_prefix" ./phase08_prefix)
start_server "$work/server.log" "$work/phase08_prefix" --prefix-caching
server_pid=$SERVER_PID
url=$SERVER_URL
echo "server at $url"

(cd "$here" && npm ci --no-audit --no-fund --loglevel=error && KVLAB_URL="$url" node --test)

kill -TERM "$server_pid"
wait "$server_pid"
server_pid=""
cat "$work/server.log"
grep -q "audit clean" "$work/server.log"
