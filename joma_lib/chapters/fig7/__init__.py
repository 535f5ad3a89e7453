"""The fig7 chapter (`book/fig7.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.fig7.figures import (BOUNCE_FRACTION, BOUNCE_MIN_DROP, PYTHIA_CLAIM, draw_stable_rank,
                                           pythia_panels, standin_budget)
from joma_lib.base.io import InputUnavailableError
from joma_lib.lm.pythia import (FIG7_DENSE_BELOW, FIG7_SPARSE_EVERY, PYTHIA_MODEL, checkpoint_stable_ranks, fig7_steps,
                                pythia_steps)

__all__ = [
    "BOUNCE_FRACTION", "BOUNCE_MIN_DROP", "FIG7_DENSE_BELOW", "FIG7_SPARSE_EVERY", "InputUnavailableError",
    "PYTHIA_CLAIM", "PYTHIA_MODEL", "checkpoint_stable_ranks", "draw_stable_rank", "fig7_steps", "pythia_panels",
    "pythia_steps", "standin_budget",
]
