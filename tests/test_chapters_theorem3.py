"""The Theorem 3 chapter (joma_lib.chapters.theorem3): its figures' data, the resting points of its two-cluster toy,
the answers its exercises quote and its widget."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import fsolve
from scipy.special import ndtr

from joma_lib.chapters.theorem3 import bias_rest_points, fixed_point_rest, relu_figure_settings
from joma_lib.chapters.theorem3 import widget as theorem3_widget_module
from joma_lib.chapters.theorem3.widget import RestingPointWidget, resting_points
from joma_lib.kit import get_claim, get_spec
from joma_lib.theory.nonlinear import decayed_jacobian, decayed_update, two_cluster_mixture

IDS = ("c-thm3-relu", "c-thm3-portrait")


@pytest.mark.parametrize("fig_id", IDS)
def test_matches_reference_and_draws(figures_by_id, fig_id, drawn_like_reference):
    drawn_like_reference(fig_id, figures_by_id[fig_id])


def test_relu_data(figures_by_id):
    d = figures_by_id["c-thm3-relu"]
    assert np.all(np.abs(d["closed"] - d["mc"]) < 4.5 * d["mc_stderr"] + 1e-12)
    assert (d["cos_relu"][-1] > 0.99).sum() >= 3 and d["cos_linear"][-1].max() < 0.7


def _rest_point(start):
    """A zero of the 2-D toy's update (c-thm3-portrait's setting), found by Newton's method from ``start``."""
    two = two_cluster_mixture(0.2)
    return fsolve(lambda v: decayed_update(v, -0.6, two, 0.5), start, xtol=1e-13)


def test_the_mixed_rest_point_is_stable_and_a_saddle_would_fail_the_claim(figures_by_id):
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


def test_the_relu_figure_settings_are_its_defaults_and_params():
    settings = relu_figure_settings()
    assert (settings["n_samples"], settings["n_states"], settings["n_starts"]) == (200_000, 4, 12)
    assert settings["bias"] == -0.5 and settings["seed"] == 0


def test_the_bias_decides_whether_the_node_chooses():
    blend, dead, chooses = bias_rest_points(-0.3), bias_rest_points(-0.9), bias_rest_points(-0.6)
    np.testing.assert_allclose(blend, 1.0, atol=2e-3)   # every start at the linear blend (1, 1)
    assert np.abs(dead).max() < 1e-6                   # every start dies
    assert np.ptp(chooses[:, 0]) > 0.9                 # the page's bias: different starts, different rests


def test_the_fixed_point_iteration_finds_the_resting_point_near_a_centre(figures_by_id):
    two = two_cluster_mixture(0.2)
    rest = fixed_point_rest(two, -0.6, 0.5)
    np.testing.assert_allclose(decayed_update(rest.mu, -0.6, two, 0.5), 0.0, atol=1e-12)  # a true rest
    np.testing.assert_allclose(rest.mu, figures_by_id["c-thm3-portrait"]["final_relu"][0], atol=1e-6)
    assert rest.share == ndtr(rest.kappa) and 0.9 < rest.share < 1 and 0 < rest.noise < 0.05
    assert abs(rest.mu[0] - (rest.share + rest.noise)) < 2e-3  # the page's account of mu_1 < 1


def test_the_widget_at_the_page_settings_ends_where_the_portrait_does(figures_by_id):
    d = figures_by_id["c-thm3-portrait"]
    view = resting_points()
    np.testing.assert_allclose(view.traj[-1], d["final_relu"], atol=1e-8)  # the figure's flow, not a copy of it
    assert view.kinds == ("centre 1",) * 4 + ("mixed",) + ("centre 2",) * 4
    assert [k.startswith("centre") for k in view.kinds] == list(d["cos_relu"] > 0.99)
    np.testing.assert_allclose(view.traj[-1, 4], d["mixed_rest"], atol=1e-6)
    widget = RestingPointWidget()
    assert widget.error is None and "centre 1 \u2190 3\u00b0, 13\u00b0, 24\u00b0, 34\u00b0 | mixed \u2190 45\u00b0" in \
        widget.status.value


@pytest.mark.parametrize(("values", "kinds"), [
    ({"bias": -0.3}, {"mixed"}),                                    # the node does not choose ...
    ({"bias": -0.4}, {"centre 1", "mixed", "centre 2"}),            # ... lower, it does ...
    ({"bias": -0.75}, {"dead (v = 0)"}),                            # ... and lower still, it dies
    ({"nu": 0.5}, {"mixed"}),                                       # a wide spread: no start chooses
    ({"weight_decay": 0.1, "t_max": 10.0}, {"still moving"}),
])
def test_what_the_page_says_to_try_with_the_widget(values, kinds):
    assert set(resting_points(**values).kinds) == kinds


def test_the_mixed_point_loses_its_basin_before_the_centres():
    kinds = resting_points(weight_decay=0.58).kinds   # the page's "raise the weight decay slowly"
    assert kinds[4] == "dead (v = 0)" and set(kinds[:4]) == {"centre 1"} and set(kinds[5:]) == {"centre 2"}
    assert set(resting_points(weight_decay=0.52).kinds) == {"centre 1", "mixed", "centre 2"}


@pytest.mark.parametrize(("values", "message"), [
    ({"bias": 0.5}, r"bias must be in \[-1.2, 0.4\], got 0.5"),
    ({"weight_decay": 0.0}, r"weight_decay must be in \[0.1, 1.5\], got 0.0"),
    ({"nu": float("nan")}, r"nu must be a finite number in \[0.05, 0.5\], got nan"),
    ({"n_starts": 16}, r"n_starts must be an integer in \[2, 15\], got 16"),
    ({"t_max": 1e9}, r"t_max must be in \[10, 200\], got 1000000000.0"),
])
def test_the_widget_refuses_what_it_cannot_honour_before_any_work(monkeypatch, values, message):
    def no_work(*args, **kwargs):
        raise AssertionError("the flow ran before the arguments were checked")

    monkeypatch.setattr(theorem3_widget_module, "decayed_trajectories", no_work)
    with pytest.raises(ValueError, match=message):
        resting_points(**values)


def _claim_value(claim_id: str, data: dict[str, np.ndarray]) -> float:
    return get_claim(claim_id).evaluate(data)[0]


def test_the_linear_direction_spread_compares_directions_not_lengths():
    """thm3-linear-single-direction: end points along one direction, however long, spread 0; along three axis
    directions, two of them opposite, 2; along the first two only, at right angles, sqrt(2)."""
    one_way = np.array([[[0.6, 0.8], [1.2, 1.6], [3.0, 4.0]]])  # [step, run, coordinate]: only the last step is read
    assert _claim_value("thm3-linear-single-direction", {"traj_linear": one_way}) == pytest.approx(0.0, abs=1e-15)
    three_ways = np.array([[[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]]])
    assert _claim_value("thm3-linear-single-direction", {"traj_linear": three_ways}) == pytest.approx(2.0)
    assert _claim_value("thm3-linear-single-direction", {"traj_linear": three_ways[:, :2]}) == pytest.approx(np.sqrt(2))


def test_a_resting_point_on_a_centre_or_at_zero_is_not_mixed():
    """thm3-decay-mixed-rest-stable reads the eigenvalues only at a mixed point: one on a cluster centre's direction
    (here centres off the axes) or a dead node at 0 gives infinity, whatever its eigenvalues."""
    centres = np.array([[0.28, 0.96], [0.96, 0.28]])  # unit length, 0.88 in cosine from the diagonal
    stable = np.array([-0.5, -0.2])
    def value(rest: np.ndarray) -> float:
        return _claim_value("thm3-decay-mixed-rest-stable",
                            {"mixed_rest": rest, "centres": centres, "mixed_eigenvalues": stable})
    assert value(np.array([0.95, 0.95])) == pytest.approx(-0.2)  # on the diagonal, between the centres
    assert value(1.35 * centres[0]) == np.inf
    assert value(np.array([0.01, 0.02])) == np.inf
    # opposite a centre is off it (cosine -1), and a cosine of 0.995 with a centre is on it
    assert value(-1.35 * centres[0]) == pytest.approx(-0.2)
    tilt = np.arccos(0.995)
    near = np.array([[np.cos(tilt), -np.sin(tilt)], [np.sin(tilt), np.cos(tilt)]]) @ centres[0]
    assert value(1.35 * near) == np.inf


def test_the_monte_carlo_claim_is_the_worst_z_score_either_way():
    """thm3-closed-form-mc: one entry of the Monte Carlo estimate moved 7 standard errors above or below the closed
    form gives 7, and a lost entry (NaN) leaves the claim unmet."""
    closed, stderr = np.array([[0.5, -0.2], [0.1, 0.3]]), np.array([[0.01, 0.02], [0.03, 0.04]])
    for sign in (1.0, -1.0):
        mc = closed.copy()
        mc[1, 0] += sign * 7 * stderr[1, 0]
        assert _claim_value("thm3-closed-form-mc", {"closed": closed, "mc": mc, "mc_stderr": stderr}) == \
            pytest.approx(7.0)
    lost = closed.copy()
    lost[1, 1] = np.nan  # the last entry: a reduction that skips a NaN after the first would read past it
    assert np.isnan(_claim_value("thm3-closed-form-mc", {"closed": closed, "mc": lost, "mc_stderr": stderr}))


def test_the_portrait_claims_read_the_speed_and_the_cosines_they_name():
    """thm3-decay-finite-rest is the speed at the end points; thm3-decay-rests-near-centres counts cosines above
    0.99 only (0.95 is near, not on, a centre; -0.995 is opposite one)."""
    assert _claim_value("thm3-decay-finite-rest", {"final_speed": np.array(3e-4)}) == 3e-4
    cosines = np.array([0.995, 0.95, -0.995, 0.999, 0.7])
    assert _claim_value("thm3-decay-rests-near-centres", {"cos_relu": cosines}) == 2.0
