"""The rerun chapter (`book/rerun.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.kit.sweeps import PAPER_SO_FAR, load_runs
from joma_lib.lm.config import RunConfig
from joma_lib.lm.presets import PRESETS
from joma_lib.lm.data import corpus_size
from joma_lib.chapters.rerun.paper import DIP_NATS, PAPER_CLAIMS, paper_runs_in, so_far_rows

__all__ = [
    "DIP_NATS", "PAPER_CLAIMS", "PAPER_SO_FAR", "load_runs", "paper_runs_in", "so_far_rows",
    "PRESETS", "RunConfig", "corpus_size",
]
