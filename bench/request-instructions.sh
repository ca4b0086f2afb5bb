#!/usr/bin/env bash
# The user-space instructions one mailroom server (release, under valgrind's callgrind)
# spends per unbatched 1 KiB publish from 16 publishers under `--fsync interval:1000`, the
# relaxed row of bench/peers.sh where broker CPU decides the rate (issue 19). Counted, not
# timed, so two builds compare on a loaded machine. Start-up (a server that serves one
# request) is counted apart and taken off.
#
#   bench/request-instructions.sh                          # the release build in $CARGO_TARGET_DIR
#   MAILROOM=/path/to/other/mailroom bench/request-instructions.sh
#   RUST_LOG=info bench/request-instructions.sh            # with the access log on
#   COUNT=40000 PUBLISHERS=1 bench/request-instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}/release"
COUNT="${COUNT:-20000}" PUBLISHERS="${PUBLISHERS:-16}" SIZE="${SIZE:-1024}"
source bench/servers.sh
callgrind_setup "$TARGET"
for run in startup publish; do
  start_mailroom_callgrind_in "$WORK/$run" "$WORK/$run.cg" "$MAILROOM" --fsync interval:1000 ||
    { echo "mailroom did not start: $(tail -5 "$WORK/$run/log")" >&2; exit 1; }
  PID="$MAILROOM_PID" ADDR="$MAILROOM_ADDR"
  # One request first: a signal before the server installs its handler would end it
  # without callgrind's file.
  curl -sf -X PUT "http://$ADDR/v1/topics/warm" >/dev/null
  if [ "$run" = publish ]; then
    "$TARGET/mailroom-bench" run --system mailroom --address "$ADDR" --workload publish \
      --count "$COUNT" --publishers "$PUBLISHERS" --payload-bytes "$SIZE" \
      --durability relaxed --out "$WORK/run.jsonl" >/dev/null 2>"$WORK/bench.log"
  fi
  kill -INT "$PID"
  wait "$PID" || true
  grep -h '^summary:' "$WORK/$run.cg"* | awk -v r="$run" '{s += $2} END {print r, s}' \
    >>"$WORK/totals"
done
awk -v n="$COUNT" '{t[$1] = $2} END {
  printf "startup %d instructions; %d publishes: %d instructions, %.0f per publish\n",
    t["startup"], n, t["publish"], (t["publish"] - t["startup"]) / n }' "$WORK/totals"
