"""A run's folder: its lock, checkpoint and result, and the collected results of the finished runs of a sweep.

A run trains into ``<out>/<RunConfig.name>/``: ``.lock`` (held while it trains, :func:`run_lock`),
``checkpoint.pt`` (its last checkpoint, :func:`load_checkpoint`), and once finished ``result.npz`` and
``result.json`` (:func:`write_results`; the json last, it marks the run complete, :func:`finished_result`).
:func:`collect` stacks runs into the sweep arrays the Fig. 6/8 plots take; :func:`load_sweep` does so for a folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from joma_lib.io import atomic_path, write_npz
from joma_lib.lm.config import RunConfig, same_config


def write_results(path: Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
    """Write ``path`` (npz) and ``path.with_suffix('.json')`` atomically, the json last.

    The json is the completion mark: a run whose ``result.npz`` has no json beside it was stopped while finishing,
    and :func:`~joma_lib.lm.step.train_run` completes it again from its checkpoint.
    """
    path = Path(path)
    write_npz(path, dict(arrays))
    with atomic_path(path.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


class RunLockedError(RuntimeError):
    """Another process is training the same run directory."""


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir`` (``fcntl.flock`` on ``run_dir/.lock``, freed when the process dies)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / ".lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            owner = fh.read().strip() or "unknown"
            raise RunLockedError(f"{run_dir} is being trained by another process (pid {owner}); wait for it to "
                                 "finish or stop it, then run the same command again") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def save_checkpoint(ckpt_path: Path, state: Mapping[str, Any]) -> None:
    """Write ``checkpoint.pt`` atomically (a kill while writing leaves the previous checkpoint in place)."""
    with atomic_path(ckpt_path) as tmp:
        torch.save(dict(state), tmp)


def load_checkpoint(ckpt_path: Path, dev: torch.device) -> dict[str, Any]:
    """Read ``checkpoint.pt``; a damaged file raises a ValueError that says how to recover."""
    try:
        ckpt = torch.load(ckpt_path, map_location=dev, weights_only=True)
        if not isinstance(ckpt, dict) or not {"config", "model", "optimizer", "rng", "history", "step"} <= set(ckpt):
            raise ValueError("not a checkpoint of this runner")
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError, ... on a damaged file
        raise ValueError(f"{ckpt_path} is damaged ({type(err).__name__}: {' '.join(str(err).split())[:200]}); "
                         f"delete it to train the run again from step 0") from None
    return ckpt


def finished_result(result_path: Path, cfg: RunConfig) -> dict[str, np.ndarray] | None:
    """The arrays of a completed run with config ``cfg``; None if there is none (or it was not completed)."""
    try:
        meta = json.loads(result_path.with_suffix(".json").read_text())
        if not same_config(meta["config"], cfg):
            return None
        with np.load(result_path) as npz:
            return {k: npz[k] for k in npz.files}
    except (OSError, ValueError, KeyError):  # no json (stopped while finishing) or an unreadable result
        return None


#: the arrays of a run's result that :func:`collect` stacks
RUN_KEYS = frozenset({"minibatch", "val_loss", "train_loss", "attn_entropy", "stable_rank"})


def collect(runs: Sequence[Mapping[str, np.ndarray]], configs: Sequence[RunConfig]) -> dict[str, np.ndarray]:
    """Stack runs into the sweep structure the Fig. 6/8 plots take.

    ``minibatch``/``val_loss``/``train_loss`` ``[R, C]``, ``attn_entropy``/``stable_rank``
    ``[R, C, Lmax]`` (NaN beyond a run's depth or length), ``nlayers``, ``lr``, ``seed`` ``[R]``.
    """
    for name, value in (("runs", runs), ("configs", configs)):
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
            raise TypeError(f"{name} must be a list, got {type(value).__name__}")
    if len(runs) != len(configs) or not runs:
        raise ValueError(f"runs and configs must be non-empty and of equal length (one result per config), got "
                         f"{len(runs)} runs and {len(configs)} configs")
    for i, (run, cfg) in enumerate(zip(runs, configs, strict=True)):
        if not isinstance(cfg, RunConfig):
            raise TypeError(f"configs[{i}] must be a RunConfig, got {type(cfg).__name__}")
        missing = RUN_KEYS - set(run) if isinstance(run, Mapping) else RUN_KEYS
        if missing:
            raise ValueError(f"runs[{i}] must be a run's result with the arrays {sorted(RUN_KEYS)}, got "
                             f"{sorted(run) if isinstance(run, Mapping) else type(run).__name__} "
                             f"(missing {sorted(missing)})")
    n_ckpt = max(len(r["minibatch"]) for r in runs)
    n_layers = max(c.n_layers for c in configs)
    out = {"minibatch": np.full((len(runs), n_ckpt), -1, dtype=np.int64)}
    for key in ("val_loss", "train_loss"):
        out[key] = np.full((len(runs), n_ckpt), np.nan)
    for key in ("attn_entropy", "stable_rank"):
        out[key] = np.full((len(runs), n_ckpt, n_layers), np.nan)
    for i, (run, cfg) in enumerate(zip(runs, configs, strict=True)):
        c = len(run["minibatch"])
        out["minibatch"][i, :c] = run["minibatch"]
        for key in ("val_loss", "train_loss"):
            out[key][i, :c] = run[key]
        for key in ("attn_entropy", "stable_rank"):
            out[key][i, :c, : cfg.n_layers] = run[key]
    out["nlayers"] = np.asarray([c.n_layers for c in configs], dtype=np.int64)
    out["lr"] = np.asarray([c.lr for c in configs], dtype=np.float64)
    out["seed"] = np.asarray([c.seed for c in configs], dtype=np.int64)
    return out


def load_sweep(out_dir: str | Path) -> tuple[dict[str, np.ndarray], list[RunConfig]]:
    """Collect every finished run under ``out_dir`` (sorted by layers, lr, seed)."""
    found = []
    for path in sorted(Path(out_dir).glob("*/result.npz")):
        if not path.with_suffix(".json").exists():
            raise ValueError(f"{path.parent} was stopped while finishing (result.npz without result.json); run its "
                             "`python -m joma_lib.lm run` command again to complete it from its checkpoint")
        cfg = RunConfig(**json.loads(path.with_suffix(".json").read_text())["config"])
        with np.load(path) as npz:
            found.append((cfg, {k: npz[k] for k in npz.files}))
    if not found:
        raise ValueError(f"no finished runs (*/result.npz) under {out_dir}")
    found.sort(key=lambda item: (item[0].n_layers, item[0].lr, item[0].seed))
    configs = [c for c, _ in found]
    return collect([r for _, r in found], configs), configs
