"""The experiment runner: training, checkpoint/resume, collected results, command line."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from joma_lib.chapters.rerun.figures import main as plot_main
from joma_lib.lm.data import load_lm_data, n_chunks
from joma_lib.lm.train import RunConfig, collect, load_sweep, main, train_run

torch.set_num_threads(1)

TINY = RunConfig(data="ptb", n_layers=2, lr=3e-3, seed=5, steps=12, eval_interval=4, eval_chunks=2, seq_len=10,
                 batch_size=4, eval_batch_size=3, max_vocab=200, d=16, d_ff=16)


@pytest.fixture(scope="module")
def tiny_data():
    return load_lm_data("ptb", TINY.batch_size, TINY.eval_batch_size, TINY.max_vocab, max_train_fraction=0.01)


def test_run_records_metrics_at_every_checkpoint(tmp_path, tiny_data):
    result = train_run(TINY, tmp_path, device="cpu", progress=False, data=tiny_data)
    assert result["minibatch"].tolist() == [0, 4, 8, 12]
    assert result["attn_entropy"].shape == result["stable_rank"].shape == (4, 2)
    assert np.all(result["attn_entropy"] <= 2.2 + 1e-6)  # uniform causal attention over 10 positions: 1.51
    assert np.all((result["stable_rank"] >= 1) & (result["stable_rank"] <= 16))
    assert result["val_loss"][-1] < result["val_loss"][0]  # it learns something
    assert np.isnan(result["train_loss"][0]) and np.all(np.isfinite(result["train_loss"][1:]))
    meta = json.loads((tmp_path / TINY.name / "result.json").read_text())
    assert meta["config"]["lr"] == TINY.lr and meta["vocab_size"] == 200


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, tiny_data):
    whole = train_run(TINY, tmp_path / "a", device="cpu", progress=False, data=tiny_data)
    # interrupted after 6 steps: the checkpoint at step 4 survives, steps 5-6 are redone
    assert train_run(TINY, tmp_path / "b", device="cpu", progress=False, data=tiny_data, stop_at=6) is None
    saved = torch.load(tmp_path / "b" / TINY.name / "checkpoint.pt", weights_only=True)
    assert saved["step"] == 4
    resumed = train_run(TINY, tmp_path / "b", device="cpu", progress=False, data=tiny_data)
    for key in whole:
        np.testing.assert_array_equal(resumed[key], whole[key], err_msg=key)


def test_checkpoint_of_other_settings_is_refused(tmp_path, tiny_data):
    train_run(TINY, tmp_path, device="cpu", progress=False, data=tiny_data, stop_at=4)
    other = replace(TINY, dropout=0.1)
    with pytest.raises(ValueError, match="other settings"):
        train_run(other, tmp_path, device="cpu", progress=False, data=tiny_data)


def test_collect_pads_shallow_models_with_nan():
    runs = [{"minibatch": np.array([0, 5]), "val_loss": np.array([3.0, 2.0]), "train_loss": np.array([np.nan, 2.5]),
             "attn_entropy": np.ones((2, n)), "stable_rank": np.full((2, n), 4.0)} for n in (1, 3)]
    out = collect(runs, [replace(TINY, n_layers=1), replace(TINY, n_layers=3, seed=9)])
    assert out["attn_entropy"].shape == (2, 2, 3)
    assert np.isnan(out["attn_entropy"][0, :, 1:]).all() and np.isfinite(out["attn_entropy"][1]).all()
    assert out["nlayers"].tolist() == [1, 3] and out["seed"].tolist() == [5, 9]


def test_command_line_runs_collects_and_plots(tmp_path, tiny_data, monkeypatch, capsys):
    import joma_lib.lm.train as train_module

    monkeypatch.setattr(train_module, "load_lm_data", lambda *args: tiny_data)
    args = ["run", "--data", "ptb", "--layers", "1", "2", "--lr", "3e-3", "--seeds", "5", "--steps", "8",
            "--eval-interval", "4", "--eval-chunks", "2", "--seq-len", "10", "--batch-size", "4",
            "--eval-batch-size", "3", "--max-vocab", "200", "--d", "16", "--d-ff", "16", "--device", "cpu",
            "--no-progress", "--out", str(tmp_path / "runs"), "--results", str(tmp_path / "sweep.npz")]
    assert main(args) == 0
    with np.load(tmp_path / "sweep.npz") as npz:
        assert npz["attn_entropy"].shape == (2, 3, 2) and npz["nlayers"].tolist() == [1, 2]
    data, configs = load_sweep(tmp_path / "runs")
    assert [c.n_layers for c in configs] == [1, 2]
    assert plot_main([str(tmp_path / "runs"), "--figure", "fig6", "-o", str(tmp_path / "fig6.png")]) == 0
    assert (tmp_path / "fig6.png").stat().st_size > 1000


@pytest.mark.parametrize("extra, message", [
    (["--layers", "0"], "n_layers"),
    (["--lr=-1e-3"], "lr"),
    (["--steps", "10", "--eval-interval", "20"], "eval_interval"),
    (["--max-vocab", "1"], "max_vocab"),
    (["--dropout", "1.5"], "dropout"),
])
def test_bad_arguments_give_a_clear_error(tmp_path, capsys, extra, message):
    assert main(["run", "--preset", "rerun-quick", "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err
    assert not any(tmp_path.iterdir())  # nothing trained


def test_unknown_choices_are_refused_by_the_parser(tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--data", "wikitext5", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert plot_main([str(tmp_path / "missing"), "-o", str(tmp_path / "x.png")]) == 2


def test_wikitext_offline_runs_on_the_named_stand_in(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["run", "--data", "wikitext2", "--layers", "1", "--steps", "2", "--eval-interval", "2", "--eval-chunks",
            "1", "--seq-len", "5", "--batch-size", "2", "--max-vocab", "100", "--d", "8", "--d-ff", "8",
            "--device", "cpu", "--no-progress", "--out", str(tmp_path)]
    assert main(args) == 0
    assert "using the offline stand-in wikivital" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["wikivital_L1_lr0.0001_s1"]


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


def test_adam_reset_changes_nothing_before_the_first_epoch_boundary(tmp_path):
    """Same seed with and without the per-epoch optimiser reset: identical until the first epoch ends, then not."""
    data = load_lm_data("ptb", 4, 3, 200, max_train_fraction=0.002)
    epoch = n_chunks(data.train, TINY.seq_len)  # steps per pass over the training streams
    cfg = replace(TINY, steps=2 * epoch, eval_interval=epoch // 2)
    reset = train_run(cfg, tmp_path, device="cpu", progress=False, data=data)
    never = train_run(replace(cfg, adam_reset="never"), tmp_path, device="cpu", progress=False, data=data)
    assert sorted(p.name for p in tmp_path.iterdir()) == [cfg.name, cfg.name + "_noreset"]
    before = reset["minibatch"] <= epoch
    np.testing.assert_array_equal(reset["val_loss"][before], never["val_loss"][before])
    assert np.all(reset["val_loss"][~before] != never["val_loss"][~before])


def test_results_stored_before_a_config_field_existed_are_reused(tmp_path, tiny_data):
    first = train_run(TINY, tmp_path, device="cpu", progress=False, data=tiny_data)
    meta_path = tmp_path / TINY.name / "result.json"
    meta = json.loads(meta_path.read_text())
    for later_field in ("arch", "n_heads", "log_checkpoints"):  # as written by an older version of the runner
        del meta["config"][later_field]
    meta_path.write_text(json.dumps(meta))
    again = train_run(TINY, tmp_path, device="cpu", progress=False, data=tiny_data, stop_at=0)
    assert again is not None and again["val_loss"].tolist() == first["val_loss"].tolist()
