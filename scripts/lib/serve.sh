# start_server LOG BINARY [ARGS...] starts `BINARY serve --port 0 ARGS...`
# in the background with its log in LOG, and waits (up to 60 s) until it
# prints the address it listens on. It sets SERVER_PID and SERVER_URL, and
# fails with the log when the server exits or never listens. Sourced by
# the scripts that run a server beside a client.
start_server() {
  local log="$1" bin="$2"
  shift 2
  "$bin" serve --port 0 "$@" 2>"$log" &
  SERVER_PID=$!
  SERVER_URL=""
  for _ in $(seq 1 600); do
    SERVER_URL="$(grep -o 'listening on http://[0-9.:]*' "$log" | head -1 | sed 's/listening on //' || true)"
    [ -n "$SERVER_URL" ] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$log"; echo "server exited before listening" >&2; return 1; }
    sleep 0.1
  done
  cat "$log"
  echo "server did not start" >&2
  return 1
}
