"""The wikitext chapter (`book/wikitext.md`).

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.kit.sweeps import panel_summary, panel_title
from joma_lib.chapters.wikitext.explorer import wikitext_explorer
from joma_lib.lm.authors import OfficialDataError, official_runs

__all__ = [
    "OfficialDataError", "official_runs", "panel_summary", "panel_title", "wikitext_explorer",
]
