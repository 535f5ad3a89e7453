"""The performance chapter (`book/performance.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.performance.gpu import (
    launch_bound,
    loans_needed,
    op_count_rows,
    ops_per_layer,
    ops_per_run,
    paper_scale_goals,
    ratio_range,
    stack_costs,
    step_rows,
    table1_cost,
)
from joma_lib.chapters.performance.presentation import joint_loans, span
from joma_lib.base.cpu import bf16_support, cpu_identity, onednn_isa_limit
from joma_lib.lm.presets import preset_auto_choice
from joma_lib.base.stack_time import PLAN_SHARE

__all__ = [
    "PLAN_SHARE", "bf16_support", "cpu_identity", "joint_loans", "launch_bound",
    "loans_needed", "onednn_isa_limit", "op_count_rows", "ops_per_layer", "ops_per_run", "paper_scale_goals",
    "preset_auto_choice", "ratio_range", "span", "stack_costs", "step_rows", "table1_cost",
]
