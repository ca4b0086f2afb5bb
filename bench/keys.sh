#!/usr/bin/env bash
# Ordering keys against unkeyed messages, consuming: one group with W = prefetch (256 by
# default) drains a log of COUNT messages, every message acked (poll/batch + ack/batch),
# in one run against mailroom (release; a fresh server and store per run). Each round
# consumes an unkeyed log and a log whose messages carry one of KEYS distinct keys (drawn
# at random per message), back to back, so a load change on the machine hits both alike.
# Prints each run's line, the median msgs/s of each variant and the keyed median's ratio to
# the unkeyed one.
#
#   bench/keys.sh                          # defaults: fsync always, W 256, 1,000 keys
#   ROUNDS=5 COUNT=100000 FSYNC=never bench/keys.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}" COUNT="${COUNT:-50000}" FSYNC="${FSYNC:-always}"
PREFETCH="${PREFETCH:-256}" KEYS="${KEYS:-1000}" SIZE="${SIZE:-256}"
source bench/rounds.sh
bench_run() {
  "$TARGET/mailroom-bench" run --system mailroom --address "$ADDR" --broker-pid "$PID" \
    --workload consume --count "$COUNT" --prefetch "$PREFETCH" --payload-bytes "$SIZE" \
    --durability "fsync $FSYNC" --metadata "$1" --keys "$KEYS" \
    --out "$WORK/$1.jsonl"
}
rounds_medians unkeyed none keys
