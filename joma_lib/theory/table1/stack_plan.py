"""Table 1's stacks sized to the time left: ``python -m joma_lib table1 --stack --out DIR --finish-within SECONDS``.

On a lent GPU a stack still training when the loan ends is lost with the machine (its checkpoint, GBs, cannot
travel; :mod:`joma_lib.theory.table1.stacked_run`), and stacks of a fixed size finish those that fit and spend the
rest of the loan on one that does not. Sized to the time left instead, Table 1's runs also fill what a loan has
left after the language model's stacks (``benchmarks/gpu_checks.sh``), a few runs at a time.

:func:`measure_cost` times, on this machine, a training step of a stack of one run and of the largest stack
wanted, and what one run costs outside its steps (building its network and data, scoring it); a stack of ``R``
runs then takes ``steps * step(R) + R * per_run`` seconds, ``step(R)`` on the line between the two sizes timed
(:func:`~joma_lib.base.stack_time.linear_in_runs`). :class:`FittedSizes` stacks, before each stack, as many of
the runs waiting as finish within :data:`~joma_lib.base.stack_time.PLAN_SHARE` of the time left (a measurement
made here in the last hours is taken again: :func:`~joma_lib.base.stack_time.remembered_cost`). The step is
timed as written, not compiled (a compile per size timed would cost more than it tells): a compiled stack
finishes early, and the next plan has the time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from joma_lib.base.device import synchronize
from joma_lib.base.stack_time import PLAN_SHARE, DeadlineReached, linear_in_runs, remembered_cost
from joma_lib.base.validation import check_float, check_int
from joma_lib.theory.table1.model import Table1Config, training_precision
from joma_lib.theory.table1.runs import config_record
from joma_lib.theory.table1.stacked import stack_runs
from joma_lib.theory.table1.stacked_run import ProbeStack, probe_stack, probe_step, score_runs

#: steps timed (after :data:`WARMUP_STEPS`) for each stack size measured
TIMED_STEPS = 5
WARMUP_STEPS = 2


@dataclass(frozen=True)
class Table1StackCost:
    """What a stack of ``R`` runs (``1 <= R <= runs``) of ``steps`` steps costs: ``step`` (seconds) timed at
    ``R = 1`` and ``R = runs``, and ``per_run``, one run's seconds outside its steps."""

    runs: int
    steps: int
    step: tuple[float, float]
    per_run: float

    def seconds(self, r: int) -> float:
        """``steps * step(R) + R * per_run``."""
        return self.steps * linear_in_runs(r, self.runs, *self.step) + r * self.per_run

    def fitting(self, seconds: float) -> int:
        """The largest stack that takes at most ``PLAN_SHARE * seconds`` (0: not even one run)."""
        check_float("seconds", seconds, 0)
        return max((r for r in range(1, self.runs + 1) if self.seconds(r) <= PLAN_SHARE * seconds), default=0)



def _time_step(probe: ProbeStack, config: Table1Config, device: torch.device) -> float:
    """Seconds of one training step of the throw-away stack ``probe``, in the configuration's training precision."""
    with training_precision(config, device):
        for _ in range(WARMUP_STEPS):
            probe_step(probe)
        start = time.perf_counter()
        for _ in range(TIMED_STEPS):
            probe_step(probe)  # synchronised on a GPU
    return (time.perf_counter() - start) / TIMED_STEPS


def measure_cost(config: Table1Config, n_runs: int, device: torch.device) -> Table1StackCost:
    """The :class:`Table1StackCost` of stacks of up to ``n_runs`` of ``config``'s runs, timed on ``device`` in its
    training precision: the stack of one run is built, stepped and scored (its run's cost outside its steps), that
    of ``n_runs`` built and stepped; the global random state is left as it was."""
    n_runs = check_int("n_runs", n_runs, 1, len(stack_runs(config)))
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        start = time.perf_counter()
        probe = probe_stack(config, 1, device)
        built = time.perf_counter() - start
        one = _time_step(probe, config, device)
        start = time.perf_counter()
        score_runs(config, stack_runs(config)[:1], probe.params, np.zeros((1, config.steps)), device)
        synchronize(device)
        per_run = built + time.perf_counter() - start
        every = one if n_runs == 1 else _time_step(probe_stack(config, n_runs, device), config, device)
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the throw-away stacks' memory
    return Table1StackCost(n_runs, config.steps, (one, every), per_run)


class FittedSizes:
    """The stack sizes (:data:`~joma_lib.theory.table1.stacked_run.StackSizes`) of stacks of the runs in ``out``
    sized to finish within ``finish_within`` seconds from now, at most ``cap`` runs each: given the runs waiting, as
    many as finish within :data:`PLAN_SHARE` of the time then left (the cost measured once, :func:`measure_cost`,
    at the largest size then wanted, or kept from an earlier call); raises
    :class:`~joma_lib.base.stack_time.DeadlineReached` when not even one run does. Each plan and each stack's time
    against its plan go to ``log``."""

    def __init__(self, config: Table1Config, device: torch.device, out: Path, finish_within: float,
                 cap: int | None = None, log: Callable[[str], None] = print) -> None:
        check_float("finish_within", finish_within, 0, low_open=True)
        self.config, self.device, self.out, self.log = config, device, out, log
        self.cap = len(stack_runs(config)) if cap is None else check_int("cap", cap, 1, len(stack_runs(config)))
        self.finish_by = time.time() + finish_within
        self.cost: Table1StackCost | None = None
        self._last: tuple[float, float, int] | None = None  # the last stack's start, planned seconds, runs

    def __call__(self, waiting: int) -> int:
        self.report()
        limit = min(waiting, self.cap)
        if self.cost is None or self.cost.runs < limit:
            self.cost, now = remembered_cost(self.out, {"table1": config_record(self.config)}, limit, self.device,
                                             Table1StackCost, lambda: measure_cost(self.config, limit, self.device))
            when = "timed" if now else "timed earlier"
            self.log(f"{when} on {self.device.type}: a step {1e3 * self.cost.step[0]:.2f} ms for one run, "
                     f"{1e3 * self.cost.step[1]:.2f} ms for {self.cost.runs}; {self.cost.per_run:.1f} s a run "
                     "outside its steps")
        left = max(self.finish_by - time.time(), 0.0)
        r = min(self.cost.fitting(left), limit)
        if r == 0:
            raise DeadlineReached(f"{waiting} Table 1 run(s) not started: a stack of one needs about "
                                  f"{math.ceil(self.cost.seconds(1))} s, {left:.0f} s are left (a plan fills "
                                  f"{PLAN_SHARE:.0%} of them)")
        self.log(f"planned with {left:.0f} s left: a stack of {r} Table 1 run(s), about "
                 f"{math.ceil(self.cost.seconds(r))} s")
        self._last = (time.perf_counter(), self.cost.seconds(r), r)
        return r

    def report(self) -> None:
        """Log the last stack planned: its seconds against its plan (called before the next plan, and by the
        caller once the stacks are done)."""
        if self._last is not None:
            start, planned, r = self._last
            self.log(f"a stack of {r} Table 1 run(s): done in {time.perf_counter() - start:.0f} s (planned "
                     f"{planned:.0f} s)")
            self._last = None
