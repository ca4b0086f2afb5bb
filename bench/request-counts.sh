#!/usr/bin/env bash
# Counts what one request costs the server (issue 19): syscalls (strace -c -f), context
# switches (perf stat) and, when heaptrack is installed, allocations, for N unbatched
# 1 KiB publishes and N poll + ack round trips on one keep-alive connection, under
# `--fsync always`. Prints per-request figures.
#
#   bench/request-counts.sh                 # N = 500, the release build in $CARGO_TARGET_DIR
#   N=2000 bench/request-counts.sh
#   RUST_LOG=info bench/request-counts.sh   # with the access log line per request (off by default)
#
# Needs strace, perf and python3; heaptrack optional. Every process it starts, it stops by
# pid.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-500}"
BIN="${CARGO_TARGET_DIR:-target}/release/mailroom"
WORK="$(mktemp -d /tmp/mailroom-counts.XXXXXX)"
SERVER=""
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

# One keep-alive connection: `setup` makes topic t, group g and N messages to poll.
cat >"$WORK/drive.py" <<'PY'
import http.client, json, sys
host, port = sys.argv[1].rsplit(':', 1); phase = sys.argv[2]; n = int(sys.argv[3])
c = http.client.HTTPConnection(host, int(port))
def req(method, path, body=b''):
    c.request(method, path, body=body); r = c.getresponse(); data = r.read()
    assert r.status < 300, (r.status, data); return data
if phase in ('setup', 'publish'):
    if phase == 'setup':
        req('PUT', '/v1/topics/t'); req('PUT', '/v1/topics/t/groups/g', b'{"max_attempts": 3}')
    for _ in range(n): req('POST', '/v1/topics/t/messages', b'x' * 1024)
else:
    for _ in range(n):
        d = json.loads(req('POST', '/v1/topics/t/groups/g/poll'))
        req('POST', '/v1/topics/t/groups/g/ack',
            json.dumps({"offset": d["offset"], "attempt": d["attempt"]}).encode())
PY

start() { # [wrapper command...]: starts the server (under the wrapper), sets SERVER, PID, ADDR
  "$@" "$BIN" serve --listen 127.0.0.1:0 --data "$WORK/data-$RANDOM" --fsync always >"$WORK/out" 2>"$WORK/log" &
  SERVER=$!
  ADDR=""
  for _ in $(seq 1 200); do
    ADDR="$(sed -n 's|^mailroom listening on http://||p' "$WORK/out" | head -1)"
    [ -n "$ADDR" ] && break; sleep 0.1
  done
  [ -n "$ADDR" ] || { echo "the server did not start" >&2; exit 1; }
  # Under heaptrack $! is the wrapper; the server is its child named mailroom.
  PID="$SERVER"
  for child in $(pgrep -P "$SERVER" || true); do
    [ "$(cat "/proc/$child/comm")" = mailroom ] && PID="$child"
  done
  return 0
}

per() { awk -v n="$2" '{printf "%.2f", $1 / n}' <<<"$1"; }

start
python3 "$WORK/drive.py" "$ADDR" setup "$N"
for phase in publish pollack; do
  strace -c -f -p "$PID" -o "$WORK/strace-$phase" 2>/dev/null & tracer=$!
  sleep 1   # strace attaches to every thread before the first request
  python3 "$WORK/drive.py" "$ADDR" "$phase" "$N"
  kill -INT "$tracer"; wait "$tracer" || true
  perf stat -x, -e context-switches -p "$PID" -o "$WORK/perf-$phase" & counter=$!
  sleep 0.5
  python3 "$WORK/drive.py" "$ADDR" "$phase" "$N"
  kill -INT "$counter"; wait "$counter" || true
  echo "== $phase: per request (pollack: per poll + ack round trip), N = $N"
  awk -v n="$N" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {printf "  %-14s %6.2f\n", $NF, $4 / n}' "$WORK/strace-$phase"
  awk -v n="$N" '/^-+ /{next} $NF == "total" {printf "  %-14s %6.2f\n", "syscalls", $(NF-2) / n}' "$WORK/strace-$phase"
  switches="$(grep context-switches "$WORK/perf-$phase" | cut -d, -f1)"
  echo "  context switches $(per "$switches" "$N")"
done
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=""

command -v heaptrack >/dev/null || { echo "(no heaptrack: allocations not counted)"; exit 0; }
allocations() { # phase count -> allocation calls of a server that served setup + count of phase
  start heaptrack -o "$WORK/heap-$1-$2"
  python3 "$WORK/drive.py" "$ADDR" setup "$N"
  python3 "$WORK/drive.py" "$ADDR" "$1" "$2"
  kill -INT "$PID"; wait "$SERVER" 2>/dev/null || true; SERVER=""
  heaptrack_print "$WORK"/heap-"$1"-"$2".*zst 2>/dev/null | sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p'
}
base="$(allocations publish 0)"
for phase in publish pollack; do
  calls="$(allocations "$phase" "$N")"
  if [ "$calls" = "$base" ]; then
    # heaptrack sees malloc, not mimalloc, the server's global allocator (mailroom-cli's
    # main.rs): a build with it shows no allocations, which is not a count.
    echo "== $phase: allocations not counted (no malloc calls seen: the server allocates through mimalloc)"
    continue
  fi
  echo "== $phase: allocations per request $(per "$((calls - base))" "$N")"
done
