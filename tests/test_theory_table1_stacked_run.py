"""Table 1 stacked with checkpoints (:mod:`joma_lib.theory.table1.stacked_run`): interrupted and resumed, it ends with
the numbers of an uninterrupted run, bit for bit; a finished folder is read back; another configuration's folder is
refused; the stacks of one folder may change size from call to call (a begun stack is finished first)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from joma_lib.base.io import checksum_path
from joma_lib.theory.table1.model import Table1Config
from joma_lib.theory.table1.stacked_run import LOSSES, RESULT, checkpoint_path, run_table1_stacked, stack_result_path

TINY = Table1Config(d_model=8, d_hidden=16, steps=9, batch_size=8, lr=3e-3, n_test=32, cpu_threads=1,
                    settings=((2, (10, 20)), (3, (10, 20))), seeds=(3,))


def test_a_resumed_run_ends_with_the_numbers_of_an_uninterrupted_one(tmp_path) -> None:
    whole = run_table1_stacked(TINY, "cpu")
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, every=2, stop_after=5) is None
    assert checkpoint_path(tmp_path, 0, 4).exists() and not (tmp_path / RESULT).exists()
    (tmp_path / ".stack-0-4.pt.killed.pt").write_bytes(b"half a checkpoint")  # a call killed while saving
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
    assert not stack_result_path(tmp_path, 0, 3).exists() and checkpoint_path(tmp_path, 0, 3).exists()
    # the first stack finishes, the second stops: a new machine would find only the small file of the first
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=3, stop_after=7) is None  # 5 + 2 steps
    assert stack_result_path(tmp_path, 0, 3).exists() and not checkpoint_path(tmp_path, 0, 3).exists()
    checkpoint_path(tmp_path, 3, 4).unlink()
    split = run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=3)
    assert whole is not None and split is not None
    np.testing.assert_allclose(split.losses, whole.losses, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(split.result.scores_init, whole.result.scores_init)


def test_a_folder_goes_on_in_stacks_of_another_size_and_finishes_a_begun_stack_first(tmp_path) -> None:
    """Begun in stacks of 3 (the first stopped after 4 steps), continued in stacks of 1: the begun stack is resumed
    whole, then the last run alone; asked for a size, the runner names the block of runs waiting."""
    whole = run_table1_stacked(TINY, "cpu")
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=3, stop_after=4) is None
    asked: list[int] = []
    one_by_one = run_table1_stacked(TINY, "cpu", out=tmp_path, sizes=lambda waiting: asked.append(waiting) or 1)
    assert asked == [1]  # runs 0-2 were begun together: only run 3 was waiting
    assert whole is not None and one_by_one is not None
    # stacked otherwise, only the summation order may differ: the split test's tolerance on the losses; the scores
    # (of networks that close) within 1e-4; both measured 0 apart on the CPU where this was written
    np.testing.assert_allclose(one_by_one.losses, whole.losses, rtol=0, atol=1e-5)
    np.testing.assert_allclose(one_by_one.result.scores, whole.result.scores, rtol=0, atol=1e-4)


def test_stacks_take_consecutive_runs_around_finished_ones(tmp_path) -> None:
    """Run 1 finished alone; the others wait in two blocks (0, then 2-3), each stacked within itself."""
    alone = tmp_path / "alone"
    assert run_table1_stacked(TINY, "cpu", out=alone, stack_size=1, stop_after=2 * TINY.steps) is None
    (alone / "stack-0-1.npz").unlink()  # keep run 1's result only
    asked: list[int] = []
    done = run_table1_stacked(TINY, "cpu", out=alone, sizes=lambda waiting: asked.append(waiting) or waiting)
    assert asked == [1, 2] and done is not None
    with pytest.raises(ValueError, match=r"a stack size must be in \[1, 4\]"):
        run_table1_stacked(TINY, "cpu", out=tmp_path / "bad", sizes=lambda waiting: 5)
    with pytest.raises(ValueError, match="need an output folder"):
        run_table1_stacked(TINY, "cpu", sizes=lambda waiting: 1)


def test_a_stack_file_of_another_layout_is_refused(tmp_path) -> None:
    (tmp_path / "stack-0.npz").write_bytes(b"")  # a stack numbered as by an earlier version
    with pytest.raises(ValueError, match=r"stack-0.npz is not a stack file of this configuration's 4 runs"):
        run_table1_stacked(TINY, "cpu", out=tmp_path)


def flip_a_byte(path: Path) -> None:
    """Damage ``path`` as a disk or a copy might: one bit of its middle byte flipped."""
    damaged = bytearray(path.read_bytes())
    damaged[len(damaged) // 2] ^= 0x10
    path.write_bytes(bytes(damaged))


def test_a_damaged_finished_stack_is_refused_naming_it_and_its_runs_train_again_once_deleted(tmp_path) -> None:
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=2, stop_after=TINY.steps) is None
    stack = stack_result_path(tmp_path, 0, 2)
    flip_a_byte(stack)
    with pytest.raises(ValueError, match=re.escape(f"{stack} is damaged: its sha256") + ".*"
                       + re.escape("delete it and stack-0-2.npz.sha256 to train its runs again")):
        run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=2)
    stack.unlink()
    checksum_path(stack).unlink()
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, stack_size=2) is not None
    assert not list(tmp_path.glob("stack-*"))  # the stacks and their checksums, once the table is finished


def cut_in_half(path: Path) -> None:
    """A copy stopped half-way."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("name, damage", [(LOSSES, flip_a_byte), (RESULT, cut_in_half)])
def test_a_damaged_finished_folder_is_refused_naming_it(tmp_path, name, damage) -> None:
    """The losses (an .npy, no CRC of its own) read silently with a bit flipped; the result (a zip) cut short
    raised from inside zipfile."""
    assert run_table1_stacked(TINY, "cpu", out=tmp_path) is not None
    damage(tmp_path / name)
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path} holds a damaged finished Table 1 (")
                       + ".*delete the folder to train the table again"):
        run_table1_stacked(TINY, "cpu", out=tmp_path)


def test_once_the_steps_given_are_spent_no_further_stack_is_planned(tmp_path) -> None:
    asked: list[int] = []
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, stop_after=TINY.steps,
                              sizes=lambda waiting: asked.append(waiting) or 1) is None
    assert asked == [4] and stack_result_path(tmp_path, 0, 1).exists()


def test_checkpoints_slow_to_write_are_written_less_often_and_always_where_a_call_stops(tmp_path, monkeypatch) -> None:
    """Each checkpoint made to take 50 ms: after the first, the next waits 50 ms / CHECKPOINT_SHARE = 1 s, longer
    than the tiny stack's 8 steps take; so two are written (after step 1 and where the call stops), and the run
    resumed from the second ends with the numbers of an uninterrupted one."""
    import time

    from joma_lib.theory.table1 import stacked_run

    written: list[int] = []
    save = stacked_run._save_checkpoint

    def slow_save(*args, **kwargs) -> None:
        time.sleep(0.05)
        written.append(args[6])  # the step
        save(*args, **kwargs)

    monkeypatch.setattr(stacked_run, "_save_checkpoint", slow_save)
    whole = run_table1_stacked(TINY, "cpu")
    assert run_table1_stacked(TINY, "cpu", out=tmp_path, every=1, stop_after=8) is None
    assert written == [1, 8]
    resumed = run_table1_stacked(TINY, "cpu", out=tmp_path, every=1)
    assert whole is not None and resumed is not None
    np.testing.assert_array_equal(resumed.losses, whole.losses)


@pytest.mark.parametrize("at, stopped", [(50, "stopped at step 100 of 250, checkpointed"),  # inside a stack's steps
                                         (245, "stopped after its runs 0-1, finished")])  # in its last chunk
def test_a_ctrl_c_stops_at_the_end_of_its_chunk_with_everything_kept(tmp_path, monkeypatch, at, stopped) -> None:
    """A Ctrl-C (a real SIGINT to this process) during step ``at`` of the first of two stacks: the stack trains to
    the end of its chunk of 100 steps and checkpoints there (or, in its last chunk, finishes and is saved), then
    stops with one line naming where; resumed, the table ends with the numbers of an uninterrupted run."""
    import os
    import signal

    from joma_lib.theory.table1 import stacked_run

    config = replace(TINY, steps=250)
    whole = run_table1_stacked(config, "cpu", stack_size=2)
    losses_of = stacked_run.training_losses(False)
    calls = [0]

    def interrupting(*args, **kwargs):
        calls[0] += 1
        if calls[0] == at:
            os.kill(os.getpid(), signal.SIGINT)
        return losses_of(*args, **kwargs)

    monkeypatch.setattr(stacked_run, "training_losses", lambda compiled: interrupting)
    with pytest.raises(KeyboardInterrupt, match=stopped):
        run_table1_stacked(config, "cpu", out=tmp_path, every=10**6, stack_size=2)
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is given back
    resumed = run_table1_stacked(config, "cpu", out=tmp_path, stack_size=2)
    assert whole is not None and resumed is not None
    np.testing.assert_array_equal(resumed.losses, whole.losses)
