"""Kernel-free explorers: precomputed grids drawn by plotly, redrawn in the browser without Python.

A static HTML page cannot run Python, so each explorer discretises the reader's knobs and every
grid point is computed when the book is built. One code path serves every explorer:

* :class:`Control` is one knob: a slider or a row of buttons over a few values;
* :class:`Trace` is one plotted curve whose ``y`` (and optionally ``x``, name, colour) is stored for
  every grid cell; a cell where a curve is all NaN hides that curve;
* :class:`Axes` describes one panel's axes (a panel is one subplot);
* :class:`Explorer` puts them together: :meth:`Explorer.figure` is the plotly figure at one grid
  cell, :meth:`Explorer.html` the page fragment with the grid embedded as JSON and a few lines of
  JavaScript (:data:`_SCRIPT`) that, when a control moves, pick the cell and swap the traces'
  data. The script also stacks the panels vertically on narrow screens (phones), growing the figure's
  box with them, and records how long the last redraw took (``data-redraw-ms`` on the graph div).

The HTML loads no plotly.js itself: the book serves the bundle of the installed ``plotly``
package (see the book's Sphinx extension ``_ext/sphinx_plotly.py``), so a built page works from ``file://`` and offline.

Each chapter with an explorer builds it in its ``explorer.py`` from the data of a registered grid figure
(e.g. :mod:`joma_lib.chapters.explore.explorer` for Fig. 4).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from joma_lib.base.validation import check_choice, check_float, check_int

if TYPE_CHECKING:
    import plotly.graph_objects as go

MAX_GRID_POINTS = 400  # simulations per grid; keeps page size and build time bounded
SIGNIFICANT_DIGITS = 4  # default precision of the numbers embedded in the page
NARROW_PX = 600  # below this width of the graph, the panels are stacked vertically
CONTROL_KINDS = ("slider", "buttons")


# --- The generic explorer ----------------------------------------------------------------------


@dataclass(frozen=True)
class Control:
    """One knob of an explorer: a grid axis shown as a slider or a row of buttons.

    ``key`` names it in :meth:`Explorer.figure`'s ``initial``; ``values`` are the grid's values
    along the axis (numbers or strings) and ``labels`` what the reader sees (default: ``f"{v:g}"``).
    """

    key: str
    label: str
    values: tuple[Any, ...]
    kind: str = "slider"
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, CONTROL_KINDS)
        if len(self.values) == 0:
            raise ValueError(f"control {self.key!r} needs at least one value")
        if self.labels and len(self.labels) != len(self.values):
            raise ValueError(f"control {self.key!r} has {len(self.values)} values but {len(self.labels)} labels")

    @property
    def stop_labels(self) -> tuple[str, ...]:
        """What each stop says: ``labels``, or the values themselves."""
        return self.labels or tuple(v if isinstance(v, str) else f"{v:g}" for v in self.values)

    def index(self, value: Any) -> int:
        """Position of ``value`` among the control's values (numbers to 1e-9); ValueError listing them."""
        for i, v in enumerate(self.values):
            if isinstance(v, str) or isinstance(value, str):
                if v == value:
                    return i
            elif np.isclose(float(v), check_float(self.key, value), rtol=0.0, atol=1e-9):
                return i
        raise ValueError(f"{self.key} must be one of the grid's values {list(self.values)}, got {value!r}")


@dataclass(frozen=True)
class Trace:
    """One curve, stored for every grid cell.

    ``y`` has shape ``grid + (n,)`` (NaN where nothing is drawn; an all-NaN cell hides the curve);
    ``x`` is ``(n,)`` shared by all cells, or ``grid + (n,)``. ``name`` and ``color`` are one string
    or an array of strings of the grid's shape (one per cell). ``panel`` is the subplot (0-based).
    ``style`` goes to :class:`plotly.graph_objects.Scatter` (``mode``, ``line``, ``showlegend``...).
    """

    y: np.ndarray
    x: np.ndarray
    name: str | np.ndarray = ""
    color: str | np.ndarray | None = None
    panel: int = 0
    style: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Axes:
    """One subplot: axis titles and extra axis settings (e.g. ``{"type": "log"}``)."""

    x_title: str
    y_title: str
    x_axis: Mapping[str, Any] = field(default_factory=dict)
    y_axis: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explorer:
    """Controls, panels and traces over one grid, plus a title per cell (an array of the grid's shape).

    ``menus`` are extra plotly ``updatemenus`` that are not grid axes (e.g. a log-scale toggle);
    ``digits`` the significant digits of the numbers embedded in the page.
    """

    controls: tuple[Control, ...]
    panels: tuple[Axes, ...]
    traces: tuple[Trace, ...]
    titles: np.ndarray
    menus: tuple[Mapping[str, Any], ...] = ()
    digits: int = SIGNIFICANT_DIGITS

    def __post_init__(self) -> None:
        shape = self.shape
        if np.shape(self.titles) != shape:
            raise ValueError(f"titles must have the grid's shape {shape}, got {np.shape(self.titles)}")
        if not self.traces or not self.panels:
            raise ValueError("an explorer needs at least one panel and one trace")
        check_int("digits", self.digits, 2, 8)
        for i, trace in enumerate(self.traces):
            y = np.asarray(trace.y)
            if y.ndim != len(shape) + 1 or y.shape[:-1] != shape:
                raise ValueError(f"traces[{i}].y must have shape {shape} + (n,), got {y.shape}")
            if np.shape(trace.x) not in ((y.shape[-1],), y.shape):
                raise ValueError(f"traces[{i}].x must have shape ({y.shape[-1]},) or {y.shape}, "
                                 f"got {np.shape(trace.x)}")
            for what in ("name", "color"):
                value = getattr(trace, what)
                if not (value is None or isinstance(value, str) or np.shape(value) == shape):
                    raise ValueError(f"traces[{i}].{what} must be a string or an array of the grid's shape {shape}")
            check_int(f"traces[{i}].panel", trace.panel, 0, len(self.panels) - 1)

    @property
    def shape(self) -> tuple[int, ...]:
        """The grid's shape: one axis per control, in order."""
        return tuple(len(c.values) for c in self.controls)

    def cell(self, initial: Mapping[str, Any] | None = None) -> tuple[int, ...]:
        """Grid index of ``initial`` (control key -> value); unnamed controls start at their first value."""
        initial = dict(initial or {})
        unknown = set(initial) - {c.key for c in self.controls}
        if unknown:
            raise ValueError(f"unknown controls {sorted(unknown)}; known: {[c.key for c in self.controls]}")
        return tuple(c.index(initial[c.key]) if c.key in initial else 0 for c in self.controls)

    def figure(self, initial: Mapping[str, Any] | None = None) -> go.Figure:
        """The plotly figure at grid cell ``initial``, its controls set there (they only move: method "skip")."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        index = self.cell(initial)
        fig = make_subplots(rows=1, cols=len(self.panels), horizontal_spacing=0.1)
        for trace in self.traces:
            y = _rounded(np.asarray(trace.y)[index], self.digits)
            x = np.asarray(trace.x)
            fig.add_trace(go.Scatter(x=_rounded(x if x.ndim == 1 else x[index], self.digits), y=y,
                                     name=_pick(trace.name, index), visible=any(v is not None for v in y),
                                     **_styled(trace.style, _pick(trace.color, index))),
                          row=1, col=trace.panel + 1)
        for k, panel in enumerate(self.panels):
            fig.update_xaxes(title_text=panel.x_title, row=1, col=k + 1, **panel.x_axis)
            fig.update_yaxes(title_text=panel.y_title, row=1, col=k + 1, **panel.y_axis)
        menus = [{"type": "buttons", "direction": "right", "active": index[i], "x": 0.0, "xanchor": "left",
                  "yanchor": "bottom", "showactive": True, "name": c.label,
                  "buttons": [{"method": "skip", "label": label, "args": []} for label in c.stop_labels]}
                 for i, c in enumerate(self.controls) if c.kind == "buttons"]
        menus += [{"x": 0.0, "xanchor": "left", "yanchor": "bottom", "type": "buttons", "direction": "right",
                   **menu} for menu in self.menus]
        sliders = [{"active": index[i], "x": 0.0, "len": 1.0, "yanchor": "top", "pad": {"t": 10, "b": 10},
                    "currentvalue": {"prefix": f"{c.label}: "}, "name": c.label,
                    "steps": [{"method": "skip", "label": label, "args": []} for label in c.stop_labels]}
                   for i, c in enumerate(self.controls) if c.kind == "slider"]
        fig.update_layout(title={"text": str(self.titles[index]), "font": {"size": 13}, "x": 0.0, "xanchor": "left",
                                 "yanchor": "top"},
                          legend={"orientation": "h", "x": 0.0, "xanchor": "left", "yanchor": "top",
                                  "font": {"size": 11}},
                          updatemenus=menus, sliders=sliders)
        fig.plotly_relayout(self._layout(narrow=False))
        return fig

    def _layout(self, narrow: bool) -> dict[str, Any]:
        """Sizes and positions (plotly relayout keys) for a wide screen (panels side by side) or a narrow one."""
        n_panels, n_menus = len(self.panels), len(self.menus) + sum(c.kind == "buttons" for c in self.controls)
        n_sliders = sum(c.kind == "slider" for c in self.controls)
        n_legend = sum(bool(t.style.get("showlegend", True)) for t in self.traces)
        panel_h, gap = (250, 80) if narrow else (340, 0)
        plot_h = panel_h * (n_panels if narrow else 1) + gap * (n_panels - 1 if narrow else 0)
        top = 72 + 38 * n_menus
        bottom = 60 + 85 * n_sliders + 22 * (n_legend if narrow else -(-n_legend // 3))
        out: dict[str, Any] = {"height": plot_h + top + bottom, "margin.t": top, "margin.b": bottom,
                               "margin.l": 60, "margin.r": 20, "title.y": 1 - 24 / (plot_h + top + bottom),
                               "title.font.size": 11 if narrow else 13, "legend.y": -(60 + 85 * n_sliders) / plot_h}
        spacing = 0.1
        width = (1 - spacing * (n_panels - 1)) / n_panels
        for k in range(n_panels):
            suffix = "" if k == 0 else str(k + 1)
            if narrow:
                upper = 1 - k * (panel_h + gap) / plot_h
                out[f"xaxis{suffix}.domain"] = [0.0, 1.0]
                out[f"yaxis{suffix}.domain"] = [upper - panel_h / plot_h, upper]
            else:
                out[f"xaxis{suffix}.domain"] = [k * (width + spacing), k * (width + spacing) + width]
                out[f"yaxis{suffix}.domain"] = [0.0, 1.0]
        for i in range(n_menus):
            out[f"updatemenus[{i}].y"] = 1 + (8 + 38 * (n_menus - 1 - i)) / plot_h
        for i in range(n_sliders):
            out[f"sliders[{i}].y"] = -(55 + 85 * i) / plot_h
        return out

    def payload(self) -> dict[str, Any]:
        """What the page's script needs: the grid flattened in C order (cell-major), rounded, NaN as null.

        Each distinct ``x`` array (by identity) is stored once in ``xs``; a trace points at it (``xi``) and
        says whether it holds one row per cell (``xcell``).
        """
        xs: list[list[float | None]] = []
        seen: dict[int, int] = {}
        traces = []
        for trace in self.traces:
            y, x = np.asarray(trace.y), np.asarray(trace.x)
            if id(trace.x) not in seen:
                seen[id(trace.x)] = len(xs)
                xs.append(_rounded(x, self.digits))
            entry: dict[str, Any] = {"n": int(y.shape[-1]), "y": _rounded(y, self.digits),
                                     "xi": seen[id(trace.x)], "xcell": x.ndim > 1}
            for what, many in (("name", "names"), ("color", "colors")):
                value = getattr(trace, what)
                entry[what], entry[many] = (value, None) if value is None or isinstance(value, str) else (
                    None, [str(v) for v in np.asarray(value).ravel()])
            traces.append(entry)
        controls = []
        count = {"slider": 0, "buttons": 0}
        for c in self.controls:
            controls.append({"kind": c.kind, "index": count[c.kind]})
            count[c.kind] += 1
        return {"shape": list(self.shape), "controls": controls, "traces": traces, "xs": xs,
                "titles": [str(t) for t in np.asarray(self.titles).ravel()],
                "wide": self._layout(narrow=False), "narrow": self._layout(narrow=True)}

    def html(self, div_id: str, include_plotlyjs: bool = False, initial: Mapping[str, Any] | None = None,
             note: str = "") -> str:
        """HTML fragment for a page: the figure at ``initial``, the grid as JSON, and the redraw script.

        With ``include_plotlyjs=False`` (the book) the fragment loads no plotly.js and expects a
        global ``Plotly`` (the book's ``_ext/sphinx_plotly`` Sphinx extension serves it); until the plot is
        drawn, a short note (``note`` or a default) says what is missing. ``include_plotlyjs=True``
        inlines the bundle of the installed ``plotly`` package (about 5 MB), which works in Jupyter or
        Colab, still without a CDN.
        """
        if not isinstance(div_id, str) or not div_id.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"div_id must be a non-empty identifier of letters, digits, '-' or '_', got {div_id!r}")
        check_choice("include_plotlyjs", include_plotlyjs, (True, False))
        script = (_SCRIPT.replace("__ID__", div_id).replace("__NARROW__", str(NARROW_PX))
                  .replace("__GRID__", json.dumps(self.payload(), separators=(",", ":"), allow_nan=False)))
        note = note or ("The interactive explorer needs plotly.js, which the book's web page provides. In a "
                        "notebook, display its <code>html(..., include_plotlyjs=True)</code> instead.")
        return (f'<p id="{div_id}-fallback"><em>{note}</em></p>'
                + self.figure(initial).to_html(full_html=False, include_plotlyjs=include_plotlyjs, div_id=div_id,
                                               post_script=script,
                                               config={"displaylogo": False, "responsive": True}))


def _pick(value: str | np.ndarray | None, index: tuple[int, ...]) -> str | None:
    """A trace's name/colour at one cell: the string itself, or the array's entry."""
    return value if value is None or isinstance(value, str) else str(np.asarray(value)[index])


def _styled(style: Mapping[str, Any], color: str | None) -> dict[str, Any]:
    """``style`` with the colour set on the line and the markers (what the script restyles)."""
    out = {"mode": "lines", **style}
    if color is not None:
        out["line"] = {**dict(style.get("line", {})), "color": color}
        out["marker"] = {**dict(style.get("marker", {})), "color": color}
    return out


def _rounded(array: np.ndarray, digits: int = SIGNIFICANT_DIGITS) -> list[float | None]:
    """The array flattened (C order) with ``digits`` significant digits; NaN becomes None (JSON null)."""
    return [None if not np.isfinite(x) else float(f"{x:.{digits}g}")
            for x in np.asarray(array, dtype=np.float64).ravel()]


# Picks the grid cell the controls point at and swaps every trace's data; see Explorer.payload.
_SCRIPT = """
(function () {
  var gd = document.getElementById('__ID__'), note = document.getElementById('__ID__-fallback');
  if (note) { note.remove(); }
  var G = __GRID__;
  var narrow = null;
  function active(c) {
    return c.kind === 'slider' ? gd.layout.sliders[c.index].active : gd.layout.updatemenus[c.index].active;
  }
  function redraw() {
    var t0 = performance.now(), cell = 0;
    G.controls.forEach(function (c, i) { cell = cell * G.shape[i] + active(c); });
    // Restyle only what changed (undefined leaves a trace's attribute alone): names, colours and visibility
    // change rarely, and restyling them forces a slower redraw.
    var u = {x: [], y: [], name: [], visible: [], 'line.color': []};
    G.traces.forEach(function (T, i) {
      var now = gd.data[i], y = T.y.slice(cell * T.n, (cell + 1) * T.n);
      var name = T.names ? T.names[cell] : T.name, visible = y.some(function (v) { return v !== null; });
      var colour = T.colors ? T.colors[cell] : undefined;
      u.y.push(y);
      u.x.push(T.xcell ? G.xs[T.xi].slice(cell * T.n, (cell + 1) * T.n) : undefined);
      u.name.push(name !== now.name ? name : undefined);
      u.visible.push(visible !== (now.visible !== false) ? visible : undefined);
      u['line.color'].push(colour !== undefined && colour !== (now.line || {}).color ? colour : undefined);
    });
    Object.keys(u).forEach(function (key) {
      if (u[key].every(function (v) { return v === undefined; })) { delete u[key]; }
    });
    Plotly.update(gd, u, {'title.text': G.titles[cell]});
    gd.setAttribute('data-cell', String(cell));
    gd.setAttribute('data-redraw-ms', (performance.now() - t0).toFixed(1));
  }
  function fit() {
    var now = gd.clientWidth < __NARROW__;
    if (now !== narrow) {
      narrow = now;
      var layout = now ? G.narrow : G.wide;
      // plotly's wrapper div keeps the first height; grow it with the layout, or the page's output box
      // (overflow: auto) cuts the stacked panels, sliders and legend off behind a scroll bar
      gd.parentElement.style.height = layout.height + 'px';
      Plotly.relayout(gd, layout);
    }
  }
  gd.on('plotly_sliderchange', redraw);
  gd.on('plotly_buttonclicked', redraw);
  fit();
  window.addEventListener('resize', fit);
})();
"""


# --- Grid helpers shared by every explorer's data ---

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

def increasing_values(name: str, values: Sequence[float], low: float, high: float) -> np.ndarray:
    """``values`` as a float array, each in ``(low, high]`` and strictly increasing (one slider's stops)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of numbers in ({low:g}, {high:g}], got {values!r}")
    out = np.array([check_float(f"{name}[{i}]", x, low, high, low_open=True) for i, x in enumerate(values)])
    if np.any(np.diff(out) <= 0):
        raise ValueError(f"{name} must be strictly increasing (they become slider stops), got {list(values)!r}")
    return out
