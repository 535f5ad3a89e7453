"""The theorem2 chapter (`book/theorem2.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.theorem2.figures import THEOREM2_SALIENCY
from joma_lib.chapters.theorem2.variants import (
    attention_near_blowup,
    erf_spread,
    euler_steps,
    integrate_linear_attention,
    integrate_temperature,
    temperature_blowup_time,
)
from joma_lib.theory.dynamics import blowup_time, integrate_linear, linear_closed_form, linear_limits

__all__ = [
    "THEOREM2_SALIENCY", "attention_near_blowup", "blowup_time", "erf_spread", "euler_steps", "integrate_linear",
    "integrate_linear_attention", "integrate_temperature", "linear_closed_form", "linear_limits",
    "temperature_blowup_time",
]
