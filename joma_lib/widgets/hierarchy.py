"""Live-kernel explorer of Theorem 5: co-occurrence in the latent tree against the paper's 1 - H/L.

The reader sets the height ``L`` of the tree, the polarity ``rho`` (or ties it to ``1 - 1/L``),
the channel (symmetric or "inheritance") and the height ``H`` of the common ancestor to
highlight. Each change recomputes the exact co-occurrence by message passing
(:func:`joma_lib.hierarchy.cooccurrence_exact`) for every ``H`` and redraws a persistent
figure into a PNG image widget.
"""

from __future__ import annotations

import io
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from joma_lib.figures.style import figure_style
from joma_lib.hierarchy import HBLT, cooccurrence_approx, cooccurrence_exact

CHANNELS = {"symmetric: P[child = parent] = (1 + rho)/2": None, "inheritance: off parent -> off child": 0.0}


def cooccurrence_curve(depth: int, rho: float, off_rate: float | None) -> np.ndarray:
    """Exact ``P[l | m]`` for ``H = 1..depth`` in a binary tree with a binary root."""
    tree = HBLT(depth=depth, rho=rho, off_rate=off_rate)
    return np.array([cooccurrence_exact(tree, 2 ** (H - 1), 0) for H in range(1, depth + 1)])


class CooccurrenceExplorer:
    """Controls, a persistent figure and the redraw that links them."""

    def __init__(self, depth: int = 8, rho: float = 0.875, tie_rho: bool = True, height: int = 2) -> None:
        style = {"description_width": "10em"}
        slider = {"continuous_update": False, "style": style, "layout": widgets.Layout(width="26em")}
        self.controls = {
            "depth": widgets.IntSlider(value=depth, min=2, max=20, description="tree height L", **slider),
            "tie_rho": widgets.Checkbox(value=tie_rho, description="rho = 1 - 1/L", style=style),
            "rho": widgets.FloatSlider(value=rho, min=0.05, max=1.0, step=0.005, description="polarity rho",
                                       readout_format=".3f", **slider),
            "channel": widgets.Dropdown(options=list(CHANNELS), description="channel", style=style,
                                        layout=widgets.Layout(width="26em")),
            "height": widgets.IntSlider(value=height, min=1, max=depth, description="highlight H", **slider),
        }
        self.image = widgets.Image(format="png")
        self.readout = widgets.HTML()
        self.figure = Figure(figsize=(6.5, 3.6), layout="constrained")
        self.ax = self.figure.subplots()
        self._busy = False
        for control in self.controls.values():
            control.observe(lambda _: self.redraw(), names="value")
        self.redraw()

    def redraw(self) -> None:
        """Recompute the curve for the current controls and redraw."""
        if self._busy:  # a control changed by the redraw itself
            return
        self._busy = True
        try:
            self._redraw()
        finally:
            self._busy = False

    def _redraw(self) -> None:
        c = self.controls
        L = c["depth"].value
        c["height"].max = L
        c["rho"].disabled = c["tie_rho"].value
        if c["tie_rho"].value:
            c["rho"].value = 1 - 1 / L
        rho, off_rate = c["rho"].value, CHANNELS[c["channel"].value]
        H = np.arange(1, L + 1)
        exact = cooccurrence_curve(L, rho, off_rate)
        approx = cooccurrence_approx(H, L)
        h = c["height"].value
        ax = self.ax
        ax.clear()
        with figure_style():
            ax.plot(H, exact, "o-", label="exact (message passing)")
            ax.plot(H, approx, "k--", label="1 - H/L (paper)")
            ax.plot([h], [exact[h - 1]], "o", ms=12, mfc="none", mec="C3")
            ax.set_xlabel("height H of the common ancestor")
            ax.set_ylabel("P[l | m]")
            ax.set_ylim(-0.02, 1.02)
            ax.legend(fontsize=8)
            buffer = io.BytesIO()
            FigureCanvasAgg(self.figure).print_png(buffer)
        self.image.value = buffer.getvalue()
        self.readout.value = (f"H = {h}: exact P[l|m] = {exact[h - 1]:.4f}, 1 - H/L = {approx[h - 1]:.4f}, "
                              f"difference {exact[h - 1] - approx[h - 1]:+.4f}")

    def panel(self) -> widgets.Widget:
        """Controls on the left, figure and readout on the right."""
        return widgets.HBox([widgets.VBox(list(self.controls.values())), widgets.VBox([self.image, self.readout])])


def cooccurrence_panel(**kwargs: Any) -> widgets.Widget:
    """The explorer panel for a notebook cell (needs a live kernel to react)."""
    return CooccurrenceExplorer(**kwargs).panel()
