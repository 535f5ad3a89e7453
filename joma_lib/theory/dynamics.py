"""Modified-MLP dynamics of JoMA: Theorems 2 and 4 (continuous time).

Theorem 1 folds exp attention into the lower MLP layer: with zero initialisation the
logits are ``z = v**2 / 2`` (elementwise), so the attention weight of contextual token
``l`` is ``x_l exp(v_l**2 / 2)``. Under a stationary back-propagated gradient
(Assumption 1) the projected weight ``v`` then obeys one of two ODEs (the paper's Theorems 2 and 4):

* linear activation, one hidden node (Theorem 2)::

      dv/dt = Delta o exp(v**2 / 2)

  solved in closed form by ``sqrt(pi/2) erf(v_l(t) / sqrt 2) = Delta_l t``: the most
  salient component blows up at ``t* = sqrt(pi/2) / max|Delta|``, the others converge to
  ``sqrt 2 erfinv(Delta_l / |Delta_l*|)``;
* nonlinear activation, near a critical point ``mu`` created by the nonlinearity (Theorem 4)::

      dv/dt = (mu - v) o exp(v**2 / 2)

  where ``omega_j = ln(1/delta_j)``, ``delta_j = 1 - v_j/mu_j``, grows like ``exp(mu_j**2/2) t``,
  so salient components (large ``mu_j``) converge much faster.

Figure 4 of the paper runs a discrete version with the *normalised* attention ``softmax(v**2 / tau_v)``
(``tau_v = 3``, the effective temperature on ``v**2``) instead of ``exp(v**2/2)``: that toy is in
:mod:`joma_lib.theory.softmax_dynamics`.

Every function here works on batches: the components of ``v`` live on the last axis, and
any leading axes index independent problems (e.g. a grid of parameter settings).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.polynomial.chebyshev import chebint, chebval
from scipy.fft import dct
from scipy.special import erf, erfinv

from joma_lib.base.ode import integrate_components
from joma_lib.base.validation import as_finite_array, check_broadcast, check_float, check_int, check_times

SQRT_PI_OVER_2 = float(np.sqrt(np.pi / 2))
SQRT2 = float(np.sqrt(2.0))
MAX_RATE_V = float(np.sqrt(2.0 * np.log(np.finfo(np.float64).max)))
"""The largest ``|v|`` whose rate ``exp(v^2/2)`` fits float64 (about 37.68)."""


def _check_saliency(saliency: object) -> np.ndarray:
    saliency = as_finite_array("saliency", saliency, min_ndim=1)
    smallest = SQRT_PI_OVER_2 / np.finfo(np.float64).max  # below it, t* = sqrt(pi/2) / max|saliency| overflows
    if np.any(np.max(np.abs(saliency), axis=-1) < smallest):
        raise ValueError(f"saliency must have max|saliency| >= {smallest:.3g} per problem (a non-zero entry, large "
                         f"enough for the blow-up time to be a float64), got {saliency!r}")
    return saliency


# --------------------------------------------------------------------------- Theorem 2
def blowup_time(saliency: object) -> np.ndarray | float:
    """Blow-up time ``t* = sqrt(pi/2) / max_l |Delta_l|`` of ``dv/dt = Delta o exp(v^2/2)`` (Theorem 2).

    ``saliency`` has the components on its last axis; the result has the leading shape
    (a float for a single vector).
    """
    saliency = _check_saliency(saliency)
    t_star = SQRT_PI_OVER_2 / np.max(np.abs(saliency), axis=-1)
    return float(t_star) if t_star.ndim == 0 else t_star


def linear_closed_form(saliency: object, t: object) -> np.ndarray:
    """Closed-form solution of ``dv/dt = Delta o exp(v^2/2)``, ``v(0) = 0`` (Theorem 2).

    Separating variables, ``int_0^v exp(-s^2/2) ds = sqrt(pi/2) erf(v/sqrt 2) = Delta_l t``, so
    ``v_l(t) = sqrt(2) erfinv(Delta_l t / sqrt(pi/2))`` for ``t < t*``. The ratio
    ``erf(v_l/sqrt 2)/Delta_l = t/sqrt(pi/2)`` is the same for every ``l``.

    Args:
        saliency: saliencies ``Delta_l`` on the last axis (any leading batch shape).
        t: a time or an array of times (>= 0).

    Returns:
        Array of shape ``t.shape + saliency.shape``. For ``t >= t*`` the solution no longer
        exists; the value returned there is the limit state ``v(t*)``: ``+-inf`` for the most
        salient component(s) and :func:`linear_limits` for the others.
    """
    saliency = _check_saliency(saliency)
    t = as_finite_array("t", t)
    if np.any(t < 0):
        raise ValueError(f"t must be non-negative, got {t!r}")
    t_star = SQRT_PI_OVER_2 / np.max(np.abs(saliency), axis=-1, keepdims=True)
    # time is clipped at the blow-up time of each problem
    tt = np.minimum(t.reshape(t.shape + (1,) * saliency.ndim), t_star)
    return SQRT2 * erfinv(np.clip(saliency * tt / SQRT_PI_OVER_2, -1.0, 1.0))


def linear_limits(saliency: object) -> np.ndarray:
    """Values ``v_l(t*) = sqrt(2) erfinv(Delta_l / |Delta_l*|)`` reached at the blow-up time (Theorem 2).

    ``|Delta_l*| = max_l |Delta_l|`` is the saliency of the most salient component ``l*``, which
    itself gets ``sign(Delta_l*) inf``. (For ``Delta_l* > 0`` this is ``sqrt 2 erfinv(Delta_l/Delta_l*)``;
    with a negative leader the other components keep the sign of their own ``Delta_l``.)
    """
    saliency = _check_saliency(saliency)
    return SQRT2 * erfinv(np.clip(saliency / np.max(np.abs(saliency), axis=-1, keepdims=True), -1.0, 1.0))


def erf_ratio(v: object, saliency: object, scale: float = SQRT2) -> np.ndarray:
    """``erf(v / scale) / Delta``: constant across components along the flow iff ``scale = sqrt 2``.

    The talk slides print ``erf(v_l(t)/2)``; ``scale=2`` evaluates that variant so the page
    can show numerically that it is *not* conserved by ``dv/dt = Delta o exp(v^2/2)``.
    ``v`` may be infinite (past the blow-up, where ``erf = +-1``) but not NaN.
    """
    try:
        v = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"v must be an array of numbers, got {v!r}") from None
    if np.isnan(v).any():
        raise ValueError(f"v must contain no NaN (a NaN state has no erf ratio), got {v!r}")
    saliency = as_finite_array("saliency", saliency, min_ndim=1, nonzero=True)
    try:
        np.broadcast_shapes(v.shape, saliency.shape)
    except ValueError:
        raise ValueError(f"v must broadcast with saliency of shape {saliency.shape}, got shape {v.shape}") from None
    scale = check_float("scale", scale, 0, low_open=True)
    with np.errstate(over="ignore", divide="ignore"):
        ratio = erf(v / scale) / saliency
    if not np.isfinite(ratio).all():
        raise ValueError(f"saliency is too small for erf(v/scale)/saliency to be finite, got a smallest |saliency| of "
                         f"{float(np.min(np.abs(saliency))):g}")
    return ratio


def integrate_linear(saliency: object, t_eval: object, rtol: float = 1e-10, atol: float = 1e-12) -> np.ndarray:
    """Numerically integrate ``dv/dt = Delta o exp(v^2/2)`` from ``v(0) = 0`` (Theorem 2's ODE).

    The components decouple, so each one is integrated as its own scalar problem with its
    own step size (:func:`integrate_autonomous`); this is an independent check of
    :func:`linear_closed_form`. Result shape ``(len(t_eval),) + saliency.shape``; NaN at and
    after the blow-up time of the most salient component(s).
    """
    saliency = _check_saliency(saliency)
    t_eval = check_times("t_eval", t_eval)
    d = saliency.ravel()
    v = integrate_components(lambda v, i: d[i] * np.exp(0.5 * v * v), np.zeros_like(saliency), t_eval, rtol, atol)
    # past the blow-up of its most salient component a problem has no solution: blank all of it
    v[np.broadcast_to(np.isnan(v).any(axis=-1, keepdims=True), v.shape)] = np.nan
    return v


# --------------------------------------------------------------------------- Theorem 4
class NonlinearSolution(NamedTuple):
    """Solution of ``dv/dt = (mu - v) o exp(v^2/2)`` at the times ``t``.

    ``v`` and ``omega`` have shape ``(len(t),) + mu.shape``; ``omega = ln(1/|delta|)`` with
    ``delta = 1 - v/mu`` is Theorem 4's ConvergenceRate (it grows without bound as v -> mu).
    """

    t: np.ndarray
    v: np.ndarray
    omega: np.ndarray


def integrate_nonlinear(mu: object, t_eval: object, v0: object = 0.0,
                        rtol: float = 1e-10, atol: float = 1e-12) -> NonlinearSolution:
    """Integrate ``dv/dt = (mu - v) o exp(v^2/2)`` (the nonlinear modified MLP, Theorem 4) without underflow.

    With ``delta_j = 1 - v_j/mu_j`` the ODE reads ``d delta_j/dt = -delta_j exp(v_j^2/2)``,
    so ``omega_j = ln(1/|delta_j|)`` obeys the non-stiff scalar ODE

        d omega_j/dt = exp(mu_j^2 (1 - chi_j e^{-omega_j})^2 / 2),    v_j = mu_j (1 - chi_j e^{-omega_j}),

    with ``chi_j = sign(delta_j(0))``. Integrating ``omega`` keeps full relative accuracy even when
    ``delta`` is far below the float64 range (``omega`` in the millions), where integrating ``v``
    directly would just return ``v = mu``.

    Args:
        mu: targets, components on the last axis (any leading batch shape); non-zero, ``|mu| <= MAX_RATE_V``
            (about 37.68; beyond, the rate ``exp(mu^2/2)`` overflows float64). From ``|mu|`` about 9 the rise of
            ``omega`` near ``t ~ 1/|mu|`` is faster than float64 resolves ``t``; it takes about ``50 mu^2`` steps
            (seconds at ``|mu| = 30``).
        t_eval: output times (non-decreasing, >= 0). Late times are fine: ``omega`` grows like
            ``exp(mu^2/2) t``, finite up to ``t`` near ``1e300 exp(-mu^2/2)`` (``v`` is ``mu`` to the last bit
            long before); a ``t_eval`` that takes ``omega`` beyond float64 is refused with a ValueError.
        v0: initial value(s), broadcastable to ``mu``; ``v0 != mu`` componentwise, ``|v0| <= MAX_RATE_V``.
    """
    mu, t_eval, delta0 = _check_nonlinear_args(mu, t_eval, v0)
    mu_flat, chi = mu.ravel(), np.sign(delta0).ravel()
    # d omega/dt = exp(v^2/2) <= exp(max(mu^2, v0^2) / 2), finite: no blow-up, steps below t's resolution are allowed
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below, by name
        omega = integrate_components(lambda x, i: np.exp(0.5 * (mu_flat[i] * (1.0 - chi[i] * np.exp(-x))) ** 2),
                                     -np.log(np.abs(delta0)), t_eval, rtol, atol, can_blow_up=False)
    _refuse_overflow(omega, t_eval, mu)
    v = mu * (1.0 - np.sign(delta0) * np.exp(-omega))
    return NonlinearSolution(t_eval, v, omega)


def _check_nonlinear_args(mu: object, t_eval: object, v0: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``mu``, ``t_eval`` and ``delta0 = 1 - v0/mu`` of Theorem 4's ODE, checked."""
    mu = as_finite_array("mu", mu, min_ndim=1, nonzero=True)
    t_eval = check_times("t_eval", t_eval)
    v0 = check_broadcast("v0", as_finite_array("v0", v0), mu.shape, "mu's shape")
    for name, value in (("mu", mu), ("v0", v0)):  # the rate exp(v^2/2) lies between exp(v0^2/2) and exp(mu^2/2)
        if np.any(np.abs(value) > MAX_RATE_V):
            raise ValueError(f"{name} must lie in [-{MAX_RATE_V:.4g}, {MAX_RATE_V:.4g}] (beyond, the rate "
                             f"exp({name}^2/2) overflows float64), got |{name}| up to {float(np.max(np.abs(value))):g}")
    delta0 = 1.0 - v0 / mu
    if np.any(delta0 == 0):
        raise ValueError("v0 must differ from mu in every component (v0 == mu is already converged, omega = inf)")
    return mu, t_eval, delta0


def _refuse_overflow(omega: np.ndarray, t_eval: np.ndarray, mu: np.ndarray) -> None:
    """A ValueError naming ``t_eval`` and ``mu`` if ``omega`` (shape ``(len(t_eval),) + mu.shape``) left float64."""
    if not np.isfinite(omega).all():
        late = int(np.argmin(np.isfinite(omega).reshape(len(t_eval), -1).all(axis=1)))
        raise ValueError(f"omega = ln(1/|1 - v/mu|) leaves float64 by t = {t_eval[late]:g} (it grows at the rate "
                         f"exp(mu^2/2)): t_eval or |mu| must be smaller, got t_eval up to {t_eval[-1]:g} and |mu| up "
                         f"to {float(np.max(np.abs(mu))):g}")


def _chebyshev_antiderivative(values: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients ``[n + 1, n_cols]`` of ``x -> int_{-1}^x f`` from ``f`` at the ``n`` first-kind nodes."""
    coef = dct(values, type=2, axis=0) / values.shape[0]  # f = sum' a_j T_j (the DCT-II of the samples)
    coef[0] *= 0.5
    return chebint(coef, lbnd=-1, axis=0)


def nonlinear_by_quadrature(mu: object, t_eval: object, v0: object = 0.0, tol: float = 1e-9,
                            max_iter: int = 200) -> NonlinearSolution:
    """Theorem 4's ODE ``dv/dt = (mu - v) o exp(v^2/2)`` solved as "time = integral of the state", then inverted.

    The components separate, and for one component (target ``mu``, ``chi = sign(delta_0)``) ``omega = ln(1/|delta|)``
    obeys ``d omega/dt = f(omega) = exp(mu^2 (1 - chi e^{-omega})^2 / 2)`` (see :func:`integrate_nonlinear`), so the
    time to reach ``omega`` is ``t(omega) = int_{omega_0}^omega dx / f(x)``. With ``c0 = exp(-mu^2/2)`` (the limit of
    ``1/f``, a constant of the quadrature) and ``w = e^{-x}`` this is

        t(omega) = c0 (omega - omega_0) + Hq(W_0) - Hq(e^{-omega}),  Hq(W) = int_0^W c0 expm1(mu^2 w (chi - w/2))/w dw,

    ``W_0 = |delta_0|``: a linear part and a correction ``Hq`` (the quadrature's helper) whose integrand is smooth
    (analytic) on ``[0, W_0]``. ``Hq`` is expanded in a Chebyshev series on ``[0, W_0]`` (from its integrand at
    Chebyshev nodes; the degree grows with ``mu^2 W_0``), and ``t(omega) = t`` is solved by Newton's method
    (``t'(omega) = 1/f(omega)``), safeguarded by bisection inside the bracket
    ``omega_0 + t <= omega <= omega_0 + t max f``.
    :func:`integrate_nonlinear` (a step-size-controlled Runge-Kutta stepper) is the reference this is checked against.
    Same arguments, result and ValueErrors as it (also for an ``omega`` that leaves float64).
    """
    mu, t_eval, delta0 = _check_nonlinear_args(mu, t_eval, v0)
    check_float("tol", tol, 0, 1e-3, low_open=True)
    check_int("max_iter", max_iter, 1)
    mu2, chi, w0 = (mu ** 2).ravel(), np.sign(delta0).ravel(), np.abs(delta0).ravel()
    f_max = np.exp(0.5 * mu2 * np.maximum(1.0, (1.0 - chi * w0) ** 2))  # the largest rate: exp(max(mu^2, v0^2) / 2)
    omega0, c0 = -np.log(w0), np.exp(-0.5 * mu2)
    n = int(np.clip(12 + np.max(mu2 * w0 * (1.0 + 0.5 * w0), initial=0.0), 12, 400))  # degree: the exponent's range
    x = np.cos(np.pi * (np.arange(n) + 0.5) / n)[:, None]
    w = 0.5 * w0 * (x + 1.0)  # nodes in (0, W_0), never 0
    coef = _chebyshev_antiderivative(c0 * np.expm1(mu2 * w * (chi - 0.5 * w)) / w) * (0.5 * w0)
    hq_w0 = coef.sum(axis=0)  # T_j(1) = 1
    with np.errstate(over="ignore", invalid="ignore"):  # an omega beyond float64 is refused below, by name
        t = t_eval[:, None]
        # bracket: 1 <= f <= f_max along the path, so omega0 + t <= omega(t) <= omega0 + t f_max
        lo, hi = omega0 + t, omega0 + t * f_max
        # start: the early-time line or the late-time asymptote, whichever is the tighter bound when f is monotone
        early, late = omega0 + t * np.exp(0.5 * mu2 * (1.0 - chi * w0) ** 2), omega0 + (t - hq_w0) / c0
        omega = np.clip(np.where(chi > 0, np.maximum(early, late), np.minimum(early, late)), lo, hi)
        shape = omega.shape
        omega, t, lo, hi = (np.broadcast_to(a, shape).ravel().copy() for a in (omega, t, lo, hi))
        col = np.broadcast_to(np.arange(mu2.size), shape).ravel()  # the component of each entry
        active = np.arange(omega.size)
        for _ in range(max_iter):  # safeguarded Newton (bisection when a step leaves the bracket), unconverged entries
            omega_a, ca = omega[active], col[active]
            hq_omega = chebval(2.0 * np.exp(-omega_a) / w0[ca] - 1.0, coef[:, ca], tensor=False)  # Hq(e^{-omega})
            resid = c0[ca] * (omega_a - omega0[ca]) + hq_w0[ca] - hq_omega - t[active]
            above = resid > 0
            hi[active] = np.where(above, omega_a, hi[active])
            lo[active] = np.where(above, lo[active], omega_a)
            new = omega_a - resid * np.exp(0.5 * mu2[ca] * (1.0 - chi[ca] * np.exp(-omega_a)) ** 2)
            outside = (new < lo[active]) | (new > hi[active])
            new = np.where(outside, 0.5 * (lo[active] + hi[active]), new)
            omega[active] = new
            active = active[np.abs(new - omega_a) > tol * np.maximum(1.0, np.abs(omega_a))]
            if active.size == 0:
                break
        else:
            raise RuntimeError(f"nonlinear_by_quadrature: Newton did not converge in max_iter={max_iter} iterations")
    omega = omega.reshape((t_eval.size,) + mu.shape)
    _refuse_overflow(omega, t_eval, mu)
    return NonlinearSolution(t_eval, mu * (1.0 - np.sign(delta0) * np.exp(-omega)), omega)


def convergence_rate_ratio(mu: object, t_eval: object, j: int = 0, j_prime: int = 1,
                           v0: object = 0.0) -> tuple[np.ndarray, np.ndarray | float]:
    """Theorem 4: ``omega_j(t) / omega_j'(t)``, ``omega = ln(1/|delta|)``, and its limit ``exp((mu_j^2 - mu_j'^2)/2)``.

    ``j`` and ``j_prime`` index two components (``j'``). Since ``d omega_j/dt = exp(v_j^2/2) -> exp(mu_j^2/2)``, the
    ratio tends to the limit with an ``O(1/t)`` error. Returns ``(ratio, limit)`` with ``ratio`` of shape
    ``(len(t_eval),) + batch_shape`` (NaN where ``omega_j' = 0``, e.g. at ``t = 0`` from ``v0 = 0``).
    """
    mu = as_finite_array("mu", mu, min_ndim=1, nonzero=True)
    n = mu.shape[-1]
    j, j_prime = check_int("j", j, 0, n - 1), check_int("j_prime", j_prime, 0, n - 1)
    if j == j_prime:
        raise ValueError(f"j and j_prime must name two different components (the ratio of one with itself is 1), got "
                         f"j={j}, j_prime={j_prime}")
    sol = integrate_nonlinear(mu, t_eval, v0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(sol.omega[..., j_prime] != 0, sol.omega[..., j] / sol.omega[..., j_prime], np.nan)
    limit = np.exp(0.5 * (mu[..., j] ** 2 - mu[..., j_prime] ** 2))
    return ratio, float(limit) if np.ndim(limit) == 0 else limit
