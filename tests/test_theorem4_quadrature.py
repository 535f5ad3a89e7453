"""Theorem 4 by quadrature (time as an integral of the state, inverted) against the Runge-Kutta stepper."""

import numpy as np
import pytest

from joma_lib.theory.dynamics import integrate_nonlinear, nonlinear_by_quadrature

# the stepper runs at rtol 1e-10, atol 1e-12 per step; agreement to 1e-8 relative (1e-10 absolute, for omega near 0)
# leaves a margin of 100 for its accumulated error
TOL = 1e-8


@pytest.mark.parametrize("v0", [0.0, 0.7, -1.5, 3.0])
def test_quadrature_matches_the_stepper(v0):
    rng = np.random.default_rng(3)
    mu = rng.uniform(1.0, 4.5, (6, 5)) * rng.choice([-1.0, 1.0], (6, 5))
    t = np.concatenate([[0.0], np.geomspace(1e-4, 60.0, 30)])
    ref, fast = integrate_nonlinear(mu, t, v0=v0), nonlinear_by_quadrature(mu, t, v0=v0)
    assert fast.omega.shape == ref.omega.shape == (t.size, 6, 5)
    np.testing.assert_allclose(fast.omega, ref.omega, rtol=TOL, atol=1e-10)
    np.testing.assert_allclose(fast.v, ref.v, rtol=TOL, atol=1e-10)


def test_quadrature_keeps_theorem4_rate_in_the_long_run():
    # omega grows like exp(mu^2/2) t once v is near mu: the slope between late times is that rate
    mu = np.array([1.5, 2.5, 3.5])
    sol = nonlinear_by_quadrature(mu, np.array([0.0, 400.0, 500.0]))
    slope = (sol.omega[2] - sol.omega[1]) / 100.0
    np.testing.assert_allclose(slope, np.exp(mu ** 2 / 2), rtol=1e-9)


def test_quadrature_rejects_bad_input():
    with pytest.raises(ValueError, match="v0"):
        nonlinear_by_quadrature([1.0, 2.0], [0.0, 1.0], v0=[1.0, 0.0])
    with pytest.raises(ValueError, match="tol"):
        nonlinear_by_quadrature([1.0], [0.0, 1.0], tol=0.0)
    with pytest.raises(ValueError, match="t_eval"):
        nonlinear_by_quadrature([1.0], [1.0, 0.5])
