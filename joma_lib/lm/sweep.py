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
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from joma_lib.device import pinned_threads, resolve_device
from joma_lib.lm.config import DEFAULT_THREADS, RunConfig
from joma_lib.lm.data import LMData, load_lm_data
from joma_lib.lm.runs import collect
from joma_lib.lm.step import run_precision, train_run
from joma_lib.validation import check_int


def sweep_precision(configs: Sequence[RunConfig], device: torch.device, threads: int = DEFAULT_THREADS
                    ) -> list[RunConfig]:
    """``configs`` with ``precision="auto"`` replaced by one concrete precision for the whole sweep: the one
    :func:`run_precision` picks for its deepest such run (so that a sweep never mixes precisions)."""
    auto = [c for c in configs if c.precision == "auto"]
    if not auto:
        return list(configs)
    precision = run_precision(max(auto, key=lambda c: c.n_layers), device, threads)
    return [replace(c, precision=precision) if c.precision == "auto" else c for c in configs]


def _run_one(cfg: RunConfig, out_dir: str | Path, device: str, progress: bool, data: LMData, threads: int
             ) -> tuple[RunConfig, dict[str, np.ndarray]]:
    """Train one run on ``data``, named after the corpus actually loaded (a stand-in if WikiText fell back)."""
    cfg = replace(cfg, data=data.name)
    result = train_run(cfg, out_dir, device, progress, data=data, threads=threads)
    assert result is not None
    return cfg, result


def train_on_node(cfg: RunConfig, out_dir: str, device: str, threads: int) -> str:
    """One run as a task of the Slurm engine (:mod:`joma_lib.lm.cluster`); returns the run's name.

    The corpus is loaded exactly as named, without the offline fallback (the submitter already chose it, and the
    run folder is named after it); the task's log says where the run starts; :func:`train_run` resumes from the
    run's checkpoint, so a requeued task continues where the last one checkpointed.
    """
    ckpt_path = Path(out_dir) / cfg.name / "checkpoint.pt"
    start = torch.load(ckpt_path, map_location="cpu", weights_only=True, mmap=True)["step"] if ckpt_path.exists() \
        else 0
    print(f"{cfg.name}: {'resuming at step ' + str(start) if start else 'starting'} on {socket.gethostname()}, "
          f"device {device}, {threads} thread(s)", flush=True)
    data = load_lm_data(cfg.data, cfg.batch_size, cfg.eval_batch_size, cfg.max_vocab, cfg.data_seed, fallback=False)
    train_run(cfg, out_dir, device, progress=False, data=data, threads=threads)
    print(f"{cfg.name}: finished", flush=True)
    return cfg.name


def _data_key(cfg: RunConfig) -> tuple[Any, ...]:
    return (cfg.data, cfg.batch_size, cfg.eval_batch_size, cfg.max_vocab, cfg.data_seed)


def _worker(cfg: RunConfig, out_dir: str, device: str, threads: int
            ) -> tuple[RunConfig, dict[str, np.ndarray], str, float]:
    """One run in a worker process (``run_sweep(..., jobs > 1)``)."""
    start = time.perf_counter()
    data = load_lm_data(*_data_key(cfg))
    cfg, result = _run_one(cfg, out_dir, device, False, data, threads)
    return cfg, result, data.note, time.perf_counter() - start


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
              log: Callable[[str], None] = print, jobs: int = 1, threads: int = DEFAULT_THREADS
              ) -> tuple[dict[str, np.ndarray], list[RunConfig]]:
    """Train (or resume, or load) every run; return :func:`collect` of them and the configs as run.

    ``jobs > 1`` trains that many runs at once in worker processes (no progress bars) that die
    with this process; otherwise runs go one after the other and each corpus is loaded once.
    Every run uses ``threads`` CPU threads either way, so the results do not depend on ``jobs``.
    ``precision="auto"`` is decided once for the sweep (:func:`sweep_precision`).
    A corpus that falls back to its offline stand-in (:func:`~joma_lib.lm.data.load_splits`)
    names and records the runs with the stand-in's name.
    """
    jobs = check_int("jobs", jobs, 1)
    threads = check_int("threads", threads, 1, 1024)
    configs = sweep_precision(configs, resolve_device(device), threads)
    done: list[tuple[RunConfig, dict[str, np.ndarray]]] = []
    if jobs > 1:
        with worker_pool(jobs) as pool:
            futures = [pool.submit(_worker, cfg, str(out_dir), device, threads) for cfg in configs]
            for future in futures:
                cfg, result, note, seconds = future.result()
                log(f"{cfg.name}: done in {seconds:.0f} s ({note})")
                done.append((cfg, result))
    else:
        loaded: dict[tuple[Any, ...], LMData] = {}
        for cfg in configs:
            key = _data_key(cfg)
            if key not in loaded:
                loaded[key] = load_lm_data(*key)
                log(loaded[key].note)
            start = time.perf_counter()
            done.append(_run_one(cfg, out_dir, device, progress, loaded[key], threads))
            log(f"{done[-1][0].name}: done in {time.perf_counter() - start:.0f} s")
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
