"""Live-kernel widget of Theorem 3: the page's 2-D ReLU node with weight decay, and where its starts come to rest.

The reader sets the frozen bias ``beta``, the weight decay ``lambda``, the cluster spread ``nu``, the number of
starts on the arc of radius 1.2 and how long the flow runs. Each change recomputes :func:`resting_points` (the flow
of ``c-thm3-portrait``: :func:`~joma_lib.theory.nonlinear.decayed_trajectories` of
:func:`~joma_lib.theory.nonlinear.decayed_update`, from the figure's starts) and redraws the phase portrait with
:class:`RestingPointDrawing`, through the one widget API (:class:`joma_lib.kit.widget.LiveWidget`). The status line
says which resting point each start reached: a cluster centre, a mixed point, the dead node at 0, or none yet.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from joma_lib.base.validation import check_float, check_int
from joma_lib.chapters.theorem3.figures import portrait_grid, portrait_starts
from joma_lib.kit.widget import LiveWidget, Values
from joma_lib.theory.nonlinear import decayed_trajectories, decayed_update, nearest_centre, two_cluster_mixture

RANGES = {"bias": (-1.2, 0.4), "weight_decay": (0.1, 1.5), "nu": (0.05, 0.5), "t_max": (10.0, 200.0)}
"""What the widget honours. ``weight_decay * t_max <= 300`` keeps a dying node's ``||v||^2`` above underflow."""
STARTS = (2, 15)  # the range of the number of starts
DEAD_NORM = 1e-3  # an end point this close to 0: the node has died
REST_DISTANCE = 1e-3  # |dv/dt| / lambda, the distance still to go at the contraction rate lambda: below it, at rest
CENTRE_COS = 0.99  # the cosine with the nearest centre above which a rest is that centre's (as c-thm3-portrait)
KINDS = {"centre 1": ("C3", "o"), "centre 2": ("C0", "o"), "mixed": ("C2", "D"), "dead (v = 0)": ("0.3", "X"),
         "still moving": ("C1", ">")}
"""Where a start ends, with the colour of its trajectory and the marker of its end point."""


class RestingPoints(NamedTuple):
    """The widget's data: the phase portrait and the trajectories from the starts, with where each one ended."""

    axis: np.ndarray
    """The grid's axis (n_grid,), from 0.05 to above every trajectory."""
    field: np.ndarray
    """``dv/dt`` on the grid, (n_grid, n_grid, 2) indexed ``[iy, ix]``."""
    angles: np.ndarray
    """The starts' angles from the ``v_1`` axis, in degrees (R,)."""
    traj: np.ndarray
    """The trajectories, (T, R, 2)."""
    kinds: tuple[str, ...]
    """Where each start ended: a key of :data:`KINDS`."""


def rest_kind(end: np.ndarray, speed: float, weight_decay: float, cosine: float, centre: int) -> str:
    """Which key of :data:`KINDS` an end point is, from its norm, its speed ``|dv/dt|`` and its nearest centre."""
    if np.linalg.norm(end) < DEAD_NORM:
        return "dead (v = 0)"
    if speed / weight_decay > REST_DISTANCE:
        return "still moving"
    return f"centre {centre + 1}" if cosine > CENTRE_COS else "mixed"


def resting_points(bias: float = -0.6, weight_decay: float = 0.5, nu: float = 0.2, n_starts: int = 9,
                   t_max: float = 80.0, n_grid: int = 21) -> RestingPoints:
    """The page's 2-D update ``dv/dt = F(v) - lambda v`` from ``n_starts`` starts of ``c-thm3-portrait``'s arc.

    At the defaults these are that figure's ReLU trajectories. Every value outside :data:`RANGES` (:data:`STARTS`)
    is refused, naming it and its range, before anything is computed.
    """
    bias = check_float("bias", bias, *RANGES["bias"])
    weight_decay = check_float("weight_decay", weight_decay, *RANGES["weight_decay"])
    nu = check_float("nu", nu, *RANGES["nu"])
    n_starts = check_int("n_starts", n_starts, *STARTS)
    t_max = check_float("t_max", t_max, *RANGES["t_max"])
    n_grid = check_int("n_grid", n_grid, 3, 100)
    mixture = two_cluster_mixture(nu)
    starts = portrait_starts(n_starts)
    traj = decayed_trajectories(mixture, starts, np.linspace(0.0, t_max, 161), bias, weight_decay)
    axis, grid = portrait_grid(max(1.4, 1.1 * float(traj.max())), n_grid)
    ends = traj[-1]
    speeds = np.linalg.norm(decayed_update(ends, bias, mixture, weight_decay), axis=1)
    centres, cosines = nearest_centre(ends, mixture)
    kinds = tuple(rest_kind(end, speed, weight_decay, cos, c) for end, speed, cos, c in zip(ends, speeds, cosines,
                                                                                            centres))
    angles = np.degrees(np.arctan2(starts[:, 1], starts[:, 0]))
    return RestingPoints(axis, decayed_update(grid, bias, mixture, weight_decay), angles, traj, kinds)


def resting_summary(result: RestingPoints, values: Values) -> str:
    """The status line: for each place the starts ended (in their order), the angles of the starts that reached it."""
    groups = [f"{kind} \u2190 " + ", ".join(f"{a:.0f}\u00b0" for a, k in zip(result.angles, result.kinds) if k == kind)
              for kind in dict.fromkeys(result.kinds)]  # in the order of the starts
    return f"at t = {values['t_max']:g}, start angle \u2192 where it ends: " + " | ".join(groups)


class RestingPointDrawing:
    """A persistent one-panel figure, redrawn for each :class:`RestingPoints`: grey streamlines of the update, each
    trajectory coloured by where it ends, its end point marked, the cluster centres as stars."""

    def __init__(self) -> None:
        # fixed margins instead of a layout engine: the layout pass would take as long as the streamlines
        self.figure = Figure(figsize=(6.0, 6.4))
        self.ax = self.figure.subplots(gridspec_kw={"left": 0.11, "right": 0.97, "bottom": 0.27, "top": 0.95})

    def __call__(self, result: RestingPoints, values: Values) -> Figure:
        ax, axis = self.ax, result.axis
        ax.clear()
        ax.streamplot(axis, axis, result.field[..., 0], result.field[..., 1], color="0.8", density=0.8,
                      linewidth=0.7)
        for r, kind in enumerate(result.kinds):
            colour, marker = KINDS[kind]
            ax.plot(result.traj[:, r, 0], result.traj[:, r, 1], color=colour, lw=1.2)
            ax.plot(*result.traj[-1, r], marker, color=colour, mec="k", ms=7,
                    label=kind if kind not in result.kinds[:r] else None)
        ax.plot([1, 0], [0, 1], "k*", ms=12, mfc="gold", label=r"cluster centres $\bar x_c$")
        ax.set_xlim(-0.04 * axis[-1], axis[-1])
        ax.set_ylim(-0.04 * axis[-1], axis[-1])
        ax.set_aspect("equal")
        ax.set_xlabel("$v_1$ (token 1)")
        ax.set_ylabel("$v_2$ (token 2)")
        ax.set_title(rf"ReLU node, $\beta$ = {values['bias']:g}, $\lambda$ = {values['weight_decay']:g}, "
                     rf"$\nu$ = {values['nu']:g}", fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1))  # below the data, in one column
        return self.figure


class RestingPointWidget(LiveWidget):
    """The Theorem 3 widget: its controls -> :func:`resting_points` -> :class:`RestingPointDrawing`."""

    def __init__(self, bias: float = -0.6, weight_decay: float = 0.5, nu: float = 0.2, n_starts: int = 9,
                 t_max: float = 80.0) -> None:
        style = {"description_width": "9em"}
        slider = {"continuous_update": False, "style": style, "layout": widgets.Layout(width="24em")}
        labels = {"bias": "bias \u03b2", "weight_decay": "weight decay \u03bb", "nu": "cluster spread \u03bd",
                  "t_max": "time t"}
        controls: dict[str, widgets.ValueWidget] = {
            name: widgets.FloatSlider(min=low, max=high, step=10.0 if name == "t_max" else 0.01,
                                      description=labels[name], **slider) for name, (low, high) in RANGES.items()}
        controls["n_starts"] = widgets.IntSlider(min=STARTS[0], max=STARTS[1], description="starts", **slider)
        super().__init__(controls, resting_points, RestingPointDrawing(), summary=resting_summary, dpi=90,
                         initial={"bias": bias, "weight_decay": weight_decay, "nu": nu, "n_starts": n_starts,
                                  "t_max": t_max})


def theorem3_widget(**initial: Any) -> widgets.Widget:
    """The ipywidget of the Theorem 3 page (keyword arguments: initial values, see the class)."""
    return RestingPointWidget(**initial).widget
