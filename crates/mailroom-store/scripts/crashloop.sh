#!/usr/bin/env bash
# A long kill -9 soak of the store: runs tests/store_crashloop.rs for many cycles.
#
#   crates/mailroom-store/scripts/crashloop.sh [CYCLES] [FIRST_SEED]
#
# Defaults: 2000 cycles from seed 1. A failure prints the cycle's state; rerun it with
# the same FIRST_SEED to replay the same sequence of child seeds and kill points.
set -euo pipefail
cd "$(dirname "$0")/../../.."
cycles="${1:-2000}"
seed="${2:-1}"
MAILROOM_CRASHLOOP_CYCLES="$cycles" MAILROOM_CRASHLOOP_SEED="$seed" \
    cargo test --release -p mailroom-store --test store_crashloop -- --nocapture
