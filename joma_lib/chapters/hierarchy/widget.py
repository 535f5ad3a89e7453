"""Live-kernel widget of Theorem 5: co-occurrence in the latent tree against the paper's 1 - H/L.

The reader sets the height ``L`` of the tree, the polarity ``rho`` (or ties it to ``1 - 1/L``),
the channel (symmetric or "inheritance") and the height ``H`` of the common ancestor to
highlight. Each change recomputes the exact co-occurrence by message passing
(:func:`cooccurrence_view`, from :func:`joma_lib.theory.latent_tree.cooccurrence_exact`) for every ``H`` and redraws
a persistent figure (:class:`CooccurrenceDrawing`) into a PNG image widget, through the one widget API
(:class:`joma_lib.kit.widget.LiveWidget`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from joma_lib.theory.latent_tree import HBLT, cooccurrence_approx, cooccurrence_exact
from joma_lib.base.validation import check_choice, check_int
from joma_lib.kit.widget import LiveWidget, Values

CHANNELS = {"symmetric: P[child = parent] = (1 + rho)/2": None, "inheritance: off parent -> off child": 0.0}


def cooccurrence_curve(tree_height: int, rho: float, off_rate: float | None) -> np.ndarray:
    """Exact ``P[l | m]`` for ``H = 1..tree_height`` in a binary tree with a binary root."""
    tree = HBLT(tree_height=tree_height, rho=rho, off_rate=off_rate)
    return np.array([cooccurrence_exact(tree, 2 ** (H - 1), 0) for H in range(1, tree_height + 1)])


class CooccurrenceView(NamedTuple):
    """Heights ``H = 1..L``, the exact ``P[l | m]``, the paper's ``1 - H/L`` and the highlighted height."""

    heights: np.ndarray
    exact: np.ndarray
    approx: np.ndarray
    height: int


def cooccurrence_view(tree_height: int = 8, tie_rho: bool = True, rho: float = 0.875,
                      channel: str = next(iter(CHANNELS)), height: int = 2) -> CooccurrenceView:
    """The widget's computation: the exact co-occurrence for every height and ``1 - H/L`` (Theorem 5).

    ``tie_rho`` uses ``rho = 1 - 1/L``; ValueError (naming the parameter) for a value it cannot honour.
    """
    tree_height = check_int("tree_height (L)", tree_height, 2)
    height = check_int("height (H)", height, 1, tree_height)
    off_rate = CHANNELS[check_choice("channel", channel, CHANNELS)]
    rho = 1 - 1 / tree_height if tie_rho else rho
    H = np.arange(1, tree_height + 1)
    return CooccurrenceView(H, cooccurrence_curve(tree_height, rho, off_rate), cooccurrence_approx(H, tree_height),
                            height)


def cooccurrence_summary(view: CooccurrenceView, values: Values) -> str:
    """The status line: exact value, the paper's approximation and their difference at the highlighted height."""
    h = view.height
    return (f"H = {h}: exact P[l|m] = {view.exact[h - 1]:.4f}, 1 - H/L = {view.approx[h - 1]:.4f}, "
            f"difference {view.exact[h - 1] - view.approx[h - 1]:+.4f}")


class CooccurrenceDrawing:
    """A persistent figure redrawn for each :class:`CooccurrenceView`."""

    def __init__(self) -> None:
        self.figure = Figure(figsize=(6.5, 3.6), layout="constrained")
        self.ax = self.figure.subplots()

    def __call__(self, view: CooccurrenceView, values: Values) -> Figure:
        ax, h = self.ax, view.height
        ax.clear()
        ax.plot(view.heights, view.exact, "o-", label="exact (message passing)")
        ax.plot(view.heights, view.approx, "k--", label="1 - H/L (paper)")
        ax.plot([h], [view.exact[h - 1]], "o", ms=12, mfc="none", mec="C3")
        ax.set_xlabel("height H of the common ancestor")
        ax.set_ylabel("P[l | m]")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
        return self.figure


class CooccurrenceWidget(LiveWidget):
    """The Theorem 5 widget: its controls -> :func:`cooccurrence_view` -> :class:`CooccurrenceDrawing`."""

    def __init__(self, tree_height: int = 8, rho: float = 0.875, tie_rho: bool = True, height: int = 2) -> None:
        style = {"description_width": "10em"}
        slider = {"continuous_update": False, "style": style, "layout": widgets.Layout(width="26em")}
        controls = {
            "tree_height": widgets.IntSlider(min=2, max=20, description="tree height L", **slider),
            "tie_rho": widgets.Checkbox(description="rho = 1 - 1/L", style=style),
            "rho": widgets.FloatSlider(min=0.05, max=1.0, step=0.005, description="polarity rho",
                                       readout_format=".3f", **slider),
            "channel": widgets.Dropdown(options=list(CHANNELS), description="channel", style=style,
                                        layout=widgets.Layout(width="26em")),
            "height": widgets.IntSlider(min=1, max=20, description="highlight H", **slider),
        }
        # the highlight's max follows L
        if isinstance(tree_height, int) and isinstance(height, int) and 2 <= tree_height < height <= 20:
            raise ValueError(f"height must be an integer in [1, tree_height={tree_height}], got {height!r}")
        super().__init__(controls, cooccurrence_view, CooccurrenceDrawing(), summary=cooccurrence_summary,
                         initial={"tree_height": tree_height, "tie_rho": tie_rho, "rho": rho, "height": height})

    def link(self) -> None:
        """The highlighted height stays within the tree; a tied ``rho`` follows ``L`` (and is greyed out)."""
        c = self.controls
        c["height"].max = c["tree_height"].value
        c["rho"].disabled = c["tie_rho"].value
        if c["tie_rho"].value:
            c["rho"].value = 1 - 1 / c["tree_height"].value


def cooccurrence_widget(**kwargs: Any) -> widgets.Widget:
    """The widget for a notebook cell (needs a live kernel to react)."""
    return CooccurrenceWidget(**kwargs).widget
