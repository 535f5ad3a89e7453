"""Runs trained one by one, and as one stack: the step of the paper's model against the authors' way of training it.

At the paper's shapes (d 200, FFN 200, one head, dropout 0.2, 20 x 35 tokens, ``--vocab`` words) and for each
depth, four steps alternate in one process (same inputs, threads and GPU), median of ``--repeats``:

* authors: their training loop in our code (``BaselineLM`` of ``bench_lm_step.py``), fp32;
* ours, one run: :func:`joma_lib.lm.step.train_step` (the unstacked runner), fp32;
* ours, one run as a stack of one: :class:`joma_lib.lm.stack_step.StackStep` (one CUDA graph on a GPU), in the
  precision ``auto`` would measure fastest for it (each candidate is timed; all are printed);
* ours, a stack of R runs (on a GPU :data:`~joma_lib.lm.presets.PAPER_GPU_STACK`: 7 of the 21 runs of the 5-layer
  model, the 3 seeds of every other depth; ``--stack 21`` for the 5-layer runs as one stack), in its fastest
  precision; the per-run time is the stack's step over R.

On a GPU it also times two 5-layer stacks' steps one after the other and each on its own CUDA stream (whether
training two stacks at once would pay: a step of this small model leaves most of the GPU idle). From the stacked
step times it projects the 30-run paper sweep (58,000 steps per run; evaluation not counted) and prints it. On a CPU
it also times the unstacked step on one thread (each precision) and prints what ``--jobs 2`` would give per run (that
step over 2, assuming two processes scale perfectly on 2 cores) beside the stack of 2 runs on ``--threads``. Results
are stored in ``joma_lib/kit/benchmark_results/<--results-name>.json`` (or ``--out DIR``)::

    python benchmarks/bench_lm_stack.py --device cuda             # on a GPU (benchmarks/gpu_checks.sh runs it)
    python benchmarks/bench_lm_stack.py --device cpu --layers 1 2 --threads 2 --repeats 7
"""

from __future__ import annotations

import argparse
import copy
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from bench_lm_step import BaselineLM, baseline_step, time_alternately
from joma_lib.kit.benchmarks import CLOCKS, add_allocator_option, apply_allocator, median_ms, results_path, save_results
from joma_lib.lm.model import TransformerLM, causal_mask
from joma_lib.base.precision import PrecisionUnavailableError, candidates, require
from joma_lib.lm.presets import PAPER_GPU_STACK, PRESETS, paper_sweep_configs
from joma_lib.base.device import pinned_threads
from joma_lib.lm.stack_step import AdamState, StackStep, on_device
from joma_lib.lm.stacked import StackedLM, mask_source
from joma_lib.lm.step import make_optimizer, train_step

#: runs of each depth in the paper's sweep (Fig. 6 at lr 1e-4 x 3 seeds; Fig. 8's 7 learning rates x 3 seeds at 5
#: layers)
PAPER_RUNS = dict(Counter(cfg.n_layers for cfg in paper_sweep_configs()))
PAPER_STEPS = PRESETS["paper"]["steps"]


def paper_stack(p: argparse.ArgumentParser, precision: str, device: torch.device, n_layers: int, n_runs: int,
                vocab: int) -> tuple[list[TransformerLM], torch.Tensor, torch.Tensor]:
    """``n_runs`` models of the paper's shapes (seeded) and one batch ``x -> y`` of 20 x 35 tokens on ``device``,
    for a stacked step in ``precision``; first (before any model is built) a CPU whose bf16 kernels die
    (:mod:`joma_lib.base.cpu`) refuses that precision through ``p.error``, naming --precision."""
    try:
        require(precision, device, f"--precision {precision}")
    except PrecisionUnavailableError as err:
        p.error(str(err))
    torch.manual_seed(0)
    models = [TransformerLM(vocab, n_layers) for _ in range(n_runs)]
    tokens = torch.randint(0, vocab, (20, 36), device=device)
    return models, tokens[:, :-1], tokens[:, 1:]


def stacked_step(models: list[TransformerLM], device: torch.device, precision: str, x: torch.Tensor,
                 y: torch.Tensor, compiled: bool = False, capture: bool = True) -> StackStep:
    """The step of ``models`` as a stack, warmed up (and captured on a GPU, unless ``capture`` is False) before it
    is timed (``.step(x, y)``); ``compiled``: with its training loss through ``torch.compile`` (compiled during the
    warm-up)."""
    stack = StackedLM.from_models(models, mask_source(device, list(range(len(models)))), device)
    if compiled:
        stack.compile_losses()
    step = StackStep(stack, AdamState(list(stack.params.values())), on_device([1e-4] * len(models), device),
                     on_device([0.5] * len(models), device), precision, capture)
    step.warm_up(x, y)
    return step


def side_by_side(device: torch.device, n_layers: int, n_stack: int, vocab: int, precision: str, repeats: int,
                 clock: str) -> dict[str, float]:
    """Median ms of two stacks' steps (``n_stack`` runs of ``n_layers`` layers each, captured on a GPU) taken one
    after the other on one stream, and each on its own stream, where the GPU may run their small kernels side by
    side: whether training several stacks at once would pay."""
    torch.manual_seed(0)
    tokens = torch.randint(0, vocab, (20, 36), device=device)
    x, y = tokens[:, :-1], tokens[:, 1:]
    first, second = (partial(stacked_step([TransformerLM(vocab, n_layers) for _ in range(n_stack)], device, precision,
                                          x, y).step, x, y) for _ in range(2))
    streams = [torch.cuda.Stream(device) for _ in range(2)]

    def two_streams() -> None:
        main = torch.cuda.current_stream(device)
        for step, stream in zip((first, second), streams, strict=True):
            stream.wait_stream(main)
            with torch.cuda.stream(stream):
                step()
        for stream in streams:
            main.wait_stream(stream)

    times = time_alternately({"one stream": lambda: (first(), second()), "two streams": two_streams}, repeats, 1,
                             device, clock)
    return {k: median_ms(v) for k, v in times.items()}


def _on_one_thread(model: TransformerLM, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                   precision: str) -> None:
    """One unstacked step on one CPU thread (what each of `--jobs 2`'s processes runs)."""
    with pinned_threads(1):
        train_step(model, optimizer, x, y, 0.5, precision)


def bench(device: torch.device, n_layers: int, n_stack: int, vocab: int, repeats: int, clock: str
          ) -> dict[str, float]:
    """Median ms of each step at one depth (see the module docstring)."""
    torch.manual_seed(0)
    base = BaselineLM(vocab, n_layers).to(device).train()
    ours = TransformerLM(vocab, n_layers).to(device).train()
    tokens = torch.randint(0, vocab, (20, 36), device=device)
    x, y = tokens[:, :-1], tokens[:, 1:]
    x_seq, y_seq, mask = x.T.contiguous(), y.T.contiguous(), causal_mask(35, device)
    opt_base, opt_ours = torch.optim.Adam(base.parameters(), lr=1e-4), make_optimizer(ours, 1e-4)
    calls: dict[str, Callable[[], object]] = {
        "authors": lambda: baseline_step(base, opt_base, x_seq, y_seq, mask),
        "ours": lambda: train_step(ours, opt_ours, x, y, 0.5, "fp32")}
    for precision in candidates(device):
        if device.type == "cpu":  # what each of `--jobs 2`'s two processes runs: one run on one thread
            single = copy.deepcopy(ours)
            opt_single = make_optimizer(single, 1e-4)
            calls[f"ours 1 thread {precision}"] = lambda m=single, o=opt_single, p=precision: _on_one_thread(
                m, o, x, y, p)
        calls[f"one {precision}"] = partial(stacked_step([copy.deepcopy(ours).cpu()], device, precision, x, y).step,
                                            x, y)
        calls[f"stack {precision}"] = partial(stacked_step([copy.deepcopy(ours).cpu() for _ in range(n_stack)],
                                                           device, precision, x, y).step, x, y)
    return {k: median_ms(v) for k, v in time_alternately(calls, repeats, 1, device, clock).items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, nargs="+", default=[1, 2, 5, 10])
    p.add_argument("--vocab", type=int, default=28_782, help="the authors' WikiText-2 vocabulary by default")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--stack", type=int, default=None, help=f"runs per stack (default on a GPU: the paper sweep's "
                                                            f"runs of the depth, up to {PAPER_GPU_STACK}; 2 on a CPU)")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--results-name", default="lm_stack", help="store as <name>.json")
    p.add_argument("--out", type=Path, default=None,
                   help="store in this folder (default joma_lib/kit/benchmark_results)")
    p.add_argument("--no-write", action="store_true")
    add_allocator_option(p)
    args = p.parse_args()
    results_path(args.results_name, args.out)  # a bad name fails now, not after the measurements
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    allocator = apply_allocator(args.allocator)  # for every step timed here
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {device}"
          f"{' ' + torch.cuda.get_device_name(device) if device.type == 'cuda' else ''}"
          f", {torch.get_num_threads()} CPU threads, vocab {args.vocab}, 20 x 35 tokens, median of {args.repeats}, "
          f"allocator {allocator}")
    print(f"{'layers':>6} {'R':>3} {'authors':>8} {'ours':>7} {'one run (best)':>18} {'stack/run (best)':>20} "
          f"{'authors/one':>11} {'authors/stacked':>15}")
    rows, projected = [], 0.0
    for n in args.layers:
        n_stack = args.stack or (min(PAPER_GPU_STACK, PAPER_RUNS.get(n, PAPER_GPU_STACK)) if device.type == "cuda"
                                 else 2)
        ms = bench(device, n, n_stack, args.vocab, args.repeats, args.clock)
        one = min((k for k in ms if k.startswith("one ")), key=ms.__getitem__)
        stack = min((k for k in ms if k.startswith("stack ")), key=ms.__getitem__)
        per_run = ms[stack] / n_stack
        row = {"layers": n, "stack": n_stack, "median_ms": ms, "best_one": one, "best_stack": stack,
               "stack_ms_per_run": per_run, "authors_over_one": ms["authors"] / ms[one],
               "authors_over_stacked": ms["authors"] / per_run}
        if device.type == "cpu":
            row["jobs2_ms_per_run_estimate"] = min(v for k, v in ms.items() if k.startswith("ours 1 thread")) / 2
        if n in PAPER_RUNS:
            projected += PAPER_STEPS * ms[stack] / 1e3 * (PAPER_RUNS[n] / n_stack)
        rows.append(row)
        print(f"{n:>6} {n_stack:>3} {ms['authors']:>8.2f} {ms['ours']:>7.2f} {ms[one]:>8.2f} ({one[4:]:>4})   "
              f"{per_run:>9.3f} ({stack[6:]:>4})    {row['authors_over_one']:>10.1f}x "
              f"{row['authors_over_stacked']:>14.1f}x",
              flush=True)
        if device.type == "cpu":
            print(f"{'':>6} --jobs 2 estimate per run: {row['jobs2_ms_per_run_estimate']:.2f} ms "
                  "(the faster one-thread step / 2)")
    pair = None
    if device.type == "cuda" and 5 in args.layers:  # the depth of most of the paper's runs
        row = next(r for r in rows if r["layers"] == 5)
        try:  # measured after the table, which is kept whatever happens here
            pair = side_by_side(device, 5, row["stack"], args.vocab, row["best_stack"].removeprefix("stack "),
                                args.repeats, args.clock)
            print(f"two stacks of {row['stack']} (5 layers) one after the other: {pair['one stream']:.2f} ms, on two "
                  f"streams: {pair['two streams']:.2f} ms ({pair['one stream'] / pair['two streams']:.2f}x)")
        except Exception as err:  # noqa: BLE001 - one line, and the step table is still stored
            print(f"two stacks on two streams: not measured ({type(err).__name__}: {' '.join(str(err).split())[:200]})")
    if set(PAPER_RUNS) <= set(args.layers):
        print(f"projected paper sweep (30 runs x {PAPER_STEPS} steps, training only): {projected / 60:.1f} minutes")
    if not args.no_write:
        save_results(args.results_name, {"settings": {k: str(v) for k, v in vars(args).items()} |
                                         {"threads_used": torch.get_num_threads(), "allocator": allocator},
                                         "rows": rows,
                                         "projected_paper_sweep_s": projected if projected else None,
                                         "two_stacks_ms": pair},
                     folder=args.out)


if __name__ == "__main__":
    main()
