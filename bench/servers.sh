# Sourced by the bench scripts that start servers of their own (bench/peers.sh,
# bench/postgres.sh, bench/rounds.sh, bench/metadata-ab.sh, bench/strict-ab.sh,
# bench/request-instructions.sh, bench/metadata-instructions.sh):
# installing what is missing from Debian, starting a mailroom server and waiting until it
# listens, waiting for a port, stopping what was started, by pid, and the set-up of the
# scripts that count a server's instructions under callgrind.
#
# The script that sources it defines the array PIDS (every pid it started, which
# `stop_pids` stops) and, to use `apt_install`, `log` (a line to stderr).

# Installs the Debian packages named, without letting them start their system services.
apt_install() { # package...
  log "installing $*"
  # Debian starts a package's service on install unless policy-rc.d says no; we start our
  # own instances, so keep the system ones down.
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; made_policy=1
  fi
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
  [ "$made_policy" = 1 ] && rm -f "$policy"
  return 0
}

is_gone() { # gone, or a zombie nobody reaps (a daemon's orphan in a container without init)
  local state
  state="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [ -z "$state" ] || [ "$state" = Z ]
}

stop_pid() {
  local pid="$1"
  is_gone "$pid" && return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do is_gone "$pid" && return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

# Stops every process in PIDS and empties it.
stop_pids() {
  local pid
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && stop_pid "$pid"; done
  PIDS=()
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Starts `BINARY serve` on a free loopback port with its data, stdout and log in DIR, and
# waits (up to 60 s, while it runs) until it says where it listens: sets MAILROOM_PID and
# MAILROOM_ADDR (host:port) and adds the pid to PIDS. Returns 1 if it never listened; the
# caller says so, with "$DIR/log".
start_mailroom_in() { # dir binary serve-args...
  local dir="$1" binary="$2"; shift 2
  serve_in "$dir" "$binary" serve --listen 127.0.0.1:0 --data "$dir/data" "$@"
}

# The same under valgrind's callgrind, its profile written to OUT (and OUT.<pid>-<tid>
# files, one a thread); the pid is valgrind's, which passes signals on to the server.
start_mailroom_callgrind_in() { # dir out binary serve-args...
  local dir="$1" out="$2" binary="$3"; shift 3
  serve_in "$dir" valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$binary" serve --listen 127.0.0.1:0 --data "$dir/data" "$@"
}

# The set-up bench/request-instructions.sh and bench/metadata-instructions.sh share:
# builds the release binaries (unless BENCH_NO_BUILD is set), sets MAILROOM to
# TARGET/mailroom unless it is set, checks for valgrind, and sets WORK to a fresh
# temporary directory and PIDS to an empty list. On exit, every pid in PIDS is stopped
# and WORK removed (a trap set in a function is the script's).
callgrind_setup() { # target
  [ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --quiet -p mailroom-bench -p mailroom-cli
  MAILROOM="${MAILROOM:-$1/mailroom}"
  command -v valgrind >/dev/null || { echo "valgrind is needed (Debian: valgrind)" >&2; exit 1; }
  work_dir_with_cleanup callgrind
}

# Sets WORK to a fresh temporary directory (`mailroom-NAME.XXXXXX` under TMPDIR) and PIDS
# to an empty list; on exit, every pid in PIDS is stopped and WORK removed.
work_dir_with_cleanup() { # name
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/mailroom-$1.XXXXXX")"
  PIDS=()
  trap 'stop_pids; rm -rf "$WORK"' EXIT
}

serve_in() { # dir command...
  local dir="$1"; shift
  mkdir -p "$dir"
  : >"$dir/stdout"
  "$@" >"$dir/stdout" 2>"$dir/log" &
  MAILROOM_PID=$!; PIDS+=("$MAILROOM_PID")
  MAILROOM_ADDR=""
  for _ in $(seq 1 600); do
    MAILROOM_ADDR="$(sed -n 's|^mailroom listening on http://||p' "$dir/stdout" | head -1)"
    [ -n "$MAILROOM_ADDR" ] && return 0
    kill -0 "$MAILROOM_PID" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}
