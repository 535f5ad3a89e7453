"""The theorems3_4 chapter (`book/theorems3_4.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.theorems3_4.widget import ModifiedMLPWidget, modified_mlp_widget
from joma_lib.dynamics import convergence_rate_ratio, integrate_nonlinear
from joma_lib.softmax_dynamics import fig4_mu, row_entropy, simulate_softmax_attention, softmax_attention
from joma_lib.nonlinear import decayed_update, toy_mixture, two_cluster_mixture

__all__ = [
    "ModifiedMLPWidget", "convergence_rate_ratio", "decayed_update", "fig4_mu", "integrate_nonlinear",
    "modified_mlp_widget", "row_entropy", "simulate_softmax_attention", "softmax_attention", "toy_mixture",
    "two_cluster_mixture",
]
