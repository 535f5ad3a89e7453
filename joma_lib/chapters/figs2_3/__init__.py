"""The figs2_3 chapter (`book/figs2_3.md`): Theorem 1 in the paper's experiments, softmax attention, Figs. 2 and 3.

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.figs2_3.explorer import theorem1_explorer
from joma_lib.chapters.figs2_3.figures import v_node0_late_growth
from joma_lib.chapters.figs2_3.readings import (fig2_readings, grid_readings, softmax_nc_by_concentration,
                                              softmax_residual_sources)

__all__ = ["fig2_readings", "grid_readings", "softmax_nc_by_concentration", "softmax_residual_sources",
           "theorem1_explorer", "v_node0_late_growth"]
