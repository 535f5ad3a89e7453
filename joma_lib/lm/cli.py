"""Experiment runner for the language-model experiments (the paper's Figs. 6 and 8).

The command line (``python -m joma_lib.lm``) of the runs of :mod:`joma_lib.lm.step`: ``run`` trains (or
resumes) a sweep here (:mod:`joma_lib.lm.sweep`) or on Slurm (:mod:`joma_lib.lm.cluster`), ``collect`` stacks the
finished runs of a folder, ``status`` says where each run is::

    python -m joma_lib.lm run --preset rerun-full --jobs 2 --out runs/rerun-full \\
        --results joma_lib/lm/results/rerun-full.npz
    python -m joma_lib.lm run --preset paper --device cuda --out runs/paper   # the paper's sweep (GPU)
    python -m joma_lib.lm run --preset paper paper-lr --stack --device cuda --out runs/paper   # Figs. 6, 8 stacked
    python -m joma_lib.lm run --data ptb --layers 1 2 --lr 3e-4 --steps 2000 --out runs/x
    python -m joma_lib.lm collect runs/x --results x.npz
    python -m joma_lib.lm run --preset paper --engine slurm --gpus-per-run 1 --time 6:00:00 --out runs/paper
    python -m joma_lib.lm status --out runs/paper     # each run's state and step, from its folder and Slurm

Drawing the runs belongs to the figures' command line:
``python -m joma_lib.figures sweep runs/x --figure fig6 -o fig6.png``.

``--preset`` fills every setting; explicit options override it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import torch

from joma_lib.base.device import DEVICE_CHOICES, resolve_device
from joma_lib.lm.cluster import (
    ENGINES,
    SlurmResources,
    format_states,
    require_slurm,
    run_states,
    submit_missing,
    wait_for,
)
from joma_lib.base.io import writable_dir
from joma_lib.lm.config import ADAM_RESET, ARCHS, DEFAULT_THREADS, RunConfig, sweep_configs
from joma_lib.lm.data import CORPORA, load_splits
from joma_lib.base.precision import PRECISION_CHOICES, PRECISION_ENV, PRECISIONS
from joma_lib.lm.presets import PRESETS
from joma_lib.lm.runs import collect, finished_result, load_sweep, write_results
from joma_lib.lm.stack import stacks
from joma_lib.lm.sweep import DeadlineReached, run_sweep, sweep_precision, train_on_node, train_stack_on_node
from joma_lib.base.startup import command
from joma_lib.base.validation import check_choice, check_float, check_int

_FIELD_TYPES = {f.name: f.type for f in fields(RunConfig)}
_PAPER = RunConfig()  # the defaults are the paper's (Figs. 6 and 8): each option's help names its default
#: what a default of None means, in the help of the options below
_NONE_MEANS = {"eval_chunks": "all of it, as the authors", "max_vocab": "every word"}
#: the options of one number each: name, type, what it sets
_SIZES: list[tuple[str, type, str]] = [
    ("steps", int, "training steps of each run"),
    ("eval_interval", int, "steps between evaluations, each a checkpoint"),
    ("eval_chunks", int, "evaluate on the first this many chunks of the validation split"),
    ("seq_len", int, "tokens per training sequence"),
    ("batch_size", int, "sequences per training batch"),
    ("eval_batch_size", int, "sequences per evaluation batch"),
    ("max_vocab", int, "keep this many most frequent words, the rest <unk>"),
    ("d", int, "model width"),
    ("d_ff", int, "hidden width of each MLP"),
    ("dropout", float, "dropout rate"),
    ("clip", float, "gradient-norm clip"),
    ("data_seed", int, "seed of the article split into train, validation and test (wikivital only)"),
    ("n_heads", int, "attention heads (--arch gptneox only)"),
]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m joma_lib.lm", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train (or resume) a sweep of runs")
    run.add_argument("--preset", choices=sorted(PRESETS), nargs="+",
                     help="start from these settings (several: the union of their runs)")
    run.add_argument("--data", choices=CORPORA,
                     help=f"the corpus (default: {_PAPER.data}, downloaded; offline, the stand-in wikivital, said so). "
                          "wikivital (Wikipedia leads) and ptb ship in packages")
    run.add_argument("--layers", type=int, nargs="+",
                     help=f"depths (the sweep trains every depth, lr and seed; default: {_PAPER.n_layers})")
    run.add_argument("--lr", type=float, nargs="+", help=f"Adam learning rates (default: {_PAPER.lr:g})")
    run.add_argument("--seeds", type=int, nargs="+", help=f"seeds (default: {_PAPER.seed})")
    for name, kind, what in _SIZES:
        default = getattr(_PAPER, name)
        run.add_argument("--" + name.replace("_", "-"), dest=name, type=kind,
                         help=f"{what} (default: {_NONE_MEANS[name] if default is None else default})")
    run.add_argument("--adam-reset", dest="adam_reset", choices=ADAM_RESET,
                     help=f"epoch: a new Adam at every epoch, as the authors; never: one for the whole run "
                          f"(default: {_PAPER.adam_reset})")
    run.add_argument("--arch", choices=ARCHS, help=f"paper: the authors' model; gptneox: Pythia's (Fig. 7) "
                                                      f"(default: {_PAPER.arch})")
    run.add_argument("--log-checkpoints", dest="log_checkpoints", action="store_true", default=None,
                     help="also record at steps 1, 2, 4, ... below --eval-interval (Pythia's schedule)")
    run.add_argument("--precision", choices=PRECISION_CHOICES,
                     help="fp32 (default without a preset), bf16 mixed precision, tf32 (a GPU's TF32 products), "
                          "or auto: the fastest here, measured (fp32 or bf16 on a CPU; fp32, tf32 or bf16 on a GPU)")
    run.add_argument("--device", choices=DEVICE_CHOICES, default=None, help="default: $JOMA_DEVICE or auto")
    run.add_argument("--out", required=True, help="directory of the runs (checkpoints and per-run results)")
    run.add_argument("--results", help="also write the collected sweep here (npz + json)")
    run.add_argument("--jobs", type=int, default=1, help="train this many runs at once (does not change the results)")
    run.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                     help=f"CPU threads of each run (default {DEFAULT_THREADS}; recorded, a resume must use the same)")
    run.add_argument("--stack", action="store_true",
                     help="train the runs that share their shapes (they differ in lr, seed, clip only) as one stacked "
                          "model each: the same runs and folders, one model per shape (fast on a GPU)")
    run.add_argument("--stack-size", dest="stack_size", type=int,
                     help="with --stack: at most this many runs to a stack (default: all runs of a shape); smaller "
                          "stacks finish sooner, one by one")
    run.add_argument("--compile", dest="compiled", action="store_true",
                     help="with --stack: each stack's training loss through torch.compile (fused kernels; "
                          "benchmarks/bench_lm_compile.py measures whether it pays)")
    run.add_argument("--stop-after", dest="stop_after", type=float,
                     help="with --stack: after this many seconds, checkpoint every unfinished run and stop (exit 75); "
                          "the same command continues")
    run.add_argument("--finish-within", dest="finish_within", type=float,
                     help="with --stack, one job: after the runs already started, start only stacks of the waiting "
                          "runs expected to finish within this many seconds, each as large as fits (their step and "
                          "evaluation timed here first); runs left waiting end the call with exit 75")
    run.add_argument("--compile-seconds", dest="compile_seconds", type=float,
                     help="with --compile and --finish-within: the seconds a stack's step takes to compile, added to "
                          "each stack's planned time (the plan times the step as written; "
                          "benchmarks/bench_lm_compile.py measures it)")
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("--engine", choices=ENGINES, default="local",
                     help="local: a pool of --jobs processes here (default); slurm: one job-array task per run, "
                          "submitted through submitit (finished or queued runs are skipped)")
    run.add_argument("--partition", help="slurm: the partition (default: the cluster's)")
    run.add_argument("--gpus-per-run", dest="gpus_per_run", type=int, default=0, help="slurm: GPUs of each task")
    run.add_argument("--time", default=SlurmResources.time,
                     help=f"slurm: time limit of each task (default {SlurmResources.time}); at the limit a task is "
                          "requeued and resumes from its checkpoint")
    col = sub.add_parser("collect", help="stack the finished runs of a directory into one npz")
    col.add_argument("out")
    col.add_argument("--results", required=True)
    stat = sub.add_parser("status", help="each run's state and step, from its folder and (where reachable) Slurm")
    stat.add_argument("--out", required=True, help="directory of the runs")
    return p


def configs_from_args(args: argparse.Namespace) -> list[RunConfig]:
    """The runs of parsed ``run`` arguments: each ``--preset``'s sweep (or the defaults), explicit options
    overriding every one, in order, a run named twice (``paper`` and ``paper-lr`` share their 5-layer runs at lr
    1e-4) trained once. Every combination is validated before any training."""
    configs: dict[str, RunConfig] = {}
    for preset in args.preset or [None]:
        settings: dict[str, Any] = dict(PRESETS[preset]) if preset else {}
        for name in _FIELD_TYPES:
            value = getattr(args, name, None)
            if value is not None and name not in ("n_layers", "lr", "seed"):
                settings[name] = value
        for axis in ("layers", "lr", "seeds"):
            if getattr(args, axis) is not None:
                settings[axis] = getattr(args, axis)
        layers, lrs, seeds = settings.pop("layers", [1]), settings.pop("lr", [1e-4]), settings.pop("seeds", [1])
        for cfg in sweep_configs(RunConfig(**settings), layers, lrs, seeds):
            configs.setdefault(cfg.name, cfg)
    return list(configs.values())


#: what a run's result.json says of how it was trained, kept per distinct value in a collected sweep
TRAINED_KEYS = ("device", "torch", "precision_used", "step_mode", "stacked_runs", "compiled", "data_note")


def _sweep_meta(configs: Sequence[RunConfig], out: str | Path) -> dict[str, Any]:
    """The json of a collected sweep: its configs, the torch that collected them, and how its runs were trained
    (each distinct combination of :data:`TRAINED_KEYS` their result files under ``out`` record: runs trained on
    another machine, a GPU say, keep saying so once collected)."""
    trained = {json.dumps({k: meta.get(k) for k in TRAINED_KEYS}, sort_keys=True)
               for meta in (json.loads((Path(out) / c.name / "result.json").read_text()) for c in configs)}
    return {"configs": [asdict(c) for c in configs], "torch": torch.__version__,
            "trained": [json.loads(t) for t in sorted(trained)]}


def _slurm_precision(configs: Sequence[RunConfig], device: str, gpus: int, threads: int) -> list[RunConfig]:
    """``configs`` with ``precision="auto"`` decided once for the whole sweep before it is submitted, as a local
    sweep decides it (:func:`sweep_precision`), so that the runs are named and trained alike: for tasks on a GPU
    (``device`` cuda, or auto with ``gpus``) auto means bf16 (``$JOMA_PRECISION`` overrides it), which a node
    whose GPU lacks bf16 trains in fp32; for CPU tasks it is measured here, so the nodes are assumed to have this
    machine's CPUs. Each run records the precision it used (``precision_used``), as a local run does."""
    if device == "cuda" or (device == "auto" and gpus > 0):
        precision = check_choice(PRECISION_ENV, os.environ.get(PRECISION_ENV) or "bf16", PRECISIONS)
        return [replace(c, precision=precision) if c.precision == "auto" else c for c in configs]
    return sweep_precision(configs, torch.device("cpu"), threads)


def _run_on_slurm(args: argparse.Namespace, configs: Sequence[RunConfig]) -> None:
    """``run --engine slurm``: submit the runs that are not finished or queued; with ``--results``, wait for all of
    them and write the collected sweep. Runs are named after the corpus that loads here (a stand-in offline)."""
    check_int("threads", args.threads, 1, 1024)
    resources = SlurmResources(args.partition, args.gpus_per_run, args.time, args.threads).validated()
    require_slurm()
    corpora: dict[tuple[str, int], str] = {}
    for cfg in configs:
        if (cfg.data, cfg.data_seed) not in corpora:
            splits, note = load_splits(cfg.data, seed=cfg.data_seed)
            corpora[cfg.data, cfg.data_seed] = splits.name
            print(note)
    configs = [replace(c, data=corpora[c.data, c.data_seed]) for c in configs]
    out = Path(args.out).absolute()
    device = args.device or os.environ.get("JOMA_DEVICE", "auto")
    configs = _slurm_precision(configs, device, resources.gpus, args.threads)
    by_name = {c.name: c for c in configs}

    def finished(name: str) -> bool:
        return finished_result(out / name / "result.npz", by_name[name]) is not None

    if args.stack:  # one task per stack, named after its first run; each run's folder records the task
        units = {unit[0].name: unit for unit in stacks(configs, args.stack_size)}
        submit_missing(out, [(name, (unit, str(out), device, args.threads, args.compiled))
                             for name, unit in units.items()],
                       lambda name: all(finished(c.name) for c in units[name]), train_stack_on_node, resources,
                       f"joma-{out.name}", members=lambda name: [c.name for c in units[name]])
    else:
        submit_missing(out, [(c.name, (c, str(out), device, args.threads)) for c in configs], finished,
                       train_on_node, resources, f"joma-{out.name}")
    if args.results:
        wait_for(out, list(by_name), log=lambda _: None)
        runs = [finished_result(out / c.name / "result.npz", c) for c in configs]
        if any(r is None for r in runs):
            raise ValueError(f"{out} holds results of other settings for "
                             f"{', '.join(c.name for c, r in zip(configs, runs, strict=True) if r is None)}")
        write_results(Path(args.results), collect([r for r in runs if r is not None], configs),
                      _sweep_meta(configs, out))
        print(f"wrote {args.results}")
    else:
        print(f"follow them with `python -m joma_lib.lm status --out {args.out}`; when they are done, "
              f"`python -m joma_lib.lm collect {args.out} --results sweep.npz`")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return command(lambda: _run(args), interrupted="finished runs are kept and resume where they stopped")


def _check_paths(args: argparse.Namespace) -> None:
    """``--out`` and ``--results`` checked before any work: a file as ``--out``, a folder as ``--results``, or a
    missing folder to report on (``status``) would otherwise fail only after the training, or say nothing."""
    out = Path(args.out)
    if args.command == "status" and not out.is_dir():
        raise ValueError(f"--out must be an existing folder of runs, got {args.out!r}")
    if args.command != "status" and out.exists() and not out.is_dir():
        raise ValueError(f"--out must be a folder of runs, but {args.out} is a file")
    if getattr(args, "results", None):
        results = Path(args.results)
        if results.is_dir() or not results.name:
            raise ValueError(f"--results must name a file (.npz), but {args.results} is a folder")
        writable_dir(results.parent, "the folder of --results")


def _run(args: argparse.Namespace) -> int:
    _check_paths(args)
    if args.command == "run" and args.stack_size is not None and not args.stack:
        raise ValueError("--stack-size needs --stack")
    if args.command == "run" and args.compiled and not args.stack:
        raise ValueError("--compile needs --stack")
    if args.command == "run" and args.engine == "slurm":
        for flag, value in (("--stop-after", args.stop_after), ("--finish-within", args.finish_within),
                            ("--compile-seconds", args.compile_seconds)):
            if value is not None:
                raise ValueError(f"{flag} is for --engine local (a Slurm task stops at its --time and resumes)")
        _run_on_slurm(args, configs_from_args(args))
    elif args.command == "status":
        print(format_states(*run_states(args.out)))
    elif args.command == "run":
        configs = configs_from_args(args)
        if args.stop_after is not None and not args.stack:
            raise ValueError("--stop-after needs --stack")
        if args.finish_within is not None:
            if not args.stack or args.jobs != 1:
                raise ValueError(f"--finish-within needs --stack and --jobs 1, got --jobs {args.jobs}"
                                 f"{'' if args.stack else ' without --stack'}")
            check_float("--finish-within", args.finish_within, 0, low_open=True)
        if args.compile_seconds is not None:
            check_float("--compile-seconds", args.compile_seconds, 0)
        resolve_device(args.device)
        try:
            data, configs = run_sweep(configs, args.out, args.device or os.environ.get("JOMA_DEVICE", "auto"),
                                      not args.no_progress, jobs=args.jobs, threads=args.threads, stack=args.stack,
                                      stop_after=args.stop_after, stack_size=args.stack_size,
                                      compiled=args.compiled, finish_within=args.finish_within,
                                      compile_seconds=args.compile_seconds or 0.0)
        except DeadlineReached as err:
            print(f"stopped: {err}; finished runs are kept; run the same command again to continue", file=sys.stderr)
            return 75
        if args.results:
            write_results(Path(args.results), data, _sweep_meta(configs, args.out))
            print(f"wrote {args.results}")
    else:
        data, configs = load_sweep(args.out)
        write_results(Path(args.results), data, _sweep_meta(configs, args.out))
        print(f"wrote {args.results} ({len(configs)} runs)")
    return 0
