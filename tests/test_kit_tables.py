"""A page's table of rows (joma_lib.kit.tables): one header row, every cell in full."""

from __future__ import annotations

import pandas as pd

from joma_lib.kit import table


def test_a_table_has_one_header_row_with_every_cell_in_full():
    rows = [{"layers": 1, "note": "x" * 80}, {"layers": 2, "note": "y"}]
    frame = table(rows, "layers")
    assert list(frame.index) == [1, 2] and frame.index.name is None and frame.columns.name == "layers"
    html = frame._repr_html_()
    assert html.count("<tr") == 3 and "<th>layers</th>" in html  # one header row, "layers" in its corner
    with pd.option_context("display.max_colwidth", None):
        assert "x" * 80 in frame._repr_html_()
