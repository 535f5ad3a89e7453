"""Interactive check of Theorem 1: pick the attention kind, the activation, the learning-rate ratio
``eta_z / eta_w`` and a seed; a short SGD run of :func:`joma_lib.block.invariant_toy` is redone and the
invariant residual is redrawn.

:func:`simulate` (computing) and :func:`draw_check` (drawing) are plain functions; :func:`invariant_explorer`
wires them to ipywidgets through :class:`joma_lib.widgets.panel.Panel` (it needs a live kernel; on the static
book page it shows but does not react).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure

from joma_lib.attention_kinds import ATTENTIONS
from joma_lib.block import ACTIVATIONS
from joma_lib.figures.style import figure_style
from joma_lib.invariants import toy_check

if TYPE_CHECKING:  # the library itself does not need ipywidgets
    import ipywidgets

    from joma_lib.widgets.panel import Panel

LR_RATIOS = (0.25, 0.5, 1.0, 2.0, 4.0)


def simulate(attention: str = "exp", phi: str = "relu", lr_ratio: float = 1.0, seed: int = 0,
             steps: int = 150) -> dict[str, np.ndarray]:
    """The widget's run: :func:`joma_lib.invariants.toy_check` with ``steps`` SGD steps at ``lr_w = 0.1``."""
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


def check_title(data: dict[str, np.ndarray], values: dict[str, Any]) -> str:
    """The panel's title: the settings and the final residual."""
    return (f"{values['attention']} attention, phi = {values['phi']}, eta_z/eta_w = {values['lr_ratio']:g}, "
            f"seed {values['seed']}: final residual {data['residual'][-1]:.1e}")


def render_png(attention: str, phi: str, lr_ratio: float, seed: int) -> bytes:
    """One redraw of the panel without widgets: simulate, draw, encode as PNG."""
    from joma_lib.widgets.panel import figure_png

    values: dict[str, Any] = {"attention": attention, "phi": phi, "lr_ratio": lr_ratio, "seed": seed}
    data = simulate(**values)
    return figure_png(draw_check(data, check_title(data, values)), dpi=80)


def invariant_explorer(attention: str = "exp", phi: str = "relu", lr_ratio: float = 1.0, seed: int = 0) -> Panel:
    """The Theorem 1 panel: controls ``attention``, ``phi``, ``lr_ratio``, ``seed`` -> :func:`simulate` ->
    :func:`draw_check`."""
    import ipywidgets as widgets

    from joma_lib.widgets.panel import Panel

    controls = {
        "attention": widgets.Dropdown(options=list(ATTENTIONS), value=attention, description="attention"),
        "phi": widgets.Dropdown(options=list(ACTIVATIONS), value=phi, description="phi"),
        "lr_ratio": widgets.SelectionSlider(options=list(LR_RATIOS), value=lr_ratio, description="eta_z/eta_w"),
        "seed": widgets.IntSlider(value=seed, min=0, max=9, description="seed"),
    }
    return Panel(controls, simulate, lambda data, values: draw_check(data, check_title(data, values)),
                 summary=lambda data, values: f"final residual {data['residual'][-1]:.1e} "
                                              f"(ratio ignored: {data['residual_unscaled'][-1]:.1e})")


def invariant_panel(**initial: Any) -> ipywidgets.Widget:
    """The ipywidgets panel of the Theorem 1 page (keyword arguments: initial values)."""
    return invariant_explorer(**initial).widget
