"""The rerun chapter (`book/rerun.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.lm.train import PRESETS, RunConfig

__all__ = [
    "PRESETS", "RunConfig",
]
