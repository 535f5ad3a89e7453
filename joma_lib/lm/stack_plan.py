"""Stacks sized to the time left: against a deadline, start only the stacks that will finish, each as large as fits.

On a lent GPU a stack still training when the loan ends is lost with the machine (its checkpoints, GBs, cannot
travel; :mod:`joma_lib.lm.stack`). Stacks of a fixed size (``--stack-size``) finish the ones that fit and spend the
rest of the loan on one that does not. ``lm run --stack --finish-within SECONDS`` stacks the runs not yet started
to fit the time instead:

* :func:`measure_cost` times, on this machine, the step and the evaluation of a stack of one run and of all the
  shape's waiting runs ``n``. Between the two, the time is taken as linear in the stack size ``R``
  (:func:`~joma_lib.base.stack_time.linear_in_runs`: a part paid once per stack, its kernel launches, and a part
  per run, its read-out and vocabulary-sized tensors). On an H200 at 5 layers: 2.65 ms for one run, 7.64 ms for
  seven (``lm_stack.json``). A stack then takes ``T(R) = steps * step(R) + evaluations * evaluation(R)`` seconds
  (:meth:`StackCost.seconds`).
* :func:`plan` picks at most one stack per shape (two stacks of a shape pay the per-stack part twice) so that the
  most runs finish within :data:`PLAN_SHARE` of the time; a tie goes to the plan with more layers, then to the
  shorter one.

The sweep (:func:`joma_lib.lm.sweep.run_sweep`) plans again before each stack it starts, with the time then left,
so a stack that ran faster or slower than measured changes what comes next. A stack that the plan started is
trained to its end even when its ``--stop-after`` comes first: it checkpoints there, and the next call resumes it
before planning anything new.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from joma_lib.base.device import synchronize
from joma_lib.base.stack_time import PLAN_SHARE, linear_in_runs
from joma_lib.lm.config import RunConfig
from joma_lib.lm.data import LMData, n_chunks
from joma_lib.lm.stack import probe_stack
from joma_lib.lm.stacked import evaluate_stack, stable_ranks
from joma_lib.base.validation import check_float

#: steps timed (after the warm-up) for each stack size measured
TIMED_STEPS = 20
#: validation chunks timed for an evaluation (then scaled to the chunks an evaluation reads)
TIMED_CHUNKS = 32


@dataclass(frozen=True)
class StackCost:
    """What a stack of ``R`` of a shape's ``runs`` waiting runs costs (``1 <= R <= runs``): ``step`` and
    ``evaluation`` (seconds) measured at ``R = 1`` and ``R = runs``, for runs of ``layers`` layers that train
    ``steps`` steps and evaluate ``evaluations`` times; ``start``, seconds a stack pays once before its steps
    (compiling its step, where the runs compile: not timed by :func:`measure_cost`, which times the step as
    written)."""

    runs: int
    layers: int
    steps: int
    evaluations: int
    step: tuple[float, float]
    evaluation: tuple[float, float]
    start: float = 0.0

    def seconds(self, r: int) -> float:
        """``T(R) = start + steps * step(R) + evaluations * evaluation(R)``, each linear in ``R`` between the two
        sizes measured."""
        return (self.start + self.steps * linear_in_runs(r, self.runs, *self.step)
                + self.evaluations * linear_in_runs(r, self.runs, *self.evaluation))


def plan(costs: Sequence[StackCost], limits: Sequence[int], seconds: float) -> list[int]:
    """How many runs of each shape to stack now, at most ``limits[i]`` of shape ``i`` (``0``: none of them): the
    sizes whose stacks together take at most ``PLAN_SHARE * seconds`` and finish the most runs; ties: more layers
    trained, then less time.

    Every combination is tried: the product of ``limit + 1`` over the shapes (1,408 for the paper's sweep).
    """
    check_float("seconds", seconds, 0)
    if len(limits) != len(costs) or any(not 0 <= n <= c.runs for c, n in zip(costs, limits, strict=False)):
        raise ValueError(f"limits must give each shape at most its measured runs {[c.runs for c in costs]}, "
                         f"got {list(limits)}")
    budget = PLAN_SHARE * seconds
    best: tuple[int, int, float] = (0, 0, 0.0)
    chosen = [0] * len(costs)
    for sizes in itertools.product(*(range(n + 1) for n in limits)):
        total = sum(c.seconds(r) for c, r in zip(costs, sizes, strict=True) if r)
        key = (sum(sizes), sum(r * c.layers for c, r in zip(costs, sizes, strict=True)), -total)
        if total <= budget and key > best:
            best, chosen = key, list(sizes)
    return chosen


def waiting(configs: Sequence[RunConfig], out_dir: str | Path) -> list[RunConfig]:
    """The runs of ``configs`` not yet started in ``out_dir``: neither a result nor a checkpoint in their folder."""
    out = Path(out_dir)
    return [c for c in configs if not any((out / c.name / f).exists() for f in ("result.json", "checkpoint.pt"))]



def _time_stack(group: Sequence[RunConfig], data: LMData, device: torch.device) -> tuple[float, float]:
    """Seconds of one training step and of one evaluation (every chunk it reads, and the stable ranks) of the
    stack of ``group``, measured on a throw-away stack of their models."""
    first = group[0]
    stepper, x, y = probe_stack(group, len(data.vocab), device, first.precision)
    stepper.warm_up(x, y)  # a GPU step is captured: time its replays
    synchronize(device)
    start = time.perf_counter()
    for _ in range(TIMED_STEPS):
        stepper.step(x, y)
    synchronize(device)
    step = (time.perf_counter() - start) / TIMED_STEPS
    valid = data.valid.to(device)
    chunks = n_chunks(valid, first.seq_len)
    chunks = chunks if first.eval_chunks is None else min(chunks, first.eval_chunks)
    timed = min(chunks, TIMED_CHUNKS)
    start = time.perf_counter()
    evaluate_stack(stepper.model, valid, first.seq_len, timed)
    stable_ranks(stepper.model)
    synchronize(device)
    return step, (time.perf_counter() - start) * chunks / timed


def measure_cost(group: Sequence[RunConfig], data: LMData, device: torch.device) -> StackCost:
    """The :class:`StackCost` of the runs ``group`` (one shape, not yet started, their precision decided), timed on
    ``data`` and ``device`` at one run and at all of them; the global random state is left as it was."""
    first = group[0]
    if first.precision == "auto":
        raise ValueError("measure_cost needs the runs' precision decided (stack_precision), got 'auto'")
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        one = _time_stack(group[:1], data, device)
        every = one if len(group) == 1 else _time_stack(group, data, device)
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the throw-away stacks' memory, and their captured graphs' pools
    return StackCost(len(group), first.n_layers, first.steps, len(first.checkpoints()), (one[0], every[0]),
                     (one[1], every[1]))


def describe(cost: StackCost, r: int) -> str:
    """One line: the stack's size and depth and its expected seconds."""
    return f"{r} run(s) of {cost.layers} layer(s), about {math.ceil(cost.seconds(r))} s"

