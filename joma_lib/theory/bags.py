"""Inputs of the block (:mod:`joma_lib.theory.block`): bags of contextual tokens ``X`` (M_C, N) and class labels ``y``
(N,).

:func:`gaussian_or_random_bags` are the inputs of the paper's Figs. 2-3 (one sample per class);
:func:`dirichlet_bags` are heterogeneous bags (every sample its own draw), the inputs of Theorem 1's toy block
(:func:`joma_lib.theory.invariants.theorem1_toy`).
"""

from __future__ import annotations

import numpy as np

from joma_lib.base.validation import check_array_size, check_choice, check_float, check_int


def gaussian_or_random_bags(variant: str, n_distinct: int = 10, n_common: int = 10, n_classes: int = 20,
                            width: float = 30.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Inputs of the paper's Figs. 2-3: one sample per class, ``x = X[:, y]``; returns ``(X, y)``.

    ``X`` (M_C x n_classes, M_C = n_distinct + n_common) starts uniform in ``[0, 1/2)``. In the ``"gaussian"``
    variant the distinct rows become a bump that moves with the class,
    ``X[l, c] = exp(-(l - c n_distinct / n_classes)^2 / width)`` for ``l < n_distinct``. Columns are then
    normalised to sum to 1 (token frequencies).
    """
    check_choice("variant", variant, ("gaussian", "random"))
    n_distinct = check_int("n_distinct", n_distinct, 0)
    n_common = check_int("n_common", n_common, 0)
    if n_distinct + n_common < 1:
        raise ValueError(f"n_distinct + n_common (M_C) must be >= 1, got n_distinct={n_distinct}, n_common={n_common}")
    n_classes = check_int("n_classes", n_classes, 2)
    width = check_float("width", width, 0, low_open=True)
    check_array_size("the bags", (n_distinct + n_common) * n_classes,
                     f"n_distinct={n_distinct}, n_common={n_common}, n_classes={n_classes}")
    rng = np.random.default_rng(check_int("seed", seed, 0))
    X = rng.random((n_distinct + n_common, n_classes)) / 2
    if variant == "gaussian":
        centres = np.arange(n_classes) * n_distinct / n_classes
        X[:n_distinct] = np.exp(-(np.arange(n_distinct)[:, None] - centres[None, :]) ** 2 / width)
    return X / X.sum(axis=0, keepdims=True), np.arange(n_classes)


MAX_CONCENTRATION = 1e6
"""The largest Dirichlet concentration (and token signal) of :func:`dirichlet_bags`: beyond it the draws are the
profile itself, and near float64's limit they overflow to NaN."""


def dirichlet_bags(n_context: int, n_classes: int, n_samples: int, concentration: float = 1.0,
                   signal: float = 4.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Heterogeneous inputs: ``n_samples`` bags, each its own draw ``x ~ Dirichlet(concentration * M_C * p_y)``.

    ``M_C = n_context``, so ``concentration`` is the mean Dirichlet parameter per token (the parameters sum to
    ``concentration * M_C``). Class ``c`` prefers token ``c mod M_C``: ``p_c`` is uniform plus ``signal`` on that
    token, normalised.
    Small ``concentration`` gives sparse, very different bags within a class. Returns ``(X, y)``
    with ``X`` (M_C, N) and balanced labels ``y`` (N,).
    """
    n_context = check_int("n_context", n_context, 1)
    n_classes = check_int("n_classes", n_classes, 2)
    n_samples = check_int("n_samples", n_samples, 1)
    concentration = check_float("concentration", concentration, 0, MAX_CONCENTRATION, low_open=True)
    signal = check_float("signal", signal, 0, MAX_CONCENTRATION)
    check_array_size("the bags and class profiles", n_context * (n_samples + n_classes),
                     f"n_context={n_context}, n_samples={n_samples}, n_classes={n_classes}")
    rng = np.random.default_rng(check_int("seed", seed, 0))
    y = np.arange(n_samples) % n_classes
    profiles = np.ones((n_classes, n_context))
    profiles[np.arange(n_classes), np.arange(n_classes) % n_context] += signal
    profiles /= profiles.sum(axis=1, keepdims=True)
    X = np.stack([rng.dirichlet(concentration * n_context * profiles[c]) for c in y], axis=1)
    return X, y
