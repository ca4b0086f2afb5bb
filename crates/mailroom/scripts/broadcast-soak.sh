#!/usr/bin/env bash
# Repeats the broadcast stress tests and loom models for a longer soak than CI affords.
# Usage: crates/mailroom/scripts/broadcast-soak.sh [ROUNDS]   (default 200)
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-200}
cargo test --release -p mailroom --test broadcast_stress --no-run
for round in $(seq 1 "$rounds"); do
    echo "--- round $round of $rounds"
    cargo test --release -q -p mailroom --test broadcast_stress
done
RUSTFLAGS="--cfg loom" cargo test --release -p mailroom --test broadcast_loom
echo "soak passed: $rounds rounds"
