"""Interactive check of Theorem 1: pick the attention kind, the activation, the learning-rate ratio
``eta_z / eta_w`` and a seed; a short SGD run of :func:`joma_lib.block.invariant_toy` is redone and the
invariant residual is redrawn.

:func:`simulate` (computing) and :func:`draw_check` (drawing) are plain functions; :func:`invariant_panel`
wires them to ipywidgets (it needs a live kernel; on the static book page it shows but does not react).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from joma_lib.block import ACTIVATIONS, ATTENTIONS
from joma_lib.figures.style import figure_style
from joma_lib.figures.theorem1 import toy_check

if TYPE_CHECKING:  # the library itself does not need ipywidgets
    import ipywidgets

LR_RATIOS = (0.25, 0.5, 1.0, 2.0, 4.0)


def simulate(attention: str = "exp", phi: str = "relu", lr_ratio: float = 1.0, seed: int = 0,
             steps: int = 150) -> dict[str, np.ndarray]:
    """The widget's run: :func:`joma_lib.figures.theorem1.toy_check` with ``steps`` SGD steps at ``lr_w = 0.1``."""
    return toy_check(attention, phi, seed, steps=steps, lr_ratio=lr_ratio)


def draw_check(data: dict[str, np.ndarray], title: str = "") -> Figure:
    """Left: residual over the run; right: final logits ``z`` against Theorem 1's ``z-hat``."""
    with figure_style():
        fig = Figure(figsize=(9, 3.2), layout="constrained")
        ax_r, ax_z = fig.subplots(1, 2)
        ax_r.semilogy(data["steps"][1:], data["residual"][1:], label=r"scaled by $\eta_z/\eta_w$ (Theorem 1)")
        ax_r.semilogy(data["steps"][1:], data["residual_unscaled"][1:], "--", label="ratio ignored")
        ax_r.set_xlabel("SGD step")
        ax_r.set_ylabel("relative invariant residual")
        ax_r.legend(fontsize=8)
        lim = float(np.abs(np.concatenate([data["z"][-1], data["z_hat"][-1]])).max()) * 1.1 + 1e-12
        ax_z.plot([-lim, lim], [-lim, lim], "k:", lw=0.8)
        ax_z.plot(data["z_hat"][-1], data["z"][-1], "o")
        ax_z.set_xlabel(r"predicted $\hat z_l$")
        ax_z.set_ylabel(r"trained $z_l$")
        fig.suptitle(title, fontsize=10)
    return fig


def render_png(attention: str, phi: str, lr_ratio: float, seed: int) -> bytes:
    """One redraw of the panel: simulate, draw, encode as PNG."""
    data = simulate(attention, phi, lr_ratio, seed)
    title = (f"{attention} attention, phi = {phi}, eta_z/eta_w = {lr_ratio:g}, seed {seed}: "
             f"final residual {data['residual'][-1]:.1e}")
    buffer = io.BytesIO()
    draw_check(data, title).savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()


def invariant_panel() -> ipywidgets.VBox:
    """The ipywidgets panel of the Theorem 1 page: four controls and the redrawn check."""
    import ipywidgets as widgets

    attention = widgets.Dropdown(options=list(ATTENTIONS), value="exp", description="attention")
    phi = widgets.Dropdown(options=list(ACTIVATIONS), value="relu", description="phi")
    ratio = widgets.SelectionSlider(options=list(LR_RATIOS), value=1.0, description="eta_z/eta_w")
    seed = widgets.IntSlider(value=0, min=0, max=9, description="seed")
    image = widgets.Image(format="png")

    def redraw(_=None) -> None:
        image.value = render_png(attention.value, phi.value, ratio.value, seed.value)

    for control in (attention, phi, ratio, seed):
        control.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox([attention, phi]), widgets.HBox([ratio, seed]), image])
