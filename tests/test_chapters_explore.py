"""The explore chapter (joma_lib.chapters.explore): the kernel-free grid of the Theorems 2-4 dynamics, its cells
against the library's runs, and the Fig. 4 explorer that shows it."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from joma_lib.chapters.explore.explorer import FIG4_INITIAL, fig4_explorer
from joma_lib.chapters.explore.figures import MODES, make_explorer_grid, plot_grid
from joma_lib.theory.softmax_dynamics import fig4_mu, simulate_softmax_attention

SMALL = {"spreads": (1.0, 3.0), "temperatures": (1.0, 3.0), "n_steps": 1500, "n_samples": 40}


@pytest.fixture(scope="module")
def grid() -> dict[str, np.ndarray]:
    return make_explorer_grid(**SMALL)


def test_grid_shapes_and_types(grid):
    n_t, d = grid["steps"].size, grid["mu"].shape[1]
    assert grid["v"].shape == (2, 2, 2, n_t, d) and grid["v"].dtype == np.float32
    assert grid["entropy"].shape == (2, 2, 2, n_t) and grid["entropy"].dtype == np.float32
    assert grid["entropy_limit"].shape == (2, 2) and grid["steps"][-1] == SMALL["n_steps"]


def test_spread_three_is_the_paper_mu_and_smaller_spreads_rescale_it(grid):
    np.testing.assert_allclose(grid["mu"][1], fig4_mu(0), rtol=1e-12)
    np.testing.assert_allclose(grid["mu"][0] - 1.0, (fig4_mu(0) - 1.0) / 3.0, rtol=1e-12)


def test_every_grid_point_is_the_library_run_at_the_sampled_steps(grid):
    """Catches axis mix-ups: each (mode, spread, tau_v) cell must equal a direct single run."""
    for m, mode in enumerate(MODES):
        for i in range(2):
            for j, temperature in enumerate(grid["tau_v"]):
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


def test_fig4_explorer_plots_the_grid_cell_its_controls_point_at(grid, payload, cell_data):
    ex = fig4_explorer(grid)
    d, lin = grid["mu"].shape[1], MODES.index("linear")
    p = payload(ex.html("ex-1"))
    for index in [(0, 0, 0), (1, 1, 0), (0, 1, 1)]:
        ys = cell_data(p, index)
        np.testing.assert_allclose(np.array(ys[:d]).T, grid["v"][index], rtol=1e-3)
        np.testing.assert_allclose(ys[d], grid["entropy"][index], rtol=1e-3, atol=1e-30)
        fixed_point = ys[d + 1]
        assert (fixed_point == [None, None]) == (index[0] == lin)  # the fixed-point line: nonlinear only
    fig = ex.figure({"mode": "linear", "spread": 1.0, "tau_v": 1.0})
    assert fig.layout.sliders[0].active == 0 and fig.layout.updatemenus[0].active == lin
    assert fig.data[d + 1].visible is False and fig.data[0].name.startswith("\u0394")
    assert ex.cell(FIG4_INITIAL) == (MODES.index("nonlinear"), 1, 1)


def test_summary_plot_draws(grid):
    assert isinstance(plot_grid(grid), Figure)


def test_layouts_stack_panels_on_narrow_screens():
    ex = fig4_explorer(make_explorer_grid(**SMALL))
    wide, narrow = ex._layout(narrow=False), ex._layout(narrow=True)
    assert wide["xaxis.domain"][1] < wide["xaxis2.domain"][0] and wide["yaxis.domain"] == wide["yaxis2.domain"]
    assert narrow["xaxis.domain"] == narrow["xaxis2.domain"] == [0.0, 1.0]
    assert narrow["yaxis2.domain"][1] < narrow["yaxis.domain"][0] and narrow["height"] > wide["height"]
