"""Where the time of a stacked training step goes, kernel by kernel: the profile that says what to make faster.

The step of a stack of ``--stack`` runs of the paper's model (``--layers`` layers, ``--vocab`` words, 20 x 35 tokens,
``--precision``) is warmed up, then profiled by ``torch.profiler`` for ``--steps`` steps twice: replayed as its
CUDA graph (as the runners train on a GPU) and eagerly (each kernel launched from Python). Printed and stored
(``<--out>/<--results-name>.json``):

* per step: the wall time of each mode, the number of kernels and the sum of their GPU times; a graph's wall time
  near that sum means the GPU is never idle, and the step is made faster only by kernels that do less or are fewer;
* the kernels that take the most GPU time (grouped by name, per step), the first ``--top``.

On a CPU (``--device cpu``) the same is done for the eager step with operators in place of kernels (there is no
graph), which tests the script without a GPU::

    python benchmarks/profile_lm_stack.py --device cuda                    # benchmarks/gpu_checks.sh runs it
    python benchmarks/profile_lm_stack.py --device cpu --layers 1 --stack 2 --vocab 2000 --steps 2 --no-write
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from bench_lm_stack import paper_stack, stacked_step
from joma_lib.kit.benchmarks import results_path, save_results
from joma_lib.lm.presets import PAPER_GPU_STACK


def profiled(step, x: torch.Tensor, y: torch.Tensor, steps: int, device: torch.device) -> dict:
    """Wall ms per step, and per kernel name (GPU) or operator (CPU): calls and ms per step, over ``steps`` steps."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step.step(x, y)
        sync()
        wall = time.perf_counter() - start
    calls: dict[str, int] = defaultdict(int)
    total_us: dict[str, float] = defaultdict(float)
    for avg in prof.key_averages():  # on a GPU the kernels (their own device time), on a CPU the operators
        spent = avg.self_device_time_total if device.type == "cuda" else avg.self_cpu_time_total
        if spent > 0:
            calls[avg.key] += avg.count
            total_us[avg.key] += spent
    names = sorted(total_us, key=total_us.get, reverse=True)
    return {"wall_ms": 1000 * wall / steps, "events": sum(calls.values()) / steps,
            "busy_ms": sum(total_us.values()) / 1000 / steps,
            "by_name": [{"name": n, "calls": calls[n] / steps, "ms": total_us[n] / 1000 / steps} for n in names]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--layers", type=int, default=5)
    p.add_argument("--stack", type=int, default=PAPER_GPU_STACK,
                   help="runs in the stack (the paper sweep's 5-layer stacks)")
    p.add_argument("--vocab", type=int, default=28782)
    p.add_argument("--precision", default="bf16", choices=["fp32", "tf32", "bf16"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--results-name", default="lm_profile", help="store as <name>.json")
    p.add_argument("--out", type=Path, default=None,
                   help="store in this folder (default joma_lib/kit/benchmark_results)")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()
    for name in ("layers", "stack", "vocab", "steps", "top"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1 (got {getattr(args, name)})")
    results_path(args.results_name, args.out)  # a bad name fails now, not after the measurements
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here")
    models, x, y = paper_stack(p, args.precision, device, args.layers, args.stack, args.vocab)
    modes = {"cuda-graph": True, "eager": False} if device.type == "cuda" else {"eager": False}
    found = {}
    for mode, capture in modes.items():
        step = stacked_step(models, device, args.precision, x, y, capture=capture)
        if step.mode != mode:
            raise SystemExit(f"the step ran as {step.mode}, not {mode}")
        found[mode] = profiled(step, x, y, args.steps, device)
    unit = "kernels" if device.type == "cuda" else "operators"
    print(f"torch {torch.__version__}, {device}"
          f"{' ' + torch.cuda.get_device_name(device) if device.type == 'cuda' else ''}"
          f", {args.layers} layers, stack of {args.stack}, {args.precision}, vocab {args.vocab}, {args.steps} steps")
    for mode, f in found.items():
        print(f"{mode:>10}: {f['wall_ms']:.2f} ms a step, {f['events']:.0f} {unit} busy {f['busy_ms']:.2f} ms")
    # the table of the captured step, unless the profiler saw no kernel inside the graph's replays
    shown = next((mode for mode, f in found.items() if f["by_name"]), list(modes)[-1])
    last = found[shown]
    print(f"the {args.top} {unit} with the most time ({shown}), per step:")
    print(f"{'ms':>8} {'share':>6} {'calls':>6}  name")
    for row in last["by_name"][:args.top]:
        print(f"{row['ms']:8.3f} {row['ms'] / last['busy_ms']:6.1%} {row['calls']:6.0f}  {row['name'][:110]}")
    if not args.no_write:
        for f in found.values():
            f["by_name"] = f["by_name"][:args.top]
        save_results(args.results_name, {"settings": {k: str(v) for k, v in vars(args).items()}, "modes": found},
                     folder=args.out)


if __name__ == "__main__":
    main()
