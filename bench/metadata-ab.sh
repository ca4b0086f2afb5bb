#!/usr/bin/env bash
# bench/metadata.sh for two builds side by side in one run: a baseline's and this tree's
# servers run at once (each on its own data dir), and every round runs the baseline's
# three variants (bare, key + 2 headers, idempotent) and then this tree's, each build
# with its own mailroom-bench, so a load change on the machine hits both alike. Prints
# the medians of each build's variants, their ratios to that build's bare rate, and the
# servers' CPU per run.
#
#   BASE=/path/to/baseline/release bench/metadata-ab.sh   # a dir with mailroom + mailroom-bench
#   BASE=... ROUNDS=7 COUNT=500000 SIZE=256 bench/metadata-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
HERE="${HERE:-${CARGO_TARGET_DIR:-target}/release}"
BASE="${BASE:?set BASE to the baseline build dir, with mailroom and mailroom-bench}"
ROUNDS="${ROUNDS:-3}" COUNT="${COUNT:-20000}" FSYNC="${FSYNC:-always}"
PUBLISHERS="${PUBLISHERS:-4}" BATCH="${BATCH:-100}" SIZE="${SIZE:-256}"
WORK="$(mktemp -d)"
source bench/servers.sh
PIDS=()
trap 'stop_pids; rm -rf "$WORK"' EXIT
start() { # $1 name, $2 dir: starts that build's server, sets ADDR_$1 and PID_$1
  start_mailroom_in "$WORK/$1" "$2/mailroom" --fsync "$FSYNC" ||
    { echo "$1 did not start: $(tail -5 "$WORK/$1/log")" >&2; exit 1; }
  printf -v "ADDR_$1" '%s' "$MAILROOM_ADDR"
  printf -v "PID_$1" '%s' "$MAILROOM_PID"
}
start base "$BASE"
start here "$HERE"
for round in $(seq 1 "$ROUNDS"); do
  for build in base here; do
    dir="$BASE"; [ "$build" = here ] && dir="$HERE"
    addr="ADDR_$build" pid="PID_$build"
    for metadata in none key-headers idempotent; do
      "$dir/mailroom-bench" run --system mailroom --address "${!addr}" --broker-pid "${!pid}" \
        --workload publish --count "$COUNT" --publishers "$PUBLISHERS" --batch "$BATCH" \
        --payload-bytes "$SIZE" --durability "fsync $FSYNC" --metadata "$metadata" \
        --out "$WORK/$build-$metadata.jsonl" >/dev/null
    done
  done
done
python3 - "$WORK" <<'PY'
import json, statistics, sys
for build in ["base", "here"]:
    bare = None
    for variant in ["none", "key-headers", "idempotent"]:
        runs = [json.loads(line) for line in open(f"{sys.argv[1]}/{build}-{variant}.jsonl")]
        rate = statistics.median(r["msgs_per_s"] for r in runs)
        cpu = [r.get("broker_cpu_s") for r in runs]
        cpu = round(statistics.median(cpu), 3) if None not in cpu else None
        bare = bare or rate
        print(f"{build} {variant:12} runs {[round(r['msgs_per_s']) for r in runs]} "
              f"median {rate:.0f} msgs/s ({rate / bare:.3f} of bare), server CPU s {cpu}")
PY

