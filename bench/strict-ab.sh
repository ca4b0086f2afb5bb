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
WORK="$(mktemp -d "${TMPDIR:-/tmp}/mailroom-strict-ab.XXXXXX")"
source bench/servers.sh
PIDS=()
trap 'stop_pids; rm -rf "$WORK"' EXIT

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
  # Tag the line just written with who ran and which round.
  python3 - "$WORK/results.jsonl" "$label" "$ROUND" <<'PY'
import json, sys
path, label, round_ = sys.argv[1], sys.argv[2], sys.argv[3]
lines = open(path).read().splitlines()
last = json.loads(lines[-1]); last["ab_label"] = label; last["ab_round"] = int(round_)
lines[-1] = json.dumps(last)
open(path, "w").write("\n".join(lines) + "\n")
PY
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
python3 - "$WORK/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
failed = [r for r in rows if not r["verdict"]["passed"]]
rates = {}
for r in rows:
    key = (r["workload"], r["variant"])
    rates.setdefault(key, {}).setdefault(r["ab_label"], []).append(r["msgs_per_s"])
labels = ["disk", "baseline", "candidate", "redis"]
print("| row | " + " | ".join(labels) + " | candidate / baseline | candidate / redis |")
print("|---|" + "---:|" * (len(labels) + 2))
for (workload, variant), by in rates.items():
    med = {l: statistics.median(by[l]) for l in labels if l in by}
    cells = []
    for l in labels:
        runs = ", ".join(f"{v:,.0f}" for v in by.get(l, []))
        cells.append(f"{runs} (median {med[l]:,.0f})" if l in med else "")
    ratio = lambda a, b: f"{med[a] / med[b]:.2f}" if a in med and b in med else ""
    print(f"| {workload} {variant} | " + " | ".join(cells) + f" | {ratio('candidate', 'baseline')} | {ratio('candidate', 'redis')} |")
# Within one round both servers met much the same disk: the paired ratio per round.
by_round = {(r["workload"], r["variant"], r["ab_round"], r["ab_label"]): r["msgs_per_s"] for r in rows}
for workload, variant in rates:
    rounds = sorted({k[2] for k in by_round if k[:2] == (workload, variant)})
    paired = [by_round[(workload, variant, n, "candidate")] / by_round[(workload, variant, n, "baseline")]
              for n in rounds if (workload, variant, n, "candidate") in by_round
              and (workload, variant, n, "baseline") in by_round]
    if paired:
        print(f"{workload} {variant}: candidate / baseline per round " + ", ".join(f"{p:.2f}" for p in paired))
print(f"{len(failed)} runs failed their check")
sys.exit(1 if failed else 0)
PY
