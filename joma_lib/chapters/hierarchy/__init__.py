"""The hierarchy chapter (`book/hierarchy.md`): Theorem 5 and Fig. 5 (Table 1 is :mod:`joma_lib.chapters.table1`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.hierarchy.explorer import hierarchy_explorer
from joma_lib.chapters.hierarchy.figures import make_cooccurrence
from joma_lib.chapters.hierarchy.widget import cooccurrence_widget
from joma_lib.dynamics import blowup_time, integrate_linear
from joma_lib.softmax_dynamics import row_entropy
from joma_lib.latent_tree import (
    HBLT,
    association_dynamics,
    association_time,
    attention_from_association,
    cla_height,
    cla_height_matrix,
    cooccurrence_enumerate,
    cooccurrence_exact,
    cooccurrence_matrix,
    cooccurrence_monte_carlo,
    sample_hblt,
)

__all__ = [
    "HBLT", "association_dynamics", "association_time", "attention_from_association", "blowup_time", "cla_height",
    "cla_height_matrix", "cooccurrence_enumerate", "cooccurrence_exact", "cooccurrence_matrix",
    "cooccurrence_monte_carlo", "cooccurrence_widget", "hierarchy_explorer", "integrate_linear", "make_cooccurrence",
    "row_entropy", "sample_hblt",
]
