"""Experiment runner for the language-model experiments (paper Sec. 6, Figs. 6 and 8).

One run = one (corpus, depth, lr, seed): Adam at constant lr, gradient clipping, token
chunks read in order, and every ``eval_interval`` steps a checkpoint with the validation
loss, the per-layer attention entropy and the stable rank of every ``W_1``. A run can be
stopped at any time: it resumes from its last checkpoint and reproduces the
uninterrupted run exactly (same data position, optimiser state and RNG state).

Command line::

    python -m joma_lib.lm.train run --preset rerun-full --jobs 2 --out runs/rerun-full \\
        --results joma_lib/lm/results/rerun-full.npz
    python -m joma_lib.lm.train run --preset paper --device cuda --out runs/paper   # the paper's sweep (GPU)
    python -m joma_lib.lm.train run --data ptb --layers 1 2 --lr 3e-4 --steps 2000 --out runs/x
    python -m joma_lib.lm.train collect runs/x --results x.npz
    python -m joma_lib.lm.train run --preset paper --engine slurm --gpus-per-run 1 --time 6:00:00 --out runs/paper
    python -m joma_lib.lm.train status --out runs/paper     # each run's state and step, from its folder and Slurm

Drawing the runs belongs to the figures layer: ``python -m joma_lib.chapters.rerun.figures runs/x --figure fig6 -o fig6.png``.

``--preset`` fills every setting; explicit options override it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from joma_lib.device import DEVICE_CHOICES, resolve_device
from joma_lib.io import atomic_path, write_npz
from joma_lib.lm.cluster import (
    ENGINES,
    SlurmResources,
    format_states,
    require_slurm,
    run_states,
    submit_missing,
    wait_for,
)
from joma_lib.lm.data import CORPORA, LMData, get_chunk, load_lm_data, load_splits, n_chunks
from joma_lib.lm.metrics import evaluate, stable_rank
from joma_lib.cpu import onednn_isa_limit
from joma_lib.lm.model import TransformerLM, precision_dtype
from joma_lib.lm.precision import (
    PRECISION_CHOICES,
    PRECISION_ENV,
    PRECISIONS,
    AutoChoice,
    cached_choice,
    record_used,
    resolve,
)
from joma_lib.validation import check_choice, check_float, check_int

if TYPE_CHECKING:
    from joma_lib.lm.pythia import NeoXLM

ADAM_RESET = ("epoch", "never")
#: WikiText-2's vocabulary (the paper's runs): the read-out size when a config sets no ``max_vocab``
WIKITEXT2_VOCAB = 33_278
#: ``paper``: the authors' post-LN model (:class:`TransformerLM`); ``gptneox``: Pythia's architecture
#: (:class:`~joma_lib.lm.pythia.NeoXLM`, Fig. 7)
ARCHS = ("paper", "gptneox")


@dataclass(frozen=True)
class RunConfig:
    """Settings of one training run; the defaults are the paper's (WikiText-2, lr 1e-4, 20 epochs).

    ``adam_reset="epoch"`` rebuilds Adam at every epoch, as the authors' script did (``"never"`` keeps
    one optimiser for the whole run); ``eval_chunks=None`` evaluates on the whole validation split;
    ``precision="bf16"`` trains in bf16 mixed precision (:func:`train_step`), the checkpoint measurements
    stay fp32; ``"auto"`` takes the faster of the two on this machine (:mod:`joma_lib.lm.precision`; the
    precision used is recorded in the checkpoint and the result, and a resume keeps it); ``log_checkpoints`` adds the powers of two below ``eval_interval`` to the checkpoints
    (Pythia's schedule when ``eval_interval=1000``); ``n_heads`` is used by ``arch="gptneox"`` only.
    """

    data: str = "wikitext2"
    n_layers: int = 1
    lr: float = 1e-4
    seed: int = 1
    steps: int = 58_000
    eval_interval: int = 1000
    eval_chunks: int | None = None
    seq_len: int = 35
    batch_size: int = 20
    eval_batch_size: int = 10
    max_vocab: int | None = None
    d: int = 200
    d_ff: int = 200
    dropout: float = 0.2
    clip: float = 0.5
    adam_reset: str = "epoch"
    data_seed: int = 0
    precision: str = "fp32"
    arch: str = "paper"
    n_heads: int = 1
    log_checkpoints: bool = False

    def validated(self) -> RunConfig:
        """Self, after checking every field (ValueError naming the field otherwise)."""
        check_choice("data", self.data, CORPORA)
        check_int("n_layers", self.n_layers, 1, 64)
        check_float("lr", self.lr, 0, 1, low_open=True)
        check_int("seed", self.seed, 0)
        check_int("steps", self.steps, 1)
        check_int("eval_interval", self.eval_interval, 1, self.steps)
        if self.eval_chunks is not None:
            check_int("eval_chunks", self.eval_chunks, 1)
        check_int("seq_len", self.seq_len, 1, 5000)
        check_int("batch_size", self.batch_size, 1)
        check_int("eval_batch_size", self.eval_batch_size, 1)
        if self.max_vocab is not None:
            check_int("max_vocab", self.max_vocab, 2)
        check_int("d", self.d, 1)
        check_int("d_ff", self.d_ff, 1)
        check_float("dropout", self.dropout, 0, 1, high_open=True)
        check_float("clip", self.clip, 0, low_open=True)
        check_choice("adam_reset", self.adam_reset, ADAM_RESET)
        check_int("data_seed", self.data_seed, 0)
        check_choice("precision", self.precision, PRECISION_CHOICES)
        check_choice("arch", self.arch, ARCHS)
        check_int("n_heads", self.n_heads, 1, self.d)
        if self.arch == "paper" and self.n_heads != 1:
            raise ValueError(f"n_heads must be 1 for arch='paper' (one head, as the paper), got {self.n_heads}")
        if self.arch == "gptneox" and self.d % self.n_heads:
            raise ValueError(f"d ({self.d}) must be a multiple of n_heads ({self.n_heads})")
        if not isinstance(self.log_checkpoints, bool):
            raise TypeError(f"log_checkpoints must be a bool, got {type(self.log_checkpoints).__name__}")
        return self

    @property
    def name(self) -> str:
        """Directory name of the run (prefixed by a non-default architecture, suffixed ``_noreset`` and by a
        non-default precision)."""
        arch = "" if self.arch == "paper" else f"{self.arch}_"
        reset = "" if self.adam_reset == "epoch" else "_noreset"
        precision = "" if self.precision == "fp32" else f"_{self.precision}"
        return f"{arch}{self.data}_L{self.n_layers}_lr{self.lr:g}_s{self.seed}{reset}{precision}"

    def checkpoints(self) -> np.ndarray:
        """Steps at which the metrics are recorded: 0, eval_interval, 2*eval_interval, ..., and ``steps``
        (and 1, 2, 4, ... below ``eval_interval`` with ``log_checkpoints``)."""
        marks = np.append(np.arange(0, self.steps + 1, self.eval_interval), self.steps)
        if self.log_checkpoints:
            marks = np.append(marks, [2**k for k in range(self.eval_interval.bit_length())
                                      if 2**k < min(self.eval_interval, self.steps)])
        return np.unique(marks)


PRESETS: dict[str, dict[str, Any]] = {
    # the paper's Fig. 6 sweep (WikiText-2, 20 epochs, lr 1e-4, 3 seeds); a GPU job
    "paper": dict(data="wikitext2", layers=[1, 2, 5, 10], lr=[1e-4], seeds=[1, 2, 3], steps=58_000,
                  eval_interval=1000),
    # the paper's Fig. 8 sweep (5 layers, seven learning rates)
    "paper-lr": dict(data="wikitext2", layers=[5], lr=[1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2], seeds=[1, 2, 3],
                     steps=58_000, eval_interval=1000),
    # the CPU reproduction of the companion (figure c-rerun-full), in the faster precision of the machine (the
    # committed results were trained in bf16); about 7 minutes on 2 cores with --jobs 2
    "rerun-full": dict(data="wikivital", layers=[1, 2], lr=[1e-3], seeds=[1, 2], steps=4000, eval_interval=100,
                       eval_chunks=20, max_vocab=4000, precision="auto"),
    # its shortened version, rerun by CI (figure c-rerun-quick, one reference per precision); under a minute. The
    # claim rerun-bf16-matches-fp32 (figure c-rerun-precision) checks that bf16 keeps its entropy curve in fp32's
    # seed band
    "rerun-quick": dict(data="wikivital", layers=[1, 2], lr=[1e-3], seeds=[1], steps=600, eval_interval=50,
                        eval_chunks=10, max_vocab=2000, precision="auto"),
    # Fig. 7 stand-in (figure c-fig7-standin): a small Pythia-architecture model on Wikipedia leads, measured on
    # Pythia's checkpoint schedule, at Pythia-70M's peak lr; one optimiser throughout, as Pythia
    "fig7-standin": dict(data="wikivital", arch="gptneox", layers=[4], d=64, n_heads=2, d_ff=256, dropout=0.0,
                         lr=[1e-3], seeds=[3, 4], steps=3000, eval_interval=1000, log_checkpoints=True,
                         eval_chunks=10, max_vocab=4000, adam_reset="never"),
    # its shortened version, rerun by CI (figure c-fig7-quick)
    "fig7-quick": dict(data="wikivital", arch="gptneox", layers=[2], d=64, n_heads=2, d_ff=256, dropout=0.0,
                       lr=[1e-3], seeds=[1], steps=2000, eval_interval=500, log_checkpoints=True,
                       eval_chunks=5, max_vocab=2000, adam_reset="never"),
}


def write_results(path: Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
    """Write ``path`` (npz) and ``path.with_suffix('.json')`` atomically, the json last.

    The json is the completion mark: a run whose ``result.npz`` has no json beside it was stopped while finishing,
    and :func:`train_run` completes it again from its checkpoint.
    """
    path = Path(path)
    write_npz(path, dict(arrays))
    with atomic_path(path.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def build_model(cfg: RunConfig, vocab_size: int) -> TransformerLM | NeoXLM:
    """The run's freshly initialised model (draws from torch's global RNG)."""
    if cfg.arch == "gptneox":
        from joma_lib.lm.pythia import NeoXLM

        return NeoXLM(vocab_size, cfg.n_layers, cfg.d, cfg.n_heads, cfg.d_ff, cfg.dropout, max_len=max(cfg.seq_len, 2))
    return TransformerLM(vocab_size, cfg.n_layers, cfg.d, cfg.d_ff, cfg.dropout)


def same_config(saved: Mapping[str, Any], cfg: RunConfig) -> bool:
    """Whether a stored config is ``cfg``; fields added to :class:`RunConfig` since it was stored count as
    their defaults (the behaviour the stored run had)."""
    return {**asdict(RunConfig()), **saved} == asdict(cfg)




class RunLockedError(RuntimeError):
    """Another process is training the same run directory."""


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C; the message says where it stopped and that the same command resumes it."""


#: CPU threads of every run unless told otherwise: results depend on the thread count, never on ``--jobs``.
DEFAULT_THREADS = 1


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


@contextlib.contextmanager
def pinned_threads(threads: int) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(threads)``, restoring the caller's count after."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _load_checkpoint(ckpt_path: Path, dev: torch.device) -> dict[str, Any]:
    """Read ``checkpoint.pt``; a damaged file raises a ValueError that says how to recover."""
    try:
        ckpt = torch.load(ckpt_path, map_location=dev, weights_only=True)
        if not isinstance(ckpt, dict) or not {"config", "model", "optimizer", "rng", "history", "step"} <= set(ckpt):
            raise ValueError("not a checkpoint of this runner")
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError, ... on a damaged file
        raise ValueError(f"{ckpt_path} is damaged ({type(err).__name__}: {' '.join(str(err).split())[:200]}); "
                         f"delete it to train the run again from step 0") from None
    return ckpt


def _finished_result(result_path: Path, cfg: RunConfig) -> dict[str, np.ndarray] | None:
    """The arrays of a completed run with config ``cfg``; None if there is none (or it was not completed)."""
    try:
        meta = json.loads(result_path.with_suffix(".json").read_text())
        if not same_config(meta["config"], cfg):
            return None
        with np.load(result_path) as npz:
            return {k: npz[k] for k in npz.files}
    except (OSError, ValueError, KeyError):  # no json (stopped while finishing) or an unreadable result
        return None


def make_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Adam:
    """Adam (default betas, no weight decay), fused where torch supports it on the model's device."""
    return torch.optim.Adam(model.parameters(), lr=lr, fused=True)


def train_step(model: TransformerLM | NeoXLM, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               clip: float, precision: str = "fp32") -> torch.Tensor:
    """One update: token-mean cross-entropy, backward, clip the gradient norm to ``clip``, Adam step.

    ``precision="bf16"``: the forward pass (and so the backward matrix products) runs under
    ``torch.autocast`` in bfloat16 on the model's device (CPU or CUDA), the read-out blockwise
    (:class:`~joma_lib.lm.model.LinearCrossEntropy`); weights, gradients and the optimiser state
    stay fp32 (master weights), and so does the returned loss. On the CPU both precisions draw the
    same dropout masks (:func:`~joma_lib.lm.model.bits_dropout`) from torch's seeded generator.
    """
    dtype = precision_dtype(precision)
    optimizer.zero_grad(set_to_none=True)
    device_type = x.device.type
    with torch.autocast(device_type, dtype=dtype, enabled=dtype != torch.float32):
        loss = model.loss(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=True)
    optimizer.step()
    return loss.detach()


def run_precision(cfg: RunConfig, device: torch.device, threads: int = DEFAULT_THREADS) -> str:
    """The precision ``cfg`` trains in on ``device`` (:func:`joma_lib.lm.precision.resolve`).

    ``auto`` is decided by timing :func:`train_step` on a throw-away model of the run's shapes (vocabulary
    ``max_vocab``, or WikiText-2's), without touching the global random state.
    """
    vocab = cfg.max_vocab or WIKITEXT2_VOCAB
    probe: dict[str, Any] = {}

    def step(precision: str) -> None:
        if not probe:
            probe["model"] = build_model(cfg, vocab).to(device).train()
            probe["optimizer"] = make_optimizer(probe["model"], cfg.lr)
            probe["tokens"] = torch.randint(0, vocab, (cfg.batch_size, cfg.seq_len + 1), device=device)
        x, y = probe["tokens"][:, :-1], probe["tokens"][:, 1:]
        train_step(probe["model"], probe["optimizer"], x, y, cfg.clip, precision)

    with torch.random.fork_rng(devices=[]):
        return resolve(cfg.precision, device, run_shapes(cfg, device), threads, step)


def run_shapes(cfg: RunConfig, device: torch.device) -> dict[str, Any]:
    """What decides the speed of a training step (the cache key of ``auto``'s measurement)."""
    return {"arch": cfg.arch, "n_layers": cfg.n_layers, "d": cfg.d, "d_ff": cfg.d_ff, "n_heads": cfg.n_heads,
            "vocab": cfg.max_vocab or WIKITEXT2_VOCAB, "batch_size": cfg.batch_size, "seq_len": cfg.seq_len,
            "dropout": cfg.dropout, "device": device.type}


def sweep_precision(configs: Sequence[RunConfig], device: torch.device, threads: int = DEFAULT_THREADS
                    ) -> list[RunConfig]:
    """``configs`` with ``precision="auto"`` replaced by one concrete precision for the whole sweep: the one
    :func:`run_precision` picks for its deepest such run (so that a sweep never mixes precisions)."""
    auto = [c for c in configs if c.precision == "auto"]
    if not auto:
        return list(configs)
    precision = run_precision(max(auto, key=lambda c: c.n_layers), device, threads)
    return [replace(c, precision=precision) if c.precision == "auto" else c for c in configs]


def _preset_configs(preset: str) -> list[RunConfig]:
    check_choice("preset", preset, tuple(PRESETS))
    settings = dict(PRESETS[preset])
    layers, lrs, seeds = settings.pop("layers"), settings.pop("lr"), settings.pop("seeds")
    return sweep_configs(RunConfig(**settings), layers, lrs, seeds)


def preset_precision(preset: str, device: str = "cpu") -> str:
    """The precision a preset's runs train in here, on one thread (as :func:`train_preset` trains them)."""
    return sweep_precision(_preset_configs(preset), resolve_device(device), threads=1)[0].precision


def preset_auto_choice(preset: str) -> AutoChoice | None:
    """``auto``'s measurement for a preset on this CPU (one thread; made now if not cached): the choice and both
    step times. None when nothing was measured (no ``auto`` in the preset, ``JOMA_PRECISION`` set, no bf16)."""
    configs = [c for c in _preset_configs(preset) if c.precision == "auto"]
    if not configs:
        return None
    preset_precision(preset)
    return cached_choice(run_shapes(max(configs, key=lambda c: c.n_layers), torch.device("cpu")), 1)


def _rng_state(device: torch.device) -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: Mapping[str, torch.Tensor], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def train_run(cfg: RunConfig, out_dir: str | Path, device: str = "auto", progress: bool = True,
              data: LMData | None = None, stop_at: int | None = None, threads: int = DEFAULT_THREADS
              ) -> dict[str, np.ndarray] | None:
    """Train one run into ``out_dir/<cfg.name>/``, resuming from its checkpoint if there is one.

    Returns the run's arrays (``minibatch [C]``, ``val_loss [C]``, ``attn_entropy [C, L]``,
    ``stable_rank [C, L]``, ``train_loss [C]``), also written to ``result.npz``/``.json``.
    ``stop_at`` stops after that many steps without finishing (returns None), as an
    interruption would; a finished run is loaded, not retrained. The run holds a lock on its
    directory (:class:`RunLockedError` for a second process) and trains with ``threads`` CPU threads,
    recorded in the checkpoint and the result: a resume with another count is refused, since the
    numbers depend on it. Ctrl-C raises :class:`RunInterrupted` saying where the run stopped.
    """
    cfg = cfg.validated()
    threads = check_int("threads", threads, 1, 1024)
    run_dir = Path(out_dir) / cfg.name
    with run_lock(run_dir), pinned_threads(threads):
        return _train_locked(cfg, run_dir, device, progress, data, stop_at, threads)


def _train_locked(cfg: RunConfig, run_dir: Path, device: str, progress: bool, data: LMData | None,
                  stop_at: int | None, threads: int) -> dict[str, np.ndarray] | None:
    """:func:`train_run` once the run directory is locked and the thread count pinned."""
    result_path, ckpt_path = run_dir / "result.npz", run_dir / "checkpoint.pt"
    finished = _finished_result(result_path, cfg)
    if finished is not None:
        return finished
    dev = resolve_device(device)
    if data is None:
        data = load_lm_data(cfg.data, cfg.batch_size, cfg.eval_batch_size, cfg.max_vocab, cfg.data_seed)
    n_batches = n_chunks(data.train, cfg.seq_len)
    ckpt = _load_checkpoint(ckpt_path, dev) if ckpt_path.exists() else None
    if ckpt is not None:
        if not same_config(ckpt["config"], cfg):
            raise ValueError(f"{ckpt_path} belongs to a run with other settings; remove it or use another --out")
        if ckpt.get("threads", threads) != threads:
            raise ValueError(f"{ckpt_path} was trained with threads={ckpt['threads']} and its numbers depend on it; "
                             f"resume with --threads {ckpt['threads']} (or delete it to start again)")
    # a resumed run keeps the precision it started with, whatever `auto` would pick now
    precision = ckpt.get("precision_used", cfg.precision) if ckpt is not None else run_precision(cfg, dev, threads)
    record_used(precision)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, len(data.vocab)).to(dev)
    optimizer = make_optimizer(model, cfg.lr)
    hist: dict[str, list[Any]] = {"minibatch": [], "val_loss": [], "attn_entropy": [], "stable_rank": [],
                                  "train_loss": []}
    step = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        _set_rng_state(ckpt["rng"], dev)
        hist, step = ckpt["history"], ckpt["step"]
    marks = set(cfg.checkpoints().tolist())
    bar = _progress(cfg, step, progress)

    def record(train_loss: float) -> None:
        val, ent = evaluate(model, data.valid, cfg.seq_len, cfg.eval_chunks)
        for key, value in [("minibatch", step), ("val_loss", val), ("attn_entropy", ent), ("train_loss", train_loss),
                           ("stable_rank", [stable_rank(w) for w in model.lower_mlp_weights()])]:
            hist[key].append(value)
        bar.set_postfix(loss=f"{val:.3f}", entropy=" ".join(f"{e:.2f}" for e in ent))
        with atomic_path(ckpt_path) as tmp:
            torch.save({"config": asdict(cfg), "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "rng": _rng_state(dev), "history": hist, "step": step, "threads": threads,
                        "precision_used": precision}, tmp)

    if step == 0 and not hist["minibatch"]:
        record(float("nan"))
    model.train()
    running = torch.zeros((), device=dev)
    since = 0
    try:
        while step < cfg.steps:
            if stop_at is not None and step >= stop_at:
                bar.close()
                return None
            batch = step % n_batches
            if cfg.adam_reset == "epoch" and batch == 0 and step > 0:
                optimizer = make_optimizer(model, cfg.lr)
            x, y = (t.to(dev) for t in get_chunk(data.train, batch, cfg.seq_len))
            running += train_step(model, optimizer, x, y, cfg.clip, precision)
            step, since = step + 1, since + 1
            bar.update(1)
            if step in marks:
                record(float(running) / since)
                running.zero_()
                since = 0
    except KeyboardInterrupt:
        bar.close()
        raise RunInterrupted(f"{cfg.name} stopped at step {step} of {cfg.steps}; its last checkpoint (step "
                             f"{hist['minibatch'][-1]}) is in {ckpt_path}") from None
    bar.close()
    arrays = {"minibatch": np.asarray(hist["minibatch"], dtype=np.int64),
              "val_loss": np.asarray(hist["val_loss"], dtype=np.float64),
              "attn_entropy": np.asarray(hist["attn_entropy"], dtype=np.float64),
              "stable_rank": np.asarray(hist["stable_rank"], dtype=np.float64),
              "train_loss": np.asarray(hist["train_loss"], dtype=np.float64)}
    write_results(result_path, arrays, {"config": asdict(cfg), "data_note": data.note, "vocab_size": len(data.vocab),
                                        "train_tokens": int(data.train.numel()), "steps_per_epoch": n_batches,
                                        "device": str(dev), "torch": torch.__version__, "threads": threads,
                                        "precision_used": precision, "onednn_isa_limit": onednn_isa_limit()})
    return arrays


def _progress(cfg: RunConfig, start: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=cfg.steps, initial=start, desc=cfg.name, disable=not enabled, dynamic_ncols=True,
                mininterval=1.0)


def sweep_configs(base: RunConfig, layers: Sequence[int], lrs: Sequence[float], seeds: Sequence[int]
                  ) -> list[RunConfig]:
    """One config per (layers, lr, seed), in that nesting order."""
    return [replace(base, n_layers=n, lr=lr, seed=s).validated() for n in layers for lr in lrs for s in seeds]


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
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        with tempfile.TemporaryDirectory() as out:
            runs, _ = run_sweep(configs, out, device="cpu", progress=False, log=lambda _: None)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
    return runs



def train_preset(preset: str, seeds: Sequence[int] | None = None, **overrides: Any) -> dict[str, np.ndarray]:
    """Train a preset of :data:`PRESETS` with :func:`train_on_cpu`; return the collected runs.

    ``seeds`` replace the preset's (``calibrate`` measures the seed spread with them); ``overrides`` change
    :class:`RunConfig` fields (e.g. ``steps``).
    """
    check_choice("preset", preset, tuple(PRESETS))
    settings = dict(PRESETS[preset])
    layers, lrs, preset_seeds = settings.pop("layers"), settings.pop("lr"), settings.pop("seeds")
    base = replace(RunConfig(**settings), **overrides)
    return train_on_cpu(sweep_configs(base, layers, lrs, list(seeds or preset_seeds)))

def load_sweep(out_dir: str | Path) -> tuple[dict[str, np.ndarray], list[RunConfig]]:
    """Collect every finished run under ``out_dir`` (sorted by layers, lr, seed)."""
    found = []
    for path in sorted(Path(out_dir).glob("*/result.npz")):
        if not path.with_suffix(".json").exists():
            raise ValueError(f"{path.parent} was stopped while finishing (result.npz without result.json); run its "
                             "`python -m joma_lib.lm.train run` command again to complete it from its checkpoint")
        cfg = RunConfig(**json.loads(path.with_suffix(".json").read_text())["config"])
        with np.load(path) as npz:
            found.append((cfg, {k: npz[k] for k in npz.files}))
    if not found:
        raise ValueError(f"no finished runs (*/result.npz) under {out_dir}")
    found.sort(key=lambda item: (item[0].n_layers, item[0].lr, item[0].seed))
    configs = [c for c, _ in found]
    return collect([r for _, r in found], configs), configs


# ----------------------------------------------------------------------------- command line

_FIELD_TYPES = {f.name: f.type for f in fields(RunConfig)}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m joma_lib.lm.train", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train (or resume) a sweep of runs")
    run.add_argument("--preset", choices=sorted(PRESETS), help="start from these settings")
    run.add_argument("--data", choices=CORPORA)
    run.add_argument("--layers", type=int, nargs="+")
    run.add_argument("--lr", type=float, nargs="+")
    run.add_argument("--seeds", type=int, nargs="+")
    for name, kind in [("steps", int), ("eval_interval", int), ("eval_chunks", int), ("seq_len", int),
                       ("batch_size", int), ("eval_batch_size", int), ("max_vocab", int), ("d", int), ("d_ff", int),
                       ("dropout", float), ("clip", float), ("data_seed", int), ("n_heads", int)]:
        run.add_argument("--" + name.replace("_", "-"), dest=name, type=kind)
    run.add_argument("--adam-reset", dest="adam_reset", choices=ADAM_RESET,
                     help="epoch: a new Adam at every epoch, as the authors; never: one for the whole run")
    run.add_argument("--arch", choices=ARCHS, help="paper: the authors' model; gptneox: Pythia's (Fig. 7)")
    run.add_argument("--log-checkpoints", dest="log_checkpoints", action="store_true", default=None,
                     help="also record at steps 1, 2, 4, ... below --eval-interval (Pythia's schedule)")
    run.add_argument("--precision", choices=PRECISION_CHOICES,
                     help="fp32 (default without a preset), bf16 mixed precision, or auto: the faster of the two here")
    run.add_argument("--device", choices=DEVICE_CHOICES, default=None, help="default: $JOMA_DEVICE or auto")
    run.add_argument("--out", required=True, help="directory of the runs (checkpoints and per-run results)")
    run.add_argument("--results", help="also write the collected sweep here (npz + json)")
    run.add_argument("--jobs", type=int, default=1, help="train this many runs at once (does not change the results)")
    run.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                     help=f"CPU threads of each run (default {DEFAULT_THREADS}; recorded, a resume must use the same)")
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


def config_from_args(args: argparse.Namespace) -> tuple[RunConfig, list[int], list[float], list[int]]:
    """The base config and the sweep axes from parsed ``run`` arguments (preset, then explicit options)."""
    settings: dict[str, Any] = dict(PRESETS[args.preset]) if args.preset else {}
    for name in _FIELD_TYPES:
        value = getattr(args, name, None)
        if value is not None and name not in ("n_layers", "lr", "seed"):
            settings[name] = value
    for axis in ("layers", "lr", "seeds"):
        if getattr(args, axis) is not None:
            settings[axis] = getattr(args, axis)
    layers = settings.pop("layers", [1])
    lrs = settings.pop("lr", [1e-4])
    seeds = settings.pop("seeds", [1])
    base = RunConfig(**settings)
    sweep_configs(base, layers, lrs, seeds)  # validates every combination before any training
    return base, layers, lrs, seeds


def _sweep_meta(configs: Sequence[RunConfig]) -> dict[str, Any]:
    return {"configs": [asdict(c) for c in configs], "torch": torch.__version__}


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
    submit_missing(out, [(c.name, (c, str(out), device, args.threads)) for c in configs],
                   lambda name: _finished_result(out / name / "result.npz", by_name[name]) is not None,
                   train_on_node, resources, f"joma-{out.name}")
    if args.results:
        wait_for(out, list(by_name), log=lambda _: None)
        runs = [_finished_result(out / c.name / "result.npz", c) for c in configs]
        if any(r is None for r in runs):
            raise ValueError(f"{out} holds results of other settings for "
                             f"{', '.join(c.name for c, r in zip(configs, runs, strict=True) if r is None)}")
        write_results(Path(args.results), collect([r for r in runs if r is not None], configs), _sweep_meta(configs))
        print(f"wrote {args.results}")
    else:
        print(f"follow them with `python -m joma_lib.lm.train status --out {args.out}`; when they are done, "
              f"`python -m joma_lib.lm.train collect {args.out} --results sweep.npz`")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run" and args.engine == "slurm":
            base, layers, lrs, seeds = config_from_args(args)
            _run_on_slurm(args, sweep_configs(base, layers, lrs, seeds))
        elif args.command == "status":
            print(format_states(*run_states(args.out)))
        elif args.command == "run":
            base, layers, lrs, seeds = config_from_args(args)
            configs = sweep_configs(base, layers, lrs, seeds)
            resolve_device(args.device)
            data, configs = run_sweep(configs, args.out, args.device or os.environ.get("JOMA_DEVICE", "auto"),
                                      not args.no_progress, jobs=args.jobs, threads=args.threads)
            if args.results:
                write_results(Path(args.results), data, _sweep_meta(configs))
                print(f"wrote {args.results}")
        else:
            data, configs = load_sweep(args.out)
            write_results(Path(args.results), data, _sweep_meta(configs))
            print(f"wrote {args.results} ({len(configs)} runs)")
    except (ValueError, OSError, RuntimeError) as err:  # bad settings, damaged files, a locked run: one line
        print("error: " + " ".join(str(err).split()), file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        where = f"{err}; " if str(err) else ""
        print(f"interrupted: {where}finished runs are kept; run the same command again to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
