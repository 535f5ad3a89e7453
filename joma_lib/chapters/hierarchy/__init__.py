"""The hierarchy chapter (`book/hierarchy.md`): Theorem 5, co-occurrence in a latent tree (Fig. 5 is
:mod:`joma_lib.chapters.fig5`, Table 1 :mod:`joma_lib.chapters.table1`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.hierarchy.figures import COOCCURRENCE_SAMPLES
from joma_lib.chapters.hierarchy.widget import cooccurrence_widget
from joma_lib.theory.latent_tree import (
    HBLT,
    cla_height,
    cooccurrence_enumerate,
    cooccurrence_exact,
    cooccurrence_monte_carlo,
    sample_hblt,
)

__all__ = [
    "COOCCURRENCE_SAMPLES", "HBLT", "cla_height", "cooccurrence_enumerate", "cooccurrence_exact",
    "cooccurrence_monte_carlo", "cooccurrence_widget", "sample_hblt",
]
