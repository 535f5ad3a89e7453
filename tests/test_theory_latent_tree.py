"""Theorem 5 (HBLT co-occurrence) and the association dynamics of a latent hierarchy."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.theory.dynamics import nonlinear_by_quadrature
from joma_lib.theory.latent_tree import (
    HBLT,
    approximation_error_bound,
    association_dynamics,
    association_targets,
    association_time,
    attention_from_association,
    cla_height,
    cla_height_matrix,
    cooccurrence_approx,
    cooccurrence_closed_form,
    cooccurrence_enumerate,
    cooccurrence_exact,
    cooccurrence_matrix,
    cooccurrence_monte_carlo,
    sample_hblt,
)

TREES = [
    HBLT(tree_height=3, rho=0.8),  # binary root: the closed form holds at every height
    HBLT(tree_height=3, rho=0.6, off_rate=0.1),  # asymmetric channel
    HBLT(tree_height=2, branching=3, n_labels=5, rho=0.7),  # D not a power of 2: unequal marginals
    HBLT(tree_height=3, n_labels=4, rho=0.5),  # root children independent
]


@pytest.mark.parametrize("tree", TREES, ids=str)
def test_message_passing_matches_enumeration(tree: HBLT) -> None:
    for l in range(tree.n_leaves):
        for m in (0, tree.n_leaves - 1):
            assert cooccurrence_exact(tree, l, m) == pytest.approx(cooccurrence_enumerate(tree, l, m), abs=1e-12)


def test_closed_form_for_fair_binary_latents() -> None:
    for L, rho in [(3, 0.8), (6, 1 - 1 / 6), (10, 0.95)]:
        tree = HBLT(tree_height=L, rho=rho)
        for H in range(1, L + 1):
            assert cooccurrence_exact(tree, 2 ** (H - 1), 0) == pytest.approx(0.5 * (1 + rho ** (2 * H)), abs=1e-12)


def test_closed_form_with_unequal_marginal() -> None:
    tree = HBLT(tree_height=2, branching=3, n_labels=5, rho=0.7)
    # root child 0 is switched on by labels 1 and 3 of 5: P[on] = 0.5 + 0.7 (2/5 - 1/2)
    p_c = 0.5 + 0.7 * (2 / 5 - 0.5)
    assert cooccurrence_exact(tree, 1, 0) == pytest.approx(cooccurrence_closed_form(0.7, 1, p_c), abs=1e-12)
    assert cooccurrence_closed_form(0.7, 1, p_c) != pytest.approx(cooccurrence_closed_form(0.7, 1), abs=1e-3)


@pytest.mark.parametrize("tree", [HBLT(tree_height=4, rho=0.75), HBLT(tree_height=3, rho=0.6, off_rate=0.1),
                                  HBLT(tree_height=2, branching=3, n_labels=5, rho=0.7)], ids=str)
def test_monte_carlo_within_three_standard_errors(tree: HBLT) -> None:
    sample = sample_hblt(tree, 60_000, seed=3)
    for l in range(1, tree.n_leaves):
        estimate, stderr = cooccurrence_monte_carlo(sample.leaves, l, 0)
        assert abs(estimate - cooccurrence_exact(tree, l, 0)) <= 3 * stderr


def test_sample_bags_and_label_marginal() -> None:
    tree = HBLT(tree_height=3, n_labels=4, rho=0.5)
    sample = sample_hblt(tree, 4000, seed=1)
    assert sample.leaves.shape == (4000, 8) and sample.labels.shape == (4000,)
    bags = sample.bags()
    assert all(np.array_equal(np.flatnonzero(row), bag) for row, bag in zip(sample.leaves[:50], bags[:50]))
    assert np.all(np.abs(np.bincount(sample.labels, minlength=4) / 4000 - 0.25) < 0.03)
    # independent root children for D = 4: every token is present half of the time
    assert np.all(np.abs(sample.leaves.mean(axis=0) - 0.5) < 0.04)


@pytest.mark.parametrize("tree", [HBLT(tree_height=6, rho=1 - 1 / 6), HBLT(tree_height=4, rho=0.5, off_rate=0.2),
                                  HBLT(tree_height=3, branching=3, rho=0.9)], ids=str)
def test_cooccurrence_decreases_with_height(tree: HBLT) -> None:
    by_height = [cooccurrence_exact(tree, tree.branching ** (H - 1), 0) for H in range(1, tree.tree_height + 1)]
    assert np.all(np.diff(by_height) < 0)
    assert by_height[0] < 1.0


def test_approximation_error_bound_in_claimed_regime() -> None:
    for L in range(2, 31):
        tree = HBLT(tree_height=L, rho=1 - 1 / L)
        H = np.arange(1, L + 1)
        exact = np.array([cooccurrence_closed_form(tree.rho, int(h)) for h in H])
        error = exact - cooccurrence_approx(H, L)
        assert np.all(error >= -1e-15)
        assert np.all(error <= approximation_error_bound(H, L) + 1e-15)
        assert np.all(approximation_error_bound(H, L) <= (H / L) ** 2)
        small = H <= max(1, L // 4)  # H << L: the approximation is good to a fraction H/L of 1 - H/L's drop
        assert np.all(error[small] <= (H[small] / L) * (H[small] / L))
    # the bound is tight for H = 1: L = 10 gives 0.905 against 0.900
    assert cooccurrence_closed_form(0.9, 1) - 0.9 == pytest.approx(0.005, abs=1e-12)


def test_approximation_fails_far_from_the_regime() -> None:
    L = 10
    exact = cooccurrence_exact(HBLT(tree_height=L, rho=1 - 1 / L), 2 ** (L - 1), 0)
    assert exact - cooccurrence_approx(L, L) > 0.5  # 1 - H/L -> 0 at the root; the model stays above 1/2


def test_cla_heights() -> None:
    tree = HBLT(tree_height=3, branching=3, rho=0.5)
    H = cla_height_matrix(tree)
    assert all(H[l, m] == cla_height(tree, l, m) for l in range(27) for m in range(0, 27, 5))
    assert H[0, 0] == 0 and H[0, 1] == 1 and H[0, 3] == 2 and H[0, 26] == 3
    P = cooccurrence_matrix(tree)
    assert np.allclose(np.diag(P), 1.0) and P[0, 1] > P[0, 3] > P[0, 26]
    unequal = HBLT(tree_height=2, branching=3, n_labels=5, rho=0.7)  # depends on the root subtrees, not only on H
    P = cooccurrence_matrix(unequal)
    assert all(P[l, m] == cooccurrence_exact(unequal, l, m) for l in range(9) for m in range(9))
    assert P[0, 3] != P[0, 6]


def test_association_dynamics_matches_quadrature() -> None:
    mu = np.array([0.0, 3.1, 2.6, 2.2, 1.0])
    times = np.array([association_time(m) for m in mu[1:]])
    for k, t in enumerate(times, start=1):
        v = association_dynamics(mu, np.array([0.0, t]))
        assert v[0, k] == 0.0 and v[1, 0] == 0.0
        assert v[1, k] == pytest.approx(0.9 * mu[k], rel=1e-6)
    assert np.all(np.diff(times) > 0)  # larger target, earlier association (Theorem 4)


def test_attention_from_association() -> None:
    mu = np.array([0.0, 2.0, 1.0])
    b = attention_from_association(mu, np.zeros((2, 3)))
    assert np.allclose(b, [[0, 2 / 3, 1 / 3]] * 2)
    assert attention_from_association(mu, np.array([0.0, 2.0, 1.0]))[1] > 2 / 3
    # one token to attend to, however rare (mu < 1), takes all the attention
    assert np.array_equal(attention_from_association(np.array([0.0, 0.25]), np.zeros(2)), [0.0, 1.0])


def test_association_dynamics_for_large_targets() -> None:
    """scale = 9 gives targets up to 8.1, whose rise of omega is faster than float64 resolves t (it raised): the
    association still follows Theorem 4's ODE, checked against the quadrature."""
    mu = association_targets(HBLT(tree_height=3), 0, scale=9.0)
    times = np.array([0.0, 0.5, 1.0])
    v = association_dynamics(mu, times)
    active = mu > 0
    assert mu.max() > 8 and np.all(v[:, ~active] == 0)
    np.testing.assert_allclose(v[:, active], nonlinear_by_quadrature(mu[active], times).v, rtol=1e-12)
    np.testing.assert_allclose(v[-1, active], mu[active], rtol=1e-9)


def test_the_approximation_takes_integer_heights() -> None:
    """Arrays of integer heights give one value per height; a negative "upper bound" (H = 0.25) is refused."""
    np.testing.assert_allclose(approximation_error_bound(np.arange(3), 4), [0.0, 1 / 32, 6 / 32])
    np.testing.assert_allclose(cooccurrence_approx([0, 4], 4), [1.0, 0.0])


@pytest.mark.parametrize("call, match", [
    (lambda: HBLT(tree_height=0), "tree_height"),
    (lambda: HBLT(tree_height=3, rho=0.0), "rho"),
    (lambda: HBLT(tree_height=3, rho=1.5), "rho"),
    (lambda: HBLT(tree_height=3, rho=0.8, off_rate=0.3), "off_rate"),
    (lambda: HBLT(tree_height=3, branching=1), "branching"),
    (lambda: HBLT(tree_height=3, n_labels=1), "n_labels"),
    (lambda: HBLT(tree_height=31), "tree_height"),
    (lambda: sample_hblt(HBLT(tree_height=20), 1000), "memory"),
    (lambda: cla_height_matrix(HBLT(tree_height=13)), "4096"),
    (lambda: cooccurrence_exact(HBLT(tree_height=2), 4, 0), "l"),
    (lambda: cooccurrence_exact(HBLT(tree_height=2), 0, -1), "m"),
    (lambda: cooccurrence_enumerate(HBLT(tree_height=5), 1, 0), "enumeration"),
    (lambda: sample_hblt(HBLT(tree_height=2), 0), "n"),
    (lambda: cooccurrence_monte_carlo(np.zeros((5, 4), dtype=bool), 1, 0), "never appears"),
    (lambda: cooccurrence_monte_carlo(np.zeros(5, dtype=bool), 1, 0), "2-D"),
    (lambda: cooccurrence_approx(5, 4), "H"),
    (lambda: approximation_error_bound(-1, 4), "H"),
    (lambda: approximation_error_bound(0.25, 4), r"H must be an integer or an array of integers in \[0, L\]"),
    (lambda: approximation_error_bound(np.array([1.0, np.nan]), 4), "H must be an integer .*got"),
    (lambda: cooccurrence_approx(np.array([1, 2.5]), 4), "H must be an integer .*got"),
    (lambda: cooccurrence_closed_form(0.5, 1, marginal=0.0), "marginal"),
    (lambda: association_targets(HBLT(tree_height=2), 0, scale=-1.0), "scale"),
    (lambda: association_dynamics(np.array([1.0, -1.0]), np.array([0.0, 1.0])), "mu"),
    (lambda: association_dynamics(np.array([1.0]), np.array([1.0, 0.5])), "times"),
    (lambda: association_dynamics(np.array([1.0]), np.array([-1.0, 0.5])), "times"),
    (lambda: association_time(2.0, fraction=1.0), "fraction"),
    (lambda: attention_from_association(np.array([1.0, 2.0]), np.zeros(3)), "v"),
])
def test_bad_inputs_raise_clear_errors(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
