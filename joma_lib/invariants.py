"""Theorem 1 of JoMA: the attention logits are a function of the MLP weights.

With orthonormal embeddings and ``v_k = U_C^T w_k``, gradient flow with learning rates ``eta_z`` (logits)
and ``eta_w`` (MLP) keeps ``G(z) - Q(V)`` constant in time, where (``r = eta_z / eta_w``, temperature ``T``)

* linear attention:  ``G(z) = z^2``, ``Q(V) = r sum_k v_k^2``              (``T`` cancels);
* exp attention:     ``G(z) = z``,   ``Q(V) = r/(2T) sum_k v_k^2``;
* softmax attention: ``G(z) = z``,   ``Q(V) = r/(2T) sum_k (v_k^2 - ||v_k||^2 b-bar)``, which needs the mean
  attention ``b-bar`` to stay constant and to factor out of the gradient (paper Theorem 1, softmax case).

Squares act elementwise. The constant ``c = G(z(0)) - Q(V(0))`` is zero under zero initialisation.
Figure 2 of the paper checks the softmax case with the normalised correlation :func:`normalized_correlation`.
"""

from __future__ import annotations

import numpy as np

from joma_lib.block import ATTENTIONS
from joma_lib.validation import check_choice, check_float


def _check_common(attention: str, temperature: float, lr_ratio: float) -> tuple[float, float]:
    check_choice("attention", attention, ATTENTIONS)
    return (check_float("temperature (T)", temperature, 0, low_open=True),
            check_float("lr_ratio (eta_z / eta_w)", lr_ratio, 0, low_open=True))


def _check_V(V: np.ndarray) -> np.ndarray:
    V = np.asarray(V, dtype=float)
    if V.ndim < 2:
        raise ValueError(f"V must have shape (..., M_C, K), got {V.shape}")
    return V


def softmax_terms(V: np.ndarray, b_bar: np.ndarray, temperature: float = 1.0,
                  lr_ratio: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The two terms of the softmax prediction, each of shape (..., M_C):
    ``r/(2T) sum_k v_k^2`` (sum of squares) and ``-r/(2T) b-bar sum_k ||v_k||^2`` (mean attention)."""
    V = _check_V(V)
    temperature, lr_ratio = _check_common("softmax", temperature, lr_ratio)
    b_bar = np.asarray(b_bar, dtype=float)
    scale = lr_ratio / (2 * temperature)
    sum_sq = (V**2).sum(axis=-1)
    return scale * sum_sq, -scale * b_bar * sum_sq.sum(axis=-1, keepdims=True)


def mlp_potential(V: np.ndarray, attention: str, temperature: float = 1.0, lr_ratio: float = 1.0,
                  b_bar: np.ndarray | None = None) -> np.ndarray:
    """``Q(V)`` of Theorem 1, shape (..., M_C), from ``V`` (..., M_C, K) whose columns are ``v_k``.

    ``lr_ratio = eta_z / eta_w`` scales the whole right-hand side; ``b_bar`` (broadcastable to (..., M_C))
    is needed for softmax attention only.
    """
    V = _check_V(V)
    temperature, lr_ratio = _check_common(attention, temperature, lr_ratio)
    if attention == "softmax":
        if b_bar is None:
            raise ValueError("b_bar (the mean attention) is required for attention='softmax'")
        sum_sq_term, mean_term = softmax_terms(V, b_bar, temperature, lr_ratio)
        return sum_sq_term + mean_term
    sum_sq = (V**2).sum(axis=-1)
    return lr_ratio * sum_sq if attention == "linear" else lr_ratio / (2 * temperature) * sum_sq


def attention_potential(z: np.ndarray, attention: str) -> np.ndarray:
    """``G(z)``: ``z^2`` for linear attention, ``z`` for exp and softmax."""
    check_choice("attention", attention, ATTENTIONS)
    z = np.asarray(z, dtype=float)
    return z**2 if attention == "linear" else z


def invariant_gap(z: np.ndarray, V: np.ndarray, attention: str, temperature: float = 1.0,
                  lr_ratio: float = 1.0, b_bar: np.ndarray | None = None) -> np.ndarray:
    """``G(z) - Q(V)``, shape (..., M_C): the quantity Theorem 1 says is the constant ``c``."""
    return attention_potential(z, attention) - mlp_potential(V, attention, temperature, lr_ratio, b_bar)


def invariant_residual(z: np.ndarray, V: np.ndarray, attention: str, temperature: float = 1.0,
                       lr_ratio: float = 1.0, b_bar: np.ndarray | None = None) -> np.ndarray:
    """Relative drift of Theorem 1's constant along a trajectory.

    ``z`` (n, R, M_C) and ``V`` (n, R, M_C, K) are ``n`` recorded times of ``R`` replicas. Returns (n, R):
    ``max_l |G(z_l(t)) - Q_l(V(t)) - c_l| / max_{s,l} |G(z_l(s))|`` with ``c`` taken at ``t = 0``.
    It is 0 for the exact gradient flow and ``O(lr)`` for SGD (exp and linear attention).
    """
    z = np.asarray(z, dtype=float)
    if z.ndim != 3:
        raise ValueError(f"z must have shape (n_times, R, M_C), got {z.shape}")
    gap = invariant_gap(z, V, attention, temperature, lr_ratio, b_bar)
    scale = np.abs(attention_potential(z, attention)).max(axis=(0, 2))
    return np.abs(gap - gap[0]).max(axis=2) / np.maximum(scale, np.finfo(float).tiny)


def predicted_logits(V: np.ndarray, z0: np.ndarray, V0: np.ndarray, attention: str, temperature: float = 1.0,
                     lr_ratio: float = 1.0, b_bar: np.ndarray | None = None) -> np.ndarray:
    """Theorem 1's prediction ``z-hat(t) = G^{-1}(Q(V(t)) + c)`` with ``c = G(z0) - Q(V0)``.

    For linear attention ``G^{-1}`` is the root with the sign of ``z0`` (valid while no logit crosses 0).
    """
    c = invariant_gap(z0, V0, attention, temperature, lr_ratio, b_bar)
    G_hat = mlp_potential(V, attention, temperature, lr_ratio, b_bar) + c
    if attention == "linear":
        return np.sign(np.asarray(z0, dtype=float)) * np.sqrt(np.maximum(G_hat, 0.0))
    return G_hat


def normalized_correlation(a: np.ndarray, b: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """NC of paper Fig. 2: the Pearson correlation of ``a`` and ``b`` along the last axis,
    ``<a - mean a, b - mean b> / ((||a - mean a|| + eps)(||b - mean b|| + eps))``."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    if a.ndim < 1 or a.shape[-1] < 2:
        raise ValueError(f"a and b need at least 2 entries along the last axis, got shape {a.shape}")
    eps = check_float("eps", eps, 0)
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    return (a * b).sum(axis=-1) / ((np.linalg.norm(a, axis=-1) + eps) * (np.linalg.norm(b, axis=-1) + eps))
