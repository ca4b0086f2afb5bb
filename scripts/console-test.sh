#!/usr/bin/env bash
# The web console in a real browser: headless Chromium over WebDriver (selenium, from
# PyPI into a private venv) runs scripts/console_test.py against fresh `mailroom serve`
# processes filled with data (see its docstring for what it shows), and saves a
# screenshot of each page. Installs chromium, chromium-driver and selenium if missing
# (scripts/browser-setup.sh, shared with scripts/browser-test.sh). Everything the test
# starts (servers, proxy, browser) is stopped when it ends, pass or fail.
#
#   scripts/console-test.sh [SCREENSHOT_DIR]
#   UPDATE_SCREENSHOTS=1 scripts/console-test.sh
#
# The screenshots go to SCREENSHOT_DIR if given, else into a scratch directory that is
# removed afterwards, so a run (CI's included) leaves the checkout as it found it; with
# UPDATE_SCREENSHOTS=1 they replace the committed ones in docs/console/ (the README
# shows those), for after a change to how the pages look.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/browser-setup.sh

if [ -n "${1:-}" ]; then
  SHOTS="$1"
elif [ "${UPDATE_SCREENSHOTS:-}" = 1 ]; then
  SHOTS="docs/console"
else
  SHOTS="$(mktemp -d)"
  trap 'rm -rf "$SHOTS"' EXIT
fi

cargo build --quiet --bin mailroom
# The timeout is a backstop so a hung browser cannot hold CI.
timeout --kill-after=10 240 "$VENV/bin/python" scripts/console_test.py "$TARGET/debug/mailroom" "$SHOTS"
