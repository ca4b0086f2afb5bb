#!/usr/bin/env bash
# A long run of the store simulation (crates/mailroom-sim): seeds one after another, each a
# random workload of every store operation with restarts, power cuts, a full disk, failing
# and slow syncs and bit flips, checked against the in-memory model after every step.
#
#   crates/mailroom-sim/scripts/simulate.sh [MINUTES] [FIRST_SEED] [STEPS]
#
# Defaults: 240 minutes from seed 1, 400 steps a seed. Each failing seed is printed with
# the last steps of its trace and the command that replays it exactly; the run goes on to
# the next seed and exits 1 at the end if any failed. Failures are also appended to
# target/simulate-failures.txt.
set -euo pipefail
cd "$(dirname "$0")/../../.."
minutes="${1:-240}"
seed="${2:-1}"
steps="${3:-400}"
cargo build --release -p mailroom-sim
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
"$target/release/mailroom-sim" --from "$seed" --minutes "$minutes" --steps "$steps" \
    | tee -a "$target/simulate-failures.txt"
