"""The kernel-free Fig. 4 explorer of the "Explore" page, drawn from ``c-explorer-grid``'s data."""

from __future__ import annotations

import numpy as np

from joma_lib.chapters.explore.figures import FIG4_SPREAD, MODES
from joma_lib.kit.explorer import Axes, Control, Explorer, Trace


_TITLES = {"linear": "linear (Theorem 2): v \u2190 v + \u03b7 \u0394\u2218b",
           "nonlinear": "nonlinear (Theorem 4): v \u2190 v + \u03b7 (\u03bc \u2212 v)\u2218b"}


def _check_grid(grid: dict[str, np.ndarray]) -> None:
    """Raise a clear ValueError unless ``grid`` has the arrays and shapes of
    :func:`~joma_lib.chapters.explore.figures.make_explorer_grid`."""
    missing = {"spreads", "tau_v", "steps", "mu", "v", "entropy", "entropy_limit"} - set(grid)
    if missing:
        raise ValueError(f"grid lacks the arrays {sorted(missing)}; build it with make_explorer_grid()")
    shape = (len(MODES), grid["spreads"].size, grid["tau_v"].size, grid["steps"].size, grid["mu"].shape[1])
    if grid["v"].shape != shape or grid["entropy"].shape != shape[:-1]:
        raise ValueError(f"grid arrays v {grid['v'].shape} / entropy {grid['entropy'].shape} do not match "
                         f"the expected {shape} / {shape[:-1]}")


def fig4_explorer(grid: dict[str, np.ndarray]) -> Explorer:
    """The Fig. 4 explorer over :func:`~joma_lib.chapters.explore.figures.make_explorer_grid`'s data: controls mode x
    spread x tau_v.

    Left panel: the components ``v_j(t)``, coloured by the rank of ``mu_j`` (yellow = most salient),
    with a button for a log axis. Right panel: the attention entropy, the uniform level ``ln d`` and,
    in the nonlinear case, the entropy of the fixed point ``v = mu``.
    """
    from plotly.colors import sample_colorscale

    _check_grid(grid)
    spreads, temps, steps, mu = grid["spreads"], grid["tau_v"], grid["steps"], grid["mu"]
    n_s, n_t, d = spreads.size, temps.size, mu.shape[1]
    shape = (len(MODES), n_s, n_t)
    colors = sample_colorscale("Viridis", list(np.linspace(0.0, 1.0, d)))
    symbols = np.array(["\u0394" if m == "linear" else "\u03bc" for m in MODES])
    traces = [Trace(y=grid["v"][..., j], x=steps, color=colors[j], panel=0,
                    name=np.broadcast_to((symbols[:, None] + " = " + np.char.mod("%.2f", mu[:, j])[None, :])[..., None],
                                         shape),
                    style={"line": {"width": 1.6}, "showlegend": False}) for j in range(d)]
    ends = np.array([steps[0], steps[-1]])
    limit = np.where(np.array(MODES)[:, None, None] == "nonlinear", grid["entropy_limit"][None], np.nan)
    traces += [
        Trace(y=grid["entropy"], x=steps, name="entropy", color="black", panel=1, style={"line": {"width": 2.2}}),
        Trace(y=np.repeat(limit[..., None], 2, axis=-1), x=ends, color="firebrick", panel=1,
              name="H(softmax(\u03bc\u00b2/\u03c4\u1d65)), the fixed point v = \u03bc",
              style={"line": {"dash": "dot"}}),
        Trace(y=np.full(shape + (2,), np.log(d)), x=ends, name=f"uniform, ln {d}", color="grey", panel=1,
              style={"line": {"dash": "dash", "width": 1}}),
    ]
    titles = np.array([[[f"{_TITLES[m]}<br>spread of \u03bc = {spread:g}, \u03c4\u1d65 = {t:g}" for t in temps]
                        for spread in spreads] for m in MODES])
    return Explorer(
        controls=(Control("mode", "update", MODES, kind="buttons",
                          labels=("linear (Theorem 2)", "nonlinear (Theorem 4)")),
                  Control("spread", "spread of \u03bc ([1, 4] mapped onto [1, 1 + spread])",
                          tuple(float(spread) for spread in spreads)),
                  Control("tau_v", "temperature \u03c4\u1d65", tuple(float(t) for t in temps))),
        panels=(Axes("step", "components v<sub>j</sub>(t) (colour: rank of \u03bc<sub>j</sub>)"),
                Axes("step", "attention entropy H(b(t))", y_axis={"rangemode": "tozero"})),
        traces=tuple(traces), titles=titles,
        menus=({"active": 0, "font": {"size": 10},
                "buttons": [{"method": "relayout", "label": f"v axis: {scale}", "args": [{"yaxis.type": scale}]}
                            for scale in ("linear", "log")]},),
    )


FIG4_INITIAL = {"mode": "nonlinear", "spread": FIG4_SPREAD, "tau_v": 3.0}
"""The cell the Fig. 4 explorer opens on: the paper's setting."""
