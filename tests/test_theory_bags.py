"""The block's inputs: the bags of Figs. 2-3 and the Dirichlet bags."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.theory.bags import dirichlet_bags, gaussian_or_random_bags


def test_bag_generators_reject_bad_arguments():
    with pytest.raises(ValueError, match="concentration"):
        dirichlet_bags(8, 4, 10, concentration=0.0)
    with pytest.raises(ValueError, match="variant"):
        gaussian_or_random_bags("uniform")


def test_fig2_inputs():
    for variant in ("gaussian", "random"):
        X, y = gaussian_or_random_bags(variant, seed=1)
        assert X.shape == (20, 20) and np.all(X > 0)
        np.testing.assert_allclose(X.sum(axis=0), 1.0, rtol=1e-12)
        np.testing.assert_array_equal(y, np.arange(20))
    X, _ = gaussian_or_random_bags("gaussian", seed=1)
    # the bump over the distinct tokens moves with the class: its peak is at token round(c * 10 / 20)
    assert np.all(np.abs(X[:10].argmax(axis=0) - np.arange(20) / 2) <= 0.5)


def test_fig2_bags_start_uniform_below_one_half():
    """Before the columns are normalised, the common tokens are uniform in [0, 1/2) and the Gaussian bump peaks at 1
    (at token c n_distinct / n_classes, a whole token for even c): there, every common token is below half the peak,
    and with 2,000 of them the largest comes close to it."""
    X, _ = gaussian_or_random_bags("gaussian", n_distinct=10, n_common=200, n_classes=20, seed=1)
    even = X[:, ::2]
    ratio = even[10:] / even[:10].max(axis=0)
    assert 0.45 < ratio.max() < 0.5


def test_dirichlet_bags_draw_each_class_around_its_profile():
    """Each bag is a draw ``x ~ Dirichlet(concentration * M_C * p_y)``: a class's mean bag is its profile ``p_y``
    (uniform plus ``signal`` on token ``y mod M_C``, normalised), and each token's variance is
    ``p (1 - p) / (concentration * M_C + 1)``."""
    n_context, n_classes, n = 5, 3, 30_000
    X, y = dirichlet_bags(n_context, n_classes, n, concentration=2.0, signal=4.0, seed=3)
    assert X.shape == (n_context, n) and np.array_equal(np.bincount(y), [n // n_classes] * n_classes)
    np.testing.assert_allclose(X.sum(axis=0), 1.0, rtol=1e-12)
    for c in range(n_classes):
        p = np.ones(n_context)
        p[c % n_context] += 4.0
        p /= p.sum()
        bags = X[:, y == c]  # 10,000 draws: the mean's standard error is below 0.0015
        np.testing.assert_allclose(bags.mean(axis=1), p, atol=0.01)
        np.testing.assert_allclose(bags.var(axis=1), p * (1 - p) / (2.0 * n_context + 1), rtol=0.1)


def test_dirichlet_bags_draw_with_concentration_times_n_context():
    """x ~ Dirichlet(concentration * M_C * p_y): its mean is p_y and Var x_l = p_l (1 - p_l) / (concentration M_C + 1)
    (the docstring said Dirichlet(concentration * p_y), which has a variance M_C times larger when p is uniform)."""
    X, y = dirichlet_bags(8, 2, 40_000, concentration=0.5, signal=0.0, seed=2)
    p = np.full(8, 1 / 8)  # signal 0: every class profile is uniform
    np.testing.assert_allclose(X.mean(axis=1), p, rtol=0.03)
    np.testing.assert_allclose(X.var(axis=1), p * (1 - p) / (0.5 * 8 + 1), rtol=0.05)
