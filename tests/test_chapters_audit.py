"""joma_lib.chapters.audit: the "Checks and audit" appendix's figure (c-setting-pretrained) and Table 1's
configuration search table."""

from __future__ import annotations

import re

import numpy as np
import pytest

from joma_lib.chapters.audit import exploration_markdown
from joma_lib.chapters.audit.figures import hidden_median_max, make_pretrained
from joma_lib.kit import draw, evaluate_figure, get_spec, load_reference
from joma_lib.theory.table1.exploration import EXPLORED, read_explorations, select_configuration


def test_hidden_median_max_skips_only_the_padding_after_a_shallower_model():
    """Rows are models, columns layers; NaN pads a shallower model. Any other NaN makes the value NaN, as the
    docstring says: a hole below a model's last layer, a model with no finite layer, a last layer no model fills."""
    nan = np.nan
    assert hidden_median_max({"hidden_median": np.array([[0.1, 0.3, 0.2], [0.4, nan, nan]])}) == 0.4
    for lost in ([[0.1, nan, 0.2], [0.4, 0.1, 0.3]], [[0.1, 0.3, 0.2], [nan, nan, nan]],
                 [[0.1, 0.3, nan], [0.4, nan, nan]]):
        assert np.isnan(hidden_median_max({"hidden_median": np.array(lost)})), lost
    # a hole in the second model, after the first's finite layers: numpy's reduction keeps it, Python's max would not
    assert np.isnan(hidden_median_max({"hidden_median": np.array([[0.1, 0.3, 0.2], [0.4, nan, 0.1]])}))


def test_the_embedding_claim_reads_the_median_column_of_every_model():
    """Columns are the quantiles (median, 90 %, 99 %): the claim is on the medians, the largest over models."""
    claim = next(c for c in get_spec("c-setting-pretrained").claims
                 if c.claim_id == "setting-token-embeddings-near-orthogonal")
    quantiles = np.array([[0.10, 0.50, 0.90], [0.15, 0.60, 0.95]])
    assert claim.evaluate({"embedding_quantiles": quantiles})[0] == 0.15


def test_the_pretrained_claims_come_out_as_the_book_states_on_the_reference():
    rows = evaluate_figure("c-setting-pretrained", load_reference("c-setting-pretrained"))
    assert {r.claim_id for r in rows} == {c.claim_id for c in get_spec("c-setting-pretrained").claims}
    assert all(r.verdict == r.book_says for r in rows), [(r.claim_id, r.verdict) for r in rows]
    assert len(draw("c-setting-pretrained", load_reference("c-setting-pretrained")).axes) >= 2


@pytest.mark.parametrize(("kwargs", "message"), [({"source": "cloud"}, "source"), ({"n_tokens": 1}, "n_tokens")])
def test_bad_arguments_name_the_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_pretrained(**kwargs)


def test_the_exploration_table_has_one_row_per_configuration_and_bolds_the_chosen_one():
    table = exploration_markdown()
    rows = [line for line in table.splitlines()[2:]]
    assert len(rows) == len(EXPLORED)
    chosen = select_configuration(read_explorations())
    bold = re.findall(r"^\| \*\*(\S+)\*\* \|", table, flags=re.M)
    assert bold == ([chosen] if chosen else [])
    assert sum(row.endswith("| yes |") for row in rows) == (1 if chosen else 0)
