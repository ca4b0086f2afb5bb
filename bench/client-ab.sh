#!/usr/bin/env bash
# Two builds of the bench client (and so of mailroom-client) side by side against the same
# servers (issue 19): one mailroom and one Redis each under the relaxed policies
# (`--fsync interval:1000`, `appendfsync everysec`) and each under the strict ones
# (`--fsync always`, `appendfsync always`), every row run by the baseline bench and the
# candidate bench in alternating rounds. A change to the bench's own code (its payloads,
# say) reaches Redis's runs too, so read each build's mailroom ÷ Redis beside the rates.
#
#   BASELINE_BENCH=/path/to/old/mailroom-bench bench/client-ab.sh
#   ROUNDS=5 MAILROOM=/path/to/mailroom bench/client-ab.sh
#
# Rows: relaxed publish (1 KiB 1 and 16 publishers, 100 B 16 publishers, unbatched),
# relaxed consume at prefetch 16 and 1, strict one group W 1 and strict consume prefetch 1.
# CANDIDATE_BENCH and MAILROOM default to the release build in $CARGO_TARGET_DIR. Every
# process it starts, it stops by pid.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}/release"
BASELINE_BENCH="${BASELINE_BENCH:?BASELINE_BENCH=path of the baseline mailroom-bench}"
CANDIDATE_BENCH="${CANDIDATE_BENCH:-$TARGET/mailroom-bench}"
MAILROOM="${MAILROOM:-$TARGET/mailroom}"
ROUNDS="${ROUNDS:-3}"
source bench/servers.sh
work_dir_with_cleanup client-ab

start_redis() { # name appendfsync; sets REDIS_ADDR and REDIS_PID
  local port; port="$(free_port)"
  mkdir -p "$WORK/$1"
  redis-server --bind 127.0.0.1 --port "$port" --dir "$WORK/$1" --save '' \
    --appendonly yes --appendfsync "$2" --daemonize no --logfile "$WORK/$1/log" &
  REDIS_PID=$!; PIDS+=("$REDIS_PID")
  for _ in $(seq 1 100); do port_open "$port" && break; sleep 0.1; done
  REDIS_ADDR="127.0.0.1:$port"
}
start_mailroom_in "$WORK/mailroom-relaxed" "$MAILROOM" --fsync interval:1000
RELAXED_MAILROOM=("$MAILROOM_ADDR" "$MAILROOM_PID")
start_mailroom_in "$WORK/mailroom-strict" "$MAILROOM" --fsync always
STRICT_MAILROOM=("$MAILROOM_ADDR" "$MAILROOM_PID")
start_redis redis-relaxed everysec; RELAXED_REDIS=("$REDIS_ADDR" "$REDIS_PID")
start_redis redis-strict always; STRICT_REDIS=("$REDIS_ADDR" "$REDIS_PID")

run() { # build durability workload args...: the row on mailroom, then on Redis
  local build="$1" durability="$2" bench; shift 2
  [ "$build" = baseline ] && bench="$BASELINE_BENCH" || bench="$CANDIDATE_BENCH"
  for system in mailroom redis; do
    local -n server="${durability^^}_${system^^}"
    "$bench" run --system "$system" --address "${server[0]}" --broker-pid "${server[1]}" \
      --durability "$durability" --out "$WORK/results.jsonl" --workload "$@" >/dev/null
    python3 bench/ab_results.py tag "$WORK/results.jsonl" "$build:$system" "$ROUND"
  done
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ROUND in $(seq 1 "$ROUNDS"); do
  if [ $((ROUND % 2)) = 1 ]; then order="baseline candidate"; else order="candidate baseline"; fi
  for build in $order; do
    run "$build" relaxed publish --payload-bytes 1024 --count 20000
    run "$build" relaxed publish --payload-bytes 1024 --count 60000 --publishers 16
    run "$build" relaxed publish --payload-bytes 100 --count 60000 --publishers 16
    run "$build" relaxed consume --payload-bytes 1024 --count 50000 --prefetch 16
    run "$build" relaxed consume --payload-bytes 1024 --count 10000 --prefetch 1
    run "$build" strict parallel --payload-bytes 1024 --count 2000 --window 1
    run "$build" strict consume --payload-bytes 1024 --count 2000 --prefetch 1
  done
  echo "round $ROUND done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
cp "$WORK/results.jsonl" "${AB_RESULTS:-/tmp/client-ab-results.jsonl}"
echo "results: ${AB_RESULTS:-/tmp/client-ab-results.jsonl}"
python3 bench/ab_results.py table "$WORK/results.jsonl" \
  baseline:mailroom candidate:mailroom baseline:redis candidate:redis \
  --ratio candidate:mailroom/baseline:mailroom \
  --ratio baseline:mailroom/baseline:redis --ratio candidate:mailroom/candidate:redis
