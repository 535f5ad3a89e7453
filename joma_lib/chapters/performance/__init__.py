"""The performance chapter (`book/performance.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.performance.figures import UNCHANGED_NATS
from joma_lib.chapters.performance.gpu import (
    LOAN_MINUTES,
    LOAN_OVERHEAD_SECONDS,
    LOAN_RUN_SECONDS,
    launch_bound,
    layer_cost_over_authors,
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
from joma_lib.chapters.performance.presentation import fixed_stack_loans, joint_loans, span
from joma_lib.base.cpu import bf16_support, cpu_identity, onednn_isa_limit
from joma_lib.lm.presets import preset_auto_choice
from joma_lib.base.stack_time import PLAN_SHARE

__all__ = [
    "LOAN_MINUTES", "LOAN_OVERHEAD_SECONDS", "LOAN_RUN_SECONDS", "PLAN_SHARE", "UNCHANGED_NATS", "bf16_support",
    "cpu_identity", "fixed_stack_loans", "joint_loans", "launch_bound", "layer_cost_over_authors", "loans_needed",
    "onednn_isa_limit", "op_count_rows", "ops_per_layer", "ops_per_run", "paper_scale_goals", "preset_auto_choice",
    "ratio_range", "span", "stack_costs", "step_rows", "table1_cost",
]
