"""``python -m joma_lib.table1``: Table 1's command line (:mod:`joma_lib.table1.cli`)."""

import sys

from joma_lib.table1.cli import main

sys.exit(main())
