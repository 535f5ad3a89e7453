"""Sphinx extension: theorem boxes carry the paper's numbers (Theorem 1 ... 5), not the chapter's.

Jupyter Book numbers everything per chapter (``numbered: true`` in ``_toc.yml``), so sphinx-proof would box
the paper's Theorem 1 as "Theorem 2.1" and Theorem 5 as "Theorem 6.1", and every ``{prf:ref}`` would say
the same. ``joma_paper_theorems`` in ``_config.yml`` maps each theorem's label to the paper's number; after
Sphinx has assigned the chapter numbers (``env-get-updated``), this extension replaces those of theorems,
so boxes and references read "Theorem 1". Figures, tables and equations keep the book's chapter numbers.

Pages outside the numbered parts (the appendix "Checks and audit", the "Reference" part) have no chapter
number, so Sphinx would caption their figures "Figure 1", which reads as the paper's Fig. 1. They get a letter
instead, in reading order, as appendices do: "Figure A.1" (:func:`letter_unnumbered_pages`).

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
UNNUMBERED_COUNTERS = ("figure", "table", "code-block")  # what an unnumbered page numbers by letter


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


def toc_order(includes: Mapping[str, list[str]], root: str) -> list[str]:
    """The documents of the table of contents under ``root`` (doc -> the docs its toctrees include), in reading
    order."""
    order: list[str] = []

    def visit(doc: str) -> None:
        if doc in order:
            return
        order.append(doc)
        for child in includes.get(doc, []):
            visit(child)

    visit(root)
    return order


def letter_unnumbered_pages(fignumbers: dict[str, dict[str, dict[str, tuple[Any, ...]]]],
                            secnumbers: Mapping[str, Mapping[str, tuple[int, ...]]], order: list[str]) -> list[str]:
    """Give, in place, the figures, tables and listings of every page without a chapter number (in ``secnumbers``:
    doc -> anchor -> number) a letter in reading order instead: "Figure A.1" on the first such page after the
    root (``order[0]``), "Figure B.1" on the next. The root's own are dropped (it is the opening page, not an
    appendix). Return the documents changed."""
    changed = []
    letters = iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for docname in order:
        if any(secnumbers.get(docname, {}).values()):
            continue
        letter = None if docname == order[0] else next(letters)
        counters = fignumbers.get(docname, {})
        for counter in UNNUMBERED_COUNTERS:
            numbers = counters.get(counter)
            if not numbers:
                continue
            if letter is None:
                del counters[counter]
            else:
                # Sphinx counts on across the unnumbered pages (the second one's first figure is "2"): restart at 1
                ranked = sorted(numbers, key=lambda label: numbers[label])
                counters[counter] = {label: (letter, k) for k, label in enumerate(ranked, start=1)}
            changed.append(docname)
    return sorted(set(changed))


def _renumber(app: Sphinx, env: BuildEnvironment) -> list[str]:
    changed, missing = paper_numbers(env.toc_fignumbers, app.config.joma_paper_theorems)
    order = toc_order(env.toctree_includes, app.config.root_doc)
    changed = sorted(set(changed) | set(letter_unnumbered_pages(env.toc_fignumbers, env.toc_secnumbers, order)))
    for label in missing:
        logger.warning(f"sphinx_paper_numbers: theorem {label!r} has no paper number in joma_paper_theorems "
                       f"(_config.yml); it keeps its chapter number")
    return changed


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point: renumber after Sphinx's own numbering (priority 500)."""
    app.add_config_value("joma_paper_theorems", {}, "env", [dict])
    app.connect("env-get-updated", _renumber, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
