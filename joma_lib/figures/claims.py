"""The claims ledger: every claim of the paper, its verdict on our data, and where the book shows it.

A figure declares the claims its data test (:attr:`FigureSpec.claims`, :class:`~joma_lib.figures.registry.Claim`).
Claims the paper makes that no figure backs yet, or that cannot be tested here (a GPU, the internet, data the
authors do not ship), are listed in :data:`PENDING` with the reason; their verdict is ``not-run``. A figure claim
with the same id supersedes the pending entry, so attaching a claim to a figure is all it takes to move it from
"not run" to a verdict.

The ledger is evaluated by ``python -m joma_lib.figures claims`` (which regenerates each figure once), by
``verify`` (on the data it regenerates anyway) and by the book's ledger page (``book/claims.md``), which may
evaluate on already computed data with :func:`evaluate_figure` so that it never disagrees with the check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from joma_lib.figures.harness import compute, load_reference
from joma_lib.figures.registry import Claim, FigureData, FigureSpec, Verdict, figure_ids, get_spec
from joma_lib.io import InputUnavailableError


@dataclass(frozen=True)
class PendingClaim:
    """A claim of the paper that no figure tests yet, or that cannot be tested here.

    Attributes:
        claim_id: stable id; a figure claim with the same id replaces this entry.
        paper_ref: where the paper makes the claim.
        statement: one line, what is claimed.
        reason: why there is no verdict (``"not yet run"``, ``"needs a GPU"``, ...).
        page: the book page that discusses it (``"book/rerun.md"``), or ``""``.
    """

    claim_id: str
    paper_ref: str
    statement: str
    reason: str
    page: str = ""


NOT_YET_RUN = "not yet run"

PENDING: tuple[PendingClaim, ...] = (
    PendingClaim("table1-layer0-learns", "Table 1",
                 "Training raises the layer-0 alignment score with the level-0 latents above its value at "
                 "initialisation.", NOT_YET_RUN, "book/hierarchy.md"),
    PendingClaim("table1-level-specific", "Table 1",
                 "The hidden neurons of layer k align best with the latents of level k (not of other levels).",
                 NOT_YET_RUN, "book/hierarchy.md"),
    PendingClaim("fig7-srank-bounce", "Fig. 7",
                 "The stable rank of the lower MLP weight of pre-trained models (Pythia, OPT) first drops, then "
                 "bounces back over training checkpoints.", NOT_YET_RUN, "book/rerun.md"),
    PendingClaim("fig6-bounce-without-adam-reset", "Fig. 6",
                 "The entropy bounce of Fig. 6 appears in a run without the per-epoch restart of Adam of the "
                 "authors' script.", NOT_YET_RUN, "book/rerun.md"),
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

    @property
    def surprising(self) -> bool:
        """The verdict contradicts the book (a claim it says holds fails or errs, or one it says fails holds)."""
        return self.verdict != "not-run" and self.verdict != self.book_says

    def as_json(self) -> dict[str, Any]:
        """The ledger row as JSON: ``id, figure, paper_ref, statement, value, threshold, verdict, page`` (+ ``reason``)."""
        row: dict[str, Any] = {
            "id": self.claim_id, "figure": self.figure, "paper_ref": self.paper_ref, "statement": self.statement,
            "value": self.value if self.value is None or math.isfinite(self.value) else str(self.value),
            "threshold": self.threshold, "verdict": self.verdict, "page": self.page}
        if self.verdict in ("not-run", "error"):
            row["reason"] = self.reason
        return row


def page_of(spec: FigureSpec) -> str:
    """Where the book shows a figure: its chapter and the figure's anchor (``book/theorem1.md#fig2a``)."""
    return f"{spec.chapter}#{spec.fig_id}"


def _threshold(claim: Claim) -> str:
    return f"{claim.relation} {claim.threshold:g}"


def _row(spec: FigureSpec, claim: Claim, value: float | None, verdict: Verdict, reason: str = "") -> ClaimResult:
    return ClaimResult(claim.claim_id, spec.fig_id, claim.paper_ref, claim.statement, value, _threshold(claim),
                       verdict, page_of(spec), claim.book_says, reason)


def evaluate_figure(fig_id: str, data: FigureData) -> list[ClaimResult]:
    """Every claim of ``fig_id`` evaluated on ``data`` (already computed: nothing is regenerated)."""
    spec = get_spec(fig_id)
    rows = []
    for claim in spec.claims:
        value, verdict = claim.evaluate(data)
        rows.append(_row(spec, claim, value, verdict))
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


def pending_results() -> list[ClaimResult]:
    """The pending claims not superseded by a figure claim of the same id, as ``not-run`` rows."""
    backed = claim_ids_on_figures()
    return [ClaimResult(p.claim_id, "", p.paper_ref, p.statement, None, "", "not-run", p.page, "holds", p.reason)
            for p in PENDING if p.claim_id not in backed]


def claim_ids_on_figures() -> dict[str, str]:
    """Claim id -> figure id over all registered figures; an id used twice is a :class:`RuntimeError`."""
    found: dict[str, str] = {}
    for fig_id in figure_ids():
        for claim in get_spec(fig_id).claims:
            if claim.claim_id in found:
                raise RuntimeError(f"claim id {claim.claim_id!r} is declared by {found[claim.claim_id]!r} "
                                   f"and {fig_id!r}")
            found[claim.claim_id] = fig_id
    return found


def all_claim_ids() -> list[str]:
    """Every claim id in the ledger (figure claims and pending ones), sorted."""
    return sorted(set(claim_ids_on_figures()) | {p.claim_id for p in PENDING})


def select(ids: Iterable[str]) -> tuple[list[str], set[str] | None]:
    """Resolve requested ids (figure ids or claim ids) into (figures to evaluate, claim ids to keep).

    No ids: every figure with claims and every claim (``None``). An unknown id is a :class:`ValueError`.
    """
    ids = list(ids)
    on_figures = claim_ids_on_figures()
    if not ids:
        return sorted({*on_figures.values()}), None
    pending = {p.claim_id for p in PENDING}
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
    :func:`~joma_lib.figures.harness.compute`).
    """
    load = compute if load is None else load
    figures, keep = select(ids)
    rows = [row for fig_id in figures for row in figure_results(fig_id, load)]
    rows += pending_results()
    return sorted((r for r in rows if keep is None or r.claim_id in keep), key=lambda r: r.claim_id)


def surprises(rows: Iterable[ClaimResult]) -> list[ClaimResult]:
    """The rows whose verdict contradicts what the book says (see :attr:`ClaimResult.surprising`)."""
    return [r for r in rows if r.surprising]


def format_value(value: float | None) -> str:
    """A measured value for the ledger table (``-`` when not run)."""
    return "-" if value is None else f"{value:.4g}"


def format_table(rows: Iterable[ClaimResult], width: Mapping[str, int] | None = None) -> str:
    """The ledger as a plain-text table: id | paper | statement | value | threshold | verdict."""
    w = {"id": 34, "paper": 18, "statement": 70, **(width or {})}
    lines = [f"{'id':<{w['id']}} {'paper':<{w['paper']}} {'statement':<{w['statement']}} {'value':>10} "
             f"{'threshold':<12} verdict"]
    for r in rows:
        statement = r.statement if len(r.statement) <= w["statement"] else r.statement[:w["statement"] - 3] + "..."
        verdict = r.verdict + (f" ({r.reason})" if r.verdict in ("not-run", "error") else "")
        if r.book_says == "fails" and r.verdict != "not-run":
            verdict += " (the book reports it fails)"
        lines.append(f"{r.claim_id:<{w['id']}} {r.paper_ref:<{w['paper']}} {statement:<{w['statement']}} "
                     f"{format_value(r.value):>10} {r.threshold:<12} {verdict}")
    return "\n".join(lines)


REGENERATED = "regenerated"
FROM_REFERENCE = "committed reference"


def book_ledger(expensive: Iterable[str] = ()) -> tuple[list[ClaimResult], dict[str, str]]:
    """The ledger as the book page builds it, and where each figure's data came from.

    Trained figures and the ``expensive`` ones are evaluated on their committed reference data (``verify``
    is what regenerates them); a figure whose external input is unavailable falls back to its reference, as
    its own page does. Every other figure is regenerated.
    """
    expensive = set(expensive)
    sources: dict[str, str] = {}

    def load(fig_id: str) -> FigureData:
        if get_spec(fig_id).trained or fig_id in expensive:
            sources[fig_id] = FROM_REFERENCE
            return load_reference(fig_id)
        try:
            data = compute(fig_id)
        except InputUnavailableError:
            sources[fig_id] = f"{FROM_REFERENCE} (input unavailable here)"
            return load_reference(fig_id)
        sources[fig_id] = REGENERATED
        return data

    return ledger(load=load), sources


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", r"\|").replace("\n", " ")


def _page_link(page: str, label: str) -> str:
    """A MyST link to ``book/<doc>.md#<anchor>`` from a page in ``book/``."""
    doc, _, anchor = page.partition("#")
    doc = doc.removeprefix("book/").removesuffix(".md")
    return f"{{ref}}`{label} <{anchor}>`" if anchor else (f"{{doc}}`{doc}`" if doc else "-")


def markdown_table(rows: Iterable[ClaimResult], sources: Mapping[str, str] | None = None) -> str:
    """The ledger as a MyST Markdown table (id, paper, statement, value, threshold, verdict, where shown)."""
    lines = ["| id | paper | statement | value | threshold | verdict | shown in |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = f"**{r.verdict}**"
        if r.verdict in ("not-run", "error"):
            verdict += f": {r.reason}"
        elif r.book_says == "fails":
            verdict += " (as the book reports)"
        if r.figure and sources and sources.get(r.figure, REGENERATED) != REGENERATED:
            verdict += f" [on the {sources[r.figure]}]"
        link = _page_link(r.page, r.figure) if r.figure else _page_link(r.page, "")
        lines.append(f"| `{r.claim_id}` | {_cell(r.paper_ref)} | {_cell(r.statement)} | {format_value(r.value)} | "
                     f"{_cell(r.threshold) or '-'} | {_cell(verdict)} | {link} |")
    return "\n".join(lines)
