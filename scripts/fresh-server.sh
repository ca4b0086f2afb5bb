# Sourced by the scripts that test a real server (schemathesis.sh, readme-curl.sh,
# openapi-clients.sh, clients-test.sh): one way to build the binary, start a fresh
# `mailroom serve` on a free loopback port and stop it again.
#
#   source scripts/fresh-server.sh
#   start_fresh_server "$work"      # sets $server (its pid) and $url (http://ADDR)
#   stop_fresh_server               # in the script's EXIT trap; safe if never started
#
# The server keeps its data in WORKDIR/store (fsync never: these runs check the API, not
# durability) and writes its stdout to WORKDIR/server.out, stderr to WORKDIR/server.err.

server=""
url=""
mailroom_bin=""

# Builds the debug binary and sets $mailroom_bin to its path (for scripts whose tests
# start servers of their own, as the clients' tests do to restart them).
build_server_binary() {
  cargo build --quiet --bin mailroom
  mailroom_bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/mailroom"
}

start_fresh_server() {
  local work="$1"
  build_server_binary
  "$mailroom_bin" serve --listen 127.0.0.1:0 --data "$work/store" --fsync never \
    >"$work/server.out" 2>"$work/server.err" &
  server=$!
  # The server prints its address once the socket is bound; wait for that line.
  for _ in $(seq 1 200); do
    # The file may not exist yet: the background shell may not have opened it.
    url="$(sed -n 's/^mailroom listening on //p' "$work/server.out" 2>/dev/null || true)"
    [ -n "$url" ] && return 0
    kill -0 "$server" 2>/dev/null || { echo "server exited early" >&2; cat "$work/server.err" >&2; exit 1; }
    sleep 0.05
  done
  echo "server did not start" >&2
  exit 1
}

stop_fresh_server() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=""
  fi
}
