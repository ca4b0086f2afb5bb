#!/usr/bin/env bash
# The harness's smoke run for CI: every workload against mailroom and the three peers with
# tiny counts (the parallel workload of issue 7 with W = 1, 16 and 256, mailroom and Redis,
# plus mailroom's older W-consumers shape at W = 16, and the one-round-trip shapes at W = 16
# and 256: mailroom acking with its next poll, Redis pipelining XACK with XREADGROUP),
# so the load generator, the adapters and the correctness checks keep working.
# Figures from this run mean nothing (debug build, tiny counts); only the checks count.
#
#   bench/smoke.sh
#
# Installs redis-server, nats-server and rabbitmq-server if missing. Uses the debug build
# that `cargo test --workspace` has just made. Finishes in well under 3 minutes on the
# 2-core machine once the packages are installed. Exits non-zero when any run fails its
# correctness check (lost, duplicated or wrongly dead-lettered messages) or cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d /tmp/mailroom-smoke.XXXXXX)"
trap 'rm -rf "$out"' EXIT
status=0
BENCH_PROFILE=smoke BENCH_BUILD=debug BENCH_CMD="bench/smoke.sh" bench/peers.sh --out "$out/smoke.md" || status=$?
cat "$out/smoke.md" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
  echo "bench smoke: FAILED (status $status)" >&2
  exit 1
fi
echo "bench smoke: every run passed its correctness check"
