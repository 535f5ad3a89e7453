"""Live-kernel widget of the modified-MLP dynamics (Theorems 2 and 4, Figure 4).

The reader picks the saliency/target vector (through a generator: the paper's random draw, an
even ramp or a geometric ramp, with its range and size), the nonlinearity (Theorem 4's
``(mu - v) o b`` update or Theorem 2's linear ``Delta o b``), the attention temperature, the
step size and the number of steps. Every change re-runs :func:`simulate_profile` (compute) and
redraws a persistent matplotlib figure with :class:`Fig4Drawing` (draw) into a PNG image widget.

:class:`ModifiedMLPWidget` is the :class:`~joma_lib.kit.widget.LiveWidget` that wires them;
:func:`modified_mlp_widget` returns the widget for a notebook cell. ``ModifiedMLPWidget.update(**values)``
sets controls programmatically and returns the redraw time in milliseconds (the benchmark uses it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ipywidgets as widgets
import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from joma_lib.theory.softmax_dynamics import (
    SoftmaxRun,
    row_entropy,
    saliency_profile,
    simulate_softmax_attention,
    softmax_attention,
)
from joma_lib.kit.style import figure_style
from joma_lib.base.validation import check_int
from joma_lib.kit.widget import LiveWidget, Values

MAX_POINTS = 500  # recorded states per run: keeps drawing cheap for any number of steps
LEGEND = ("x axes: iteration. Left: components v_j (yellow = largest mu_j or Delta_j; dotted = targets mu_j; "
          "linear case on a log scale above 1). Right: attention entropy in nats (black), uniform level ln n "
          "(grey dashes), fixed point H(softmax(mu^2/tau_v)) (orange dots).")
MODES = {"nonlinear: v += eta (mu - v) o b": True, "linear: v += eta Delta o b": False}


class ProfileRun(NamedTuple):
    """The targets/saliencies ``mu`` of a run and the run itself."""

    mu: np.ndarray
    run: SoftmaxRun


def simulate_profile(profile: str = "fig4", n: int = 10, low: float = 1.0, high: float = 4.0, seed: int = 0,
                     nonlinear: bool = True, temperature: float = 3.0, eta: float = 0.02,
                     n_steps: int = 5000) -> ProfileRun:
    """The widget's computation: :func:`~joma_lib.theory.softmax_dynamics.saliency_profile` then
    :func:`~joma_lib.theory.softmax_dynamics.simulate_softmax_attention` (at most :data:`MAX_POINTS` recorded states).
    ValueError (naming the parameter) for values it cannot honour, e.g. ``low > high`` or ``eta = nan``."""
    mu = saliency_profile(profile, n, low, high, seed)
    n_steps = check_int("n_steps", n_steps, 1)
    run = simulate_softmax_attention(mu, eta=eta, n_steps=n_steps, temperature=temperature, nonlinear=nonlinear,
                                     record_every=max(1, n_steps // MAX_POINTS))
    return ProfileRun(mu, run)


def entropy_summary(result: ProfileRun, values: Values) -> str:
    """The status line: start, minimum and end of the attention entropy."""
    steps, entropy = result.run.steps, result.run.entropy
    h_min = int(np.argmin(entropy))
    return (f"entropy: start {entropy[0]:.3f}, minimum {entropy[h_min]:.3f} at step {steps[h_min]}, "
            f"end {entropy[-1]:.3f}")


class Fig4Drawing:
    """A persistent two-panel figure whose artists are updated in place (cheaper than redrawing).

    Left panel: components ``v_j`` against the iteration (colour = rank of ``mu_j``, yellow = largest;
    dotted: the targets in the nonlinear case). Right panel: attention entropy (black), the
    uniform level ``ln n`` (grey dashes) and, in the nonlinear case, the fixed-point entropy
    ``H(softmax(mu^2/tau_v))`` (orange dots). The key is in :data:`LEGEND` (shown under the figure).
    """

    def __init__(self) -> None:
        with figure_style():
            # fixed margins instead of a layout engine: the layout pass would double the draw time
            self.figure = Figure(figsize=(10, 3.2), dpi=72)
            FigureCanvasAgg(self.figure)
            self.ax_v, self.ax_h = self.figure.subplots(1, 2, gridspec_kw={"left": 0.08, "right": 0.98, "bottom": 0.1,
                                                                            "top": 0.92, "wspace": 0.25})
            self.ax_v.set_title("components v_j", fontsize=9)
            self.ax_h.set_title("attention entropy (nats)", fontsize=9)
            self.entropy_line, = self.ax_h.plot([], [], "k", label="entropy")
            self.uniform_line = self.ax_h.axhline(np.nan, color="gray", ls="--", lw=0.8, label=r"uniform, $\ln n$")
            self.limit_line = self.ax_h.axhline(np.nan, color="C1", ls=":",
                                                label=r"fixed point $H(\mathrm{softmax}(\mu^2/\tau_v))$")
            # few ticks, no axis labels, no legend (the key is HTML under the image): laying out
            # text costs about 1 ms per label in matplotlib's Agg backend, more than the lines
            for ax in (self.ax_v, self.ax_h):
                ax.xaxis.set_major_locator(MaxNLocator(4))
                ax.yaxis.set_major_locator(MaxNLocator(4))
        self.v_lines: list = []
        self.mu_lines: list = []

    def __call__(self, result: ProfileRun, values: Values) -> Figure:
        """Update the artists (lines are only re-created when the number of tokens changes)."""
        mu, steps, v, entropy = result.mu, result.run.steps, result.run.v, result.run.entropy
        nonlinear, temperature = values["nonlinear"], values["temperature"]
        ax_v, ax_h = self.ax_v, self.ax_h
        if len(self.v_lines) != mu.size:
            for line in self.v_lines + self.mu_lines:
                line.remove()
            colors = colormaps["viridis"](np.linspace(0, 0.95, mu.size))
            self.v_lines = [ax_v.plot([], [], color=c, lw=1)[0] for c in colors]
            self.mu_lines = [ax_v.axhline(0.0, color=c, ls=":", lw=0.7) for c in colors]
        for j, (line, target) in enumerate(zip(self.v_lines, self.mu_lines)):
            line.set_data(steps, v[:, j])
            target.set_ydata([mu[j], mu[j]])
            target.set_visible(nonlinear)
        ax_v.set_yscale("linear" if nonlinear else "symlog", **({} if nonlinear else {"linthresh": 1.0}))
        if nonlinear:  # set_yscale installs the scale's default locator
            ax_v.yaxis.set_major_locator(MaxNLocator(4))
        ax_v.set_xlim(0, steps[-1])
        top = max(float(v.max()), float(mu.max()) if nonlinear else 0.0)
        ax_v.set_ylim(min(0.0, float(v.min())), 1.05 * top)
        self.entropy_line.set_data(steps, entropy)
        self.uniform_line.set_ydata([np.log(mu.size)] * 2)
        limit = float(row_entropy(softmax_attention(mu, temperature))) if nonlinear else np.nan
        self.limit_line.set_ydata([limit, limit])
        ax_h.set_xlim(0, steps[-1])
        ax_h.set_ylim(0, 1.08 * np.log(mu.size))
        return self.figure


class ModifiedMLPWidget(LiveWidget):
    """The Fig. 4 widget: its controls -> :func:`simulate_profile` -> :class:`Fig4Drawing` (``self.drawing``)."""

    def __init__(self, profile: str = "fig4", n: int = 10, low: float = 1.0, high: float = 4.0, seed: int = 0,
                 nonlinear: bool = True, temperature: float = 3.0, eta: float = 0.02, n_steps: int = 5000) -> None:
        style = {"description_width": "9em"}
        layout = widgets.Layout(width="24em")
        slider = {"continuous_update": False, "style": style, "layout": layout}
        controls: dict[str, widgets.ValueWidget] = {
            "profile": widgets.Dropdown(options=[("Fig. 4 random draw", "fig4"), ("even ramp", "linear"),
                                                 ("geometric ramp", "geometric")],
                                        description="mu / Delta from", style=style, layout=layout),
            "n": widgets.IntSlider(min=2, max=30, description="tokens n", **slider),
            "low": widgets.FloatSlider(min=0.1, max=4.0, step=0.1, description="smallest", **slider),
            "high": widgets.FloatSlider(min=0.2, max=6.0, step=0.1, description="largest", **slider),
            "seed": widgets.IntSlider(min=0, max=50, description="draw seed", **slider),
            "nonlinear": widgets.ToggleButtons(options=list(MODES.items()), description="update", style=style),
            "temperature": widgets.FloatSlider(min=0.25, max=10.0, step=0.25, description="temperature \u03c4\u1d65",
                                               **slider),
            "eta": widgets.FloatSlider(min=0.005, max=0.1, step=0.005, readout_format=".3f",
                                       description="step eta", **slider),
            "n_steps": widgets.IntSlider(min=100, max=10_000, step=100, description="steps", **slider),
        }
        self.drawing = Fig4Drawing()
        super().__init__(controls, simulate_profile, self.drawing, summary=entropy_summary, legend=LEGEND, dpi=72,
                         initial={"profile": profile, "n": n, "low": low, "high": high, "seed": seed,
                                  "nonlinear": nonlinear, "temperature": temperature, "eta": eta, "n_steps": n_steps})


def modified_mlp_widget(**initial: Any) -> widgets.Widget:
    """An interactive widget for the Fig. 4 dynamics (keyword arguments: initial values, see the class)."""
    return ModifiedMLPWidget(**initial).widget
