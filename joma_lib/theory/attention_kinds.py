"""The attention kinds of JoMA's Transformer block, as a registry (the paper's setting and Theorem 1).

An attention kind is everything the block (:mod:`joma_lib.theory.block`) and Theorem 1
(:mod:`joma_lib.theory.invariants`) need to know about it:

* its **kernel** ``b = kernel(z / tau, x)``: the attention weights of the contextual tokens from the logits
  ``z`` (temperature ``tau``) and the token frequencies ``x``;
* the **potential** ``G(z)`` of Theorem 1 and its inverse (to predict ``z`` from the MLP weights);
* the **coefficient** ``coef(tau)`` of the invariant, ``G(z) - r coef(tau) sum_k v_k^2 = const`` (r = eta_z/eta_w);
* whether it is **normalised** over the tokens (softmax): Theorem 1 then has the extra mean-attention term
  ``-r coef(tau) b-bar sum_k ||v_k||^2``, and a bag needs at least one token with ``x_l > 0``;
* the logit ``z_start`` at which toy runs start (linear attention starts at 1: at ``z = 0`` its output ``b``
  is zero, and ``G(z) = z^2`` fixes ``z`` only up to sign, which the inverse takes from ``z(0)``);
* optionally its **score** in numpy, the attention kernel ``sigma(s)`` and ``sigma'(s)`` for a kernel of the form
  ``b = x sigma(s)`` (normalised over the tokens for normalised kinds): the hand-written gradients of
  :func:`joma_lib.theory.block_engines.train_sgd_numpy` (the fast path of the Theorem 1 widget) need it; a kind without
  it trains through torch autograd only.

Adding a kind is one entry in :data:`ATTENTION_KINDS` (see CONTRIBUTING.md, "Add an attention kind").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from joma_lib.base.validation import check_choice


def _identity(g: np.ndarray, z0: np.ndarray) -> np.ndarray:
    return g


def _signed_sqrt(g: np.ndarray, z0: np.ndarray) -> np.ndarray:
    """``G^{-1}`` of ``G(z) = z^2``: the root with the sign of ``z0`` (valid while no logit crosses 0)."""
    return np.sign(z0) * np.sqrt(np.maximum(g, 0.0))


def _linear_score(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sigma(s) = s`` and ``sigma'(s) = 1`` (linear attention, ``b = x s``)."""
    return s, np.ones_like(s)


def _exp_score(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sigma(s) = sigma'(s) = exp(s)`` (exp attention, and softmax before its normalisation)."""
    e = np.exp(s)
    return e, e


def _softmax_kernel(s: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    a = x * torch.exp(s - s.max(dim=1, keepdim=True).values)  # shifted for range; the shift cancels
    return a / a.sum(dim=1, keepdim=True)


@dataclass(frozen=True)
class AttentionKind:
    """One attention kind: kernel ``b(z/tau, x)``, Theorem 1's ``G``, ``G^{-1}`` and coefficient ``coef(tau)``.

    ``kernel(s, x)`` takes ``s = z/tau`` of shape (R, M_C, 1) and bags ``x`` (R, M_C, N) and returns ``b``
    (R, M_C, N), summing over tokens along axis 1 where it normalises. ``score(s)``, where given, returns
    ``(sigma(s), sigma'(s))`` in numpy with ``kernel(s, x) = x sigma(s)`` (divided by its sum over tokens if
    ``normalized``).
    """

    name: str
    kernel: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    potential: Callable[[np.ndarray], np.ndarray]
    inverse_potential: Callable[[np.ndarray, np.ndarray], np.ndarray]
    coefficient: Callable[[float], float]
    normalized: bool = False
    z_start: float = 0.0
    score: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None


ATTENTION_KINDS: dict[str, AttentionKind] = {kind.name: kind for kind in (
    AttentionKind("linear", kernel=lambda s, x: x * s, potential=lambda z: z**2, inverse_potential=_signed_sqrt,
                  coefficient=lambda temperature: 1.0, z_start=1.0, score=_linear_score),
    AttentionKind("exp", kernel=lambda s, x: x * torch.exp(s), potential=lambda z: z, inverse_potential=_identity,
                  coefficient=lambda temperature: 1.0 / (2.0 * temperature), score=_exp_score),
    AttentionKind("softmax", kernel=_softmax_kernel, potential=lambda z: z, inverse_potential=_identity,
                  coefficient=lambda temperature: 1.0 / (2.0 * temperature), normalized=True,
                  score=_exp_score),
)}
ATTENTIONS = tuple(ATTENTION_KINDS)


def attention_kind(name: str) -> AttentionKind:
    """The registered kind called ``name``; ValueError naming the allowed kinds otherwise."""
    return ATTENTION_KINDS[check_choice("attention", name, ATTENTION_KINDS)]
