"""Table 1 trained stacked (:mod:`joma_lib.theory.table1.stacked`), with checkpoints: :func:`run_table1_stacked`.

The runs (:func:`~joma_lib.theory.table1.stacked.stack_runs`, in a fixed order) are trained in stacks of
consecutive runs, of a chosen size (all in one by default) or of the size a :data:`StackSizes` gives for the runs
waiting (sized to the time left: :mod:`joma_lib.theory.table1.stack_plan`). With an output folder each stack is
saved every ``every`` steps, or less often where writing it would take more than
:data:`~joma_lib.base.stack_time.CHECKPOINT_SHARE` of the time, and where a call stops (at ``stop_after``, or at
the end of the chunk of steps in which a Ctrl-C came: :func:`~joma_lib.base.startup.deferred_interrupt`), atomically
(:func:`checkpoint_path`: the stacked parameters, the Adam state, every run's generator states and losses so far);
a later call with the same folder resumes it first and ends with the
numbers of an uninterrupted run. A finished stack leaves its runs' scores and losses (:func:`stack_result_path`,
small, checksummed: one damaged on disk is refused), which a later call reads back instead of training them, on any
machine: at the paper's width a checkpoint of all 40 runs is about 5.6 GB (parameters and Adam's two moments in
float32), a finished stack a few kB. The files are named after the runs they hold, so the stacks of one folder may
differ in size from call to call (a run's numbers do not depend on the runs stacked beside it, up to the rounding of
the batched products).
A finished folder holds the result (:data:`RESULT`, with its configuration manifest, and every run's losses,
:data:`LOSSES`) and is read back, not trained again. A folder of another configuration is refused.
"""

from __future__ import annotations

import io
import json
import re
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from joma_lib.base.device import pinned_threads, resolve_device
from joma_lib.base.precision import numerics as precision_numerics
from joma_lib.base.precision import resolve
from joma_lib.base.stack_time import CHECKPOINT_SHARE
from joma_lib.base.startup import deferred_interrupt
from joma_lib.base.io import (DamagedFileError, checksum_path, load_torch_checked, read_checked, save_torch_checked,
                              write_checked, write_npz)
from joma_lib.theory.table1.model import (
    RunResult,
    Table1Config,
    alignment_matrix,
    numerics,
    pooled_hiddens,
    setup_run,
    trained_scores,
    training_precision,
)
from joma_lib.theory.table1.runs import (
    RunKey,
    Table1Result,
    config_record,
    load_result,
    n_levels,
    save_result,
    table_of,
)
from joma_lib.theory.table1.stacked import (
    LabelStream,
    Run,
    chunk_bounds,
    stack_parameters,
    stack_runs,
    stacked_losses,
    token_tables,
    unstack,
)
from joma_lib.base.validation import check_int
from joma_lib.base.memory import keep_freed_memory

RESULT = "table1.npz"
LOSSES = "losses.npy"
CHUNK_STEPS = 100
"""Steps whose labels are drawn at a time, ahead of the training (:meth:`LabelStream.chunks`)."""


#: how many of the runs waiting (a block of consecutive runs, its length given) to stack now
StackSizes = Callable[[int], int]
_STACK_FILE = re.compile(r"stack-(\d+)-(\d+)\.(npz|pt)")


def checkpoint_path(out: Path, first: int, stop: int) -> Path:
    """The checkpoint of the stack of runs ``first .. stop - 1`` in ``out`` (large: the parameters and Adam's
    moments)."""
    return out / f"stack-{first}-{stop}.pt"


def stack_result_path(out: Path, first: int, stop: int) -> Path:
    """The finished runs ``first .. stop - 1`` in ``out`` (small: scores and losses)."""
    return out / f"stack-{first}-{stop}.npz"


def _stack_files(out: Path, suffix: str, n_runs: int) -> list[tuple[int, int]]:
    """The stacks ``(first, stop)`` whose ``.npz`` or ``.pt`` files lie in ``out``, in order; a file of another
    layout is refused."""
    spans = []
    for path in sorted(out.glob(f"stack-*.{suffix}")):
        match = _STACK_FILE.fullmatch(path.name)
        if match is None or not 0 <= int(match[1]) < int(match[2]) <= n_runs:
            raise ValueError(f"{path} is not a stack file of this configuration's {n_runs} runs "
                             f"(stack-FIRST-STOP.{suffix}); use another --out folder")
        spans.append((int(match[1]), int(match[2])))
    return sorted(spans)


class ProbeStack(NamedTuple):
    """A stack of a configuration's first runs, ready for one training step (:func:`probe_step`): what the
    ``auto`` precision times, and the benchmark."""

    params: dict[str, torch.Tensor]
    optimizer: torch.optim.Optimizer
    tokens: torch.Tensor
    labels: torch.Tensor
    n_layers: int


def probe_stack(config: Table1Config, n_runs: int, dev: torch.device) -> ProbeStack:
    """The first ``n_runs`` runs of ``config``'s table stacked as at their first step (same initial networks,
    first batch), with their optimiser."""
    every_run = stack_runs(config)
    runs = every_run[:check_int("n_runs", n_runs, 1, len(every_run))]
    params = stack_parameters([setup_run(config, *run.setting, run.seed, dev)[2] for run in runs])
    optimizer = torch.optim.Adam(params.values(), lr=config.lr, weight_decay=config.weight_decay, foreach=True)
    chunk = LabelStream(runs, config.n_class, config.batch_size).draw(0, 1)
    tokens = token_tables(config, runs, dev)[torch.arange(len(runs), device=dev)[:, None],
                                             torch.from_numpy(chunk.draws[0]).to(dev)]
    return ProbeStack(params, optimizer, tokens, torch.from_numpy(chunk.targets[0]).to(dev), config.n_layers)


def training_losses(compiled: bool) -> Callable[..., torch.Tensor]:
    """:func:`~joma_lib.theory.table1.stacked.stacked_losses`, or the same through ``torch.compile`` (one graph of
    fixed shapes; its backward compiled with it), which fuses the chains of elementwise operations (residual, layer
    norm and its per-run scale and shift, mask and softmax): about half of a stacked step at the paper's width by an
    estimate of its memory traffic (not yet profiled); only the rounding changes."""
    return torch.compile(stacked_losses, dynamic=False) if compiled else stacked_losses


def probe_step(probe: ProbeStack, losses_of: Callable[..., torch.Tensor] = stacked_losses) -> None:
    """One training step of ``probe`` (forward, backward, Adam; the losses from ``losses_of``), in the numerics
    the caller has set; on a GPU it returns when the step is done (synchronised), so that it can be timed."""
    loss = losses_of(probe.params, probe.tokens, probe.labels, probe.n_layers)
    probe.optimizer.zero_grad(set_to_none=True)
    loss.sum().backward()
    probe.optimizer.step()
    if probe.tokens.device.type == "cuda":
        torch.cuda.synchronize()


def resolve_precision(config: Table1Config, requested: str, device: torch.device, n_runs: int) -> Table1Config:
    """``config`` with the precision that a run asking for ``requested`` trains in on ``device``
    (:func:`joma_lib.base.precision.resolve`): ``auto`` times one step of a stack of ``n_runs`` runs in each
    precision that runs there (fp32 and bf16 on a CPU; fp32, TF32 and bf16 on a GPU) and keeps the fastest,
    a choice cached per machine and shapes; a precision that cannot run here trains in fp32 (with a notice)."""
    shapes = {"model": "table1", "runs": n_runs, **{name: getattr(config, name) for name in (
        "n_vocab", "seq_len", "n_class", "n_layers", "d_model", "d_hidden", "batch_size")}}
    built: list[ProbeStack] = []

    def step(precision: str) -> None:
        if not built:  # built only when a measurement is needed (not for a cached choice)
            built.append(probe_stack(config, n_runs, device))
        with precision_numerics(precision, device):
            probe_step(built[0])

    with pinned_threads(config.cpu_threads if device.type == "cpu" else None):
        chosen = resolve(requested, device, shapes, torch.get_num_threads(), step)
    return replace(config, precision=chosen)


class StackedOutcome(NamedTuple):
    """The table and every run's training loss per step, ``losses[run, step]`` (runs as :func:`stack_runs`)."""

    result: Table1Result
    losses: np.ndarray


def run_table1_stacked(config: Table1Config, device: str | None = None, out: Path | None = None,
                       every: int = 1000, stop_after: int | None = None, progress: bool = False,
                       stack_size: int | None = None, compiled: bool = False, sizes: StackSizes | None = None
                       ) -> StackedOutcome | None:
    """Train every run of ``config``'s table stacked, ``stack_size`` runs to a stack (default all in one), or as
    many as ``sizes`` says of the runs waiting (it may raise
    :class:`~joma_lib.base.stack_time.DeadlineReached`), and score each run as
    :func:`~joma_lib.theory.table1.runs.run_table1` does.

    With ``out`` (a folder): each stack checkpoints every ``every`` steps and resumes from its checkpoint (a
    stack begun by an earlier call is finished first); a finished stack leaves its runs' scores and losses (a
    small file), so a call on another machine goes on with the runs not yet trained; a finished folder is read
    back. ``stop_after``: stop (after checkpointing) once this call has trained that many steps (of one stack or
    of several in turn); returns None then. ``compiled``: the training loss through ``torch.compile``
    (:func:`training_losses`), which changes only the rounding.
    """
    every = check_int("every", every, 1, 10**7)
    runs = stack_runs(config)
    budget = None if stop_after is None else check_int("stop_after", stop_after, 1, config.steps * len(runs))
    size = len(runs) if stack_size is None else check_int("stack_size", stack_size, 1, len(runs))
    if sizes is not None and out is None:
        raise ValueError("stacks sized to the time left (sizes) need an output folder (out): a later call "
                         "trains the runs left")
    size_of = sizes if sizes is not None else (lambda waiting: min(size, waiting))
    dev = resolve_device(device)
    n_levels(config)
    if out is not None and (out / RESULT).exists():
        return _read_finished(out, config)
    results: dict[RunKey, RunResult] = {}
    started: list[tuple[int, int]] = []
    if out is not None:  # a checkpoint's temporary file left by a killed call (each as large as a checkpoint)
        for stale in out.glob(".stack-*.pt.*"):
            stale.unlink()
        for first, stop in _stack_files(out, "npz", len(runs)):
            results.update(_read_stack(stack_result_path(out, first, stop), config, runs[first:stop]))
        started = _stack_files(out, "pt", len(runs))
    keep_freed_memory()
    # Ctrl-C: the stack stops at the end of its chunk of steps, checkpointed; one that finishes its steps is saved
    with numerics(config, dev), deferred_interrupt() as interrupted:
        spans = _stacks(runs, results, started, size_of)
        while (span := None if budget == 0 else next(spans, None)) is not None:  # no plan once the budget is spent
            first, stop = span
            stack = runs[first:stop]
            checkpoint = None if out is None else checkpoint_path(out, first, stop)
            trained, used = _train_stack(config, stack, dev, checkpoint, every, budget, progress, compiled,
                                         interrupted)
            if trained is None:
                return None
            budget = None if budget is None else budget - used
            if out is not None:
                _save_stack(stack_result_path(out, first, stop), config, stack, trained)
                checkpoint_path(out, first, stop).unlink(missing_ok=True)
                checksum_path(checkpoint_path(out, first, stop)).unlink(missing_ok=True)
            results.update(trained)
            if interrupted and len(results) < len(runs):
                raise KeyboardInterrupt(f"Table 1 stopped after its runs {first}-{stop - 1}, finished"
                                        + ("" if out is None else f" and kept in {out}"))
    if len(results) < len(runs):
        return None
    outcome = StackedOutcome(table_of(config, results),
                             np.stack([results[run.i_setting, run.i_seed, run.shuffled].losses for run in runs]))
    if out is not None:
        _save_finished(out, config, outcome)
    return outcome


def _stacks(runs: list[Run], results: dict[RunKey, RunResult], started: list[tuple[int, int]],
            size_of: StackSizes) -> Iterator[tuple[int, int]]:
    """The stacks to train, ``(first, stop)``: those begun (``started``) first, then stacks of the first runs
    without a result, as many as ``size_of`` gives for the block of consecutive such runs; asked again after
    each stack (``results`` grows as the caller trains)."""
    yield from started
    begun = {i for first, stop in started for i in range(first, stop)}
    while True:
        waiting = [i for i, run in enumerate(runs)
                   if i not in begun and (run.i_setting, run.i_seed, run.shuffled) not in results]
        if not waiting:
            return
        block = next((k for k, i in enumerate(waiting) if i != waiting[0] + k), len(waiting))
        count = size_of(block)
        if not 1 <= count <= block:
            raise ValueError(f"a stack size must be in [1, {block}] (the block of runs waiting), got {count}")
        begun.update(waiting[:count])
        yield waiting[0], waiting[0] + count


def _train_stack(config: Table1Config, runs: list[Run], dev: torch.device, checkpoint: Path | None, every: int,
                 budget: int | None, progress: bool, compiled: bool, interrupted: list[int]
                 ) -> tuple[dict[RunKey, RunResult] | None, int]:
    """Train one stack (resuming from ``checkpoint`` where it exists) for at most ``budget`` steps, and score its
    runs once it has done all; returns them (None if it has not) and the number of steps trained. Once
    ``interrupted`` holds a Ctrl-C, the stack stops at the end of its chunk of steps, checkpointed, and raises
    ``KeyboardInterrupt`` naming the step."""
    params = stack_parameters([setup_run(config, *run.setting, run.seed, dev)[2] for run in runs])
    optimizer = torch.optim.Adam(params.values(), lr=config.lr, weight_decay=config.weight_decay, foreach=True)
    losses = torch.zeros(len(runs), config.steps, device=dev)
    start, states = 0, None
    if checkpoint is not None and checkpoint.exists():
        start, states = _resume(checkpoint, config, runs, params, optimizer, losses)
    stop = config.steps if budget is None else min(config.steps, start + budget)
    stream = LabelStream(runs, config.n_class, config.batch_size, states)
    tables = token_tables(config, runs, dev)
    run_index = torch.arange(len(runs), device=dev)[:, None]
    bar = _progress(progress, start, config.steps)
    losses_of = training_losses(compiled)
    last_save, wait = time.monotonic(), 0.0
    for chunk in stream.chunks(chunk_bounds(start, stop, CHUNK_STEPS, every)):
        draws, targets = torch.from_numpy(chunk.draws).to(dev), torch.from_numpy(chunk.targets).to(dev)
        with training_precision(config, dev):
            for k in range(len(draws)):
                loss = losses_of(params, tables[run_index, draws[k]], targets[k], config.n_layers)
                optimizer.zero_grad(set_to_none=True)
                loss.sum().backward()
                optimizer.step()
                losses[:, chunk.start + k] = loss.detach()
        end = chunk.start + len(draws)
        if bar is not None:
            bar.update(len(draws))
        due = end == stop or bool(interrupted) or (end % every == 0 and time.monotonic() - last_save >= wait)
        if checkpoint is not None and due and end < config.steps:
            began = time.monotonic()
            _save_checkpoint(checkpoint, config, runs, params, optimizer, losses[:, :end], end, chunk.states)
            last_save = time.monotonic()
            wait = (last_save - began) / CHECKPOINT_SHARE  # checkpoints take at most this share of the time
        if interrupted and end < config.steps:
            raise KeyboardInterrupt(f"Table 1's stack of {len(runs)} run(s) stopped at step {end} of {config.steps}"
                                    + ("" if checkpoint is None else f", checkpointed in {checkpoint}"))
    if bar is not None:
        bar.close()
    if stop < config.steps:
        return None, stop - start
    return score_runs(config, runs, params, losses.cpu().double().numpy(), dev), stop - start


def score_runs(config: Table1Config, runs: list[Run], params: dict[str, torch.Tensor], losses: np.ndarray,
               dev: torch.device) -> dict[RunKey, RunResult]:
    """Every run scored on its own network, as the unstacked run scores it: at initialisation, trained, and the
    change."""
    results = {}
    for r, run in enumerate(runs):
        _, test, model = setup_run(config, *run.setting, run.seed, dev)
        pooled_init = pooled_hiddens(model, test, dev)
        scores_init = alignment_matrix(model, test, config.min_corr, dev)
        scores, change = trained_scores(unstack(params, r, model), test, pooled_init, config.min_corr, dev)
        results[run.i_setting, run.i_seed, run.shuffled] = RunResult(scores, scores_init, losses[r], change)
    return results


def run_results(config: Table1Config, outcome: StackedOutcome) -> dict[RunKey, RunResult]:
    """Every run of a stacked outcome on its own, as :func:`~joma_lib.theory.table1.runs.train_runs` gives them."""
    t = outcome.result
    return {(run.i_setting, run.i_seed, run.shuffled): RunResult(
        (t.scores_control if run.shuffled else t.scores)[run.i_setting, run.i_seed],
        t.scores_init[run.i_setting, run.i_seed], outcome.losses[r],
        (t.scores_change_control if run.shuffled else t.scores_change)[run.i_setting, run.i_seed])
        for r, run in enumerate(stack_runs(config))}


def _identity(config: Table1Config, runs: list[Run]) -> dict[str, Any]:
    """What a stack's files must match to be read: the configuration and the runs of the stack."""
    return {"config": config_record(config),
            "runs": [[run.i_setting, run.i_seed, run.seed, run.shuffled] for run in runs]}


def _save_checkpoint(path: Path, config: Table1Config, runs: list[Run], params: dict[str, torch.Tensor],
                     optimizer: torch.optim.Optimizer, losses: torch.Tensor, step: int,
                     states: list[dict[str, Any]]) -> None:
    """The stack after ``step`` steps, written atomically and checksummed (a complete file or the previous one)."""
    state = {"identity": json.dumps(_identity(config, runs)), "step": step,
             "params": {name: p.detach().cpu() for name, p in params.items()},
             "optimizer": optimizer.state_dict(), "losses": losses.cpu(), "rng_states": json.dumps(states)}
    save_torch_checked(path, state)


def _resume(path: Path, config: Table1Config, runs: list[Run], params: dict[str, torch.Tensor],
            optimizer: torch.optim.Optimizer, losses: torch.Tensor) -> tuple[int, list[dict[str, Any]]]:
    """Load the checkpoint at ``path`` into the stack; its step and generator states. Refuses one of another
    configuration; a damaged one names its file (:func:`~joma_lib.base.io.load_torch_checked`)."""
    state = load_torch_checked(path, map_location="cpu")
    identity = json.loads(state["identity"])
    if identity != _identity(config, runs):
        raise ValueError(f"{path} is a checkpoint of other settings ({identity['config']}), not of "
                         f"{config_record(config)}; use another --out folder")
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(state["params"][name])
        losses[:, :state["step"]] = state["losses"]
    optimizer.load_state_dict(state["optimizer"])
    return int(state["step"]), json.loads(state["rng_states"])


def _save_stack(path: Path, config: Table1Config, runs: list[Run], results: dict[RunKey, RunResult]) -> None:
    """A finished stack's runs (scores, losses) with what they are, written atomically."""
    keys = [(run.i_setting, run.i_seed, run.shuffled) for run in runs]
    arrays = {field: np.stack([getattr(results[key], field) for key in keys]) for field in RunResult._fields}
    write_npz(path, {"identity": np.array(json.dumps(_identity(config, runs))), **arrays}, checked=True)


def _read_stack(path: Path, config: Table1Config, runs: list[Run]) -> dict[RunKey, RunResult]:
    """A finished stack read back once it matches its sha256 (one damaged on disk is refused, naming the way out);
    one of other settings is refused."""
    try:
        data = read_checked(path)
    except DamagedFileError as err:
        raise ValueError(f"{err}; delete it and {checksum_path(path).name} to train its runs again") from None
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        if json.loads(str(npz["identity"])) != _identity(config, runs):
            raise ValueError(f"{path} holds finished runs of other settings, not of {config_record(config)}; use "
                             "another --out folder")
        arrays = {field: npz[field] for field in RunResult._fields}
    return {(run.i_setting, run.i_seed, run.shuffled): RunResult(*(arrays[field][r] for field in RunResult._fields))
            for r, run in enumerate(runs)}


def _save_finished(out: Path, config: Table1Config, outcome: StackedOutcome) -> None:
    """The result (with its manifest) and the losses (checksummed: an ``.npy`` has no CRC of its own); then the
    stacks' files and their checksums are no longer needed."""
    buffer = io.BytesIO()
    np.save(buffer, outcome.losses)
    write_checked(out / LOSSES, buffer.getbuffer())
    save_result(outcome.result, out / RESULT, config)
    for path in [*out.glob("stack-*.npz*"), *out.glob("stack-*.pt*")]:
        path.unlink()


def _read_finished(out: Path, config: Table1Config) -> StackedOutcome:
    """A finished folder read back; one of another configuration is refused, a damaged one (the result's zip CRC,
    the losses' sha256) named with the way out."""
    manifest = json.loads((out / RESULT).with_suffix(".json").read_text())
    if manifest.get("config") != config_record(config):
        raise ValueError(f"{out} holds a finished run of other settings ({manifest.get('config')}), not of "
                         f"{config_record(config)}; use another --out folder")
    try:
        return StackedOutcome(load_result(out / RESULT), np.load(io.BytesIO(read_checked(out / LOSSES)),
                                                                          allow_pickle=False))
    except (ValueError, EOFError, KeyError, OSError, zipfile.BadZipFile) as err:  # numpy's, zipfile's, ours
        raise ValueError(f"{out} holds a damaged finished Table 1 ({type(err).__name__}: {err}); delete the folder "
                         "to train the table again") from None


def _progress(progress: bool, start: int, total: int) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, desc="Table 1, stacked", leave=False)
