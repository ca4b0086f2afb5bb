# Sourced by the benchmarks that compare variants of one workload against mailroom
# (bench/keys.sh, bench/metadata.sh): builds the release binaries (unless BENCH_NO_BUILD is
# set), runs ROUNDS rounds of every variant back to back, so a load change on the machine
# hits them all alike, and prints each variant's runs, median msgs/s and ratio to the
# first variant. Every run gets a fresh `mailroom serve` (FSYNC, a free port, an empty
# store in a temporary directory), stopped and removed after it: a store that grows over
# the rounds would otherwise slow the later runs and decide the medians.
#
#   source bench/rounds.sh            # sets TARGET and WORK
#   bench_run() { ... --address "$ADDR" --broker-pid "$PID" --out "$WORK/$1.jsonl"; }
#   rounds_medians "bare" none key-headers        # the first variant's name in the ratio
TARGET="${CARGO_TARGET_DIR:-target}/release"
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --quiet -p mailroom-bench -p mailroom-cli
WORK="$(mktemp -d)"
source bench/servers.sh
PIDS=()
trap 'stop_pids; rm -rf "$WORK"' EXIT

# Starts a fresh server for one run in $WORK/server (removing the last one's): sets PID
# and ADDR.
start_round_server() {
  stop_pids
  rm -rf "$WORK/server"
  start_mailroom_in "$WORK/server" "$TARGET/mailroom" --fsync "$FSYNC" ||
    { echo "mailroom did not start: $(tail -5 "$WORK/server/log")" >&2; exit 1; }
  PID="$MAILROOM_PID" ADDR="$MAILROOM_ADDR"
}

# Runs ROUNDS rounds of `bench_run VARIANT`, each on a fresh server, for every variant
# after the first argument (the name the ratio gives the first variant), then prints the
# medians.
rounds_medians() {
  local baseline="$1"
  shift
  for round in $(seq 1 "$ROUNDS"); do
    for variant in "$@"; do
      start_round_server
      bench_run "$variant"
    done
  done
  python3 - "$WORK" "$baseline" "$@" <<'PY'
import json, statistics, sys
work, baseline, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
width = max(len(v) for v in variants) + 1
medians = {}
for variant in variants:
    rates = [json.loads(line)["msgs_per_s"] for line in open(f"{work}/{variant}.jsonl")]
    medians[variant] = statistics.median(rates)
    print(f"{variant:{width}} runs {[round(r) for r in rates]} median {medians[variant]:.0f} msgs/s "
          f"({medians[variant] / medians[variants[0]]:.3f} of {baseline})")
PY
}
