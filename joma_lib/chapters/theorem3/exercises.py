"""The answers behind the Theorem 3 page's exercises, from the page's two-cluster toy (``c-thm3-portrait``)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import ndtr
from scipy.stats import norm

from joma_lib.theory.nonlinear import ClusterMixture, decayed_trajectories, decayed_update, two_cluster_mixture
from joma_lib.base.validation import as_finite_array, check_int

CORE_STARTS = ((1.2, 0.3), (0.3, 1.2), (0.9, 0.9))
"""The three starts of the page's core update."""


def bias_rest_points(bias: float, nu: float = 0.2, weight_decay: float = 0.5, t_max: float = 100.0) -> np.ndarray:
    """Where the core update's three starts rest for another bias (exercise "Move the threshold"), shape (3, 2).

    ``t_max = 100`` is the page's 2000 Euler steps of 0.05; a node that dies ends near ``v = 0``.
    """
    t = np.linspace(0.0, t_max, 201)
    return decayed_trajectories(two_cluster_mixture(nu), np.array(CORE_STARTS), t, bias, weight_decay)[-1]


class RestPoint(NamedTuple):
    """A resting point ``mu = F(mu) / lambda`` near centre 0, and the gate of that centre's cluster there."""

    mu: np.ndarray
    kappa: float
    """``kappa_0``: the node's input at centre 0 above the threshold, in standard deviations."""
    share: float
    """``Phi(kappa_0)``: the share of cluster 0 the node fires for."""
    noise: float
    """``nu a_0 phi(kappa_0) / lambda``: what the noise term of cluster 0 adds to ``mu_0``."""


def fixed_point_rest(mixture: ClusterMixture, bias: float, weight_decay: float, start: object = (1.0, 0.0),
                     n_iter: int = 30) -> RestPoint:
    """Iterate ``mu <- F(mu) / lambda`` from ``start`` (exercise "Where exactly it rests")."""
    mu = as_finite_array("start", start, min_ndim=1)
    for _ in range(check_int("n_iter", n_iter, 1, 10_000)):
        mu = mu + decayed_update(mu, bias, mixture, weight_decay) / weight_decay
    kappa = float((mixture.centres[0] @ mu + bias) / (mixture.nu * np.linalg.norm(mu)))
    a0 = float(mixture.strengths[0])
    noise = mixture.nu * a0 * float(norm.pdf(kappa)) / weight_decay
    return RestPoint(mu, kappa, float(ndtr(kappa)), noise)
