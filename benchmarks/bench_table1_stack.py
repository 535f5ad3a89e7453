"""Table 1's training step: one run at a time against the runs stacked into one model, per run, side by side.

Three ways to take one Adam step of ``--runs`` runs of a Table 1 configuration (forward, backward, Adam):

* ``unstacked``: :func:`joma_lib.theory.table1.model.train_and_score`'s step for one run (its batch drawn,
  ``loss.item()``);
* ``stacked (bmm)``: :mod:`joma_lib.theory.table1.stacked`, the engine the command line uses (labels drawn ahead);
* ``stacked (vmap)``: the alternative, ``torch.func`` (``stack_module_state``, ``functional_call``,
  ``vmap(randomness="different")``) over :class:`~joma_lib.theory.table1.model.HierarchyTransformer`.

With ``--precisions`` (default fp32), the bmm stack is timed in each precision named (fp32, tf32, bf16:
:func:`joma_lib.base.precision.numerics`, as the command line's ``--precision`` trains), the other two in the
first; every row's name ends in its precision. ``--compile`` times the bmm stack with its loss compiled too
(``"stacked (bmm), compiled, <precision>"``, compiling in the warm-up) and how far its losses lie from the stack's
as written; ``--verdict FILE [FILE ...]`` then prints ``--compile`` where the stored measurement says the runs
should compile (:func:`joma_lib.kit.benchmarks.table1_compile_pays`; ``gpu_checks.sh`` passes it on).

It prints the median step time (``--steps`` timed steps after two warm-up steps; CUDA-synchronised), the time per
run-step, and the whole table's estimated time (per run-step x steps x every run of the configuration; for the
stacks, assuming the step time grows in proportion to the runs when ``--runs`` is fewer than all). The time the
label streams take per stacked step (drawn in a background thread during training) is printed too.

    python benchmarks/bench_table1_stack.py --config quick --device cpu --runs 8 --threads 1
    python benchmarks/bench_table1_stack.py --config full --device cuda           # the paper's scale, all 40 runs
    python benchmarks/bench_table1_stack.py --config full --device cuda --runs 10 --precisions tf32,bf16 --compile

``--spread`` measures instead how far the numbers move with the summation order alone, at a configuration small
enough to train whole (``check``): every run trained alone, on the CPU with 1 and with 2 threads (or on the GPU),
against the stack; with a second precision in ``--precisions``, also the stack trained in each; and the seeds'
spread, the scale the others compare with. The tolerances of ``tests/test_theory_table1_stacked.py`` come from it;
with ``--out`` it is stored as ``table1_spread.json`` (book/table1.md quotes the bf16 row, measured on ``quick``).

    python benchmarks/bench_table1_stack.py --spread --config check --device cpu|cuda
    python benchmarks/bench_table1_stack.py --spread --config quick --device cpu --precisions fp32,bf16 \
        --out joma_lib/kit/benchmark_results
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap
from torch.nn import functional as F

from joma_lib.base.device import resolve_device
from joma_lib.base.precision import PRECISIONS, PrecisionUnavailableError, require
from joma_lib.base.precision import numerics as precision_numerics
from joma_lib.kit.benchmarks import TABLE1_ENGINE, machine, save_results, table1_compile_pays
from joma_lib.theory.table1.model import RunResult, Table1Config, numerics, setup_run
from joma_lib.theory.table1.runs import CONFIGS, RunKey, seed_std, train_runs
from joma_lib.theory.table1.stacked import LabelStream, stack_runs, stacked_losses
from joma_lib.theory.table1.stacked_run import (
    ProbeStack,
    probe_stack,
    probe_step,
    run_results,
    run_table1_stacked,
    training_losses,
)
from joma_lib.base.validation import check_choice, check_int


def timed(steps_by_name: Mapping[str, Callable[[], object]], steps: int, device: torch.device) -> dict[str, float]:
    """Median seconds of each step over ``steps`` calls after two warm-up calls, the methods taking turns (one call
    of each per round), so that a shared machine's changing load falls on all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in steps_by_name}
    for k in range(steps + 2):
        for name, step in steps_by_name.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if k >= 2:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(found) for name, found in times.items()}


def unstacked_step(config: Table1Config, device: torch.device) -> Callable[[], object]:
    """One step of the first run, as ``train_and_score`` takes it."""
    n_comb, sizes = config.settings[0]
    data, _, model = setup_run(config, n_comb, sizes, config.seeds[0], device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    rng = np.random.default_rng(config.seeds[0])

    def step() -> float:
        batch = data.sample(config.batch_size, rng)
        logits = model(torch.from_numpy(batch.tokens).to(device))
        loss = F.cross_entropy(logits, torch.from_numpy(batch.labels).to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def stacked_steps(config: Table1Config, n_runs: int, device: torch.device
                  ) -> tuple[ProbeStack, Callable[[], object], Callable[[], object]]:
    """The bmm stack (its step: :func:`~joma_lib.theory.table1.stacked_run.probe_step`, the training step on the
    first batch, again and again), the vmap step on the same batch and one step's label drawing, for the first
    ``n_runs`` runs."""
    runs = stack_runs(config)[:n_runs]
    probe = probe_stack(config, n_runs, device)
    models = [setup_run(config, *run.setting, run.seed, device)[2] for run in runs]
    stream = LabelStream(runs, config.n_class, config.batch_size)
    func_params, buffers = stack_module_state(models)  # type: ignore[arg-type]
    func_adam = torch.optim.Adam(func_params.values(), lr=config.lr, weight_decay=config.weight_decay)
    base = models[0]

    def one_run_loss(p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], x: torch.Tensor,
                     y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(base, (p, b), (x,)), y)

    def vmap_step() -> None:
        loss = vmap(one_run_loss, randomness="different")(func_params, buffers, probe.tokens, probe.labels)
        func_adam.zero_grad(set_to_none=True)
        loss.sum().backward()
        func_adam.step()

    return probe, vmap_step, lambda: stream.draw(0, 1)


def loss_apart(probe: ProbeStack, compiled: Callable[..., torch.Tensor], precision: str,
               device: torch.device) -> float:
    """How far the compiled stack's losses lie from the stack's as written, on the same weights and batch (largest
    relative difference over the runs)."""
    with precision_numerics(precision, device):
        plain = stacked_losses(probe.params, probe.tokens, probe.labels, probe.n_layers).detach()
        other = compiled(probe.params, probe.tokens, probe.labels, probe.n_layers).detach()
    return float(((other - plain).abs() / plain.abs()).max())


def in_precision(step: Callable[[], object], precision: str, device: torch.device) -> Callable[[], object]:
    """``step`` taken in ``precision`` (as the runs train in it)."""
    def run() -> object:
        with precision_numerics(precision, device):
            return step()
    return run


def _diagonal_by_seed(runs: Mapping[RunKey, RunResult]) -> np.ndarray:
    """The paper's diagonal scores (layer i against level i; trained and change) of ``runs``, seeds on the last axis:
    ``[setting, shuffled, score kind, k, seed]``."""
    settings = sorted({i for i, _, _ in runs})
    seeds = sorted({j for _, j, _ in runs})
    n_diag = min(next(iter(runs.values())).scores.shape)
    return np.array([[[[[getattr(runs[i, j, shuffled], name)[k, k] for j in seeds] for k in range(n_diag)]
                        for name in ("scores", "scores_change")] for shuffled in (False, True)] for i in settings])


def spread(a: Mapping[RunKey, RunResult], b: Mapping[RunKey, RunResult]) -> dict[str, float]:
    """How far two trainings of the same runs differ: the largest loss difference over steps and runs, the median,
    largest and share above 1e-4 of the differences of the scores (trained and change), and the largest difference
    of a setting's mean diagonal score over the seeds (what the table shows)."""
    loss = max(float(np.abs(a[key].losses - b[key].losses).max()) for key in a)
    scores = np.concatenate([np.abs(getattr(a[key], name) - getattr(b[key], name)).ravel()
                             for key in a for name in ("scores", "scores_change")])
    means = np.abs(_diagonal_by_seed(a).mean(-1) - _diagonal_by_seed(b).mean(-1))
    return {"loss_max": loss, "score_median": float(np.median(scores)), "score_max": float(scores.max()),
            "score_jumps": float((scores > 1e-4).mean()), "setting_mean_max": float(means.max())}


def measure_spread(config: Table1Config, device: torch.device, other: str | None = None
                   ) -> dict[str, dict[str, float]]:
    """:func:`spread` between runs trained alone with 1 and 2 CPU threads (CPU only), between alone and stacked,
    and, with ``other``, between the stack in ``config.precision`` and in ``other``; and ``"seeds"``: the largest
    standard deviation over the seeds (ddof=1) of a setting's diagonal score, the scale these compare with."""
    alone = train_runs(config, device.type)
    stacked = run_table1_stacked(config, device.type)
    assert stacked is not None
    found = {"alone vs stacked": spread(alone, run_results(config, stacked)),
             "seeds": {"score_sd_max": float(seed_std(_diagonal_by_seed(alone), axis=-1).max())}}
    if device.type == "cpu":
        found["1 vs 2 threads"] = spread(alone, train_runs(replace(config, cpu_threads=2), "cpu"))
    if other is not None:
        changed = run_table1_stacked(replace(config, precision=other), device.type)
        assert changed is not None
        found[f"stacked, {config.precision} vs {other}"] = spread(run_results(config, stacked),
                                                                   run_results(config, changed))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="quick", help=f"one of {sorted(CONFIGS)} (default quick)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    parser.add_argument("--runs", default=None, help="runs to stack (default: all of the configuration)")
    parser.add_argument("--steps", default="10", help="timed steps (default 10)")
    parser.add_argument("--threads", default=None, help="torch CPU threads (default: the configuration's)")
    parser.add_argument("--json", default=None, metavar="FILE", help="with --spread: also write the spread to FILE")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="store the timings as DIR/table1_bench.json "
                             "(as joma_lib/kit/benchmark_results/ keeps them)")
    parser.add_argument("--spread", action="store_true",
                        help="measure the spread of the numbers instead (with a second --precisions: also between "
                             "the two; with --out: stored as table1_spread.json)")
    parser.add_argument("--compile", action="store_true",
                        help="also time the bmm stack with its loss compiled (torch.compile), in each precision, "
                             "and how far its losses lie from the uncompiled ones")
    parser.add_argument("--verdict", type=Path, nargs="+", default=None, metavar="FILE",
                        help="measure nothing: print --compile if the table1_bench stored in the first FILE that "
                             "exists (this loan's, else one committed from an earlier loan) says Table 1's runs should "
                             "compile (nothing otherwise, or where none exists)")
    parser.add_argument("--precisions", default="fp32",
                        help=f"comma-separated precisions of the bmm stack, of {list(PRECISIONS)} (default fp32; the "
                             "first also for the unstacked and vmap steps)")
    args = parser.parse_args()
    if args.verdict is not None:
        stored = next((path for path in args.verdict if path.is_file()), None)
        if stored is not None and table1_compile_pays(json.loads(stored.read_text())):
            print("--compile")
        return
    try:
        config = CONFIGS[check_choice("config", args.config, sorted(CONFIGS))]
        total = len(stack_runs(config))
        n_runs = total if args.runs is None else check_int("runs", int(args.runs), 1, total)
        steps = check_int("steps", int(args.steps), 1, 10_000)
        threads = None if args.threads is None else check_int("threads", int(args.threads), 1, 1024)
        device = resolve_device(args.device)
        precisions = [check_choice("--precisions", p, PRECISIONS) for p in args.precisions.split(",")]
        for p in precisions:
            require(p, device, f"--precisions {p}")
        config = replace(config, precision=precisions[0],
                         cpu_threads=config.cpu_threads if threads is None else threads)
    except (ValueError, PrecisionUnavailableError) as err:
        parser.error(str(err))
    if args.spread:
        found = measure_spread(config, device, precisions[1] if len(precisions) > 1 else None)
        for name, numbers in found.items():
            print(f"{args.config} on {device}, {name}: " + ", ".join(f"{k} {v:.2e}" for k, v in numbers.items()))
        if args.json is not None:
            Path(args.json).write_text(json.dumps({"config": args.config, "device": str(device), "spread": found}))
        if args.out is not None:
            save_results("table1_spread", {"config": args.config, "device": str(device), "spread": found},
                         folder=args.out)
        return
    with numerics(config, device):
        probe, vmap_step, draw = stacked_steps(config, n_runs, device)
        compiled = training_losses(True) if args.compile else None
        first = precisions[0]
        methods = {f"unstacked, {first}": (unstacked_step(config, device), first, 1),
                   **{f"{TABLE1_ENGINE}, {p}": (lambda: probe_step(probe), p, n_runs) for p in precisions},
                   **({f"{TABLE1_ENGINE}, compiled, {p}": (lambda: probe_step(probe, compiled), p, n_runs)
                       for p in precisions} if compiled is not None else {}),
                   f"stacked (vmap), {first}": (vmap_step, first, n_runs)}
        seconds = timed({name: in_precision(step, p, device) for name, (step, p, _) in methods.items()}, steps, device)
        rows = {name: (seconds[name], runs) for name, (_, _, runs) in methods.items()}
        apart = {} if compiled is None else {p: loss_apart(probe, compiled, p, device) for p in precisions}
        drawing = timed({"draw": draw}, steps, torch.device("cpu"))["draw"]
        n_threads = torch.get_num_threads()
    print(f"Table 1 --config {args.config} on {device} ({machine().get('gpu', machine()['cpu'])}), "
          f"{n_threads} threads, {n_runs} of {total} runs stacked, median of {steps} steps")
    print(f"{'method':<32} {'step ms':>10} {'per run-step ms':>16} {'speed-up':>9} {'whole table':>12}")
    per_run = {name: seconds / runs for name, (seconds, runs) in rows.items()}
    alone = per_run[f"unstacked, {first}"]
    results = {}
    for name, (seconds, runs) in rows.items():
        table_s = per_run[name] * config.steps * total
        results[name] = {"step_ms": 1e3 * seconds, "runs": runs, "per_run_step_ms": 1e3 * per_run[name],
                         "whole_table_s": table_s, "precision": methods[name][1], "compiled": ", compiled," in name}
        print(f"{name:<32} {1e3 * seconds:>10.2f} {1e3 * per_run[name]:>16.3f} "
              f"{alone / per_run[name]:>8.2f}x {table_s / 60:>10.1f} m")
    print(f"label drawing, {n_runs} runs, one step: {1e3 * drawing:.2f} ms (in a background thread while training)")
    stored = {"config": args.config, "device": str(device), "precisions": precisions,
              "label_drawing_ms": 1e3 * drawing, "rows": results, "compiled_loss_apart": apart}
    if apart:
        print("compiled against as written, largest relative loss difference: "
              + ", ".join(f"{p} {gap:.1e}" for p, gap in apart.items())
              + f"; the runs should compile: {'yes' if table1_compile_pays({'results': stored}) else 'no'}")
    if args.out is not None:
        save_results("table1_bench", stored, folder=args.out)


if __name__ == "__main__":
    main()
