"""The Figure 4 toy (discrete softmax-attention dynamics): the paper's curve, a reference loop, batching, profiles."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.theory.softmax_dynamics import (
    entropy_drop_and_rise,
    fig4_mu,
    row_entropy,
    saliency_profile,
    simulate_softmax_attention,
    softmax_attention,
)


@pytest.fixture(scope="module")
def fig4_run():
    return simulate_softmax_attention(fig4_mu())


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


def _textbook(mu: np.ndarray, v0: float, temperature: float, n_steps: int, eta: float = 0.02) -> np.ndarray:
    """The nonlinear update ``v <- v + eta (mu - v) o softmax(v^2/T)``, softmax by max-subtraction, step by step."""
    v = np.full(mu.shape, v0)
    for _ in range(n_steps):
        z = v * v / temperature
        a = np.exp(z - z.max())
        v = v + eta * (mu - v) * a / a.sum()
    return v


def test_simulation_matches_a_plain_reference_loop():
    """The optimised loop (constant softmax shift) against the textbook update with max-subtraction."""
    mu = fig4_mu()
    np.testing.assert_allclose(simulate_softmax_attention(mu, n_steps=300).v[-1], _textbook(mu, 0.05, 3.0, 300),
                               rtol=1e-12)


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


def test_large_logits_from_above_the_targets_do_not_overflow():
    """Started above every target (|v0| > |mu|), the largest logit is v0^2 / T, not mu^2 / T: the loop's softmax shift
    must bound it too. Checked against the textbook update."""
    mu = np.array([1.0, 2.0])  # started at 30: logits up to 900
    run = simulate_softmax_attention(mu, v0=30.0, n_steps=100, temperature=1.0)
    np.testing.assert_allclose(run.v[-1], _textbook(mu, 30.0, 1.0, 100), rtol=1e-12)


def test_saliency_profile():
    np.testing.assert_array_equal(saliency_profile(), fig4_mu())
    np.testing.assert_allclose(saliency_profile("linear", 4, 1.0, 2.5), [1.0, 1.5, 2.0, 2.5])
    g = saliency_profile("geometric", 3, 1.0, 4.0)
    np.testing.assert_allclose(g, [1.0, 2.0, 4.0])


def test_entropy_drop_and_rise(fig4_run):
    drop, rise = entropy_drop_and_rise(fig4_run.entropy)
    h = fig4_run.entropy
    assert drop == pytest.approx(np.log(10) - h.min()) and rise == pytest.approx(h[-1] - h.min())
    assert drop > 0.9 and rise > 0.2                                # Fig. 4: sparse, then dense
    assert entropy_drop_and_rise([2.0, 1.0, 0.5]) == (1.5, 0.0)      # falls for good: no rise
    assert entropy_drop_and_rise([1.0, 1.5, 2.0]) == (0.0, 1.0)      # never falls


# ----------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("call, match", [
    (lambda: simulate_softmax_attention([1.0, 2.0], temperature=0.0), "temperature"),
    (lambda: simulate_softmax_attention([[1.0, 2.0]] * 2, temperature=[1.0, 2.0, 3.0]), "temperature"),
    (lambda: simulate_softmax_attention([1.0, 2.0], n_steps=-1), "n_steps"),
    (lambda: simulate_softmax_attention([1.0, 2.0], record_every=0), "record_every"),
    (lambda: simulate_softmax_attention([1.0, 2.0], nonlinear="yes"), "nonlinear"),
    (lambda: simulate_softmax_attention("abc"), "mu"),
    (lambda: row_entropy([0.5, -0.1]), "non-negative"),
    (lambda: entropy_drop_and_rise([1.0, np.nan]), "entropy"),
    (lambda: fig4_mu(-1), "seed"),
    (lambda: saliency_profile("zipf"), "kind"),
    (lambda: saliency_profile("geometric", low=0.0), "low"),
])
def test_bad_inputs_raise_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
