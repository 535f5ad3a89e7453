"""The analysed block: argument checks, attention forms, the two integrators, inputs of Figs. 2-3."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from joma_lib.attention_kinds import ATTENTION_KINDS, ATTENTIONS, AttentionKind
from joma_lib.block import (
    ACTIVATION_GRADS,
    ACTIVATIONS,
    BlockSpec,
    BlockState,
    attention,
    dirichlet_bags,
    gaussian_or_random_bags,
    gradient_flow,
    init_state,
    theorem1_toy,
    mean_attention,
    train,
    train_sgd_numpy,
)

torch.set_num_threads(1)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"n_hidden": 0}, "n_hidden"),
    ({"temperature": 0.0}, "temperature"),
    ({"temperature": -1.0}, "temperature"),
    ({"phi": "gelu"}, "phi"),
    ({"attention": "sigmoid"}, "attention"),
    ({"d": 8}, "d"),
    ({"n_context": 0}, "n_context"),
    ({"n_classes": 1}, "n_classes"),
    ({"top_layer": False}, "n_hidden"),
])
def test_spec_rejects_bad_arguments(kwargs, name):
    base = {"n_context": 8, "d": 12, "n_hidden": 6, "n_classes": 4}
    with pytest.raises(ValueError, match=name):
        BlockSpec(**{**base, **kwargs})


def test_training_rejects_bad_inputs():
    spec, X, y, state = theorem1_toy("exp", "tanh")
    with pytest.raises(ValueError, match="steps"):
        train(spec, X, y, state, 0)
    with pytest.raises(ValueError, match="lr_z"):
        train(spec, X, y, state, 5, lr_z=0.0)
    with pytest.raises(ValueError, match="optimizer"):
        train(spec, X, y, state, 5, optimizer="lbfgs")
    with pytest.raises(ValueError, match="X"):
        train(spec, -X, y, state, 5)
    with pytest.raises(ValueError, match="X"):
        train(spec, X[:5], y, state, 5)
    with pytest.raises(ValueError, match="y"):
        train(spec, X, y + 4, state, 5)
    with pytest.raises(ValueError, match="state.W"):
        train(spec, X, y, BlockState(state.W[:, :3], state.z, state.A), 5)
    with pytest.raises(ValueError, match="method"):
        gradient_flow(spec, X, y, state, [0.0, 1.0], method="euler")
    with pytest.raises(ValueError, match="t_eval"):
        gradient_flow(spec, X, y, state, [1.0, 0.5])
    with pytest.raises(ValueError, match="concentration"):
        dirichlet_bags(8, 4, 10, concentration=0.0)
    with pytest.raises(ValueError, match="variant"):
        gaussian_or_random_bags("uniform")
    with pytest.raises(ValueError, match="seed"):
        init_state(spec, [-1])


def test_embeddings_are_orthonormal():
    spec = BlockSpec(n_context=8, d=12, n_hidden=3, n_classes=3, embedding_seed=5)
    U_C, u_q = spec.embeddings()
    E = np.column_stack([U_C, u_q])
    np.testing.assert_allclose(E.T @ E, np.eye(9), atol=1e-12)


def test_attention_forms():
    rng = np.random.default_rng(0)
    z = torch.tensor(rng.standard_normal((2, 5)))
    X = torch.tensor(rng.random((2, 5, 7)))
    T = 0.5
    np.testing.assert_allclose(attention(z, X, "linear", T), X * (z / T)[..., None], rtol=1e-14)
    np.testing.assert_allclose(attention(z, X, "exp", T), X * torch.exp(z / T)[..., None], rtol=1e-14)
    soft = attention(z, X, "softmax", T)
    np.testing.assert_allclose(soft.sum(dim=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(soft, X * torch.exp(z / T)[..., None] / (X * torch.exp(z / T)[..., None]).sum(1,
                               keepdim=True), rtol=1e-12)


def test_mean_attention_at_uniform_logits_is_mean_bag():
    X, _ = gaussian_or_random_bags("random", seed=3)
    spec = BlockSpec(n_context=20, d=30, n_hidden=20, n_classes=20, attention="softmax", temperature=0.5,
                     top_layer=False)
    np.testing.assert_allclose(mean_attention(spec, np.zeros((1, 20)), X)[0], X.mean(axis=1), rtol=1e-12)


def test_fig2_inputs():
    for variant in ("gaussian", "random"):
        X, y = gaussian_or_random_bags(variant, seed=1)
        assert X.shape == (20, 20) and np.all(X > 0)
        np.testing.assert_allclose(X.sum(axis=0), 1.0, rtol=1e-12)
        np.testing.assert_array_equal(y, np.arange(20))
    X, _ = gaussian_or_random_bags("gaussian", seed=1)
    # the bump over the distinct tokens moves with the class: its peak is at token round(c * 10 / 20)
    assert np.all(np.abs(X[:10].argmax(axis=0) - np.arange(20) / 2) <= 0.5)


def test_replicas_are_independent():
    spec, X, y, _ = theorem1_toy("softmax", "silu")
    both = init_state(spec, [3, 4], w_scale=0.3, a_scale=0.3)
    run_both = train(spec, X, y, both, 30, lr_z=0.2, lr_w=0.1)
    for r, seed in enumerate((3, 4)):
        alone = train(spec, X, y, init_state(spec, [seed], w_scale=0.3, a_scale=0.3), 30, lr_z=0.2, lr_w=0.1)
        np.testing.assert_allclose(run_both.z[:, r], alone.z[:, 0], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(run_both.W[:, r], alone.W[:, 0], rtol=1e-10, atol=1e-13)


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


@pytest.mark.parametrize(("optimizer", "lr"), [("sgd", 0.5), ("adam", 0.05)])
def test_training_lowers_the_loss(optimizer, lr):
    spec, X, y, state = theorem1_toy("softmax", "relu")
    traj = train(spec, X, y, state, 100, lr_z=lr, lr_w=lr, optimizer=optimizer, record_every=25)
    np.testing.assert_array_equal(traj.times, [0, 25, 50, 75, 100])
    assert traj.loss[-1, 0] < 0.8 * traj.loss[0, 0]


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
    replicas with their own bags, T != 1, unequal rates, a sparse record; with and without the top layer."""
    for top_layer in (True, False):
        spec = BlockSpec(n_context=5, d=7, n_hidden=3, n_classes=3, attention=kind, phi=phi, temperature=0.7,
                         top_layer=top_layer, embedding_seed=1)
        X = np.stack([dirichlet_bags(5, 3, 9, seed=s)[0] for s in (0, 1)])
        y = dirichlet_bags(5, 3, 9)[1]
        state = init_state(spec, [2, 3], w_scale=0.5, a_scale=0.5, z_scale=0.3,
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
