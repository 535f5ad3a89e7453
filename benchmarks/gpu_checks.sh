#!/usr/bin/env bash
# Everything the companion checks on a GPU, in one command that fits a short loan of a GPU machine (<= 9 minutes):
#
#   bash benchmarks/gpu_checks.sh [--dry-run] [--budget SECONDS] [--loan SECONDS] [--state DIR] [--out DIR]
#                                 [--pack DIR] [--skip STEP,...] [--finished DIR]
#
# In order, the quick checks first:
#   1. the step benchmark: the authors' step, ours one run, ours stacked (benchmarks/bench_lm_stack.py), the bf16
#      read-out with and without its aligned padding, and a stack's run by run and at once
#      (benchmarks/bench_read_out.py), and the Table 1 stack in TF32
#      and bf16, compiled or not (benchmarks/bench_table1_stack.py);
#   2. the gpu-marked tests (a stacked run on the GPU is its run trained alone, a stopped one resumes there: the
#      checks the paper-scale runs stand on), the profile of a 5-layer stack's step, kernel by kernel (benchmarks/
#      profile_lm_stack.py: where its time goes), and the stacked step compiled by torch.compile against the step
#      as trained (benchmarks/bench_lm_compile.py: whether the runners should compile);
#   3. `python -m joma_lib.figures verify` of every figure under JOMA_DEVICE=cuda (Table 1 included), and its
#      JSON report (gpu_verify.json: the Performance page's CPU/GPU parity table reads it once committed), then the
#      rest of the test suite under JOMA_DEVICE=cuda;
#   4. the paper-scale runs, with whatever time is left: the Figs. 6/8 sweep (30 runs; the runs a stack left
#      unfinished in an earlier call of this loan first, then stacks of the waiting runs of one depth each, sized to
#      what the loan has left (--loan): its runner times their steps here (a later call of the loan takes those
#      timings from the state folder) and starts only stacks that will finish, each as large as fits
#      (joma_lib/lm/stack_plan.py); compiled where this loan's bench-compile (or, skipped, an
#      earlier loan's committed one) says it pays;
#      WikiText-2 where the hub answers, else the labelled stand-in with WikiText-2's vocabulary size) and Table 1 at
#      its full configuration
#      (40 runs; a stack begun in an earlier call of this loan first, then stacks of at most 10 sized, as the
#      sweep's, to finish before the loan ends (joma_lib/theory/table1/stack_plan.py), so that Table 1 also fills
#      what the sweep's stacks leave of a loan; each finished stack kept; in fp32 its ~1.1e17 FLOP alone take ~28
#      minutes of an H100, so --precision auto: the fastest of fp32, TF32 and bf16 measured on the stack there, or
#      the precision of the stacks finished in earlier loans; compiled where bench-table1 says it pays, as for the
#      sweep).
# Each step's output goes to the results folder (--out, default gpu_runs/out), with a one-page summary.md. After
# every step, the summary and the whole results folder as results.tar.gz are copied to --pack (default $OUT, where
# the device tool sets it): that tool brings back at most 8 files, two folders deep, and a loan's results are
# dozens (a log per step, the finished runs' files), so they travel as one archive. The runs' checkpoints live in the state folder (--state, default gpu_runs/state, ignored by
# git), so a second call on the same machine continues: steps already done are not repeated (their results are in
# the state folder's done/), finished runs are kept and unfinished ones resume from their checkpoints.
# A later loan is a fresh machine: nothing of the state folder is left, and checkpoints (GBs) cannot travel. What
# does travel are the finished runs' small result files: the script copies them into <out>/finished/ at the end;
# committed to benchmarks/gpu_finished/ (--finished), they are copied into the state folder at the start of the
# next loan, whose runners then load those runs instead of training them (each checks its config), and whose
# --precision auto is pinned to the precision they were trained in. So whole stacks finished in one loan stay
# finished, and the paper-scale runs accumulate over loans. --skip leaves out the named steps: pass
# `--skip verify,tests` once verify's and the test suite's results are committed, and the loan goes to the runs
# after the benchmarks (each loan measures the code it trains with) and the gpu-marked tests; add bench-compile and
# bench-table1 once their measurements are committed (joma_lib/kit/benchmark_results/): whether the runs compile is
# then read from there, where this loan did not measure it.
# Without network: `make wheelhouse` (on a machine with a package index) puts the wheels this needs beyond the GPU
# machine's own packages into .whl/; this script installs them from there (pip --no-index --target).
# --loan: the device seconds this loan has left as this call starts (the device tool's budget_left_s, less the
# machine's start); a stack of the paper sweep or of Table 1 is started only if it finishes 60 s before then (a
# later call's start, resuming, the summary). Default: the --budget (this call is the loan's last).
# --dry-run checks the inputs and prints the plan on any machine, GPU or not.
set -uo pipefail
cd "$(dirname "$0")/.."

budget=530 loan="" state=gpu_runs/state out=gpu_runs/out pack="${OUT:-}" dry_run=0 skip="" finished=benchmarks/gpu_finished
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --skip) skip=${2:-}; shift ;;
    --budget) budget=${2:-}; shift ;;
    --loan) loan=${2:-}; shift ;;
    --state) state=${2:-}; shift ;;
    --out) out=${2:-}; shift ;;
    --pack) pack=${2:-}; shift ;;
    --finished) finished=${2:-}; shift ;;
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    *) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ "$budget" =~ ^[0-9]+$ ]] || [ "$budget" -lt 60 ] || [ "$budget" -gt 36000 ]; then
  echo "error: --budget must be a whole number of seconds in [60, 36000], got '$budget'" >&2; exit 2
fi
loan=${loan:-$budget}
if ! [[ "$loan" =~ ^[0-9]+$ ]] || [ "$loan" -lt "$budget" ] || [ "$loan" -gt 36000 ]; then
  echo "error: --loan must be a whole number of seconds in [--budget ($budget), 36000], got '$loan'" >&2; exit 2
fi
if [ -n "$pack" ] && [ "$(realpath -m "$pack")" = "$(realpath -m "$out")" ]; then
  echo "error: --pack must be another folder than --out ($out): the archive of --out cannot lie inside it" >&2; exit 2
fi

PY=${PYTHON:-python3}
# the repository's joma_lib, also for the scripts in benchmarks/ (a GPU machine has it installed nowhere)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
# what a paper-sweep stack must finish within: the loan's time left, less 60 s (at least 1 s)
finish_within() { local l; l=$(( loan - ($(date +%s) - start) - 60 )); echo $(( l > 1 ? l : 1 )); }
# cap SECONDS: the smaller of SECONDS and what is left of the budget (minus 20 s for the summary)
cap() { local l; l=$(( $(left) - 20 )); [ "$1" -lt "$l" ] && echo "$1" || echo "$(( l > 0 ? l : 0 ))"; }

# the precision of the runs finished in earlier loans (one for the sweep), else auto
finished_runs=$(ls "$finished"/paper/*/result.json 2>/dev/null | wc -l)
precision=auto
if [ "$finished_runs" -gt 0 ]; then
  precision=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["config"]["precision"])' \
    "$(ls "$finished"/paper/*/result.json | head -n 1)") || { echo "error: cannot read the precision of the finished runs in $finished/paper" >&2; exit 2; }
fi

# the Table 1 runs finished in folder $1: "all" where its result is there, else the runs of its finished stacks (each
# stack-FIRST-STOP.npz holds STOP - FIRST of them)
table1_runs_in() {
  if [ -f "$1/table1.npz" ]; then echo all; return; fi
  echo $(( $(ls "$1"/stack-*-*.npz 2>/dev/null | sed -E 's/.*stack-([0-9]+)-([0-9]+)[.]npz$/\2 - \1/' | paste -sd+ -) ))
}

# the precision of Table 1's stacks finished in earlier loans (every stack of its folder has the same), else auto
table1_precision=auto
table1_finished=$(ls "$finished"/table1/table1.json "$finished"/table1/stack-*.npz 2>/dev/null | head -n 1)
if [ -n "$table1_finished" ]; then
  table1_precision=$($PY -c 'import json, sys, numpy
path = sys.argv[1]
record = json.load(open(path)) if path.endswith(".json") else json.loads(str(numpy.load(path)["identity"]))
print(record["config"]["precision"])' "$table1_finished") \
    || { echo "error: cannot read the precision of the finished Table 1 stacks in $finished/table1" >&2; exit 2; }
fi

# the plan: name, cap in seconds, command (run from the repository root, output into $out/<name>.log); verify
# stops 40 s before its cap (at least half of it), so that its report of the figures it kept is always written (and
# none when it kept none: `figures report` without ids would compute every figure)
at_limit() {  # the command of step $1 under a cap of $2 seconds
  local command=$3
  case "$1" in
    paper-lm) command="${command//@FINISH_WITHIN@/$(finish_within)} $(( $2 - 10 ))" ;;
    paper-table1) command="${command//@FINISH_WITHIN@/$(finish_within)}" ;;  # at its cap, SIGINT: checkpointed
    verify) command="${command//@VERIFY_SECONDS@/$(( $2 - 40 > $2 / 2 ? $2 - 40 : $2 / 2 ))}" ;;
  esac
  echo "$command"
}

# only the modules that hold gpu-marked tests: the others import packages a GPU machine may lack (sphinx, ...)
gpu_test_files=$(grep -l '^@pytest.mark.gpu' tests/test_*.py | tr '\n' ' ')
lm_runs="$PY -m joma_lib.lm run --preset paper paper-lr --stack --max-vocab 33278 --precision $precision --device cuda \
--no-progress --out $state/runs/paper --results $out/rerun-paper.npz"
table1_runs="$PY -m joma_lib table1 --config full --stack --stack-size 10 --precision $table1_precision --device cuda --no-progress \
--out $state/runs/table1 --every 1000 --save $out/table1-paper.npz --finish-within @FINISH_WITHIN@"
# the benchmarks committed from earlier loans: where this loan skips one, its compile verdict comes from there
stored=joma_lib/kit/benchmark_results
# tests-gpu, bench-compile and bench-table1 build inductor's kernels, cold on a fresh machine: hence their longer caps
steps=(
  "bench-lm|90|$PY benchmarks/bench_lm_stack.py --device cuda --repeats 15 --out $out"
  "bench-read-out|30|$PY benchmarks/bench_read_out.py --device cuda --out $out"
  "bench-table1|150|$PY benchmarks/bench_table1_stack.py --config full --device cuda --steps 10 --precisions tf32,bf16 --runs 10 \
--compile --out $out"
  "tests-gpu|180|env JOMA_DEVICE=cuda $PY -m pytest -q -p no:cacheprovider -n 0 -m gpu $gpu_test_files"
  "profile|60|$PY benchmarks/profile_lm_stack.py --device cuda --out $out"
  "bench-compile|180|$PY benchmarks/bench_lm_compile.py --device cuda --out $out"
  "verify|170|timeout -s INT @VERIFY_SECONDS@ env JOMA_DEVICE=cuda $PY -m joma_lib.figures verify --from $state/store \
--keep; rc=\$?; [ \$rc = 0 ] && ids= || ids=\$(cd $state/store 2>/dev/null && ls *.json 2>/dev/null | sed 's/[.]json\$//'); \
if [ \$rc = 0 ] || [ -n \"\$ids\" ]; then env JOMA_DEVICE=cuda $PY -m joma_lib.figures report --from $state/store \
--out $out/gpu_verify.json \$ids; else echo 'verify kept no figure before its limit: no report'; fi; exit \$rc"
  "tests|170|env JOMA_DEVICE=cuda $PY -m pytest -q -p no:cacheprovider -n 8 --timeout 120 -m 'not gpu and not browser and not slurm' tests"
  "paper-lm|100000|flag=\$($PY benchmarks/bench_lm_compile.py --verdict $out/lm_compile.json $stored/lm_compile.json); \
echo \"compiled: \${flag:-no (bench-compile did not run in this loan or an earlier one, or says it does not pay)}\"; $lm_runs \$flag \
--finish-within @FINISH_WITHIN@ --stop-after"
  "paper-table1|100000|flag=\$($PY benchmarks/bench_table1_stack.py --verdict $out/table1_bench.json $stored/table1_bench.json); \
echo \"compiled: \${flag:-no (bench-table1 did not run in this loan or an earlier one, or says it does not pay)}\"; $table1_runs \$flag"
)

skipped() { [[ ",$skip," == *",$1,"* ]]; }  # whether --skip names step $1
names=$(for s in "${steps[@]}"; do echo "${s%%|*}"; done)
for name in ${skip//,/ }; do
  if ! grep -qx -- "$name" <<< "$names"; then
    echo "error: --skip names steps of the plan ($(echo $names | tr ' ' ',')), got '$name'" >&2; exit 2
  fi
done

if [ "$dry_run" = 1 ]; then
  problems=0
  echo "gpu_checks plan: budget ${budget}s, loan ${loan}s, state $state, results $out, packed into ${pack:-nowhere (no --pack, no \$OUT)}"
  if [ -d .whl ]; then echo "  wheels: $(ls .whl/*.whl 2>/dev/null | wc -l) in .whl/ (installed before the steps)"
  else echo "  wheels: no .whl/ (run \`make wheelhouse\` where a package index answers, and carry .whl)"; fi
  lm_help=$($PY -m joma_lib.lm run --help) || { echo "  PROBLEM: joma_lib.lm run --help fails"; problems=1; }
  grep -q -- "--stack" <<< "$lm_help" || { echo "  PROBLEM: lm run has no --stack"; problems=1; }
  $PY -m joma_lib table1 --help | grep -q -- "--stack" || echo "  note: python -m joma_lib table1 has no --stack: Table 1 is skipped"
  for script in $(printf '%s\n' "${steps[@]}" | grep -o 'benchmarks/[a-z_0-9]*[.]py' | sort -u); do
    [ -f "$script" ] || { echo "  PROBLEM: $script is missing"; problems=1; }
  done
  echo "  finished in earlier loans ($finished): $finished_runs paper runs (precision $precision)," \
       "$(table1_runs_in "$finished/table1") Table 1 runs (precision $table1_precision)"
  for s in "${steps[@]}"; do
    IFS='|' read -r name seconds command <<< "$s"
    done_mark=""; [ -f "$state/done/$name" ] && done_mark=" (done in an earlier call: skipped)"
    skipped "$name" && done_mark=" (skipped: --skip)"
    shown=$command; [ "$name" = verify ] && shown=$(at_limit "$name" "$seconds" "$command")
    printf '  %-13s up to %6ss  %s%s\n' "$name" "$seconds" "$shown" "$done_mark"
  done
  echo "  the paper steps get what is left of the budget (--stop-after); a stack of the sweep or of Table 1 starts" \
       "only if it finishes within the loan's time left less 60 s (--finish-within); then: summary.md"
  exit "$problems"
fi

mkdir -p "$state/done" "$state/store" "$out"  # verify --from needs its store to exist
summary="$out/summary.md"
{
  echo "# GPU checks, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)," \
       "$(nproc) CPU cores"
} > "$summary"
if [ -d .whl ] && ls .whl/*.whl > /dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu_checks_site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/gpu_checks_site"
fi
$PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
  echo "error: no CUDA device is visible to torch (this script is for a GPU machine; --dry-run elsewhere)" >&2; exit 2; }
echo "- torch: $($PY -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')" >> "$summary"
# the finished runs of earlier loans, where this machine has none of its own
for kind in paper table1; do
  if [ -d "$finished/$kind" ]; then mkdir -p "$state/runs/$kind" && cp -rn "$finished/$kind/." "$state/runs/$kind/"; fi
done
echo "- carried in: $finished_runs finished paper runs (precision $precision) and $(table1_runs_in "$finished/table1")" \
     "finished Table 1 runs (precision $table1_precision) from $finished" >> "$summary"

echo >> "$summary"
echo "| step | seconds | exit | result |" >> "$summary"
echo "|---|---|---|---|" >> "$summary"

# what a later loan carries in: every finished run's result files (small), never a checkpoint; then the results
# folder, packed for the device tool (after every step: a call cut at its limit still brings back what was done)
keep_results() {
  local run
  for run in "$state"/runs/paper/*/; do
    if [ -f "$run/result.json" ]; then
      mkdir -p "$out/finished/paper/$(basename "$run")" && cp "$run"/result.* "$out/finished/paper/$(basename "$run")/"
    fi
  done
  if [ -d "$state/runs/table1" ]; then
    mkdir -p "$out/finished/table1"
    find "$state/runs/table1" -maxdepth 1 -type f ! -name '*.pt*' ! -name '.*' -exec cp {} "$out/finished/table1/" \;
  fi
  if [ -n "$pack" ]; then
    mkdir -p "$pack" && cp "$summary" "$pack/summary.md" \
      && tar -czf "$pack/results.tar.gz.part" -C "$out" . && mv "$pack/results.tar.gz.part" "$pack/results.tar.gz"
  fi
}

export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} HF_DATASETS_OFFLINE=${HF_DATASETS_OFFLINE:-1} MPLBACKEND=Agg
for s in "${steps[@]}"; do
  IFS='|' read -r name seconds command <<< "$s"
  if [ -f "$state/done/$name" ]; then echo "| $name | - | - | done in an earlier call |" >> "$summary"; continue; fi
  skipped "$name" && continue
  limit=$(cap "$seconds")
  if [ "$limit" -lt 15 ]; then echo "| $name | - | - | not started: budget spent |" >> "$summary"; continue; fi
  command=$(at_limit "$name" "$limit" "$command")
  echo "=== $name (up to ${limit}s): $command"
  t0=$(date +%s)
  timeout -s INT -k 10 "$limit" bash -c "$command" > "$out/$name.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  tail -n 3 "$out/$name.log"
  last=$(grep -v '^\s*$' "$out/$name.log" | tail -n 1 | tr '|' '/' | cut -c1-160)
  case "$rc" in
    0) touch "$state/done/$name"; result="done: $last" ;;
    75) result="stopped at its deadline, checkpointed: the next call continues" ;;
    124|130) result="stopped at its time limit: the next call continues" ;;
    *) result="exit $rc: $last" ;;
  esac
  echo "| $name | $secs | $rc | $result |" >> "$summary"
  keep_results
done
{
  for log in "$out/tests-gpu.log" "$out/tests.log"; do  # pytest's short summary: what failed, in the summary itself
    if [ -f "$log" ] && grep -qE '^(FAILED|ERROR) ' "$log"; then
      echo; echo "## $(basename "$log" .log): what failed"; echo '```'
      grep -E '^(FAILED|ERROR) ' "$log" | cut -c1-200 | head -n 30; echo '```'
    fi
  done
  echo
  echo "Finished runs now: $(ls "$state"/runs/paper/*/result.json 2>/dev/null | wc -l) of the paper sweep's 30 (in" \
       "$out/finished/, also in results.tar.gz: commit them to benchmarks/gpu_finished/ for the next loan)."
  echo "Table 1 runs finished now: $(table1_runs_in "$state/runs/table1") of 40 (the same)."
  echo
  echo "## Runs"
  echo '```'
  $PY -m joma_lib.lm status --out "$state/runs/paper" 2>&1 | tail -n 40
  echo '```'
  echo "Total: $(( $(date +%s) - start )) s of a ${budget} s budget (the loan had ${loan} s left at the start)."
} >> "$summary"
keep_results
cat "$summary"
