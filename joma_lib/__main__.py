"""``python -m joma_lib doctor | table1``: the two command lines that are not a layer's own.

``doctor`` says what this machine gives the companion (:mod:`joma_lib.kit.doctor`); ``table1`` trains, searches
and stores the paper's Table 1 (:mod:`joma_lib.theory.table1.cli`; ``python -m joma_lib table1 --help``).
The figures' command is ``python -m joma_lib.figures``, the language models' ``python -m joma_lib.lm``.
"""

from __future__ import annotations

import argparse
import sys

from joma_lib.base.startup import command
from joma_lib.theory.table1 import cli as table1_cli


def _doctor(refresh: bool) -> int:
    """Import the report inside :func:`~joma_lib.base.startup.command`: importing the kit checks the environment,
    and a bad variable then ends in one ``error:`` line, not a traceback."""
    from joma_lib.kit import doctor

    return doctor.main(refresh)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["table1"]:
        return table1_cli.main(args[1:])
    parser = argparse.ArgumentParser(prog="python -m joma_lib")
    sub = parser.add_subparsers(dest="command", required=True)
    doctor = sub.add_parser("doctor",
                            help="report the torch build, CPU, bf16 probe, precision, GPU, threads, data, Hub")
    doctor.add_argument("--refresh", action="store_true",
                        help="probe bf16 again instead of reading the verdict cached for this machine")
    sub.add_parser("table1", help="the paper's Table 1: train, search, store (python -m joma_lib table1 --help)")
    parsed = parser.parse_args(args)
    return command(lambda: _doctor(parsed.refresh))


if __name__ == "__main__":
    sys.exit(main())
