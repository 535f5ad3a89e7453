"""Theorems 2 and 4 and the Figure 4 toy: closed forms against independent numerics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import erf

from joma_lib.dynamics import (
    blowup_time,
    convergence_rate_ratio,
    erf_ratio,
    fig4_mu,
    integrate_linear,
    integrate_nonlinear,
    linear_closed_form,
    linear_limits,
    row_entropy,
    saliency_profile,
    simulate_softmax_attention,
    softmax_attention,
)
from joma_lib.ode import integrate_autonomous

DELTA = np.array([1.0, 0.7, 0.4, -0.3, 0.05])
FRACTIONS = np.array([0.0, 0.2, 0.5, 0.9, 0.99, 0.999])


@pytest.fixture(scope="module")
def fig4_run():
    return simulate_softmax_attention(fig4_mu())


# ----------------------------------------------------------------------------- Theorem 2
def test_closed_form_matches_ode_to_1e6_up_to_0999_tstar():
    rng = np.random.default_rng(3)
    deltas = np.concatenate([DELTA[None], rng.uniform(-2, 2, (6, 5))])
    for delta in deltas:
        t = FRACTIONS * blowup_time(delta)
        np.testing.assert_allclose(integrate_linear(delta, t), linear_closed_form(delta, t), rtol=1e-6, atol=1e-12)


def test_vectorised_integration_equals_per_problem_integration():
    deltas = np.array([[1.0, 0.5, -0.2], [0.3, -0.6, 0.1]])
    t = np.linspace(0, 0.99 * blowup_time(deltas).min(), 7)
    batch = integrate_linear(deltas, t)
    assert batch.shape == (7, 2, 3)
    for i in range(2):
        np.testing.assert_allclose(batch[:, i], integrate_linear(deltas[i], t), rtol=1e-12)


def test_erf_sqrt2_ratio_is_conserved_and_erf_half_is_not():
    t = FRACTIONS[1:] * blowup_time(DELTA)
    v = integrate_linear(DELTA, t)
    conserved = erf_ratio(v, DELTA)
    np.testing.assert_allclose(conserved, np.broadcast_to((t / np.sqrt(np.pi / 2))[:, None], v.shape), rtol=1e-6)
    slides = erf_ratio(v, DELTA, scale=2.0)[3]  # at 0.9 t*
    assert slides.max() - slides.min() > 0.05  # the printed erf(v/2) form spreads over components


def test_limits_and_blowup():
    lim = linear_limits(DELTA)
    assert np.isposinf(lim[0])
    np.testing.assert_allclose(lim[1:], [1.03643, 0.52440, -0.38532, 0.06271], atol=1e-5)
    t_star = blowup_time(DELTA)
    assert t_star == pytest.approx(np.sqrt(np.pi / 2))
    near = linear_closed_form(DELTA, (1 - 1e-9) * t_star)
    np.testing.assert_allclose(near[1:], lim[1:], rtol=1e-6)
    assert near[0] > 6
    np.testing.assert_array_equal(linear_closed_form(DELTA, 2 * t_star), lim)  # clipped at t*
    v = integrate_linear(DELTA, [0.5 * t_star, 1.01 * t_star])
    assert np.all(np.isfinite(v[0])) and np.all(np.isnan(v[1]))


def test_limits_with_a_negative_leader():
    delta = np.array([-1.0, 0.5, -0.25])
    t = (1 - 1e-10) * blowup_time(delta)
    lim = linear_limits(delta)
    assert np.isneginf(lim[0]) and lim[1] > 0 > lim[2]
    np.testing.assert_allclose(integrate_linear(delta, [0.0, t])[1, 1:], lim[1:], rtol=1e-4)


def test_erf_identity_of_closed_form():
    t = 0.7 * blowup_time(DELTA)
    v = linear_closed_form(DELTA, t)
    np.testing.assert_allclose(np.sqrt(np.pi / 2) * erf(v / np.sqrt(2)), DELTA * t, rtol=1e-13)


def test_integrator_on_exponential_decay_with_repeated_output_times():
    k = np.array([[0.5], [2.0], [10.0]])
    t = np.array([0.0, 0.1, 0.1, 1.0, 3.0])
    y = integrate_autonomous(lambda y, rows: -k[rows] * y, np.ones((3, 1)), t, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(y[..., 0], np.exp(-np.outer(t, k[:, 0])), rtol=1e-8, atol=1e-13)


# ----------------------------------------------------------------------------- Theorem 4
def test_convergence_rate_ratio_tolerances():
    mu = (2.0, 1.5, 1.0)
    for j, k in [(0, 1), (1, 2)]:
        ratio, limit = convergence_rate_ratio(mu, [5.0, 50.0, 200.0], j, k)
        assert abs(ratio[1] / limit - 1) < 0.01
        assert abs(ratio[2] / limit - 1) < 0.002
        assert abs(ratio[0] / limit - 1) > 0.01  # the limit is approached, not met at once
    assert limit == pytest.approx(np.exp((1.5**2 - 1.0) / 2))


def test_nonlinear_u_form_matches_direct_integration():
    mu, v0 = np.array([1.2, 0.6, -0.8]), np.array([0.05, 0.9, 0.1])  # includes v0 > mu and mu < 0
    t = np.array([0.0, 0.3, 1.0, 2.5])
    sol = integrate_nonlinear(mu, t, v0)
    ref = solve_ivp(lambda _, v: (mu - v) * np.exp(v * v / 2), (0, t[-1]), v0, t_eval=t, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(sol.v, ref.y.T, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(sol.u, -np.log(np.abs(1 - sol.v / mu)), rtol=1e-6)


def test_nonlinear_u_keeps_growing_where_v_is_already_mu():
    sol = integrate_nonlinear(fig4_mu(), [100.0, 200.0], 0.05)
    np.testing.assert_array_equal(sol.v[-1], fig4_mu())  # delta underflowed in v ...
    rate = (sol.u[1] - sol.u[0]) / 100.0
    np.testing.assert_allclose(rate, np.exp(fig4_mu() ** 2 / 2), rtol=1e-8)  # ... but u is exact


# ----------------------------------------------------------------------------- Figure 4
def test_fig4_mu_is_the_torch_seed0_draw():
    np.testing.assert_allclose(fig4_mu(), [1.2654, 1.3961, 1.9223, 2.3669, 2.4703, 2.4888, 2.8969, 2.9022,
                                           3.3047, 3.6893], atol=1e-4)
    assert np.all(np.diff(fig4_mu()) > 0)


def test_fig4_entropy_shape(fig4_run):
    h, mu = fig4_run.entropy, fig4_mu()
    assert h[0] == pytest.approx(np.log(10), abs=1e-12)
    i_min = int(np.argmin(h))
    assert 300 < i_min < 2000 and abs(i_min - 669) <= 2
    assert h[i_min] == pytest.approx(0.9416, abs=1e-3)
    assert h[-1] - h[i_min] >= 0.2
    assert h[-1] == pytest.approx(1.5493, abs=1e-3)
    limit = row_entropy(softmax_attention(mu, 3.0))
    assert limit == pytest.approx(1.6216, abs=1e-3)
    assert h[-1] <= limit + 0.02 and np.all(np.diff(h[1000:]) > 0)  # rises towards the fixed point


def test_fig4_larger_mu_reaches_90_percent_first(fig4_run):
    reached = fig4_run.v >= 0.9 * fig4_mu()
    hit = np.where(reached.any(axis=0), reached.argmax(axis=0), np.inf)
    finite = np.isfinite(hit)
    assert finite.sum() >= 5 and not finite[:3].any()
    assert np.all(np.diff(hit[finite]) <= 0)  # sorted mu: later (larger) components hit first
    assert hit[-1] == pytest.approx(475, abs=5)


def test_linear_contrast_most_salient_takes_all():
    run = simulate_softmax_attention(fig4_mu(), nonlinear=False)
    h = run.entropy
    assert np.all(np.diff(h[5:]) <= 1e-12) and h[-1] < 0.3
    assert run.attention[-1, -1] > 0.99 and run.v[-1, -1] > 10 * run.v[-1, :-1].max()


def test_simulation_matches_a_plain_reference_loop():
    """The optimised loop (constant softmax shift) against the textbook update with max-subtraction."""
    mu, v = fig4_mu(), np.full(10, 0.05)
    for _ in range(300):
        z = v * v / 3.0
        a = np.exp(z - z.max())
        v = v + 0.02 * (mu - v) * a / a.sum()
    np.testing.assert_allclose(simulate_softmax_attention(mu, n_steps=300).v[-1], v, rtol=1e-12)


def test_batched_simulation_equals_single_runs():
    mus = np.stack([fig4_mu(0), fig4_mu(1)])
    temps, etas = np.array([3.0, 1.5]), np.array([0.02, 0.05])
    batch = simulate_softmax_attention(mus, n_steps=300, temperature=temps, eta=etas, record_every=7)
    assert batch.v.shape == (batch.steps.size, 2, 10) and batch.steps[-1] == 300
    for i in range(2):
        single = simulate_softmax_attention(mus[i], n_steps=300, temperature=temps[i], eta=etas[i], record_every=7)
        np.testing.assert_allclose(batch.v[:, i], single.v, rtol=1e-13)
        np.testing.assert_allclose(batch.entropy[:, i], single.entropy, rtol=1e-13)


def test_large_logits_do_not_overflow():
    run = simulate_softmax_attention([10.0, 20.0, 30.0], n_steps=200, temperature=0.25)  # logits up to 3600
    assert np.all(np.isfinite(run.v)) and np.all(np.isfinite(run.entropy))


def test_saliency_profile():
    np.testing.assert_array_equal(saliency_profile(), fig4_mu())
    np.testing.assert_allclose(saliency_profile("linear", 4, 1.0, 2.5), [1.0, 1.5, 2.0, 2.5])
    g = saliency_profile("geometric", 3, 1.0, 4.0)
    np.testing.assert_allclose(g, [1.0, 2.0, 4.0])


# ----------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("call, match", [
    (lambda: blowup_time([0.0, 0.0]), "delta"),
    (lambda: linear_closed_form([1.0, np.nan], 1.0), "delta"),
    (lambda: linear_closed_form([1.0], -1.0), "t must be non-negative"),
    (lambda: integrate_linear([1.0], [1.0, 0.5]), "t_eval"),
    (lambda: integrate_linear([], [1.0]), "delta"),
    (lambda: integrate_nonlinear([1.0, 0.0], [1.0]), "mu"),
    (lambda: integrate_nonlinear([1.0], [1.0], v0=1.0), "v0"),
    (lambda: convergence_rate_ratio([2.0, 1.0], [1.0], j=2), "j"),
    (lambda: simulate_softmax_attention([1.0, 2.0], temperature=0.0), "temperature"),
    (lambda: simulate_softmax_attention([[1.0, 2.0]] * 2, temperature=[1.0, 2.0, 3.0]), "temperature"),
    (lambda: simulate_softmax_attention([1.0, 2.0], n_steps=-1), "n_steps"),
    (lambda: simulate_softmax_attention([1.0, 2.0], record_every=0), "record_every"),
    (lambda: simulate_softmax_attention([1.0, 2.0], nonlinear="yes"), "nonlinear"),
    (lambda: simulate_softmax_attention("abc"), "mu"),
    (lambda: row_entropy([0.5, -0.1]), "non-negative"),
    (lambda: fig4_mu(-1), "seed"),
    (lambda: saliency_profile("zipf"), "kind"),
    (lambda: saliency_profile("geometric", low=0.0), "low"),
    (lambda: erf_ratio([1.0], [0.0]), "delta"),
])
def test_bad_inputs_raise_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
