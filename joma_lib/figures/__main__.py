"""Command line of the figure harness.

    python -m joma_lib.figures list                 # every figure id, paper reference, page
    python -m joma_lib.figures make [ids] [--out D] # PNG, SVG, npz and CSV into D (default figures_out/)
    python -m joma_lib.figures make table1 --full   # the paper-scale setting of a figure (slow; GPU advised)
    python -m joma_lib.figures verify [ids]         # regenerate, compare with the references; exit 1 on failure
    python -m joma_lib.figures update [ids]         # rewrite the committed reference data

With no ids, ``make``/``verify``/``update`` act on every registered figure. A figure whose external
input (e.g. the authors' published runs) cannot be found or downloaded is reported as SKIPPED, or
as a failure with ``verify --require-inputs``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from joma_lib.figures.harness import (
    MissingReferenceError,
    compute,
    draw,
    save_outputs,
    update_reference,
    verify,
)
from joma_lib.figures.registry import figure_ids, get_spec
from joma_lib.io import InputUnavailableError


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


def _cmd_make(args: argparse.Namespace) -> int:
    for fig_id in _ids(args.ids):
        start = time.perf_counter()
        data = compute(fig_id, **(get_spec(fig_id).full_params if args.full else {}))
        paths = save_outputs(fig_id, draw(fig_id, data), data, Path(args.out))
        print(f"{fig_id}: {', '.join(str(p) for p in paths)} ({time.perf_counter() - start:.1f} s)")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    failures = skipped = 0
    ids = _ids(args.ids)
    print(f"{'figure':<24} {'worst array':<22} {'max |dev|':>11} {'rtol':>8} {'atol':>8} {'dev/tol':>9}  verdict")
    for fig_id in ids:
        try:
            c = verify(fig_id)
        except MissingReferenceError as err:
            failures += 1
            print(f"{fig_id:<24} {'-':<22} {'-':>11} {'-':>8} {'-':>8} {'-':>9}  ERROR: {err}")
            continue
        except InputUnavailableError as err:
            if args.require_inputs:
                failures += 1
            else:
                skipped += 1
            print(f"{fig_id:<24} {'-':<22} {'-':>11} {'-':>8} {'-':>8} {'-':>9}  "
                  f"{'ERROR' if args.require_inputs else 'SKIPPED'} (input unavailable): {err}")
            continue
        verdict = "ok" if c.passed else f"FAIL {c.message}".rstrip()
        failures += not c.passed
        print(f"{fig_id:<24} {c.worst_array:<22} {c.max_abs_dev:>11.3g} {c.rtol:>8.1g} {c.atol:>8.1g} "
              f"{c.ratio:>9.3g}  {verdict}")
    if skipped:
        print(f"{skipped} figure(s) not checked: their external input is unavailable here")
    print(f"{failures} figure(s) failed" if failures else "all checked figures match their references")
    return 1 if failures else 0


def _cmd_update(args: argparse.Namespace) -> int:
    for fig_id in _ids(args.ids):
        print(f"{fig_id}: wrote {update_reference(fig_id)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joma_lib.figures", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list every registered figure").set_defaults(run=_cmd_list)
    for name, run, help_text in [("make", _cmd_make, "regenerate figures and save PNG/SVG/npz/CSV"),
                                 ("verify", _cmd_verify, "compare regenerated data with the references"),
                                 ("update", _cmd_update, "rewrite the committed reference data")]:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("ids", nargs="*", help="figure ids (default: all)")
        p.set_defaults(run=run)
    sub.choices["verify"].add_argument("--require-inputs", action="store_true",
                                       help="count a figure whose external input is unavailable as a failure")
    sub.choices["make"].add_argument("--out", default="figures_out", help="output folder (default: figures_out)")
    sub.choices["make"].add_argument("--full", action="store_true",
                                     help="use the figure's paper-scale full_params (may be slow; GPU advised)")
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ValueError as err:  # unknown ids and bad parameters: a message, not a traceback
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
