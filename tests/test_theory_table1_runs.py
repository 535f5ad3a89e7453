"""Table 1, whole: the stored runs (written whole, read back, checked), the spread over seeds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from joma_lib.chapters.table1.figures import make_table1_wide
from joma_lib.theory.table1.runs import CONFIGS, run_table1, save_result, seed_std


def test_stored_run_is_saved_whole_and_checked_on_read(tmp_path) -> None:
    tiny = replace(CONFIGS["quick"], steps=2, n_test=64, seeds=(1,), settings=((2, (10, 20)),))
    result = run_table1(tiny, device="cpu")
    with pytest.raises(ValueError, match=r"\.npz"):
        save_result(result, tmp_path / "table.json")
    assert not list(tmp_path.iterdir())  # nothing half-written
    save_result(result, tmp_path / "table.npz")
    with np.load(tmp_path / "table.npz") as npz:
        assert np.array_equal(npz["scores_change_control"], result.scores_change_control)
    with pytest.raises(ValueError, match="wide configuration"):  # a run of another configuration is refused
        make_table1_wide(str(tmp_path / "table.npz"))


def test_stored_wide_run_reads_back() -> None:
    wide = make_table1_wide()
    config = CONFIGS["wide"]
    assert wide["change"].shape == (len(config.settings), len(config.seeds), config.n_layers, 3)
    assert (config.steps, config.seeds, config.settings) == (CONFIGS["quick"].steps, CONFIGS["quick"].seeds,
                                                            CONFIGS["quick"].settings)  # same run, wider


def test_seed_std_uses_ddof_1() -> None:
    assert seed_std(np.array([1.0, 2.0, 3.0])) == pytest.approx(1.0)
    assert seed_std(np.array([[1.0, 3.0]]), axis=0).tolist() == [0.0, 0.0]  # one seed: no spread
