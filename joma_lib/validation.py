"""Argument checks shared by every public function.

Each check raises :class:`ValueError` whose message names the parameter and the
allowed range, so that bad input never reaches numpy or torch internals.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real
from typing import TypeVar

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


def check_choice(name: str, value: T, choices: Iterable[T]) -> T:
    """Return ``value`` if it is one of ``choices``; raise with the list of allowed values otherwise."""
    options = list(choices)
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value
