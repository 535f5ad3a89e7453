"""Figures of the Theorem 2 and Theorems 3-4 pages: reference data and the claims they carry."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from joma_lib.kit import compare, draw, get_spec, load_reference

IDS = ("c-thm2-closed-form", "c-thm2-saliency", "fig4", "c-fig4-variants", "c-thm4-rates", "c-thm3-relu")


@pytest.fixture(scope="module")
def data(figure_data) -> dict[str, dict[str, np.ndarray]]:
    return {fig_id: figure_data(fig_id) for fig_id in IDS}


@pytest.mark.parametrize("fig_id", IDS)
def test_matches_reference_and_draws(data, fig_id):
    result = compare(get_spec(fig_id), data[fig_id], load_reference(fig_id))
    assert result.passed, result
    fig = draw(fig_id, data[fig_id])
    assert isinstance(fig, Figure) and len(fig.axes) >= 2


def test_thm2_closed_form_figure(data):
    d = data["c-thm2-closed-form"]
    np.testing.assert_allclose(d["v_ode"], d["v_closed"], rtol=1e-6, atol=1e-12)
    assert d["t"][-1] / d["t_star"] == pytest.approx(0.999)
    spread = np.ptp(d["ratio_half"][1:], axis=1)
    assert spread.max() > 0.2 and np.ptp(d["ratio_sqrt2"], axis=1).max() < 1e-6
    assert np.isnan(d["limits"][0]) and np.allclose(d["v_closed"][-1, 1:], d["limits"][1:], atol=2e-3)


def test_fig4_data(data):
    d = data["fig4"]
    assert d["v_snapshots"].shape == (50, 10) and d["snapshot_steps"][-1] == 4900
    h = d["entropy"]
    assert h.shape == (5001,) and h[0] == pytest.approx(np.log(10))
    assert int(np.argmin(h)) == pytest.approx(669, abs=2) and h[-1] == pytest.approx(1.549, abs=2e-3)
    assert float(d["entropy_limit"]) == pytest.approx(1.6216, abs=1e-3)


def test_fig4_variants_data(data):
    d = data["c-fig4-variants"]
    ode_h = d["ode_entropy"]
    i_min = int(np.argmin(ode_h))
    assert 0 < i_min < ode_h.size - 1 and ode_h[-1] - ode_h[i_min] >= 0.2  # sparse, then dense, in the ODE too
    assert ode_h[-1] == pytest.approx(float(d["ode_entropy_limit"]), abs=1e-6)
    np.testing.assert_allclose(d["ode_v"][-1], d["mu"], rtol=1e-12)
    assert d["linear_entropy"][-1] < 0.3 and np.all(np.diff(d["linear_entropy"][1:]) <= 1e-12)
    np.testing.assert_allclose(d["fig4_entropy"], data["fig4"]["entropy"][d["fig4_steps"]], rtol=1e-14)


def test_rates_data(data):
    d = data["c-thm4-rates"]
    assert np.all(np.abs(d["ratios"][-1] / d["ratio_limits"] - 1) < 0.002)
    assert np.all(d["u"][-1] > 100)  # delta = exp(-u) far below what v could resolve


def test_relu_data(data):
    d = data["c-thm3-relu"]
    assert np.all(np.abs(d["closed"] - d["mc"]) < 4.5 * d["mc_stderr"] + 1e-12)
    assert (d["cos_relu"][-1] > 0.99).sum() >= 3 and d["cos_linear"][-1].max() < 0.7
