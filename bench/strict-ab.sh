#!/usr/bin/env bash
# The strict one-message-per-request rows, two mailroom builds side by side (issue 19):
# a baseline server and a candidate server, both `--fsync always`, with Redis
# (`appendfsync always`) and the disk's own 1 KiB write + fdatasync loop beside them, in
# alternating rounds of the same run, so a loaded machine moves them all alike. Prints
# every round and the medians.
#
#   BASELINE=/path/to/old/mailroom CANDIDATE=/path/to/new/mailroom bench/strict-ab.sh
#   ROUNDS=5 PUBLISH_COUNT=8000 CONSUME_COUNT=3000 bench/strict-ab.sh
#
# Rows: publish (1 publisher, unbatched, 1 KiB), consume --prefetch 1, parallel --window 1
# (one group, one delivery in flight). BENCH (default: $CARGO_TARGET_DIR/release/mailroom-bench)
# is the client for every system. Data goes to one temp dir on the disk under test
# (TMPDIR). Every process it starts, it stops by pid.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}/release"
BASELINE="${BASELINE:?BASELINE=path of the baseline mailroom binary}"
CANDIDATE="${CANDIDATE:-$TARGET/mailroom}"
BENCH="${BENCH:-$TARGET/mailroom-bench}"
ROUNDS="${ROUNDS:-3}"
PUBLISH_COUNT="${PUBLISH_COUNT:-6000}"
CONSUME_COUNT="${CONSUME_COUNT:-3000}"
REDIS_PORT="${REDIS_PORT:-16479}"
source bench/servers.sh
work_dir_with_cleanup strict-ab

start_mailroom() { # name binary; sets ADDRESS (not in a subshell: PIDS must keep the pid)
  start_mailroom_in "$WORK/$1" "$2" --fsync always && { ADDRESS="$MAILROOM_ADDR"; return 0; }
  echo "$1 did not start: $(tail -5 "$WORK/$1/log")" >&2; return 1
}

start_mailroom baseline "$BASELINE"; BASELINE_ADDR="$ADDRESS"
start_mailroom candidate "$CANDIDATE"; CANDIDATE_ADDR="$ADDRESS"
mkdir -p "$WORK/redis" "$WORK/disk"
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$WORK/redis" --save '' \
  --appendonly yes --appendfsync always --daemonize no --logfile "$WORK/redis/log" &
PIDS+=("$!")
for _ in $(seq 1 100); do port_open "$REDIS_PORT" && break; sleep 0.1; done

run() { # label system address workload args...
  local label="$1" system="$2" address="$3" workload="$4"; shift 4
  "$BENCH" run --system "$system" --address "$address" --durability strict \
    --workload "$workload" --out "$WORK/results.jsonl" "$@" >/dev/null
  python3 bench/ab_results.py tag "$WORK/results.jsonl" "$label" "$ROUND"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ROUND in $(seq 1 "$ROUNDS"); do
  # Alternate who goes first, so neither always meets the disk's same moment.
  if [ $((ROUND % 2)) = 1 ]; then order="baseline candidate"; else order="candidate baseline"; fi
  run disk disk "$WORK/disk" publish --payload-bytes 1024 --count "$PUBLISH_COUNT"
  for who in $order redis; do
    case "$who" in
      baseline) system=mailroom; address="$BASELINE_ADDR" ;;
      candidate) system=mailroom; address="$CANDIDATE_ADDR" ;;
      redis) system=redis; address="127.0.0.1:$REDIS_PORT" ;;
    esac
    run "$who" "$system" "$address" publish --payload-bytes 1024 --count "$PUBLISH_COUNT"
    run "$who" "$system" "$address" consume --payload-bytes 1024 --count "$CONSUME_COUNT" --prefetch 1
    run "$who" "$system" "$address" parallel --payload-bytes 1024 --count "$CONSUME_COUNT" --window 1
  done
  echo "round $ROUND done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
cp "$WORK/results.jsonl" "${AB_RESULTS:-/tmp/strict-ab-results.jsonl}"
echo "results: ${AB_RESULTS:-/tmp/strict-ab-results.jsonl}"
python3 bench/ab_results.py table "$WORK/results.jsonl" disk baseline candidate redis \
  --ratio candidate/baseline --ratio candidate/redis
