"""joma_lib.kit.ledger_views: the claims ledger's views (headline counts, the page's HTML table, grouping by kind)."""

from __future__ import annotations

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
