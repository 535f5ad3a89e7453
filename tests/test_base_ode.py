"""The general ODE solver (joma_lib.base.ode): vectorised Dormand-Prince 5(4), one adaptive step size per problem."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.base.ode import integrate_autonomous, integrate_components


def test_linear_systems_match_their_exponential_solutions_row_by_row():
    rates = np.array([-1.0, 0.5, -3.0])  # one problem per row, each with its own rate
    t = np.array([0.0, 0.25, 1.0, 2.0])
    y = integrate_autonomous(lambda y, rows: rates[rows, None] * y, np.ones((3, 2)), t)
    assert y.shape == (4, 3, 2)
    expected = np.exp(np.outer(t, rates))[:, :, None] * np.ones(2)
    np.testing.assert_allclose(y, expected, rtol=1e-8)


def test_a_rotation_keeps_its_radius():
    """dx/dt = -y, dy/dt = x: the circle through (1, 0) is followed to t = 2 pi and back to the start."""
    t = np.linspace(0.0, 2 * np.pi, 9)
    y = integrate_autonomous(lambda y, rows: np.stack([-y[:, 1], y[:, 0]], axis=1), [[1.0, 0.0]], t)
    np.testing.assert_allclose(np.hypot(y[:, 0, 0], y[:, 0, 1]), 1.0, rtol=1e-9)
    np.testing.assert_allclose(y[-1, 0], [1.0, 0.0], atol=1e-8)


def test_a_finite_time_blow_up_gives_nan_from_then_on_and_leaves_other_rows_alone():
    """dy/dt = y^2 from y0 = 1 is 1 / (1 - t): it leaves every bounded set at t = 1; y0 = -1 stays finite."""
    t = np.array([0.5, 0.9, 1.5, 2.0])
    y = integrate_autonomous(lambda y, rows: y ** 2, [[1.0], [-1.0]], t)
    np.testing.assert_allclose(y[:2, 0, 0], 1 / (1 - t[:2]), rtol=1e-7)
    assert np.isnan(y[2:, 0, 0]).all()
    np.testing.assert_allclose(y[:, 1, 0], -1 / (1 + t), rtol=1e-8)


def test_components_are_integrated_each_with_its_own_index():
    y0 = np.arange(1.0, 7.0).reshape(2, 3)
    t = np.array([0.0, 1.0])
    decay = np.linspace(0.1, 0.6, 6)
    y = integrate_components(lambda y, index: -decay[index] * y, y0, t, rtol=1e-10, atol=1e-12)
    assert y.shape == (2, 2, 3)
    np.testing.assert_allclose(y[1], y0 * np.exp(-decay.reshape(2, 3)), rtol=1e-8)


def test_a_bounded_rhs_may_cross_a_stretch_that_float64_time_cannot_resolve():
    """dy/dt = K / (1 + K e^{-y}), y(0) = 0, K = 1e20: t(y) = y/K + 1 - e^{-y}. Near t = 1 the rate climbs from 1 to K
    while t moves by ~1e-19, below its float64 spacing there; after it y = K (t - 1) to rounding. The blow-up
    detector takes that for a blow-up; ``can_blow_up=False`` (a bounded rhs) crosses it."""
    K = 1e20
    t = [0.5, 1.5, 2.0]
    y = integrate_autonomous(lambda y, rows: K / (1 + K * np.exp(-y)), [[0.0]], t, can_blow_up=False)[:, 0, 0]
    np.testing.assert_allclose(y, [np.log(2.0), 0.5 * K, K], rtol=1e-9)
    assert np.isnan(integrate_autonomous(lambda y, rows: K / (1 + K * np.exp(-y)), [[0.0]], t)[1:]).all()


def test_a_bounded_rhs_that_overflows_float64_stops_with_nan():
    """dy/dt = 1e100: y passes float64's largest value at t ~ 1.8e208; from then on NaN."""
    y = integrate_autonomous(lambda y, rows: np.full_like(y, 1e100), [[0.0]], [1e208, 1e209], can_blow_up=False)
    np.testing.assert_allclose(y[0, 0, 0], 1e308, rtol=1e-12)
    assert np.isnan(y[1, 0, 0])


@pytest.mark.parametrize("kwargs, match", [
    ({"y0": np.ones(3)}, "y0 must be a 2-D array"),
    ({"t_eval": [1.0, 0.5]}, "t_eval"),
    ({"rtol": 0.0}, "rtol"),
    ({"atol": -1.0}, "atol"),
    ({"max_steps": 0}, "max_steps"),
    ({"can_blow_up": "no"}, "can_blow_up must be True or False, got 'no'"),
])
def test_bad_arguments_name_the_argument(kwargs, match):
    args = {"y0": np.ones((1, 1)), "t_eval": [0.0, 1.0], **kwargs}
    with pytest.raises(ValueError, match=match):
        integrate_autonomous(lambda y, rows: -y, args.pop("y0"), args.pop("t_eval"), **args)


def test_running_out_of_steps_is_an_error_that_names_the_limit():
    with pytest.raises(RuntimeError, match="max_steps=3"):
        integrate_autonomous(lambda y, rows: -y, np.ones((1, 1)), [0.0, 100.0], max_steps=3)
