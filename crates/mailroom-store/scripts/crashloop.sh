#!/usr/bin/env bash
# A long kill -9 soak of the store: runs tests/store_crashloop.rs (one thread, seed
# operations), tests/store_crashloop_parallel.rs (a publisher and several consumers at
# once, batches, max_in_flight 8) and tests/store_crashloop_beyond.rs (leases that run
# out, touch, delayed nacks and backoff, release, reject, redrive and purge at once, on a
# clock the child moves) for many cycles each.
#
#   crates/mailroom-store/scripts/crashloop.sh [CYCLES] [FIRST_SEED] [WHICH]
#
# Defaults: 2000 cycles from seed 1, all three loops (WHICH: all, seed, parallel or
# beyond). A failure prints the cycle, the child's seed and the kill point; rerun with the
# same FIRST_SEED to replay the same seeds and kill points (the parallel and beyond loops'
# thread interleaving is not reproducible, so a rare failure there may need several runs).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cycles="${1:-2000}"
seed="${2:-1}"
which="${3:-all}"
case "$which" in
    all) tests=(--test store_crashloop --test store_crashloop_parallel --test store_crashloop_beyond) ;;
    seed) tests=(--test store_crashloop) ;;
    parallel) tests=(--test store_crashloop_parallel) ;;
    beyond) tests=(--test store_crashloop_beyond) ;;
    *) echo "WHICH must be all, seed, parallel or beyond" >&2; exit 2 ;;
esac
MAILROOM_CRASHLOOP_CYCLES="$cycles" MAILROOM_CRASHLOOP_SEED="$seed" \
    cargo test --release --no-fail-fast -p mailroom-store "${tests[@]}" -- --nocapture
