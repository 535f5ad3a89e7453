"""A general ODE solver: vectorised Dormand-Prince 5(4) with one adaptive step size per problem.

Used by the modified-MLP dynamics of Theorems 2 and 4 (:mod:`joma_lib.theory.dynamics`), the ReLU flows on the sphere
of Theorem 3 (:mod:`joma_lib.theory.nonlinear`) and, through them, the hierarchy of Sec. 5
(:mod:`joma_lib.theory.latent_tree`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from joma_lib.base.validation import as_finite_array, check_float, check_int, check_times

# Dormand-Prince 5(4) tableau.
_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0])
_A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
_B5 = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0])
_B4 = np.array([5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40])
_E = _B5 - _B4


def integrate_autonomous(rhs: Callable[[np.ndarray, np.ndarray], np.ndarray], y0: object, t_eval: object,
                         rtol: float = 1e-10, atol: float = 1e-12, max_steps: int = 200_000,
                         can_blow_up: bool = True) -> np.ndarray:
    """Integrate many independent autonomous ODEs ``dy_i/dt = rhs(y_i)`` from ``t = 0`` at once.

    A vectorised Dormand-Prince 5(4) method with **one adaptive step size per row**: every
    row of ``y0`` (shape ``rows x n``) is its own initial-value problem, the error of a row is
    the RMS of ``err / (atol + rtol |y|)`` over its ``n`` components, and steps are clipped so
    that each row lands exactly on every time of ``t_eval``. ``rhs(y, rows)`` gets a ``k x n``
    block of states and the indices ``rows`` (length ``k``) of the problems they belong to
    (so per-problem parameters can be looked up) and returns their derivatives.

    Returns ``y`` of shape ``(len(t_eval), rows, n)``. A row whose step size collapses (a
    finite-time blow-up, as in Theorem 2 at ``t >= t*``) gets NaN from then on: with ``can_blow_up=True``
    (the default) once its step falls below ``1e-13 max(t, 1)``. A caller whose ``rhs`` is bounded along every
    path (no blow-up possible) passes ``can_blow_up=False``: a row may then cross a stretch faster than the
    float64 resolution of ``t`` (steps that leave ``t`` unchanged, as Theorem 4's ``omega`` needs near
    ``t ~ 1/|mu|`` for ``|mu|`` above about 8), and only a step size that underflows float64 (an ``rhs`` that
    overflows) or a step that changes neither ``t`` nor ``y`` (``y`` about to overflow) stops it.
    """
    t_eval = check_times("t_eval", t_eval)
    rtol = check_float("rtol", rtol, 0, low_open=True)
    atol = check_float("atol", atol, 0, low_open=True)
    max_steps = check_int("max_steps", max_steps, 1)
    if not isinstance(can_blow_up, bool):
        raise ValueError(f"can_blow_up must be True or False, got {can_blow_up!r}")
    y = as_finite_array("y0", y0)
    if y.ndim != 2:
        raise ValueError(f"y0 must be a 2-D array rows x n, got shape {y.shape}")
    rows = y.shape[0]
    out = np.full((t_eval.size,) + y.shape, np.nan)
    t = np.zeros(rows)
    n_start = int(np.searchsorted(t_eval, 0.0, side="right"))  # outputs requested at t = 0
    nxt = np.full(rows, n_start)
    out[:n_start] = y
    # initial step: 1% of the time scale |y| / |dy/dt| (Hairer, Norsett & Wanner, II.4)
    scale = atol + rtol * np.abs(y)
    d0 = np.sqrt(np.mean((y / scale) ** 2, axis=1))
    dy0 = np.asarray(rhs(y, np.arange(rows)))
    if dy0.shape != y.shape:
        raise ValueError(f"rhs must return one derivative per entry of y0, shape {y.shape}, got shape {dy0.shape}")
    if not np.all(np.isfinite(dy0)):
        bad = np.flatnonzero(~np.all(np.isfinite(dy0), axis=1))
        raise ValueError(f"rhs must be finite at y0, got a NaN or inf derivative at t = 0 in rows {bad[:5].tolist()}"
                         f"{' ...' if bad.size > 5 else ''} of y0")
    d1 = np.sqrt(np.mean((dy0 / scale) ** 2, axis=1))
    h = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.maximum(d1, 1e-300))
    for _ in range(max_steps):
        act = np.flatnonzero(nxt < t_eval.size)
        if act.size == 0:
            return out
        ya, ta, ha = y[act], t[act], h[act]
        gap = t_eval[nxt[act]] - ta
        clipped = ha >= gap
        hs = np.where(clipped, gap, ha)[:, None]
        k = [rhs(ya, act)]
        with np.errstate(invalid="ignore", over="ignore"):
            for stage in range(1, 7):
                k.append(rhs(ya + hs * sum(a * kk for a, kk in zip(_A[stage], k) if a != 0.0), act))
            y_new = ya + hs * sum(b * kk for b, kk in zip(_B5, k) if b != 0.0)
            sc = atol + rtol * np.maximum(np.abs(ya), np.abs(y_new))
            err = np.sqrt(np.mean((hs * sum(e * kk for e, kk in zip(_E, k) if e != 0.0) / sc) ** 2, axis=1))
        err = np.where(np.isfinite(err) & np.all(np.isfinite(y_new), axis=1), err, np.inf)
        ok = err <= 1.0
        factor = np.clip(0.9 * np.maximum(err, 1e-10) ** -0.2, 0.2, 10.0)
        h_new = hs[:, 0] * np.where(ok, factor, np.minimum(factor, 0.5))
        # a step shortened to hit an output time says nothing against the longer step
        h[act] = np.where(ok & clipped, np.maximum(h_new, ha), h_new)
        acc = act[ok]
        y[acc] = y_new[ok]
        t[acc] = np.where(clipped[ok], t_eval[nxt[acc]], ta[ok] + hs[ok, 0])
        landed = acc[clipped[ok]]
        while landed.size:  # record, also for repeated output times
            out[nxt[landed], landed] = y[landed]
            nxt[landed] += 1
            landed = landed[nxt[landed] < t_eval.size]
            landed = landed[t_eval[nxt[landed]] <= t[landed]]
        # a collapsed step size means the solution left every bounded set (blow-up): stop that row. With a bounded
        # rhs only a step size that underflows, or an accepted step that moves neither t nor y (y at the end of
        # float64's range), stops it
        if can_blow_up:
            dead = act[h[act] < 1e-13 * np.maximum(t[act], 1.0)]
        else:
            stalled = ok & (t[act] == ta) & np.all(y[act] == ya, axis=1)
            dead = act[(h[act] < np.finfo(np.float64).tiny) | stalled]
        nxt[dead] = t_eval.size
    raise RuntimeError(f"integrate_autonomous: not finished after max_steps={max_steps} steps")


def integrate_components(rate: Callable[[np.ndarray, np.ndarray], np.ndarray], y0: np.ndarray,
                          t_eval: np.ndarray, rtol: float, atol: float, can_blow_up: bool = True) -> np.ndarray:
    """Integrate decoupled scalar ODEs, one per entry of ``y0``, each with its own step size.

    ``rate(y, flat_index)`` returns ``dy/dt`` for the entries ``flat_index`` of ``y0.ravel()``.
    Result shape ``(len(t_eval),) + y0.shape``; ``can_blow_up`` as in :func:`integrate_autonomous`.
    """
    flat = integrate_autonomous(lambda y, rows: rate(y[:, 0], rows)[:, None], y0.reshape(-1, 1), t_eval,
                                rtol=rtol, atol=atol, can_blow_up=can_blow_up)
    return flat.reshape((t_eval.size,) + y0.shape)
