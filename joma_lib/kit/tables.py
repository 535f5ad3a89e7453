"""How a page prints a table of rows: one header row, the column that labels the rows named in its corner (no
equation: this only lays out values a page has computed or read)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd


def table(rows: Iterable[Mapping[str, Any]], index: str) -> pd.DataFrame:
    """The rows as a table whose ``index`` column labels the rows, its name in the header's corner: one header row
    (an index keeping its name would be printed on a header row of its own, the other cells empty)."""
    return pd.DataFrame(list(rows)).set_index(index).rename_axis(index=None, columns=index)
