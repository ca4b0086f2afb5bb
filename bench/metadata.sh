#!/usr/bin/env bash
# Publishing with metadata (a key and two headers) and with idempotency keys against bare
# publishes, in one run against mailroom (release; a fresh server and store per run):
# ROUNDS rounds, each running the three variants back to back in turn, so a load change on
# the machine hits all three alike. Prints each run's line and then the median msgs/s of
# each variant and its ratio to bare.
#
#   bench/metadata.sh                  # defaults: fsync always, 4 publishers, batch 100
#   ROUNDS=5 COUNT=50000 FSYNC=never bench/metadata.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}" COUNT="${COUNT:-20000}" FSYNC="${FSYNC:-always}"
PUBLISHERS="${PUBLISHERS:-4}" BATCH="${BATCH:-100}" SIZE="${SIZE:-256}"
# How the batches are written: binary (the Rust client's default) or json.
ENCODING="${ENCODING:-binary}"
source bench/rounds.sh
bench_run() {
  "$TARGET/mailroom-bench" run --system mailroom --address "$ADDR" --broker-pid "$PID" \
    --workload publish --count "$COUNT" --publishers "$PUBLISHERS" --batch "$BATCH" \
    --payload-bytes "$SIZE" --durability "fsync $FSYNC" --metadata "$1" --batch-encoding "$ENCODING" \
    --out "$WORK/$1.jsonl"
}
rounds_medians bare none key-headers idempotent
