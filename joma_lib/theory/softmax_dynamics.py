"""The toy of the paper's Figure 4: the modified-MLP dynamics of :mod:`joma_lib.theory.dynamics` run in discrete steps
with the *normalised* attention ``softmax(v**2 / tau_v)`` (``tau_v = 3``, the effective temperature on ``v**2``)
instead of ``exp(v**2 / 2)``.

:func:`simulate_softmax_attention` reproduces Figure 4 (the nonlinear update ``v <- v + eta (mu - v) o b`` with
the attention ``b``, first sparse, then dense) and its linear contrast (``v <- v + eta mu o b``); :func:`fig4_mu`
draws the paper's targets and :func:`saliency_profile` other target profiles for exploring it; :func:`row_entropy`
measures how sparse the attention is.

Every function here works on batches: the components of ``v`` live on the last axis, and
any leading axes index independent problems (e.g. a grid of parameter settings).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import softmax, xlogy

from joma_lib.base.validation import (
    as_finite_array,
    check_array_size,
    check_broadcast,
    check_choice,
    check_float,
    check_int,
    check_work,
)

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


#: The smallest temperature accepted by :func:`softmax_attention` and :func:`simulate_softmax_attention`: at
#: ``tau_v = 1e-3`` the attention is already one-hot to machine precision for logit gaps ``v^2`` above 0.04, and
#: smaller ones only push ``v^2 / tau_v`` towards float64 overflow (NaN attention).
MIN_TEMPERATURE = 1e-3
#: The largest step accepted by :func:`simulate_softmax_attention`: with ``eta <= 2`` each nonlinear update
#: ``v <- v + eta (mu - v) o b`` (attention ``0 <= b <= 1``) does not overshoot ``mu`` by more than it started from it.
MAX_ETA = 2.0


def softmax_attention(v: object, temperature: object = 3.0) -> np.ndarray:
    """Normalised attention ``softmax(v^2 / tau_v)`` over the last axis (Figure 4's attention).

    ``temperature`` (``tau_v``) is a scalar or an array broadcastable to ``v.shape[:-1]``, at least
    :data:`MIN_TEMPERATURE`.
    """
    v = as_finite_array("v", v, min_ndim=1)
    temp = _check_batch_param("temperature", temperature, v.shape[:-1], low=MIN_TEMPERATURE)
    return softmax(v * v / temp[..., None], axis=-1)


def row_entropy(b: object) -> np.ndarray | float:
    """Shannon entropy ``-sum_l b_l ln b_l`` (nats) of attention vectors ``b`` on the last axis.

    One value per row, ``0 ln 0 = 0`` exactly. (The authors' script adds 1e-8 inside or next to the
    logarithm; that changes the value by at most ~1e-7 here; the mean over a map's rows with that
    epsilon is :func:`joma_lib.lm.metrics.mean_attention_entropy`.) Rows need not be normalised
    exactly, but must be non-negative.
    """
    b = as_finite_array("b", b, min_ndim=1)
    if np.any(b < 0):
        raise ValueError("b must be non-negative (attention weights)")
    h = 0.0 - np.sum(xlogy(b, b), axis=-1)  # 0.0 - x turns -0.0 into +0.0 for one-hot rows
    return float(h) if h.ndim == 0 else h


def entropy_drop_and_rise(entropy: object) -> tuple[float, float]:
    """An entropy curve's drop from its start to its minimum, and its rise from the minimum to its end (nats):
    "sparse, then dense" is a large drop followed by a large rise."""
    h = as_finite_array("entropy", entropy, min_ndim=1)
    i = int(np.argmin(h))
    return float(h[0] - h[i]), float(h[-1] - h[i])


def _check_batch_param(name: str, value: object, batch_shape: tuple[int, ...], low: float = 0.0,
                       high: float = np.inf) -> np.ndarray:
    """A parameter in ``(0, high]`` and ``>= low``, given as a scalar or as an array broadcastable to
    ``batch_shape``."""
    arr = as_finite_array(name, value)
    if np.any(arr <= 0) or np.any(arr < low) or np.any(arr > high):
        allowed = f"[{low:g}, {high:g}]" if low > 0 else f"(0, {high:g}]"
        raise ValueError(f"{name} must be in {allowed.replace('inf]', 'inf)')}, got {value!r}")
    try:
        return np.broadcast_to(arr, batch_shape)
    except ValueError as exc:
        raise ValueError(f"{name} of shape {arr.shape} does not broadcast to the batch shape {batch_shape}") from exc


class SoftmaxRun(NamedTuple):
    """Recorded states of :func:`simulate_softmax_attention`.

    ``steps`` (S,): iteration numbers recorded (0 = initial state); ``v`` (S, ..., n);
    ``attention`` (S, ..., n) = softmax(v^2/tau_v); ``entropy`` (S, ...).
    """

    steps: np.ndarray
    v: np.ndarray
    attention: np.ndarray
    entropy: np.ndarray


def simulate_softmax_attention(mu: object, v0: object = 0.05, eta: object = 0.02, n_steps: int = 5000,
                               temperature: object = 3.0, nonlinear: bool = True,
                               record_every: int = 1) -> SoftmaxRun:
    """The discrete dynamics of the paper's Figure 4, batched.

    Each step computes the attention ``b = softmax(v^2 / tau_v)`` and then

    * ``nonlinear=True`` (Figure 4, Theorem 4's picture): ``v <- v + eta (mu - v) o b``;
    * ``nonlinear=False`` (linear contrast, Theorem 2's picture): ``v <- v + eta mu o b``,
      i.e. ``mu`` plays the saliency ``Delta`` and there is no ``-v`` term.

    Args:
        mu: targets (or saliencies), components on the last axis; leading axes are a batch.
        v0: initial value, scalar or broadcastable to ``mu`` (the paper: 0.05 for all).
        eta: step size in ``(0, MAX_ETA]``, scalar or array broadcastable to the batch shape ``mu.shape[:-1]``.
        n_steps: number of updates (the paper: 5000).
        temperature: ``tau_v`` in ``softmax(v^2/tau_v)`` (the paper: 3), at least ``MIN_TEMPERATURE``; scalar or
            batch-broadcastable.
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
    v = np.array(check_broadcast("v0", as_finite_array("v0", v0), mu.shape, "mu's shape"))
    eta = _check_batch_param("eta", eta, batch, high=MAX_ETA)[..., None]
    temp = _check_batch_param("temperature", temperature, batch, low=MIN_TEMPERATURE)
    inv_t = (1.0 / temp)[..., None]
    n_steps = check_int("n_steps", n_steps, 0, 10_000_000)
    record_every = check_int("record_every", record_every, 1)
    check_choice("nonlinear", nonlinear, (True, False))
    check_array_size("the recorded states (and their attention)", 2 * (n_steps // record_every + 2) * mu.size,
                     f"n_steps={n_steps}, record_every={record_every}, mu of shape {mu.shape}")
    check_work(n_steps * mu.size, f"n_steps={n_steps}, mu of shape {mu.shape}")
    steps = np.arange(0, n_steps + 1, record_every)
    if steps[-1] != n_steps:
        steps = np.append(steps, n_steps)
    record = np.empty((steps.size,) + mu.shape)
    record[0] = v
    slot = 1
    b = np.empty_like(v)
    shift = np.empty(batch + (1,))
    # softmax is shift-invariant; any shift with exp(z - shift) neither overflowing nor all
    # underflowing will do. In the nonlinear update with eta <= 1, v moves towards mu by a
    # convex step, so |v| <= max(|v0|, |mu|) and one constant shift (the largest possible
    # logit) per problem is safe when that logit is below 700; otherwise use the running max.
    with np.errstate(over="ignore"):  # a bound beyond float64 is inf: the running max is used then
        bound = np.max(np.maximum(v * v, mu * mu), axis=-1, keepdims=True) * inv_t
    constant_shift = nonlinear and bool(np.all(eta <= 1.0)) and bool(np.all(bound < 700.0))
    if constant_shift:
        shift[...] = bound
    v0_largest = float(np.max(np.abs(v), initial=0.0))
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, naming the arguments
        for step in range(1, n_steps + 1):
            np.multiply(v, v, out=b)
            b *= inv_t
            if not constant_shift:
                np.max(b, axis=-1, keepdims=True, out=shift)
            b -= shift
            np.exp(b, out=b)
            b /= b.sum(axis=-1, keepdims=True)
            b *= eta
            v += (mu - v) * b if nonlinear else mu * b
            if (step % 64 == 0 or step == n_steps) and not np.isfinite(v).all():
                raise ValueError(f"the dynamics diverged at step {step} of n_steps={n_steps} (v overflowed): reduce "
                                 f"eta (steps beyond 1 overshoot), |mu| or |v0|, or raise temperature; got eta up to "
                                 f"{float(np.max(eta)):g}, |mu| up to {float(np.max(np.abs(mu))):g}, |v0| up to "
                                 f"{v0_largest:g}, temperature down to {float(np.min(temp)):g}")
            if slot < steps.size and step == steps[slot]:
                record[slot] = v
                slot += 1
    attention = softmax_attention(record, temp)
    return SoftmaxRun(steps, record, attention, np.asarray(row_entropy(attention)))


MAX_SALIENCY = 1e6
"""The largest |target| :func:`saliency_profile` spreads (beyond it the spread overflows float64)."""


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
    low = check_float("low", low, -MAX_SALIENCY, MAX_SALIENCY)
    high = check_float("high", high, low, MAX_SALIENCY)
    if kind == "fig4":
        return low + (fig4_mu(seed, n) - 1.0) * (high - low) / 3.0
    if kind == "linear":
        return np.linspace(low, high, n)
    if low <= 0:
        raise ValueError(f"low must be > 0 for a geometric profile, got {low!r}")
    return np.geomspace(low, high, n)
