"""Sphinx extension: theorem boxes carry the paper's numbers (Theorem 1 ... 5), not the chapter's.

Jupyter Book numbers everything per chapter (``numbered: true`` in ``_toc.yml``), so sphinx-proof would box
the paper's Theorem 1 as "Theorem 2.1" and Theorem 5 as "Theorem 6.1", and every ``{prf:ref}`` would say
the same. ``joma_paper_theorems`` in ``_config.yml`` maps each theorem's label to the paper's number; after
Sphinx has assigned the chapter numbers (``env-get-updated``), this extension replaces those of theorems,
so boxes and references read "Theorem 1". Figures, tables and equations keep the book's chapter numbers.

Pages outside the numbered parts (the "Reference" part: reproduce, claims, performance) have no chapter
number, so Sphinx would caption their figures "Figure 1", which reads as the paper's Fig. 1. Their figures,
tables and listings get no number at all (:func:`unnumber_unnumbered_pages`).

A theorem whose label is not in the map is a build warning (an error in the strict build): every theorem
box of the book states one of the paper's theorems.

Enabled in ``_config.yml`` under ``sphinx: local_extensions:`` (``sphinx_paper_numbers: _ext``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sphinx.util import logging

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.environment import BuildEnvironment

logger = logging.getLogger(__name__)

COUNTER = "theorem"  # sphinx-proof's counter type of {prf:theorem}
UNNUMBERED_COUNTERS = ("figure", "table", "code-block")  # what an unnumbered page does not number


def paper_numbers(fignumbers: dict[str, dict[str, dict[str, tuple[int, ...]]]],
                  numbers: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """Replace, in place, the number of every theorem in ``fignumbers`` (doc -> counter -> label -> number)
    by its paper number from ``numbers``; return the documents changed and the labels missing from ``numbers``."""
    changed, missing = [], []
    for docname, counters in fignumbers.items():
        for label, number in counters.get(COUNTER, {}).items():
            if label not in numbers:
                missing.append(label)
                continue
            paper = (int(numbers[label]),)
            if number != paper:
                counters[COUNTER][label] = paper
                changed.append(docname)
    return sorted(set(changed)), sorted(missing)


def unnumber_unnumbered_pages(fignumbers: dict[str, dict[str, dict[str, tuple[int, ...]]]],
                              secnumbers: Mapping[str, Mapping[str, tuple[int, ...]]]) -> list[str]:
    """Drop, in place, the figure, table and listing numbers of every document without a section number in
    ``secnumbers`` (doc -> anchor -> number); return the documents changed."""
    changed = []
    for docname, counters in fignumbers.items():
        if any(secnumbers.get(docname, {}).values()):
            continue
        for counter in UNNUMBERED_COUNTERS:
            if counters.pop(counter, None):
                changed.append(docname)
    return sorted(set(changed))


def _renumber(app: Sphinx, env: BuildEnvironment) -> list[str]:
    changed, missing = paper_numbers(env.toc_fignumbers, app.config.joma_paper_theorems)
    changed = sorted(set(changed) | set(unnumber_unnumbered_pages(env.toc_fignumbers, env.toc_secnumbers)))
    for label in missing:
        logger.warning(f"sphinx_paper_numbers: theorem {label!r} has no paper number in joma_paper_theorems "
                       f"(_config.yml); it keeps its chapter number")
    return changed


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point: renumber after Sphinx's own numbering (priority 500)."""
    app.add_config_value("joma_paper_theorems", {}, "env", [dict])
    app.connect("env-get-updated", _renumber, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
