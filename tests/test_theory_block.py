"""The analysed block: argument checks, attention forms, the torch engine (SGD/Adam), replicas."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from joma_lib.theory.block import attention, BlockSpec, BlockState, init_state, train
from joma_lib.theory.invariants import theorem1_toy

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
        train(spec, X, y, BlockState(state.W[:, :3], state.z, state.W_out), 5)
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
    tau = 0.5
    np.testing.assert_allclose(attention(z, X, "linear", tau), X * (z / tau)[..., None], rtol=1e-14)
    np.testing.assert_allclose(attention(z, X, "exp", tau), X * torch.exp(z / tau)[..., None], rtol=1e-14)
    soft = attention(z, X, "softmax", tau)
    np.testing.assert_allclose(soft.sum(dim=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(soft, X * torch.exp(z / tau)[..., None] / (X * torch.exp(z / tau)[..., None]).sum(1,
                               keepdim=True), rtol=1e-12)


def test_replicas_are_independent():
    spec, X, y, _ = theorem1_toy("softmax", "silu")
    both = init_state(spec, [3, 4], w_scale=0.3, w_out_scale=0.3)
    run_both = train(spec, X, y, both, 30, lr_z=0.2, lr_w=0.1)
    for r, seed in enumerate((3, 4)):
        alone = train(spec, X, y, init_state(spec, [seed], w_scale=0.3, w_out_scale=0.3), 30, lr_z=0.2, lr_w=0.1)
        np.testing.assert_allclose(run_both.z[:, r], alone.z[:, 0], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(run_both.W[:, r], alone.W[:, 0], rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize(("optimizer", "lr"), [("sgd", 0.5), ("adam", 0.05)])
def test_training_lowers_the_loss(optimizer, lr):
    spec, X, y, state = theorem1_toy("softmax", "relu")
    traj = train(spec, X, y, state, 100, lr_z=lr, lr_w=lr, optimizer=optimizer, record_every=25)
    np.testing.assert_array_equal(traj.times, [0, 25, 50, 75, 100])
    assert traj.loss[-1, 0] < 0.8 * traj.loss[0, 0]
