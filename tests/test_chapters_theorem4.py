"""The Theorem 4 chapter (joma_lib.chapters.theorem4): its figures' data, the numbers its page quotes, and its live
widget of the modified-MLP dynamics, which reacts to its controls."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.chapters.theorem4 import (
    ModifiedMLPWidget,
    authors_float32_entropy,
    convergence_offsets,
    entropy_run,
    modified_mlp_widget,
    underflow_time,
)
from joma_lib.theory.dynamics import integrate_nonlinear

IDS = ("fig4", "c-fig4-variants", "c-thm4-rates")


@pytest.mark.parametrize("fig_id", IDS)
def test_matches_reference_and_draws(figures_by_id, fig_id, drawn_like_reference):
    drawn_like_reference(fig_id, figures_by_id[fig_id])


def test_widget_redraws_on_control_changes():
    widget = ModifiedMLPWidget(n_steps=1000)
    first = widget.image.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    widget.controls["temperature"].value = 1.0       # an observed change triggers a redraw
    assert widget.image.value != first
    ms = widget.update(nonlinear=False, n=5)
    assert ms > 0 and len(widget.drawing.v_lines) == 5
    assert not any(line.get_visible() for line in widget.drawing.mu_lines)  # no targets in the linear case
    x, y = widget.drawing.entropy_line.get_data()
    assert x[-1] == 1000 and y[-1] < 0.3                # most salient takes all
    assert "entropy: start" in widget.status.value


def test_widget_matches_library_run():
    widget = ModifiedMLPWidget(n_steps=500)
    steps, v0 = widget.drawing.v_lines[-1].get_data()
    from joma_lib.theory.softmax_dynamics import fig4_mu, simulate_softmax_attention

    run = simulate_softmax_attention(fig4_mu(), n_steps=500)
    np.testing.assert_allclose(v0, run.v[steps, -1], rtol=1e-12)


def test_widget_rejects_unknown_controls_and_builds_its_ipywidget():
    widget = ModifiedMLPWidget(n_steps=200)
    with pytest.raises(ValueError, match="unknown controls"):
        widget.update(colour="red")
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
    assert np.all(d["omega"][-1] > 100)  # delta = exp(-omega) far below what v could resolve


def test_float32_entropy_is_the_authors_loop_and_differs_from_float64_only_in_rounding(figures_by_id):
    d = figures_by_id["fig4"]
    h32 = authors_float32_entropy(d["mu"])
    assert h32.shape == d["entropy"].shape and h32.dtype == np.float64
    gap = np.abs(h32 - d["entropy"]).max()
    assert 0 < gap < 1.2e-5  # float32 rounds (not identical), and stays within the page's bound


def test_underflow_time_is_where_delta_passes_the_decades():
    t300 = underflow_time(2.0, decades=300)
    decades = integrate_nonlinear([2.0], [t300 - 0.1, t300]).omega[:, 0] / np.log(10)
    assert decades[0] < 300 <= decades[1] and 90 < t300 < 100
    assert underflow_time(2.0, decades=10) < t300  # fewer decades, sooner
    with pytest.raises(ValueError, match="stays above"):
        underflow_time(1.0, decades=300, t_max=1.0)


def test_entropy_run_summarises_the_curve(figures_by_id):
    run = entropy_run(figures_by_id["fig4"]["mu"])
    h = figures_by_id["fig4"]["entropy"]
    assert run.minimum == pytest.approx(h.min()) and run.end == pytest.approx(h[-1])
    assert run.drop == pytest.approx(h[0] - h.min()) and run.rise == pytest.approx(h[-1] - h.min())
    assert run.limit == pytest.approx(float(figures_by_id["fig4"]["entropy_limit"]))


def test_convergence_offsets_give_the_one_over_t_term_of_the_ratio():
    offsets = convergence_offsets([3.0, 2.0])
    assert np.all(offsets > 0)
    omega = integrate_nonlinear([3.0, 2.0], [50.0]).omega[0]  # omega_j(t) = e^{mu_j^2/2} (t - t0_j), long after t0_j
    np.testing.assert_allclose(omega, np.exp(np.array([4.5, 2.0])) * (50.0 - offsets), rtol=1e-6)
