"""The block's other engines: the numpy SGD (the torch SGD to rounding) and the gradient flow (two integrators)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from joma_lib.theory.attention_kinds import ATTENTION_KINDS, ATTENTIONS, AttentionKind
from joma_lib.theory.bags import dirichlet_bags
from joma_lib.theory.block import ACTIVATIONS, BlockSpec, init_state, train
from joma_lib.theory.block_engines import ACTIVATION_GRADS, gradient_flow, train_sgd_numpy
from joma_lib.theory.invariants import theorem1_toy

torch.set_num_threads(1)


def test_gradient_flow_rejects_bad_inputs():
    spec, X, y, state = theorem1_toy("exp", "tanh")
    with pytest.raises(ValueError, match="method"):
        gradient_flow(spec, X, y, state, [0.0, 1.0], method="euler")
    with pytest.raises(ValueError, match="t_eval"):
        gradient_flow(spec, X, y, state, [1.0, 0.5])


def test_sgd_converges_to_gradient_flow():
    """Small-step SGD and the ODE solution agree to O(lr): the two integrators describe the same dynamics."""
    spec, X, y, state = theorem1_toy("exp", "tanh")
    flow = gradient_flow(spec, X, y, state, [0.0, 2.0], lr_z=1.0, lr_w=0.5)
    errors = []
    for lr in (0.02, 0.01):
        sgd = train(spec, X, y, state, int(round(2.0 / lr)), lr_z=lr, lr_w=0.5 * lr)
        errors.append(np.abs(sgd.z[-1] - flow.z[-1]).max())
    assert np.abs(flow.z[-1]).max() > 0.05  # the logits moved
    assert errors[1] < 0.6 * errors[0] and errors[1] < 2e-3


def test_rk4_and_dop853_agree_for_smooth_phi():
    spec, X, y, state = theorem1_toy("linear", "tanh")
    a = gradient_flow(spec, X, y, state, [1.0, 3.0])
    b = gradient_flow(spec, X, y, state, [1.0, 3.0], method="rk4", dt=0.02)
    np.testing.assert_allclose(a.z, b.z, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(a.W, b.W, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_numpy_activations_and_their_derivatives_match_torch(name):
    u = np.array([-3.0, -0.7, 0.0, 0.4, 2.5, 40.0, -40.0])
    value, slope = ACTIVATION_GRADS[name](u)
    t = torch.tensor(u, requires_grad=True)
    ACTIVATIONS[name](t).sum().backward()
    np.testing.assert_allclose(value, ACTIVATIONS[name](t).detach().numpy(), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(slope, t.grad.numpy(), rtol=1e-14, atol=1e-300)
    assert list(ACTIVATION_GRADS) == list(ACTIVATIONS)


@pytest.mark.parametrize("phi", ACTIVATIONS)
@pytest.mark.parametrize("kind", ATTENTIONS)
def test_numpy_sgd_is_the_torch_sgd(kind, phi):
    """train_sgd_numpy (hand-written gradients) takes the same steps as train (autograd) to rounding: two
    replicas with their own bags, tau != 1, unequal rates, a sparse record; with and without the top layer."""
    for top_layer in (True, False):
        spec = BlockSpec(n_context=5, d=7, n_hidden=3, n_classes=3, attention=kind, phi=phi, temperature=0.7,
                         top_layer=top_layer, embedding_seed=1)
        X = np.stack([dirichlet_bags(5, 3, 9, seed=s)[0] for s in (0, 1)])
        y = dirichlet_bags(5, 3, 9)[1]
        state = init_state(spec, [2, 3], w_scale=0.5, w_out_scale=0.5, z_scale=0.3,
                           z_offset=ATTENTION_KINDS[kind].z_start)
        kw = {"lr_z": 0.3, "lr_w": 0.2, "lr_top": 0.1, "record_every": 7}
        ref, fast = train(spec, X, y, state, 40, **kw), train_sgd_numpy(spec, X, y, state, 40, **kw)
        np.testing.assert_array_equal(fast.times, ref.times)
        assert np.abs(ref.z[-1] - ref.z[0]).max() > 1e-2  # the logits moved
        for name in ("z", "W", "loss"):
            np.testing.assert_allclose(getattr(fast, name), getattr(ref, name), rtol=1e-11, atol=1e-13,
                                       err_msg=f"{name}, top_layer={top_layer}")


def test_numpy_sgd_refuses_what_it_cannot_train(monkeypatch):
    spec, X, y, state = theorem1_toy("exp", "tanh")
    with pytest.raises(ValueError, match="steps"):
        train_sgd_numpy(spec, X, y, state, 0)
    with pytest.raises(ValueError, match="lr_w"):
        train_sgd_numpy(spec, X, y, state, 5, lr_w=-1.0)
    with pytest.raises(ValueError, match="diverged.*lr"):
        train_sgd_numpy(spec, X, y, state, 50, lr_w=1e12, lr_z=1e12)
    no_score = AttentionKind("exp2", kernel=lambda s, x: x * torch.exp(2 * s), potential=lambda z: z,
                             inverse_potential=lambda g, z0: g, coefficient=lambda temperature: 1.0 / temperature)
    monkeypatch.setitem(ATTENTION_KINDS, "exp2", no_score)
    spec2, X2, y2, state2 = theorem1_toy("exp2", "tanh")
    with pytest.raises(ValueError, match="attention='exp2' has no numpy score"):
        train_sgd_numpy(spec2, X2, y2, state2, 5)


def test_numpy_sgd_trains_softmax_with_large_logits_like_torch():
    """z ~ 400 at tau = 0.5: exp(z/tau) overflows unless shifted by its max, as the torch kernel does (the numpy
    engine reported "training diverged at step 0")."""
    spec = BlockSpec(n_context=5, d=7, n_hidden=3, n_classes=3, attention="softmax", phi="tanh", temperature=0.5,
                     top_layer=True, embedding_seed=1)
    X = np.stack([dirichlet_bags(5, 3, 9, seed=s)[0] for s in (0, 1)])
    y = dirichlet_bags(5, 3, 9)[1]
    state = init_state(spec, [2, 3], w_scale=0.5, w_out_scale=0.5, z_scale=0.3, z_offset=400.0)
    kw = {"lr_z": 0.3, "lr_w": 0.2, "lr_top": 0.1, "record_every": 7}
    ref, fast = train(spec, X, y, state, 40, **kw), train_sgd_numpy(spec, X, y, state, 40, **kw)
    assert np.abs(ref.z[-1] - ref.z[0]).max() > 1e-2  # the logits moved
    for name in ("z", "W", "loss"):
        np.testing.assert_allclose(getattr(fast, name), getattr(ref, name), rtol=1e-11, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("kind", [k for k in ATTENTIONS if ATTENTION_KINDS[k].normalized and ATTENTION_KINDS[k].score])
def test_normalised_scores_are_exponential(kind):
    """train_sgd_numpy shifts s by its max for normalised kinds: exact only if sigma(s - m) = e^{-m} sigma(s)
    (and sigma')."""
    s = np.linspace(-3.0, 3.0, 7)
    sigma, dsigma = ATTENTION_KINDS[kind].score(s)
    sigma_shifted, dsigma_shifted = ATTENTION_KINDS[kind].score(s - 2.5)
    np.testing.assert_allclose(sigma_shifted, np.exp(-2.5) * sigma, rtol=1e-14)
    np.testing.assert_allclose(dsigma_shifted, np.exp(-2.5) * dsigma, rtol=1e-14)
