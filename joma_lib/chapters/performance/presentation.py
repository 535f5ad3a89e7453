"""How the Performance page writes its numbers and tables: a range of measured values as the prose prints it, the
page's tables with one header row, and the sentence comparing the GPU loans of the sweep and Table 1 planned
together or one after the other (no equation: these only format stored measurements)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd


def span(low: float, high: float, fmt: str = ".1f") -> str:
    """``low–high`` as the prose prints a range of measured values, or one value where both ends print alike."""
    low_text, high_text = format(low, fmt), format(high, fmt)
    return low_text if low_text == high_text else f"{low_text}–{high_text}"


def table(rows: Iterable[Mapping[str, Any]], index: str) -> pd.DataFrame:
    """The rows as a table whose ``index`` column labels the rows, its name in the header's corner: one header row
    (an index keeping its name would be printed on a header row of its own, the other cells empty)."""
    return pd.DataFrame(list(rows)).set_index(index).rename_axis(index=None, columns=index)


def joint_loans(together: int, apart: int) -> str:
    """What planning the sweep and Table 1 into the same loans does, from the loans it takes (``together``) and the
    loans of the two one after the other (``apart``)."""
    if together > apart:
        raise ValueError(f"planned together the runs take {together} loans, more than the {apart} one after the other")
    loans = f"{together} loan{'s' if together > 1 else ''}"
    if together == apart:
        return (f"the sweep and Table 1 together take {loans}, as many as one after the other: planning them "
                "jointly saves no loan here")
    return f"the sweep and Table 1 together take {loans}, against {apart} one after the other"
