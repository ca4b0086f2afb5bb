#!/usr/bin/env bash
# Side-by-side benchmarks (issue 6): mailroom against Redis Streams, NATS JetStream and
# RabbitMQ on this machine, in one run, with a correctness check on every run.
#
#   bench/peers.sh                       # full run, table to bench/peers-latest.md
#   bench/peers.sh --out FILE.md         # table elsewhere
#   BENCH_PROFILE=smoke bench/peers.sh   # tiny counts (what bench/smoke.sh runs)
#   BENCH_SYSTEMS="redis nats" bench/peers.sh   # a subset of systems
#   BENCH_WORKLOADS=parallel bench/peers.sh     # a subset of workload sets: log live parallel
#   BENCH_WORKLOADS=pipelined bench/peers.sh    # only the pipelined publish rows (also in log)
#   BENCH_WORKLOADS=stream bench/peers.sh       # only the consume stream rows (prefetch 1 16 256)
#   PIPELINE_WINDOW=64 bench/peers.sh           # their window per publisher (default 256; empty: skip)
#   WINDOWS="1 16" bench/peers.sh               # the parallel workload's windows (default 1 16 256)
#   TASKS_WINDOW= bench/peers.sh                # skip mailroom's old-shape parallel run (default W 16)
#   ACK_NEXT_WINDOWS= bench/peers.sh            # skip the one-round-trip parallel runs (default 16 256)
#   WIDE_STRICT=10 WIDE_RELAXED=4 bench/peers.sh # how many times the one-at-a-time rows'
#                                               # messages a row moving 16+ a round runs
#   CARGO_TARGET_DIR=/somewhere bench/peers.sh  # build elsewhere (default: ./target)
#   BENCH_NO_BUILD=1 bench/peers.sh             # reuse the binaries already built there
#                                               # (repeated runs while others edit the tree)
#   CPU_HOG=1 bench/peers.sh                    # with that many busy-looping processes
#                                               # beside every run (the loaded case)
#
# What it does:
#   1. apt-get installs redis-server, nats-server, rabbitmq-server if missing (without
#      letting the packages start their system services);
#   2. builds `mailroom-bench` and the `mailroom` server (release); if the server does not
#      build, the peers still run and the table says mailroom is missing;
#   3. for each durability row starts every broker on 127.0.0.1 with its own port and a
#      fresh temp data dir, runs every workload against each, and stops them again:
#        strict : mailroom --fsync always | Redis appendonly, appendfsync always |
#                 RabbitMQ quorum queues (fsync before confirm) | NATS: not in this row
#                 (2.9 has no per-message fsync)
#        relaxed: mailroom --fsync interval:1000 | Redis appendfsync everysec |
#                 NATS JetStream file store (default sync) | RabbitMQ: not in this row
#                 (quorum queues always fsync)
#        parallel (issue 7, in both rows above): one group drained with W in {1, 16, 256}
#                 deliveries in flight; mailroom max_in_flight = W with one consumer doing
#                 poll_batch(max W) + one ack_batch, Redis one consumer XREADGROUP COUNT W +
#                 one XACK; mailroom and Redis only. Plus, at W = 16, mailroom's older shape
#                 (W consumers polling and acking one delivery each), labelled "old shape";
#                 and at W = 16 and 256 one round trip per round: mailroom acking each
#                 round inside its next poll_batch ("ack with next poll"), Redis pipelining
#                 XACK with the next XREADGROUP ("pipelined")
#        consume/retry/fanout: every system in rounds of up to the prefetch (256, and a
#                 prefetch-1 consume): mailroom poll_batch + ack_batch/nack_batch, Redis
#                 XREADGROUP COUNT + one XACK, NATS fetch, RabbitMQ basic.qos
#        pipelined publish (with log, or alone as BENCH_WORKLOADS=pipelined): 1 and 16
#                 publishers, each keeping PIPELINE_WINDOW (256) messages sent and unconfirmed
#                 on its one connection: mailroom's publish stream, Redis pipelined XADD,
#                 JetStream async publish, RabbitMQ publisher confirms
#        memory : live fan-out (no persistence anywhere): mailroom channels over WebSocket,
#                 Redis pub/sub, NATS core
#        disk   : (system "disk", strict row) the disk itself: one thread appending each
#                 message (100 B, 1 KiB) to a file in the same temp dir with write +
#                 fdatasync, no broker; its ratio column reads mailroom's strict unbatched
#                 single publisher as a fraction of the physical limit
#   4. writes the markdown table (machine line and command on top).
#
# Exit status: 0 when every run passed its correctness check, 2 when any run failed its
# check or could not be carried out (the table still gets written).
# Traffic goes to 127.0.0.1 only. Every process it starts, it stops (by pid) on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

OUT_MD="$ROOT/bench/peers-latest.md"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT_MD="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 64 ;;
  esac
done

PROFILE="${BENCH_PROFILE:-full}"
SYSTEMS="${BENCH_SYSTEMS:-mailroom redis nats rabbitmq disk}"
WORKLOADS="${BENCH_WORKLOADS:-log live parallel stream}"
WINDOWS="${WINDOWS:-1 16 256}"
TASKS_WINDOW="${TASKS_WINDOW-16}"   # mailroom's old W-consumers shape at this W; empty: skip
ACK_NEXT_WINDOWS="${ACK_NEXT_WINDOWS-16 256}"   # ack with the next poll / pipelined XACK; empty: skip
PIPELINE_WINDOW="${PIPELINE_WINDOW-256}"   # pipelined publish rows' window; empty: skip
STREAM_PREFETCHES="${STREAM_PREFETCHES-1 16 256}"   # the consume stream set's prefetches
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BUILD="${BENCH_BUILD:-release}"   # smoke uses debug: CI has just built it for the tests
case "$BUILD" in release) BUILD_FLAG=--release ;; debug) BUILD_FLAG= ;; *) echo "BENCH_BUILD: release|debug" >&2; exit 64 ;; esac

# Counts per profile. The strict row is bounded by the disk's fsync rate (a few hundred to
# a few thousand per second on this machine's shared virtio disk), so it uses smaller counts;
# the table shows the count of every run.
if [ "$PROFILE" = smoke ]; then
  PUB_STRICT=${PUB_STRICT:-200};        PUB_RELAXED=${PUB_RELAXED:-500}
  PUB_MANY_STRICT=${PUB_MANY_STRICT:-800}; PUB_MANY_RELAXED=${PUB_MANY_RELAXED:-2000}
  CONSUME_STRICT=${CONSUME_STRICT:-200}; CONSUME_RELAXED=${CONSUME_RELAXED:-500}
  WIDE_STRICT=${WIDE_STRICT:-1};        WIDE_RELAXED=${WIDE_RELAXED:-1}
  LIVE_COUNT=${LIVE_COUNT:-200};        LIVE_RATE=${LIVE_RATE:-500}; LIVE_SUBS=${LIVE_SUBS:-10}
  SIZES=${SIZES:-100}
else
  PUB_STRICT=${PUB_STRICT:-20000};      PUB_RELAXED=${PUB_RELAXED:-200000}
  PUB_MANY_STRICT=${PUB_MANY_STRICT:-100000}; PUB_MANY_RELAXED=${PUB_MANY_RELAXED:-1000000}
  CONSUME_STRICT=${CONSUME_STRICT:-20000}; CONSUME_RELAXED=${CONSUME_RELAXED:-100000}
  WIDE_STRICT=${WIDE_STRICT:-10};       WIDE_RELAXED=${WIDE_RELAXED:-4}
  # 40,000 x 1 KiB = 40 MB for the stalled subscriber: past Redis's default pub/sub output
  # buffer hard limit (32 MB), below NATS's max_pending (64 MB).
  LIVE_COUNT=${LIVE_COUNT:-40000};      LIVE_RATE=${LIVE_RATE:-1000}; LIVE_SUBS=${LIVE_SUBS:-100}
  SIZES=${SIZES:-100 1024}
fi

REDIS_PORT=${REDIS_PORT:-16379}
NATS_PORT=${NATS_PORT:-14222}
RABBIT_PORT=${RABBIT_PORT:-35672}
RABBIT_DIST_PORT=${RABBIT_DIST_PORT:-35673}
EPMD_PORT=${EPMD_PORT:-34369}

log() { printf '[peers %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
source bench/servers.sh
wants() { case " $SYSTEMS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
runs() { case " $WORKLOADS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# ---------------------------------------------------------------- install
install_peers() {
  local missing=()
  wants redis && ! command -v redis-server >/dev/null && missing+=(redis-server)
  wants nats && ! command -v nats-server >/dev/null && missing+=(nats-server)
  wants rabbitmq && [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ] && missing+=(rabbitmq-server)
  [ ${#missing[@]} -eq 0 ] && return 0
  apt_install "${missing[@]}"
}

# ---------------------------------------------------------------- processes
WORK="$(mktemp -d /tmp/mailroom-peers.XXXXXX)"
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
PIDS=()
FAILED=0
EPMD_BEFORE="$(pgrep -x epmd || true)"

stop_all() {
  local pid
  stop_pids
  # epmd daemonises itself when RabbitMQ starts; stop only an epmd that was not there before.
  for pid in $(pgrep -x epmd || true); do
    case " $EPMD_BEFORE " in *" $pid "*) ;; *) stop_pid "$pid" ;; esac
  done
}

# CPU_HOG busy loops run beside the whole run (not stopped between systems, unlike PIDS).
HOG_PIDS=()
start_hogs() {
  local _
  for _ in $(seq 1 "${CPU_HOG:-0}"); do
    sh -c 'while :; do :; done' &
    HOG_PIDS+=("$!")
  done
  [ "${CPU_HOG:-0}" -eq 0 ] || log "started ${CPU_HOG} CPU hog(s): ${HOG_PIDS[*]}"
}

cleanup() {
  stop_all
  local pid
  for pid in "${HOG_PIDS[@]:-}"; do [ -n "$pid" ] && stop_pid "$pid"; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# Refuses a port something else already listens on (another run of this script, say):
# the broker we start would fail to bind while wait_port saw the other one answer, and
# the runs would measure someone else's broker.
port_free() { # port what
  if port_open "$1"; then
    log "$2: port $1 is already in use by another process; set its *_PORT variable"
    FAILED=1; return 1
  fi
}

wait_port() { # port what [seconds [pid]]
  local port="$1" what="$2" seconds="${3:-60}" pid="${4:-}"
  for _ in $(seq 1 $((seconds * 10))); do
    if [ -n "$pid" ] && is_gone "$pid"; then
      log "$what exited before opening port $port"; FAILED=1; return 1
    fi
    if port_open "$port"; then return 0; fi
    sleep 0.1
  done
  log "$what did not open port $port within ${seconds}s"; FAILED=1; return 1
}

start_redis() { # $1 = always | everysec
  local dir="$WORK/redis-$1"; mkdir -p "$dir"
  port_free "$REDIS_PORT" redis || return 1
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$dir" --save '' \
    --appendonly yes --appendfsync "$1" --daemonize no --logfile "$dir/log" &
  REDIS_PID=$!; PIDS+=("$REDIS_PID")
  wait_port "$REDIS_PORT" redis 60 "$REDIS_PID"
}

start_nats() {
  local dir="$WORK/nats"; mkdir -p "$dir"
  port_free "$NATS_PORT" nats || return 1
  nats-server -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$dir" -l "$dir/log" &
  NATS_PID=$!; PIDS+=("$NATS_PID")
  wait_port "$NATS_PORT" nats 60 "$NATS_PID"
}

start_rabbitmq() {
  local dir="$WORK/rabbit"; mkdir -p "$dir/home" "$dir/mnesia" "$dir/log"
  port_free "$RABBIT_PORT" rabbitmq || return 1
  echo '[].' >"$dir/enabled_plugins"
  printf 'listeners.tcp.1 = 127.0.0.1:%s\nloopback_users.guest = true\n' "$RABBIT_PORT" >"$dir/rabbitmq.conf"
  HOME="$dir/home" RABBITMQ_HOME_DIR="$dir/home" RABBITMQ_CONF_ENV_FILE=/dev/null \
  RABBITMQ_NODENAME=mailroombench@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
  RABBITMQ_NODE_PORT="$RABBIT_PORT" RABBITMQ_DIST_PORT="$RABBIT_DIST_PORT" \
  ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT="$EPMD_PORT" \
  RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
  RABBITMQ_PID_FILE="$dir/pid" RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
  RABBITMQ_CONFIG_FILE="$dir/rabbitmq" \
    /usr/lib/rabbitmq/bin/rabbitmq-server >"$dir/stdout" 2>&1 &
  PIDS+=("$!")
  wait_port "$RABBIT_PORT" rabbitmq 120
  # The AMQP listener opens late in boot; the pid file names the Erlang VM itself.
  for _ in $(seq 1 100); do [ -s "$dir/pid" ] && break; sleep 0.1; done
  RABBIT_PID="$(cat "$dir/pid" 2>/dev/null || true)"
  if [ -z "$RABBIT_PID" ]; then log "rabbitmq wrote no pid file"; FAILED=1; return 1; fi
  PIDS+=("$RABBIT_PID")
}

start_mailroom() { # $1 = fsync policy
  local dir="$WORK/mailroom-${1//[:]/-}"
  start_mailroom_in "$dir" "$MAILROOM_BIN" --fsync "$1" && return 0
  log "mailroom did not start: $(tail -5 "$dir/log")"; FAILED=1; return 1
}

# ---------------------------------------------------------------- runs
bench() { # system address pid durability detail workload [args...]
  local system="$1" address="$2" pid="$3" durability="$4" detail="$5" workload="$6"; shift 6
  local status=0 probe=()
  [ -n "$pid" ] && probe=(--broker-pid "$pid")
  "$BENCH_BIN" run --system "$system" --address "$address" "${probe[@]}" \
    --durability "$durability" --durability-detail="$detail" --workload "$workload" \
    --out "$RESULTS" "$@" || status=$?
  if [ "$status" -ne 0 ]; then FAILED=1; log "FAILED ($status): $system $workload $*"; fi
}

# The messages of a consume row that moves `window` deliveries a round, for `durability`:
# a row moving 16 or more runs WIDE_STRICT / WIDE_RELAXED times the one-at-a-time rows'
# `count`, so that both take seconds (20,000 strict messages, what a prefetch-1 row needs,
# took a tenth of a second at prefetch 256).
count_at() { # durability window count
  local factor=1
  if [ "$2" -ge 16 ]; then
    case "$1" in strict) factor=$WIDE_STRICT ;; *) factor=$WIDE_RELAXED ;; esac
  fi
  echo $(( $3 * factor ))
}

log_workloads() { # system address pid durability detail pub pub_many consume
  local s="$1" a="$2" p="$3" d="$4" t="$5" pub="$6" many="$7" consume="$8" size wide
  runs log || return 0
  wide=$(count_at "$d" 256 "$consume")
  for size in $SIZES; do
    bench "$s" "$a" "$p" "$d" "$t" publish --payload-bytes "$size" --count "$pub"
    bench "$s" "$a" "$p" "$d" "$t" publish --payload-bytes "$size" --count "$many" --publishers 16
    bench "$s" "$a" "$p" "$d" "$t" publish --payload-bytes "$size" --count "$many" --batch 100
  done
  bench "$s" "$a" "$p" "$d" "$t" consume --payload-bytes 1024 --count "$wide"
  bench "$s" "$a" "$p" "$d" "$t" retry --payload-bytes 1024 --count "$wide" --fail-every 10 --max-attempts 3
  bench "$s" "$a" "$p" "$d" "$t" fanout --payload-bytes 1024 --count "$wide" --groups 4
  # The same consume with no prefetch: every system moves one delivery per round trip,
  # which separates protocol shape from implementation cost.
  bench "$s" "$a" "$p" "$d" "$t" consume --payload-bytes 1024 --count "$consume" --prefetch 1
}

pipelined_workload() { # system address pid durability detail count
  local size
  { runs log || runs pipelined; } && [ -n "$PIPELINE_WINDOW" ] || return 0
  for size in $SIZES; do
    bench "$1" "$2" "$3" "$4" "$5" publish --payload-bytes "$size" --count "$6" --publish-mode pipelined --window "$PIPELINE_WINDOW"
    bench "$1" "$2" "$3" "$4" "$5" publish --payload-bytes "$size" --count "$6" --publishers 16 --publish-mode pipelined --window "$PIPELINE_WINDOW"
  done
}

stream_workload() { # system address pid durability detail count
  local prefetch count
  runs stream || return 0
  # The consume stream (issue 19): mailroom pushes over one WebSocket, window = prefetch;
  # the peers' own consumers are already their like-for-like (Redis blocking XREADGROUP
  # + XACK, RabbitMQ basic.consume with basic.qos, NATS pull fetch), so they run the
  # plain consume at the same prefetch, and mailroom's HTTP consume runs beside it.
  for prefetch in $STREAM_PREFETCHES; do
    count=$(count_at "$4" "$prefetch" "$6")
    bench "$1" "$2" "$3" "$4" "$5" consume --payload-bytes 1024 --count "$count" --prefetch "$prefetch"
    if [ "$1" = mailroom ]; then
      bench "$1" "$2" "$3" "$4" "$5" consume --payload-bytes 1024 --count "$count" --prefetch "$prefetch" --mailroom-stream
    fi
  done
}

parallel_workload() { # system address pid durability detail count
  local window
  runs parallel || return 0
  for window in $WINDOWS; do
    bench "$1" "$2" "$3" "$4" "$5" parallel --payload-bytes 1024 --count "$(count_at "$4" "$window" "$6")" --window "$window"
  done
  # mailroom's shape before the batch API, for comparison: W consumers, one delivery each.
  if [ "$1" = mailroom ] && [ -n "$TASKS_WINDOW" ]; then
    bench "$1" "$2" "$3" "$4" "$5" parallel --payload-bytes 1024 --count "$6" --window "$TASKS_WINDOW" --mailroom-shape tasks
  fi
  # One round trip per round: mailroom acks a round inside its next poll_batch (like NATS
  # AckNext); Redis, for fairness, pipelines the round's XACK with the next XREADGROUP.
  for window in $ACK_NEXT_WINDOWS; do
    case "$1" in
      mailroom) bench "$1" "$2" "$3" "$4" "$5" parallel --payload-bytes 1024 --count "$(count_at "$4" "$window" "$6")" --window "$window" --mailroom-shape ack-next ;;
      redis) bench "$1" "$2" "$3" "$4" "$5" parallel --payload-bytes 1024 --count "$(count_at "$4" "$window" "$6")" --window "$window" --redis-shape pipelined ;;
    esac
  done
}

disk_workload() { # the disk's own write + fdatasync rate, beside the strict publish rows
  local size dir="$WORK/disk"
  wants disk && runs log || return 0
  mkdir -p "$dir"
  for size in $SIZES; do
    bench disk "$dir" "" strict "write + fdatasync per message" publish --payload-bytes "$size" --count "$PUB_STRICT"
  done
}

live_workload() { # system address pid
  runs live || return 0
  bench "$1" "$2" "$3" memory "no persistence" live --payload-bytes 1024 \
    --count "$LIVE_COUNT" --rate "$LIVE_RATE" --subscribers "$LIVE_SUBS" --mailbox 1024
}

# ---------------------------------------------------------------- main
install_peers
log "building ($BUILD) into $CARGO_TARGET_DIR"
BENCH_BIN="$CARGO_TARGET_DIR/$BUILD/mailroom-bench"
MAILROOM_BIN=""
# One cargo call for both binaries: separate calls unify features differently and rebuild
# half the dependency tree each time. The debug build is `cargo test --workspace --no-run`,
# which makes exactly what CI's `cargo test --workspace` made, so after it this is a no-op.
if [ "$BUILD" = debug ]; then
  build_all() { cargo test --workspace --no-run --quiet; }
else
  build_all() { cargo build --release --quiet -p mailroom-bench -p mailroom-cli; }
fi
if [ -n "${BENCH_NO_BUILD:-}" ]; then
  build_all() { [ -x "$BENCH_BIN" ] && { ! wants mailroom || [ -x "$CARGO_TARGET_DIR/$BUILD/mailroom" ]; }; }
fi
if build_all; then
  wants mailroom && MAILROOM_BIN="$CARGO_TARGET_DIR/$BUILD/mailroom"
else
  log "the workspace does not build: trying the bench alone; mailroom rows will be missing"
  cargo build $BUILD_FLAG --quiet -p mailroom-bench
  if wants mailroom; then FAILED=1; fi
fi

start_hogs
STARTED_AT="$(date -u +%Y-%m-%dT%H:%MZ)"
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
T0=$SECONDS

log "row strict"
if [ -n "$MAILROOM_BIN" ] && start_mailroom always; then
  log_workloads mailroom "$MAILROOM_ADDR" "$MAILROOM_PID" strict "--fsync always" "$PUB_STRICT" "$PUB_MANY_STRICT" "$CONSUME_STRICT"
  pipelined_workload mailroom "$MAILROOM_ADDR" "$MAILROOM_PID" strict "--fsync always" "$PUB_MANY_STRICT"
  stream_workload mailroom "$MAILROOM_ADDR" "$MAILROOM_PID" strict "--fsync always" "$CONSUME_STRICT"
  parallel_workload mailroom "$MAILROOM_ADDR" "$MAILROOM_PID" strict "--fsync always" "$CONSUME_STRICT"
fi
stop_all
disk_workload
if wants redis && start_redis always; then
  log_workloads redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID" strict "appendfsync always" "$PUB_STRICT" "$PUB_MANY_STRICT" "$CONSUME_STRICT"
  pipelined_workload redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID" strict "appendfsync always" "$PUB_MANY_STRICT"
  stream_workload redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID" strict "appendfsync always" "$CONSUME_STRICT"
  parallel_workload redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID" strict "appendfsync always" "$CONSUME_STRICT"
fi
stop_all
if wants rabbitmq && start_rabbitmq; then
  log_workloads rabbitmq "127.0.0.1:$RABBIT_PORT" "$RABBIT_PID" strict "quorum queue, fsync before confirm" "$PUB_STRICT" "$PUB_MANY_STRICT" "$CONSUME_STRICT"
  pipelined_workload rabbitmq "127.0.0.1:$RABBIT_PORT" "$RABBIT_PID" strict "quorum queue, fsync before confirm" "$PUB_MANY_STRICT"
  stream_workload rabbitmq "127.0.0.1:$RABBIT_PORT" "$RABBIT_PID" strict "quorum queue, fsync before confirm" "$CONSUME_STRICT"
fi
stop_all

log "row relaxed"
if [ -n "$MAILROOM_BIN" ] && start_mailroom interval:1000; then
  log_workloads mailroom "$MAILROOM_ADDR" "$MAILROOM_PID" relaxed "--fsync interval:1000" "$PUB_RELAXED" "$PUB_MANY_RELAXED" "$CONSUME_RELAXED"
  pipelined_workload mailroom "$MAILROOM_ADDR" "$MAILROOM_PID" relaxed "--fsync interval:1000" "$PUB_MANY_RELAXED"
  stream_workload mailroom "$MAILROOM_ADDR" "$MAILROOM_PID" relaxed "--fsync interval:1000" "$CONSUME_RELAXED"
  parallel_workload mailroom "$MAILROOM_ADDR" "$MAILROOM_PID" relaxed "--fsync interval:1000" "$CONSUME_RELAXED"
  live_workload mailroom "$MAILROOM_ADDR" "$MAILROOM_PID"
fi
stop_all
if wants redis && start_redis everysec; then
  log_workloads redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID" relaxed "appendfsync everysec" "$PUB_RELAXED" "$PUB_MANY_RELAXED" "$CONSUME_RELAXED"
  pipelined_workload redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID" relaxed "appendfsync everysec" "$PUB_MANY_RELAXED"
  stream_workload redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID" relaxed "appendfsync everysec" "$CONSUME_RELAXED"
  parallel_workload redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID" relaxed "appendfsync everysec" "$CONSUME_RELAXED"
  live_workload redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID"
fi
stop_all
if wants nats && start_nats; then
  log_workloads nats "127.0.0.1:$NATS_PORT" "$NATS_PID" relaxed "JetStream file store, default sync" "$PUB_RELAXED" "$PUB_MANY_RELAXED" "$CONSUME_RELAXED"
  pipelined_workload nats "127.0.0.1:$NATS_PORT" "$NATS_PID" relaxed "JetStream file store, default sync" "$PUB_MANY_RELAXED"
  stream_workload nats "127.0.0.1:$NATS_PORT" "$NATS_PID" relaxed "JetStream file store, default sync" "$CONSUME_RELAXED"
  live_workload nats "127.0.0.1:$NATS_PORT" "$NATS_PID"
fi
stop_all

ELAPSED=$((SECONDS - T0))
{
  echo "# mailroom vs peers ($PROFILE profile)"
  echo
  echo "- Ran: $STARTED_AT, $((ELAPSED / 60)) min $((ELAPSED % 60)) s; load average $LOAD_BEFORE before, $(cut -d' ' -f1-3 /proc/loadavg) after; CPU hogs beside it: ${CPU_HOG:-0}."
  echo "- Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r); shared and noisy."
  echo "- Versions: $(redis-server --version 2>/dev/null | awk '{print $1, $3}' || true); $(nats-server --version 2>/dev/null || true); RabbitMQ $(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || true); mailroom $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') (+ uncommitted work tree)."
  echo "- Command: \`${BENCH_CMD:-bench/peers.sh}\` ($BUILD build, profile $PROFILE; counts: publish $PUB_STRICT / $PUB_RELAXED unbatched, $PUB_MANY_STRICT / $PUB_MANY_RELAXED with 16 publishers or batches of 100; consume one at a time $CONSUME_STRICT / $CONSUME_RELAXED (strict / relaxed), $WIDE_STRICT / $WIDE_RELAXED times that at 16 or more a round; live $LIVE_COUNT msgs at $LIVE_RATE/s to $LIVE_SUBS subscribers)."
  echo "- Latency: publish = call until confirmed (per message); consume/retry/fanout = asking for a delivery's round (one poll/fetch/XREADGROUP of up to the prefetch; RabbitMQ, which pushes, hands over one delivery per round) until the ack/nack calls settling it returned; parallel = asking for a batch until its ack returned; live = publish stamp to arrival. Peak RSS marked * is since broker start (reset refused)."
  echo
  "$BENCH_BIN" table --input "$RESULTS"
} >"$OUT_MD"
cp "$RESULTS" "${OUT_MD%.md}.jsonl"
log "table written to $OUT_MD ($ELAPSED s)"
if [ "$FAILED" -ne 0 ]; then log "some runs failed their check or did not run"; exit 2; fi
