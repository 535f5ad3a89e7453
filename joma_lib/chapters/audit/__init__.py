"""The audit chapter (`book/audit.md`): checks of the setting's assumption on pretrained models, Table 1's
configuration search and the stored LM runs.

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.base.io import InputUnavailableError
from joma_lib.chapters.audit.exploration import exploration_markdown
from joma_lib.chapters.audit.figures import EMBEDDING_COS_BOUND, HIDDEN_COS_BOUND, make_pretrained
from joma_lib.kit.sweeps import FULL_RESULTS
from joma_lib.theory.table1.exploration import (EXPLORED, MAX_CPU_SECONDS, MAX_INIT_LAYER0, MAX_LOSS_FRACTION,
                                                read_explorations, select_configuration)
from joma_lib.theory.table1.runs import CONFIGS

__all__ = [
    "CONFIGS", "EMBEDDING_COS_BOUND", "EXPLORED", "FULL_RESULTS", "HIDDEN_COS_BOUND", "InputUnavailableError",
    "MAX_CPU_SECONDS", "MAX_INIT_LAYER0", "MAX_LOSS_FRACTION", "exploration_markdown", "make_pretrained",
    "read_explorations", "select_configuration",
]
