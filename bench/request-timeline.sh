#!/usr/bin/env bash
# Where the time of one strict request goes (issue 19): N unbatched 1 KiB publishes from one
# publisher (`mailroom-bench`, one keep-alive HTTP/1.1 connection, each waiting for its
# answer) against `mailroom serve --fsync always`, with the server's syscalls traced by
# `perf trace`. Each request is cut into what the server's syscalls bound:
#
#   read    the request's bytes arrive (the first `recvfrom` with data after the last answer)
#   before  from there to the `fdatasync` that makes it durable: parse, append, the record's
#           `pwrite`, and any hand-off to the thread that syncs
#   sync    the `fdatasync` itself: the disk
#   after   from the sync's end to the answer's `writev`: waking the request, the answer
#   outside from the answer to the next request's bytes: the client and both network hops
#
# and prints the median and p90 of each part, beside the raw disk loop's write + fdatasync
# in the same run (`mailroom-bench --system disk`) for the physical limit. Then the same for
# Redis (`appendfsync always`, one connection, XADD), when redis-server is installed: its
# one thread reads, appends, syncs and answers, so its parts read alike.
#
#   bench/request-timeline.sh                  # N = 2000, the release build in $CARGO_TARGET_DIR
#   N=5000 bench/request-timeline.sh
#
# Needs perf (with syscall tracepoints) and python3. Every process it starts, it stops.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-2000}"
TARGET="${CARGO_TARGET_DIR:-target}/release"
WORK="$(mktemp -d /tmp/mailroom-timeline.XXXXXX)"
log() { printf '[timeline] %s\n' "$*" >&2; }
source bench/servers.sh
PIDS=()
trap 'stop_pids; rm -rf "$WORK"' EXIT

mkdir -p "$WORK/disk"
"$TARGET/mailroom-bench" run --system disk --address "$WORK/disk" --workload publish \
  --payload-bytes 1024 --count "$N" --out "$WORK/disk.jsonl" >/dev/null 2>&1
# Traces PID's syscalls while one publisher sends N messages to SYSTEM at ADDRESS.
trace_run() { # system address pid
  perf trace -p "$3" -e recvfrom,read,pwrite64,write,fdatasync,writev,futex \
    -o "$WORK/trace-$1" 2>/dev/null &
  local tracer=$!
  PIDS+=("$tracer")
  sleep 1   # perf attaches to every thread before the first request
  "$TARGET/mailroom-bench" run --system "$1" --address "$2" --broker-pid "$3" \
    --workload publish --payload-bytes 1024 --count "$N" --publishers 1 \
    --durability strict --out "$WORK/$1.jsonl" >/dev/null 2>&1
  kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
  echo "== $1"
  python3 bench/request_timeline.py "$WORK/trace-$1" "$WORK/disk.jsonl" "$WORK/$1.jsonl"
}

start_mailroom_in "$WORK/server" "$TARGET/mailroom" --fsync always ||
  { echo "mailroom did not start: $(tail -5 "$WORK/server/log")" >&2; exit 1; }
trace_run mailroom "$MAILROOM_ADDR" "$MAILROOM_PID"
stop_pids
if command -v redis-server >/dev/null; then
  port="$(free_port)"
  mkdir -p "$WORK/redis"
  redis-server --bind 127.0.0.1 --port "$port" --dir "$WORK/redis" --save '' \
    --appendonly yes --appendfsync always --daemonize no --logfile "$WORK/redis/log" &
  redis_pid=$!
  PIDS+=("$redis_pid")
  for _ in $(seq 1 100); do port_open "$port" && break; sleep 0.1; done
  trace_run redis "127.0.0.1:$port" "$redis_pid"
fi
