"""The kernel-free explorer of the Fig. 4 dynamics: a precomputed grid and a plotly figure over it.

A static HTML page cannot run Python, so the reader's three knobs are discretised and every grid
point is simulated ahead of time with :func:`joma_lib.dynamics.simulate_softmax_attention`:

* the **nonlinearity**: Theorem 4's nonlinear update ``v <- v + eta (mu - v) o a`` or the linear
  contrast of Theorem 2, ``v <- v + eta Delta o a`` with ``Delta = mu`` (the saliency vector);
* the **spread** of ``mu``: Fig. 4's sorted draw from [1, 4] is rescaled to [1, 1 + spread]
  (:func:`joma_lib.dynamics.saliency_profile`), so ``spread = 3`` is exactly the paper's setting
  and a small spread makes all tokens nearly equally salient;
* the attention **temperature** ``T`` of ``a = softmax(v^2 / T)``.

:func:`explorer_grid` returns the grid as plain arrays (it is also the data of the companion figure
``c-explorer-grid``, so the committed reference checks it); :func:`explorer_html` turns it into a
plotly figure whose sliders and buttons call a few lines of JavaScript that swap the plotted
traces. The HTML loads no plotly.js itself: the book serves the bundle of the installed ``plotly``
package (see :mod:`joma_lib.sphinx_plotly`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from joma_lib.dynamics import attention_entropy, saliency_profile, simulate_softmax_attention, softmax_attention
from joma_lib.validation import check_choice, check_float, check_int

if TYPE_CHECKING:
    import plotly.graph_objects as go

MODES = ("linear", "nonlinear")
FIG4_SPREAD = 3.0  # Fig. 4 draws mu uniformly from [1, 1 + 3]
DEFAULT_SPREADS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
DEFAULT_TEMPERATURES = (1.0, 2.0, 3.0, 4.0, 6.0)
MAX_GRID_POINTS = 400  # simulations per grid; keeps page size and build time bounded
SIGNIFICANT_DIGITS = 4  # precision of the numbers embedded in the page


def sample_steps(n_steps: int, n_samples: int) -> np.ndarray:
    """Steps ``0 .. n_steps`` at which the grid keeps the state: ``round(n_steps (k/K)^2)``, k = 0..K.

    Quadratic spacing keeps the early steps, where the entropy moves fastest, densely sampled
    while the long tail costs few points. Rounding merges a few early samples, so the result has
    at most ``n_samples`` (distinct, increasing) entries and always contains 0 and ``n_steps``.
    """
    n_steps = check_int("n_steps", n_steps, 1, 10**6)
    n_samples = check_int("n_samples", n_samples, 2, n_steps + 1)
    k = np.arange(n_samples) / (n_samples - 1)
    return np.unique(np.rint(n_steps * k**2).astype(np.int64))


def _increasing_values(name: str, values: Sequence[float], low: float, high: float) -> np.ndarray:
    """``values`` as a float array, each in ``(low, high]`` and strictly increasing (one slider's stops)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of numbers in ({low:g}, {high:g}], got {values!r}")
    out = np.array([check_float(f"{name}[{i}]", x, low, high, low_open=True) for i, x in enumerate(values)])
    if np.any(np.diff(out) <= 0):
        raise ValueError(f"{name} must be strictly increasing (they become slider stops), got {list(values)!r}")
    return out


def explorer_grid(spreads: Sequence[float] = DEFAULT_SPREADS,
                  temperatures: Sequence[float] = DEFAULT_TEMPERATURES,
                  n_steps: int = 5000, eta: float = 0.02, v0: float = 0.05,
                  n_samples: int = 80, profile: str = "fig4", seed: int = 0) -> dict[str, np.ndarray]:
    """Simulate Fig. 4's discrete dynamics on the grid ``MODES x spreads x temperatures``.

    The targets (saliencies in the linear case) of spread ``s`` are
    ``saliency_profile(profile, low=1, high=1 + s, seed=seed)``; with the default ``"fig4"``
    profile and ``s = 3`` they are the paper's ``mu``, so grid point ``("nonlinear", 3, 3)`` is
    Fig. 4. Each mode is one batched call of
    :func:`~joma_lib.dynamics.simulate_softmax_attention` over all (spread, T) pairs.

    Returns (``S = len(spreads)``, ``T = len(temperatures)``, ``n_t`` sampled steps, ``d`` tokens):
        ``spreads (S,)``, ``temperatures (T,)``, ``steps (n_t,)`` from :func:`sample_steps`,
        ``mu (S, d)``; ``v (2, S, T, n_t, d)`` and ``entropy (2, S, T, n_t)`` in float32, first
        axis in the order of :data:`MODES`; ``entropy_limit (S, T)`` = H(softmax(mu^2/T)), the
        attention entropy at the nonlinear fixed point ``v = mu``.
    """
    s_values = _increasing_values("spreads", spreads, 0.0, 20.0)
    t_values = _increasing_values("temperatures", temperatures, 0.0, 100.0)
    n_points = len(MODES) * s_values.size * t_values.size
    if n_points > MAX_GRID_POINTS:
        raise ValueError(f"the grid has {n_points} points (2 x spreads x temperatures); "
                         f"at most {MAX_GRID_POINTS} keep the page small")
    steps = sample_steps(n_steps, n_samples)
    mus = np.stack([saliency_profile(profile, low=1.0, high=1.0 + s, seed=seed) for s in s_values])
    mu_grid = np.broadcast_to(mus[:, None, :], (s_values.size, t_values.size, mus.shape[1]))
    t_grid = np.broadcast_to(t_values, mu_grid.shape[:-1])
    v, entropy = [], []
    for mode in MODES:
        run = simulate_softmax_attention(mu_grid, v0=v0, eta=eta, n_steps=n_steps, temperature=t_grid,
                                         nonlinear=mode == "nonlinear")
        v.append(np.moveaxis(run.v[steps], 0, 2))  # (S, T, n_t, d)
        entropy.append(np.moveaxis(run.entropy[steps], 0, 2))
    limit = attention_entropy(softmax_attention(mu_grid, t_grid))
    return {"spreads": s_values, "temperatures": t_values, "steps": steps, "mu": mus,
            "v": np.stack(v).astype(np.float32), "entropy": np.stack(entropy).astype(np.float32),
            "entropy_limit": np.asarray(limit)}


def _rounded(array: np.ndarray) -> list[float]:
    """The array flattened (C order) with ``SIGNIFICANT_DIGITS`` significant digits, for the page."""
    return [float(f"{x:.{SIGNIFICANT_DIGITS}g}") for x in np.asarray(array, dtype=np.float64).ravel()]


# Swaps the traces when a control moves. The grid arrays are flat (C order), see _payload.
_SCRIPT = """
(function () {
  var gd = document.getElementById('{plot_id}'), note = document.getElementById('{plot_id}-fallback');
  if (note) { note.remove(); }
  var G = %s;
  var d = G.d, nt = G.steps.length, nS = G.spreads.length, nT = G.temperatures.length;
  function redraw() {
    var m = gd.layout.updatemenus[0].active, s = gd.layout.sliders[0].active, k = gd.layout.sliders[1].active;
    var cell = (m * nS + s) * nT + k, ys = [], names = [];
    for (var j = 0; j < d; j++) {
      var y = new Array(nt);
      for (var t = 0; t < nt; t++) { y[t] = G.v[(cell * nt + t) * d + j]; }
      ys.push(y);
      names.push((G.modes[m] === 'linear' ? '\u0394' : '\u03bc') + ' = ' + G.mu[s * d + j]);
    }
    ys.push(G.entropy.slice(cell * nt, (cell + 1) * nt));
    var limit = G.entropy_limit[s * nT + k];
    ys.push([limit, limit]);
    names.push('entropy', 'H(softmax(\u03bc\u00b2/T)), the fixed point v = \u03bc');
    var visible = ys.map(function (_, i) { return i < d + 1 || G.modes[m] === 'nonlinear'; });
    Plotly.update(gd, {y: ys, name: names, visible: visible},
                  {'title.text': G.titles[m] + '   |   spread of \u03bc = ' + G.spreads[s]
                                 + ', T = ' + G.temperatures[k]});
  }
  gd.on('plotly_sliderchange', redraw);
  gd.on('plotly_buttonclicked', redraw);
})();
"""

_TITLES = {"linear": "linear (Theorem 2): v \u2190 v + \u03b7 \u0394\u2218a",
           "nonlinear": "nonlinear (Theorem 4): v \u2190 v + \u03b7 (\u03bc \u2212 v)\u2218a"}


def _payload(grid: dict[str, np.ndarray]) -> dict[str, object]:
    """What the page's script needs: the grid in flat lists, rounded, plus labels."""
    return {"modes": list(MODES), "titles": [_TITLES[m] for m in MODES], "d": int(grid["mu"].shape[1]),
            "steps": grid["steps"].tolist(), "spreads": [f"{s:g}" for s in grid["spreads"]],
            "temperatures": [f"{t:g}" for t in grid["temperatures"]],
            "mu": [f"{x:.2f}" for x in grid["mu"].ravel()], "v": _rounded(grid["v"]),
            "entropy": _rounded(grid["entropy"]), "entropy_limit": _rounded(grid["entropy_limit"])}


def _check_grid(grid: dict[str, np.ndarray]) -> None:
    """Raise a clear ValueError unless ``grid`` has the arrays and shapes of :func:`explorer_grid`."""
    missing = {"spreads", "temperatures", "steps", "mu", "v", "entropy", "entropy_limit"} - set(grid)
    if missing:
        raise ValueError(f"grid lacks the arrays {sorted(missing)}; build it with explorer_grid()")
    shape = (len(MODES), grid["spreads"].size, grid["temperatures"].size, grid["steps"].size, grid["mu"].shape[1])
    if grid["v"].shape != shape or grid["entropy"].shape != shape[:-1]:
        raise ValueError(f"grid arrays v {grid['v'].shape} / entropy {grid['entropy'].shape} do not match "
                         f"the expected {shape} / {shape[:-1]}")


def explorer_figure(grid: dict[str, np.ndarray], spread: float = FIG4_SPREAD, temperature: float = 3.0,
                    mode: str = "nonlinear") -> go.Figure:
    """The plotly figure, showing grid point (``mode``, ``spread``, ``temperature``) at first.

    Left panel: the components ``v_j(t)``, coloured by the rank of ``mu_j`` (yellow = most salient).
    Right panel: the attention entropy, the uniform level ``ln d`` and, in the nonlinear case,
    the entropy of the fixed point ``v = mu``. The controls use plotly's ``"skip"`` method: they
    only move; :data:`_SCRIPT` (added by :func:`explorer_html`) redraws from the grid.
    """
    import plotly.graph_objects as go
    from plotly.colors import sample_colorscale
    from plotly.subplots import make_subplots

    _check_grid(grid)
    spreads, temps = grid["spreads"], grid["temperatures"]
    mode = check_choice("mode", mode, MODES)
    s = _index_of("spread", spread, spreads)
    k = _index_of("temperature", temperature, temps)
    m = MODES.index(mode)
    steps, mu = grid["steps"].tolist(), grid["mu"][s]
    d = mu.size
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1)
    colors = sample_colorscale("Viridis", list(np.linspace(0.0, 1.0, d)))
    symbol = "\u0394" if mode == "linear" else "\u03bc"
    for j in range(d):
        fig.add_trace(go.Scatter(x=steps, y=_rounded(grid["v"][m, s, k, :, j]), mode="lines",
                                 line={"color": colors[j], "width": 1.6}, name=f"{symbol} = {mu[j]:.2f}",
                                 showlegend=False, hovertemplate="%{fullData.name}<br>step %{x}: v = %{y}"),
                      row=1, col=1)
    fig.add_trace(go.Scatter(x=steps, y=_rounded(grid["entropy"][m, s, k]), mode="lines", name="entropy",
                             line={"color": "black", "width": 2.2}), row=1, col=2)
    limit = _rounded(grid["entropy_limit"][s, k])[0]
    fig.add_trace(go.Scatter(x=[steps[0], steps[-1]], y=[limit, limit], mode="lines",
                             name="H(softmax(\u03bc\u00b2/T)), the fixed point v = \u03bc",
                             line={"color": "firebrick", "dash": "dot"}, visible=mode == "nonlinear"),
                  row=1, col=2)
    fig.add_hline(y=float(np.log(d)), line={"color": "grey", "dash": "dash", "width": 1},
                  annotation_text=f"uniform, ln {d}", annotation_position="bottom right", row=1, col=2)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="components v<sub>j</sub>(t) (colour: rank of \u03bc<sub>j</sub>)", row=1, col=1)
    fig.update_yaxes(title_text="attention entropy H(a(t))", rangemode="tozero", row=1, col=2)

    def slider(values: np.ndarray, active: int, prefix: str, y: float) -> dict[str, object]:
        return {"active": active, "y": y, "len": 0.9, "x": 0.05, "pad": {"t": 10, "b": 10},
                "currentvalue": {"prefix": prefix}, "name": prefix,
                "steps": [{"method": "skip", "label": f"{x:g}", "args": []} for x in values]}

    fig.update_layout(
        height=640, margin={"t": 120, "b": 200, "l": 70, "r": 30},
        title={"text": f"{_TITLES[mode]}   |   spread of \u03bc = {spreads[s]:g}, T = {temps[k]:g}",
               "font": {"size": 14}, "y": 0.97},
        legend={"orientation": "h", "x": 1.0, "xanchor": "right", "y": 1.02, "yanchor": "bottom",
                "font": {"size": 11}},
        updatemenus=[
            {"type": "buttons", "direction": "right", "active": m, "x": 0.0, "xanchor": "left", "y": 1.2,
             "yanchor": "bottom", "showactive": True,
             "buttons": [{"method": "skip", "label": label, "args": []}
                         for label in ("linear (Theorem 2)", "nonlinear (Theorem 4)")]},
            {"type": "buttons", "direction": "right", "active": 0, "x": 0.0, "xanchor": "left", "y": 1.02,
             "yanchor": "bottom", "showactive": True, "font": {"size": 10},
             "buttons": [{"method": "relayout", "label": f"v axis: {scale}", "args": [{"yaxis.type": scale}]}
                         for scale in ("linear", "log")]},
        ],
        sliders=[slider(spreads, s, "spread of \u03bc (max \u2212 min): ", -0.2),
                 slider(temps, k, "temperature T: ", -0.55)],
    )
    return fig


def explorer_html(grid: dict[str, np.ndarray], div_id: str = "joma-explorer", include_plotlyjs: bool = False,
                  **initial: Any) -> str:
    """HTML fragment for the page: the figure of :func:`explorer_figure` plus the grid and its script.

    With ``include_plotlyjs=False`` (the book) the fragment loads no plotly.js and expects a
    global ``Plotly`` (the book's :mod:`joma_lib.sphinx_plotly` extension provides it); until the
    plot is drawn, a short note says what is missing. ``include_plotlyjs=True`` inlines the bundle
    of the installed ``plotly`` package (about 5 MB), which works in Jupyter or Colab, still
    without a CDN. ``initial`` is passed to :func:`explorer_figure` (the point shown first).
    """
    if not isinstance(div_id, str) or not div_id.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"div_id must be a non-empty identifier of letters, digits, '-' or '_', got {div_id!r}")
    check_choice("include_plotlyjs", include_plotlyjs, (True, False))
    fig = explorer_figure(grid, **initial)
    script = _SCRIPT % json.dumps(_payload(grid), separators=(",", ":"))
    note = (f'<p id="{div_id}-fallback"><em>The interactive explorer needs plotly.js, which the book\'s web page '
            "provides. In a notebook, display <code>explorer_html(grid, include_plotlyjs=True)</code> instead, "
            "or use the live widgets of the chapter on Theorems 3 and 4.</em></p>")
    return note + fig.to_html(full_html=False, include_plotlyjs=include_plotlyjs, div_id=div_id,
                              post_script=script, config={"displaylogo": False, "responsive": True})


def _index_of(name: str, value: float, values: np.ndarray) -> int:
    """Position of ``value`` among the grid's ``values`` (to 1e-9); ValueError listing them otherwise."""
    x = check_float(name, value)
    hits = np.flatnonzero(np.isclose(values, x, rtol=0.0, atol=1e-9))
    if hits.size == 0:
        raise ValueError(f"{name} must be one of the grid's values {[float(v) for v in values]}, got {value!r}")
    return int(hits[0])
