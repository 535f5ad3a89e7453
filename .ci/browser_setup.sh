#!/usr/bin/env bash
# What tests/test_browser.py needs, on a fresh Debian machine, as root; safe to run again.
#   - Debian's Chromium (/usr/bin/chromium); Playwright drives it and never downloads a browser.
#   - the Python package playwright, pinned, into the given virtual environment.
# Usage: bash .ci/browser_setup.sh [VENV]    (default: .venv)
set -euo pipefail
VENV="${1:-.venv}"
PLAYWRIGHT_VERSION="1.65.2"

if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium
fi

if [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("playwright"))' 2>/dev/null)" \
     != "$PLAYWRIGHT_VERSION" ]; then
  "$VENV/bin/pip" install -q "playwright==$PLAYWRIGHT_VERSION"
fi

# Report what the browser test will use (Debian's wrapper script prints a harmless shell warning on stderr).
echo "browser test: $(/usr/bin/chromium --version 2>/dev/null), playwright $PLAYWRIGHT_VERSION"
