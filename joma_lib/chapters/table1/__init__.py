"""The Table 1 chapter (`book/table1.md`): do the hidden neurons of layer i align with the latents of level i?

Its page imports from here and from :mod:`joma_lib.kit` only: ``__all__`` is the names the page uses.
"""

from __future__ import annotations

from joma_lib.chapters.table1.table1 import (
    H100_FP32_FLOPS,
    LEVEL_MARGIN_SD,
    config_text,
    level_specificity,
    reference_claims,
    table1_markdown,
    training_flops,
)
from joma_lib.theory.table1.model import TABLE1_SETTINGS, TABLE1_SPREAD, token_baseline, token_memberships
from joma_lib.theory.table1.runs import CONFIGS
from joma_lib.chapters.table1.table1_paper import PAPER_CLAIMS

__all__ = [
    "PAPER_CLAIMS",
    "CONFIGS", "H100_FP32_FLOPS", "LEVEL_MARGIN_SD", "TABLE1_SETTINGS", "TABLE1_SPREAD", "config_text",
    "level_specificity", "reference_claims", "table1_markdown", "token_baseline", "token_memberships",
    "training_flops",
]
