"""The stacked step with its training loss compiled by ``torch.compile``, against the step as the runners train it.

A step of the paper's small model costs about its number of kernels on a GPU (``bench_step_ops.py``), and
``torch.compile`` fuses chains of elementwise operations (the dropout masks, the casts, the layer norms' scale
and shift) into single kernels. At one depth and stack size (default 5 layers, 7 runs in bf16: most of the paper's
runs, as ``gpu_checks.sh`` stacks them), the two steps take turns in one process, both captured as CUDA graphs on a
GPU, median of ``--repeats``. It prints how long compiling took (the warm-up), both steps and their ratio, and how
far the two stacks' running losses lie apart after the timed steps (the same runs from the same start: compiling
only changes the rounding). The runners compile on request (``lm run --stack --compile``); this measures whether
they should, and ``--verdict FILE [FILE ...]`` prints ``--compile`` when the stored measurement in the first FILE
that exists says so (:func:`compile_pays`: ``gpu_checks.sh`` trains the paper-scale runs compiled then), with
``--compile-seconds`` the time compiling took there (:func:`compile_seconds`), which the runner's plan adds to each
stack's time::

    python benchmarks/bench_lm_compile.py --device cuda          # benchmarks/gpu_checks.sh runs it
    python benchmarks/bench_lm_compile.py --device cpu --layers 1 --stack 2 --vocab 2000 --repeats 3 --no-write
    python benchmarks/bench_lm_compile.py --verdict gpu_runs/out/lm_compile.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from bench_lm_stack import paper_stack, stacked_step
from bench_lm_step import time_alternately
from joma_lib.kit.benchmarks import CLOCKS, median_ms, results_path, save_results


#: the compiled step trains the runs when it is at least this much faster, both steps captured, and its running
#: losses lie at most this far (relative) from the step's as written: rounding, not another computation (both set
#: before any compiled step was timed on a GPU)
PAYS_SPEEDUP, AGREES_RELATIVE = 1.1, 1e-2


def compile_pays(results: Mapping[str, Any]) -> bool:
    """Whether a stored measurement (``results`` of ``lm_compile.json``) says the runners should compile."""
    return (results["as_trained_over_compiled"] >= PAYS_SPEEDUP and results["running_loss_apart"] <= AGREES_RELATIVE
            and set(results["modes"].values()) == {"cuda-graph"})


def compile_seconds(results: Mapping[str, Any]) -> int:
    """The seconds compiling took in a stored measurement: the compiled step's warm-up less that of the step as
    trained (both made and captured the same way), in whole seconds, rounded up. Measured at one depth and stack size
    and taken for every stack: compiling grows with the graph, so a deeper stack may take longer."""
    warm_up = results["warm_up_s"]
    return math.ceil(max(warm_up["compiled"] - warm_up["as trained"], 0.0))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--verdict", type=Path, nargs="+", metavar="FILE",
                   help="measure nothing: print --compile and --compile-seconds if the measurement stored in the "
                        "first FILE that exists (this loan's, else one committed from an earlier loan) says the "
                        "runners should compile (nothing otherwise, or where none exists)")
    p.add_argument("--layers", type=int, default=5)
    p.add_argument("--stack", type=int, default=7)
    p.add_argument("--vocab", type=int, default=28_782, help="the authors' WikiText-2 vocabulary by default")
    p.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="bf16")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--results-name", default="lm_compile", help="store as <name>.json")
    p.add_argument("--out", type=Path, default=None,
                   help="store in this folder (default joma_lib/kit/benchmark_results)")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()
    if args.verdict is not None:
        stored = next((path for path in args.verdict if path.is_file()), None)
        results = None if stored is None else json.loads(stored.read_text())["results"]
        if results is not None and compile_pays(results):
            print(f"--compile --compile-seconds {compile_seconds(results)}")
        return
    results_path(args.results_name, args.out)  # a bad name fails now, not after the measurements
    device = torch.device(args.device)
    models, x, y = paper_stack(p, args.precision, device, args.layers, args.stack, args.vocab)
    steps, warm_up_s = {}, {}
    for name, compiled in (("as trained", False), ("compiled", True)):
        start = time.perf_counter()
        steps[name] = stacked_step(models, device, args.precision, x, y, compiled=compiled)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        warm_up_s[name] = time.perf_counter() - start
    ms = {k: median_ms(v) for k, v in time_alternately({k: (lambda s=s: s.step(x, y)) for k, s in steps.items()},
                                                       args.repeats, 1, device, args.clock).items()}
    apart = float((steps["compiled"].running - steps["as trained"].running).abs().max()
                  / steps["as trained"].running.abs().max())
    ratio = ms["as trained"] / ms["compiled"]
    print(f"torch {torch.__version__}, {device}"
          f"{' ' + torch.cuda.get_device_name(device) if device.type == 'cuda' else ''}"
          f", {args.layers} layers, stack of {args.stack}, {args.precision}, vocab {args.vocab}, "
          f"median of {args.repeats}")
    modes = {k: s.mode for k, s in steps.items()}  # a capture that failed leaves a step eager: say so
    print(f"warm-up (compiling included): as trained {warm_up_s['as trained']:.1f} s ({modes['as trained']}), "
          f"compiled {warm_up_s['compiled']:.1f} s ({modes['compiled']})")
    print(f"step: as trained {ms['as trained']:.2f} ms, compiled {ms['compiled']:.2f} ms ({ratio:.2f}x); "
          f"running losses apart by {apart:.1e} (relative)")
    if not args.no_write:
        save_results(args.results_name, {"settings": {k: str(v) for k, v in vars(args).items()}, "median_ms": ms,
                                         "warm_up_s": warm_up_s, "modes": modes, "as_trained_over_compiled": ratio,
                                         "running_loss_apart": apart}, folder=args.out)


if __name__ == "__main__":
    main()
