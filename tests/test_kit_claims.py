"""The claims ledger (joma_lib.kit.claims): verdict logic, pending claims, the CLI and ``verify`` failing on a
broken claim."""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure

from joma_lib.chapters.fig7 import figures as fig7
from joma_lib.kit import claims, harness, ledger_views
from joma_lib.kit.cli import main
from joma_lib.kit.registry import Claim, FigureSpec

registry_module = importlib.import_module("joma_lib.kit.registry")  # the module, not the function

JSON_KEYS = {"id", "figure", "paper_ref", "statement", "value", "threshold", "verdict", "page", "kind",
             "threshold_set", "stored_run"}
BEFORE = {"kind": "paper", "threshold_set": "before-data"}


def _make(scale: float = 1.0) -> dict[str, np.ndarray]:
    return {"y": scale * np.array([1.0, 2.0, 3.0])}


def _plot(data):
    fig = Figure()
    fig.subplots().plot(data["y"])
    return fig


def _spec(*figure_claims: Claim, scale: float = 1.0) -> FigureSpec:
    return FigureSpec(fig_id="c-claimy", title="toy", paper_ref="companion", chapter="book/toy.md", make=_make,
                      plot=_plot, params={"scale": scale}, claims=figure_claims)


MAX_BELOW_4 = Claim("toy-max-below-4", "Thm. 0", "the largest y stays below 4", lambda d: d["y"].max(), "<", 4.0,
                    **BEFORE)
SUM_ABOVE_10 = Claim("toy-sum-above-10", "Thm. 0", "the sum exceeds 10 (the book says it does not)",
                     lambda d: d["y"].sum(), ">", 10.0, book_says="fails", kind="companion",
                     threshold_set="after-data", threshold_note="set after seeing 6")


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """Install a toy registry; returns a setter that swaps the toy figure's spec."""
    def install(spec: FigureSpec) -> None:
        monkeypatch.setattr(registry_module, "registry", lambda: {spec.fig_id: spec})
    monkeypatch.setattr(harness, "REFERENCE_DIR", tmp_path)
    install(_spec(MAX_BELOW_4, SUM_ABOVE_10))
    return install


def test_ledger_rows_and_surprises(toy):
    rows = {r.claim_id: r for r in claims.ledger(["c-claimy"])}
    assert set(rows) == {"toy-max-below-4", "toy-sum-above-10"}
    assert rows["toy-max-below-4"].verdict == "holds" and rows["toy-max-below-4"].threshold == "< 4"
    assert rows["toy-sum-above-10"].verdict == "fails" and rows["toy-sum-above-10"].value == 6.0
    assert rows["toy-max-below-4"].page == "book/toy.md#c-claimy"
    assert claims.surprises(rows.values()) == []  # both as the book says
    toy(_spec(MAX_BELOW_4, SUM_ABOVE_10, scale=2.0))  # now max = 6 (fails) and sum = 12 (holds)
    assert {r.claim_id for r in claims.surprises(claims.ledger())} == {"toy-max-below-4", "toy-sum-above-10"}


def test_pending_claims_are_not_run_until_a_figure_supersedes_them(toy):
    pending_ids = {p.claim_id for p in claims.PENDING}
    for claim_id in ("table1-layer0-learns", "table1-level-specific", "fig6-bounce-without-adam-reset"):
        assert claim_id in pending_ids
    rows = {r.claim_id: r for r in claims.ledger()}
    assert rows["fig6-bounce-without-adam-reset"].verdict == "not-run"
    backed = Claim("fig6-bounce-without-adam-reset", "Fig. 6", "toy stand-in", lambda d: d["y"][0], ">=", 1.0,
                   **BEFORE)
    toy(_spec(MAX_BELOW_4, backed))
    rows_list = claims.ledger()
    assert [r.claim_id for r in rows_list].count("fig6-bounce-without-adam-reset") == 1
    row = next(r for r in rows_list if r.claim_id == "fig6-bounce-without-adam-reset")
    assert row.verdict == "holds" and row.figure == "c-claimy"


def test_pythia_claim_is_not_run_offline_with_its_reason(toy, no_network):
    rows = claims.ledger(["fig7-srank-bounce"])
    assert [r.claim_id for r in rows] == ["fig7-srank-bounce"]
    row = rows[0]
    assert row.verdict == "not-run" and row.value is None and row.kind == "paper" and row.figure == ""
    assert "Hugging Face hub" in row.reason and "HF_HUB_OFFLINE" in row.reason
    assert row.threshold == f">= {fig7.BOUNCE_FRACTION:g}" and row.page == "book/fig7.md"
    backed = Claim("fig7-srank-bounce", "Fig. 7", "twin", lambda d: d["y"][0], ">=", 1.0, **BEFORE)
    toy(_spec(MAX_BELOW_4, backed))
    with pytest.raises(RuntimeError, match="online claim"):  # one id, one claim
        claims.ledger()


def test_duplicate_claim_id_is_an_error(toy, monkeypatch):
    other = FigureSpec(fig_id="c-other", title="t", paper_ref="c", chapter="book/toy.md", make=_make, plot=_plot,
                       claims=(MAX_BELOW_4,))
    monkeypatch.setattr(registry_module, "registry", lambda: {"c-claimy": _spec(MAX_BELOW_4), "c-other": other})
    with pytest.raises(RuntimeError, match="toy-max-below-4"):
        claims.ledger()


def test_unavailable_input_gives_not_run_with_reason(toy):
    def offline(_: str) -> dict[str, np.ndarray]:
        raise claims.InputUnavailableError("the authors' file is not here")
    rows = claims.ledger(["toy-max-below-4"], load=offline)
    assert [r.verdict for r in rows] == ["not-run"] and "authors' file" in rows[0].reason


def test_cli_json_keys(toy, capsys):
    assert main(["claims", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in rows} >= {"toy-max-below-4", "toy-sum-above-10", "fig7-srank-bounce"}
    for row in rows:
        expected = (JSON_KEYS | ({"reason"} if row["verdict"] == "not-run" else set())
                    | ({"threshold_note"} if row["threshold_set"] == "after-data" else set()))
        assert set(row) == expected, row
        assert row["verdict"] in {"holds", "fails", "not-run"}
        assert row["kind"] in {"paper", "companion", "sanity"}
    assert next(r for r in rows if r["id"] == "toy-sum-above-10")["threshold_note"] == "set after seeing 6"
    assert main(["claims", "toy-max-below-4"]) == 0
    out = capsys.readouterr().out
    assert "toy-max-below-4" in out and "holds" in out and "toy-sum-above-10" not in out
    assert main(["claims", "no-such-claim"]) == 2


def test_verify_fails_when_a_holding_claim_fails(toy, capsys):
    harness.update_reference("c-claimy")
    assert main(["verify", "c-claimy"]) == 0
    assert "2 of 2 as the book states" in capsys.readouterr().out
    # same data, same reference, but the claim's threshold now excludes the data: verify must fail on the claim
    strict = Claim("toy-max-below-4", "Thm. 0", "the largest y stays below 2", lambda d: d["y"].max(), "<", 2.0,
                   **BEFORE)
    toy(_spec(strict, SUM_ABOVE_10))
    assert main(["verify", "c-claimy"]) == 1
    assert "claims fail: toy-max-below-4" in capsys.readouterr().out


def test_verify_reports_a_failing_claim_that_starts_to_hold(toy, capsys):
    harness.update_reference("c-claimy")
    loose = Claim("toy-sum-above-10", "Thm. 0", "sum exceeds 5", lambda d: d["y"].sum(), ">", 5.0, book_says="fails",
                  **BEFORE)
    toy(_spec(MAX_BELOW_4, loose))
    main(["verify", "c-claimy"])
    assert "toy-sum-above-10 now HOLDS" in capsys.readouterr().out


def test_a_failure_the_book_reports_must_be_measured_not_nan(toy, capsys):
    """A NaN measure is no failure: on a claim the book says fails it is an error, which verify and a page reject
    (before, the broken computation passed as the reported failure)."""
    harness.update_reference("c-claimy")
    unmeasured = Claim("toy-sum-above-10", "Thm. 0", "the sum exceeds 10", lambda d: float("nan"), ">", 10.0,
                       book_says="fails", **BEFORE)
    assert unmeasured.evaluate(_make())[1] == "error"
    assert MAX_BELOW_4.evaluate({"y": np.array([np.nan])})[1] == "fails"  # a NaN still fails a claim said to hold
    toy(_spec(MAX_BELOW_4, unmeasured))
    row = claims.evaluate_figure("c-claimy", _make())[1]
    assert (row.verdict, row.reason) == ("error", registry_module.UNMEASURED) and row.surprising
    assert main(["verify", "c-claimy"]) == 1
    out = capsys.readouterr().out
    assert "claims fail: toy-sum-above-10" in out and "now HOLDS" not in out
    with pytest.raises(AssertionError, match="toy-sum-above-10: nan > 10 error, the book says fails"):
        claims.check_claims("c-claimy", _make())


def test_a_real_failing_claim_with_a_nan_residual_is_an_error_not_the_reported_failure():
    data = harness.load_reference("c-invariant-residual")
    rows = {r.claim_id: r for r in claims.evaluate_figure("c-invariant-residual", data)}
    assert rows["thm1-softmax-invariant-heterogeneous"].verdict == "fails"  # as the book says, on a measured value
    broken = {**data, "residual": np.full_like(data["residual"], np.nan)}
    rows = {r.claim_id: r for r in claims.evaluate_figure("c-invariant-residual", broken)}
    assert rows["thm1-softmax-invariant-heterogeneous"].verdict == "error"


#: the claims the book's pages cite by id: none may disappear from the ledger
REQUIRED_IDS = """thm1-linear-invariant thm1-exp-invariant thm1-softmax-nc-gaussian thm1-softmax-nc-random
thm2-closed-form thm2-erf-v2-typo thm4-rate-ratio fig4-sparse-then-dense thm5-cooccurrence fig5-order
table1-layer0-learns table1-level-specific fig6-authors-losses fig6-authors-bounce fig8-lr-optimum fig6-rerun-bounce
fig7-srank-bounce fig6-bounce-without-adam-reset fig7-standin-srank-bounce fig5c-extra-latent-layer
thm1-any-lr-ratio""".split()


def test_the_ledger_lists_every_claim_the_pages_cite_in_lowercase_ids():
    ids = claims.all_claim_ids()
    assert set(REQUIRED_IDS) <= set(ids), sorted(set(REQUIRED_IDS) - set(ids))
    assert all(i == i.lower() and " " not in i for i in ids)


def test_claims_hold_as_the_book_says_on_the_committed_references():
    """Every figure claim, evaluated on the committed reference data, has the verdict the book states."""
    rows = claims.ledger(load=harness.load_reference)
    assert [r.claim_id for r in claims.surprises(rows)] == []
    assert {r.verdict for r in rows if r.figure} <= {"holds", "fails"}


# Claims that cannot fail by construction (a matrix built orthonormal, a proven inequality, a closed form compared
# with itself, an order fixed by the construction, numbers read back from the files they were computed from):
# they are kept as guards, never counted as the paper's.
SANITY = {"setting-orthonormal-embeddings", "thm5-one-minus-h-over-l", "thm5-cooccurrence", "fig5-order",
          "thm5-decreasing-in-height", "thm3-linear-single-direction", "setting-random-near-orthogonal",
          "fig8-authors-losses"}
# Checks of ours that the paper does not make (controls, extensions, readings it does not state, our simulations
# of schematic figures, terms read from the authors' code).
NOT_THE_PAPERS = {"rerun-bf16-matches-fp32", "thm1-softmax-bbar-drifts", "thm1-softmax-invariant-heterogeneous",
                  "thm2-erf-v2-typo", "setting-token-embeddings-near-orthogonal",
                  "setting-hidden-states-near-orthogonal", "fig7-standin-srank-bounce", "fig5-sparse-then-dense",
                  "fig2-sum-sq-term-gaussian", "fig2-sum-sq-term-random", "table1-level-specific"}
# Thresholds chosen or moved knowing the value they are compared with.
AFTER_DATA = {"fig6-rerun-bounce-quick", "fig6-rerun-bounce", "fig6-authors-bounce", "fig6-deep-upper-layers-bounce",
              "fig6-deep-lower-layers-suppressed", "fig6-bounce-without-adam-reset", "fig7-standin-srank-bounce",
              "table1-quick-layer0-above-init", "table1-level-specific", "fig4-entropy-limit"}
# Claims that hold without the mechanism too (on an untrained network, a control, or a flat noisy curve): shown,
# never counted.
BLIND = {"table1-layer0-aligned", "table1-layer0-above-layer1", "fig6-rerun-bounce-quick", "table1-level-specific"}


def test_every_claim_says_its_kind_and_when_its_threshold_was_set():
    rows = {r.claim_id: r for r in claims.ledger(load=harness.load_reference)}
    assert {i for i, r in rows.items() if r.kind == "sanity"} == SANITY
    assert all(rows[i].kind == "companion" for i in NOT_THE_PAPERS)
    assert all(rows[i].threshold_set == "after-data" for i in AFTER_DATA)
    assert {i for i, r in rows.items() if r.blind} == BLIND and not any(rows[i].evidence for i in BLIND)
    for row in rows.values():
        assert row.kind in {"paper", "companion", "sanity"} and row.threshold_set in {"before-data", "after-data"}
        assert (row.threshold_set == "after-data") == bool(row.threshold_note), row.claim_id
    # both Fig. 7 rows: the paper's (pre-trained checkpoints, not run offline) and the stand-in's
    assert rows["fig7-srank-bounce"].kind == "paper" and rows["fig7-srank-bounce"].verdict == "not-run"
    assert rows["fig7-standin-srank-bounce"].figure == "c-fig7-standin" and rows["fig7-standin-srank-bounce"].stored_run
    # the stand-in's claim is measured on W1 of every layer (the smallest rebound), not on layer 0 alone
    standin = harness.load_reference("c-fig7-standin")
    assert standin["bounce_fraction"].shape == (4,) and int(standin["n_seeds"]) == 2
    assert rows["fig7-standin-srank-bounce"].value == pytest.approx(standin["bounce_fraction"].min())
    assert rows["fig7-standin-srank-bounce"].threshold_set == "after-data"  # widened to every layer after data


def test_check_claims_glues_the_ledger_and_fails_a_page_that_disagrees(toy, monkeypatch):
    glued: dict[str, object] = {}
    monkeypatch.setattr(claims, "glue", lambda name, value, display=False: glued.__setitem__(name, value))
    toy(_spec(MAX_BELOW_4, SUM_ABOVE_10))
    # y = [1, 2, 3]: max 3 < 4 holds; sum 6 > 10 fails, as the book says
    rows = claims.check_claims("c-claimy", _make())
    assert {r: rows[r].verdict for r in rows} == {"toy-max-below-4": "holds", "toy-sum-above-10": "fails"}
    names = claims.glue_names("toy-max-below-4")
    assert (glued[names["threshold"]], glued[names["bar"]], glued[names["value"]], glued[names["verdict"]]) == (
        "< 4", "4", "3", "holds")
    with pytest.raises(AssertionError, match="toy-max-below-4: 6 < 4 fails, the book says holds"):
        claims.check_claims("c-claimy", _make(scale=2.0))


def test_book_ledger_computes_a_figure_once_per_store(toy, monkeypatch, tmp_path):
    """With a figure store, the claims page evaluates the data a page kept there, and keeps what it computes."""
    store = tmp_path / "store"
    monkeypatch.setenv(harness.STORE_ENV, str(store))
    calls: list[float] = []

    def counted(scale: float = 1.0) -> dict[str, np.ndarray]:
        calls.append(scale)
        return _make(scale)

    toy(FigureSpec(fig_id="c-claimy", title="toy", paper_ref="companion", chapter="book/toy.md", make=counted,
                   plot=_plot, params={"scale": 1.0}, claims=(MAX_BELOW_4,)))
    first, sources = claims.book_ledger()
    assert calls == [1.0] and (store / "c-claimy.npz").is_file()  # computed once and kept
    assert sources["c-claimy"] == claims.REGENERATED
    second, _ = claims.book_ledger()
    assert calls == [1.0]  # the second evaluation draws the kept data
    def values(rows: list[claims.ClaimResult]) -> list[float | None]:
        return [r.value for r in rows if r.figure == "c-claimy"]
    assert values(first) == values(second) == [3.0]



def test_the_ledger_page_table_groups_by_kind_failures_first(toy):
    rows = claims.ledger(["c-claimy"])  # toy: one paper claim that holds, one companion claim that fails
    sanity = Claim("toy-sanity", "Thm. 0", r"built so: $\max|y| \le 3$", lambda d: d["y"].max(), "<=", 3.0,
                   kind="sanity", threshold_set="before-data")
    toy(_spec(MAX_BELOW_4, SUM_ABOVE_10, sanity))
    rows = claims.ledger()
    assert ledger_views.headline(rows).startswith("paper claims: 1 hold, 0 fail, ")  # the pending paper claims: not run
    table = ledger_views.html_table(rows, {"c-claimy": claims.FROM_REFERENCE}, {"toy": "A toy page"})
    assert table.startswith('<table class="joma-ledger">') and table.endswith("</table>")
    kinds = [table.index(f'<tbody class="kind-{kind}">') for kind in ("paper", "companion", "sanity")]
    assert kinds == sorted(kinds)
    paper = table[kinds[0]:kinds[1]]
    assert paper.index('class="verdict-not-run"') < paper.index('class="verdict-holds"')  # failures/not run first
    assert table.count("<tr class=\"verdict-") == len(rows)
    assert table.count("<td ") == 7 * len(rows) and 'data-label="shown in"' in table
    assert '<a href="toy.html#c-claimy">toy</a>' in table  # the figure's title, not its id, as link text
    assert r'<span class="math notranslate nohighlight">\(\max|y| \le 3\)</span>' in table
    assert "set after the data: set after seeing 6" in table
    with pytest.raises(ValueError, match="unbalanced"):
        ledger_views.html_table([claims.ClaimResult("x", "", "p", "one $ sign", None, "", "not-run", "", kind="paper")])


# "the value is 1.16" ("0.4 %", "8 of 9"), "where the fraction is 0.11", "where the rise is 0.659", "... and is -2.76
# SDs": the number a threshold note quotes as the claim's value, to the digits it gives
_NOTED_VALUE = re.compile(r"(?:the value|the fraction|the rise|the smallest rise of layers [\d-]+|the largest final "
                          r"entropy|layer \d's rise|\(mean gain\) and) is (-?\d+(?:\.(\d+))?)( ?%)?")


def _noted_values() -> list[Any]:
    return [pytest.param(spec.fig_id, c, id=c.claim_id) for spec in registry_module.registry().values()
            for c in spec.claims if _NOTED_VALUE.search(c.threshold_note or "")]


@pytest.mark.parametrize("fig_id, claim", _noted_values())
def test_a_value_a_threshold_note_quotes_is_the_claims_value_on_its_reference(fig_id: str, claim: Claim) -> None:
    """A note that quotes the value ("the value is X") tells the reader why its bar sits where it does; X must be the
    measure on the committed reference, rounded as written (this also pins those measures: reading another checkpoint,
    entry or operation changes them)."""
    number, decimals, percent = _NOTED_VALUE.search(claim.threshold_note).groups()
    value = claim.evaluate(harness.load_reference(fig_id))[0] * (100 if percent else 1)
    assert abs(value - float(number)) <= 0.5 * 10.0 ** -len(decimals or "") + 1e-12, (claim.claim_id, value, number)
