"""Theorem 2's ODE varied, for the hidden checks of the Theorem 2 page (its erf section and its exercises).

Theorem 2 solves ``dv/dt = Delta o exp(v^2/2)`` from ``v(0) = 0`` (:mod:`joma_lib.theory.dynamics`). The page's
exercises change one thing at a time: a temperature ``tau`` in the attention (``exp(v^2/(2 tau^2))``), linear attention
(``sqrt(1 + v^2)``), tied saliencies. The varied ODEs are integrated with ``scipy.integrate.solve_ivp`` (DOP853),
independently of the library's own integrator, so that a hidden cell checks an exercise's pen-and-paper solution against
an integration in a line or two. Saliencies are one vector ``saliency`` (one problem) throughout.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import softmax

from joma_lib.theory.dynamics import blowup_time, erf_ratio, linear_closed_form
from joma_lib.base.validation import as_finite_array, check_float, check_int, check_times

Rate = Callable[[np.ndarray], np.ndarray]


def _saliencies(saliency: object) -> np.ndarray:
    """``saliency`` as a 1-D float array with at least one non-zero entry; ValueError otherwise."""
    d = as_finite_array("saliency", saliency, min_ndim=1)
    if d.ndim != 1 or not np.any(d):
        raise ValueError(f"saliency must be one vector (one problem), not all zero, got {saliency!r}")
    return d


def erf_spread(v: object, saliency: object, scale: float) -> np.ndarray:
    """Spread (max - min over the tokens) of ``erf(v_l/scale)/Delta_l`` at each time, shape ``v.shape[:-1]``.

    Zero along a flow that conserves the ratio: ``scale = sqrt 2`` for Theorem 2's ODE, ``scale = sqrt 2 tau`` with
    a temperature ``tau`` (so ``scale = 2``, the slides' printed form, for ``tau = sqrt 2``).
    """
    return np.ptp(erf_ratio(v, saliency, scale), axis=-1)


def temperature_blowup_time(saliency: object, tau: float) -> float:
    """Blow-up time ``tau sqrt(pi/2) / max|Delta|`` of ``dv/dt = Delta o exp(v^2/(2 tau^2))`` (one problem)."""
    tau = check_float("tau", tau, 0, low_open=True)
    return tau * float(blowup_time(_saliencies(saliency)))


def _solve(rate: Rate, n_tokens: int, t_eval: object) -> np.ndarray:
    """``solve_ivp`` of ``dv/dt = rate(v)`` from ``v(0) = 0`` at the times ``t_eval``: shape ``(len(t_eval), n)``."""
    t = check_times("t_eval", t_eval)
    sol = solve_ivp(lambda _, v: rate(v), (0.0, float(t[-1])), np.zeros(n_tokens), method="DOP853", t_eval=t,
                    rtol=1e-11, atol=1e-13)
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return sol.y.T


def integrate_temperature(saliency: object, tau: float, t_eval: object) -> np.ndarray:
    """``dv/dt = Delta o exp(v^2/(2 tau^2))`` integrated by ``solve_ivp`` (the exercise with a temperature).

    ``t_eval`` must stay below :func:`temperature_blowup_time`. Shape ``(len(t_eval), len(saliency))``.
    """
    d = _saliencies(saliency)
    tau = check_float("tau", tau, 0, low_open=True)
    return _solve(lambda v: d * np.exp(v * v / (2 * tau * tau)), d.size, t_eval)


def integrate_linear_attention(saliency: object, t_eval: object) -> np.ndarray:
    """``dv/dt = Delta o sqrt(1 + v^2)`` (linear attention, logits started at 1) integrated by ``solve_ivp``.

    Its solution is ``sinh(Delta_l t)``: finite at every time, no blow-up. Shape ``(len(t_eval), len(saliency))``.
    """
    d = _saliencies(saliency)
    return _solve(lambda v: d * np.sqrt(1.0 + v * v), d.size, t_eval)


def euler_steps(rate: Rate, v0: object, t_end: float, n_steps: int) -> np.ndarray:
    """``n_steps`` explicit Euler steps ``v <- v + dt rate(v)`` of length ``t_end / n_steps``; the final ``v``.

    The loop of the page's core update, for any rate: the linear-attention exercise runs it with
    ``rate(v) = Delta o sqrt(1 + v^2)``.
    """
    v = as_finite_array("v0", v0)
    t_end = check_float("t_end", t_end, 0)
    n_steps = check_int("n_steps", n_steps, 1, 10_000_000)
    dt = t_end / n_steps
    for _ in range(n_steps):
        v = v + dt * rate(v)
    return v


def attention_near_blowup(saliency: object, cooccurrence: object, time_left: object) -> np.ndarray:
    """Expected exp attention ``P[l|m] exp(v_l^2/2)``, normalised, at the times ``(1 - time_left) t*`` of Theorem 2.

    ``v`` is the closed form for ``saliency`` (the ``Delta_l``); ``cooccurrence`` is ``P[l|m]`` (positive),
    ``time_left`` the 1-D array of times left before the blow-up, ``1 - t/t*``, in ``(0, 1]``. Shape
    ``(len(time_left), len(saliency))``: one attention distribution per time. With tied leaders the tie is split by
    co-occurrence, since their amplifications are equal.
    """
    d = _saliencies(saliency)
    p = as_finite_array("cooccurrence", cooccurrence, min_ndim=1)
    left = as_finite_array("time_left", time_left, min_ndim=1)
    if p.shape != d.shape or np.any(p <= 0):
        raise ValueError(f"cooccurrence must be positive with the shape {d.shape} of saliency, got {cooccurrence!r}")
    if left.ndim != 1 or np.any(left <= 0) or np.any(left > 1):
        raise ValueError(f"time_left must be a 1-D array in (0, 1], got {time_left!r}")
    v = linear_closed_form(d, (1.0 - left) * blowup_time(d))
    if not np.isfinite(v).all():  # 1 - time_left rounded to 1: the time is t* itself
        raise ValueError(f"time_left is too small for float64 (the time rounds to t*), got a smallest time_left of "
                         f"{left.min():g}")
    return softmax(np.log(p) + v * v / 2, axis=-1)
