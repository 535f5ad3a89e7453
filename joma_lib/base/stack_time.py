"""A stack's time, for stacks sized to the time left (the language model's sweep, :mod:`joma_lib.lm.stack_plan`,
and Table 1's runs, :mod:`joma_lib.theory.table1.stack_plan`).

A stacked step costs a part paid once per stack (its kernel launches, its fixed work) and a part per run (its
arithmetic, its run-sized tensors). So a cost measured at two stack sizes, one run and all ``runs`` waiting,
is taken as linear in the size ``R`` between them (:func:`linear_in_runs`), and a plan fills only
:data:`PLAN_SHARE` of the time left.
"""

from __future__ import annotations

#: the share of the time left that a plan may fill; the rest covers what the measurements leave out (checkpoint
#: writes, capturing or building the step, loading the data onto the device, a machine slower for a while)
PLAN_SHARE = 0.85


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
