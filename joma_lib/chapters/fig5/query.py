"""One query of the latent tree under the dynamics of Paper Fig. 5, solved by the library.

For a query ``m`` the targets ``mu_l = scale P[l | m]`` drive ``dv/dt = (mu - v) o exp(v^2/2)`` and the attention
is ``b_l ∝ P[l | m] exp(v_l^2/2)`` (:mod:`joma_lib.theory.latent_tree`). :func:`query_run` is what the page's Euler
steps compute, for any tree; :func:`linear_query_run` is the same query with a linear MLP (Theorem 2, no pull back).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from joma_lib.theory.dynamics import blowup_time, integrate_linear
from joma_lib.theory.latent_tree import (
    HBLT,
    association_dynamics,
    association_targets,
    association_time,
    attention_from_association,
    cla_height_matrix,
)
from joma_lib.theory.softmax_dynamics import entropy_drop_and_rise, row_entropy
from joma_lib.base.validation import check_float, check_int


class QueryRun(NamedTuple):
    """A query's run: the CLA height of every token with it (0 for itself), the targets, ``v(t)``, the entropy of
    its attention over time, and the time at which the first token of each height ``H = 1..L`` reaches
    ``fraction`` of its target."""

    heights: np.ndarray
    mu: np.ndarray
    times: np.ndarray
    v: np.ndarray
    entropy: np.ndarray
    assoc_time: np.ndarray

    @property
    def dip(self) -> float:
        """How far the entropy falls below its start (nats): the depth of the sparse phase."""
        return entropy_drop_and_rise(self.entropy)[0]


def query_times(t_max: float, n_times: int) -> np.ndarray:
    """``n_times`` equally spaced times from 0 to ``t_max``."""
    return np.linspace(0.0, check_float("t_max", t_max, 0.0, 1e3, low_open=True),
                       check_int("n_times", n_times, 10, 100_000))


def query_run(tree: HBLT, query: int = 0, scale: float = 4.0, fraction: float = 0.9, t_max: float = 2.0,
              n_times: int = 201) -> QueryRun:
    """Query ``query`` of ``tree`` from ``v = 0`` to ``t_max``, exact up to the ODE solver's tolerance."""
    query = tree.leaf_index("query", query)
    times = query_times(t_max, n_times)
    mu = association_targets(tree, query, scale)
    v = association_dynamics(mu, times)
    heights = cla_height_matrix(tree)[query]
    first = [int(np.flatnonzero(heights == h)[0]) for h in range(1, tree.tree_height + 1)]
    return QueryRun(heights, mu, times, v, np.asarray(row_entropy(attention_from_association(mu, v))),
                    np.array([association_time(mu[l], fraction) for l in first]))


def linear_query_run(mu: np.ndarray, n_times: int = 50, until: float = 0.99) -> tuple[float, np.ndarray, np.ndarray]:
    """The linear MLP on the targets ``mu`` (``dv/dt = mu o exp(v^2/2)``): its blow-up time ``t*``, and ``v`` and
    the attention entropy on ``n_times`` times up to ``until * t*`` (the query itself, ``mu = 0``, does not move)."""
    others = mu > 0
    t_star = float(blowup_time(mu[others]))
    times = np.linspace(0.0, check_float("until", until, 0.0, 1.0, low_open=True, high_open=True) * t_star,
                        check_int("n_times", n_times, 2, 100_000))
    v = np.zeros((times.size, mu.size))
    v[:, others] = integrate_linear(mu[others], times)
    return t_star, v, np.asarray(row_entropy(attention_from_association(mu, v)))
