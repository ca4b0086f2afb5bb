#!/usr/bin/env bash
# Runs the README's curl examples in order against a fresh `mailroom serve`, and checks
# every status the README states for one (a `# 201` after the command, or a comment line
# under it that starts with the status), so the README cannot drift from the server.
# Commands without a stated status must not get a 5xx. Streams that never end
# (`curl -N`, SSE) are skipped.
#
#   scripts/readme-curl.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${CARGO_TARGET_DIR:-target}"
work="$(mktemp -d)"
log="$work/server.out"
server=""
cleanup() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

cargo build --quiet --bin mailroom
"$TARGET/debug/mailroom" serve --listen 127.0.0.1:0 --data "$work/store" --fsync never \
  >"$log" 2>"$work/server.err" &
server=$!
url=""
for _ in $(seq 1 200); do
  url="$(sed -n 's/^mailroom listening on //p' "$log")"
  [ -n "$url" ] && break
  kill -0 "$server" 2>/dev/null || { echo "server exited early" >&2; exit 1; }
  sleep 0.05
done
[ -n "$url" ] || { echo "server did not start" >&2; exit 1; }

MAILROOM_ADDRESS="${url#http://}" python3 - README.md <<'PY'
import os
import re
import shlex
import subprocess
import sys

address = os.environ["MAILROOM_ADDRESS"]
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()


def split_comment(text):
    """The command and its trailing comment: the first # outside quotes."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip(), text[i + 1:].strip()
    return text.rstrip(), ""


def balanced(text):
    try:
        shlex.split(text)
        return True
    except ValueError:
        return False


examples = []  # (line number, command, expected status or None)
in_sh = False
i = 0
while i < len(lines):
    line = lines[i]
    if line.startswith("```"):
        in_sh = line.strip() == "```sh" and not in_sh
        i += 1
        continue
    if not (in_sh and line.startswith("curl ")):
        i += 1
        continue
    start = i
    command = line
    # Continuations: a trailing backslash, or a quote left open.
    while command.endswith("\\") or not balanced(split_comment(command)[0]):
        i += 1
        command = (command[:-1] if command.endswith("\\") else command + "\n") + lines[i]
    command, comment = split_comment(command)
    if not comment and i + 1 < len(lines) and lines[i + 1].lstrip().startswith("#"):
        comment = lines[i + 1].lstrip("# ").strip()
    stated = re.match(r"(\d{3})\b", comment)
    examples.append((start + 1, command, int(stated.group(1)) if stated else None))
    i += 1

if len(examples) < 20:
    sys.exit(f"readme-curl: found only {len(examples)} curl examples; is the parser lost?")

failures = 0
for number, command, expected in examples:
    words = shlex.split(command.replace("localhost:7070", address))
    if "-N" in words:
        print(f"README:{number}: skipped (a stream)")
        continue
    words += ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20"]
    got = int(subprocess.run(words, capture_output=True, text=True).stdout or 0)
    fine = got == expected if expected else 200 <= got < 500
    print(f"README:{number}: {got}" + (f" (README says {expected})" if expected else ""))
    if not fine:
        failures += 1
        print(f"README:{number}: FAILED: {command}", file=sys.stderr)
if failures:
    sys.exit(f"readme-curl: {failures} of {len(examples)} examples failed")
print(f"readme-curl: {len(examples)} examples ran in order")
PY
