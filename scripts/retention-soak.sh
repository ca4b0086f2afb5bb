#!/usr/bin/env bash
# Retention soak: runs a server with small segments and a small size limit on one topic,
# publishes for a while, and prints the data directory's disk use every few seconds. With
# retention running, the figure stays flat (about the limit plus a segment) however long
# it runs (plus what arrives between two passes, 200 ms apart); without it, it would
# grow by the publish rate.
#
#   scripts/retention-soak.sh [SECONDS] [LIMIT_BYTES]      (defaults: 120 s, 1 MiB)
#
# Needs curl and a built binary (cargo build --release -p mailroom-cli, or set MAILROOM).
set -euo pipefail

seconds=${1:-120}
limit=${2:-1048576}
segment=$((limit / 8 > 4096 ? limit / 8 : 4096))
mailroom=${MAILROOM:-target/release/mailroom}
data=$(mktemp -d)
log=$(mktemp)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$data" "$log"' EXIT

"$mailroom" serve --listen 127.0.0.1:0 --data "$data" --segment-bytes "$segment" \
    --retention-interval-ms 200 >"$log" 2>/dev/null &
server=$!
for _ in $(seq 100); do
    grep -q 'listening on' "$log" && break
    sleep 0.1
done
url=$(sed -n 's/^mailroom listening on //p' "$log")
[ -n "$url" ] || { echo "the server did not start" >&2; exit 1; }

curl -sf -X PUT "$url/v1/topics/soak" -d "{\"retention\": {\"max_bytes\": $limit}}" >/dev/null
# One batch of 4 messages of 1000 bytes: small next to a segment, so segments roll often.
message=$(printf 'x%.0s' $(seq 1000))
batch="{\"messages\": [\"$message\", \"$message\", \"$message\", \"$message\"]}"

echo "limit $limit bytes, segments of $segment bytes, $seconds s"
printf '%8s %12s %12s %14s %10s\n' seconds published on_disk_kib topic_bytes removed_seg
start=$SECONDS
next=0
published=0
while (( SECONDS - start < seconds )); do
    curl -sf -X POST "$url/v1/topics/soak/messages/batch" -d "$batch" >/dev/null
    published=$((published + 4))
    if (( SECONDS - start >= next )); then
        view=$(curl -sf "$url/v1/topics/soak")
        bytes=$(sed -n 's/.*"bytes":\([0-9]*\),"removed".*/\1/p' <<<"$view")
        removed=$(sed -n 's/.*"segments":\([0-9]*\)}.*/\1/p' <<<"$view")
        printf '%8d %12d %12d %14s %10s\n' $((SECONDS - start)) "$published" \
            "$(du -sk "$data" | cut -f1)" "$bytes" "$removed"
        next=$((next + 5))
    fi
done
