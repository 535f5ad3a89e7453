"""A run's folder: its lock, checkpoint and result, and the collected results of the finished runs of a sweep.

A run trains into ``<out>/<RunConfig.name>/``: ``.lock`` (held while it trains, :func:`run_lock`),
``checkpoint.pt`` (its last checkpoint, :func:`load_checkpoint`), and once finished ``result.npz`` and
``result.json`` (:func:`write_results`; the json last, it marks the run complete, :func:`finished_result`).
Each of these files has its sha256 beside it (``checkpoint.pt.sha256``, ...: :func:`joma_lib.base.io.write_checked`),
checked whenever it is read: a file damaged on disk is refused, never resumed or collected.
:func:`collect` stacks runs into the sweep arrays the Fig. 6/8 plots take; :func:`load_sweep` does so for a folder.
"""

from __future__ import annotations

import contextlib
import io
import errno
import fcntl
import json
import os
import stat
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from joma_lib.base.io import (
    DamagedFileError,
    checksum_path,
    load_torch_checked,
    read_checked,
    remove_stale_temps,
    save_torch_checked,
    write_checked,
    write_npz,
)
from joma_lib.lm.config import RunConfig, same_config


def write_results(path: Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
    """Write ``path`` (npz) and ``path.with_suffix('.json')`` atomically and checksummed, the json last.

    The json is the completion mark: a run whose ``result.npz`` has no json beside it was stopped while finishing,
    and :func:`~joma_lib.lm.step.train_run` completes it again from its checkpoint. A folder in the place of
    ``path`` is refused before anything is written.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"the results must go to a file (.npz), but {path} is a folder")
    write_npz(path, dict(arrays), checked=True)
    write_checked(path.with_suffix(".json"), (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())


def read_result(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The json and the arrays of a result written by :func:`write_results`, both checked against their sha256
    (:class:`~joma_lib.base.io.DamagedFileError` naming the file when one does not match)."""
    path = Path(path)
    meta = json.loads(read_checked(path.with_suffix(".json")))
    with np.load(io.BytesIO(read_checked(path)), allow_pickle=False) as npz:
        return meta, {k: npz[k] for k in npz.files}


class RunLockedError(RuntimeError):
    """Another process is training the same run directory."""


LOCK_POLL_SECONDS = 0.2
"""How often :func:`run_lock` tries again while it waits for another process to let go of a run."""


@contextlib.contextmanager
def run_lock(run_dir: Path, wait: float = 0.0) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir`` (``fcntl.flock`` on ``run_dir/.lock``, freed when the process dies).

    While another process holds it, :class:`RunLockedError` at once, or after ``wait`` seconds of trying again (a
    requeued Slurm task may start while the task it replaces is still exiting, lock in hand).

    The lock is opened without following a symbolic link (one planted in a shared folder would have its target
    overwritten with the pid): a lock that is a link, or not a plain file, is refused. Once it holds the lock, the
    runner removes the temporary files a killed runner left in ``run_dir`` (no other process writes there).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = run_dir / ".lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise ValueError(f"{lock} is a symbolic link; a run's lock must be a plain file: remove the link and run the "
                         "same command again") from None
    with os.fdopen(fd, "r+") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{lock} is not a plain file; remove it and run the same command again")
        give_up = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= give_up:
                    fh.seek(0)
                    owner = fh.read().strip() or "unknown"
                    raise RunLockedError(f"{run_dir} is being trained by another process (pid {owner}); wait for it "
                                         "to finish or stop it, then run the same command again") from None
                time.sleep(LOCK_POLL_SECONDS)
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        remove_stale_temps(run_dir)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def save_checkpoint(ckpt_path: Path, state: Mapping[str, Any]) -> None:
    """Write ``checkpoint.pt`` atomically, with its sha256 (a kill while writing leaves the previous checkpoint in
    place; a full disk is an ``OSError`` naming the file, the previous checkpoint intact)."""
    save_torch_checked(ckpt_path, dict(state))


def load_checkpoint(ckpt_path: Path) -> dict[str, Any]:
    """Read ``checkpoint.pt`` into host memory; a damaged file (its sha256, or its contents) raises a ValueError that
    names it and says how to recover.

    Always onto the CPU, whatever device trains: the random-number states in it must stay CPU byte tensors
    (``torch.set_rng_state`` and ``Generator.set_state`` refuse any other), and ``load_state_dict`` and ``copy_``
    move the weights and Adam's moments to the training device anyway."""
    try:
        ckpt = load_torch_checked(ckpt_path, map_location="cpu")
        if not isinstance(ckpt, dict) or not {"config", "model", "optimizer", "rng", "history", "step"} <= set(ckpt):
            raise ValueError("not a checkpoint of this runner")
    except DamagedFileError as err:
        raise ValueError(f"{err}; delete it and {checksum_path(ckpt_path).name} to train the run again from step 0"
                         ) from None
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError, ... on a damaged file
        raise ValueError(f"{ckpt_path} is damaged ({type(err).__name__}: {' '.join(str(err).split())[:200]}); "
                         f"delete it and {checksum_path(ckpt_path).name} to train the run again from step 0"
                         ) from None
    return ckpt


def finished_result(result_path: Path, cfg: RunConfig) -> dict[str, np.ndarray] | None:
    """The arrays of a completed run with config ``cfg``; None if there is none (or it was not completed).

    A result damaged on disk (its sha256) is None too, with one line on stderr naming it: the run is then
    completed again from its (checked) checkpoint, which rewrites it.
    """
    if not result_path.with_suffix(".json").exists():
        return None  # not finished, or stopped while finishing
    try:
        meta, arrays = read_result(result_path)
    except DamagedFileError as err:
        print(f"{err}; the run is completed again from its checkpoint", file=sys.stderr)
        return None
    except (OSError, ValueError, KeyError):  # an unreadable result
        return None
    return arrays if same_config(meta.get("config", {}), cfg) else None


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
        n = len(np.atleast_1d(run["minibatch"]))
        shapes = {key: np.shape(run[key]) for key in sorted(RUN_KEYS)}
        expected = {"minibatch": (n,), "val_loss": (n,), "train_loss": (n,), "attn_entropy": (n, cfg.n_layers),
                    "stable_rank": (n, cfg.n_layers)}
        if shapes != expected:
            raise ValueError(f"runs[{i}] must hold one row per checkpoint and one column per layer of configs[{i}] "
                             f"(n_layers={cfg.n_layers}): shapes {expected}, got {shapes}")
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
        try:
            meta, arrays = read_result(path)
        except DamagedFileError as err:
            raise ValueError(f"{err}; run its `python -m joma_lib.lm run` command again: it completes the run again "
                             "from its checkpoint") from None
        found.append((RunConfig(**meta["config"]), arrays))
    if not found:
        raise ValueError(f"no finished runs (*/result.npz) under {out_dir}")
    found.sort(key=lambda item: (item[0].n_layers, item[0].lr, item[0].seed))
    configs = [c for c, _ in found]
    return collect([r for _, r in found], configs), configs
