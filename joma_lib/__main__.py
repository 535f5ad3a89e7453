"""``python -m joma_lib doctor``: what this machine gives the companion (:mod:`joma_lib.doctor`)."""

from __future__ import annotations

import argparse
import sys

from joma_lib import doctor
from joma_lib.startup import command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joma_lib")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="report the torch build, CPU, bf16 probe, precision, GPU, threads, data, Hub")
    parser.parse_args(argv)
    return command(doctor.main)


if __name__ == "__main__":
    sys.exit(main())
