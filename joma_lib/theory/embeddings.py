"""Token embeddings of the JoMA setting (the paper's setting, its "orthonormal embeddings" assumption).

JoMA analyses a block whose contextual embeddings ``U_C = [u_1, ..., u_{M_C}]`` and
query embedding ``u_q`` are fixed and orthonormal: ``[U_C, u_q]^T [U_C, u_q] = I``.
This module builds such embeddings and measures how far random (e.g. learned or
Gaussian) embeddings are from the assumption.
"""

from __future__ import annotations

import numpy as np

from joma_lib.base.validation import as_finite_array, check_array_size, check_int, check_work


def orthonormal_embeddings(d: int, n_tokens: int, seed: int | None = 0) -> np.ndarray:
    """A ``d x n_tokens`` matrix with orthonormal columns (the JoMA assumption).

    ``seed=None`` gives the coordinate embeddings ``[I; 0]`` used by the authors' toy
    (the first ``n_tokens`` columns of ``I_d``); an integer seed gives a random
    rotation of them (QR of a Gaussian matrix, signs fixed so the result is unique).
    The last column plays the query token ``u_q``; the first ``n_tokens - 1`` are ``U_C``.
    """
    n_tokens = check_int("n_tokens", n_tokens, 1)
    d = check_int("d", d, n_tokens)
    check_array_size("the embedding matrix", d * n_tokens, f"d={d}, n_tokens={n_tokens}")
    if seed is None:
        return np.eye(d, n_tokens)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    q, r = np.linalg.qr(rng.standard_normal((d, n_tokens)))
    return q * np.sign(np.diag(r))


def cosine_matrix(E: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarities of the columns of ``E`` (shape ``d x n``)."""
    E = as_finite_array("E", E)
    if E.ndim != 2 or E.shape[1] < 1 or np.any(np.linalg.norm(E, axis=0) == 0):
        raise ValueError(f"E must be a 2-D array d x n with n >= 1 non-zero columns, got shape {E.shape}")
    unit = E / np.linalg.norm(E, axis=0, keepdims=True)
    return unit.T @ unit


def max_offdiagonal_cosine(E: np.ndarray) -> float:
    """``max_{i != j} |cos(e_i, e_j)|``: 0 exactly when the columns are orthogonal."""
    C = np.abs(cosine_matrix(E))
    np.fill_diagonal(C, 0.0)
    return float(C.max())


def random_embedding_coherence(d_values: np.ndarray, n_tokens: int, n_draws: int = 20, seed: int = 0) -> np.ndarray:
    """Mean over ``n_draws`` of the max off-diagonal |cosine| of ``n_tokens`` Gaussian vectors in ``R^d``.

    This is the quantity that the Johnson-Lindenstrauss argument (our addition to the paper's case) bounds: ``n`` random
    directions are ``eps``-orthogonal once ``d >~ 8 eps^-2 log n``.
    """
    n_tokens = check_int("n_tokens", n_tokens, 2)
    n_draws = check_int("n_draws", n_draws, 1)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    d_list = [check_int(f"d_values[{i}]", int(d) if isinstance(d, float) and d.is_integer() else d, 1)
              for i, d in enumerate(np.atleast_1d(np.asarray(d_values)).ravel().tolist())]
    got = f"d_values up to {max(d_list, default=0)}, n_tokens={n_tokens}, n_draws={n_draws}"
    check_array_size("a draw's vectors or cosines", max(max(d_list, default=0), n_tokens) * n_tokens, got)
    check_work(n_draws * sum(d * n_tokens + n_tokens**2 for d in d_list), got)  # a draw: d x n vectors, n x n cosines
    out = np.empty(len(d_list))
    for i, d in enumerate(d_list):
        out[i] = np.mean([max_offdiagonal_cosine(rng.standard_normal((d, n_tokens))) for _ in range(n_draws)])
    return out


def jl_epsilon(d_values: np.ndarray, n_tokens: int) -> np.ndarray:
    """The JL scale ``eps(d) = sqrt(8 log(n) / d)`` at which ``n`` random directions become ``eps``-orthogonal."""
    d = as_finite_array("d_values", d_values)
    if np.any(d <= 0):
        raise ValueError("d_values must all be > 0")
    return np.sqrt(8.0 * np.log(check_int("n_tokens", n_tokens, 2)) / d)
