#!/usr/bin/env bash
# A long kill -9 soak of the store: runs tests/store_crashloop.rs (one thread, seed
# operations) and tests/store_crashloop_parallel.rs (a publisher and several consumers at
# once, batches, max_in_flight 8) for many cycles each.
#
#   crates/mailroom-store/scripts/crashloop.sh [CYCLES] [FIRST_SEED] [WHICH]
#
# Defaults: 2000 cycles from seed 1, both loops (WHICH: all, seed or parallel). A failure
# prints the cycle, the child's seed and the kill point; rerun with the same FIRST_SEED to
# replay the same seeds and kill points (the parallel loop's thread interleaving is not
# reproducible, so a rare failure there may need several runs).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cycles="${1:-2000}"
seed="${2:-1}"
which="${3:-all}"
case "$which" in
    all) tests=(--test store_crashloop --test store_crashloop_parallel) ;;
    seed) tests=(--test store_crashloop) ;;
    parallel) tests=(--test store_crashloop_parallel) ;;
    *) echo "WHICH must be all, seed or parallel" >&2; exit 2 ;;
esac
MAILROOM_CRASHLOOP_CYCLES="$cycles" MAILROOM_CRASHLOOP_SEED="$seed" \
    cargo test --release --no-fail-fast -p mailroom-store "${tests[@]}" -- --nocapture
