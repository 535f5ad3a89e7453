"""Runs of one shape trained as one stacked model (``python -m joma_lib.lm run ... --stack``).

The runs of a sweep that differ only in their learning rate, seed and clip (:func:`stack_key`) read the same
batches through models of the same shapes; :func:`train_stack` trains them as one
:class:`~joma_lib.lm.stacked.StackedLM` with the step of :mod:`joma_lib.lm.stack_step` (one CUDA graph on a
GPU). Each run keeps what makes it that run: its seed and initialisation (built exactly as its unstacked run
builds it), its dropout masks, learning rate, clip, Adam state and Adam resets. Each run also keeps its folder:
the lock, ``checkpoint.pt`` in the unstacked runner's format (so either runner resumes the other's
checkpoints) and ``result.npz``/``.json`` (:mod:`joma_lib.lm.runs`); ``status``, ``collect`` and the figures
read them as before.

On the CPU a stacked run draws the masks of its unstacked run from the same generator state, so the two differ
only by the summation order of the batched products (tests/test_lm_stack.py measures it). Checkpoints are
written at an evaluation step once ``checkpoint_seconds`` have passed since the last (a GPU writes hundreds of
MB per run each time; against a ``stop_after`` deadline also no sooner than
:data:`~joma_lib.base.stack_time.CHECKPOINT_SHARE` of the time
allows), at the end, and when ``stop_after`` seconds have passed: then at the current step, and the call returns
None; the same call later continues from there.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from joma_lib.base.device import pinned_threads, resolve_device, synchronize
from joma_lib.base.memory import keep_freed_memory
from joma_lib.lm.config import DEFAULT_THREADS, WIKITEXT2_VOCAB, RunConfig
from joma_lib.lm.data import LMData, get_chunk, load_lm_data, n_chunks
from joma_lib.lm.model import TransformerLM
from joma_lib.base.precision import record_used, resolve
from joma_lib.base.stack_time import CHECKPOINT_SHARE
from joma_lib.lm.runs import finished_result, run_lock, save_checkpoint, write_results
from joma_lib.lm.stack_step import AdamState, StackStep, on_device
from joma_lib.lm.stacked import StackedLM, evaluate_stack, mask_source, stable_ranks
from joma_lib.lm.step import (
    RunInterrupted,
    build_model,
    history_arrays,
    make_optimizer,
    new_history,
    progress_bar,
    result_meta,
    resumable_checkpoint,
    run_precision,
    run_shapes,
)
from joma_lib.base.validation import check_float, check_int

#: the fields in which runs of one stack may differ
STACK_VARIES = frozenset({"lr", "seed", "clip"})
#: how often a stack writes its runs' checkpoints at evaluation steps, by default (seconds)
CHECKPOINT_SECONDS = 60.0


def stack_key(cfg: RunConfig) -> tuple[tuple[str, Any], ...]:
    """What runs of one stack share: every field of the config but :data:`STACK_VARIES`."""
    return tuple(sorted((k, v) for k, v in asdict(cfg).items() if k not in STACK_VARIES))


def stacks(configs: Sequence[RunConfig], size: int | None = None) -> list[list[RunConfig]]:
    """``configs`` grouped into stacks (:func:`stack_key`), in the order of their first run; with ``size``, each
    group cut into consecutive stacks of at most ``size`` runs (stacks that finish sooner: a GPU loan of a few
    minutes finishes some of them whole, where one stack of all would finish none)."""
    if size is not None:
        size = check_int("stack_size", size, 1)
    groups: dict[tuple[tuple[str, Any], ...], list[RunConfig]] = {}
    for cfg in configs:
        groups.setdefault(stack_key(cfg), []).append(cfg)
    if size is None:
        return list(groups.values())
    return [group[k:k + size] for group in groups.values() for k in range(0, len(group), size)]


def shares(groups: Sequence[Sequence[RunConfig]], jobs: int) -> list[list[RunConfig]]:
    """Stacks ``groups`` cut for ``jobs`` worker processes that should finish together: each stack in at most
    ``jobs`` pieces as even as they come, the costliest piece (runs x layers x steps) first, so that a pool that
    hands each free worker the next piece balances them (longest first). Without the cut, two workers given a
    1-layer and a 2-layer stack finish apart, and the sweep waits for the slower; stacked runs cost about what
    they cost alone on a CPU, so only the balance decides the wall clock there. One worker: the stacks as given.
    """
    if jobs == 1:
        return [list(group) for group in groups]
    pieces = []
    for group in groups:
        size = math.ceil(len(group) / jobs)
        pieces += [list(group[k:k + size]) for k in range(0, len(group), size)]
    return sorted(pieces, key=lambda piece: len(piece) * piece[0].n_layers * piece[0].steps, reverse=True)


def probe_stack(group: Sequence[RunConfig], vocab: int, device: torch.device, precision: str
                ) -> tuple[StackStep, torch.Tensor, torch.Tensor]:
    """A throw-away stack of ``group``'s models (their shapes, their initialisations), its step in ``precision``
    and one batch of random tokens of their shape: the step that will run, to be timed. Call it inside
    :func:`torch.random.fork_rng`: it draws from the global random stream."""
    first = group[0]
    models = [cast(TransformerLM, build_model(cfg, vocab)) for cfg in group]
    model = StackedLM.from_models(models, mask_source(device, [c.seed for c in group]), device)
    tokens = torch.randint(0, vocab, (first.batch_size, first.seq_len + 1), device=device)
    stepper = StackStep(model, AdamState(list(model.params.values())), on_device([c.lr for c in group], device),
                        on_device([c.clip for c in group], device), precision)
    return stepper, tokens[:, :-1], tokens[:, 1:]


def stack_precision(configs: Sequence[RunConfig], device: torch.device, threads: int = DEFAULT_THREADS,
                    size: int | None = None) -> list[RunConfig]:
    """``configs`` with ``precision="auto"`` replaced by one precision for the whole sweep, measured on the
    stacked step of its largest ``auto`` stack (of at most ``size`` runs: the step that will run;
    :func:`joma_lib.base.precision.resolve`)."""
    auto = [group for group in stacks(configs, size) if group[0].precision == "auto"]
    if not auto:
        return list(configs)
    group = max(auto, key=lambda g: (len(g) * g[0].n_layers, len(g)))
    first = group[0]
    probes: dict[str, tuple[StackStep, torch.Tensor, torch.Tensor]] = {}

    def step(precision: str) -> None:
        if precision not in probes:
            probes[precision] = probe_stack(group, first.max_vocab or WIKITEXT2_VOCAB, device, precision)
            probes[precision][0].warm_up(*probes[precision][1:])  # a GPU step is captured: time its replays
        stepper, x, y = probes[precision]
        stepper.step(x, y)
        synchronize(device)

    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        precision = resolve("auto", device, {**run_shapes(first, device), "stacked": len(group)}, threads, step)
    return [replace(c, precision=precision) if c.precision == "auto" else c for c in configs]


def train_stack(configs: Sequence[RunConfig], out_dir: str | Path, device: str = "auto", progress: bool = True,
                data: LMData | None = None, stop_at: int | None = None, threads: int = DEFAULT_THREADS,
                stop_after: float | None = None, checkpoint_seconds: float = CHECKPOINT_SECONDS,
                capture: bool = True, compiled: bool = False, lock_wait: float = 0.0
                ) -> list[dict[str, np.ndarray]] | None:
    """Train the runs ``configs`` (one stack: :func:`stack_key` equal) into ``out_dir/<name>/`` as one model.

    Returns each run's arrays, as :func:`~joma_lib.lm.step.train_run` does; finished runs are loaded, the others
    resume from their checkpoints (runs that stopped at different steps train as one stack per step).
    ``stop_at`` stops before that step, as an interruption would; ``stop_after`` (seconds) checkpoints and
    stops at the first step after it; both return None. ``capture=False`` keeps a GPU step eager; ``compiled``
    sends the training loss through ``torch.compile`` (:meth:`~joma_lib.lm.stacked.StackedLM.compile_losses`:
    fewer, fused kernels, the same arithmetic up to rounding; whether it pays is measured by
    ``benchmarks/bench_lm_compile.py``). ``lock_wait``: seconds to wait for a process that still holds one of the
    runs (:func:`~joma_lib.lm.runs.run_lock`).
    """
    configs = [c.validated() for c in configs]
    if not configs:
        raise ValueError("configs must name at least one run")
    if len({stack_key(c) for c in configs}) != 1:
        raise ValueError("configs must differ only in " + ", ".join(sorted(STACK_VARIES)) + " to train as one stack")
    if configs[0].arch != "paper":
        raise ValueError(f"--stack trains the paper's model (arch 'paper'), got arch {configs[0].arch!r}")
    if len({c.name for c in configs}) != len(configs):
        raise ValueError("configs must name distinct runs")
    threads = check_int("threads", threads, 1, 1024)
    if stop_after is not None:
        check_float("stop_after", stop_after, 0, low_open=True)
    check_float("checkpoint_seconds", checkpoint_seconds, 0)
    lock_wait = check_float("lock_wait", lock_wait, 0.0, 3600.0)
    out = Path(out_dir)
    with contextlib.ExitStack() as held:
        for cfg in configs:
            held.enter_context(run_lock(out / cfg.name, lock_wait))
        held.enter_context(pinned_threads(threads))
        results = {c.name: finished_result(out / c.name / "result.npz", c) for c in configs}
        pending = [c for c in configs if results[c.name] is None]
        if pending:
            keep_freed_memory()
            dev = resolve_device(device)
            if data is None:
                data = load_lm_data(pending[0].data, pending[0].batch_size, pending[0].eval_batch_size,
                                    pending[0].max_vocab, pending[0].data_seed)
            ckpts = {c.name: resumable_checkpoint(out / c.name / "checkpoint.pt", c, threads) for c in pending}
            deadline = None if stop_after is None else time.monotonic() + stop_after
            by_start: dict[tuple[int, str | None], list[RunConfig]] = {}
            for c in pending:
                ck = ckpts[c.name]
                by_start.setdefault((ck["step"], ck.get("precision_used")) if ck else (0, None), []).append(c)
            for (_, precision), group in sorted(by_start.items(), key=lambda item: item[0][0]):
                if precision is None:
                    precision = run_precision(group[0], dev, threads)
                trained = _train_group(group, ckpts, out, data, dev, threads, precision, progress, stop_at, deadline,
                                       checkpoint_seconds, capture, compiled)
                if trained is None:
                    return None
                results.update(trained)
    return [results[c.name] for c in configs]  # type: ignore[misc]


def _train_group(cfgs: Sequence[RunConfig], ckpts: dict[str, dict[str, Any] | None], out: Path, data: LMData,
                 dev: torch.device, threads: int, precision: str, progress: bool, stop_at: int | None,
                 deadline: float | None, checkpoint_seconds: float, capture: bool, compiled: bool
                 ) -> dict[str, dict[str, np.ndarray]] | None:
    """Train runs that all stand at the same step (their checkpoints', or 0) to the end, as one stack."""
    record_used(precision)
    first = cfgs[0]
    models, generators = [], []
    for cfg in cfgs:  # each run's model and random stream, exactly as its unstacked run makes them
        torch.manual_seed(cfg.seed)
        model = build_model(cfg, len(data.vocab))
        assert isinstance(model, TransformerLM)
        generator = torch.Generator()
        generator.set_state(torch.get_rng_state())
        ck = ckpts[cfg.name]
        if ck is not None:
            model.load_state_dict(ck["model"])
            generator.set_state(ck["rng"]["cpu"])
        models.append(model)
        generators.append(generator)
    ck0 = ckpts[first.name]
    step = ck0["step"] if ck0 else 0
    masks = mask_source(dev, [c.seed for c in cfgs], step, generators)
    stack = StackedLM.from_models(models, masks, dev)
    if compiled:
        stack.compile_losses()
    adam = AdamState(list(stack.params.values()))
    hists = []
    for r, cfg in enumerate(cfgs):
        ck = ckpts[cfg.name]
        hists.append(ck["history"] if ck else new_history())
        for i, entry in (ck["optimizer"]["state"] if ck else {}).items():
            adam.exp_avg[int(i)][r].copy_(entry["exp_avg"])
            adam.exp_avg_sq[int(i)][r].copy_(entry["exp_avg_sq"])
            adam.steps[r] = float(entry["step"])
    stepper = StackStep(stack, adam, on_device([c.lr for c in cfgs], dev), on_device([c.clip for c in cfgs], dev),
                        precision, capture)
    since = {ck.get("running_steps", 0) if ck else 0 for ck in (ckpts[c.name] for c in cfgs)}
    if len(since) != 1:
        raise ValueError(f"the checkpoints of {', '.join(c.name for c in cfgs)} disagree on their running loss; "
                         "train these runs without --stack")
    since_mark = since.pop()
    stepper.running.copy_(on_device([ck.get("running_loss", 0.0) if ck else 0.0
                                     for ck in (ckpts[c.name] for c in cfgs)], dev))
    train, valid = data.train.to(dev), data.valid.to(dev)
    n_batches = n_chunks(train, first.seq_len)
    marks = set(first.checkpoints().tolist())
    last_save, interval = time.monotonic(), checkpoint_seconds

    def save() -> None:
        nonlocal last_save, interval
        start = time.monotonic()
        for r, cfg in enumerate(cfgs):
            save_checkpoint(out / cfg.name / "checkpoint.pt", _run_checkpoint(
                cfg, r, stack, adam, models[r], generators[r], hists[r], step, threads, precision,
                float(stepper.running[r]), since_mark))
        last_save = time.monotonic()
        if deadline is not None:  # the next no sooner than CHECKPOINT_SHARE of the time allows
            interval = max(checkpoint_seconds, (last_save - start) / CHECKPOINT_SHARE)

    def record(train_loss: list[float]) -> None:
        val, ent = evaluate_stack(stack, valid, first.seq_len, first.eval_chunks)
        ranks = stable_ranks(stack)
        for r, hist in enumerate(hists):
            for key, value in [("minibatch", step), ("val_loss", float(val[r])), ("attn_entropy", ent[r].tolist()),
                               ("train_loss", train_loss[r]), ("stable_rank", ranks[r].tolist())]:
                hist[key].append(value)
        bar.set_postfix(loss=f"{float(val.min()):.3f}")

    bar = progress_bar(f"stack of {len(cfgs)} ({first.name}, ...)", first.steps, step, progress)
    try:
        if step == 0 and not hists[0]["minibatch"]:
            record([float("nan")] * len(cfgs))
            save()
        while step < first.steps:
            if stop_at is not None and step >= stop_at:
                return None
            batch = step % n_batches
            if first.adam_reset == "epoch" and batch == 0 and step > 0:
                adam.reset()
            stepper.step(*get_chunk(train, batch, first.seq_len))
            step, since_mark = step + 1, since_mark + 1
            bar.update(1)
            if step in marks:
                record((stepper.running / since_mark).tolist())
                stepper.running.zero_()
                since_mark = 0
                if step == first.steps or time.monotonic() - last_save >= interval:
                    save()
            if deadline is not None and time.monotonic() >= deadline and step < first.steps:
                save()
                return None
    except KeyboardInterrupt:
        raise RunInterrupted(f"the stack of {', '.join(c.name for c in cfgs)} stopped at step {step} of "
                             f"{first.steps}; each run's last checkpoint is in its folder under {out}") from None
    finally:
        bar.close()
    done = {}
    for r, cfg in enumerate(cfgs):
        arrays = history_arrays(hists[r])
        write_results(out / cfg.name / "result.npz", arrays,
                      {**result_meta(cfg, data, dev, threads, precision), "stacked_runs": len(cfgs),
                       "step_mode": stepper.mode, "compiled": compiled})
        done[cfg.name] = arrays
    return done


def _run_checkpoint(cfg: RunConfig, r: int, stack: StackedLM, adam: AdamState, model: TransformerLM,
                    generator: torch.Generator, hist: dict[str, list[Any]], step: int, threads: int, precision: str,
                    running_loss: float, running_steps: int) -> dict[str, Any]:
    """Run ``r``'s checkpoint in the unstacked runner's format (its model's state dict, a torch Adam state dict)."""
    model.load_state_dict(stack.run_state(r))
    optimizer = make_optimizer(model, cfg.lr)
    if float(adam.steps[r]) > 0:  # a fresh optimiser (step 0, or just reset) has no state, as torch's
        for i, p in enumerate(model.parameters()):
            optimizer.state[p] = {"step": adam.steps[r].detach().cpu().clone(),
                                  "exp_avg": adam.exp_avg[i][r].detach().cpu().clone(),
                                  "exp_avg_sq": adam.exp_avg_sq[i][r].detach().cpu().clone()}
    return {"config": asdict(cfg), "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "rng": {"cpu": generator.get_state()}, "history": hist, "step": step, "threads": threads,
            "precision_used": precision, "running_loss": running_loss, "running_steps": running_steps}
