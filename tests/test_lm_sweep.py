"""Sweeps of runs (:mod:`joma_lib.lm.sweep`): a pool of worker processes gives the sequential results."""

import numpy as np
import torch

from joma_lib.lm.cli import main

torch.set_num_threads(1)


def test_parallel_jobs_give_the_sequential_results(tmp_path):
    args = ["run", "--data", "ptb", "--layers", "1", "2", "--steps", "4", "--eval-interval", "2", "--eval-chunks", "1",
            "--seq-len", "5", "--batch-size", "2", "--max-vocab", "100", "--d", "8", "--d-ff", "8", "--device", "cpu",
            "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "seq"), "--results", str(tmp_path / "seq.npz")]) == 0
    assert main([*args, "--jobs", "2", "--out", str(tmp_path / "par"), "--results", str(tmp_path / "par.npz")]) == 0
    with np.load(tmp_path / "seq.npz") as seq, np.load(tmp_path / "par.npz") as par:
        for key in seq.files:
            np.testing.assert_array_equal(seq[key], par[key], err_msg=key)
    assert main([*args, "--jobs", "0", "--out", str(tmp_path / "bad")]) == 2
