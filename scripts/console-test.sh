#!/usr/bin/env bash
# The web console in a real browser: headless Chromium over WebDriver (selenium, from
# PyPI into a private venv) runs scripts/console_test.py against fresh `mailroom serve`
# processes filled with data (see its docstring for what it shows), and saves a
# screenshot of each page into docs/console/ (or SCREENSHOT_DIR). Installs chromium and
# chromium-driver from Debian if they are missing (needs root or sudo), and selenium if
# the venv lacks it, as scripts/browser-test.sh does (the two share the venv). Everything
# the test starts (servers, proxy, browser) is stopped when it ends, pass or fail.
#
#   scripts/console-test.sh [SCREENSHOT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${CARGO_TARGET_DIR:-target}"
VENV="${BROWSER_TEST_VENV:-$TARGET/browser-test-venv}"
SHOTS="${1:-docs/console}"

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
# The timeout is a backstop so a hung browser cannot hold CI.
timeout --kill-after=10 240 "$VENV/bin/python" scripts/console_test.py "$TARGET/debug/mailroom" "$SHOTS"
