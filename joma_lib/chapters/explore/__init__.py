"""The explore chapter (`book/explore.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.explore.explorer import FIG4_INITIAL, fig4_explorer
from joma_lib.chapters.explore.figures import MODES
from joma_lib.theory.softmax_dynamics import simulate_softmax_attention

__all__ = [
    "FIG4_INITIAL", "MODES", "fig4_explorer", "simulate_softmax_attention",
]
