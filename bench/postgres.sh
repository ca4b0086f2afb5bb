#!/usr/bin/env bash
# mailroom over PostgreSQL against the PostgreSQL queues people use instead (issue 15):
# PgQ (`postgresql-15-pgq3`) and the hand-written `FOR UPDATE SKIP LOCKED` queue table,
# on ONE PostgreSQL cluster made for the run, in one run, alternating rounds; with
# mailroom's embedded store beside them, and with a correctness check on every run.
#
#   bench/postgres.sh                       # table to bench/postgres-latest.md
#   bench/postgres.sh --out FILE.md
#   ROUNDS=3 bench/postgres.sh              # rounds (each runs every system in turn)
#   ROWS="strict relaxed" bench/postgres.sh # durability rows (default: strict)
#   BENCH_SYSTEMS="mailroom-pg pgq" bench/postgres.sh   # a subset of: mailroom-pg
#                                           # mailroom-pg-2 mailroom-pg-stream mailroom-embedded
#                                           # pgq skiplocked
#   BENCH_PROFILE=smoke bench/postgres.sh   # tiny counts, one round
#   WORKLOADS="consume-1 consume" bench/postgres.sh  # a subset of: publish-1
#                                           # publish-many publish-pipelined publish-batch
#                                           # consume-1 consume consume-wide retry
#   CARGO_TARGET_DIR=/somewhere BENCH_NO_BUILD=1 bench/postgres.sh  # reuse built binaries
#   GROUP_WINDOW=128 bench/postgres.sh      # mailroom's groups' max_in_flight (default:
#                                           # the prefetch): a round may go past a retry
#
# The cluster: initdb in a temp dir (as the user `mailroom-ci` when root, as
# scripts/postgres.sh does), on a free loopback port, with fsync = on, synchronous_commit
# = on, full_page_writes = on (the defaults: this is NOT scripts/postgres.sh's test
# cluster, which runs with fsync off; synchronous_commit is set per row by ALTER SYSTEM
# and checked), max_connections = 300 and pg_stat_statements
# loaded (with track_planning, so that the tables at the end show planning time too).
# One database per system: mr1 (one broker), mr2 (two brokers), pgq, skiplocked.
#
# Rows (matched durability):
#   strict : synchronous_commit = on for all (a commit waits for its WAL flush);
#            the embedded store with --fsync always
#   relaxed: synchronous_commit = off for all (ALTER SYSTEM + reload: up to 3 x
#            wal_writer_delay of commits may be lost in a crash); the embedded store
#            with --fsync interval:200 (wal_writer_delay's default)
#
# Workloads, 1 KiB payloads unless said: publish unbatched (1 publisher, and PUBLISHERS
# (16) publishers, each on its own connection, to one topic), one publisher keeping
# PREFETCH (64) unbatched messages in flight, each confirmed on its own (mailroom: the
# publish stream; PgQ and SKIP LOCKED: autocommit inserts pipelined on one connection),
# and batches of 100; consume + ack one group with prefetch / batch 1, PREFETCH (64) and
# WIDE (256: where a call's fixed cost matters least, `consume-wide`); the 10%
# failure workload (every 10th message rejected until dead-lettered, max 3 attempts) at
# PREFETCH. mailroom: poll/batch carrying the previous round's acks and rejections (one
# request and one transaction per round; `--mailroom-shape ack-next`), over HTTP; `mailroom-pg-stream` runs the consume workloads over the consume
# stream instead (one WebSocket, window = prefetch, acks sent up the socket; one broker);
# with 2 brokers
# every HTTP call goes to the next broker in turn (a round-robin load balancer), so a
# consumer's poll and its ack land on different brokers. PgQ: one transaction per batch
# (next_batch, get_batch_events, event_retry, finish_batch), the bench ticking after
# every PREFETCH events while filling (pgqd's part) and every 10 ms while consuming.
# SKIP LOCKED: one claim statement per round, one DELETE of the acks, one UPDATE of the
# retries, one move of the dead letters, each autocommit. Every statement prepared.
#
# Where the time goes, per run (mailroom-bench --database-url/--database-pid): the
# database's CPU (the postmaster and all its children, from /proc), WAL flushes and
# writes (pg_stat_wal), commits (pg_stat_database), statements (pg_stat_statements);
# and the brokers' CPU. Each probed run waits 10.5 s after its timed phase for the
# statistics to settle (PostgreSQL flushes an idle backend's counters after 10 s), and a
# run that fills its topic first waits as long before it, so the fill is not counted.
#
# Exit status: 0 when every run passed its check, 2 otherwise (the table is still
# written). Every process it starts, it stops (by pid) on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

OUT_MD="$ROOT/bench/postgres-latest.md"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT_MD="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 64 ;;
  esac
done

PROFILE="${BENCH_PROFILE:-full}"
SYSTEMS="${BENCH_SYSTEMS:-mailroom-pg mailroom-pg-stream mailroom-pg-2 mailroom-embedded pgq skiplocked}"
ROWS="${ROWS:-strict}"
WORKLOADS="${WORKLOADS:-publish-1 publish-many publish-pipelined publish-batch consume-1 consume consume-wide retry}"
PREFETCH="${PREFETCH:-64}"
WIDE="${WIDE:-256}"
PUBLISHERS="${PUBLISHERS:-16}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ "$PROFILE" = smoke ]; then
  ROUNDS=${ROUNDS:-1}; PUB=${PUB:-100}; PUB_MANY=${PUB_MANY:-320}; PUB_BATCH=${PUB_BATCH:-1000}
  PUB_PIPE=${PUB_PIPE:-500}
  CONSUME_ONE=${CONSUME_ONE:-100}; CONSUME=${CONSUME:-1000}; CONSUME_WIDE=${CONSUME_WIDE:-2000}
else
  ROUNDS=${ROUNDS:-3}; PUB=${PUB:-2000}; PUB_MANY=${PUB_MANY:-16000}; PUB_BATCH=${PUB_BATCH:-50000}
  PUB_PIPE=${PUB_PIPE:-20000}
  CONSUME_ONE=${CONSUME_ONE:-2000}; CONSUME=${CONSUME:-20000}; CONSUME_WIDE=${CONSUME_WIDE:-100000}
fi
ci_user=mailroom-ci

log() { printf '[postgres-bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
source bench/servers.sh
wants() { case " $SYSTEMS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
runs() { case " $WORKLOADS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# ---------------------------------------------------------------- install
install_packages() {
  local bin missing=()
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  [ -x "$bin/initdb" ] || missing+=(postgresql)
  local major="${bin#/usr/lib/postgresql/}"; major="${major%/bin}"
  [ -n "$major" ] || major=15
  [ -f "/usr/share/postgresql/$major/extension/pgq.control" ] || missing+=("postgresql-$major-pgq3")
  [ -f "/usr/share/postgresql/$major/extension/pg_stat_statements.control" ] || missing+=("postgresql-contrib-$major")
  [ ${#missing[@]} -eq 0 ] && return 0
  apt_install "${missing[@]}"
}

# ---------------------------------------------------------------- processes
WORK="$(mktemp -d /tmp/mailroom-pgbench.XXXXXX)"
PG_DIR="$(mktemp -d /tmp/mailroom-pgbench-db.XXXXXX)"
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
PIDS=()
FAILED=0

as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u "$ci_user" -- "$@"; else "$@"; fi; }

cleanup() {
  stop_pids
  if [ -n "${PG_BIN:-}" ] && [ -d "$PG_DIR/data" ]; then
    as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK" "$PG_DIR"
}
trap cleanup EXIT

start_postgres() {
  PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
  if [ "$(id -u)" = 0 ]; then
    id -u "$ci_user" >/dev/null 2>&1 ||
      useradd --system --no-create-home --shell /usr/sbin/nologin "$ci_user"
    chown "$ci_user" "$PG_DIR"
  fi
  as_owner "$PG_BIN/initdb" -D "$PG_DIR/data" -U mailroom --auth=trust -E UTF8 \
    --no-instructions >"$WORK/initdb.log" 2>&1 || { cat "$WORK/initdb.log" >&2; exit 1; }
  local port attempt
  for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    if as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$PG_DIR \
            -c max_connections=300 -c fsync=on \
            -c full_page_writes=on -c shared_preload_libraries=pg_stat_statements \
            -c pg_stat_statements.track=top -c pg_stat_statements.track_planning=on \
            -c shared_buffers=256MB" >/dev/null; then
      PG_URL_BASE="postgres://mailroom@127.0.0.1:$port"
      PG_PID="$(head -1 "$PG_DIR/data/postmaster.pid")"
      break
    fi
    log "postgres: start on port $port failed (attempt $attempt)"
  done
  [ -n "${PG_PID:-}" ] || { cat "$PG_DIR/server.log" >&2; exit 1; }
  local db
  for db in mr1 mr2 pgq skiplocked; do
    "$PG_BIN/psql" "$PG_URL_BASE/postgres" -X -q -c "CREATE DATABASE $db" >/dev/null
    "$PG_BIN/psql" "$PG_URL_BASE/$db" -X -q -c "CREATE EXTENSION pg_stat_statements" >/dev/null
  done
  "$PG_BIN/psql" "$PG_URL_BASE/pgq" -X -q -c "CREATE EXTENSION pgq" >/dev/null
  log "postgres $("$PG_BIN/postgres" --version | awk '{print $3}') at $PG_URL_BASE (postmaster $PG_PID)"
}

# synchronous_commit is left off the command line (it would override ALTER SYSTEM): the
# default is on, and each row sets it and checks that a new session sees it.
set_sync_commit() { # on | off
  "$PG_BIN/psql" "$PG_URL_BASE/postgres" -X -q -c "ALTER SYSTEM SET synchronous_commit = $1" \
    -c "SELECT pg_reload_conf()" >/dev/null
  local seen=""
  for _ in $(seq 1 50); do
    seen="$("$PG_BIN/psql" "$PG_URL_BASE/postgres" -X -A -t -c "SHOW synchronous_commit")"
    [ "$seen" = "$1" ] && return 0
    sleep 0.1
  done
  log "synchronous_commit is $seen, not $1"; exit 1
}

start_mailroom() { # name args... ; sets MAILROOM_ADDR, MAILROOM_PID
  local name="$1"; shift
  local dir="$WORK/$name"
  start_mailroom_in "$dir" "$MAILROOM_BIN" "$@" && return 0
  log "mailroom $name did not start: $(tail -5 "$dir/log")"; FAILED=1; return 1
}

# ---------------------------------------------------------------- runs
bench() { # label system address durability detail db-url pids workload [args...]
  local label="$1" system="$2" address="$3" durability="$4" detail="$5" db="$6" pids="$7" workload="$8"
  shift 8
  local status=0 probe=() pid
  for pid in $pids; do probe+=(--broker-pid "$pid"); done
  [ -n "$db" ] && probe+=(--database-url "$db" --database-pid "$PG_PID")
  "$BENCH_BIN" run --system "$system" --label "$label" --address "$address" "${probe[@]}" \
    --durability "$durability" --durability-detail="$detail" --workload "$workload" \
    --out "$RESULTS" "$@" || status=$?
  if [ "$status" -ne 0 ]; then FAILED=1; log "FAILED ($status): $label $workload $*"; fi
}

workloads() { # label system address durability detail db-url pids
  # mailroom's consumer settles a round inside its next poll (poll/batch with `ack` and
  # `nack`), as a mailroom consumer is meant to run.
  local fold=()
  [ "$2" = mailroom ] && fold=(--mailroom-shape ack-next ${GROUP_WINDOW:+--mailroom-group-window "$GROUP_WINDOW"})
  if runs publish-1; then bench "$@" publish --payload-bytes 1024 --count "$PUB"; fi
  if runs publish-many; then
    bench "$@" publish --payload-bytes 1024 --count "$PUB_MANY" --publishers "$PUBLISHERS"
  fi
  # A publish stream stays on the broker it opened on (as behind a load balancer), so one
  # pipelined publisher over several brokers would be the one-broker row again: not run.
  if runs publish-pipelined && [[ "$3" != *,* ]]; then
    bench "$@" publish --payload-bytes 1024 --count "$PUB_PIPE" --publish-mode pipelined \
      --window "$PREFETCH"
  fi
  if runs publish-batch; then
    bench "$@" publish --payload-bytes 1024 --count "$PUB_BATCH" --batch 100
  fi
  if runs consume-1; then
    bench "$@" consume --payload-bytes 1024 --count "$CONSUME_ONE" --prefetch 1 "${fold[@]}"
  fi
  if runs consume; then
    bench "$@" consume --payload-bytes 1024 --count "$CONSUME" --prefetch "$PREFETCH" "${fold[@]}"
  fi
  if runs consume-wide; then
    bench "$@" consume --payload-bytes 1024 --count "$CONSUME_WIDE" --prefetch "$WIDE" "${fold[@]}"
  fi
  if runs retry; then
    bench "$@" retry --payload-bytes 1024 --count "$CONSUME" --prefetch "$PREFETCH" \
      --fail-every 10 --max-attempts 3 "${fold[@]}"
  fi
}

stream_workloads() { # label system address durability detail db-url pids
  # The consume workloads over the consume stream (one WebSocket, window = prefetch):
  # acks go up the socket and each round of them is settled with the window's refill.
  if runs consume-1; then
    bench "$@" consume --payload-bytes 1024 --count "$CONSUME_ONE" --prefetch 1 --mailroom-stream
  fi
  if runs consume; then
    bench "$@" consume --payload-bytes 1024 --count "$CONSUME" --prefetch "$PREFETCH" --mailroom-stream
  fi
  if runs consume-wide; then
    bench "$@" consume --payload-bytes 1024 --count "$CONSUME_WIDE" --prefetch "$WIDE" --mailroom-stream
  fi
  if runs retry; then
    bench "$@" retry --payload-bytes 1024 --count "$CONSUME" --prefetch "$PREFETCH" \
      --fail-every 10 --max-attempts 3 --mailroom-stream
  fi
}

one_round() { # durability
  local row="$1" detail fsync
  case "$row" in
    strict) detail="synchronous_commit=on"; fsync=always ;;
    relaxed) detail="synchronous_commit=off"; fsync=interval:200 ;;
  esac
  if wants mailroom-pg && start_mailroom "pg1-$row" --store "$PG_URL_BASE/mr1"; then
    workloads mailroom mailroom "$MAILROOM_ADDR" "$row" "$detail, 1 broker" "$PG_URL_BASE/mr1" "$MAILROOM_PID"
  fi
  stop_pids
  if wants mailroom-pg-stream && start_mailroom "pg1s-$row" --store "$PG_URL_BASE/mr1"; then
    stream_workloads "mailroom, consume stream" mailroom "$MAILROOM_ADDR" "$row" \
      "$detail, 1 broker, consume stream" "$PG_URL_BASE/mr1" "$MAILROOM_PID"
  fi
  stop_pids
  if wants mailroom-pg-2 && start_mailroom "pg2a-$row" --store "$PG_URL_BASE/mr2"; then
    local first_addr="$MAILROOM_ADDR" first_pid="$MAILROOM_PID"
    if start_mailroom "pg2b-$row" --store "$PG_URL_BASE/mr2"; then
      workloads "mailroom, 2 brokers" mailroom "$first_addr,$MAILROOM_ADDR" "$row" \
        "$detail, 2 brokers, calls alternate" "$PG_URL_BASE/mr2" "$first_pid $MAILROOM_PID"
    fi
  fi
  stop_pids
  if wants mailroom-embedded && start_mailroom "embedded-$row" --fsync "$fsync"; then
    workloads "mailroom, embedded" mailroom "$MAILROOM_ADDR" "$row" "embedded store, --fsync $fsync" "" "$MAILROOM_PID"
  fi
  stop_pids
  if wants pgq; then
    workloads pgq pgq "$PG_URL_BASE/pgq" "$row" "$detail" "$PG_URL_BASE/pgq" ""
  fi
  if wants skiplocked; then
    workloads skiplocked skip-locked "$PG_URL_BASE/skiplocked" "$row" "$detail" "$PG_URL_BASE/skiplocked" ""
  fi
}

# The hot statements of each system's database over the whole run (all its workloads
# and rounds, fills included): divide by the messages consumed to get them per message.
statements() {
  local db
  echo
  echo "## The hot statements (pg_stat_statements, whole run)"
  for db in mr1 mr2 pgq skiplocked; do
    echo
    echo "Database \`$db\`:"
    echo
    echo '```'
    "$PG_BIN/psql" "$PG_URL_BASE/$db" -X -q -P pager=off -c "SELECT calls, rows, \
      round(total_exec_time::numeric, 1) AS ms, \
      round((total_exec_time / greatest(calls, 1) * 1000)::numeric, 1) AS us_per_call, \
      plans, round((total_plan_time / greatest(plans, 1) * 1000)::numeric, 1) AS us_per_plan, \
      shared_blks_hit AS hit, shared_blks_read AS read, \
      left(regexp_replace(query, '\s+', ' ', 'g'), 100) AS q \
      FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database \
      WHERE datname = current_database()) AND calls > 100 \
      ORDER BY total_exec_time DESC LIMIT 12" || true
    echo '```'
  done
}

# ---------------------------------------------------------------- main
install_packages
BENCH_BIN="$CARGO_TARGET_DIR/release/mailroom-bench"
MAILROOM_BIN="$CARGO_TARGET_DIR/release/mailroom"
if [ -z "${BENCH_NO_BUILD:-}" ]; then
  log "building (release) into $CARGO_TARGET_DIR"
  cargo build --release --quiet -p mailroom-bench -p mailroom-cli
fi
start_postgres
STARTED_AT="$(date -u +%Y-%m-%dT%H:%MZ)"
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
T0=$SECONDS
for row in $ROWS; do
  case "$row" in
    strict) set_sync_commit on ;;
    relaxed) set_sync_commit off ;;
    *) echo "ROWS: strict|relaxed" >&2; exit 64 ;;
  esac
  for round in $(seq 1 "$ROUNDS"); do
    log "row $row, round $round of $ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg))"
    one_round "$row"
  done
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"
ELAPSED=$((SECONDS - T0))
{
  echo "# mailroom over PostgreSQL vs PgQ and SKIP LOCKED ($PROFILE profile)"
  echo
  echo "- Ran: $STARTED_AT, $((ELAPSED / 60)) min $((ELAPSED % 60)) s; load average before $LOAD_BEFORE, after $LOAD_AFTER."
  echo "- Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r)."
  echo "- PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'), PgQ $(dpkg-query -W -f '${Version}' "postgresql-$("$PG_BIN/postgres" --version | awk '{print $3}' | cut -d. -f1)-pgq3" 2>/dev/null || echo '?'); mailroom $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')."
  echo "- Command: \`${BENCH_CMD:-bench/postgres.sh}\` (rows $ROWS, $ROUNDS rounds; counts: publish $PUB unbatched, $PUB_MANY unbatched by $PUBLISHERS publishers, $PUB_PIPE unbatched by 1 publisher with $PREFETCH in flight, $PUB_BATCH in batches of 100; consume $CONSUME_ONE at prefetch 1, $CONSUME at prefetch $PREFETCH, $CONSUME_WIDE at prefetch $WIDE; retry $CONSUME at prefetch $PREFETCH; workloads $WORKLOADS)."
  echo
  "$BENCH_BIN" table --input "$RESULTS"
  statements
} >"$OUT_MD"
cp "$RESULTS" "${OUT_MD%.md}.jsonl"
log "table written to $OUT_MD ($ELAPSED s)"
if [ "$FAILED" -ne 0 ]; then log "some runs failed their check or did not run"; exit 2; fi
