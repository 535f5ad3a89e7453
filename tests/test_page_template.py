"""Every theorem chapter follows the page template of CONTRIBUTING.md ("Page template").

Overview -> Statement -> Why it holds -> The core update -> Check -> Where it breaks -> Explore -> Summary,
with the mechanism in a few visible lines, exercises with hidden solutions, asserts out of sight (but
executed) and no timings.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
THEOREM_CHAPTERS = ["theorem1", "theorem2", "theorems3_4", "hierarchy"]
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
