"""The theorem3 chapter (`book/theorem3.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.theorem3.exercises import bias_rest_points, fixed_point_rest
from joma_lib.chapters.theorem3.figures import relu_figure_settings
from joma_lib.chapters.theorem3.widget import theorem3_widget
from joma_lib.theory.nonlinear import decayed_update, toy_mixture, two_cluster_mixture
from joma_lib.theory.softmax_dynamics import entropy_drop_and_rise, fig4_mu, row_entropy, simulate_softmax_attention

__all__ = [
    "bias_rest_points", "decayed_update", "entropy_drop_and_rise", "fig4_mu", "fixed_point_rest",
    "relu_figure_settings", "row_entropy", "simulate_softmax_attention", "theorem3_widget", "toy_mixture",
    "two_cluster_mixture",
]
