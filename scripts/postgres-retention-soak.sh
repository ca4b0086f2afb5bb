#!/usr/bin/env bash
# Retention soak over PostgreSQL: one broker with `--store postgres://...`, one topic with
# a message-count limit, a steady publisher and a consumer that keeps up, for as long as
# you let it run; every INTERVAL seconds it prints what the mailroom tables take on disk
# and what vacuum is doing. With retention working, the size stays within a band (the
# retained messages plus the one segment being trimmed) however long it runs.
#
#   scripts/postgres-retention-soak.sh [SECONDS] [INTERVAL]     (defaults: 3600 s, 30 s)
#
# Environment:
#   SOAK_STORE=postgres://...   use this database (it must be one mailroom may own);
#                               default: a throwaway cluster from scripts/postgres.sh,
#                               with fsync on, stopped and removed at the end
#   KEEP_MESSAGES=200000        the topic's max_messages
#   PAYLOAD_BYTES=100           bytes per message; BATCH=100 messages per publish
#   RATE=5000                   messages per second the publisher aims at (0: as fast
#                               as it can; then the consumer may fall behind, and
#                               keep_unconsumed holds the log for it)
#   RETENTION_INTERVAL_MS=5000  the broker's --retention-interval-ms
#   MAILROOM=target/release/mailroom
#
# Columns: seconds; messages published and consumed so far; the topic's start and end
# offsets; total relation size (tables + indexes + TOAST) of every mailroom_ table, MiB;
# message segment tables now; live and dead tuples over the mailroom_ tables
# (pg_stat_user_tables); autovacuum and autoanalyze runs so far over them. A segment
# holds 2^20 offsets: retention deletes rows below the start inside the oldest
# remaining segment (those are the dead tuples autovacuum reclaims) and drops the
# segment whole once the start passes its end.
#
# Needs python3 and a built binary (cargo build --release -p mailroom-cli).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-3600}
interval=${2:-30}
keep=${KEEP_MESSAGES:-200000}
payload_bytes=${PAYLOAD_BYTES:-100}
batch=${BATCH:-100}
rate=${RATE:-5000}
retention_interval=${RETENTION_INTERVAL_MS:-5000}
mailroom=${MAILROOM:-target/release/mailroom}
work=$(mktemp -d /tmp/mailroom-pg-soak.XXXXXX)
pg_dir=""
server=""
load=""

cleanup() {
    [ -n "$load" ] && kill "$load" 2>/dev/null || true
    [ -n "$server" ] && kill "$server" 2>/dev/null || true
    wait 2>/dev/null || true
    [ -n "$pg_dir" ] && scripts/postgres.sh stop "$pg_dir" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

if [ -n "${SOAK_STORE:-}" ]; then
    store=$SOAK_STORE
else
    pg_dir=$(mktemp -d /tmp/mailroom-pg-soak-db.XXXXXX)   # initdb runs as another user when root
    store=$(POSTGRES_FSYNC=on scripts/postgres.sh start "$pg_dir")
fi
psql_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql"
sql() { "$psql_bin" "$store" -X -A -t -q -F ' ' -c "$1"; }

"$mailroom" serve --listen 127.0.0.1:0 --data "$work/data" --store "$store" \
    --retention-interval-ms "$retention_interval" >"$work/stdout" 2>"$work/log" &
server=$!
url=""
for _ in $(seq 300); do
    url=$(sed -n 's/^mailroom listening on //p' "$work/stdout")
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
[ -n "$url" ] || { echo "the server did not start: $(tail -5 "$work/log")" >&2; exit 1; }

# The load: a publisher thread (batches) and a consumer thread (poll/batch with the
# previous round's acks in it), each on one keep-alive connection; counts in a file.
python3 - "$url" "$keep" "$payload_bytes" "$batch" "$work/counts" "$rate" <<'PY' &
import http.client, json, sys, threading, time, urllib.parse
url, keep, size, batch, counts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rate = int(sys.argv[6])
u = urllib.parse.urlparse(url)
def conn():
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60)
def call(c, method, path, body):
    c.request(method, path, body=json.dumps(body) if body is not None else None)
    r = c.getresponse(); data = r.read()
    if r.status >= 300:
        raise SystemExit(f"{method} {path}: {r.status} {data[:200]!r}")
    return json.loads(data) if data else None
c = conn()
call(c, "PUT", "/v1/topics/soak", {"retention": {"max_messages": keep}})
call(c, "PUT", "/v1/topics/soak/groups/g", {"max_attempts": 3, "max_in_flight": 1000})
state = {"published": 0, "consumed": 0}
def publish():
    c = conn(); message = "x" * size; began = time.monotonic()
    while True:
        call(c, "POST", "/v1/topics/soak/messages/batch", {"messages": [message] * batch})
        state["published"] += batch
        if rate > 0:
            ahead = state["published"] / rate - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
def consume():
    c = conn(); acks = []
    while True:
        got = call(c, "POST", "/v1/topics/soak/groups/g/poll/batch",
                   {"max": 1000, "wait_ms": 1000, "ack": acks})
        acks = [{"offset": d["offset"], "attempt": d["attempt"]} for d in got["deliveries"]]
        state["consumed"] += len(acks)
for target in (publish, consume):
    threading.Thread(target=target, daemon=True).start()
while True:
    time.sleep(1)
    with open(counts + ".tmp", "w") as f:
        f.write(f"{state['published']} {state['consumed']}\n")
    import os; os.replace(counts + ".tmp", counts)
PY
load=$!

echo "store $store; topic soak keeps $keep messages of $payload_bytes B; publishing $rate msgs/s (0: flat out) in batches of $batch; retention every ${retention_interval} ms; $seconds s"
printf '%7s %11s %11s %10s %10s %9s %5s %10s %9s %6s %6s\n' \
    seconds published consumed start end size_mib segs live dead vacuum analyze
start=$SECONDS
while (( SECONDS - start < seconds )); do
    sleep "$interval"
    kill -0 "$load" 2>/dev/null || { echo "the load generator stopped" >&2; exit 1; }
    read -r published consumed <"$work/counts" || true
    read -r begin end <<<"$(sql "SELECT start_offset, next_offset FROM mailroom_topics WHERE name = 'soak'")"
    read -r size segs <<<"$(sql "SELECT round(sum(pg_total_relation_size(c.oid)) / 1048576.0, 1),
        count(*) FILTER (WHERE c.relname ~ '^mailroom_messages_[0-9]+_[0-9]+\$')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 'mailroom\_%'")"
    read -r live dead vacuums analyzes <<<"$(sql "SELECT sum(n_live_tup), sum(n_dead_tup),
        sum(autovacuum_count), sum(autoanalyze_count)
        FROM pg_stat_user_tables WHERE relname LIKE 'mailroom\_%'")"
    printf '%7d %11s %11s %10s %10s %9s %5s %10s %9s %6s %6s\n' $((SECONDS - start)) \
        "${published:-0}" "${consumed:-0}" "$begin" "$end" "$size" "$segs" "$live" "$dead" \
        "$vacuums" "$analyzes"
done
