"""The Theorems 3-4 chapter (joma_lib.chapters.theorems3_4): its figures' data and its live widget of the modified-MLP
dynamics, which reacts to its controls."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.chapters.theorems3_4.widget import ModifiedMLPWidget, modified_mlp_widget

IDS = ("fig4", "c-fig4-variants", "c-thm4-rates", "c-thm3-relu", "c-thm3-portrait")


@pytest.mark.parametrize("fig_id", IDS)
def test_matches_reference_and_draws(figures_by_id, fig_id, drawn_like_reference):
    drawn_like_reference(fig_id, figures_by_id[fig_id])


def test_panel_redraws_on_control_changes():
    explorer = ModifiedMLPWidget(n_steps=1000)
    first = explorer.image.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    explorer.controls["temperature"].value = 1.0       # an observed change triggers a redraw
    assert explorer.image.value != first
    ms = explorer.update(nonlinear=False, n=5)
    assert ms > 0 and len(explorer.drawing.v_lines) == 5
    assert not any(line.get_visible() for line in explorer.drawing.mu_lines)  # no targets in the linear case
    x, y = explorer.drawing.entropy_line.get_data()
    assert x[-1] == 1000 and y[-1] < 0.3                # most salient takes all
    assert "entropy: start" in explorer.status.value


def test_panel_matches_library_run():
    explorer = ModifiedMLPWidget(n_steps=500)
    steps, v0 = explorer.drawing.v_lines[-1].get_data()
    from joma_lib.softmax_dynamics import fig4_mu, simulate_softmax_attention

    run = simulate_softmax_attention(fig4_mu(), n_steps=500)
    np.testing.assert_allclose(v0, run.v[steps, -1], rtol=1e-12)


def test_panel_rejects_unknown_controls_and_builds_widget():
    explorer = ModifiedMLPWidget(n_steps=200)
    with pytest.raises(ValueError, match="unknown controls"):
        explorer.update(colour="red")
    assert modified_mlp_widget(n_steps=200).children


def test_fig4_data(figures_by_id):
    d = figures_by_id["fig4"]
    assert d["v_snapshots"].shape == (50, 10) and d["snapshot_steps"][-1] == 4900
    h = d["entropy"]
    assert h.shape == (5001,) and h[0] == pytest.approx(np.log(10))
    assert int(np.argmin(h)) == pytest.approx(669, abs=2) and h[-1] == pytest.approx(1.549, abs=2e-3)
    assert float(d["entropy_limit"]) == pytest.approx(1.6216, abs=1e-3)


def test_fig4_variants_data(figures_by_id):
    d = figures_by_id["c-fig4-variants"]
    ode_h = d["ode_entropy"]
    i_min = int(np.argmin(ode_h))
    assert 0 < i_min < ode_h.size - 1 and ode_h[-1] - ode_h[i_min] >= 0.2  # sparse, then dense, in the ODE too
    assert ode_h[-1] == pytest.approx(float(d["ode_entropy_limit"]), abs=1e-6)
    np.testing.assert_allclose(d["ode_v"][-1], d["mu"], rtol=1e-12)
    assert d["linear_entropy"][-1] < 0.3 and np.all(np.diff(d["linear_entropy"][1:]) <= 1e-12)
    np.testing.assert_allclose(d["fig4_entropy"], figures_by_id["fig4"]["entropy"][d["fig4_steps"]], rtol=1e-14)


def test_rates_data(figures_by_id):
    d = figures_by_id["c-thm4-rates"]
    assert np.all(np.abs(d["ratios"][-1] / d["ratio_limits"] - 1) < 0.002)
    assert np.all(d["u"][-1] > 100)  # delta = exp(-u) far below what v could resolve


def test_relu_data(figures_by_id):
    d = figures_by_id["c-thm3-relu"]
    assert np.all(np.abs(d["closed"] - d["mc"]) < 4.5 * d["mc_stderr"] + 1e-12)
    assert (d["cos_relu"][-1] > 0.99).sum() >= 3 and d["cos_linear"][-1].max() < 0.7


def _rest_point(start):
    """A zero of the 2-D toy's update (c-thm3-portrait's setting), found by Newton's method from ``start``."""
    from scipy.optimize import fsolve

    from joma_lib.nonlinear import decayed_update, two_cluster_mixture

    two = two_cluster_mixture(0.2)
    return fsolve(lambda v: decayed_update(v, -0.6, two, 0.5), start, xtol=1e-13)


def test_the_mixed_rest_point_is_stable_and_a_saddle_would_fail_the_claim(figures_by_id):
    from joma_lib.kit import get_spec
    from joma_lib.nonlinear import decayed_jacobian, two_cluster_mixture

    d = figures_by_id["c-thm3-portrait"]
    claim = {c.claim_id: c for c in get_spec("c-thm3-portrait").claims}["thm3-decay-mixed-rest-stable"]
    np.testing.assert_allclose(d["mixed_rest"], _rest_point([0.9, 0.9]), atol=1e-6)  # a true resting point
    assert claim.evaluate(d)[1] == "holds"
    saddle = _rest_point([0.7, 1.0])   # the toy's own saddle between the mixed point and a centre
    eig = np.sort(np.linalg.eigvals(decayed_jacobian(saddle, -0.6, two_cluster_mixture(0.2), 0.5)).real)
    assert eig[0] < 0 < eig[1]
    assert claim.evaluate({**d, "mixed_eigenvalues": eig})[1] == "fails"


def test_the_mixed_rest_point_has_a_basin_around_the_diagonal(figures_by_id):
    d = figures_by_id["c-thm3-portrait"]
    basin = d["arc_angles"][d["arc_mixed"] == 1]
    assert basin.size > 1 and np.all(np.diff(basin) == 1.0)    # one unbroken arc ...
    assert basin.min() < 45 < basin.max() and basin.min() + basin.max() == 90  # ... symmetric about 45 degrees
