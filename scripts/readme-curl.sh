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

work="$(mktemp -d)"
source scripts/fresh-server.sh
cleanup() {
  stop_fresh_server
  rm -rf "$work"
}
trap cleanup EXIT
start_fresh_server "$work"

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
