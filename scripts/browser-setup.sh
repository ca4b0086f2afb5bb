# Sourced by scripts/browser-test.sh and scripts/console-test.sh (from the repository's
# root): what both need to drive headless Chromium over WebDriver. Sets TARGET (the cargo
# target dir) and VENV (the private venv, BROWSER_TEST_VENV or TARGET/browser-test-venv,
# shared by both tests), installs chromium and chromium-driver from Debian if either is
# missing (needs root or sudo) and selenium from PyPI if the venv lacks it; each step is
# skipped once done.

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
