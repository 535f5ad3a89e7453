"""The engines that train many runs: here, one after the other or in a pool of worker processes
(:func:`run_sweep`), and one run as a task of the Slurm engine (:func:`train_on_node`; the engine itself is
:mod:`joma_lib.lm.cluster`).

Every run trains with the same fixed number of CPU threads, so the results do not depend on how many run at once.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from joma_lib.base.device import pinned_threads, resolve_device
from joma_lib.base.stack_time import PLAN_SHARE, DeadlineReached, remembered_cost
from joma_lib.lm.config import DEFAULT_THREADS, RunConfig
from joma_lib.lm.data import LMData, load_lm_data
from joma_lib.lm.runs import collect
from joma_lib.lm.stack import shares, stack_key, stack_precision, stacks, train_stack
from joma_lib.lm.stack_plan import StackCost, describe, measure_cost, plan, waiting
from joma_lib.lm.step import run_precision, train_run
from joma_lib.base.validation import check_float, check_int


def sweep_precision(configs: Sequence[RunConfig], device: torch.device, threads: int = DEFAULT_THREADS
                    ) -> list[RunConfig]:
    """``configs`` with ``precision="auto"`` replaced by one concrete precision for the whole sweep: the one
    :func:`run_precision` picks for its deepest such run (so that a sweep never mixes precisions)."""
    auto = [c for c in configs if c.precision == "auto"]
    if not auto:
        return list(configs)
    precision = run_precision(max(auto, key=lambda c: c.n_layers), device, threads)
    return [replace(c, precision=precision) if c.precision == "auto" else c for c in configs]


def _run_unit(unit: Sequence[RunConfig], out_dir: str | Path, device: str, progress: bool, data: LMData,
              threads: int, deadline: float | None, compiled: bool = False, stacked: bool = False
              ) -> list[tuple[RunConfig, dict[str, np.ndarray]]]:
    """Train one run, or one stack of runs (``len(unit) > 1``, a ``deadline``, ``compiled`` or ``stacked``:
    :func:`train_stack`), on ``data``, named after the corpus actually loaded (a stand-in if WikiText fell back). A
    stack that reaches its ``deadline`` (``time.time()``) raises :class:`DeadlineReached` once its runs are
    checkpointed."""
    unit = [replace(cfg, data=data.name) for cfg in unit]
    if deadline is None and len(unit) == 1 and not (compiled or stacked):
        result = train_run(unit[0], out_dir, device, progress, data=data, threads=threads)
        assert result is not None
        return [(unit[0], result)]
    remaining = None if deadline is None else max(deadline - time.time(), 1e-9)
    results = train_stack(unit, out_dir, device, progress, data=data, threads=threads, stop_after=remaining,
                          compiled=compiled)
    if results is None:
        raise DeadlineReached(f"stopped at the deadline in the stack of {', '.join(c.name for c in unit)}; its runs "
                              "are checkpointed")
    return list(zip(unit, results, strict=True))


def _train_fitted(runs: Sequence[RunConfig], out_dir: str | Path, device: str, progress: bool,
                  data_of: Callable[[RunConfig], LMData], threads: int, deadline: float | None, compiled: bool,
                  finish_by: float, stack_size: int | None, log: Callable[[str], None], compile_seconds: float = 0.0
                  ) -> Iterator[tuple[list[RunConfig], list[tuple[RunConfig, dict[str, np.ndarray]]]]]:
    """Stacks of the waiting ``runs`` planned to finish by ``finish_by`` (``time.time()``;
    :mod:`joma_lib.lm.stack_plan`), each planned with ``compile_seconds`` more for its start, trained one after the
    other, the plan made again before each; yields each stack and its runs' results. Raises
    :class:`DeadlineReached` when runs are left and no stack of them fits."""
    dev = resolve_device(device)
    costs: dict[tuple[tuple[str, Any], ...], StackCost] = {}
    pending = list(runs)
    while pending:
        groups = stacks(pending)
        for group in groups:
            if stack_key(group[0]) not in costs:
                data = data_of(group[0])
                measured = [replace(c, data=data.name) for c in group[:stack_size]]
                cost, now = remembered_cost(Path(out_dir), {"lm": dict(stack_key(measured[0]))}, len(measured), dev,
                                            StackCost, lambda: measure_cost(measured, data, dev))
                costs[stack_key(group[0])] = cost = replace(cost, start=compile_seconds)
                when = "timed" if now else "timed earlier"
                log(f"{when} on {dev.type}, {cost.layers} layer(s): a step {1e3 * cost.step[0]:.2f} ms for one run, "
                    f"{1e3 * cost.step[1]:.2f} ms for {cost.runs}; an evaluation {cost.evaluation[0]:.2f} s and "
                    f"{cost.evaluation[1]:.2f} s"
                    + (f"; {compile_seconds:.0f} s to compile a stack" if compiled else ""))
        shape_costs = [costs[stack_key(group[0])] for group in groups]
        left = max(finish_by - time.time(), 0.0)
        sizes = plan(shape_costs, [min(len(g), c.runs) for g, c in zip(groups, shape_costs, strict=True)], left)
        if not any(sizes):
            need = min(c.seconds(1) for c in shape_costs)
            raise DeadlineReached(f"{len(pending)} run(s) not started: the smallest stack of them needs about "
                                  f"{need:.0f} s, {left:.0f} s are left (a plan fills {PLAN_SHARE:.0%} of them)")
        i = min((i for i, r in enumerate(sizes) if r), key=lambda i: shape_costs[i].seconds(sizes[i]))
        unit = groups[i][:sizes[i]]
        log(f"planned with {left:.0f} s left: a stack of {describe(shape_costs[i], sizes[i])}")
        start = time.perf_counter()
        # a stack even of one run: the step that was timed
        trained = _run_unit(unit, out_dir, device, progress, data_of(unit[0]), threads, deadline, compiled, True)
        log(f"{', '.join(cfg.name for cfg, _ in trained)}: done in {time.perf_counter() - start:.0f} s (planned "
            f"{shape_costs[i].seconds(sizes[i]):.0f} s)")
        yield unit, trained
        pending = [c for c in pending if c not in unit]


REQUEUE_LOCK_WAIT = 120.0
"""Seconds a Slurm task waits for its runs' locks: submitit requeues a task from its signal handler, and the task it
replaces may still be exiting, lock in hand, when the new one starts on the same node."""


def train_on_node(cfg: RunConfig, out_dir: str, device: str, threads: int) -> str:
    """One run as a task of the Slurm engine (:mod:`joma_lib.lm.cluster`); returns the run's name.

    The corpus is loaded exactly as named, without the offline fallback (the submitter already chose it, and the
    run folder is named after it); the task's log says where the run starts; :func:`train_run` resumes from the
    run's checkpoint, so a requeued task continues where the last one checkpointed (once that one has let go of the
    run: :data:`REQUEUE_LOCK_WAIT`).
    """
    ckpt_path = Path(out_dir) / cfg.name / "checkpoint.pt"
    start = torch.load(ckpt_path, map_location="cpu", weights_only=True, mmap=True)["step"] if ckpt_path.exists() \
        else 0
    print(f"{cfg.name}: {'resuming at step ' + str(start) if start else 'starting'} on {socket.gethostname()}, "
          f"device {device}, {threads} thread(s)", flush=True)
    data = load_lm_data(cfg.data, cfg.batch_size, cfg.eval_batch_size, cfg.max_vocab, cfg.data_seed, fallback=False)
    train_run(cfg, out_dir, device, progress=False, data=data, threads=threads, lock_wait=REQUEUE_LOCK_WAIT)
    print(f"{cfg.name}: finished", flush=True)
    return cfg.name


def train_stack_on_node(cfgs: Sequence[RunConfig], out_dir: str, device: str, threads: int, compiled: bool = False
                        ) -> str:
    """One stack of runs as a task of the Slurm engine (``run --engine slurm --stack``), as :func:`train_on_node`
    trains one run; returns the name of its first run."""
    print(f"stack of {', '.join(c.name for c in cfgs)}: starting on {socket.gethostname()}, device {device}, "
          f"{threads} thread(s)", flush=True)
    first = cfgs[0]
    data = load_lm_data(first.data, first.batch_size, first.eval_batch_size, first.max_vocab, first.data_seed,
                        fallback=False)
    train_stack(cfgs, out_dir, device, progress=False, data=data, threads=threads, compiled=compiled,
                lock_wait=REQUEUE_LOCK_WAIT)
    print(f"stack of {len(cfgs)} runs: finished", flush=True)
    return first.name


def _data_key(cfg: RunConfig) -> tuple[Any, ...]:
    return (cfg.data, cfg.batch_size, cfg.eval_batch_size, cfg.max_vocab, cfg.data_seed)


def _worker(unit: Sequence[RunConfig], out_dir: str, device: str, threads: int, deadline: float | None,
            compiled: bool) -> tuple[list[tuple[RunConfig, dict[str, np.ndarray]]], str, float]:
    """One run or stack in a worker process (``run_sweep(..., jobs > 1)``)."""
    start = time.perf_counter()
    data = load_lm_data(*_data_key(unit[0]))
    trained = _run_unit(unit, out_dir, device, False, data, threads, deadline, compiled)
    return trained, data.note, time.perf_counter() - start


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when the process that started it dies, even by SIGKILL.

    Linux: the kernel sends SIGKILL on the parent's death (``prctl(PR_SET_PDEATHSIG)``). Elsewhere a daemon thread
    polls the parent pid every second. Either way no orphaned worker keeps training a run that a restart would
    train again.
    """
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    else:
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def worker_pool(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` spawned worker processes that die with this process (:func:`_die_with_parent`)."""
    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_die_with_parent,
                               initargs=(os.getpid(),))


def run_sweep(configs: Sequence[RunConfig], out_dir: str | Path, device: str = "auto", progress: bool = True,
              log: Callable[[str], None] = print, jobs: int = 1, threads: int = DEFAULT_THREADS,
              stack: bool = False, stop_after: float | None = None, stack_size: int | None = None,
              compiled: bool = False, finish_within: float | None = None, compile_seconds: float = 0.0
              ) -> tuple[dict[str, np.ndarray], list[RunConfig]]:
    """Train (or resume, or load) every run; return :func:`collect` of them and the configs as run.

    ``stack=True`` trains the runs that share their shapes as one stacked model each
    (:func:`~joma_lib.lm.stack.stacks`, at most ``stack_size`` runs to a stack, :func:`~joma_lib.lm.stack.train_stack`);
    ``stop_after`` (seconds, with ``stack`` only) checkpoints every unfinished stack when that time has passed and
    raises :class:`DeadlineReached`: the same call later continues (one stack at a time, the cheapest first);
    ``compiled`` (with ``stack`` only) trains each stack with its loss through ``torch.compile``. ``finish_within``
    (seconds, with ``stack``, one job) trains the runs already started (finished ones are loaded) and then starts only
    stacks of the waiting runs that are expected to finish within that time, each as large as fits
    (:mod:`joma_lib.lm.stack_plan`; at most ``stack_size`` runs); the runs left waiting raise :class:`DeadlineReached`;
    with ``compiled``, each such stack is planned with ``compile_seconds`` more, the time its step takes to compile (the
    planner times the step as written). ``jobs > 1`` trains that many runs (or stacks, cut into
    :func:`~joma_lib.lm.stack.shares` that finish together) at once in worker processes (no progress bars) that die with
    this process; otherwise they go one after the other and each corpus is loaded once. Every run uses ``threads`` CPU
    threads either way, so the results do not depend on ``jobs``. ``precision="auto"`` is decided once for the sweep
    (:func:`sweep_precision`). A corpus that falls back to its offline stand-in (:func:`~joma_lib.lm.data.load_splits`)
    names and records the runs with the stand-in's name.
    """
    jobs = check_int("jobs", jobs, 1)
    threads = check_int("threads", threads, 1, 1024)
    if stop_after is not None:
        if not stack:
            raise ValueError("stop_after needs stack=True (--stop-after needs --stack)")
        check_float("stop_after", stop_after, 0, low_open=True)
    if compiled and not stack:
        raise ValueError("compiled needs stack=True (--compile needs --stack)")
    check_float("compile_seconds", compile_seconds, 0)
    if compile_seconds and not (compiled and finish_within is not None):
        raise ValueError("compile_seconds needs compiled and finish_within (--compile-seconds needs --compile and "
                         "--finish-within)")
    if stack_size is not None:
        if not stack:
            raise ValueError("stack_size needs stack=True (--stack-size needs --stack)")
        check_int("stack_size", stack_size, 1)
    if finish_within is not None:
        if not stack or jobs != 1:
            raise ValueError("finish_within needs stack=True and jobs=1 (--finish-within needs --stack, one job)")
        check_float("finish_within", finish_within, 0, low_open=True)
    deadline = None if stop_after is None else time.time() + stop_after
    finish_by = None if finish_within is None else time.time() + finish_within
    if stack:
        configs = stack_precision(configs, resolve_device(device), threads, stack_size)
    else:
        configs = sweep_precision(configs, resolve_device(device), threads)
    loaded: dict[tuple[Any, ...], LMData] = {}

    def data_of(cfg: RunConfig) -> LMData:  # each corpus loaded once
        key = _data_key(cfg)
        if key not in loaded:
            loaded[key] = load_lm_data(*key)
            log(loaded[key].note)
        return loaded[key]

    waiting_runs: list[RunConfig] = []
    if finish_by is not None:  # the runs not yet started (under the name of the corpus actually loaded)
        pairs = [(replace(cfg, data=data_of(cfg).name), cfg) for cfg in configs]
        still = {cfg.name for cfg in waiting([named for named, _ in pairs], out_dir)}
        waiting_runs = [cfg for named, cfg in pairs if named.name in still]
    started = [cfg for cfg in configs if cfg not in waiting_runs]
    units = shares(stacks(started, stack_size), jobs) if stack else [[cfg] for cfg in started]
    if deadline is not None and jobs == 1:
        # against a deadline, the cheapest stacks first (their runs' layers summed): the time finishes as many whole
        # stacks as it can (on a lent GPU, a stack cut at the deadline is lost with the machine)
        units.sort(key=lambda unit: sum(c.n_layers for c in unit))
    done: list[tuple[RunConfig, dict[str, np.ndarray]]] = []
    if jobs > 1:
        with worker_pool(jobs) as pool:
            futures = [pool.submit(_worker, unit, str(out_dir), device, threads, deadline, compiled) for unit in units]
            for future in futures:
                trained, note, seconds = future.result()
                log(f"{', '.join(cfg.name for cfg, _ in trained)}: done in {seconds:.0f} s ({note})")
                done += trained
    else:
        for unit in units:
            start = time.perf_counter()
            trained = _run_unit(unit, out_dir, device, progress, data_of(unit[0]), threads, deadline, compiled)
            log(f"{', '.join(cfg.name for cfg, _ in trained)}: done in {time.perf_counter() - start:.0f} s")
            done += trained
    if finish_by is not None:
        for unit, trained in _train_fitted(waiting_runs, out_dir, device, progress, data_of, threads, deadline,
                                           compiled, finish_by, stack_size, log, compile_seconds):
            units.append(unit)
            done += trained
    trained_order = [cfg for unit in units for cfg in unit]  # the order of ``done``
    done = [done[i] for i in sorted(range(len(done)), key=lambda i: configs.index(trained_order[i]))]
    configs_run = [cfg for cfg, _ in done]
    return collect([result for _, result in done], configs_run), configs_run


def train_on_cpu(configs: Sequence[RunConfig]) -> dict[str, np.ndarray]:
    """Train ``configs`` in a scratch directory on one CPU thread with deterministic algorithms (repeatable)."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with pinned_threads(1), tempfile.TemporaryDirectory() as out:
            runs, _ = run_sweep(configs, out, device="cpu", progress=False, log=lambda _: None)
    finally:
        torch.use_deterministic_algorithms(deterministic)
    return runs
