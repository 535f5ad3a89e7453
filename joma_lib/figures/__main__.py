"""``python -m joma_lib.figures``: the figures' command line (:mod:`joma_lib.kit.cli`)."""

import sys

from joma_lib.base.startup import command


def _main() -> int:
    """Import the kit inside :func:`~joma_lib.base.startup.command`, so that the check of the environment its import
    runs ends in one ``error:`` line too."""
    from joma_lib.kit.cli import main

    return main()


sys.exit(command(_main))
