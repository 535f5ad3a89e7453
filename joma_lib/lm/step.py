"""One training run of the language-model experiments (the paper's Figs. 6 and 8): its step and its loop.

One run = one (corpus, depth, lr, seed): Adam at constant lr, gradient clipping, token
chunks read in order, and every ``eval_interval`` steps a checkpoint with the validation
loss, the per-layer attention entropy and the stable rank of every ``W_1``. A run can be
stopped at any time: it resumes from its last checkpoint and reproduces the
uninterrupted run exactly (same data position, optimiser state and RNG state).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from joma_lib.base.cpu import onednn_isa_limit
from joma_lib.base.device import pinned_threads, resolve_device
from joma_lib.base.memory import keep_freed_memory
from joma_lib.lm.config import DEFAULT_THREADS, WIKITEXT2_VOCAB, RunConfig, same_config
from joma_lib.lm.data import LMData, get_chunk, load_lm_data, n_chunks
from joma_lib.lm.metrics import evaluate, stable_rank
from joma_lib.lm.model import TransformerLM
from joma_lib.base.precision import numerics, record_used, resolve
from joma_lib.lm.runs import finished_result, load_checkpoint, run_lock, save_checkpoint, write_results
from joma_lib.base.validation import check_float, check_int

if TYPE_CHECKING:
    from joma_lib.lm.pythia import NeoXLM


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C; the message says where it stopped and that the same command resumes it."""


def build_model(cfg: RunConfig, vocab_size: int) -> TransformerLM | NeoXLM:
    """The run's freshly initialised model (draws from torch's global RNG)."""
    if cfg.arch == "gptneox":
        from joma_lib.lm.pythia import NeoXLM

        return NeoXLM(vocab_size, cfg.n_layers, cfg.d, cfg.n_heads, cfg.d_ff, cfg.dropout, max_len=max(cfg.seq_len, 2))
    return TransformerLM(vocab_size, cfg.n_layers, cfg.d, cfg.d_ff, cfg.dropout)


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
    optimizer.zero_grad(set_to_none=True)
    with numerics(precision, x.device):
        loss = model.loss(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=True)
    optimizer.step()
    return loss.detach()


def run_precision(cfg: RunConfig, device: torch.device, threads: int = DEFAULT_THREADS) -> str:
    """The precision ``cfg`` trains in on ``device`` (:func:`joma_lib.base.precision.resolve`).

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
              data: LMData | None = None, stop_at: int | None = None, threads: int = DEFAULT_THREADS,
              lock_wait: float = 0.0) -> dict[str, np.ndarray] | None:
    """Train one run into ``out_dir/<cfg.name>/``, resuming from its checkpoint if there is one.

    Returns the run's arrays (``minibatch [C]``, ``val_loss [C]``, ``attn_entropy [C, L]``,
    ``stable_rank [C, L]``, ``train_loss [C]``), also written to ``result.npz``/``.json``.
    ``stop_at`` stops after that many steps without finishing (returns None), as an
    interruption would; a finished run is loaded, not retrained. The run holds a lock on its
    directory (:class:`~joma_lib.lm.runs.RunLockedError` for a second process) and trains with ``threads`` CPU threads,
    recorded in the checkpoint and the result: a resume with another count is refused, since the
    numbers depend on it. ``lock_wait``: seconds to wait for a process that still holds the run
    (:func:`~joma_lib.lm.runs.run_lock`). A finished run is read without the lock (its folder may be read-only).
    Ctrl-C raises :class:`RunInterrupted` saying where the run stopped.
    """
    cfg = cfg.validated()
    threads = check_int("threads", threads, 1, 1024)
    lock_wait = check_float("lock_wait", lock_wait, 0.0, 3600.0)
    run_dir = Path(out_dir) / cfg.name
    finished = finished_result(run_dir / "result.npz", cfg)
    if finished is not None:  # reading a finished run takes no lock: its folder may be read-only
        return finished
    keep_freed_memory()
    with run_lock(run_dir, lock_wait), pinned_threads(threads):
        return _train_locked(cfg, run_dir, device, progress, data, stop_at, threads)


def _train_locked(cfg: RunConfig, run_dir: Path, device: str, progress: bool, data: LMData | None,
                  stop_at: int | None, threads: int) -> dict[str, np.ndarray] | None:
    """:func:`train_run` once the run directory is locked and the thread count pinned."""
    result_path, ckpt_path = run_dir / "result.npz", run_dir / "checkpoint.pt"
    dev = resolve_device(device)
    if data is None:
        data = load_lm_data(cfg.data, cfg.batch_size, cfg.eval_batch_size, cfg.max_vocab, cfg.data_seed)
    n_batches = n_chunks(data.train, cfg.seq_len)
    ckpt = resumable_checkpoint(ckpt_path, cfg, threads)
    # a resumed run keeps the precision it started with, whatever `auto` would pick now
    precision = ckpt.get("precision_used", cfg.precision) if ckpt is not None else run_precision(cfg, dev, threads)
    record_used(precision)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, len(data.vocab)).to(dev)
    optimizer = make_optimizer(model, cfg.lr)
    hist = new_history()
    step = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        _set_rng_state(ckpt["rng"], dev)
        hist, step = ckpt["history"], ckpt["step"]
    marks = set(cfg.checkpoints().tolist())
    bar = progress_bar(cfg.name, cfg.steps, step, progress)

    def record(train_loss: float) -> None:
        val, ent = evaluate(model, data.valid, cfg.seq_len, cfg.eval_chunks)
        for key, value in [("minibatch", step), ("val_loss", val), ("attn_entropy", ent), ("train_loss", train_loss),
                           ("stable_rank", [stable_rank(w) for w in model.lower_mlp_weights()])]:
            hist[key].append(value)
        bar.set_postfix(loss=f"{val:.3f}", entropy=" ".join(f"{e:.2f}" for e in ent))
        save_checkpoint(ckpt_path, {"config": asdict(cfg), "model": model.state_dict(),
                                    "optimizer": optimizer.state_dict(), "rng": _rng_state(dev), "history": hist,
                                    "step": step, "threads": threads, "precision_used": precision,
                                    "running_loss": 0.0, "running_steps": 0})

    if step == 0 and not hist["minibatch"]:
        record(float("nan"))
    model.train()
    running = torch.tensor(ckpt.get("running_loss", 0.0) if ckpt else 0.0, device=dev)
    since = ckpt.get("running_steps", 0) if ckpt else 0
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
    arrays = history_arrays(hist)
    write_results(result_path, arrays, result_meta(cfg, data, dev, threads, precision))
    return arrays


def resumable_checkpoint(ckpt_path: Path, cfg: RunConfig, threads: int) -> dict[str, Any] | None:
    """The run's checkpoint, if there is one, once it is known to be this run's, trained on ``threads`` threads
    (ValueError saying what to do otherwise)."""
    if not ckpt_path.exists():
        return None
    ckpt = load_checkpoint(ckpt_path)
    if not same_config(ckpt["config"], cfg):
        raise ValueError(f"{ckpt_path} belongs to a run with other settings; remove it or use another --out")
    if ckpt.get("threads", threads) != threads:
        raise ValueError(f"{ckpt_path} was trained with threads={ckpt['threads']} and its numbers depend on it; "
                         f"resume with --threads {ckpt['threads']} (or delete it to start again)")
    return ckpt


def new_history() -> dict[str, list[Any]]:
    """A run's measurements along training, one entry per checkpoint (see :func:`train_run`)."""
    return {"minibatch": [], "val_loss": [], "attn_entropy": [], "stable_rank": [], "train_loss": []}


def history_arrays(hist: Mapping[str, list[Any]]) -> dict[str, np.ndarray]:
    """A finished run's history as the arrays of its ``result.npz``."""
    return {"minibatch": np.asarray(hist["minibatch"], dtype=np.int64),
            **{key: np.asarray(hist[key], dtype=np.float64)
               for key in ("val_loss", "attn_entropy", "stable_rank", "train_loss")}}


def result_meta(cfg: RunConfig, data: LMData, dev: torch.device, threads: int, precision: str) -> dict[str, Any]:
    """What a run's ``result.json`` records beside its config: the corpus, the machine and the numerics."""
    return {"config": asdict(cfg), "data_note": data.note, "vocab_size": len(data.vocab),
            "train_tokens": int(data.train.numel()), "steps_per_epoch": n_chunks(data.train, cfg.seq_len),
            "device": str(dev), "torch": torch.__version__, "threads": threads, "precision_used": precision,
            "onednn_isa_limit": onednn_isa_limit()}


def progress_bar(desc: str, total: int, start: int, enabled: bool) -> Any:
    """A tqdm bar of ``total`` steps starting at ``start`` (disabled unless ``enabled``)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, desc=desc, disable=not enabled, dynamic_ncols=True, mininterval=1.0)

