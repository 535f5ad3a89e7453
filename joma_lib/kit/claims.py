"""The claims ledger: every claim of the paper, its verdict on our data, and where the book shows it.

A figure declares the claims its data test (:attr:`FigureSpec.claims`, :class:`~joma_lib.kit.registry.Claim`).
Claims the paper makes that no figure backs yet, or that cannot be tested here (a GPU, the internet, data the
authors do not ship), are listed in :data:`PENDING` with the reason; their verdict is ``not-run``. A figure claim
with the same id supersedes the pending entry, so attaching a claim to a figure is all it takes to move it from
"not run" to a verdict.
A claim whose data only an online source gives (Pythia's checkpoints on the hub) is an
:class:`~joma_lib.kit.registry.OnlineClaim` of its figure module (``ONLINE_CLAIMS``): evaluated when its fetch
can run, ``not-run`` with the fetch's reason when it cannot.

The ledger is evaluated by ``python -m joma_lib.figures claims`` (which regenerates each figure once), by
``verify`` (on the data it regenerates anyway) and by the book's ledger page (``book/claims.md``), which may
evaluate on already computed data with :func:`evaluate_figure` so that it never disagrees with the check.
Its views (the plain-text table of the CLI, the HTML table and headline of the ledger page) are in
:mod:`joma_lib.kit.ledger_views`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from joma_lib.kit.glue import glue
from joma_lib.kit.harness import compute, load_reference, registered_data
from joma_lib.kit.registry import (
    Claim,
    FigureData,
    FigureSpec,
    Kind,
    ThresholdSet,
    UNMEASURED,
    Verdict,
    figure_ids,
    get_spec,
    online_claims,
)
from joma_lib.base.io import InputUnavailableError


@dataclass(frozen=True)
class PendingClaim:
    """A claim of the paper that no figure tests yet, or that cannot be tested here.

    Attributes:
        claim_id: stable id; a figure claim with the same id replaces this entry.
        paper_ref: where the paper makes the claim.
        statement: one line, what is claimed.
        reason: why there is no verdict (``"not yet run"``, ``"needs a GPU"``, ...).
        page: the book page that discusses it (``"book/rerun.md"``), or ``""``.
        kind: ``paper`` or ``companion`` (see :data:`~joma_lib.kit.registry.Kind`).
        threshold: the bound a verdict will use once the claim can run (``">= 0.1"``), stated now, or ``""``.
    """

    claim_id: str
    paper_ref: str
    statement: str
    reason: str
    page: str = ""
    kind: Kind = "paper"
    threshold: str = ""


NOT_YET_RUN = "not yet run"

PENDING: tuple[PendingClaim, ...] = (
    PendingClaim("table1-layer0-learns", "Table 1",
                 "Training on the real labels raises the layer-0 alignment with the level-0 latents more than "
                 "training on shuffled labels does.", NOT_YET_RUN, "book/table1.md", kind="companion"),
    PendingClaim("table1-level-specific", "Table 1 (our comparison)",
                 "After training, no other layer matches latent level i better than layer i.",
                 NOT_YET_RUN, "book/table1.md", kind="companion"),
    PendingClaim("fig5c-extra-latent-layer", "Fig. 5(c)",
                 "The panel with an extra latent layer in the hierarchy (the slides' 'deep latent distribution'): "
                 "which token associations are learned first.",
                 "the slides show Fig. 5 only as a schematic without numbers, and the panel's wording is known "
                 "only second-hand, so no test of it can be reconstructed from the paper", "book/fig5.md"),
    PendingClaim("fig6-bounce-without-adam-reset", "Fig. 6",
                 "The entropy bounce of Fig. 6 appears in a run without the per-epoch restart of Adam of the "
                 "authors' script.", NOT_YET_RUN, "book/rerun.md", kind="companion"),
    PendingClaim("fig6-wikitext103-losses", "Fig. 6 (bottom row)",
                 "On WikiText-103 the best validation losses are 5.047 / 4.912 / 4.762 / 4.679 for 1/2/5/10 "
                 "layers and attention entropy drops then bounces back.",
                 "the authors publish no WikiText-103 runs, and re-running them needs a GPU and the internet",
                 "book/wikitext.md"),
)


@dataclass(frozen=True)
class ClaimResult:
    """One row of the ledger."""

    claim_id: str
    figure: str
    paper_ref: str
    statement: str
    value: float | None
    threshold: str
    verdict: Verdict
    page: str
    book_says: str = "holds"
    reason: str = ""
    kind: Kind = "paper"
    threshold_set: ThresholdSet = "before-data"
    threshold_note: str = ""
    stored_run: bool = False
    blind: str = ""

    @property
    def evidence(self) -> bool:
        """A claim of the paper that can tell its mechanism from its absence: the only rows that count as support
        or refutation of the paper (companion and sanity rows, and paper rows that are :attr:`blind`, are caveats)."""
        return self.kind == "paper" and not self.blind

    @property
    def surprising(self) -> bool:
        """The verdict contradicts the book (a claim it says holds fails or errs, or one it says fails holds)."""
        return self.verdict != "not-run" and self.verdict != self.book_says

    def as_json(self) -> dict[str, Any]:
        """The ledger row as JSON: ``id, figure, paper_ref, statement, value, threshold, verdict, page, kind,
        threshold_set, stored_run`` (+ ``reason`` when not run or raised, + ``threshold_note`` when set after the data,
        + ``blind`` when the claim also holds without the mechanism)."""
        row: dict[str, Any] = {
            "id": self.claim_id, "figure": self.figure, "paper_ref": self.paper_ref, "statement": self.statement,
            "value": self.value if self.value is None or math.isfinite(self.value) else str(self.value),
            "threshold": self.threshold, "verdict": self.verdict, "page": self.page, "kind": self.kind,
            "threshold_set": self.threshold_set, "stored_run": self.stored_run}
        if self.verdict in ("not-run", "error"):
            row["reason"] = self.reason
        if self.threshold_set == "after-data":
            row["threshold_note"] = self.threshold_note
        if self.blind:
            row["blind"] = self.blind
        return row


def page_of(spec: FigureSpec) -> str:
    """Where the book shows a figure: its chapter and the figure's anchor (``book/figs2_3.md#fig2a``)."""
    return f"{spec.chapter}#{spec.fig_id}"


def _threshold(claim: Claim) -> str:
    return f"{claim.relation} {claim.threshold:g}"


def _row(spec: FigureSpec, claim: Claim, value: float | None, verdict: Verdict, reason: str = "") -> ClaimResult:
    return ClaimResult(claim.claim_id, spec.fig_id, claim.paper_ref, claim.statement, value, _threshold(claim),
                       verdict, page_of(spec), claim.book_says, reason, claim.kind, claim.threshold_set,
                       claim.threshold_note, spec.stored_run, claim.blind)


def evaluate_figure(fig_id: str, data: FigureData) -> list[ClaimResult]:
    """Every claim of ``fig_id`` evaluated on ``data`` (already computed: nothing is regenerated)."""
    spec = get_spec(fig_id)
    rows = []
    for claim in spec.claims:
        value, verdict = claim.evaluate(data)
        rows.append(_row(spec, claim, value, verdict, UNMEASURED if verdict == "error" else ""))
    return rows


def glue_names(claim_id: str) -> dict[str, str]:
    """The glue names under which :func:`check_claims` stores a claim for its page's prose.

    ``claim-<id>-threshold`` (``">= 0.1"``), ``claim-<id>-bar`` (the number alone, ``"0.1"``),
    ``claim-<id>-value`` (the measured value, as the ledger prints it) and ``claim-<id>-verdict``.
    """
    return {part: f"claim-{claim_id}-{part}" for part in ("threshold", "bar", "value", "verdict")}


def check_claims(fig_id: str, data: FigureData) -> dict[str, ClaimResult]:
    """Book helper: the claims of ``fig_id`` on the data its page shows, checked and glued for the prose.

    Each claim is evaluated exactly as the ledger evaluates it; a verdict other than the one the book states
    (:attr:`Claim.book_says`) raises :class:`AssertionError`, so the page fails to build. The threshold, value
    and verdict are glued under :func:`glue_names`, so that a page quotes the ledger instead of restating a
    threshold in its own asserts or prose (each threshold is written once, in the :class:`Claim`).
    Returns the rows by claim id.
    """
    rows = {row.claim_id: row for row in evaluate_figure(fig_id, data)}
    wrong = [f"{r.claim_id}: {format_value(r.value)} {r.threshold} {r.verdict}, the book says {r.book_says}"
             for r in rows.values() if r.surprising]
    if wrong:
        raise AssertionError(f"claims of {fig_id!r} disagree with the book: " + "; ".join(wrong))
    for claim in get_spec(fig_id).claims:
        row, names = rows[claim.claim_id], glue_names(claim.claim_id)
        glue(names["threshold"], row.threshold, display=False)
        glue(names["bar"], f"{claim.threshold:g}", display=False)
        glue(names["value"], format_value(row.value), display=False)
        glue(names["verdict"], row.verdict, display=False)
    return rows


def not_run(fig_id: str, reason: str) -> list[ClaimResult]:
    """The claims of ``fig_id`` as ``not-run`` (its data could not be made here) with ``reason``."""
    spec = get_spec(fig_id)
    return [_row(spec, claim, None, "not-run", reason) for claim in spec.claims]


def figure_results(fig_id: str, load: Callable[[str], FigureData]) -> list[ClaimResult]:
    """The claims of ``fig_id`` on ``load(fig_id)`` (called once); an unavailable input gives ``not-run``, and
    any other exception from the figure gives verdict ``error`` with ``<type>: <message>`` as the reason, so
    that one failing figure never stops the ledger."""
    if not get_spec(fig_id).claims:
        return []
    try:
        return evaluate_figure(fig_id, load(fig_id))
    except InputUnavailableError as err:
        return not_run(fig_id, f"input unavailable: {err}")
    except Exception as err:  # noqa: BLE001 - any fault of one figure is reported on its rows, the rest go on
        spec = get_spec(fig_id)
        return [_row(spec, claim, None, "error", error_text(err)) for claim in spec.claims]


def error_text(err: BaseException) -> str:
    """``<type>: <message>`` on one line, for a figure that raised."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


def online_results(ids: set[str] | None = None) -> list[ClaimResult]:
    """The online claims (:func:`~joma_lib.kit.registry.online_claims`; those in ``ids``, all when None):
    evaluated on their fetched data where the fetch can run, ``not-run`` with its reason where it cannot."""
    rows = []
    for claim_id, online in sorted(online_claims().items()):
        if ids is not None and claim_id not in ids:
            continue
        claim, reason = online.claim, ""
        value: float | None = None
        verdict: Verdict = "not-run"
        try:
            value, verdict = claim.evaluate(online.fetch())
            reason = UNMEASURED if verdict == "error" else ""
        except InputUnavailableError as err:
            reason = f"needs {online.needs}: {' '.join(str(err).split())}"
        rows.append(ClaimResult(claim_id, "", claim.paper_ref, claim.statement, value, _threshold(claim), verdict,
                                online.page, claim.book_says, reason, claim.kind, claim.threshold_set,
                                claim.threshold_note, blind=claim.blind))
    return rows


def pending_results() -> list[ClaimResult]:
    """The pending claims not superseded by a figure claim of the same id, as ``not-run`` rows."""
    backed = claim_ids_on_figures()
    return [ClaimResult(p.claim_id, "", p.paper_ref, p.statement, None, p.threshold, "not-run", p.page, "holds",
                        p.reason, p.kind) for p in PENDING if p.claim_id not in backed]


def claim_ids_on_figures() -> dict[str, str]:
    """Claim id -> figure id over all registered figures; an id used twice is a :class:`RuntimeError`."""
    found: dict[str, str] = {}
    for fig_id in figure_ids():
        for claim in get_spec(fig_id).claims:
            if claim.claim_id in found:
                raise RuntimeError(f"claim id {claim.claim_id!r} is declared by {found[claim.claim_id]!r} "
                                   f"and {fig_id!r}")
            found[claim.claim_id] = fig_id
    for claim_id in online_claims():
        if claim_id in found:
            raise RuntimeError(f"claim id {claim_id!r} is declared by {found[claim_id]!r} and as an online claim")
    return found


def all_claim_ids() -> list[str]:
    """Every claim id in the ledger (figure claims and pending ones), sorted."""
    return sorted(set(claim_ids_on_figures()) | set(online_claims()) | {p.claim_id for p in PENDING})


def select(ids: Iterable[str]) -> tuple[list[str], set[str] | None]:
    """Resolve requested ids (figure ids or claim ids) into (figures to evaluate, claim ids to keep).

    No ids: every figure with claims and every claim (``None``). An unknown id is a :class:`ValueError`.
    """
    ids = list(ids)
    on_figures = claim_ids_on_figures()
    if not ids:
        return sorted({*on_figures.values()}), None
    pending = {p.claim_id for p in PENDING} | set(online_claims())
    figures: set[str] = set()
    keep: set[str] = set()
    for requested in ids:
        if requested in figure_ids():
            figures.add(requested)
            keep.update(c.claim_id for c in get_spec(requested).claims)
        elif requested in on_figures:
            figures.add(on_figures[requested])
            keep.add(requested)
        elif requested in pending:
            keep.add(requested)
        else:
            raise ValueError(f"unknown figure or claim id {requested!r}; claim ids: {', '.join(all_claim_ids())}")
    return sorted(figures), keep


def ledger(ids: Iterable[str] = (), load: Callable[[str], FigureData] | None = None) -> list[ClaimResult]:
    """The ledger rows for ``ids`` (figure or claim ids; all when empty), sorted by claim id.

    ``load(fig_id)`` supplies each figure's data once (default: regenerate it with
    :func:`~joma_lib.kit.harness.compute`).
    """
    load = compute if load is None else load
    figures, keep = select(ids)
    rows = [row for fig_id in figures for row in figure_results(fig_id, load)]
    rows += pending_results() + online_results(keep)
    return sorted((r for r in rows if keep is None or r.claim_id in keep), key=lambda r: r.claim_id)


def surprises(rows: Iterable[ClaimResult]) -> list[ClaimResult]:
    """The rows whose verdict contradicts what the book says (see :attr:`ClaimResult.surprising`)."""
    return [r for r in rows if r.surprising]


def format_value(value: float | None) -> str:
    """A measured value for the ledger table (``-`` when not run)."""
    return "-" if value is None else f"{value:.4g}"


REGENERATED = "regenerated"
FROM_REFERENCE = "committed reference"


def book_ledger(expensive: Iterable[str] = ()) -> tuple[list[ClaimResult], dict[str, str]]:
    """The ledger as the book page builds it, and where each figure's data came from.

    Trained figures and the ``expensive`` ones are evaluated on their committed reference data (``verify``
    is what regenerates them); a figure whose external input is unavailable falls back to its reference, as
    its own page does. Every other figure is regenerated (once per figure store: see
    :func:`~joma_lib.kit.harness.registered_data`).
    """
    expensive = set(expensive)
    sources: dict[str, str] = {}

    def load(fig_id: str) -> FigureData:
        if get_spec(fig_id).trained or fig_id in expensive:
            sources[fig_id] = FROM_REFERENCE
            return load_reference(fig_id)
        try:
            data = registered_data(fig_id)  # with a figure store, the data its page kept (computed once per build)
        except InputUnavailableError:
            sources[fig_id] = f"{FROM_REFERENCE} (input unavailable here)"
            return load_reference(fig_id)
        sources[fig_id] = REGENERATED
        return data

    return ledger(load=load), sources
