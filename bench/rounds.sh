# Sourced by the benchmarks that compare variants of one workload against one mailroom
# server (bench/keys.sh, bench/metadata.sh): builds the release binaries (unless
# BENCH_NO_BUILD is set), starts `mailroom serve` on a free port with FSYNC in a
# temporary directory (stopped and removed on exit), runs ROUNDS rounds of every variant
# back to back, so a load change on the machine hits them all alike, and prints each
# variant's runs, median msgs/s and ratio to the first variant.
#
#   source bench/rounds.sh            # sets TARGET, WORK, PID, ADDR; the server is up
#   bench_run() { ... --out "$WORK/$1.jsonl"; }   # runs one variant once
#   rounds_medians "bare" none key-headers        # the first variant's name in the ratio
TARGET="${CARGO_TARGET_DIR:-target}/release"
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --quiet -p mailroom-bench -p mailroom-cli
WORK="$(mktemp -d)"
source bench/servers.sh
PIDS=()
trap 'stop_pids; rm -rf "$WORK"' EXIT
start_mailroom_in "$WORK" "$TARGET/mailroom" --fsync "$FSYNC" ||
  { echo "mailroom did not start: $(tail -5 "$WORK/log")" >&2; exit 1; }
PID="$MAILROOM_PID" ADDR="$MAILROOM_ADDR"

# Runs ROUNDS rounds of `bench_run VARIANT` for every variant after the first argument
# (the name the ratio gives the first variant), then prints the medians.
rounds_medians() {
  local baseline="$1"
  shift
  for round in $(seq 1 "$ROUNDS"); do
    for variant in "$@"; do
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
