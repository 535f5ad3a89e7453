"""Command line of the figure harness.

    python -m joma_lib.figures list                 # every figure id, paper reference, page
    python -m joma_lib.figures make [ids] [--out D] # PNG, SVG, npz and CSV into D (default figures_out/)
    python -m joma_lib.figures make table1 --full   # the paper-scale setting of a figure (slow; GPU advised)
    python -m joma_lib.figures verify [ids]         # regenerate, compare with the references; exit 1 on failure
    python -m joma_lib.figures verify --from DIR    # compare the data a book build kept in DIR; compute the rest
    python -m joma_lib.figures verify --from DIR --keep  # ... and keep what was computed in DIR
    python -m joma_lib.figures update [ids]         # rewrite the committed reference data
    python -m joma_lib.figures claims [ids] [--json] # the paper's claims: value, threshold, verdict
    python -m joma_lib.figures calibrate [ids]      # measure trained figures' tolerances across numerics/seeds
    python -m joma_lib.figures receipt fig4 [--from DIR]  # the receipt the page shows under the figure
    python -m joma_lib.figures cite fig4            # "Cite this figure": BibTeX and plain text
    python -m joma_lib.figures report [ids] --out F # verify + claims + package versions as JSON (a run report)
    python -m joma_lib.figures drift PINNED NEWEST [--issue F]  # compare two run reports; exit 1 on drift
    python -m joma_lib.figures sweep RUNS --figure fig6|fig8 -o F  # Fig. 6 or 8 drawn from our own LM runs

With no ids, ``make``/``verify``/``update``/``claims`` act on every registered figure (``claims`` also takes
claim ids). ``verify`` also evaluates each figure's claims on the data it regenerated and fails when a claim
the book says holds fails (a claim the book reports as failing that starts to hold is reported too). A figure whose
external input (e.g. the authors' published runs) cannot be found or downloaded is reported as SKIPPED, or as a failure
with ``verify --require-inputs``. ``verify --from DIR`` takes each figure's data from the figure store DIR
(``JOMA_FIGURE_STORE`` of a book build, see :mod:`joma_lib.kit.harness`) when they were kept there for this setting,
computes only the others, and says which were which.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from joma_lib.kit.calibration import VARIANTS, calibrate, trained_figure_ids
from joma_lib.kit.citation import cite
from joma_lib.kit.drift import compare_reports, issue_text, read_report, run_report, write_report
from joma_lib.kit.claims import error_text, evaluate_figure, ledger, surprises
from joma_lib.kit.harness import (
    STORE_ENV,
    MissingReferenceError,
    compare_with_reference,
    compute,
    draw,
    reference_path,
    save_outputs,
    store_dir,
    stored_or_computed,
    update_reference,
)
from joma_lib.kit.ledger_views import format_table
from joma_lib.kit.receipts import RECEIPT_SUFFIX, kept_receipt, receipt_text
from joma_lib.kit.registry import figure_ids, get_spec
from joma_lib.kit.style import figure_style
from joma_lib.kit.sweeps import plot_sweep
from joma_lib.base.io import InputCorruptError, InputUnavailableError, writable_dir
from joma_lib.base.precision import PrecisionUnavailableError
from joma_lib.base.startup import command


def _ids(requested: list[str]) -> list[str]:
    """Validate requested ids (clear message on unknown ones); all ids when none requested."""
    if not requested:
        return figure_ids()
    for fig_id in requested:
        get_spec(fig_id)
    return requested


def _cmd_list(_: argparse.Namespace) -> int:
    print(f"{'id':<24} {'paper':<30} {'page':<22} title")
    for fig_id in figure_ids():
        spec = get_spec(fig_id)
        print(f"{fig_id:<24} {spec.paper_ref:<30} {spec.chapter:<22} {spec.title}")
    return 0


def _error_line(fig_id: str, err: BaseException) -> str:
    """``<figure id> ERROR: <type>: <message>``: how one failing figure is reported before the next is made."""
    return f"{fig_id} ERROR: {error_text(err)}"


def _cmd_make(args: argparse.Namespace) -> int:
    ids = _ids(args.ids)
    out = writable_dir(args.out, "--out")  # before any computing: a bad folder must not waste a long run
    failed = 0
    for fig_id in ids:
        start = time.perf_counter()
        try:
            data = compute(fig_id, **(get_spec(fig_id).full_params if args.full else {}))
            paths = save_outputs(fig_id, draw(fig_id, data), data, out)
        except Exception as err:  # noqa: BLE001 - one failing figure never stops the others
            failed += 1
            print(_error_line(fig_id, err))
            continue
        print(f"{fig_id}: {', '.join(str(p) for p in paths)} ({time.perf_counter() - start:.1f} s)")
    if failed:
        print(f"{failed} figure(s) failed")
    return 1 if failed else 0


def _readable_dir(path: str, name: str) -> Path:
    """``path`` as an existing folder; a :class:`ValueError` naming ``name`` otherwise."""
    folder = Path(path)
    if not folder.is_dir():
        raise ValueError(f"{name} must be an existing folder (a figure store, e.g. _build/figure_data), got {path!r}")
    return folder


def _cmd_verify(args: argparse.Namespace) -> int:
    failures = skipped = from_store = 0
    ids = _ids(args.ids)
    store = _readable_dir(args.from_dir, "--from") if args.from_dir is not None else None
    if args.keep and store is None:
        raise ValueError("verify --keep needs --from DIR: the figure store to keep the computed data in")
    claim_rows = []
    print(f"{'figure':<24} {'worst array':<22} {'max |dev|':>11} {'rtol':>8} {'atol':>8} {'dev/tol':>9}  verdict")
    for fig_id in ids:
        try:
            data, stored = stored_or_computed(fig_id, store, keep=args.keep)
            c = compare_with_reference(fig_id, data)
            rows = evaluate_figure(fig_id, data)
        except (MissingReferenceError, InputCorruptError) as err:  # no usable reference or a damaged input file
            failures += 1
            print(f"{fig_id:<24} {'-':<22} {'-':>11} {'-':>8} {'-':>8} {'-':>9}  ERROR: {err}")
            continue
        except InputUnavailableError as err:
            # --require-inputs is about external files; a precision this CPU cannot run is never required
            required = args.require_inputs and not isinstance(err, PrecisionUnavailableError)
            if required:
                failures += 1
            else:
                skipped += 1
            print(f"{fig_id:<24} {'-':<22} {'-':>11} {'-':>8} {'-':>8} {'-':>9}  "
                  f"{'ERROR' if required else 'SKIPPED'} (input unavailable): {err}")
            continue
        except Exception as err:  # noqa: BLE001 - any other fault of one figure: report it, check the next
            failures += 1
            print(_error_line(fig_id, err))
            continue
        claim_rows += rows
        # a claim the book says holds that fails or errs, and one it says fails whose failure was not measured
        broken = [r.claim_id for r in surprises(rows) if r.book_says == "holds" or r.verdict == "error"]
        verdict = "ok" if c.passed else f"FAIL {c.message}".rstrip()
        if broken:
            verdict = ("FAIL" if c.passed else verdict) + f" claims fail: {', '.join(broken)}"
        failures += not c.passed or bool(broken)
        from_store += stored
        if store is not None:
            verdict += " (stored)" if stored else " (computed)"
        print(f"{fig_id:<24} {c.worst_array:<22} {c.max_abs_dev:>11.3g} {c.rtol:>8.1g} {c.atol:>8.1g} "
              f"{c.ratio:>9.3g}  {verdict}")
    held = sum(r.verdict == r.book_says for r in claim_rows)
    print(f"claims: {held} of {len(claim_rows)} as the book states")
    for r in surprises(claim_rows):
        if r.book_says == "fails" and r.verdict == "holds":
            print(f"note: claim {r.claim_id} now HOLDS (value {r.value:.4g}, threshold {r.threshold}) although the "
                  f"book reports it fails: update the page and the claim's book_says")
    if store is not None:
        print(f"{from_store} figure(s) compared from {store}, the others computed here")
    if skipped:
        print(f"{skipped} figure(s) not checked: their external input is unavailable here")
    print(f"{failures} figure(s) failed" if failures else "all checked figures match their references")
    return 1 if failures else 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    ids = args.ids or trained_figure_ids()
    for fig_id in ids:
        record = calibrate(fig_id, args.variants or None, jobs=args.jobs)
        print(f"{fig_id}: {'array':<16} {'numerics spread':>16} {'seed spread':>12} {'atol':>10}")
        for name, a in record["arrays"].items():
            seed = "-" if a["seed_spread"] is None else f"{a['seed_spread']:.3g}"
            print(f"{'':<{len(fig_id) + 2}}{name:<16} {a['numerics_spread']:>16.3g} {seed:>12} {a['atol']:>10.3g}")
    return 0


def _cmd_claims(args: argparse.Namespace) -> int:
    """The ledger; exit 1 when a claim the book says holds fails, or a figure raised (verdict ``error``)."""
    rows = ledger(args.ids)
    broken = [r for r in surprises(rows) if r.book_says == "holds"]
    if args.json:
        print(json.dumps([r.as_json() for r in rows], indent=2))
    else:
        print(format_table(rows))
        counts = {v: sum(r.verdict == v for r in rows) for v in ("holds", "fails", "not-run", "error")}
        print(f"{len(rows)} claims: {counts['holds']} hold, {counts['fails']} fail, {counts['not-run']} not run, "
              f"{counts['error']} error")
        for r in broken:
            print(f"{r.claim_id}: the book says it holds, here it {'raised' if r.verdict == 'error' else 'fails'}")
    return 1 if broken else 0


def _cmd_update(args: argparse.Namespace) -> int:
    for fig_id in _ids(args.ids):
        print(f"{fig_id}: wrote {update_reference(fig_id)}")
    return 0


def _cmd_receipt(args: argparse.Namespace) -> int:
    """The receipt the page wrote under the figure: from ``--from DIR`` (a figure store or a page's ``_generated``
    folder), else the page's ``_generated`` folder, else the figure store (``JOMA_FIGURE_STORE``)."""
    fig_id = _ids([args.fig_id])[0]
    page_folder = Path(get_spec(fig_id).chapter).parent / "_generated"
    folders: list[Path | None] = [_readable_dir(args.from_dir, "--from")] if args.from_dir else [page_folder,
                                                                                                  store_dir()]
    for folder in filter(None, folders):
        page_receipt = folder / f"{fig_id}.{RECEIPT_SUFFIX}"
        receipt = (json.loads(page_receipt.read_text()) if page_receipt.exists()
                   else kept_receipt(reference_path(fig_id, folder).with_suffix(".json")))
        if receipt is not None:
            print(receipt_text(receipt))
            return 0
    looked = ", ".join(str(f) for f in filter(None, folders)) + ("" if args.from_dir or store_dir() else
                                                                 f" ({STORE_ENV} is not set)")
    print(f"no receipt of {fig_id} in {looked}: a receipt is written when a page shows the figure "
          f"(make book, or execute {get_spec(fig_id).chapter})", file=sys.stderr)
    return 1


def _cmd_cite(args: argparse.Namespace) -> int:
    citation = cite(_ids([args.fig_id])[0])
    print(f"{citation.bibtex}\n\n{citation.text}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    out = Path(args.out)
    writable_dir(str(out.parent), "--out")  # before any computing
    store = _readable_dir(args.from_dir, "--from") if args.from_dir is not None else None
    report = run_report(_ids(args.ids) if args.ids else None, store)
    write_report(report, out)
    failed = [f for f, entry in report["figures"].items() if not entry.get("passed") and "skipped" not in entry]
    print(f"{out}: {len(report['figures'])} figure(s) on {report['device']}, {len(failed)} beyond tolerance or "
          f"failing{': ' + ', '.join(failed) if failed else ''}; {len(report['claims'])} claim(s)")
    return 0


def _cmd_drift(args: argparse.Namespace) -> int:
    """Exit 1 when a figure drifted or a claim changed verdict (the issue text is printed, and written to --issue)."""
    pinned, newest = read_report(Path(args.pinned)), read_report(Path(args.newest))
    drift = compare_reports(pinned, newest)
    text = issue_text(drift, pinned, newest, run_url=args.run_url)
    print(text, end="")
    if args.issue:
        Path(args.issue).write_text(text)
    return 1 if drift else 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    """Fig. 6 or 8 drawn from our own runs (:func:`~joma_lib.kit.sweeps.plot_sweep`) into ``--output``."""
    with figure_style():
        plot_sweep(args.runs, args.figure, args.lr).savefig(args.output, bbox_inches="tight")
    print(f"wrote {args.output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joma_lib.figures", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list every registered figure").set_defaults(run=_cmd_list)
    for name, run, help_text in [("make", _cmd_make, "regenerate figures and save PNG/SVG/npz/CSV"),
                                 ("verify", _cmd_verify, "compare regenerated data with the references"),
                                 ("update", _cmd_update, "rewrite the committed reference data"),
                                 ("claims", _cmd_claims, "evaluate the paper's claims (figure or claim ids)"),
                                 ("calibrate", _cmd_calibrate,
                                  "measure trained figures' tolerances across numerics variants and seeds")]:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("ids", nargs="*", help="figure ids (default: all); for claims also claim ids")
        p.set_defaults(run=run)
    for name, run, help_text in [("receipt", _cmd_receipt, "print the receipt the page shows under a figure"),
                                 ("cite", _cmd_cite, "print a figure's citation: BibTeX and plain text")]:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("fig_id", help="a figure id (list: python -m joma_lib.figures list)")
        p.set_defaults(run=run)
    report = sub.add_parser("report", help="what verify and claims find here, with the package versions, as JSON")
    report.add_argument("ids", nargs="*", help="figure ids (default: all, and the online claims)")
    report.add_argument("--out", required=True, help="the JSON file to write")
    report.add_argument("--from", dest="from_dir", metavar="DIR", help="a figure store whose kept data to compare")
    report.set_defaults(run=_cmd_report)
    drift = sub.add_parser("drift", help="compare a pinned and a newest run report; exit 1 on drift")
    drift.add_argument("pinned", help="the run report made with the pinned dependencies")
    drift.add_argument("newest", help="the run report made with the newest releases")
    drift.add_argument("--issue", help="also write the issue text (Markdown) into this file")
    drift.add_argument("--run-url", default="", help="the workflow run, linked from the issue")
    drift.set_defaults(run=_cmd_drift)
    sweep = sub.add_parser("sweep", help="draw Fig. 6 or Fig. 8 from our own runs, as from the authors' data")
    sweep.add_argument("runs", help="a run directory (python -m joma_lib.lm run --out) or a collected .npz")
    sweep.add_argument("--figure", choices=("fig6", "fig8"), default="fig6",
                       help="fig6: every depth at one learning rate; fig8: every learning rate of the depth "
                            "trained at the most of them (on a tie, the deepest)")
    sweep.add_argument("--lr", type=float, default=None,
                       help="Fig. 6: the learning rate to show (default: the only one)")
    sweep.add_argument("-o", "--output", required=True, help="image file (png, svg, pdf)")
    sweep.set_defaults(run=_cmd_sweep)
    sub.choices["receipt"].add_argument("--from", dest="from_dir", metavar="DIR",
                                        help="a figure store or a page's _generated folder to read the receipt from")
    sub.choices["verify"].add_argument("--require-inputs", action="store_true",
                                       help="count a figure whose external input is unavailable as a failure")
    sub.choices["verify"].add_argument("--from", dest="from_dir", metavar="DIR",
                                       help="take the data kept in the figure store DIR (JOMA_FIGURE_STORE of a "
                                            "book build) instead of computing them; compute the figures not there")
    sub.choices["verify"].add_argument("--keep", action="store_true",
                                       help="with --from: keep the data computed here in DIR, as a book build "
                                            "does, so that a later verify --from DIR compares them without "
                                            "computing them again")
    sub.choices["claims"].add_argument("--json", action="store_true",
                                       help="print a JSON list of objects (id, figure, paper_ref, statement, "
                                            "value, threshold, verdict, page; reason when not run)")
    sub.choices["calibrate"].add_argument("--variants", nargs="+", choices=sorted(VARIANTS),
                                          help="numerics variants to run (default: all that can run here)")
    sub.choices["calibrate"].add_argument("--jobs", type=int, default=1, help="variants run at once (default 1)")
    sub.choices["make"].add_argument("--out", default="figures_out", help="output folder (default: figures_out)")
    sub.choices["make"].add_argument("--full", action="store_true",
                                     help="use the figure's paper-scale full_params (may be slow; GPU advised)")
    args = parser.parse_args(argv)
    # bad ids/parameters, disk and device faults: one line; Ctrl-C: one line, exit 130
    return command(lambda: int(args.run(args)), interrupted="the figures finished before it are kept")


if __name__ == "__main__":
    sys.exit(main())
