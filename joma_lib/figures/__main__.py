"""``python -m joma_lib.figures``: the figures' command line (:mod:`joma_lib.kit.cli`)."""

import sys

from joma_lib.kit.cli import main

sys.exit(main())
