"""A run's folder and the collected runs (:mod:`joma_lib.lm.runs`): stacking runs, reusing stored results."""

import fcntl
import json
import os
import re
import threading
import time
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch

from joma_lib.base.io import save_torch_checked
from joma_lib.lm.runs import (RunLockedError, collect, finished_result, load_checkpoint, load_sweep, run_lock,
                              write_results)
from joma_lib.lm.step import train_run

torch.set_num_threads(1)


def test_collect_pads_shallow_models_with_nan(tiny_run):
    runs = [{"minibatch": np.array([0, 5]), "val_loss": np.array([3.0, 2.0]), "train_loss": np.array([np.nan, 2.5]),
             "attn_entropy": np.ones((2, n)), "stable_rank": np.full((2, n), 4.0)} for n in (1, 3)]
    out = collect(runs, [replace(tiny_run, n_layers=1), replace(tiny_run, n_layers=3, seed=9)])
    assert out["attn_entropy"].shape == (2, 2, 3)
    assert np.isnan(out["attn_entropy"][0, :, 1:]).all() and np.isfinite(out["attn_entropy"][1]).all()
    assert out["nlayers"].tolist() == [1, 3] and out["seed"].tolist() == [5, 9]


def test_results_stored_before_a_config_field_existed_are_reused(tmp_path, tiny_run_data, tiny_run):
    first = train_run(tiny_run, tmp_path, device="cpu", progress=False, data=tiny_run_data)
    meta_path = tmp_path / tiny_run.name / "result.json"
    meta = json.loads(meta_path.read_text())
    for later_field in ("arch", "n_heads", "log_checkpoints"):  # as written by an older version of the runner
        del meta["config"][later_field]
    meta_path.write_text(json.dumps(meta))
    again = train_run(tiny_run, tmp_path, device="cpu", progress=False, data=tiny_run_data, stop_at=0)
    assert again is not None and again["val_loss"].tolist() == first["val_loss"].tolist()


def test_a_finished_result_of_other_settings_is_not_taken_for_this_run(tmp_path, tiny_run):
    """A run's folder is named without its step count: a result of fewer steps there is another run's."""
    path = tmp_path / "result.npz"
    write_results(path, {"minibatch": np.array([0, 7])}, {"config": asdict(tiny_run)})
    assert finished_result(path, tiny_run)["minibatch"].tolist() == [0, 7]
    assert finished_result(path, replace(tiny_run, steps=tiny_run.steps + 1)) is None


def test_a_sweep_is_read_in_the_order_of_depth_lr_and_seed_not_of_its_folder_names(tmp_path, tiny_run):
    """By name, a 10-layer run's folder sorts before a 2-layer run's."""
    for n_layers, lr, seed in [(10, 1e-3, 1), (2, 1e-3, 2), (2, 1e-4, 1), (2, 1e-3, 1)]:
        cfg = replace(tiny_run, n_layers=n_layers, lr=lr, seed=seed)
        arrays = {"minibatch": np.array([0]), "val_loss": np.array([1.0]), "train_loss": np.array([1.0]),
                  "attn_entropy": np.ones((1, n_layers)), "stable_rank": np.ones((1, n_layers))}
        write_results(tmp_path / cfg.name / "result.npz", arrays, {"config": asdict(cfg)})
    runs, configs = load_sweep(tmp_path)
    assert [(c.n_layers, c.lr, c.seed) for c in configs] == [(2, 1e-4, 1), (2, 1e-3, 1), (2, 1e-3, 2), (10, 1e-3, 1)]
    assert runs["nlayers"].tolist() == [2, 2, 2, 10] and runs["seed"].tolist() == [1, 1, 2, 1]


def test_a_checked_torch_file_that_is_not_this_runners_checkpoint_is_refused_naming_it(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_torch_checked(path, {"model": {}, "step": 3})
    with pytest.raises(ValueError, match=re.escape(f"{path} is damaged (ValueError: not a checkpoint of this runner)")):
        load_checkpoint(path)


def test_a_held_run_is_refused_at_once_or_taken_once_its_holder_lets_go(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = open(run_dir / ".lock", "w")  # another open file: flock treats it as another process's
    holder.write("4242")
    holder.flush()
    fcntl.flock(holder, fcntl.LOCK_EX)
    start = time.monotonic()
    with pytest.raises(RunLockedError, match="pid 4242"):
        with run_lock(run_dir):
            pass
    with pytest.raises(RunLockedError, match="pid 4242"):  # still held when the wait ends
        with run_lock(run_dir, wait=0.5):
            pass
    assert time.monotonic() - start >= 0.5
    threading.Timer(0.5, holder.close).start()  # the previous task exits, and its lock goes with it
    with run_lock(run_dir, wait=30):
        assert (run_dir / ".lock").read_text() == str(os.getpid())
    assert time.monotonic() - start < 20


def test_a_negative_lock_wait_is_refused_before_any_work(tmp_path, tiny_run_data, tiny_run):
    with pytest.raises(ValueError, match="lock_wait"):
        train_run(tiny_run, tmp_path, device="cpu", progress=False, data=tiny_run_data, lock_wait=-1)
    assert not any(tmp_path.iterdir())
