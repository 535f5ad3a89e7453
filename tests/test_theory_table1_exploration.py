"""Table 1's configuration search: the selection rule."""

from __future__ import annotations

import numpy as np

from joma_lib.theory.table1.exploration import Exploration, select_configuration


def test_selection_rule_uses_only_init_loss_and_time() -> None:
    e = Exploration
    explored = {
        "paper-data": e(np.array([0.9, 0.95, 0.9, 0.9]), np.array([0.1] * 4), 40.0),  # saturated at initialisation
        "narrow": e(np.array([0.6, 0.7, 0.7, 0.75]), np.array([0.1] * 4), 30.0),
        "small-vocab": e(np.array([0.5, 0.6, 0.5, 0.5]), np.array([0.1, 2.0, 0.1, 0.1]), 30.0),  # does not learn
        "small-vocab-narrow": e(np.array([0.4, 0.5, 0.4, 0.4]), np.array([0.1] * 4), 300.0),  # too slow
    }
    assert select_configuration(explored) == "narrow"
    assert select_configuration({"paper-data": explored["paper-data"]}) is None
