"""One training run (:mod:`joma_lib.lm.step`): metrics at every checkpoint, resume, refused checkpoints, Adam reset."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from joma_lib.lm.data import load_lm_data, n_chunks
from joma_lib.lm.step import train_run

torch.set_num_threads(1)


def test_run_records_metrics_at_every_checkpoint(tmp_path, tiny_run_data, tiny_run):
    result = train_run(tiny_run, tmp_path, device="cpu", progress=False, data=tiny_run_data)
    assert result["minibatch"].tolist() == [0, 4, 8, 12]
    assert result["attn_entropy"].shape == result["stable_rank"].shape == (4, 2)
    assert np.all(result["attn_entropy"] <= 2.2 + 1e-6)  # uniform causal attention over 10 positions: 1.51
    assert np.all((result["stable_rank"] >= 1) & (result["stable_rank"] <= 16))
    assert result["val_loss"][-1] < result["val_loss"][0]  # it learns something
    assert np.isnan(result["train_loss"][0]) and np.all(np.isfinite(result["train_loss"][1:]))
    meta = json.loads((tmp_path / tiny_run.name / "result.json").read_text())
    assert meta["config"]["lr"] == tiny_run.lr and meta["vocab_size"] == 200


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, tiny_run_data, tiny_run):
    whole = train_run(tiny_run, tmp_path / "a", device="cpu", progress=False, data=tiny_run_data)
    # interrupted after 6 steps: the checkpoint at step 4 survives, steps 5-6 are redone
    assert train_run(tiny_run, tmp_path / "b", device="cpu", progress=False, data=tiny_run_data, stop_at=6) is None
    saved = torch.load(tmp_path / "b" / tiny_run.name / "checkpoint.pt", weights_only=True)
    assert saved["step"] == 4
    resumed = train_run(tiny_run, tmp_path / "b", device="cpu", progress=False, data=tiny_run_data)
    for key in whole:
        np.testing.assert_array_equal(resumed[key], whole[key], err_msg=key)


def test_checkpoint_of_other_settings_is_refused(tmp_path, tiny_run_data, tiny_run):
    train_run(tiny_run, tmp_path, device="cpu", progress=False, data=tiny_run_data, stop_at=4)
    other = replace(tiny_run, dropout=0.1)
    with pytest.raises(ValueError, match="other settings"):
        train_run(other, tmp_path, device="cpu", progress=False, data=tiny_run_data)


def test_adam_reset_changes_nothing_before_the_first_epoch_boundary(tmp_path, tiny_run):
    """Same seed with and without the per-epoch optimiser reset: identical until the first epoch ends, then not."""
    data = load_lm_data("ptb", 4, 3, 200, max_train_fraction=0.002)
    epoch = n_chunks(data.train, tiny_run.seq_len)  # steps per pass over the training streams
    cfg = replace(tiny_run, steps=2 * epoch, eval_interval=epoch // 2)
    reset = train_run(cfg, tmp_path, device="cpu", progress=False, data=data)
    never = train_run(replace(cfg, adam_reset="never"), tmp_path, device="cpu", progress=False, data=data)
    assert sorted(p.name for p in tmp_path.iterdir()) == [cfg.name, cfg.name + "_noreset"]
    before = reset["minibatch"] <= epoch
    np.testing.assert_array_equal(reset["val_loss"][before], never["val_loss"][before])
    assert np.all(reset["val_loss"][~before] != never["val_loss"][~before])
