"""Views of the claims ledger (:mod:`joma_lib.kit.claims`): the plain-text table that ``python -m joma_lib.figures
claims`` prints, and the headline and HTML table of the book's ledger page (``book/claims.md``).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping

from joma_lib.kit.claims import REGENERATED, ClaimResult, format_value
from joma_lib.kit.registry import KINDS, Kind, get_spec


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


VERDICT_ORDER: dict[str, int] = {"error": 0, "fails": 1, "not-run": 2, "holds": 3}
"""Within a kind, figures that raised come first, then failures, the claims not run, and those that hold."""
COLUMNS = ("claim", "paper ref", "statement", "value", "threshold", "verdict", "shown in")
"""The ledger table's columns, in order (also each cell's ``data-label`` for the card layout on phones)."""


def by_kind(rows: Iterable[ClaimResult]) -> dict[Kind, list[ClaimResult]]:
    """The rows grouped by kind (paper, companion, sanity), failures and not-run rows first in each group."""
    groups: dict[Kind, list[ClaimResult]] = {kind: [] for kind in KINDS}
    for row in rows:
        groups[row.kind].append(row)
    return {kind: sorted(group, key=lambda r: (VERDICT_ORDER[r.verdict], r.claim_id))
            for kind, group in groups.items()}


def verdict_counts(rows: Iterable[ClaimResult]) -> dict[str, int]:
    """How many rows raised, fail, were not run and hold."""
    rows = list(rows)
    return {verdict: sum(r.verdict == verdict for r in rows) for verdict in VERDICT_ORDER}


def headline(rows: Iterable[ClaimResult]) -> str:
    """The ledger's headline: ``paper claims: `` and :func:`paper_counts` of ``rows``."""
    return "paper claims: " + paper_counts(rows)


def paper_counts(rows: Iterable[ClaimResult]) -> str:
    """The count of the paper's claims among ``rows``, on those that can tell its mechanism from its absence
    (:attr:`~joma_lib.kit.claims.ClaimResult.evidence`): ``N hold, M fail, K not run`` (``, E error`` added when a
    figure raised), then how many more paper claims are blind (not counted).

    The one count of paper claims that the headline, the table's header of the paper's claims and each result's
    verdict line (:func:`story_markdown`) print, so that they add up and cannot disagree."""
    rows = list(rows)
    text = _counts_text(verdict_counts(r for r in rows if r.evidence))
    blind = [r for r in rows if r.kind == "paper" and r.blind]
    if blind:
        text += (f"; {len(blind)} more {'holds' if len(blind) == 1 else 'hold'} without the mechanism too "
                 f"(untrained or control), not counted")
    return text


STORY_VERDICTS = ("holds", "fails", "holds in part", "not tested")
"""The verdict of one result of the paper, from its evidence rows only: all hold, all fail, some of each, or
none run (no paper claim that can tell the mechanism from its absence has a verdict)."""


def story_rows(story: Mapping[str, Iterable[str]], rows: Iterable[ClaimResult]) -> dict[str, list[ClaimResult]]:
    """Each result of ``story`` (a name -> figure and claim ids) with its ledger ``rows``: a figure id brings every
    claim of that figure, a claim id its own row (a KeyError names an id the ledger does not have)."""
    rows = list(rows)
    by_figure: dict[str, list[ClaimResult]] = {}
    for row in rows:
        by_figure.setdefault(row.figure, []).append(row)
    by_id = {row.claim_id: row for row in rows}
    return {name: [r for i in wanted for r in (by_figure[i] if i in by_figure else [by_id[i]])]
            for name, wanted in story.items()}


def story_verdict(rows: Iterable[ClaimResult]) -> str:
    """One result's verdict (:data:`STORY_VERDICTS`) from the rows that are evidence; caveats do not count."""
    verdicts = {r.verdict for r in rows if r.evidence and r.verdict != "not-run"}
    if not verdicts:
        return "not tested"
    if verdicts <= {"holds"}:
        return "holds"
    return "fails" if "holds" not in verdicts else "holds in part"


def _row_markdown(row: ClaimResult) -> str:
    verdict = row.verdict + (f" ({row.reason})" if row.verdict in ("not-run", "error") else "")
    blind = f"; holds without the mechanism too: {row.blind}" if row.blind else ""
    return f"- *{row.kind}*, `{row.claim_id}`: {row.statement} **{verdict}**{blind}"


def story_markdown(rows: Iterable[ClaimResult], subject: str = "") -> str:
    """One result of the paper (or one experiment: ``subject``, e.g. ``"the paper-scale re-run"``) in MyST: the
    verdict, on ``subject`` when given, with :func:`paper_counts` of the rows, then a collapsed block with every
    row (kind, id, statement, verdict): first the evidence, then the caveats (companion and sanity rows, and paper
    rows that hold without the mechanism); a block whose rows are all evidence says so in place of caveats."""
    rows = list(rows)
    evidence = [r for r in rows if r.evidence]
    caveats = [r for r in rows if not r.evidence]
    about = f" on {subject}" if subject else ""
    block = ["", f":::{{dropdown}} The ledger's rows for {subject or 'this result'}",
             "**Evidence** (claims of the paper that can fail when the mechanism is missing):", ""]
    block += [_row_markdown(r) for r in evidence] or ["- none"]
    block += ["", "**Caveats** (our checks, guards, and claims that hold without the mechanism; not counted):", ""]
    block += [_row_markdown(r) for r in caveats] or ["- none among these rows: they are all claims of the paper "
                                                     "that can fail when the mechanism is missing"]
    block.append(":::")
    return (f"**Verdict{about}: {story_verdict(rows)}** (claims of the paper that could fail without its mechanism: "
            f"{paper_counts(rows)}).\n" + "\n".join(block))


def _counts_text(n: Mapping[str, int]) -> str:
    text = f"{n['holds']} hold, {n['fails']} fail, {n['not-run']} not run"
    return text + (f", {n['error']} error" if n["error"] else "")


def _html(text: str) -> str:
    """Escaped text in which ``$...$`` becomes inline maths, as Sphinx writes it (MathJax typesets it)."""
    parts = html.escape(text, quote=False).split("$")
    if len(parts) % 2 == 0:
        raise ValueError(f"unbalanced $ in a ledger statement: {text!r}")
    return "".join(part if k % 2 == 0 else f'<span class="math notranslate nohighlight">\\({part}\\)</span>'
                   for k, part in enumerate(parts))


def _html_link(row: ClaimResult, titles: Mapping[str, str]) -> str:
    """A link from the ledger page (in ``book/``) to where the claim is shown, labelled with the figure's or page's
    title."""
    doc, _, anchor = row.page.partition("#")
    name = doc.removeprefix("book/").removesuffix(".md")
    if not name:
        return "-"
    label = get_spec(row.figure).title if row.figure else titles.get(name, name)
    href = f"{name}.html" + (f"#{anchor}" if anchor else "")
    return f'<a href="{html.escape(href)}">{html.escape(label)}</a>'


def _verdict_html(row: ClaimResult, sources: Mapping[str, str]) -> str:
    text = f"<strong>{row.verdict}</strong>"
    if row.verdict in ("not-run", "error"):
        text += f": {html.escape(row.reason)}"
    elif row.book_says == "fails":
        text += " (as the book reports)"
    if row.blind:
        text += (f'<br><small class="joma-blind">not counted: holds without the mechanism too '
                 f'({html.escape(row.blind)})</small>')
    if row.stored_run:
        text += " [stored run]"
    if row.figure and sources.get(row.figure, REGENERATED) != REGENERATED:
        text += f" <small>[on the {html.escape(sources[row.figure])}]</small>"
    return text


def _threshold_html(row: ClaimResult) -> str:
    text = html.escape(row.threshold) or "-"
    if row.threshold_set == "after-data":
        text += f'<br><small class="joma-after-data">set after the data: {html.escape(row.threshold_note)}</small>'
    return text


def html_table(rows: Iterable[ClaimResult], sources: Mapping[str, str] | None = None,
               titles: Mapping[str, str] | None = None) -> str:
    """The ledger as one HTML table (``class="joma-ledger"``), grouped by kind.

    Each kind opens with a header row and its counts (the paper's claims as the headline counts them,
    :func:`paper_counts`); within a kind failures come first, then the claims not run. Rows carry
    ``class="verdict-<verdict>"`` and every cell ``data-label="<column>"``; ``titles`` maps a page name
    (``"fig7"``) to its title, used for links to a page rather than to a figure.
    """
    sources, titles = sources or {}, titles or {}
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    lines = ['<table class="joma-ledger">', f"<thead><tr>{head}</tr></thead>"]
    for kind, group in by_kind(rows).items():
        if not group:
            continue
        counts = paper_counts(group) if kind == "paper" else _counts_text(verdict_counts(group))
        lines.append(f'<tbody class="kind-{kind}"><tr class="kind-header"><th colspan="{len(COLUMNS)}">'
                     f"{KIND_TITLES[kind]}: {counts}</th></tr>")
        for r in group:
            cells = (f'<code class="joma-claim-id" style="white-space: nowrap; font-size: 0.8em">{r.claim_id}</code>',
                     _html(r.paper_ref), _html(r.statement), format_value(r.value), _threshold_html(r),
                     _verdict_html(r, sources), _html_link(r, titles))
            tds = "".join(f'<td data-label="{c}">{cell}</td>' for c, cell in zip(COLUMNS, cells, strict=True))
            lines.append(f'<tr class="verdict-{r.verdict}">{tds}</tr>')
        lines.append("</tbody>")
    lines.append("</table>")
    return "\n".join(lines)


KIND_TITLES: dict[Kind, str] = {
    "paper": "Claims of the paper",
    "companion": "Companion checks (our controls, extensions and readings of data)",
    "sanity": "Sanity guards (true by construction)",
}
