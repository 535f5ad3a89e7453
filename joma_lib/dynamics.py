"""Modified-MLP dynamics of JoMA: Theorems 2 and 4 and the toy of Figure 4.

Theorem 1 folds exp attention into the lower MLP layer: with zero initialisation the
logits are ``z = v**2 / 2`` (elementwise), so the attention weight of contextual token
``l`` is ``x_l exp(v_l**2 / 2)``. Under a stationary back-propagated gradient
(Assumption 1) the projected weight ``v`` then obeys one of two ODEs (paper Sec. 4):

* linear activation, one hidden node (Theorem 2)::

      dv/dt = Delta o exp(v**2 / 2)

  solved in closed form by ``sqrt(pi/2) erf(v_l(t) / sqrt 2) = Delta_l t``: the most
  salient component blows up at ``t* = sqrt(pi/2) / max|Delta|``, the others converge to
  ``sqrt 2 erfinv(Delta_l / |Delta_l*|)``;
* nonlinear activation, near a critical point ``mu`` created by the nonlinearity (Theorem 4)::

      dv/dt = (mu - v) o exp(v**2 / 2)

  where ``u_j = ln(1/delta_j)``, ``delta_j = 1 - v_j/mu_j``, grows like ``exp(mu_j**2/2) t``,
  so salient components (large ``mu_j``) converge much faster.

Figure 4 of the paper runs a discrete version with the *normalised* attention
``softmax(v**2 / T)`` (``T = 3``) instead of ``exp(v**2/2)``:
:func:`simulate_softmax_attention` reproduces it and its linear contrast.

Every function here works on batches: the components of ``v`` live on the last axis, and
any leading axes index independent problems (e.g. a grid of parameter settings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.special import erf, erfinv, xlogy

from joma_lib.validation import check_choice, check_float, check_int

SQRT_PI_OVER_2 = float(np.sqrt(np.pi / 2))
SQRT2 = float(np.sqrt(2.0))


# --------------------------------------------------------------------------- input checks
def as_finite_array(name: str, value: object, min_ndim: int = 0, nonzero: bool = False) -> np.ndarray:
    """``value`` as a float64 array with at least ``min_ndim`` axes, all finite; ValueError otherwise.

    ``nonzero=True`` additionally demands that every entry is non-zero.
    """
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of finite numbers, got {value!r}") from exc
    if arr.ndim < min_ndim or (min_ndim > 0 and arr.shape[-1] == 0):
        raise ValueError(f"{name} must be an array with at least {min_ndim} axis/axes and a non-empty last axis, "
                         f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite numbers, got {value!r}")
    if nonzero and np.any(arr == 0):
        raise ValueError(f"{name} must have no zero entries, got {value!r}")
    return arr


def check_times(name: str, t: object) -> np.ndarray:
    """A 1-D, non-negative, non-decreasing array of times; ValueError otherwise."""
    t = as_finite_array(name, t)
    t = np.atleast_1d(t)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of times, got shape {t.shape}")
    if np.any(t < 0) or np.any(np.diff(t) < 0):
        raise ValueError(f"{name} must be non-negative and non-decreasing, got {t!r}")
    return t


def _check_delta(delta: object) -> np.ndarray:
    delta = as_finite_array("delta", delta, min_ndim=1)
    if np.any(np.max(np.abs(delta), axis=-1) == 0):
        raise ValueError("delta must have at least one non-zero saliency per problem (max|delta| > 0)")
    return delta


# --------------------------------------------------------------------------- Theorem 2
def blowup_time(delta: object) -> np.ndarray | float:
    """Blow-up time ``t* = sqrt(pi/2) / max_l |Delta_l|`` of ``dv/dt = Delta o exp(v^2/2)`` (Theorem 2).

    ``delta`` has the components on its last axis; the result has the leading shape
    (a float for a single vector).
    """
    delta = _check_delta(delta)
    t_star = SQRT_PI_OVER_2 / np.max(np.abs(delta), axis=-1)
    return float(t_star) if t_star.ndim == 0 else t_star


def linear_closed_form(delta: object, t: object) -> np.ndarray:
    """Closed-form solution of ``dv/dt = Delta o exp(v^2/2)``, ``v(0) = 0`` (Theorem 2).

    Separating variables, ``int_0^v exp(-s^2/2) ds = sqrt(pi/2) erf(v/sqrt 2) = Delta_l t``, so
    ``v_l(t) = sqrt(2) erfinv(Delta_l t / sqrt(pi/2))`` for ``t < t*``. The ratio
    ``erf(v_l/sqrt 2)/Delta_l = t/sqrt(pi/2)`` is the same for every ``l``.

    Args:
        delta: saliencies ``Delta_l`` on the last axis (any leading batch shape).
        t: a time or an array of times (>= 0).

    Returns:
        Array of shape ``t.shape + delta.shape``. For ``t >= t*`` the solution no longer
        exists; the value returned there is the limit state ``v(t*)``: ``+-inf`` for the most
        salient component(s) and :func:`linear_limits` for the others.
    """
    delta = _check_delta(delta)
    t = as_finite_array("t", t)
    if np.any(t < 0):
        raise ValueError(f"t must be non-negative, got {t!r}")
    t_star = SQRT_PI_OVER_2 / np.max(np.abs(delta), axis=-1, keepdims=True)
    # time is clipped at the blow-up time of each problem
    tt = np.minimum(t.reshape(t.shape + (1,) * delta.ndim), t_star)
    return SQRT2 * erfinv(np.clip(delta * tt / SQRT_PI_OVER_2, -1.0, 1.0))


def linear_limits(delta: object) -> np.ndarray:
    """Values ``v_l(t*) = sqrt(2) erfinv(Delta_l / |Delta_l*|)`` reached at the blow-up time (Theorem 2).

    ``|Delta_l*| = max_l |Delta_l|`` is the saliency of the most salient component ``l*``, which
    itself gets ``sign(Delta_l*) inf``. (For ``Delta_l* > 0`` this is ``sqrt 2 erfinv(Delta_l/Delta_l*)``;
    with a negative leader the other components keep the sign of their own ``Delta_l``.)
    """
    delta = _check_delta(delta)
    return SQRT2 * erfinv(np.clip(delta / np.max(np.abs(delta), axis=-1, keepdims=True), -1.0, 1.0))


def erf_ratio(v: object, delta: object, scale: float = SQRT2) -> np.ndarray:
    """``erf(v / scale) / Delta``: constant across components along the flow iff ``scale = sqrt 2``.

    The talk slides print ``erf(v_l(t)/2)``; ``scale=2`` evaluates that variant so the page
    can show numerically that it is *not* conserved by ``dv/dt = Delta o exp(v^2/2)``.
    """
    v = np.asarray(v, dtype=np.float64)
    delta = as_finite_array("delta", delta, min_ndim=1, nonzero=True)
    scale = check_float("scale", scale, 0, low_open=True)
    return erf(v / scale) / delta


# --------------------------------------------------------------------------- the ODE solver
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
                         rtol: float = 1e-10, atol: float = 1e-12, max_steps: int = 200_000) -> np.ndarray:
    """Integrate many independent autonomous ODEs ``dy_i/dt = rhs(y_i)`` from ``t = 0`` at once.

    A vectorised Dormand-Prince 5(4) method with **one adaptive step size per row**: every
    row of ``y0`` (shape ``rows x n``) is its own initial-value problem, the error of a row is
    the RMS of ``err / (atol + rtol |y|)`` over its ``n`` components, and steps are clipped so
    that each row lands exactly on every time of ``t_eval``. ``rhs(y, rows)`` gets a ``k x n``
    block of states and the indices ``rows`` (length ``k``) of the problems they belong to
    (so per-problem parameters can be looked up) and returns their derivatives.

    Returns ``y`` of shape ``(len(t_eval), rows, n)``. A row whose step size collapses (a
    finite-time blow-up, as in Theorem 2 at ``t >= t*``) gets NaN from then on.
    """
    t_eval = check_times("t_eval", t_eval)
    rtol = check_float("rtol", rtol, 0, low_open=True)
    atol = check_float("atol", atol, 0, low_open=True)
    max_steps = check_int("max_steps", max_steps, 1)
    y = np.array(y0, dtype=np.float64)
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
    d1 = np.sqrt(np.mean((rhs(y, np.arange(rows)) / scale) ** 2, axis=1))
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
        # a collapsed step size means the solution left every bounded set (blow-up): stop that row
        dead = act[h[act] < 1e-13 * np.maximum(t[act], 1.0)]
        nxt[dead] = t_eval.size
    raise RuntimeError(f"integrate_autonomous: not finished after max_steps={max_steps} steps")


def _integrate_components(rate: Callable[[np.ndarray, np.ndarray], np.ndarray], y0: np.ndarray,
                          t_eval: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Integrate decoupled scalar ODEs, one per entry of ``y0``, each with its own step size.

    ``rate(y, flat_index)`` returns ``dy/dt`` for the entries ``flat_index`` of ``y0.ravel()``.
    Result shape ``(len(t_eval),) + y0.shape``.
    """
    flat = integrate_autonomous(lambda y, rows: rate(y[:, 0], rows)[:, None], y0.reshape(-1, 1), t_eval,
                                rtol=rtol, atol=atol)
    return flat.reshape((t_eval.size,) + y0.shape)


def integrate_linear(delta: object, t_eval: object, rtol: float = 1e-10, atol: float = 1e-12) -> np.ndarray:
    """Numerically integrate ``dv/dt = Delta o exp(v^2/2)`` from ``v(0) = 0`` (Theorem 2's ODE).

    The components decouple, so each one is integrated as its own scalar problem with its
    own step size (:func:`integrate_autonomous`); this is an independent check of
    :func:`linear_closed_form`. Result shape ``(len(t_eval),) + delta.shape``; NaN at and
    after the blow-up time of the most salient component(s).
    """
    delta = _check_delta(delta)
    t_eval = check_times("t_eval", t_eval)
    d = delta.ravel()
    v = _integrate_components(lambda v, i: d[i] * np.exp(0.5 * v * v), np.zeros_like(delta), t_eval, rtol, atol)
    # past the blow-up of its most salient component a problem has no solution: blank all of it
    v[np.broadcast_to(np.isnan(v).any(axis=-1, keepdims=True), v.shape)] = np.nan
    return v


# --------------------------------------------------------------------------- Theorem 4
class NonlinearSolution(NamedTuple):
    """Solution of ``dv/dt = (mu - v) o exp(v^2/2)`` at the times ``t``.

    ``v`` and ``u`` have shape ``(len(t),) + mu.shape``; ``u = ln(1/|delta|)`` with
    ``delta = 1 - v/mu`` is Theorem 4's ConvergenceRate (it grows without bound as v -> mu).
    """

    t: np.ndarray
    v: np.ndarray
    u: np.ndarray


def integrate_nonlinear(mu: object, t_eval: object, v0: object = 0.0,
                        rtol: float = 1e-10, atol: float = 1e-12) -> NonlinearSolution:
    """Integrate ``dv/dt = (mu - v) o exp(v^2/2)`` (the nonlinear modified MLP, Theorem 4) without underflow.

    With ``delta_j = 1 - v_j/mu_j`` the ODE reads ``d delta_j/dt = -delta_j exp(v_j^2/2)``,
    so ``u_j = ln(1/|delta_j|)`` obeys the non-stiff scalar ODE

        du_j/dt = exp(mu_j^2 (1 - s_j e^{-u_j})^2 / 2),    v_j = mu_j (1 - s_j e^{-u_j}),

    with ``s_j = sign(delta_j(0))``. Integrating ``u`` keeps full relative accuracy even when
    ``delta`` is far below the float64 range (``u`` in the millions), where integrating ``v``
    directly would just return ``v = mu``.

    Args:
        mu: targets, components on the last axis (any leading batch shape); non-zero.
        t_eval: output times (non-decreasing, >= 0).
        v0: initial value(s), broadcastable to ``mu``; ``v0 != mu`` componentwise.
    """
    mu = as_finite_array("mu", mu, min_ndim=1, nonzero=True)
    t_eval = check_times("t_eval", t_eval)
    v0 = np.broadcast_to(as_finite_array("v0", v0), mu.shape)
    delta0 = 1.0 - v0 / mu
    if np.any(delta0 == 0):
        raise ValueError("v0 must differ from mu in every component (v0 == mu is already converged, u = inf)")
    m, s = mu.ravel(), np.sign(delta0).ravel()
    u = _integrate_components(lambda uu, i: np.exp(0.5 * (m[i] * (1.0 - s[i] * np.exp(-uu))) ** 2),
                              -np.log(np.abs(delta0)), t_eval, rtol, atol)
    v = mu * (1.0 - np.sign(delta0) * np.exp(-u))
    return NonlinearSolution(t_eval, v, u)


def convergence_rate_ratio(mu: object, t_eval: object, j: int = 0, k: int = 1,
                           v0: object = 0.0) -> tuple[np.ndarray, np.ndarray | float]:
    """Theorem 4: ``ln(1/delta_j(t)) / ln(1/delta_k(t))`` and its limit ``exp((mu_j^2 - mu_k^2)/2)``.

    Since ``d/dt ln(1/delta_j) = exp(v_j^2/2) -> exp(mu_j^2/2)``, the ratio tends to the limit
    with an ``O(1/t)`` error. Returns ``(ratio, limit)`` with ``ratio`` of shape
    ``(len(t_eval),) + batch_shape`` (NaN where ``u_k = 0``, e.g. at ``t = 0`` from ``v0 = 0``).
    """
    mu = as_finite_array("mu", mu, min_ndim=1, nonzero=True)
    n = mu.shape[-1]
    j, k = check_int("j", j, 0, n - 1), check_int("k", k, 0, n - 1)
    sol = integrate_nonlinear(mu, t_eval, v0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(sol.u[..., k] != 0, sol.u[..., j] / sol.u[..., k], np.nan)
    limit = np.exp(0.5 * (mu[..., j] ** 2 - mu[..., k] ** 2))
    return ratio, float(limit) if np.ndim(limit) == 0 else limit


# --------------------------------------------------------------------------- Figure 4
FIG4_N_TOKENS = 10


def fig4_mu(seed: int = 0, n: int = FIG4_N_TOKENS) -> np.ndarray:
    """The targets of the paper's Figure 4: ``sort(torch.rand(n) * 3 + 1)`` after ``torch.manual_seed(seed)``.

    Drawn with a private torch generator seeded like ``torch.manual_seed`` (same stream on
    the CPU, global RNG untouched), in float32 as the authors did, returned as float64.
    For ``seed=0``: (1.265, 1.396, 1.922, 2.367, 2.470, 2.489, 2.897, 2.902, 3.305, 3.689).
    """
    import torch

    seed = check_int("seed", seed, 0)
    n = check_int("n", n, 1)
    gen = torch.Generator().manual_seed(seed)
    return np.sort((torch.rand(n, generator=gen) * 3 + 1).numpy().astype(np.float64))


def softmax_attention(v: object, temperature: object = 3.0) -> np.ndarray:
    """Normalised attention ``softmax(v^2 / T)`` over the last axis (Figure 4's attention).

    ``temperature`` is a positive scalar or an array broadcastable to ``v.shape[:-1]``.
    """
    v = as_finite_array("v", v, min_ndim=1)
    temp = _check_batch_param("temperature", temperature, v.shape[:-1])
    z = v * v / temp[..., None]
    z -= z.max(axis=-1, keepdims=True)
    a = np.exp(z)
    return a / a.sum(axis=-1, keepdims=True)


def attention_entropy(a: object) -> np.ndarray | float:
    """Shannon entropy ``-sum_l a_l ln a_l`` (nats) of attention vectors on the last axis.

    ``0 ln 0 = 0``. (The authors' script adds 1e-8 inside or next to the logarithm; that
    changes the value by at most ~1e-7 here.) Rows need not be normalised exactly, but must
    be non-negative.
    """
    a = as_finite_array("a", a, min_ndim=1)
    if np.any(a < 0):
        raise ValueError("a must be non-negative (attention weights)")
    h = 0.0 - np.sum(xlogy(a, a), axis=-1)  # 0.0 - x turns -0.0 into +0.0 for one-hot rows
    return float(h) if h.ndim == 0 else h


def _check_batch_param(name: str, value: object, batch_shape: tuple[int, ...]) -> np.ndarray:
    """A positive parameter given as a scalar or as an array broadcastable to ``batch_shape``."""
    arr = as_finite_array(name, value)
    if np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0, got {value!r}")
    try:
        return np.broadcast_to(arr, batch_shape)
    except ValueError as exc:
        raise ValueError(f"{name} of shape {arr.shape} does not broadcast to the batch shape {batch_shape}") from exc


class SoftmaxRun(NamedTuple):
    """Recorded states of :func:`simulate_softmax_attention`.

    ``steps`` (S,): iteration numbers recorded (0 = initial state); ``v`` (S, ..., n);
    ``attention`` (S, ..., n) = softmax(v^2/T); ``entropy`` (S, ...).
    """

    steps: np.ndarray
    v: np.ndarray
    attention: np.ndarray
    entropy: np.ndarray


def simulate_softmax_attention(mu: object, v0: object = 0.05, eta: object = 0.02, n_steps: int = 5000,
                               temperature: object = 3.0, nonlinear: bool = True,
                               record_every: int = 1) -> SoftmaxRun:
    """The discrete dynamics of the paper's Figure 4, batched.

    Each step computes ``a = softmax(v^2 / T)`` and then

    * ``nonlinear=True`` (Figure 4, Theorem 4's picture): ``v <- v + eta (mu - v) o a``;
    * ``nonlinear=False`` (linear contrast, Theorem 2's picture): ``v <- v + eta mu o a``,
      i.e. ``mu`` plays the saliency ``Delta`` and there is no ``-v`` term.

    Args:
        mu: targets (or saliencies), components on the last axis; leading axes are a batch.
        v0: initial value, scalar or broadcastable to ``mu`` (the paper: 0.05 for all).
        eta: step size, positive scalar or array broadcastable to the batch shape ``mu.shape[:-1]``.
        n_steps: number of updates (the paper: 5000).
        temperature: ``T`` in ``softmax(v^2/T)`` (the paper: 3); scalar or batch-broadcastable.
        nonlinear: which update (see above).
        record_every: keep every ``record_every``-th state (and always the last one), which
            bounds memory for large batches.

    Returns:
        :class:`SoftmaxRun` with the recorded steps, states, attention and entropy.
        With ``mu = fig4_mu()`` and the defaults, the entropy starts at ``ln 10``, falls to a
        minimum of about 0.942 at step 669 and rises again to about 1.549 at step 5000.
    """
    mu = as_finite_array("mu", mu, min_ndim=1)
    batch = mu.shape[:-1]
    v = np.array(np.broadcast_to(as_finite_array("v0", v0), mu.shape))
    eta = _check_batch_param("eta", eta, batch)[..., None]
    temp = _check_batch_param("temperature", temperature, batch)
    inv_t = (1.0 / temp)[..., None]
    n_steps = check_int("n_steps", n_steps, 0, 10_000_000)
    record_every = check_int("record_every", record_every, 1)
    check_choice("nonlinear", nonlinear, (True, False))
    steps = np.arange(0, n_steps + 1, record_every)
    if steps[-1] != n_steps:
        steps = np.append(steps, n_steps)
    record = np.empty((steps.size,) + mu.shape)
    record[0] = v
    slot = 1
    a = np.empty_like(v)
    shift = np.empty(batch + (1,))
    # softmax is shift-invariant; any shift with exp(z - shift) neither overflowing nor all
    # underflowing will do. In the nonlinear update with eta <= 1, v moves towards mu by a
    # convex step, so |v| <= max(|v0|, |mu|) and one constant shift (the largest possible
    # logit) per problem is safe when that logit is below 700; otherwise use the running max.
    bound = np.max(np.maximum(v * v, mu * mu), axis=-1, keepdims=True) * inv_t
    constant_shift = nonlinear and bool(np.all(eta <= 1.0)) and bool(np.all(bound < 700.0))
    if constant_shift:
        shift[...] = bound
    for step in range(1, n_steps + 1):
        np.multiply(v, v, out=a)
        a *= inv_t
        if not constant_shift:
            np.max(a, axis=-1, keepdims=True, out=shift)
        a -= shift
        np.exp(a, out=a)
        a /= a.sum(axis=-1, keepdims=True)
        a *= eta
        v += (mu - v) * a if nonlinear else mu * a
        if slot < steps.size and step == steps[slot]:
            record[slot] = v
            slot += 1
    attention = softmax_attention(record, temp)
    return SoftmaxRun(steps, record, attention, np.asarray(attention_entropy(attention)))


def saliency_profile(kind: str = "fig4", n: int = FIG4_N_TOKENS, low: float = 1.0, high: float = 4.0,
                     seed: int = 0) -> np.ndarray:
    """A sorted vector of ``n`` targets/saliencies in ``[low, high]``, for exploring the dynamics.

    * ``"fig4"``: ``sort(U[low, high])`` drawn like the paper (``torch.manual_seed(seed)``);
      with the defaults this is exactly :func:`fig4_mu`;
    * ``"linear"``: evenly spaced from ``low`` to ``high``;
    * ``"geometric"``: geometrically spaced from ``low`` to ``high`` (``low > 0``).
    """
    check_choice("kind", kind, ("fig4", "linear", "geometric"))
    n = check_int("n", n, 1, 1000)
    low = check_float("low", low)
    high = check_float("high", high, low)
    if kind == "fig4":
        return low + (fig4_mu(seed, n) - 1.0) * (high - low) / 3.0
    if kind == "linear":
        return np.linspace(low, high, n)
    if low <= 0:
        raise ValueError(f"low must be > 0 for a geometric profile, got {low!r}")
    return np.geomspace(low, high, n)
