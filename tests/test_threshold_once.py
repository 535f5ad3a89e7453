"""Each threshold is written once, in its :class:`~joma_lib.kit.registry.Claim`: no page restates it.

A page checks its claims with :func:`joma_lib.kit.claims.check_claims` and quotes the glued threshold in its
prose. This test reads every page that shows a figure with claims and fails when one of its ``assert`` lines
compares something with a claim's threshold (same relation, same number) of that page.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from joma_lib.kit.registry import Claim, figure_ids, get_spec

ROOT = Path(__file__).resolve().parents[1]
_NUMBER = r"(\d+(?:\.\d*)?(?:[eE]-?\d+)?|\.\d+)"
_X_REL_N = re.compile(r"(<=|>=|<|>)\s*" + _NUMBER + r"(?![\w.*(])")  # x < 0.1  (not 0.1 * y, not 0.1(...))
_N_REL_X = re.compile(r"(?<![\w.*)])" + _NUMBER + r"\s*(<=|>=|<|>)")  # 0.1 <= x
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


def claims_by_page() -> dict[str, list[Claim]]:
    pages: dict[str, list[Claim]] = {}
    for fig_id in figure_ids():
        spec = get_spec(fig_id)
        pages.setdefault(spec.chapter, []).extend(spec.claims)
    return {page: found for page, found in pages.items() if found}


def code_lines(text: str) -> list[tuple[int, str]]:
    """The lines inside ``{code-cell}`` blocks of a MyST notebook, with their line numbers."""
    lines, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```{code-cell}"):
            inside = True
        elif inside and line.startswith("```"):
            inside = False
        elif inside:
            lines.append((number, line))
    return lines


def comparisons(line: str) -> list[tuple[str, float]]:
    """``(relation, number)`` for each comparison of something with a number literal, as ``x <relation> number``."""
    found = [(rel, float(num)) for rel, num in _X_REL_N.findall(line)]
    return found + [(_FLIP[rel], float(num)) for num, rel in _N_REL_X.findall(line)]


def restatements(text: str, page_claims: list[Claim]) -> list[str]:
    """The assert lines of a page that compare with one of its claims' nonzero thresholds (a sign test is no bar)."""
    hits = []
    for number, line in code_lines(text):
        if "assert" not in line:
            continue
        for relation, value in comparisons(line):
            ids = [c.claim_id for c in page_claims
                   if c.threshold != 0 and c.relation == relation and math.isclose(value, c.threshold)]
            if ids:
                hits.append(f"line {number}: {relation} {value:g} restates {', '.join(ids)}: {line.strip()}")
    return hits


def test_the_scanner_sees_a_restated_threshold():
    bar = Claim("toy-bar", "Thm. 0", "x", lambda d: 0.0, ">=", 0.1, kind="paper", threshold_set="before-data")
    page = "text\n```{code-cell} ipython3\nassert bounce[0] >= 0.1\nassert 0.1 <= b and c < 0.1 * d\n```\nx >= 0.1\n"
    hits = restatements(page, [bar])
    assert [h.split(":")[0] for h in hits] == ["line 3", "line 4"]  # prose and `0.1 * d` are not asserts of the bar
    assert restatements(page.replace(">= 0.1", "> 0.1"), [bar]) == ["line 4: >= 0.1 restates toy-bar: "
                                                                    "assert 0.1 <= b and c < 0.1 * d"]
    assert comparisons("assert 1e-6 > err and y <= 2e-2") == [("<=", 0.02), ("<", 1e-6)]


@pytest.mark.parametrize("page", sorted(claims_by_page()))
def test_no_page_restates_a_threshold(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    assert restatements(text, claims_by_page()[page]) == []
