"""Argument checks shared by every public function.

Each check raises :class:`ValueError` whose message names the parameter and the
allowed range, so that bad input never reaches numpy or torch internals.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    left = "(" if low_open or low is None else "["
    right = ")" if high_open or high is None else "]"
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    return f"{left}{lo}, {hi}{right}"


def check_int(name: str, value: object, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer in ``[low, high]``; raise otherwise."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer in {_interval(low, high, False, False)}, got {value!r}")
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        raise ValueError(f"{name} must be an integer in {_interval(low, high, False, False)}, got {value!r}")
    return number


def check_float(
    name: str,
    value: object,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a float if it is a finite real in the given interval; raise otherwise.

    ``low_open``/``high_open`` make the corresponding end of the interval exclusive,
    e.g. ``check_float("T", T, 0, low_open=True)`` demands ``T > 0``.
    """
    allowed = _interval(low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number in {allowed}, got {value!r}")
    x = float(value)
    too_low = low is not None and (x <= low if low_open else x < low)
    too_high = high is not None and (x >= high if high_open else x > high)
    if too_low or too_high:
        raise ValueError(f"{name} must be in {allowed}, got {value!r}")
    return x


MAX_ARRAY_VALUES = 2 * 10**8
"""The most values one array a public function allocates may hold (1.5 GiB of float64): more is refused up front,
naming the arguments, instead of a MemoryError (or swapping) deep inside numpy or torch."""


def check_array_size(what: str, n_values: int, got: str) -> None:
    """Refuse ``what`` (e.g. "the recorded states") of ``n_values`` values above :data:`MAX_ARRAY_VALUES`, with a
    ValueError saying which arguments asked for it (``got``, e.g. ``"n_steps=10000000, mu of shape (1000, 1000)"``)."""
    if n_values > MAX_ARRAY_VALUES:
        raise ValueError(f"{what} would hold {n_values:.3g} values ({8 * n_values / 2**30:.3g} GiB of float64), more "
                         f"than the {MAX_ARRAY_VALUES:.0e} allowed: reduce them, got {got}")


MAX_WORK = 10**11
"""The most elementary updates (steps x values) an iterative public function runs: about an hour of numpy; more
would not finish in a session, and is refused up front."""


def check_work(n_updates: int, got: str) -> None:
    """Refuse a computation of more than :data:`MAX_WORK` elementary updates, naming the arguments (``got``)."""
    if n_updates > MAX_WORK:
        raise ValueError(f"the computation would take {n_updates:.3g} updates (steps x values), more than the "
                         f"{MAX_WORK:.0e} that finish in about an hour: reduce them, got {got}")


def check_choice(name: str, value: T, choices: Iterable[T]) -> T:
    """Return ``value`` if it is one of ``choices``; raise with the list of allowed values otherwise."""
    options = list(choices)
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def as_finite_array(name: str, value: object, min_ndim: int = 0, nonzero: bool = False) -> np.ndarray:
    """``value`` as a float64 array with at least ``min_ndim`` axes, all finite; ValueError otherwise.

    ``nonzero=True`` additionally demands that every entry is non-zero.
    """
    try:
        if isinstance(value, (str, bytes)) or np.asarray(value).dtype.kind in "USO" and not _numbers(value):
            raise TypeError("text is not a number")  # numpy would read "3" as 3.0
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


def _numbers(value: object) -> bool:
    """Whether an object array (a list of mixed items) holds numbers only (no text)."""
    return all(not isinstance(v, (str, bytes)) for v in np.asarray(value, dtype=object).ravel())


def check_broadcast(name: str, value: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    """``value`` broadcast to ``shape`` (``what`` says whose shape it is); ValueError naming ``name`` otherwise."""
    try:
        if np.broadcast_shapes(value.shape, shape) == shape:
            return np.broadcast_to(value, shape)
    except ValueError:
        pass
    raise ValueError(f"{name} must broadcast to {what} {shape}, got shape {value.shape}")


def check_fractions(name: str, value: object, n: int) -> tuple[float, ...]:
    """``n`` fractions in ``[0, 1]`` whose sum is at most 1 (e.g. train/valid shares of a split)."""
    if not isinstance(value, (tuple, list)) or len(value) != n:
        raise ValueError(f"{name} must be a tuple of {n} fractions in [0, 1] with sum <= 1, got {value!r}")
    fractions = tuple(check_float(f"{name}[{i}]", f, 0.0, 1.0) for i, f in enumerate(value))
    if sum(fractions) > 1.0:
        raise ValueError(f"{name} must sum to at most 1 (the rest is the last part), got {value!r}")
    return fractions


def check_times(name: str, t: object) -> np.ndarray:
    """A 1-D, non-negative, non-decreasing array of times; ValueError otherwise."""
    t = as_finite_array(name, t)
    t = np.atleast_1d(t)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of times, got shape {t.shape}")
    if np.any(t < 0) or np.any(np.diff(t) < 0):
        raise ValueError(f"{name} must be non-negative and non-decreasing, got {t!r}")
    return t
