"""The answers behind the Theorem 4 page's exercises, computed from the theory layer."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from joma_lib.theory.dynamics import integrate_nonlinear
from joma_lib.theory.softmax_dynamics import (entropy_drop_and_rise, row_entropy, simulate_softmax_attention,
                                              softmax_attention)
from joma_lib.base.validation import as_finite_array, check_float


class EntropyRun(NamedTuple):
    """The attention entropy of Fig. 4's run in another setting (exercises "Turn the temperature", "Where the sparse
    phase disappears")."""

    drop: float
    rise: float
    minimum: float
    end: float
    limit: float
    """The entropy at the fixed point, ``H(softmax(mu^2 / tau_v))``."""


def entropy_run(mu: object, temperature: float = 3.0) -> EntropyRun:
    """Fig. 4's 5000 steps from the targets ``mu`` at the temperature ``tau_v``, summarised by its entropy."""
    run = simulate_softmax_attention(mu, temperature=temperature)
    limit = float(row_entropy(softmax_attention(mu, temperature)))
    return EntropyRun(*entropy_drop_and_rise(run.entropy), float(run.entropy.min()), float(run.entropy[-1]), limit)


def convergence_offsets(mu: object, t: float = 200.0) -> np.ndarray:
    """``t^0_j = t - omega_j(t) exp(-mu_j^2 / 2)`` from ``v(0) = 0`` for the targets ``mu``: the time each component
    loses before it converges at its full rate (exercise "The offset behind the ratio"); ``t`` must be long enough for
    it to settle."""
    mu = as_finite_array("mu", mu, min_ndim=1)
    t = check_float("t", t, 0.0, low_open=True)
    return t - integrate_nonlinear(mu, [t]).omega[0] / np.exp(mu**2 / 2)

