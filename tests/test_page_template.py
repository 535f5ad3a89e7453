"""Every theorem chapter follows the page template of CONTRIBUTING.md ("Page template").

Overview -> Statement -> Why it holds -> The core update -> Check -> Where it breaks -> Explore -> Summary,
with the mechanism in a few visible lines, exercises with hidden solutions, asserts out of sight (but
executed) and no timings. And every page imports from the kit and its own chapter package only, public names only.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import book_layout
import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
THEOREM_CHAPTERS = ["theorem1", "theorem2", "theorem3", "theorem4", "hierarchy"]
PAGES = sorted(path.stem for path in (ROOT / "book").glob("*.md"))
SECTIONS = ["Overview", "Statement", "Why it holds", "The core update", "Check", "Where it breaks", "Explore",
            "Summary"]
HIDDEN_INPUT = {"remove-cell", "remove-input", "hide-input", "hide-cell"}
CORE_LINES = (5, 12)  # the core update: a handful of visible lines next to its equation


def _cells(page: str) -> list:
    return jupytext.read(ROOT / "book" / f"{page}.md").cells


def _sections(page: str) -> list[tuple[str, list]]:
    """(## heading, cells under it) in page order; cells before the first ## heading are dropped."""
    out: list[tuple[str, list]] = []
    for cell in _cells(page):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    out.append((line[3:].strip(), []))
        if out:
            out[-1][1].append(cell)
    return out


def _visible_code(cells: list) -> list:
    return [c for c in cells if c.cell_type == "code" and not HIDDEN_INPUT & set(c.metadata.get("tags", []))]


def _code_lines(source: str) -> list[str]:
    return [line for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]


@pytest.mark.parametrize("page", THEOREM_CHAPTERS)
def test_sections_in_template_order(page: str) -> None:
    assert [name for name, _ in _sections(page)] == SECTIONS


@pytest.mark.parametrize("page", THEOREM_CHAPTERS)
def test_core_update_is_a_few_visible_lines_next_to_its_equation(page: str) -> None:
    cells = dict(_sections(page))["The core update"]
    code = _visible_code(cells)
    assert code, "the core update shows its code"
    lo, hi = CORE_LINES
    assert any(lo <= len(_code_lines(c.source)) <= hi for c in code), \
        f"one visible cell of {lo}-{hi} code lines holds the core update"
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert "$$" in prose or "{math}" in prose, "the equation it implements is displayed beside it"


@pytest.mark.parametrize("page", THEOREM_CHAPTERS)
def test_exercises_have_hidden_solutions(page: str) -> None:
    explore = "\n".join(c.source for c in dict(_sections(page))["Explore"] if c.cell_type == "markdown")
    exercises = re.findall(r"^```+\{exercise\}.*?\n:label: ([\w-]+)", explore, flags=re.M)
    assert 2 <= len(exercises) <= 4, "two to four exercises"
    for label in exercises:
        block = re.search(r"^(```+)\{solution\} " + label + r"\n(:[^\n]*\n)*", explore, flags=re.M)
        assert block, f"exercise {label} has a solution"
        assert ":class: dropdown" in block.group(0), f"the solution of {label} is hidden (dropdown)"


@pytest.mark.parametrize("page", THEOREM_CHAPTERS)
def test_asserts_and_timings_stay_out_of_sight(page: str) -> None:
    cells = _cells(page)
    for cell in _visible_code(cells):
        assert not re.search(r"^\s*assert\b", cell.source, flags=re.M), cell.source
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert not re.search(r"\d\s*(ms|milliseconds?)\b|load average", prose), "timings belong on the Performance page"


@pytest.mark.parametrize("page", THEOREM_CHAPTERS)
def test_imports_are_visible_once(page: str) -> None:
    visible = _visible_code(_cells(page))
    importing = [c for c in visible if re.search(r"^(from \S+ )?import ", c.source, flags=re.M)]
    assert len(importing) <= 1, [c.source.splitlines()[0] for c in importing]


def _library_imports(page: str) -> list[tuple[str, list[str]]]:
    """The page's imports from ``joma_lib``, over all its code cells."""
    return [(module, names) for cell in _cells(page) if cell.cell_type == "code"
            for module, names in book_layout.library_imports(cell.source)]


@pytest.mark.parametrize("page", PAGES)
def test_page_imports_its_chapter_and_the_kit_only(page: str) -> None:
    """A page's public surface is ``joma_lib.kit`` and its own ``joma_lib.chapters.<page>`` (whose ``__all__``
    re-exports what the page needs from the layers below): no other module of the library, no private name
    (the rule of CONTRIBUTING's "Add a page", :func:`book_layout.page_errors`)."""
    if "kernelspec:" in (ROOT / "book" / f"{page}.md").read_text():  # a notebook (not bibliography, symbols)
        assert book_layout.page_errors(ROOT, page) == []
    for module, names in _library_imports(page):
        exported = set(importlib.import_module(module).__all__)
        assert set(names) <= exported, f"{module}.__all__ lacks {sorted(set(names) - exported)}"


@pytest.mark.parametrize("page", PAGES)
def test_chapter_surface_is_what_its_page_uses(page: str) -> None:
    """``joma_lib.chapters.<page>.__all__`` names exactly what the page imports from it: nothing unused."""
    package = f"joma_lib.chapters.{page}"
    if importlib.util.find_spec(package) is None:  # a page without code of its own (claims, conclusion)
        return
    used = {name for module, names in _library_imports(page) if module == package for name in names}
    assert set(getattr(importlib.import_module(package), "__all__", ())) == used
