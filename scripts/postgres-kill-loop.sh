#!/usr/bin/env bash
# The long kill -9 loop over the PostgreSQL store: two brokers on one database under
# load, one of them killed with SIGKILL and restarted ROUNDS times (1,000 by default;
# CI runs 30 through `cargo test`), then everything confirmed checked
# (crates/mailroom-cli/tests/server_postgres_kill_loop.rs says what).
#
#   scripts/postgres-kill-loop.sh                 1,000 rounds, a seed from the clock
#   ROUNDS=200 SEED=42 scripts/postgres-kill-loop.sh
#
# Uses the cluster in MAILROOM_TEST_POSTGRES if set, else makes a throwaway one with
# scripts/postgres.sh and stops it at exit. A failure prints MAILROOM_KILL_SEED and
# MAILROOM_KILL_ROUNDS: set SEED and ROUNDS to them to replay the same kill schedule.
set -euo pipefail
cd "$(dirname "$0")/.."

export MAILROOM_KILL_ROUNDS="${ROUNDS:-1000}"
if [[ -n "${SEED:-}" ]]; then
    export MAILROOM_KILL_SEED="$SEED"
fi
if [[ -z "${MAILROOM_TEST_POSTGRES:-}" ]]; then
    postgres_dir="$(mktemp -d)"
    trap 'scripts/postgres.sh stop "$postgres_dir"' EXIT
    MAILROOM_TEST_POSTGRES="$(scripts/postgres.sh start "$postgres_dir")"
    export MAILROOM_TEST_POSTGRES
fi
cargo test -p mailroom-cli --test server_postgres_kill_loop -- --nocapture
