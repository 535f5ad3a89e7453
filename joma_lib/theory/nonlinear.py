"""Theorem 3 (reconstructed): a ReLU node fed by a mixture of isotropic Gaussian clusters.

Setting (the paper's nonlinear case, Theorem 3). Attention is frozen at uniform, so the lower MLP node
sees ``h = relu(v^T x + beta)``: ``v = U_C^T w`` reads the contextual tokens and ``beta = u_q^T w``
is the residual (query) component, which acts as a bias. The input ``x`` comes from a
mixture of ``C`` isotropic clusters, ``x | c ~ N(xbar_c, nu^2 I)``, and the back-propagated
gradient has a stationary mean ``E[g | c]`` per cluster (Assumption 1). Gradient flow
``dv/dt = E[g 1[v^T x + beta > 0] x]`` then has the closed form

    dv/dt = sum_c a_c ( Phi(kappa_c) xbar_c + nu phi(kappa_c) v/||v|| ),
    dbeta/dt = sum_c a_c Phi(kappa_c),   a_c = P[c] E[g | c],   kappa_c = (v^T xbar_c + beta) / (nu ||v||),

with ``Phi``/``phi`` the standard normal CDF/PDF. This matches the structure printed in the
paper's Theorem 3, ``sum_c a_c (theta_1(r_c) xbar_c + theta_2(r_c) v/||v||)``.

**Reconstructed (paper.md Q5).** The paper's exact coefficients ``theta_1, theta_2``, the
normalisation of the ``v`` term and its hypotheses were not recovered. The Gaussian clusters,
the ReLU coefficients above (derived here, checked by Monte Carlo), the frozen bias and the
unit-norm constraint used for the trajectories are this companion's choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr
from scipy.stats import sem

from joma_lib.base.ode import integrate_autonomous
from joma_lib.base.validation import as_finite_array, check_choice, check_float, check_int, check_times

_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


@dataclass(frozen=True)
class ClusterMixture:
    """``x ~ sum_c P[c] N(centres[c], nu^2 I)`` (``nu``: the cluster spread) with stationary mean gradient
    ``grad[c] = E[g | c]``; ``weights`` are the ``P[c]``."""

    centres: np.ndarray
    weights: np.ndarray
    grad: np.ndarray
    nu: float

    def __post_init__(self) -> None:
        centres = as_finite_array("centres", self.centres, min_ndim=2)
        w = as_finite_array("weights", self.weights, min_ndim=1)
        g = as_finite_array("grad", self.grad, min_ndim=1)
        nu = check_float("nu", self.nu, 0, low_open=True)
        if centres.ndim != 2:
            raise ValueError(f"centres must be a (C, d) array, got shape {centres.shape}")
        if w.shape != (centres.shape[0],) or np.any(w < 0) or abs(w.sum() - 1) > 1e-12:
            raise ValueError(f"weights must be a probability vector of length C = {centres.shape[0]}")
        if g.shape != w.shape:
            raise ValueError(f"grad must have shape {w.shape}, got {g.shape}")
        for name, value in (("centres", centres), ("weights", w), ("grad", g), ("nu", nu)):
            object.__setattr__(self, name, value)  # the checked values, not what was passed (e.g. lists)

    @property
    def strengths(self) -> np.ndarray:
        """``a_c = P[c] E[g | c]``, shape ``(C,)``."""
        return self.weights * self.grad


def toy_mixture(d: int = 8, nu: float = 0.15) -> ClusterMixture:
    """Three unit-norm cluster centres over ``d`` tokens: two pulled towards (g > 0), one pushed away.

    Centre 0 uses tokens 0-2, centre 1 tokens 3-5 and centre 2 tokens 5 to d-1, each with a
    small share of a common token 0; weights (0.3, 0.3, 0.4), mean gradients (+1, +1, -1).
    """
    d = check_int("d", d, 7, 1000)
    centres = np.zeros((3, d))
    centres[0, 0:3] = 1.0
    centres[1, 3:6] = 1.0
    centres[2, 5:] = 1.0
    centres[:, 0] += 0.3
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    return ClusterMixture(centres, np.array([0.3, 0.3, 0.4]), np.array([1.0, 1.0, -1.0]), nu)


def _check_state(v: object, bias: object, d: int) -> tuple[np.ndarray, np.ndarray]:
    v = as_finite_array("v", v, min_ndim=1)
    if v.shape[-1] != d:
        raise ValueError(f"v must have {d} components on its last axis, got shape {v.shape}")
    if np.any(np.linalg.norm(v, axis=-1) == 0):
        raise ValueError(f"v must be non-zero (the ReLU update involves v/||v||), got norms "
                         f"{np.linalg.norm(v, axis=-1)!r:.80}")
    return v, np.broadcast_to(as_finite_array("bias", bias), v.shape[:-1])


def expected_relu_update(v: object, bias: object, mixture: ClusterMixture) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form ``(dv/dt, dbeta/dt) = E[g 1[v^T x + beta > 0] (x, 1)]`` under the mixture (module docstring).

    ``v`` has shape ``(..., d)``, ``bias`` (the bias ``beta``) broadcasts to ``v.shape[:-1]``.
    """
    v, beta = _check_state(v, bias, mixture.centres.shape[1])
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    kappa = (v @ mixture.centres.T + beta[..., None]) / (mixture.nu * norm)       # (..., C): kappa_c
    cdf, pdf = ndtr(kappa), _INV_SQRT_2PI * np.exp(-0.5 * kappa * kappa)
    a = mixture.strengths
    dv = (a * cdf) @ mixture.centres + mixture.nu * (pdf @ a)[..., None] * v / norm
    return dv, cdf @ a


def expected_linear_update(mixture: ClusterMixture) -> np.ndarray:
    """``dv/dt = E[g x] = sum_c a_c xbar_c`` for a linear node: a constant drift, so ``v`` diverges linearly."""
    return mixture.strengths @ mixture.centres


class MonteCarloUpdate(NamedTuple):
    """Sample means of ``g 1[v^T x + beta > 0] x`` (``dv``) and ``g 1[...]`` (``dbeta``) with standard errors."""

    dv: np.ndarray
    dv_stderr: np.ndarray
    dbeta: float
    dbeta_stderr: float


def monte_carlo_relu_update(v: object, bias: float, mixture: ClusterMixture, n_samples: int = 200_000,
                            seed: int = 0) -> MonteCarloUpdate:
    """Estimate the expected ReLU update at one state ``(v, beta)`` (``beta``: ``bias``) by sampling the mixture."""
    v, beta = _check_state(v, bias, mixture.centres.shape[1])
    if v.ndim != 1:
        raise ValueError(f"v must be one vector (shape (d,)), got shape {v.shape}")
    n = check_int("n_samples", n_samples, 2, 10**8)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    c = rng.choice(mixture.weights.size, size=n, p=mixture.weights)
    x = mixture.centres[c] + mixture.nu * rng.standard_normal((n, v.size))
    gate = mixture.grad[c] * (x @ v + float(beta) > 0)
    gx = gate[:, None] * x
    return MonteCarloUpdate(gx.mean(axis=0), sem(gx, axis=0), float(gate.mean()), float(sem(gate)))


def sphere_trajectories(mixture: ClusterMixture, v0: object, t_eval: object, bias: float = -0.5,
                        activation: str = "relu") -> np.ndarray:
    """Gradient flow of ``v`` on the unit sphere, from each row of ``v0``; shape ``(T, R, d)``.

    ``dv/dt = (I - v v^T) F(v)`` with ``F`` the expected update of the node (ReLU with the
    frozen ``bias``, or linear). The projection keeps ``||v|| = 1``; it stands in for the
    unit-norm constraint that the paper's nonlinear analysis is reported to use. Without it
    a ReLU node with a stationary positive gradient grows in norm as well; what the
    nonlinearity changes is *where the direction settles*: near one cluster centre (which one
    depends on the start) instead of at the single blend ``sum_c a_c xbar_c`` of the linear node.
    """
    check_choice("activation", activation, ("relu", "linear"))
    bias = check_float("bias", bias)
    t_eval = check_times("t_eval", t_eval)
    v0 = as_finite_array("v0", v0, min_ndim=2)
    if v0.ndim != 2 or v0.shape[1] != mixture.centres.shape[1]:
        raise ValueError(f"v0 must have shape (R, {mixture.centres.shape[1]}), got {v0.shape}")
    v0 = v0 / np.linalg.norm(v0, axis=1, keepdims=True)
    drift = expected_linear_update(mixture)

    def rhs(v: np.ndarray, rows: np.ndarray) -> np.ndarray:
        f = expected_relu_update(v, bias, mixture)[0] if activation == "relu" else np.broadcast_to(drift, v.shape)
        return f - np.sum(f * v, axis=1, keepdims=True) * v / np.sum(v * v, axis=1, keepdims=True)

    return integrate_autonomous(rhs, v0, t_eval, rtol=1e-8, atol=1e-10)


def nearest_centre(v: object, mixture: ClusterMixture) -> tuple[np.ndarray, np.ndarray]:
    """For directions ``v`` (..., d): index of the most aligned cluster centre and that cosine."""
    v = as_finite_array("v", v, min_ndim=1)
    unit_c = mixture.centres / np.linalg.norm(mixture.centres, axis=1, keepdims=True)
    cos = (v / np.linalg.norm(v, axis=-1, keepdims=True)) @ unit_c.T
    return np.argmax(cos, axis=-1), np.max(cos, axis=-1)


def two_cluster_mixture(nu: float = 0.2) -> ClusterMixture:
    """Two clusters in 2-D, centres ``e_1`` and ``e_2``, equal weights, both pulling (``E[g | c] = +1``)."""
    return ClusterMixture(np.eye(2), np.array([0.5, 0.5]), np.array([1.0, 1.0]), nu)


def decayed_update(v: object, bias: float, mixture: ClusterMixture, weight_decay: float,
                   activation: str = "relu") -> np.ndarray:
    """``dv/dt = F(v) - lambda v``: the expected update of the node (eq-relu-update, or ``E[g x]`` when
    linear) plus weight decay ``lambda``. ``v`` has shape ``(..., d)``.

    ``F`` is bounded (every gate is between 0 and 1), so any ``lambda > 0`` keeps ``||v||`` finite and every
    fixed point solves ``v = F(v) / lambda``: the finite resting point ``mu`` of the (reconstructed) Theorem 3.
    For a linear node ``F = E[g x]`` is constant and ``mu = E[g x] / lambda``, the saliency divided by ``lambda``.
    """
    check_choice("activation", activation, ("relu", "linear"))
    lam = check_float("weight_decay", weight_decay, 0, low_open=True)
    v = as_finite_array("v", v, min_ndim=1)
    f = (expected_relu_update(v, check_float("bias", bias), mixture)[0] if activation == "relu"
         else np.broadcast_to(expected_linear_update(mixture), v.shape))
    return f - lam * v


def decayed_trajectories(mixture: ClusterMixture, v0: object, t_eval: object, bias: float = -0.6,
                         weight_decay: float = 0.5, activation: str = "relu") -> np.ndarray:
    """Gradient flow ``dv/dt = F(v) - lambda v`` (:func:`decayed_update`) from each row of ``v0``; shape (T, R, d).

    Unlike :func:`sphere_trajectories` nothing constrains the norm: weight decay alone brings the node to rest.
    A ReLU start whose gates are all closed decays towards ``v = 0`` (a dead node), where the update is undefined;
    the starts must keep a gate open.
    """
    t_eval = check_times("t_eval", t_eval)
    v0 = as_finite_array("v0", v0, min_ndim=2)
    if v0.ndim != 2 or v0.shape[1] != mixture.centres.shape[1]:
        raise ValueError(f"v0 must have shape (R, {mixture.centres.shape[1]}), got {v0.shape}")
    decayed_update(v0, bias, mixture, weight_decay, activation)  # validates the parameters once, up front

    def rhs(v: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return decayed_update(v, bias, mixture, weight_decay, activation)

    return integrate_autonomous(rhs, v0, t_eval, rtol=1e-8, atol=1e-10)


def decayed_jacobian(v: object, bias: float, mixture: ClusterMixture, weight_decay: float,
                     activation: str = "relu", step: float = 1e-6) -> np.ndarray:
    """The Jacobian ``d(dv/dt)/dv`` of :func:`decayed_update` at one state ``v`` (shape (d,)), by central differences.

    At a resting point its eigenvalues say what kind of rest it is: all real parts negative, stable (every small
    push dies out); one positive, a saddle (a push along its eigenvector grows).
    """
    v = as_finite_array("v", v, min_ndim=1)
    if v.ndim != 1 or v.size != mixture.centres.shape[1]:
        raise ValueError(f"v must have shape ({mixture.centres.shape[1]},), got {v.shape}")
    h = check_float("step", step, 0, 1e-2, low_open=True)
    pushes = h * np.eye(v.size)
    columns = decayed_update(v + pushes, bias, mixture, weight_decay, activation) \
        - decayed_update(v - pushes, bias, mixture, weight_decay, activation)
    return columns.T / (2 * h)
