"""The fig5 chapter (`book/fig5.md`): Paper Fig. 5, the order in which a query is associated with the tokens of a
latent tree, and the kernel-free explorer over tree height and polarity (Theorem 5 is
:mod:`joma_lib.chapters.hierarchy`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.fig5.explorer import hierarchy_explorer
from joma_lib.chapters.fig5.query import linear_query_run, query_run
from joma_lib.theory.latent_tree import HBLT, cla_height_matrix, cooccurrence_matrix
from joma_lib.theory.softmax_dynamics import row_entropy

__all__ = [
    "HBLT", "cla_height_matrix", "cooccurrence_matrix", "hierarchy_explorer", "linear_query_run", "query_run",
    "row_entropy",
]
