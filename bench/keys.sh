#!/usr/bin/env bash
# Ordering keys against unkeyed messages, consuming: one group with W = prefetch (256 by
# default) drains a log of COUNT messages, every message acked (poll/batch + ack/batch),
# in one run against one mailroom server (release). Each round consumes an unkeyed log
# and a log whose messages carry one of KEYS distinct keys (drawn at random per message),
# back to back, so a load change on the machine hits both alike. Prints each run's line,
# the median msgs/s of each variant and the keyed median's ratio to the unkeyed one.
#
#   bench/keys.sh                          # defaults: fsync always, W 256, 1,000 keys
#   ROUNDS=5 COUNT=100000 FSYNC=never bench/keys.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}/release"
ROUNDS="${ROUNDS:-3}" COUNT="${COUNT:-50000}" FSYNC="${FSYNC:-always}"
PREFETCH="${PREFETCH:-256}" KEYS="${KEYS:-1000}" SIZE="${SIZE:-256}"
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --quiet -p mailroom-bench -p mailroom-cli
WORK="$(mktemp -d)"
"$TARGET/mailroom" serve --listen 127.0.0.1:0 --data "$WORK/data" --fsync "$FSYNC" \
  >"$WORK/stdout" 2>"$WORK/log" &
PID=$!
trap 'kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
ADDR=""
for _ in $(seq 1 300); do
  ADDR="$(sed -n 's|^mailroom listening on http://||p' "$WORK/stdout" | head -1)"
  [ -n "$ADDR" ] && break
  sleep 0.1
done
[ -n "$ADDR" ] || { echo "mailroom did not start: $(tail -5 "$WORK/log")" >&2; exit 1; }
for round in $(seq 1 "$ROUNDS"); do
  for metadata in none keys; do
    "$TARGET/mailroom-bench" run --system mailroom --address "$ADDR" --broker-pid "$PID" \
      --workload consume --count "$COUNT" --prefetch "$PREFETCH" --payload-bytes "$SIZE" \
      --durability "fsync $FSYNC" --metadata "$metadata" --keys "$KEYS" \
      --out "$WORK/$metadata.jsonl"
  done
done
python3 - "$WORK" <<'PY'
import json, statistics, sys
medians = {}
for variant in ["none", "keys"]:
    rates = [json.loads(line)["msgs_per_s"] for line in open(f"{sys.argv[1]}/{variant}.jsonl")]
    medians[variant] = statistics.median(rates)
    print(f"{variant:5} runs {[round(r) for r in rates]} median {medians[variant]:.0f} msgs/s "
          f"({medians[variant] / medians['none']:.3f} of unkeyed)")
PY
