"""The theorem1 chapter (`book/theorem1.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.theory.block import train
from joma_lib.chapters.theorem1.readings import flow_readings, linear_step, residual_readings
from joma_lib.chapters.theorem1.widget import simulate, theorem1_widget
from joma_lib.theory.invariants import flow_check, logit_move, theorem1_toy, toy_check

__all__ = [
    "flow_check", "flow_readings", "linear_step", "logit_move", "residual_readings", "simulate", "theorem1_toy",
    "theorem1_widget", "toy_check", "train",
]
