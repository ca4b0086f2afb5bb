#!/usr/bin/env bash
# Publishing with metadata (a key and two headers) and with idempotency keys against bare
# publishes, in one run against mailroom (release; a fresh server and store per run):
# ROUNDS rounds, each running the variants back to back in turn, so a load change on the
# machine hits them all alike. Prints each run's line and then the median msgs/s of each
# variant and its ratio to bare. The fourth variant, equal-bytes, publishes bare payloads
# as long as a keyed message's record body (SIZE + the 124-byte metadata block of the key
# and two headers): the same bytes on the wire and on disk with no metadata to handle, so
# key-headers against it is what handling the metadata costs, and it against bare is what
# the bytes cost.
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
  local metadata="$1" size="$SIZE"
  # The key "customer-0042" and the headers traceparent (55 bytes) and content-type
  # ("application/json") of mailroom-bench's key-headers make a 124-byte block.
  [ "$1" = equal-bytes ] && metadata=none size=$((SIZE + 124))
  "$TARGET/mailroom-bench" run --system mailroom --address "$ADDR" --broker-pid "$PID" \
    --workload publish --count "$COUNT" --publishers "$PUBLISHERS" --batch "$BATCH" \
    --payload-bytes "$size" --durability "fsync $FSYNC" --metadata "$metadata" --batch-encoding "$ENCODING" \
    --out "$WORK/$1.jsonl"
}
rounds_medians bare none key-headers idempotent equal-bytes
