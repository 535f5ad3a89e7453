"""Tests of the kernel-free explorer: the precomputed grid, the page fragment and the Sphinx hook."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from joma_lib import sphinx_plotly
from joma_lib.dynamics import fig4_mu, simulate_softmax_attention
from joma_lib.explorable import MODES, explorer_figure, explorer_grid, explorer_html, sample_steps
from joma_lib.figures.explore import plot_grid

SMALL = {"spreads": (1.0, 3.0), "temperatures": (1.0, 3.0), "n_steps": 1500, "n_samples": 40}


@pytest.fixture(scope="module")
def grid() -> dict[str, np.ndarray]:
    return explorer_grid(**SMALL)


def _payload(html: str) -> dict:
    """The grid JSON that explorer_html embeds for the page's script."""
    match = re.search(r"var G = (\{.*?\});\n", html)
    assert match, "grid payload not found in the HTML fragment"
    return json.loads(match.group(1))


def test_sample_steps_are_dense_early_and_cover_the_run():
    steps = sample_steps(5000, 80)
    assert steps[0] == 0 and steps[-1] == 5000 and steps.size <= 80
    assert np.all(np.diff(steps) > 0)
    gaps = np.diff(steps)
    assert gaps[:5].max() < gaps[-5:].min() / 10  # quadratic spacing: early gaps far smaller


def test_grid_shapes_and_types(grid):
    n_t, d = grid["steps"].size, grid["mu"].shape[1]
    assert grid["v"].shape == (2, 2, 2, n_t, d) and grid["v"].dtype == np.float32
    assert grid["entropy"].shape == (2, 2, 2, n_t) and grid["entropy"].dtype == np.float32
    assert grid["entropy_limit"].shape == (2, 2)
    np.testing.assert_array_equal(grid["spreads"], [1.0, 3.0])
    assert grid["steps"][-1] == SMALL["n_steps"]


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
    v, mu = grid["v"].astype(float), grid["mu"]
    assert np.all(v[nonlin] <= mu[:, None, None, :] + 1e-6)  # nonlinear: never past the target
    np.testing.assert_allclose(grid["entropy_limit"][1, 1], 1.622, atol=1e-3)  # H(softmax(mu^2/3)), paper.md


def test_fig4_point_sparse_then_dense():
    g = explorer_grid(spreads=(3.0,), temperatures=(3.0,))
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
    ({"temperatures": (-1.0,)}, r"temperatures\[0\]"),
    ({"spreads": tuple(np.arange(1, 21) / 2), "temperatures": tuple(np.arange(1, 12))}, "at most 400"),
    ({"n_samples": 1}, "n_samples"),
    ({"n_steps": 10, "n_samples": 12}, "n_samples"),
    ({"n_steps": 0}, "n_steps"),
    ({"profile": "cubic"}, "kind"),
])
def test_bad_grid_arguments_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        explorer_grid(**{**SMALL, **kwargs})


def test_html_fragment_loads_nothing_and_embeds_the_grid_in_the_layout_the_script_reads(grid):
    html = explorer_html(grid, div_id="ex-1", spread=1.0, temperature=3.0, mode="linear")
    assert "<script src" not in html and not re.search(r"https?://[^\"' ]+\.js", html)
    assert 'id="ex-1"' in html and "plotly_sliderchange" in html
    assert 'id="ex-1-fallback"' in html  # the note shown where no Plotly draws the figure
    payload = _payload(html)
    n_s, n_t, nt, d = 2, 2, grid["steps"].size, grid["mu"].shape[1]
    v = np.asarray(payload["v"])
    for m, s, k, t, j in [(0, 0, 0, 0, 0), (1, 1, 0, nt - 1, d - 1), (0, 1, 1, nt // 2, 3)]:
        cell = (m * n_s + s) * n_t + k  # the same flat index as the page's script
        assert v[(cell * nt + t) * d + j] == pytest.approx(float(grid["v"][m, s, k, t, j]), rel=1e-3)
        assert payload["entropy"][cell * nt + t] == pytest.approx(float(grid["entropy"][m, s, k, t]), rel=1e-3,
                                                                  abs=1e-30)


def test_html_can_inline_the_installed_plotly_for_notebooks(grid):
    html = explorer_html(grid, include_plotlyjs=True)
    assert len(html) > 3_000_000 and "<script src" not in html
    with pytest.raises(ValueError, match="include_plotlyjs"):
        explorer_html(grid, include_plotlyjs="cdn")


def test_figure_starts_on_the_requested_point(grid):
    fig = explorer_figure(grid, spread=1.0, temperature=1.0, mode="linear")
    assert fig.layout.sliders[0].active == 0 and fig.layout.sliders[1].active == 0
    assert fig.layout.updatemenus[0].active == MODES.index("linear")
    d = grid["mu"].shape[1]
    np.testing.assert_allclose(fig.data[d].y, grid["entropy"][0, 0, 0], rtol=1e-3)
    assert len(fig.data) == d + 2 and fig.data[d + 1].visible is False  # fixed-point line: nonlinear only


@pytest.mark.parametrize("kwargs, match", [
    ({"spread": 2.0}, "spread must be one of the grid's values"),
    ({"temperature": 0.5}, "temperature must be one of"),
    ({"mode": "relu"}, "mode must be one of"),
])
def test_figure_rejects_points_off_the_grid(grid, kwargs, match):
    with pytest.raises(ValueError, match=match):
        explorer_figure(grid, **{"spread": 3.0, "temperature": 3.0, **kwargs})


def test_html_rejects_bad_grid_and_div_id(grid):
    with pytest.raises(ValueError, match="lacks the arrays"):
        explorer_html({k: a for k, a in grid.items() if k != "v"})
    with pytest.raises(ValueError, match="do not match"):
        explorer_html({**grid, "v": grid["v"][:, :1]})
    with pytest.raises(ValueError, match="div_id"):
        explorer_html(grid, div_id="bad id\"")


def test_summary_plot_draws(grid):
    fig = plot_grid(grid)
    assert isinstance(fig, Figure) and len(fig.axes) >= 3


def test_sphinx_hook_adds_plotly_only_to_pages_with_a_graph(tmp_path, grid):
    added = []

    class App:
        outdir = tmp_path
        builder = type("B", (), {"format": "html"})()

        def add_js_file(self, name):
            added.append(name)

    app = App()
    sphinx_plotly._add_script(app, "a", "page.html", {"body": "<p>no plot</p>"}, None)
    assert added == []
    sphinx_plotly._add_script(app, "b", "page.html", {"body": f"<p>text</p>{explorer_html(grid)}"}, None)
    assert added == [sphinx_plotly.bundle_name()]
    sphinx_plotly._write_bundle(app, None)
    bundle = tmp_path / "_static" / sphinx_plotly.bundle_name()
    assert bundle.stat().st_size > 1_000_000 and "Plotly" in bundle.read_text(encoding="utf-8")[:5000]

