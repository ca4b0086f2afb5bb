#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests of the PostgreSQL backend.
#
#   scripts/postgres.sh start DIR   installs `postgresql` from Debian if it is missing,
#                                   creates a cluster in DIR (which must not exist or be
#                                   empty), starts it on a free loopback port, and prints
#                                   its URL (also written to DIR/url)
#   scripts/postgres.sh stop DIR    stops the cluster and removes DIR
#
# The URL names the superuser `mailroom` (trusted on loopback, no password) and the
# database `postgres`; the tests create a database of their own per test from it, and
# find it in MAILROOM_TEST_POSTGRES:
#
#   dir="$(mktemp -d)"; export MAILROOM_TEST_POSTGRES="$(scripts/postgres.sh start "$dir")"
#   cargo test -p mailroom-server --test postgres_brokers; scripts/postgres.sh stop "$dir"
#
# initdb refuses to run as root, so as root (CI) the cluster belongs to the system user
# `mailroom-ci`, created if missing. The cluster runs with fsync=off unless
# POSTGRES_FSYNC=on: it is thrown away after the tests, which never crash it.
set -euo pipefail

ci_user=mailroom-ci

bin_dir() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -z "$dir" || ! -x "$dir/initdb" ]]; then
        echo "postgres.sh: installing postgresql from Debian" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
        dir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
    fi
    echo "$dir"
}

# Runs a command as the cluster's owner: this user, or `mailroom-ci` when root.
as_owner() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u "$ci_user" -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    local dir="$1" bin port attempt
    bin="$(bin_dir)"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    if [[ "$(id -u)" == 0 ]]; then
        id -u "$ci_user" >/dev/null 2>&1 ||
            useradd --system --no-create-home --shell /usr/sbin/nologin "$ci_user"
        chown "$ci_user" "$dir"
    fi
    as_owner "$bin/initdb" -D "$dir/data" -U mailroom --auth=trust -E UTF8 \
        --no-instructions >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    # Another process may take the port between choosing it and binding it: try again.
    for attempt in 1 2 3 4 5; do
        port="$(free_port)"
        if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
            -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
                -c max_connections=300 -c fsync=${POSTGRES_FSYNC:-off}" >/dev/null; then
            echo "postgres://mailroom@127.0.0.1:$port/postgres" | tee "$dir/url"
            return 0
        fi
        echo "postgres.sh: start on port $port failed (attempt $attempt)" >&2
    done
    cat "$dir/server.log" >&2
    exit 1
}

stop() {
    local dir="$1" bin
    bin="$(bin_dir)"
    if [[ -d "$dir/data" ]]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$dir"
}

case "${1:-}" in
start) start "${2:?usage: postgres.sh start DIR}" ;;
stop) stop "${2:?usage: postgres.sh stop DIR}" ;;
*)
    echo "usage: postgres.sh start|stop DIR" >&2
    exit 2
    ;;
esac
