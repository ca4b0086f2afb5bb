#!/usr/bin/env bash
# A long kill -9 soak of the store: runs tests/store_crashloop.rs (one thread: publish,
# poll, ack, nack), tests/store_crashloop_parallel.rs (a publisher and several consumers at
# once, batches, max_in_flight 8) and tests/store_crashloop_leases.rs (leases that run
# out, touch, delayed nacks and backoff, release, reject, redrive and purge at once, on a
# clock the child moves) for many cycles each.
#
#   crates/mailroom-store/scripts/crashloop.sh [CYCLES] [FIRST_SEED] [WHICH]
#
# Defaults: 2000 cycles from seed 1, all three loops (WHICH: all, single, parallel or
# leases). A failure prints the cycle, the child's seed and the kill point; rerun with the
# same FIRST_SEED to replay the same seeds and kill points (the parallel and leases loops'
# thread interleaving is not reproducible, so a rare failure there may need several runs).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cycles="${1:-2000}"
seed="${2:-1}"
which="${3:-all}"
case "$which" in
    all) tests=(--test store_crashloop --test store_crashloop_parallel --test store_crashloop_leases) ;;
    single) tests=(--test store_crashloop) ;;
    parallel) tests=(--test store_crashloop_parallel) ;;
    leases) tests=(--test store_crashloop_leases) ;;
    *) echo "WHICH must be all, single, parallel or leases" >&2; exit 2 ;;
esac
MAILROOM_CRASHLOOP_CYCLES="$cycles" MAILROOM_CRASHLOOP_SEED="$seed" \
    cargo test --release --no-fail-fast -p mailroom-store "${tests[@]}" -- --nocapture
