"""A stack's time, for stacks sized to the time left (the language model's sweep, :mod:`joma_lib.lm.stack_plan`,
and Table 1's runs, :mod:`joma_lib.theory.table1.stack_plan`).

A stacked step costs a part paid once per stack (its kernel launches, its fixed work) and a part per run (its
arithmetic, its run-sized tensors). So a cost measured at two stack sizes, one run and all ``runs`` waiting,
is taken as linear in the size ``R`` between them (:func:`linear_in_runs`), and a plan fills only
:data:`PLAN_SHARE` of the time left. Measuring builds and times throw-away stacks (tens of seconds on a GPU at the
paper's sizes), so a cost is kept in the runs' output folder and taken again there on the same machine for
:data:`REMEMBER_SECONDS` (:func:`remembered_cost`): a GPU loan's second call plans with its first call's
measurement.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from joma_lib.base.cpu import cache_file
from joma_lib.base.io import atomic_path

#: the share of the time left that a plan may fill; the rest covers what the measurements leave out (checkpoint
#: writes, capturing or building the step, loading the data onto the device, a machine slower for a while)
PLAN_SHARE = 0.85
#: the largest share of a stack's time that its checkpoints may take (the next waits 1 / CHECKPOINT_SHARE times as
#: long as the last took to write): on a GPU a stack's checkpoints are GBs, seconds to write, and insurance only
#: (the one a deadline or an interrupted call resumes from is what counts)
CHECKPOINT_SHARE = 0.05
#: how long a measured cost is taken again on the same machine: a GPU loan lasts minutes; a day later the machine
#: or its load may differ
REMEMBER_SECONDS = 6 * 3600


def linear_in_runs(r: int, runs: int, at_one: float, at_all: float) -> float:
    """The cost of a stack of ``r`` runs, ``1 <= r <= runs``, on the line through ``(1, at_one)`` and
    ``(runs, at_all)``."""
    if not 1 <= r <= runs:
        raise ValueError(f"r must be in [1, {runs}] (the runs waiting, the largest stack measured), got {r}")
    share = 0.0 if runs == 1 else (r - 1) / (runs - 1)
    return at_one + share * (at_all - at_one)


class DeadlineReached(Exception):
    """Stacked runs stopped at a deadline: at the time given (``--stop-after``), with the unfinished runs
    checkpointed, or with runs left that no stack sized to the time left (``--finish-within``) finishes in time.
    Finished runs are kept; a command line exits 75 on it (try again later: a later call continues)."""


class MeasuredCost(Protocol):
    """A measured cost of stacks of up to ``runs`` runs (a frozen dataclass of numbers and pairs of numbers)."""

    @property
    def runs(self) -> int: ...


CostT = TypeVar("CostT", bound=MeasuredCost)


def _cost_path(folder: Path, key: Mapping[str, Any], device: torch.device) -> Path:
    machine = {"probe": cache_file().name, "torch": torch.__version__, "threads": torch.get_num_threads(),
               "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None}
    text = json.dumps({**machine, **key}, sort_keys=True, default=str)
    return folder / f".stack-cost-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"


def remembered_cost(folder: Path, key: Mapping[str, Any], runs: int, device: torch.device, kind: type[CostT],
                    measure: Callable[[], CostT], clock: Callable[[], float] = time.time) -> tuple[CostT, bool]:
    """The cost of stacks of up to ``runs`` runs of what ``key`` names (shapes, steps, precision) on ``device``:
    one kept in ``folder`` (the runs' output folder, a hidden file), measured on this machine (its CPU, torch,
    threads and GPU) less than :data:`REMEMBER_SECONDS` ago for at least ``runs`` runs (a smaller stack lies on its
    line), else ``measure()``, then kept there (a folder that cannot be written means measuring again next time).
    Returns the cost and whether it was measured now."""
    path = _cost_path(folder, key, device)
    try:
        stored = json.loads(path.read_text())
        cost = kind(**{name: tuple(v) if isinstance(v, list) else v for name, v in stored["cost"].items()})
        if cost.runs >= runs and 0 <= clock() - float(stored["measured_at"]) < REMEMBER_SECONDS:
            return cost, False
    except (OSError, ValueError, TypeError, KeyError):
        pass  # none kept, or unreadable: measured again
    cost = measure()
    record = {"measured_at": clock(), "key": dict(key), "cost": dataclasses.asdict(cost)}  # type: ignore[call-overload]
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(record, default=str) + "\n")
    except OSError:
        pass
    return cost, True
