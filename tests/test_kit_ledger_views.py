"""joma_lib.kit.ledger_views: the claims ledger's views (headline counts, the page's HTML table, grouping by kind)."""

from __future__ import annotations

import re

import pytest

from joma_lib.kit import claims, ledger_views



def test_a_figure_that_raised_is_counted_and_shown_first():
    raised = claims.ClaimResult("toy-raised", "c-claimy", "Thm. 0", "x", None, "< 4", "error", "", kind="paper",
                                reason="RuntimeError: injected")
    held = claims.ClaimResult("toy-held", "", "Thm. 0", "y", 1.0, "< 4", "holds", "", kind="paper")
    assert ledger_views.headline([raised, held]) == "paper claims: 1 hold, 0 fail, 0 not run, 1 error"
    assert ledger_views.headline([held]) == "paper claims: 1 hold, 0 fail, 0 not run"
    assert [r.claim_id for r in ledger_views.by_kind([held, raised])["paper"]] == ["toy-raised", "toy-held"]
    table = ledger_views.html_table([held, raised])
    assert "1 error" in table and "<strong>error</strong>: RuntimeError: injected" in table
    assert raised.as_json()["reason"] == "RuntimeError: injected"


def _row(claim_id: str, verdict: str, kind: str = "paper", blind: str = "") -> claims.ClaimResult:
    return claims.ClaimResult(claim_id, "c-claimy", "Thm. 0", f"statement of {claim_id}", 1.0, "< 4", verdict, "",
                              kind=kind, blind=blind)


def test_a_blind_paper_claim_is_shown_but_not_counted():
    blind = _row("toy-blind", "holds", blind="holds on the untrained network too")
    held = _row("toy-held", "holds")
    assert not blind.evidence and held.evidence and not _row("toy-c", "holds", kind="companion").evidence
    assert ledger_views.headline([blind, held]) == ("paper claims: 1 hold, 0 fail, 0 not run; 1 more holds without "
                                                    "the mechanism too (untrained or control), not counted")
    # a companion claim may be blind too (the re-run's quick bounce is): it is no paper claim, counted or not
    companion_blind = _row("toy-c-blind", "holds", kind="companion", blind="holds untrained")
    assert ledger_views.headline([blind, held, companion_blind]) == ledger_views.headline([blind, held])
    assert "not counted: holds without the mechanism too (holds on the untrained network too)" in \
        ledger_views.html_table([blind])
    assert blind.as_json()["blind"] == "holds on the untrained network too" and "blind" not in held.as_json()


def test_a_story_verdict_reads_only_the_evidence():
    typo = _row("toy-typo", "fails", kind="companion")
    blind = _row("toy-blind", "holds", blind="holds untrained")
    assert ledger_views.story_verdict([_row("a", "holds"), typo]) == "holds"  # a companion failure is a caveat
    assert ledger_views.story_verdict([_row("a", "holds"), _row("b", "fails")]) == "holds in part"
    assert ledger_views.story_verdict([_row("b", "fails"), blind]) == "fails"  # the blind hold does not rescue it
    assert ledger_views.story_verdict([blind, typo, _row("n", "not-run")]) == "not tested"
    text = ledger_views.story_markdown([_row("a", "holds"), typo, blind])
    assert text.startswith("**Verdict: holds** (claims of the paper that could fail without its mechanism: 1 hold, "
                           "0 fail, 0 not run; 1 more holds without the mechanism too (untrained or control), not "
                           "counted)")
    evidence, caveats = text.split("**Caveats**")
    assert "`a`" in evidence and "`toy-typo`" in caveats and "`toy-blind`" in caveats and "`toy-typo`" not in evidence
    assert ":::{dropdown} The ledger's rows for this result" in text and text.rstrip().endswith(":::")


def test_a_verdict_line_names_its_subject_and_a_box_of_evidence_only_says_so():
    text = ledger_views.story_markdown([_row("a", "not-run"), _row("b", "not-run")], subject="the big re-run")
    assert text.startswith("**Verdict on the big re-run: not tested** (claims of the paper that could fail without "
                           "its mechanism: 0 hold, 0 fail, 2 not run)")
    assert ":::{dropdown} The ledger's rows for the big re-run" in text
    caveats = text.split("**Caveats**")[1]
    assert "- none among these rows: they are all claims of the paper" in caveats and "- none\n" not in caveats


def _paper_header(table: str) -> str:
    """The text of the header row of the paper's claims in an HTML table of the ledger."""
    (header,) = re.findall(r'<tbody class="kind-paper"><tr class="kind-header"><th colspan="\d+">(.*?)</th>', table)
    return header


@pytest.mark.parametrize("rows", [
    [_row("a", "holds"), _row("b", "not-run"), _row("c", "holds", blind="untrained too"),
     _row("d", "holds", blind="control too"), _row("e", "holds", kind="companion"), _row("f", "fails", kind="sanity")],
    [_row("a", "error"), _row("b", "fails"), _row("c", "holds", blind="untrained too")],
    [_row("a", "holds"), _row("b", "holds", kind="companion")],
])
def test_the_table_counts_the_papers_claims_as_the_headline_does(rows):
    header = _paper_header(ledger_views.html_table(rows))
    counts = ledger_views.headline(rows).removeprefix("paper claims: ")
    assert header == ledger_views.KIND_TITLES["paper"] + ": " + counts
    # and as each result's verdict line does
    assert ledger_views.paper_counts(rows) in ledger_views.story_markdown(rows)
    held = sum(r.verdict == "holds" and r.evidence for r in rows)
    assert header.startswith(f"{ledger_views.KIND_TITLES['paper']}: {held} hold,")  # blind holds not among them


def test_a_story_takes_a_figure_with_all_its_claims_and_a_claim_by_itself():
    other = claims.ClaimResult("x-own", "c-other", "Thm. 0", "statement", 1.0, "< 4", "holds", "", kind="paper")
    rows = [_row("a", "holds"), _row("b", "fails"), other]
    story = ledger_views.story_rows({"whole figure": ["c-claimy"], "one claim": ["x-own"]}, rows)
    assert {name: [r.claim_id for r in got] for name, got in story.items()} == {
        "whole figure": ["a", "b"], "one claim": ["x-own"]}
    with pytest.raises(KeyError, match="no-such-claim"):
        ledger_views.story_rows({"typo": ["no-such-claim"]}, rows)
