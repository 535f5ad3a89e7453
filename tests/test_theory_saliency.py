"""Saliency Delta_lm = E[g|l,m] P[l|m]: identity, Monte Carlo, and the most salient token winning."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.theory.saliency import (
    TokenModel,
    cooccurrence,
    SaliencyEstimate,
    discriminancy,
    monte_carlo_factors,
    monte_carlo_saliency,
    saliency,
    salient_token_dynamics,
    toy_token_model,
)


@pytest.fixture(scope="module")
def model() -> TokenModel:
    return toy_token_model()


def test_saliency_factorises_exactly(model):
    np.testing.assert_allclose(saliency(model), discriminancy(model) * cooccurrence(model), rtol=1e-13, atol=1e-16)


def test_factorisation_holds_for_independent_monte_carlo_estimates(model):
    """E[g x_l], E[g | l, m] and P[l | m] from three independent samples: the product matches within MC error."""
    est = monte_carlo_saliency(model, n_samples=100_000, seed=3)
    factors = monte_carlo_factors(model, n_samples=100_000, seed=3)
    assert np.abs(factors.factorisation_z(est)).max() < 4.5
    # each factor on its own is consistent with the exact value, so neither side is computed from the other
    assert np.all(np.abs(factors.cooccurrence - cooccurrence(model)) < 4.5 * factors.cooccurrence_stderr)
    assert np.all(np.abs(factors.discriminancy - discriminancy(model)) < 4.5 * factors.discriminancy_stderr)


def test_factorisation_check_can_fail(model):
    """The same check rejects a quantity that does not factorise (the normalised bag of words)."""
    est = monte_carlo_saliency(model, n_samples=100_000, seed=4)
    factors = monte_carlo_factors(model, n_samples=100_000, seed=4)
    bag = SaliencyEstimate(est.frequency, est.stderr, est.frequency)
    assert np.abs(factors.factorisation_z(bag)).max() > 10


def test_common_tokens_have_zero_saliency_and_distinct_tokens_a_sign(model):
    saliencies = saliency(model)
    assert np.all(np.abs(saliencies[5:]) < 1e-15)   # common tokens: E[g | l] = E[g] = 0
    assert np.all(saliencies[:3] > 0) and np.all(saliencies[3:5] < 0)
    assert int(np.argmax(np.abs(saliencies))) == 0   # frequent distinct token of the node's target


def test_monte_carlo_matches_exact_saliency(model):
    est = monte_carlo_saliency(model, n_samples=100_000, seed=1)
    z = (est.indicator - saliency(model)) / est.stderr
    assert np.all(np.abs(z[est.stderr > 0]) < 4.5)


def test_identity_needs_indicator_inputs(model):
    """With a normalised bag of words the common tokens pick up a spurious (negative) saliency."""
    est = monte_carlo_saliency(model, n_samples=100_000, seed=2)
    assert np.all(est.frequency[5:7] < -5 * est.stderr[5:7])  # indicator s.e. as the scale


def test_most_salient_token_takes_the_attention(model):
    run = salient_token_dynamics(model)
    top = int(np.argmax(np.abs(saliency(model))))
    assert int(np.argmax(run.attention[-1])) == top and run.attention[-1, top] > 0.99
    assert run.entropy[-1] < 0.1 * run.entropy[0]
    peak = int(np.argmax(run.entropy))
    assert np.all(np.diff(run.entropy[peak:]) < 0)   # after an early bump, entropy only decreases
    np.testing.assert_allclose(run.attention.sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(class_prob=[0.5, 0.6]), "class_prob"),
    (dict(presence=np.full((2, 3), 1.5)), "presence"),
    (dict(grad=[1.0]), "grad"),
    (dict(names=("a",)), "names"),
    (dict(presence=np.zeros((2, 3))), "P\\[l \\| m\\] > 0"),
])
def test_bad_token_models_raise(kwargs, match):
    base = dict(class_prob=[0.5, 0.5], presence=np.full((2, 3), 0.5), grad=[0.5, -0.5], names=("a", "b", "c"))
    with pytest.raises(ValueError, match=match):
        TokenModel(**{**base, **kwargs})


def test_bad_arguments_raise(model):
    with pytest.raises(ValueError, match="n_samples"):
        monte_carlo_saliency(model, n_samples=0)
    with pytest.raises(ValueError, match="min_time_left"):
        salient_token_dynamics(model, min_time_left=1.5)
    with pytest.raises(ValueError, match="n_classes"):
        toy_token_model(2)


def test_a_model_given_as_lists_keeps_the_checked_arrays(model):
    """Lists pass the checks; the model keeps them as float arrays (not the lists, on which ``@`` fails later)."""
    as_lists = TokenModel(model.class_prob.tolist(), model.presence.tolist(), model.grad.tolist(), list(model.names))
    assert all(isinstance(a, np.ndarray) and a.dtype == np.float64
               for a in (as_lists.class_prob, as_lists.presence, as_lists.grad))
    assert as_lists.names == model.names
    np.testing.assert_array_equal(saliency(as_lists), saliency(model))
    np.testing.assert_array_equal(salient_token_dynamics(as_lists).attention, salient_token_dynamics(model).attention)
