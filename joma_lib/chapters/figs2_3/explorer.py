"""The kernel-free explorer of the figs2_3 page (Theorem 1 over the bags and the temperature), drawn from its grid
figure's data."""

from __future__ import annotations

import numpy as np

from joma_lib.kit.explorer import Axes, Control, Explorer, Trace
from joma_lib.kit.registry import FigureData

from joma_lib.chapters.figs2_3.grid import THEOREM1_NC_FROM, smallest_nc


def theorem1_explorer(data: FigureData) -> Explorer:
    """Explorer of ``c-thm1-grid``: the invariant residual and NC(z-hat, z) over the run."""
    attentions, conc, temps, steps = data["attentions"], data["concentrations"], data["temperatures"], data["steps"]
    shape = (attentions.size, conc.size, temps.size)
    later = steps >= 1  # at step 0 z = z-hat and NC is undefined (z = 0 for exp/softmax)
    nc_min, final = smallest_nc(data), data["residual"][..., -1]
    titles = np.empty(shape, dtype=object)
    for index in np.ndindex(shape):
        a, c, k = index
        titles[index] = (f"{attentions[a]} attention, bag concentration {conc[c]:g}, \u03c4 = {temps[k]:g}<br>"
                         f"final residual {final[index]:.1e}, min NC(\u1e91, z) from step {THEOREM1_NC_FROM}: "
                         f"{nc_min[index]:.3f}")
    return Explorer(
        controls=(Control("attention", "attention", tuple(str(a) for a in attentions), kind="buttons"),
                  Control("concentration", "Dirichlet concentration of the bags", tuple(float(c) for c in conc)),
                  Control("temperature", "temperature \u03c4", tuple(float(t) for t in temps))),
        panels=(Axes("SGD step", "relative invariant residual", y_axis={"type": "log", "exponentformat": "power"}),
                Axes("SGD step", "NC(\u1e91, z)", y_axis={"range": [-0.05, 1.05]})),
        traces=(Trace(y=data["residual"][..., later], x=steps[later], name="residual", color="#1f77b4", panel=0),
                Trace(y=data["nc"][..., later], x=steps[later], name="NC(\u1e91, z)", color="#d62728", panel=1)),
        titles=titles,
    )
