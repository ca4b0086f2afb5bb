#!/usr/bin/env bash
# The instructions one mailroom server (release, under valgrind's callgrind) spends on
# COUNT messages published bare, with a key and two headers, and with an idempotency key
# each: the same workload as bench/metadata.sh, counted instead of timed, so the figures
# hold on a loaded machine (callgrind counts user-space instructions, whatever else runs).
# Prints each variant's total, the server's start-up alone, and per message (start-up
# taken off) with its ratio to bare.
#
#   bench/metadata-instructions.sh                 # COUNT=20000, 4 publishers, batch 100, 256 B
#   MAILROOM=/path/to/other/mailroom bench/metadata-instructions.sh   # another build
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}/release"
COUNT="${COUNT:-20000}" PUBLISHERS="${PUBLISHERS:-4}" BATCH="${BATCH:-100}" SIZE="${SIZE:-256}"
# How the batches are written: binary (the Rust client's default) or json.
ENCODING="${ENCODING:-binary}"
source bench/servers.sh
callgrind_setup "$TARGET"
for variant in startup none key-headers idempotent; do
  start_mailroom_callgrind_in "$WORK/$variant" "$WORK/$variant.cg" "$MAILROOM" --fsync never ||
    { echo "mailroom did not start: $(tail -5 "$WORK/$variant/log")" >&2; exit 1; }
  PID="$MAILROOM_PID" ADDR="$MAILROOM_ADDR"
  # One request first: a signal that comes before the server installs its handler
  # would end it without callgrind's file (and the start-up count holds a request too).
  curl -sf -X PUT "http://$ADDR/v1/topics/warm" >/dev/null
  if [ "$variant" != startup ]; then
    "$TARGET/mailroom-bench" run --system mailroom --address "$ADDR" --workload publish \
      --count "$COUNT" --publishers "$PUBLISHERS" --batch "$BATCH" --payload-bytes "$SIZE" \
      --durability "fsync never" --metadata "$variant" \
      --batch-encoding "$ENCODING" --out "$WORK/$variant.jsonl" \
      >/dev/null 2>"$WORK/$variant.bench"
  fi
  kill -INT "$PID"
  wait "$PID" || true
  grep -h '^summary:' "$WORK/$variant.cg"* | awk -v v="$variant" '{s += $2} END {print v, s}' \
    >>"$WORK/totals"
done
python3 - "$WORK/totals" "$COUNT" <<'PY'
import sys
totals = dict(line.split() for line in open(sys.argv[1]))
count, startup = int(sys.argv[2]), int(totals["startup"])
per = {v: (int(totals[v]) - startup) / count for v in ["none", "key-headers", "idempotent"]}
print(f"startup {startup:,} instructions")
for variant, each in per.items():
    print(f"{variant:12} {int(totals[variant]):,} instructions, {each:,.0f} per message "
          f"({each / per['none']:.2f}x bare)")
PY
