"""Theorem 3 (reconstructed): ReLU update under a Gaussian cluster mixture."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.theory.nonlinear import (
    ClusterMixture,
    decayed_jacobian,
    decayed_trajectories,
    decayed_update,
    expected_linear_update,
    expected_relu_update,
    monte_carlo_relu_update,
    nearest_centre,
    sphere_trajectories,
    toy_mixture,
    two_cluster_mixture,
)


@pytest.fixture(scope="module")
def mixture() -> ClusterMixture:
    return toy_mixture()


def test_closed_form_matches_monte_carlo(mixture):
    rng = np.random.default_rng(5)
    for i in range(3):
        v, beta = rng.standard_normal(8), rng.uniform(-0.5, 0.3)
        dv, dbeta = expected_relu_update(v, beta, mixture)
        mc = monte_carlo_relu_update(v, beta, mixture, n_samples=100_000, seed=i)
        assert np.all(np.abs(dv - mc.dv) < 4.5 * mc.dv_stderr + 1e-12)
        assert abs(dbeta - mc.dbeta) < 4.5 * mc.dbeta_stderr


def test_always_active_relu_is_linear_and_never_active_is_zero(mixture):
    v = np.linspace(-1, 1, 8)
    dv_on, dbeta_on = expected_relu_update(v, 1e3, mixture)
    np.testing.assert_allclose(dv_on, expected_linear_update(mixture), atol=1e-12)
    assert dbeta_on == pytest.approx(mixture.strengths.sum())
    dv_off, dbeta_off = expected_relu_update(v, -1e3, mixture)
    np.testing.assert_allclose(dv_off, 0.0, atol=1e-12)
    assert dbeta_off == pytest.approx(0.0, abs=1e-12)


def test_batched_update_equals_single(mixture):
    vs, betas = np.random.default_rng(0).standard_normal((4, 8)), np.array([0.0, -0.2, 0.1, -0.4])
    dv, dbeta = expected_relu_update(vs, betas, mixture)
    for i in range(4):
        one = expected_relu_update(vs[i], betas[i], mixture)
        np.testing.assert_allclose(dv[i], one[0], rtol=1e-14)
        assert dbeta[i] == pytest.approx(one[1], rel=1e-14)


def test_relu_directions_settle_near_centres_linear_at_one_blend(mixture):
    starts = np.abs(np.random.default_rng(0).standard_normal((12, 8)))
    t = np.linspace(0, 60, 4)
    relu = sphere_trajectories(mixture, starts, t)
    lin = sphere_trajectories(mixture, starts, t, activation="linear")
    np.testing.assert_allclose(np.linalg.norm(relu, axis=-1), 1.0, atol=1e-6)  # the flow stays on the sphere
    idx, cos = nearest_centre(relu[-1], mixture)
    near = cos > 0.99
    assert near.sum() >= 3 and set(idx[near]) == {0, 1}  # the two clusters with positive gradient
    blend = expected_linear_update(mixture)
    np.testing.assert_allclose(lin[-1], np.broadcast_to(blend / np.linalg.norm(blend), lin[-1].shape), atol=1e-5)
    assert nearest_centre(lin[-1], mixture)[1].max() < 0.7  # the linear attractor is no cluster centre


@pytest.mark.parametrize("call, match", [
    (lambda m: expected_relu_update(np.zeros(8), 0.0, m), "non-zero"),
    (lambda m: expected_relu_update(np.ones(5), 0.0, m), "8 components"),
    (lambda m: monte_carlo_relu_update(np.ones((2, 8)), 0.0, m), "one vector"),
    (lambda m: sphere_trajectories(m, np.ones((2, 8)), [1.0], activation="tanh"), "activation"),
    (lambda m: sphere_trajectories(m, np.ones((2, 5)), [1.0]), "v0"),
    (lambda m: ClusterMixture(np.eye(2), np.array([0.5, 0.6]), np.ones(2), 0.1), "weights"),
    (lambda m: ClusterMixture(np.eye(2), np.array([0.5, 0.5]), np.ones(2), 0.0), "nu"),
])
def test_bad_inputs_raise(mixture, call, match):
    with pytest.raises(ValueError, match=match):
        call(mixture)


def test_weight_decay_gives_finite_rest_points_linear_at_saliency_over_lambda():
    """dv/dt = F(v) - lambda v: the linear node rests at E[g x] / lambda; ReLU nodes rest at finite points
    v = F(v) / lambda, on a cluster centre when they fire for that cluster only."""
    mixture, lam = two_cluster_mixture(0.2), 0.5
    starts = np.array([[1.2, 0.1], [0.1, 1.2], [0.9, 0.6]])
    t = np.linspace(0.0, 80.0, 3)
    linear = decayed_trajectories(mixture, starts, t, weight_decay=lam, activation="linear")[-1]
    np.testing.assert_allclose(linear, np.broadcast_to(expected_linear_update(mixture) / lam, linear.shape),
                               atol=1e-8)
    relu = decayed_trajectories(mixture, starts, t, bias=-0.6, weight_decay=lam)[-1]
    assert np.abs(decayed_update(relu, -0.6, mixture, lam)).max() < 1e-8  # at rest
    f_bound = np.abs(mixture.strengths).sum() * (1 + mixture.nu)         # |F| <= sum |a_c| (|xbar_c| + nu)
    assert np.linalg.norm(relu, axis=1).max() <= f_bound / lam
    idx, cos = nearest_centre(relu[:2], mixture)
    assert list(idx) == [0, 1] and cos.min() > 0.999


def test_nearest_centre_compares_directions_not_lengths():
    """Centres of different lengths: the most aligned one wins, by its cosine, however short it is."""
    mixture = ClusterMixture(np.array([[3.0, 0.0], [0.0, 0.5]]), np.array([0.5, 0.5]), np.array([1.0, 1.0]), 0.1)
    idx, cos = nearest_centre(np.array([[0.5, 1.0], [2.0, 1.0]]), mixture)
    assert list(idx) == [1, 0]
    np.testing.assert_allclose(cos, [1 / np.sqrt(1.25), 2 / np.sqrt(5.0)])


@pytest.mark.parametrize("kwargs, match", [
    ({"weight_decay": 0.0}, "weight_decay"),
    ({"weight_decay": -1.0}, "weight_decay"),
    ({"activation": "tanh"}, "activation"),
    ({"bias": float("nan")}, "bias"),
])
def test_decayed_update_rejects_bad_parameters(kwargs, match):
    args = {"bias": -0.6, "weight_decay": 0.5, "activation": "relu", **kwargs}
    with pytest.raises(ValueError, match=match):
        decayed_update(np.ones(2), args["bias"], two_cluster_mixture(), args["weight_decay"], args["activation"])
    with pytest.raises(ValueError, match="v0"):
        decayed_trajectories(two_cluster_mixture(), np.ones((2, 3)), [0.0, 1.0])


def test_jacobian_of_a_linear_node_is_minus_the_weight_decay():
    two = two_cluster_mixture(0.2)
    np.testing.assert_allclose(decayed_jacobian([0.7, 0.2], -0.6, two, 0.5, "linear"), -0.5 * np.eye(2), atol=1e-8)


def test_jacobian_matches_the_update_along_a_small_push():
    two = two_cluster_mixture(0.2)
    v, push = np.array([0.9, 0.7]), np.array([1e-4, -2e-4])
    change = (decayed_update(v + push, -0.6, two, 0.5) - decayed_update(v - push, -0.6, two, 0.5)) / 2
    np.testing.assert_allclose(decayed_jacobian(v, -0.6, two, 0.5) @ push, change, rtol=1e-4, atol=1e-10)


def test_jacobian_rejects_a_batch_of_states():
    with pytest.raises(ValueError, match=r"v must have shape \(2,\)"):
        decayed_jacobian(np.ones((3, 2)), -0.6, two_cluster_mixture(0.2), 0.5)


def test_a_mixture_given_as_lists_keeps_the_checked_arrays(mixture):
    """Lists pass the checks; the mixture keeps them as float arrays (not the lists, which have no ``shape``)."""
    as_lists = ClusterMixture(mixture.centres.tolist(), mixture.weights.tolist(), mixture.grad.tolist(), mixture.nu)
    assert all(isinstance(a, np.ndarray) and a.dtype == np.float64
               for a in (as_lists.centres, as_lists.weights, as_lists.grad))
    v = np.full(mixture.centres.shape[1], 0.3)
    for got, want in zip(expected_relu_update(v, -0.2, as_lists), expected_relu_update(v, -0.2, mixture)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(expected_linear_update(as_lists), expected_linear_update(mixture))
