"""Interactive check of Theorem 1: pick the attention kind, the activation, the learning-rate ratio
``eta_z / eta_w`` and a seed; a short SGD run of :func:`joma_lib.theory.invariants.theorem1_toy` is redone and the
invariant residual is redrawn.

:func:`simulate` (computing) and :class:`CheckDrawing` (drawing) are plain library code; :func:`theorem1_live_widget`
wires them to ipywidgets through :class:`joma_lib.kit.widget.LiveWidget` (it needs a live kernel; on the static
book page it shows but does not react). To keep a redraw short (``benchmarks/bench_theorem1_widget.py``, the
Performance page), the run uses the numpy engine of :func:`joma_lib.theory.invariants.toy_check` (hand-written
gradients, the same run as the torch reference up to rounding), and the figure is built once: only its data, limits and
title change at each redraw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, MaxNLocator, NullLocator

from joma_lib.theory.attention_kinds import ATTENTION_KINDS, attention_kind
from joma_lib.theory.block import ACTIVATIONS
from joma_lib.kit.style import figure_style
from joma_lib.theory.invariants import toy_check

if TYPE_CHECKING:  # the library itself does not need ipywidgets
    import ipywidgets

    from joma_lib.kit.widget import LiveWidget

LR_RATIOS = (0.25, 0.5, 1.0, 2.0, 4.0)


def simulate(attention: str = "exp", phi: str = "relu", lr_ratio: float = 1.0, seed: int = 0,
             steps: int = 150) -> dict[str, np.ndarray]:
    """The widget's run: :func:`joma_lib.theory.invariants.toy_check` with ``steps`` SGD steps at ``lr_w = 0.1``, on
    its numpy engine (the torch engine, the reference, for a kind registered without a numpy score)."""
    engine = "numpy" if attention_kind(attention).score is not None else "torch"
    return toy_check(attention, phi, seed, steps=steps, lr_ratio=lr_ratio, engine=engine)


def check_title(data: dict[str, np.ndarray], values: dict[str, Any]) -> str:
    """The drawing's title: the settings and the final residual."""
    return (f"{values['attention']} attention, phi = {values['phi']}, eta_z/eta_w = {values['lr_ratio']:g}, "
            f"seed {values['seed']}: final residual {data['residual'][-1]:.1e}")


class CheckDrawing:
    """A persistent two-panel figure whose artists are updated in place at each redraw.

    Left: the relative invariant residual over the run (log scale), scaled by ``eta_z/eta_w`` as Theorem 1
    says and with the ratio ignored. Right: the final logits ``z_l`` against Theorem 1's prediction
    ``z-hat_l`` (dotted: ``z = z-hat``). Fixed margins instead of a layout engine, and a few major ticks per
    axis (no minor ticks): the layout pass and the text of the tick labels were most of a redraw's time.
    """

    def __init__(self) -> None:
        with figure_style():
            self.figure = Figure(figsize=(9, 3.2), dpi=80)
            FigureCanvasAgg(self.figure)
            self.ax_r, self.ax_z = self.figure.subplots(1, 2, gridspec_kw={"left": 0.08, "right": 0.98,
                                                                            "bottom": 0.15, "top": 0.88,
                                                                            "wspace": 0.22})
            self.scaled, = self.ax_r.semilogy([], [], label=r"scaled by $\eta_z/\eta_w$ (Theorem 1)")
            self.unscaled, = self.ax_r.semilogy([], [], "--", label="ratio ignored")
            self.ax_r.set_xlabel("SGD step")
            self.ax_r.set_ylabel("relative invariant residual")
            self.ax_r.legend(fontsize=8, loc="lower right")
            self.ax_r.yaxis.set_major_locator(LogLocator(numticks=5))
            self.ax_r.yaxis.set_minor_locator(NullLocator())
            self.diagonal, = self.ax_z.plot([], [], "k:", lw=0.8)
            self.logits, = self.ax_z.plot([], [], "o")
            self.ax_z.set_xlabel(r"predicted $\hat z_l$")
            self.ax_z.set_ylabel(r"trained $z_l$")
            for axis in (self.ax_r.xaxis, self.ax_z.xaxis, self.ax_z.yaxis):
                axis.set_major_locator(MaxNLocator(4))
            self.title = self.figure.suptitle("", fontsize=10)

    def __call__(self, data: dict[str, np.ndarray], values: dict[str, Any]) -> Figure:
        """Show the run ``data`` of :func:`simulate` at the control ``values``; returns the (same) figure."""
        steps = data["steps"][1:]  # the residual is 0 at step 0
        self.scaled.set_data(steps, data["residual"][1:])
        self.unscaled.set_data(steps, data["residual_unscaled"][1:])
        self.ax_r.relim()
        self.ax_r.autoscale_view()
        z, z_hat = data["z"][-1], data["z_hat"][-1]
        lim = float(np.abs(np.concatenate([z, z_hat])).max()) * 1.1 + 1e-12
        self.diagonal.set_data([-lim, lim], [-lim, lim])
        self.logits.set_data(z_hat, z)
        self.ax_z.set_xlim(-lim, lim)
        self.ax_z.set_ylim(-lim, lim)
        self.title.set_text(check_title(data, values))
        return self.figure


def theorem1_live_widget(attention: str = "exp", phi: str = "relu", lr_ratio: float = 1.0, seed: int = 0) -> LiveWidget:
    """The Theorem 1 widget: controls ``attention``, ``phi``, ``lr_ratio``, ``seed`` -> :func:`simulate` ->
    a :class:`CheckDrawing` (the widget's ``draw``)."""
    import ipywidgets as widgets

    from joma_lib.kit.widget import LiveWidget

    controls = {
        "attention": widgets.Dropdown(options=list(ATTENTION_KINDS), description="attention"),
        "phi": widgets.Dropdown(options=list(ACTIVATIONS), description="phi"),
        "lr_ratio": widgets.SelectionSlider(options=list(LR_RATIOS), description="eta_z/eta_w"),
        "seed": widgets.IntSlider(min=0, max=9, description="seed"),
    }
    return LiveWidget(controls, simulate, CheckDrawing(),
                 summary=lambda data, values: f"final residual {data['residual'][-1]:.1e} "
                                              f"(ratio ignored: {data['residual_unscaled'][-1]:.1e})",
                 initial={"attention": attention, "phi": phi, "lr_ratio": lr_ratio, "seed": seed})


def theorem1_widget(**initial: Any) -> ipywidgets.Widget:
    """The ipywidget of the Theorem 1 page (keyword arguments: initial values)."""
    return theorem1_live_widget(**initial).widget
