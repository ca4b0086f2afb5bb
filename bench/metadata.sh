#!/usr/bin/env bash
# Publishing with metadata (a key and two headers) and with idempotency keys against bare
# publishes, in one run against one mailroom server (release): ROUNDS rounds, each running
# the three variants back to back in turn, so a load change on the machine hits all three
# alike. Prints each run's line and then the median msgs/s of each variant and its ratio
# to bare.
#
#   bench/metadata.sh                  # defaults: fsync always, 4 publishers, batch 100
#   ROUNDS=5 COUNT=50000 FSYNC=never bench/metadata.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}/release"
ROUNDS="${ROUNDS:-3}" COUNT="${COUNT:-20000}" FSYNC="${FSYNC:-always}"
PUBLISHERS="${PUBLISHERS:-4}" BATCH="${BATCH:-100}" SIZE="${SIZE:-256}"
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
  for metadata in none key-headers idempotent; do
    "$TARGET/mailroom-bench" run --system mailroom --address "$ADDR" --broker-pid "$PID" \
      --workload publish --count "$COUNT" --publishers "$PUBLISHERS" --batch "$BATCH" \
      --payload-bytes "$SIZE" --durability "fsync $FSYNC" --metadata "$metadata" \
      --out "$WORK/$metadata.jsonl"
  done
done
python3 - "$WORK" <<'PY'
import json, statistics, sys
medians = {}
for variant in ["none", "key-headers", "idempotent"]:
    rates = [json.loads(line)["msgs_per_s"] for line in open(f"{sys.argv[1]}/{variant}.jsonl")]
    medians[variant] = statistics.median(rates)
    print(f"{variant:12} runs {[round(r) for r in rates]} median {medians[variant]:.0f} msgs/s "
          f"({medians[variant] / medians.get('none', medians[variant]):.3f} of bare)")
PY
