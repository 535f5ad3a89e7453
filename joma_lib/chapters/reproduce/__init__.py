"""The reproduce chapter (`book/reproduce.md`): how to regenerate every figure and re-run the LM sweeps.

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from joma_lib.base.stack_time import PLAN_SHARE, REMEMBER_SECONDS
from joma_lib.kit.sweeps import PAPER_SO_FAR, paper_runs_waiting
from joma_lib.lm.presets import PRESETS, paper_sweep_configs

__all__ = [
    "PLAN_SHARE", "PRESETS", "REMEMBER_SECONDS", "finished_paper_depths", "paper_sweep_configs",
]


class FinishedDepths(NamedTuple):
    """The depths of the paper sweep whose runs have all finished, the corpora of those runs, and the precisions
    that the finished runs record."""

    depths: tuple[int, ...]
    corpora: tuple[str, ...]
    precisions: tuple[str, ...]


def finished_paper_depths(finished: str | Path = PAPER_SO_FAR) -> FinishedDepths:
    """The depths of :func:`~joma_lib.lm.presets.paper_sweep_configs` with no run waiting
    (:func:`~joma_lib.kit.sweeps.paper_runs_waiting`), the corpora of their runs, and the precisions that the
    ``finished`` runs record (``precision_used``), read from the json written next to the collected ``.npz``
    (none when no depth has finished or the json is missing)."""
    finished = Path(finished)
    waiting = paper_runs_waiting(finished)
    depths = tuple(sorted({c.n_layers for c in paper_sweep_configs()} - set(waiting)))
    meta = finished.with_suffix(".json")
    if not depths or not meta.exists():
        return FinishedDepths(depths, (), ())
    record = json.loads(meta.read_text())
    corpora = tuple(sorted({str(c["data"]) for c in record["configs"] if int(c["n_layers"]) in depths}))
    precisions = tuple(sorted({str(t["precision_used"]) for t in record.get("trained", [])}))
    return FinishedDepths(depths, corpora, precisions)
