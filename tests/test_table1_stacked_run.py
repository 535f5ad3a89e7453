"""Table 1 stacked with checkpoints (:mod:`joma_lib.table1.stacked_run`): interrupted and resumed, it ends with
the numbers of an uninterrupted run, bit for bit; a finished folder is read back; another configuration's folder is
refused."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from joma_lib.multilayer import Table1Config
from joma_lib.table1.stacked_run import CHECKPOINT, LOSSES, RESULT, run_table1_stacked

TINY = Table1Config(d_model=8, d_hidden=16, steps=9, batch_size=8, lr=3e-3, n_test=32, cpu_threads=1,
                    settings=((2, (10, 20)), (3, (10, 20))), seeds=(3,))


def test_a_resumed_run_ends_with_the_numbers_of_an_uninterrupted_one(tmp_path) -> None:
    whole = run_table1_stacked(TINY, "cpu")
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, every=2, stop_at=5) is None
    assert (tmp_path / CHECKPOINT).exists() and not (tmp_path / RESULT).exists()
    resumed = run_table1_stacked(TINY, "cpu", out=tmp_path, every=2)
    assert whole is not None and resumed is not None
    np.testing.assert_array_equal(resumed.losses, whole.losses)
    for name, array in whole.result.arrays().items():
        np.testing.assert_array_equal(resumed.result.arrays()[name], array, err_msg=name)
    assert (tmp_path / RESULT).exists() and (tmp_path / LOSSES).exists() and not (tmp_path / CHECKPOINT).exists()
    read_back = run_table1_stacked(TINY, "cpu", out=tmp_path)
    assert read_back is not None
    np.testing.assert_array_equal(read_back.result.scores, whole.result.scores)
    with pytest.raises(ValueError, match="finished run of other settings"):
        run_table1_stacked(replace(TINY, lr=1e-3), "cpu", out=tmp_path)


def test_a_checkpoint_of_other_settings_is_refused(tmp_path) -> None:
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, stop_at=2) is None
    with pytest.raises(ValueError, match="checkpoint of other settings"):
        run_table1_stacked(replace(TINY, seeds=(4,)), "cpu", out=tmp_path)
    with pytest.raises(ValueError, match="stop_at must be an integer in \\[1, 9\\]"):
        run_table1_stacked(TINY, "cpu", out=tmp_path, stop_at=10)
