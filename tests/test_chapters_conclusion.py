"""The conclusion page (book/conclusion.md, which has no chapter package): its results, one line each, count every
claim of the paper in the ledger exactly once, so that a reader who adds up its verdict lines gets the ledger's
headline."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from joma_lib.base.io import InputUnavailableError
from joma_lib.kit import claims, ledger_views
from joma_lib.kit.registry import FigureData

PAGE = Path(__file__).resolve().parents[1] / "book" / "conclusion.md"
NAMES = ("PAPER_SCALE_RERUN", "STORY", "SUBJECT")


def _page_constants() -> dict[str, Any]:
    """``STORY`` (result -> figure and claim ids), ``SUBJECT`` and ``PAPER_SCALE_RERUN``, as the page defines them."""
    cells = re.findall(r"```\{code-cell\} ipython3\n(.*?)```", PAGE.read_text(), flags=re.S)
    (source,) = [cell for cell in cells if "STORY = {" in cell]
    source = "\n".join(line for line in source.splitlines() if not line.startswith(":tags:"))
    wanted = [node for node in ast.parse(source).body
              if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in NAMES for t in node.targets)]
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(PAGE), "exec"), namespace)  # literals only
    return {name: namespace[name] for name in NAMES}


def _unavailable(fig_id: str) -> FigureData:
    raise InputUnavailableError(f"{fig_id}: not computed in this test")


def _story_rows() -> tuple[list[claims.ClaimResult], dict[str, list[claims.ClaimResult]]]:
    """Every ledger row (not run: only ids and kinds matter here), and the rows of each result, picked as the page
    picks them (a figure id brings all its claims, a claim id its own row)."""
    rows = claims.ledger(load=_unavailable)
    return rows, ledger_views.story_rows(_page_constants()["STORY"], rows)


def test_every_claim_of_the_paper_is_under_exactly_one_result():
    rows, story = _story_rows()
    shown = sorted(r.claim_id for line_rows in story.values() for r in line_rows if r.kind == "paper")
    paper = sorted(r.claim_id for r in rows if r.kind == "paper")
    assert shown == paper, {"missing": sorted(set(paper) - set(shown)),
                            "repeated": sorted({i for i in shown if shown.count(i) > 1})}
    # so the verdict lines' counts add up to the headline (here every row is not run, blind ones included)
    assert ledger_views.headline(r for line_rows in story.values() for r in line_rows) == ledger_views.headline(rows)


def test_the_authors_fig6_and_fig8_claims_are_under_their_result():
    _, story = _story_rows()
    fig6 = {r.claim_id for r in story["fig6"]}
    assert {"fig6-authors-losses", "fig6-deeper-lower-loss", "fig8-lr-optimum"} <= fig6
    assert set(_page_constants()["PAPER_SCALE_RERUN"]) <= fig6


def test_every_result_has_a_subject_for_its_verdict_line():
    constants = _page_constants()
    assert set(constants["SUBJECT"]) == set(constants["STORY"])


def test_adding_up_finds_a_claim_left_out():
    """The check above can fail: a result that loses one claim of the paper no longer adds up to the headline."""
    rows, story = _story_rows()
    shorter = [r for line_rows in story.values() for r in line_rows if r.claim_id != "fig8-lr-optimum"]
    assert ledger_views.headline(shorter) != ledger_views.headline(rows)
