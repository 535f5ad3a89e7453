"""The performance chapter (`book/performance.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.performance.figures import bf16_inside_fp32_band
from joma_lib.chapters.performance.gpu import (
    launch_bound,
    op_count_rows,
    ops_per_layer,
    paper_scale_goals,
    ratio_range,
    step_rows,
)
from joma_lib.base.cpu import bf16_support, cpu_identity, onednn_isa_limit
from joma_lib.lm.presets import preset_auto_choice

__all__ = [
    "bf16_inside_fp32_band", "bf16_support", "cpu_identity", "launch_bound", "onednn_isa_limit", "op_count_rows",
    "ops_per_layer", "paper_scale_goals", "preset_auto_choice", "ratio_range", "step_rows",
]
