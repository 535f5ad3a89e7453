"""``python -m joma_lib.lm``: the command line of the language-model runs (:mod:`joma_lib.lm.cli`)."""

import sys

from joma_lib.lm.cli import main

sys.exit(main())
