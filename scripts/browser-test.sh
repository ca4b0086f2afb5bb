#!/usr/bin/env bash
# The browser rules in a real browser: headless Chromium over WebDriver (selenium, from
# PyPI into a private venv) runs scripts/browser_test.py against two fresh
# `mailroom serve` processes (see its docstring for what it shows). Installs chromium and
# chromium-driver from Debian if they are missing (needs root or sudo), and selenium if
# the venv lacks it; both steps are skipped once done. Everything the test starts (the
# servers, the page servers, the browser) is stopped when it ends, pass or fail.
#
#   scripts/browser-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${CARGO_TARGET_DIR:-target}"
VENV="${BROWSER_TEST_VENV:-$TARGET/browser-test-venv}"

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver
fi

if ! "$VENV/bin/python" -c 'import selenium' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet 'selenium>=4.20,<5'
fi

cargo build --quiet --bin mailroom
# The Python test stops its servers and browser itself; the timeout is a backstop so a
# hung browser cannot hold CI, and kills the test's whole process group if it fires.
timeout --kill-after=10 120 "$VENV/bin/python" scripts/browser_test.py "$TARGET/debug/mailroom"
