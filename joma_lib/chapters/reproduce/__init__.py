"""The reproduce chapter (`book/reproduce.md`): how to regenerate every figure and re-run the LM sweeps.

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.lm.presets import PRESETS

__all__ = [
    "PRESETS",
]
