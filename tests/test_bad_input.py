"""Bad input to the public API (issue 13, case 9): a ValueError naming the argument, never garbage.

The cases found by probing by hand; ``tests/test_fuzz.py`` searches for more.
"""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib import block, dynamics, invariants, multilayer
from joma_lib.lm import data as lm_data


def test_alignment_score_refuses_nan_instead_of_scoring_zero():
    active = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    hidden = np.array([[0.5, np.nan], [0.1, 0.2], [0.9, 0.3]])
    with pytest.raises(ValueError, match="hidden must contain only finite numbers"):
        multilayer.alignment_score(active, hidden)
    with pytest.raises(ValueError, match="active must contain only finite numbers"):
        multilayer.alignment_score(np.where(active == 1, np.inf, 0.0), np.ones((3, 2)))


def test_softmax_terms_refuses_mismatched_shapes():
    V = np.ones((4, 3))  # M_C = 4 tokens, K = 3 hidden units
    with pytest.raises(ValueError, match="b_bar .* must broadcast to .*4"):
        invariants.softmax_terms(V, np.full(5, 0.25))
    with pytest.raises(ValueError, match="b_bar must contain only finite numbers"):
        invariants.softmax_terms(V, np.full(4, np.nan))
    a, b = invariants.softmax_terms(V, np.full(4, 0.25))
    assert a.shape == b.shape == (4,)


def test_diverging_softmax_dynamics_name_the_parameters_to_reduce():
    with pytest.raises(ValueError, match="diverged at step .*eta"):
        dynamics.simulate_softmax_attention(dynamics.fig4_mu(), eta=1e6, n_steps=300_000)


@pytest.mark.parametrize("fractions, message", [
    ((1.5, 0.5), "fractions"), ((0.5, 0.6), "fractions"), ((-0.1, 0.5), "fractions"), ((0.9,), "fractions"),
    ((np.nan, 0.1), "fractions"),
])
def test_split_documents_refuses_impossible_fractions(fractions, message):
    with pytest.raises(ValueError, match=message):
        lm_data.split_documents([f"doc {i}" for i in range(20)], 0, fractions)


def test_block_train_refuses_nan_weights_and_reports_divergence():
    spec = block.BlockSpec(n_context=4, n_classes=3, d=8, n_hidden=2)
    X, y = block.dirichlet_bags(4, 3, 12, seed=0)
    state = block.init_state(spec, [0])
    bad = block.BlockState(np.full_like(state.W, np.nan), state.z, state.A)
    with pytest.raises(ValueError, match="state.W must contain only finite numbers"):
        block.train(spec, X, y, bad, steps=3)
    with pytest.raises(ValueError, match="diverged.*lr"):
        block.train(spec, X, y, state, steps=50, lr_w=1e12, lr_z=1e12)


@pytest.mark.parametrize("call, message", [
    (lambda: dynamics.simulate_softmax_attention(dynamics.fig4_mu(), eta=float("nan"), n_steps=10), "eta"),
    (lambda: dynamics.simulate_softmax_attention(dynamics.fig4_mu(), temperature=0.0, n_steps=10), "temperature"),
    (lambda: dynamics.saliency_profile("linear", 5, low=3.0, high=1.0), "high"),
    (lambda: __import__("joma_lib.latent_tree").latent_tree.HBLT(depth=0), "depth"),
])
def test_what_the_widgets_call_refuses_values_it_cannot_honour(call, message):
    """The widgets' computations raise instead of silently changing a value (the panels show the message)."""
    with pytest.raises(ValueError, match=message):
        call()
