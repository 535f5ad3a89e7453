#!/usr/bin/env bash
# Colab/Binder rehearsal: run every chapter as a reader's notebook would, outside the repository.
#   1. build a wheel of joma_lib from this checkout;
#   2. make a fresh venv with only requirements.txt (torch pinned, the CPU wheel; no dev tools, no `-e .`),
#      plus ipykernel and nbclient, which Colab and Binder have;
#   3. convert every chapter to .ipynb in a scratch folder outside the repository, with the install cell that
#      the chapters' sources leave to _ext/install_cell.py (as `make twins` and the notebooks workflow do);
#   4. execute each top to bottom with that folder as working directory; each notebook's install cell
#      installs the wheel (JOMA_WHEEL) the first time joma_lib is missing, as it would install from GitHub;
#      with a figure store from the book build (JOMA_FIGURE_STORE), every figure's data are reused (below).
# Chapters that need the internet fall back to the committed data, as in the book.
# The fresh venv of step 2 is built once per set of requirements and kept (see below). `--venv-only` builds (or
# reuses) it and stops: .ci/run does that in phase 1, where a lane has time to spare, so phase 2 only executes.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/joma-rehearsal.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
unset JOMA_OFFICIAL_DIR  # a reader has no copy of the authors' files

venv_only=0
if [ "${1:-}" = "--venv-only" ]; then venv_only=1; fi

# The reader's environment (torch, requirements.txt, ipykernel, nbclient; no joma_lib), like a Colab image: kept
# outside the checkout, keyed by what defines it (requirements, constraints, Python), rebuilt when that changes.
# joma_lib is removed from it before every run, so each notebook's install cell must install the wheel again.
cache=${JOMA_REHEARSAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joma-rehearsal}
mkdir -p "$cache"
exec 9> "$cache/lock"
flock 9  # one rehearsal at a time uses the cached environment
key=$({ cat requirements.txt constraints.txt; "$python" -VV; echo "torch==2.13.0 ipykernel nbclient, bytecode compiled"; } \
      | sha256sum | cut -c1-16)
venv="$cache/venv-$key"
if [ -f "$venv/.complete" ]; then
  echo "rehearsal venv reused: $venv"
else
  rm -rf "$cache"/venv-*  # an environment for other requirements is never used again
  "$python" -m venv "$venv"  # with pip, which the notebooks' install cell uses
  # The packages pip would install, installed by uv as `make setup` does (pip's wheel folders passed on, bytecode
  # compiled: under PYTHONDONTWRITEBYTECODE every kernel would compile torch & co. again); the dev venv's uv, or pip
  # where there is none.
  if [ -x .venv/bin/uv ]; then
    # the Makefile's --find-links flags (split into words on purpose)
    install=(env UV_NATIVE_TLS=1 .venv/bin/uv pip install -q --compile-bytecode --python "$venv/bin/python"
             $(make -s --no-print-directory uv-flags PYTHON="$python"))
  else
    install=("$venv/bin/pip" install -q)
  fi
  install+=(-c "$repo/constraints.txt")
  grep -v '^-e ' requirements.txt > "$work/requirements.txt"
  "${install[@]}" torch==2.13.0 -r "$work/requirements.txt" ipykernel nbclient
  touch "$venv/.complete"
fi
if [ "$venv_only" = 1 ]; then echo "rehearsal venv ready after $(( $(date +%s) - t0 ))s"; exit 0; fi

# the wheel is built from a copy of the tracked files, so no build/ folder is left in the checkout
mkdir "$work/src"
git ls-files -z | xargs -0 cp --parents -t "$work/src"
.venv/bin/pip wheel -q --no-deps -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/joma_companion-*.whl)
"$venv/bin/pip" uninstall -q -y joma-companion 2>/dev/null || true
if (cd "$work" && "$venv/bin/python" -c "import joma_lib" 2>/dev/null); then
  echo "joma_lib is importable before the install cell ran: the rehearsal would not test it" >&2; exit 1
fi
echo "rehearsal venv ready after $(( $(date +%s) - t0 ))s"

# the twins as `make twins` writes them: the install cell (_ext/install_cell.py) before each first code cell
mkdir "$work/notebooks"
.venv/bin/python _ext/install_cell.py -o "$work/notebooks" $(grep -l '^kernelspec:' book/*.md)

# Each figure is computed once per CI run: given the figure store of this run's book build (JOMA_FIGURE_STORE, set
# by .ci/run; `verify --from` compares the same data with the references), the chapters draw every figure's kept
# data from a copy of it, and execute the rest of each page (its prose checks, toy runs and widgets) with the library
# installed from the wheel. Without a store every figure is computed here, as in a reader's notebook.
if [ -n "${JOMA_FIGURE_STORE:-}" ] && [ -d "$JOMA_FIGURE_STORE" ]; then
  mkdir "$work/figure_data"
  cp "$JOMA_FIGURE_STORE"/*.npz "$JOMA_FIGURE_STORE"/*.json "$work/figure_data/" 2>/dev/null || true
  echo "figures drawn from the book build's data: $(cd "$work/figure_data" && ls -- *.npz 2>/dev/null | xargs)"
  export JOMA_FIGURE_STORE="$work/figure_data"
else
  unset JOMA_FIGURE_STORE
fi

cd "$work/notebooks"
export JOMA_WHEEL="$wheel"
failed=0
for nb in *.ipynb; do
  t=$(date +%s)
  if "$venv/bin/python" - "$nb" <<'PY'
import sys, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
PY
  then echo "ok    $nb ($(( $(date +%s) - t ))s)"; else echo "FAIL  $nb"; failed=1; fi
done
"$venv/bin/python" -c "import joma_lib; assert '$repo' not in joma_lib.__file__, joma_lib.__file__"
echo "rehearsal finished in $(( $(date +%s) - t0 ))s"
exit $failed
