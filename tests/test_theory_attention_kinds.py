"""The attention-kind registry: every kind's G, G^{-1} and coefficient, and a new kind added by one entry."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from joma_lib.theory.attention_kinds import ATTENTION_KINDS, ATTENTIONS, AttentionKind, attention_kind
from joma_lib.theory.block import BlockSpec

torch.set_num_threads(1)


@pytest.mark.parametrize("name", ATTENTIONS)
def test_inverse_potential_undoes_the_potential(name):
    kind = attention_kind(name)
    z = np.array([-1.5, -0.2, 0.3, 2.0])
    np.testing.assert_allclose(kind.inverse_potential(kind.potential(z), z), z, rtol=1e-14)


@pytest.mark.parametrize("name", ATTENTIONS)
def test_numpy_score_is_the_torch_kernel(name):
    """``score`` gives ``sigma`` and ``sigma'`` with kernel(s, x) = x sigma(s) (normalised over tokens where the kind
    is): checked against the torch kernel and its autograd derivative."""
    kind = attention_kind(name)
    if kind.score is None:
        pytest.skip(f"{name} is registered without a numpy score (the widget runs it through torch)")
    rng = np.random.default_rng(1)
    s, x = rng.normal(size=(2, 5, 1)), rng.random((2, 5, 3))
    sigma, dsigma = kind.score(s)
    b = x * sigma
    if kind.normalized:
        b = b / b.sum(axis=1, keepdims=True)
    s_t = torch.tensor(s, requires_grad=True)
    b_t = kind.kernel(s_t, torch.tensor(x))
    np.testing.assert_allclose(b, b_t.detach().numpy(), rtol=1e-13)
    if not kind.normalized:  # db/ds = x sigma'(s) elementwise
        b_t.sum().backward()
        np.testing.assert_allclose((x * dsigma).sum(axis=2, keepdims=True), s_t.grad.numpy(), rtol=1e-13)


def test_softmax_attention_of_logits_beyond_exps_range_is_exact():
    """Logits z/tau of 800 and 799 overflow exp unless shifted: the kernel still gives x_l e^{s_l} / sum, here weights
    proportional to 1 and e^-1 (float64)."""
    s = torch.tensor([[[800.0], [799.0]]], dtype=torch.float64)  # (R, M_C, 1)
    x = torch.ones(1, 2, 1, dtype=torch.float64)
    b = ATTENTION_KINDS["softmax"].kernel(s, x)
    np.testing.assert_allclose(b[0, :, 0].numpy(), [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1))], rtol=1e-12)


def test_unknown_kind_names_the_registry():
    with pytest.raises(ValueError, match=r"attention must be one of \['linear', 'exp', 'softmax'\]"):
        attention_kind("sigmoid")
    with pytest.raises(ValueError, match="attention"):
        BlockSpec(n_context=2, d=3, n_hidden=2, n_classes=2, attention="sigmoid")


def test_a_new_kind_is_one_registry_entry(monkeypatch, theorem1_holds):
    """CONTRIBUTING.md "Add an attention kind": b = x exp(2 z/tau) is exp attention at temperature tau/2, so
    Theorem 1 holds with G(z) = z and coef(tau) = 1/tau. One entry makes the block train with it and the invariant
    check it."""
    doubled = AttentionKind("exp2", kernel=lambda s, x: x * torch.exp(2 * s), potential=lambda z: z,
                            inverse_potential=lambda g, z0: g, coefficient=lambda temperature: 1.0 / temperature)
    monkeypatch.setitem(ATTENTION_KINDS, "exp2", doubled)
    theorem1_holds("exp2")
    # a wrong coefficient (that of plain exp attention) is caught by the same check
    monkeypatch.setitem(ATTENTION_KINDS, "exp2", AttentionKind("exp2", doubled.kernel, doubled.potential,
                                                               doubled.inverse_potential, lambda t: 1 / (2 * t)))
    with pytest.raises(AssertionError, match="residual"):
        theorem1_holds("exp2")
