"""Tests of the kernel-free explorers: the generic Explorer, the grids behind each one, and the Sphinx hooks."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from matplotlib.figure import Figure

import sphinx_plotly  # _ext/, on sys.path via pytest's pythonpath
import sphinx_widgets  # _ext/

from joma_lib.softmax_dynamics import fig4_mu, simulate_softmax_attention
from joma_lib.chapters.explore.explorer import FIG4_INITIAL, fig4_explorer
from joma_lib.chapters.explore.figures import MODES, make_explorer_grid, plot_grid
from joma_lib.chapters.hierarchy.explorer import hierarchy_explorer
from joma_lib.chapters.hierarchy.figures import make_hierarchy_grid
from joma_lib.chapters.theorem1.explorer import theorem1_explorer
from joma_lib.chapters.theorem1.figures import make_theorem1_grid
from joma_lib.chapters.wikitext.explorer import wikitext_explorer
from joma_lib.kit.explorer import Axes, Control, Explorer, Trace, sample_steps
from joma_lib.kit import load_reference
from joma_lib.invariants import toy_check
from joma_lib.latent_tree import HBLT, association_time, cooccurrence_exact

SMALL = {"spreads": (1.0, 3.0), "temperatures": (1.0, 3.0), "n_steps": 1500, "n_samples": 40}


@pytest.fixture(scope="module")
def grid() -> dict[str, np.ndarray]:
    return make_explorer_grid(**SMALL)


def payload(html: str) -> dict:
    """The grid JSON that Explorer.html embeds for the page's script."""
    match = re.search(r"var G = (\{.*?\});\n", html)
    assert match, "grid payload not found in the HTML fragment"
    return json.loads(match.group(1))


def cell_data(p: dict, index: tuple[int, ...]) -> list[list]:
    """What the page's script plots at grid cell ``index``: the same flat indexing as the JavaScript."""
    cell = 0
    for i, n in zip(index, p["shape"]):
        cell = cell * n + i
    return [t["y"][cell * t["n"]:(cell + 1) * t["n"]] for t in p["traces"]]


# --- the generic machinery -------------------------------------------------------------------------


def _toy_explorer() -> Explorer:
    y = np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4)
    hidden = y.copy()
    hidden[1] = np.nan  # hidden in every cell of the second button
    return Explorer(controls=(Control("kind", "kind", ("a", "b"), kind="buttons"), Control("k", "k", (1.0, 2.0, 3.0))),
                    panels=(Axes("x", "y"),),
                    traces=(Trace(y=y, x=np.arange(4.0), name=np.array([["n0", "n1", "n2"], ["n3", "n4", "n5"]])),
                            Trace(y=hidden, x=np.arange(4.0), color="red")),
                    titles=np.array([[f"{a}{k}" for k in range(3)] for a in "ab"]))


def test_payload_indexes_cells_in_c_order_and_hides_all_nan_traces():
    ex = _toy_explorer()
    p = payload(ex.html("toy"))
    assert p["shape"] == [2, 3] and p["controls"] == [{"kind": "buttons", "index": 0}, {"kind": "slider", "index": 0}]
    assert cell_data(p, (1, 2))[0] == [20.0, 21.0, 22.0, 23.0]
    assert cell_data(p, (1, 2))[1] == [None] * 4 and cell_data(p, (0, 1))[1] == [4.0, 5.0, 6.0, 7.0]
    assert p["traces"][0]["names"][5] == "n5" and p["titles"][4] == "b1"
    assert len(p["xs"]) == 2  # two x arrays (distinct objects), each stored once
    fig = ex.figure({"kind": "b", "k": 3.0})
    assert fig.data[1].visible is False and list(fig.data[0].y) == [20.0, 21.0, 22.0, 23.0]
    assert fig.layout.updatemenus[0].active == 1 and fig.layout.sliders[0].active == 2


def test_layouts_stack_panels_on_narrow_screens():
    ex = fig4_explorer(make_explorer_grid(**SMALL))
    wide, narrow = ex._layout(narrow=False), ex._layout(narrow=True)
    assert wide["xaxis.domain"][1] < wide["xaxis2.domain"][0] and wide["yaxis.domain"] == wide["yaxis2.domain"]
    assert narrow["xaxis.domain"] == narrow["xaxis2.domain"] == [0.0, 1.0]
    assert narrow["yaxis2.domain"][1] < narrow["yaxis.domain"][0] and narrow["height"] > wide["height"]


@pytest.mark.parametrize("build, match", [
    (lambda t: {"titles": t.titles[:1]}, "titles must have the grid's shape"),
    (lambda t: {"traces": (Trace(y=np.zeros((2, 2, 4)), x=np.arange(4.0)),)}, r"traces\[0\].y must have shape"),
    (lambda t: {"traces": (Trace(y=np.zeros((2, 3, 4)), x=np.arange(5.0)),)}, r"traces\[0\].x must have shape"),
    (lambda t: {"traces": (Trace(y=np.zeros((2, 3, 4)), x=np.arange(4.0), name=np.array(["a"])),)}, "name must be"),
    (lambda t: {"traces": (Trace(y=np.zeros((2, 3, 4)), x=np.arange(4.0), panel=1),)}, "panel"),
    (lambda t: {"traces": ()}, "at least one panel and one trace"),
    (lambda t: {"digits": 1}, "digits"),
])
def test_explorer_rejects_inconsistent_parts(build, match):
    toy = _toy_explorer()
    parts = {"controls": toy.controls, "panels": toy.panels, "traces": toy.traces, "titles": toy.titles,
             **build(toy)}
    with pytest.raises(ValueError, match=match):
        Explorer(**parts)


def test_controls_and_html_reject_bad_input():
    with pytest.raises(ValueError, match="kind"):
        Control("k", "k", (1.0,), kind="dropdown")
    with pytest.raises(ValueError, match="at least one value"):
        Control("k", "k", ())
    with pytest.raises(ValueError, match="labels"):
        Control("k", "k", (1.0, 2.0), labels=("one",))
    ex = _toy_explorer()
    with pytest.raises(ValueError, match="k must be one of the grid's values"):
        ex.figure({"k": 2.5})
    with pytest.raises(ValueError, match="unknown controls"):
        ex.figure({"spread": 1.0})
    with pytest.raises(ValueError, match="div_id"):
        ex.html("bad id\"")
    with pytest.raises(ValueError, match="include_plotlyjs"):
        ex.html("ok", include_plotlyjs="cdn")


def test_html_fragment_loads_nothing_remote_and_notebooks_can_inline_plotly():
    ex = _toy_explorer()
    html = ex.html("ex-1")
    assert "<script src" not in html and not re.search(r"https?://[^\"' ]+\.js", html)
    assert 'id="ex-1"' in html and 'id="ex-1-fallback"' in html and "plotly_sliderchange" in html
    inlined = ex.html("ex-2", include_plotlyjs=True)
    assert len(inlined) > 3_000_000 and "<script src" not in inlined


# --- Fig. 4 grid (page explore) -------------------------------------------------------------------


def test_sample_steps_are_dense_early_and_cover_the_run():
    steps = sample_steps(5000, 80)
    assert steps[0] == 0 and steps[-1] == 5000 and steps.size <= 80
    gaps = np.diff(steps)
    assert np.all(gaps > 0) and gaps[:5].max() < gaps[-5:].min() / 10  # quadratic spacing


def test_grid_shapes_and_types(grid):
    n_t, d = grid["steps"].size, grid["mu"].shape[1]
    assert grid["v"].shape == (2, 2, 2, n_t, d) and grid["v"].dtype == np.float32
    assert grid["entropy"].shape == (2, 2, 2, n_t) and grid["entropy"].dtype == np.float32
    assert grid["entropy_limit"].shape == (2, 2) and grid["steps"][-1] == SMALL["n_steps"]


def test_spread_three_is_the_paper_mu_and_smaller_spreads_rescale_it(grid):
    np.testing.assert_allclose(grid["mu"][1], fig4_mu(0), rtol=1e-12)
    np.testing.assert_allclose(grid["mu"][0] - 1.0, (fig4_mu(0) - 1.0) / 3.0, rtol=1e-12)


def test_every_grid_point_is_the_library_run_at_the_sampled_steps(grid):
    """Catches axis mix-ups: each (mode, spread, T) cell must equal a direct single run."""
    for m, mode in enumerate(MODES):
        for i in range(2):
            for j, temperature in enumerate(grid["temperatures"]):
                run = simulate_softmax_attention(grid["mu"][i], n_steps=SMALL["n_steps"],
                                                 temperature=temperature, nonlinear=mode == "nonlinear")
                np.testing.assert_allclose(grid["v"][m, i, j], run.v[grid["steps"]], rtol=1e-6)
                np.testing.assert_allclose(grid["entropy"][m, i, j], run.entropy[grid["steps"]], rtol=1e-5, atol=1e-7)


def test_entropy_behaviour_linear_vs_nonlinear(grid):
    lin, nonlin = MODES.index("linear"), MODES.index("nonlinear")
    h = grid["entropy"].astype(float)
    np.testing.assert_allclose(h[..., 0], np.log(10), rtol=1e-6)  # v(0) is constant: uniform attention
    assert np.all(np.diff(h[lin], axis=-1) <= 1e-6)  # linear: attention only sharpens
    assert np.all(h[lin, ..., -1] < h[nonlin, ..., -1])
    assert np.all(grid["v"][nonlin].astype(float) <= grid["mu"][:, None, None, :] + 1e-6)  # never past the target
    np.testing.assert_allclose(grid["entropy_limit"][1, 1], 1.622, atol=1e-3)  # H(softmax(mu^2/3)), paper.md


def test_fig4_point_sparse_then_dense():
    g = make_explorer_grid(spreads=(3.0,), temperatures=(3.0,))
    h, steps = g["entropy"][MODES.index("nonlinear"), 0, 0].astype(float), g["steps"]
    i = int(h.argmin())
    assert 0 < i < h.size - 1 and 550 <= steps[i] <= 800
    assert abs(h[i] - 0.942) < 0.01 and h[-1] - h[i] > 0.5


@pytest.mark.parametrize("kwargs, match", [
    ({"spreads": ()}, "spreads must be a non-empty"),
    ({"spreads": (2.0, 1.0)}, "strictly increasing"),
    ({"spreads": (0.0, 1.0)}, r"spreads\[0\]"),
    ({"spreads": "abc"}, "spreads must be"),
    ({"temperatures": (1.0, float("nan"))}, r"temperatures\[1\]"),
    ({"spreads": tuple(np.arange(1, 21) / 2), "temperatures": tuple(np.arange(1, 12))}, "at most 400"),
    ({"n_samples": 1}, "n_samples"),
    ({"n_steps": 0}, "n_steps"),
    ({"profile": "cubic"}, "kind"),
])
def test_bad_grid_arguments_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_explorer_grid(**{**SMALL, **kwargs})


def test_fig4_explorer_plots_the_grid_cell_its_controls_point_at(grid):
    ex = fig4_explorer(grid)
    d, lin = grid["mu"].shape[1], MODES.index("linear")
    p = payload(ex.html("ex-1"))
    for index in [(0, 0, 0), (1, 1, 0), (0, 1, 1)]:
        ys = cell_data(p, index)
        np.testing.assert_allclose(np.array(ys[:d]).T, grid["v"][index], rtol=1e-3)
        np.testing.assert_allclose(ys[d], grid["entropy"][index], rtol=1e-3, atol=1e-30)
        fixed_point = ys[d + 1]
        assert (fixed_point == [None, None]) == (index[0] == lin)  # the fixed-point line: nonlinear only
    fig = ex.figure({"mode": "linear", "spread": 1.0, "temperature": 1.0})
    assert fig.layout.sliders[0].active == 0 and fig.layout.updatemenus[0].active == lin
    assert fig.data[d + 1].visible is False and fig.data[0].name.startswith("\u0394")
    assert ex.cell(FIG4_INITIAL) == (MODES.index("nonlinear"), 1, 1)


def test_summary_plot_draws(grid):
    assert isinstance(plot_grid(grid), Figure)


# --- Theorem 1, Theorem 5 and WikiText grids -----------------------------------------------------------


def test_theorem1_grid_cells_are_the_toy_runs_and_the_explorer_shows_them():
    data = make_theorem1_grid(attentions=("exp", "softmax"), concentrations=(0.1, 10.0), temperatures=(1.0, 2.0),
                          steps=120, record_every=20)
    run = toy_check("softmax", "identity", 0, concentration=10.0, steps=120, record_every=20, temperature=2.0)
    np.testing.assert_allclose(data["nc"][1, 1, 1], run["nc"], rtol=1e-12)
    np.testing.assert_allclose(data["residual"][1, 1, 1], run["residual"], rtol=1e-12)
    assert np.all(data["residual"][0, ..., -1] < 0.01)  # exp attention: the invariant is an identity
    ex = theorem1_explorer(data)
    p = payload(ex.html("t1"))
    ys = cell_data(p, (1, 1, 1))
    np.testing.assert_allclose(ys[1], run["nc"][1:], rtol=1e-3)  # NC panel, from step 1 on
    with pytest.raises(ValueError, match="attentions"):
        make_theorem1_grid(attentions=("cubic",))
    with pytest.raises(ValueError, match="at most 200 runs"):
        make_theorem1_grid(concentrations=tuple(range(1, 30)), temperatures=tuple(range(1, 5)))


def test_hierarchy_grid_matches_theorem5_and_the_association_time():
    data = make_hierarchy_grid(depths=(2, 4), rhos=(0.75, 0.9), n_times=401)
    tree = HBLT(depth=4, rho=0.9)
    for h in range(1, 5):
        p = cooccurrence_exact(tree, 2 ** (h - 1), 0)
        assert data["cooccurrence"][1, 1, h - 1] == pytest.approx(p, rel=1e-12)
        assert data["assoc_time"][1, 1, h - 1] == pytest.approx(association_time(4 * p, 0.9), rel=1e-12)
    assert np.all(np.isnan(data["cooccurrence"][0, :, 2:]))  # a height-2 tree has no H = 3, 4
    assert np.all(np.diff(data["assoc_time"][1, :, :4], axis=-1) > 0)  # near tokens first
    at_t90 = [np.interp(data["assoc_time"][1, 1, h], data["times"], data["association"][1, 1, h]) for h in range(4)]
    np.testing.assert_allclose(at_t90, 0.9, atol=0.005)  # v/mu reaches 0.9 at the quadrature's time
    p = payload(hierarchy_explorer(data).html("h"))
    ys = cell_data(p, (0, 1))
    assert ys[0][:2] == pytest.approx(data["cooccurrence"][0, 1, :2], rel=1e-2) and ys[0][2:] == [None, None]
    with pytest.raises(ValueError, match="depths"):
        make_hierarchy_grid(depths=(4, 2))


def test_wikitext_reference_grid_agrees_with_fig6_and_fig8_and_the_explorer_shows_it():
    """The committed grid against the committed Fig. 6 / Fig. 8 data (both from the authors' runs)."""
    grid, fig6, fig8 = (load_reference(f) for f in ("c-wikitext-grid", "fig6", "fig8"))
    depths, lrs = list(grid["depths"]), list(grid["lrs"])
    for p, n in enumerate(fig6["nlayers"]):
        cell = (0, depths.index(int(n)), lrs.index(1e-4))
        np.testing.assert_allclose(grid["attn_entropy"][cell][:, :n], fig6["attn_entropy"][p, :, :n], rtol=1e-12)
        assert grid["min_val_loss"][cell] == pytest.approx(fig6["min_val_loss"][p], rel=1e-12)
    for p, lr in enumerate(fig8["lr"]):
        cell = (0, depths.index(5), int(np.argmin(np.abs(np.log(grid["lrs"] / lr)))))
        assert grid["min_val_loss"][cell] == pytest.approx(fig8["min_val_loss"][p], rel=1e-12)
    ex = wikitext_explorer(grid)
    payload_ = payload(ex.html("w"))
    ys = cell_data(payload_, (1, 0, lrs.index(1e-3)))  # our re-run, 1 layer
    assert ys[0][0] is not None and all(y[0] is None for y in ys[1:-1])  # one layer drawn, the others hidden
    assert "no run" in ex.titles[1, 4, 0]


# --- Sphinx hooks ------------------------------------------------------------------------------------


def test_sphinx_hook_adds_plotly_only_to_pages_with_a_graph(tmp_path):
    added = []

    class App:
        outdir = tmp_path
        builder = type("B", (), {"format": "html"})()

        def add_js_file(self, name):
            added.append(name)

    app = App()
    sphinx_plotly._add_script(app, "a", "page.html", {"body": "<p>no plot</p>"}, None)
    assert added == []
    sphinx_plotly._add_script(app, "b", "page.html", {"body": f"<p>text</p>{_toy_explorer().html('x')}"}, None)
    assert added == [sphinx_plotly.bundle_name()]
    sphinx_plotly._write_bundle(app, None)
    bundle = tmp_path / "_static" / sphinx_plotly.bundle_name()
    assert bundle.stat().st_size > 1_000_000 and "Plotly" in bundle.read_text(encoding="utf-8")[:5000]


def test_sphinx_hook_drops_the_widget_state_and_scripts():
    js = {"ipywidgets_state": (None, {"body": "{}"}), "ipywidgets_0": ("https://cdn/x.js", {}), "other": ("a.js", {})}
    env = type("Env", (), {"nb_metadata": {"page": {"js_files": js}}})()
    app = type("App", (), {"env": env})()
    sphinx_widgets._drop_widget_scripts(app, "page", "page.html", {}, None)
    assert list(js) == ["other"]
    sphinx_widgets._drop_widget_scripts(app, "absent", "page.html", {}, None)  # pages without notebooks: no-op
