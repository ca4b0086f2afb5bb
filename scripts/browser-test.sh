#!/usr/bin/env bash
# The browser rules in a real browser: headless Chromium over WebDriver (selenium, from
# PyPI into a private venv) runs scripts/browser_test.py against two fresh
# `mailroom serve` processes (see its docstring for what it shows). Installs chromium,
# chromium-driver and selenium if missing (scripts/browser-setup.sh). Everything the test
# starts (the servers, the page servers, the browser) is stopped when it ends, pass or
# fail.
#
#   scripts/browser-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/browser-setup.sh

cargo build --quiet --bin mailroom
# The Python test stops its servers and browser itself; the timeout is a backstop so a
# hung browser cannot hold CI, and kills the test's whole process group if it fires.
timeout --kill-after=10 120 "$VENV/bin/python" scripts/browser_test.py "$TARGET/debug/mailroom"
