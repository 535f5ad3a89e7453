"""Table 1 stacked with checkpoints (:mod:`joma_lib.theory.table1.stacked_run`): interrupted and resumed, it ends with
the numbers of an uninterrupted run, bit for bit; a finished folder is read back; another configuration's folder is
refused."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from joma_lib.theory.table1.model import Table1Config
from joma_lib.theory.table1.stacked_run import LOSSES, RESULT, checkpoint_path, run_table1_stacked, stack_result_path

TINY = Table1Config(d_model=8, d_hidden=16, steps=9, batch_size=8, lr=3e-3, n_test=32, cpu_threads=1,
                    settings=((2, (10, 20)), (3, (10, 20))), seeds=(3,))


def test_a_resumed_run_ends_with_the_numbers_of_an_uninterrupted_one(tmp_path) -> None:
    whole = run_table1_stacked(TINY, "cpu")
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, every=2, stop_after=5) is None
    assert checkpoint_path(tmp_path, 0).exists() and not (tmp_path / RESULT).exists()
    (tmp_path / ".stack-0.pt.killed.pt").write_bytes(b"half a checkpoint")  # a call killed while saving
    resumed = run_table1_stacked(TINY, "cpu", out=tmp_path, every=2)
    assert whole is not None and resumed is not None
    np.testing.assert_array_equal(resumed.losses, whole.losses)
    for name, array in whole.result.arrays().items():
        np.testing.assert_array_equal(resumed.result.arrays()[name], array, err_msg=name)
    assert (tmp_path / RESULT).exists() and (tmp_path / LOSSES).exists() and not list(tmp_path.glob("*stack-*"))
    read_back = run_table1_stacked(TINY, "cpu", out=tmp_path)
    assert read_back is not None
    np.testing.assert_array_equal(read_back.result.scores, whole.result.scores)
    with pytest.raises(ValueError, match="finished run of other settings"):
        run_table1_stacked(replace(TINY, lr=1e-3), "cpu", out=tmp_path)


def test_a_checkpoint_of_other_settings_is_refused(tmp_path) -> None:
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, stop_after=2) is None
    with pytest.raises(ValueError, match="checkpoint of other settings"):
        run_table1_stacked(replace(TINY, seeds=(4,)), "cpu", out=tmp_path)
    with pytest.raises(ValueError, match="stop_after must be an integer in \\[1, 36\\]"):
        run_table1_stacked(TINY, "cpu", out=tmp_path, stop_after=37)


def test_stacks_of_fewer_runs_finish_one_by_one_and_give_the_same_table(tmp_path) -> None:
    whole = run_table1_stacked(TINY, "cpu")
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=3, stop_after=4) is None
    assert not stack_result_path(tmp_path, 0).exists() and checkpoint_path(tmp_path, 0).exists()
    # the first stack finishes, the second stops: a new machine would find only the small file of the first
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=3, stop_after=7) is None  # 5 + 2 steps
    assert stack_result_path(tmp_path, 0).exists() and not checkpoint_path(tmp_path, 0).exists()
    checkpoint_path(tmp_path, 1).unlink()
    with pytest.raises(ValueError, match="another --stack-size"):
        run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=2)
    split = run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=3)
    assert whole is not None and split is not None
    np.testing.assert_allclose(split.losses, whole.losses, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(split.result.scores_init, whole.result.scores_init)
