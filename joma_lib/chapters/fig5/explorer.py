"""The kernel-free explorer of the Fig. 5 page, drawn from its grid figure's data."""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_hex

from joma_lib.kit.explorer import Axes, Control, Explorer, Trace
from joma_lib.kit.registry import FigureData


def hierarchy_explorer(data: FigureData) -> Explorer:
    """Explorer of ``c-hierarchy-grid``: co-occurrence by height, association over time, attention entropy."""
    tree_heights, rhos, times = data["tree_heights"], data["rhos"], data["times"]
    shape = (tree_heights.size, rhos.size)
    h_max = data["cooccurrence"].shape[-1]
    # heights 1..L of each tree (NaN beyond), so that the axis spans the tree shown
    heights = np.where(np.arange(1, h_max + 1) <= tree_heights[:, None, None], np.arange(1, h_max + 1), np.nan)
    heights = np.broadcast_to(heights, shape + (h_max,))
    colours = [to_hex(c) for c in colormaps["viridis"](np.linspace(0, 0.92, h_max))]
    t90 = data["assoc_time"]
    percent = f"{float(data['fraction']):.0%}"
    names = np.empty(shape + (h_max,), dtype=object)
    titles = np.empty(shape, dtype=object)
    for i, L in enumerate(tree_heights):
        for j, rho in enumerate(rhos):
            names[i, j] = [f"H = {h}: {percent} at t = {t90[i, j, h - 1]:.2f}" if h <= L else ""
                           for h in range(1, h_max + 1)]
            tied = " (= 1 \u2212 1/L, the tie of our reconstruction)" if np.isclose(rho, 1 - 1 / L) else ""
            titles[i, j] = (f"tree height L = {L}, polarity \u03c1 = {rho:g}{tied}<br>nearest token (H = 1) "
                            f"associated at t = {t90[i, j, 0]:.2f}, farthest (H = {L}) at "
                            f"t = {t90[i, j, L - 1]:.2f}")
    approx = np.broadcast_to(data["approx"][:, None, :], shape + (h_max,))
    traces = [Trace(y=data["cooccurrence"], x=heights, name="exact P[l | m]", color="#1f77b4", panel=0,
                    style={"mode": "lines+markers"}),
              Trace(y=approx, x=heights, name="1 \u2212 H/L (paper)", color="black", panel=0,
                    style={"line": {"dash": "dash", "width": 1}})]
    traces += [Trace(y=data["association"][:, :, h], x=times, name=names[..., h], color=colours[h], panel=1,
                     style={"showlegend": False, "hovertemplate": "%{fullData.name}<extra></extra>"})
               for h in range(h_max)]
    traces.append(Trace(y=data["entropy"], x=times, name="attention entropy of the query", color="#d62728",
                        panel=2))
    return Explorer(
        controls=(Control("tree_height", "tree height L", tuple(int(L) for L in tree_heights)),
                  Control("rho", "polarity \u03c1", tuple(float(r) for r in rhos))),
        panels=(Axes("height H of the common ancestor", "co-occurrence P[l | m]", y_axis={"range": [0.0, 1.02]}),
                Axes("time t", "association v<sub>l</sub>/\u03bc<sub>l</sub> (colour: H, yellow = far)",
                      y_axis={"range": [0, 1.02]}),
                Axes("time t", "attention entropy (nats)", y_axis={"rangemode": "tozero"})),
        traces=tuple(traces), titles=titles, digits=3,
    )
