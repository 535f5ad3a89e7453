#!/usr/bin/env bash
# A GPU loan rehearsed on this CPU machine, before the loan: the GPU machine's Python and torch (the torch of its
# last receipt in benchmarks/gpu_loans/), the packages that machine has, and the wheels of `make wheelhouse`
# installed from .whl/ as gpu_checks.sh installs them, without network (HF_HUB_OFFLINE=1); then what gpu_checks.sh
# runs that needs no GPU: its dry run, and the test modules of the loan's steps (those of the gpu-marked tests, of
# gpu_checks.sh itself and of the stacks' planners: their CPU tests), or with --all the whole suite as the loan's
# `tests` step runs it.
#
#   bash benchmarks/gpu_rehearsal.sh [--python PYTHON] [--torch VERSION] [--all]
#
# CI pins torch 2.13 on the CPU; the GPU machines have had another torch (2.11 + CUDA 13): an API that one has and
# the other lacks fails here, not in the loan. PYTHON defaults to python3.12 (the GPU machine's); the environment
# (.gpu-rehearsal/, ignored by git) is kept between runs and made again for another Python or torch.
set -euo pipefail
cd "$(dirname "$0")/.."

python=python3.12 torch="" all=0
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python=${2:-}; shift ;;
    --torch) torch=${2:-}; shift ;;
    --all) all=1 ;;
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    *) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$torch" ]; then  # the GPU machine's torch, as its last receipt records it ("- torch: 2.11.0+cu130 ...")
  receipt=$(ls benchmarks/gpu_loans/20*.md 2>/dev/null | sort | tail -n 1)
  torch=$(grep -h -m 1 '^- torch: ' "${receipt:-/dev/null}" | awk '{print $3}' | cut -d+ -f1)
  [ -n "$torch" ] || { echo "error: no receipt in benchmarks/gpu_loans/ names a torch: give --torch VERSION" >&2; exit 2; }
fi
if ! [[ "$torch" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]]; then
  echo "error: --torch must be a release such as 2.11.0, got '$torch'" >&2; exit 2
fi
# run it, not only find it: a pyenv shim is on PATH even where that version is not selected, and then fails
version=$("$python" -c 'import sys; print(sys.version.split()[0])' 2> /dev/null) \
  || { echo "error: --python $python does not run here: give the path of a Python 3.12, the GPU machine's" \
            "(make gpu-rehearsal REHEARSAL_PYTHON=PATH)" >&2; exit 2; }
[ -d .whl ] || { echo "error: no .whl/: run \`make wheelhouse\` first (the wheels a loan carries)" >&2; exit 2; }

env_dir=.gpu-rehearsal
want="$version torch==$torch"
if [ "$(cat "$env_dir/.made" 2>/dev/null)" != "$want" ]; then
  rm -rf "$env_dir"
  "$python" -m venv "$env_dir"
  # what the GPU machine has of its own (its README); torch from PyPI, a CUDA build that runs on the CPU here
  "$env_dir/bin/pip" install -q "torch==$torch" numpy scipy matplotlib seaborn transformers pytest \
    pytest-xdist pytest-timeout hypothesis
  echo "$want" > "$env_dir/.made"
fi
rm -rf "$env_dir/site" && "$env_dir/bin/pip" install -q --no-index --no-deps --no-compile --target "$env_dir/site" .whl/*.whl
export PYTHONPATH="$PWD:$PWD/$env_dir/site" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
echo "rehearsing with $want: $("$env_dir/bin/python" -c 'import torch; print(torch.__version__)')"
PYTHON="$PWD/$env_dir/bin/python" bash benchmarks/gpu_checks.sh --dry-run > /dev/null
if [ "$all" = 1 ]; then
  tests=(tests)
else
  read -r -a tests <<< "$(grep -l '^@pytest.mark.gpu' tests/test_*.py | tr '\n' ' ') tests/test_gpu_checks.py \
tests/test_lm_stack_plan.py tests/test_theory_table1_stack_plan.py tests/test_theory_table1_stacked_run.py \
tests/test_base_stack_time.py tests/test_base_precision.py"
fi
"$env_dir/bin/python" -m pytest -q -p no:cacheprovider -n 2 --timeout 300 -m 'not gpu and not browser and not slurm' \
  "${tests[@]}"
