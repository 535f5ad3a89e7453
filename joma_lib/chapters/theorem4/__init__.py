"""The theorem4 chapter (`book/theorem4.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.theorem4.exercises import convergence_offsets, entropy_run
from joma_lib.chapters.theorem4.figures import authors_float32_entropy, underflow_time
from joma_lib.chapters.theorem4.widget import ModifiedMLPWidget, modified_mlp_widget
from joma_lib.theory.dynamics import convergence_rate_ratio
from joma_lib.theory.softmax_dynamics import fig4_mu, row_entropy, simulate_softmax_attention, softmax_attention

__all__ = [
    "ModifiedMLPWidget", "authors_float32_entropy", "convergence_offsets", "convergence_rate_ratio", "entropy_run",
    "fig4_mu", "modified_mlp_widget", "row_entropy", "simulate_softmax_attention", "softmax_attention",
    "underflow_time",
]
