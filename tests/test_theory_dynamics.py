"""Theorems 2 and 4: closed forms against independent numerics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import erf

from joma_lib.theory.dynamics import (MAX_RATE_V, blowup_time, convergence_rate_ratio, erf_ratio, integrate_linear,
                                      integrate_nonlinear, linear_closed_form, linear_limits, nonlinear_by_quadrature)
from joma_lib.base.ode import integrate_autonomous
from joma_lib.theory.softmax_dynamics import fig4_mu

SALIENCY = np.array([1.0, 0.7, 0.4, -0.3, 0.05])
FRACTIONS = np.array([0.0, 0.2, 0.5, 0.9, 0.99, 0.999])


# ----------------------------------------------------------------------------- Theorem 2
def test_closed_form_matches_ode_to_1e6_up_to_0999_tstar():
    rng = np.random.default_rng(3)
    saliencies = np.concatenate([SALIENCY[None], rng.uniform(-2, 2, (6, 5))])
    for saliency in saliencies:
        t = FRACTIONS * blowup_time(saliency)
        np.testing.assert_allclose(integrate_linear(saliency, t), linear_closed_form(saliency, t), rtol=1e-6,
                                   atol=1e-12)


def test_vectorised_integration_equals_per_problem_integration():
    saliencies = np.array([[1.0, 0.5, -0.2], [0.3, -0.6, 0.1]])
    t = np.linspace(0, 0.99 * blowup_time(saliencies).min(), 7)
    batch = integrate_linear(saliencies, t)
    assert batch.shape == (7, 2, 3)
    for i in range(2):
        np.testing.assert_allclose(batch[:, i], integrate_linear(saliencies[i], t), rtol=1e-12)


def test_erf_sqrt2_ratio_is_conserved_and_erf_half_is_not():
    t = FRACTIONS[1:] * blowup_time(SALIENCY)
    v = integrate_linear(SALIENCY, t)
    conserved = erf_ratio(v, SALIENCY)
    np.testing.assert_allclose(conserved, np.broadcast_to((t / np.sqrt(np.pi / 2))[:, None], v.shape), rtol=1e-6)
    slides = erf_ratio(v, SALIENCY, scale=2.0)[3]  # at 0.9 t*
    assert slides.max() - slides.min() > 0.05  # the printed erf(v/2) form spreads over components


def test_limits_and_blowup():
    lim = linear_limits(SALIENCY)
    assert np.isposinf(lim[0])
    np.testing.assert_allclose(lim[1:], [1.03643, 0.52440, -0.38532, 0.06271], atol=1e-5)
    t_star = blowup_time(SALIENCY)
    assert t_star == pytest.approx(np.sqrt(np.pi / 2))
    near = linear_closed_form(SALIENCY, (1 - 1e-9) * t_star)
    np.testing.assert_allclose(near[1:], lim[1:], rtol=1e-6)
    assert near[0] > 6
    np.testing.assert_array_equal(linear_closed_form(SALIENCY, 2 * t_star), lim)  # clipped at t*
    v = integrate_linear(SALIENCY, [0.5 * t_star, 1.01 * t_star])
    assert np.all(np.isfinite(v[0])) and np.all(np.isnan(v[1]))


def test_limits_with_a_negative_leader():
    saliency = np.array([-1.0, 0.5, -0.25])
    t = (1 - 1e-10) * blowup_time(saliency)
    lim = linear_limits(saliency)
    assert np.isneginf(lim[0]) and lim[1] > 0 > lim[2]
    np.testing.assert_allclose(integrate_linear(saliency, [0.0, t])[1, 1:], lim[1:], rtol=1e-4)


def test_erf_identity_of_closed_form():
    t = 0.7 * blowup_time(SALIENCY)
    v = linear_closed_form(SALIENCY, t)
    np.testing.assert_allclose(np.sqrt(np.pi / 2) * erf(v / np.sqrt(2)), SALIENCY * t, rtol=1e-13)


def test_integrator_on_exponential_decay_with_repeated_output_times():
    k = np.array([[0.5], [2.0], [10.0]])
    t = np.array([0.0, 0.1, 0.1, 1.0, 3.0])
    y = integrate_autonomous(lambda y, rows: -k[rows] * y, np.ones((3, 1)), t, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(y[..., 0], np.exp(-np.outer(t, k[:, 0])), rtol=1e-8, atol=1e-13)


# ----------------------------------------------------------------------------- Theorem 4
def test_convergence_rate_ratio_tolerances():
    mu = (2.0, 1.5, 1.0)
    for j, j_prime in [(0, 1), (1, 2)]:
        ratio, limit = convergence_rate_ratio(mu, [5.0, 50.0, 200.0], j, j_prime)
        assert abs(ratio[1] / limit - 1) < 0.01
        assert abs(ratio[2] / limit - 1) < 0.002
        assert abs(ratio[0] / limit - 1) > 0.01  # the limit is approached, not met at once
    assert limit == pytest.approx(np.exp((1.5**2 - 1.0) / 2))


def test_nonlinear_omega_form_matches_direct_integration():
    mu, v0 = np.array([1.2, 0.6, -0.8]), np.array([0.05, 0.9, 0.1])  # includes v0 > mu and mu < 0
    t = np.array([0.0, 0.3, 1.0, 2.5])
    sol = integrate_nonlinear(mu, t, v0)
    ref = solve_ivp(lambda _, v: (mu - v) * np.exp(v * v / 2), (0, t[-1]), v0, t_eval=t, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(sol.v, ref.y.T, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(sol.omega, -np.log(np.abs(1 - sol.v / mu)), rtol=1e-6)


def test_nonlinear_omega_keeps_growing_where_v_is_already_mu():
    sol = integrate_nonlinear(fig4_mu(), [100.0, 200.0], 0.05)
    np.testing.assert_array_equal(sol.v[-1], fig4_mu())  # delta underflowed in v ...
    rate = (sol.omega[1] - sol.omega[0]) / 100.0
    np.testing.assert_allclose(rate, np.exp(fig4_mu() ** 2 / 2), rtol=1e-8)  # ... but omega is exact


@pytest.mark.parametrize("mu", [8.0, 9.0, 10.0])
def test_nonlinear_crosses_a_rise_faster_than_float64_resolves_t(mu):
    """From |mu| ~ 8 omega rises near t ~ 1/mu on a time scale ~exp(-mu^2/2), below the float64 spacing of t there:
    the stepper must cross it (omega ~ 6.5e13 .. 4.5e21 at t = 1 fits float64) and agree with the quadrature."""
    t = np.array([0.0, 0.05, 0.5, 1.0, 10.0])
    mus = np.array([mu, -mu, 1.0])
    ode, quad = integrate_nonlinear(mus, t), nonlinear_by_quadrature(mus, t)
    assert np.isfinite(ode.omega).all() and ode.omega[-2, 0] > 1e13
    np.testing.assert_allclose(ode.omega[1:], quad.omega[1:], rtol=1e-8)
    np.testing.assert_allclose(ode.v, quad.v, rtol=1e-9)


def test_convergence_rate_ratio_for_large_targets():
    """mu = (10, 9.5): the ratio of the rates approaches exp((100 - 90.25)/2) with an O(1/t) error."""
    ratio, limit = convergence_rate_ratio([10.0, 9.5], [0.5, 1.0, 100.0])
    assert np.isfinite(ratio).all()
    assert abs(ratio[-1] / limit - 1) < abs(ratio[0] / limit - 1) < 0.1


def test_quadrature_refuses_what_leaves_float64_like_the_stepper():
    """mu = 38 made the quadrature return NaN (the stepper raises); an omega beyond float64 is refused by both."""
    for solve in (integrate_nonlinear, nonlinear_by_quadrature):
        with pytest.raises(ValueError, match=r"mu must lie in \[-37.68, 37.68\].*got \|mu\| up to 38"):
            solve([38.0, 1.0], [0.0, 1.0])
        with pytest.raises(ValueError, match=r"leaves float64 by t = 1e\+300.*t_eval or \|mu\| must be smaller"):
            solve([10.0, 1.0], [0.0, 1.0, 1e300])
    assert nonlinear_by_quadrature([MAX_RATE_V], [0.0, 1e-3]).omega[-1, 0] > 0


# ----------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("call, match", [
    (lambda: blowup_time([0.0, 0.0]), "saliency"),
    (lambda: linear_closed_form([1.0, np.nan], 1.0), "saliency"),
    (lambda: linear_closed_form([1.0], -1.0), "t must be non-negative"),
    (lambda: integrate_linear([1.0], [1.0, 0.5]), "t_eval"),
    (lambda: integrate_linear([], [1.0]), "saliency"),
    (lambda: integrate_nonlinear([1.0, 0.0], [1.0]), "mu"),
    (lambda: integrate_nonlinear([1.0], [1.0], v0=1.0), "v0"),
    (lambda: integrate_nonlinear([1.0, 2.0], [1.0], v0=[0.1, 0.2, 0.3]), r"v0 must broadcast to mu's shape \(2,\)"),
    (lambda: nonlinear_by_quadrature([1.0, 2.0], [1.0], v0=[0.1, 0.2, 0.3]), r"v0 must broadcast to mu's shape"),
    (lambda: integrate_nonlinear([1.0], [1.0], v0=40.0), r"v0 must lie in \[-37.68, 37.68\]"),
    (lambda: convergence_rate_ratio([2.0, 1.0], [1.0], j=2), "j"),
    (lambda: erf_ratio([1.0], [0.0]), "saliency"),
])
def test_bad_inputs_raise_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
