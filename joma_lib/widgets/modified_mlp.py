"""Live-kernel explorer of the modified-MLP dynamics (Theorems 2 and 4, Figure 4).

The reader picks the saliency/target vector (through a generator: the paper's random draw, an
even ramp or a geometric ramp, with its range and size), the nonlinearity (Theorem 4's
``(mu - v) o a`` update or Theorem 2's linear ``Delta o a``), the attention temperature, the
step size and the number of steps. Every change re-runs
:func:`joma_lib.dynamics.simulate_softmax_attention` and redraws a persistent matplotlib
figure into a PNG image widget (no interactive backend needed).

:class:`ModifiedMLPExplorer` holds the state; :func:`modified_mlp_panel` returns the panel for a
notebook cell. ``ModifiedMLPExplorer.update(**values)`` sets controls programmatically and
returns the redraw time in milliseconds (the benchmark uses it).
"""

from __future__ import annotations

import io
import time
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from joma_lib.dynamics import attention_entropy, saliency_profile, simulate_softmax_attention, softmax_attention
from joma_lib.figures.style import figure_style

MAX_POINTS = 500  # recorded states per run: keeps drawing cheap for any number of steps
LEGEND = ("x axes: iteration. Left: components v_j (yellow = largest mu_j or Delta_j; dotted = targets mu_j; "
          "linear case on a log scale above 1). Right: attention entropy in nats (black), uniform level ln n "
          "(grey dashes), fixed point H(softmax(mu^2/T)) (orange dots).")
MODES = {"nonlinear: v += eta (mu - v) o a": True, "linear: v += eta Delta o a": False}


class ModifiedMLPExplorer:
    """Controls, a persistent two-panel figure, and the redraw that links them.

    Left panel: components ``v_j`` against the iteration (colour = rank of ``mu_j``, yellow = largest;
    dotted: the targets in the nonlinear case). Right panel: attention entropy (black), the
    uniform level ``ln n`` (grey dashes) and, in the nonlinear case, the fixed-point entropy
    ``H(softmax(mu^2/T))`` (orange dots). The key is in :data:`LEGEND` (shown under the figure).
    """

    def __init__(self, profile: str = "fig4", n: int = 10, low: float = 1.0, high: float = 4.0, seed: int = 0,
                 nonlinear: bool = True, temperature: float = 3.0, eta: float = 0.02, n_steps: int = 5000) -> None:
        style = {"description_width": "9em"}
        layout = widgets.Layout(width="24em")
        slider = {"continuous_update": False, "style": style, "layout": layout}
        self.controls: dict[str, widgets.ValueWidget] = {
            "profile": widgets.Dropdown(options=[("Fig. 4 random draw", "fig4"), ("even ramp", "linear"),
                                                 ("geometric ramp", "geometric")], value=profile,
                                        description="mu / Delta from", style=style, layout=layout),
            "n": widgets.IntSlider(value=n, min=2, max=30, description="tokens n", **slider),
            "low": widgets.FloatSlider(value=low, min=0.1, max=4.0, step=0.1, description="smallest", **slider),
            "high": widgets.FloatSlider(value=high, min=0.2, max=6.0, step=0.1, description="largest", **slider),
            "seed": widgets.IntSlider(value=seed, min=0, max=50, description="draw seed", **slider),
            "nonlinear": widgets.ToggleButtons(options=list(MODES.items()), value=nonlinear,
                                               description="update", style=style),
            "temperature": widgets.FloatSlider(value=temperature, min=0.25, max=10.0, step=0.25,
                                               description="temperature T", **slider),
            "eta": widgets.FloatSlider(value=eta, min=0.005, max=0.1, step=0.005, readout_format=".3f",
                                       description="step eta", **slider),
            "n_steps": widgets.IntSlider(value=n_steps, min=100, max=10_000, step=100, description="steps", **slider),
        }
        self.image = widgets.Image(format="png")
        self.status = widgets.HTML()
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
                                                label=r"fixed point $H(\mathrm{softmax}(\mu^2/T))$")
            # few ticks, no axis labels, no legend (the key is HTML under the image): laying out
            # text costs about 1 ms per label in matplotlib's Agg backend, more than the lines
            for ax in (self.ax_v, self.ax_h):
                ax.xaxis.set_major_locator(MaxNLocator(4))
                ax.yaxis.set_major_locator(MaxNLocator(4))
        self.v_lines: list = []
        self.mu_lines: list = []
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.last_ms = self.redraw()

    @property
    def values(self) -> dict[str, Any]:
        """Current control values."""
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, _: dict) -> None:
        self.last_ms = self.redraw()

    def update(self, **values: Any) -> float:
        """Set controls (by name, see :attr:`values`) and redraw once; returns the redraw time in ms."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(f"unknown controls {sorted(unknown)}; known: {sorted(self.controls)}")
        for control in self.controls.values():
            control.unobserve(self._on_change, names="value")
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            for control in self.controls.values():
                control.observe(self._on_change, names="value")
        self.last_ms = self.redraw()
        return self.last_ms

    def redraw(self) -> float:
        """Simulate with the current values, redraw the figure into the image; returns elapsed ms."""
        start = time.perf_counter()
        p = self.values
        high = max(p["high"], p["low"])
        try:
            mu = saliency_profile(p["profile"], p["n"], p["low"], high, p["seed"])
        except ValueError as exc:  # e.g. a geometric ramp needs low > 0; the sliders keep it so
            self.status.value = f"<span style='color:#b00'>{exc}</span>"
            return (time.perf_counter() - start) * 1e3
        run = simulate_softmax_attention(mu, eta=p["eta"], n_steps=p["n_steps"], temperature=p["temperature"],
                                         nonlinear=p["nonlinear"], record_every=max(1, p["n_steps"] // MAX_POINTS))
        with figure_style():
            self._draw(mu, run.steps, run.v, run.entropy, p["nonlinear"], p["temperature"])
            buffer = io.BytesIO()
            self.figure.savefig(buffer, format="png", dpi=72, pil_kwargs={"compress_level": 1})
        self.image.value = buffer.getvalue()
        elapsed = (time.perf_counter() - start) * 1e3
        h_min = int(np.argmin(run.entropy))
        self.status.value = (f"entropy: start {run.entropy[0]:.3f}, minimum {run.entropy[h_min]:.3f} at step "
                             f"{run.steps[h_min]}, end {run.entropy[-1]:.3f} &nbsp;|&nbsp; redraw {elapsed:.0f} ms")
        return elapsed

    def _draw(self, mu: np.ndarray, steps: np.ndarray, v: np.ndarray, entropy: np.ndarray, nonlinear: bool,
              temperature: float) -> None:
        """Update the persistent artists (lines are only re-created when the number of tokens changes)."""
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
        limit = float(attention_entropy(softmax_attention(mu, temperature))) if nonlinear else np.nan
        self.limit_line.set_ydata([limit, limit])
        ax_h.set_xlim(0, steps[-1])
        ax_h.set_ylim(0, 1.08 * np.log(mu.size))

    @property
    def widget(self) -> widgets.Widget:
        """The whole panel: controls on the left, figure and status line on the right."""
        return widgets.HBox([widgets.VBox(list(self.controls.values())),
                             widgets.VBox([self.image, widgets.HTML(f"<small>{LEGEND}</small>"), self.status])])


def modified_mlp_panel(**initial: Any) -> widgets.Widget:
    """An interactive panel for the Fig. 4 dynamics (keyword arguments: initial values, see the class)."""
    return ModifiedMLPExplorer(**initial).widget
