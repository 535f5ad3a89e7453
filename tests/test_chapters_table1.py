"""joma_lib.chapters.table1: the Table 1 page's configuration line, its table, and the claims' measures."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.chapters.table1 import config_text, level_specificity, table1_markdown
from joma_lib.chapters.table1.table1 import level_specificity_sd
from joma_lib.kit.harness import load_reference


def test_a_configuration_is_named_with_its_widths_training_and_seeds():
    assert config_text("quick") == "quick (model width 32 / MLP width 128, 300 steps x 32, lr 0.003, seeds 1-3)"
    assert config_text("full").startswith("full (model width 1024 / MLP width 400, 10,000 steps x 128, lr 0.0001")
    with pytest.raises(ValueError, match="config"):
        config_text("huge")


def test_the_table_has_one_row_per_setting_in_the_papers_layout():
    data = load_reference("table1")
    lines = table1_markdown(data).splitlines()
    assert len(lines) == 2 + data["trained_mean"].shape[0] and lines[0].startswith("| p | level sizes |")
    assert f"{data['trained_mean'][0, 0, 0]:.3f} ± {data['trained_std'][0, 0, 0]:.3f}" in lines[2]


def test_level_specificity_in_seed_deviations_has_the_sign_of_the_raw_margin():
    data = load_reference("table1")
    assert np.sign(level_specificity_sd(data)) == np.sign(level_specificity(data))
    diagonal = dict(data)
    trained = data["trained"].copy()
    for k in (0, 1):
        trained[:, :, k, k] = trained[:, :, :, k].max(axis=2) + 0.1  # layer k made the best for level k
    diagonal["trained"], diagonal["trained_mean"] = trained, trained.mean(axis=1)
    assert level_specificity(diagonal) > 0 and level_specificity_sd(diagonal) > 2
