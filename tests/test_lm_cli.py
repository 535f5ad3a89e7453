"""The command line of the runs (:mod:`joma_lib.lm.cli`): run, collect and plot; clear errors for bad settings."""

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import joma_lib.lm.sweep as sweep_module
from joma_lib.kit.cli import main as figures_main
from joma_lib.lm.cli import main
from joma_lib.lm.runs import load_sweep

torch.set_num_threads(1)


def test_command_line_runs_collects_and_plots(tmp_path, tiny_run_data, monkeypatch, capsys):
    monkeypatch.setattr(sweep_module, "load_lm_data", lambda *args: tiny_run_data)
    args = ["run", "--data", "ptb", "--layers", "1", "2", "--lr", "3e-3", "--seeds", "5", "--steps", "8",
            "--eval-interval", "4", "--eval-chunks", "2", "--seq-len", "10", "--batch-size", "4",
            "--eval-batch-size", "3", "--max-vocab", "200", "--d", "16", "--d-ff", "16", "--device", "cpu",
            "--no-progress", "--out", str(tmp_path / "runs"), "--results", str(tmp_path / "sweep.npz")]
    assert main(args) == 0
    with np.load(tmp_path / "sweep.npz") as npz:
        assert npz["attn_entropy"].shape == (2, 3, 2) and npz["nlayers"].tolist() == [1, 2]
    # the collected sweep says how its runs were trained (one way here), as their own result files do
    (trained,) = json.loads((tmp_path / "sweep.json").read_text())["trained"]
    assert trained["device"] == "cpu" and trained["torch"] == torch.__version__ and trained["step_mode"] is None
    data, configs = load_sweep(tmp_path / "runs")
    assert [c.n_layers for c in configs] == [1, 2]
    assert figures_main(["sweep", str(tmp_path / "runs"), "--figure", "fig6", "-o", str(tmp_path / "fig6.png")]) == 0
    assert (tmp_path / "fig6.png").stat().st_size > 1000


def test_stacked_runs_stop_at_their_deadline_and_the_same_command_finishes_them(tmp_path, tiny_run_data,
                                                                               monkeypatch, capsys, stack_tolerance):
    monkeypatch.setattr(sweep_module, "load_lm_data", lambda *args: tiny_run_data)
    args = ["run", "--data", "ptb", "--layers", "1", "2", "--lr", "3e-3", "1e-3", "--seeds", "5", "--steps", "8",
            "--eval-interval", "4", "--eval-chunks", "2", "--seq-len", "10", "--batch-size", "4",
            "--eval-batch-size", "3", "--max-vocab", "200", "--d", "16", "--d-ff", "16", "--device", "cpu",
            "--no-progress", "--stack", "--out", str(tmp_path / "runs")]
    assert main([*args, "--stop-after", "1e-9"]) == 75
    assert "run the same command again" in capsys.readouterr().err
    assert not list((tmp_path / "runs").glob("*/result.json"))
    assert main([*args, "--results", str(tmp_path / "sweep.npz")]) == 0
    with np.load(tmp_path / "sweep.npz") as npz:  # in the order of the sweep, not of the stacks
        assert npz["nlayers"].tolist() == [1, 1, 2, 2] and npz["lr"].tolist() == [3e-3, 1e-3, 3e-3, 1e-3]
    assert main(["run", "--preset", "paper", "paper-lr", "--out", str(tmp_path / "x"), "--stop-after", "5"]) == 2
    assert "--stop-after needs --stack" in capsys.readouterr().err
    assert main(["run", "--preset", "paper", "--out", str(tmp_path / "x"), "--stack-size", "3"]) == 2
    assert "--stack-size needs --stack" in capsys.readouterr().err
    assert main(["run", "--preset", "paper", "--out", str(tmp_path / "x"), "--stack", "--stack-size", "0"]) == 2
    assert "stack_size" in capsys.readouterr().err
    # stacks of at most one run: the same runs, trained one at a time
    assert main([*args, "--stack-size", "1", "--out", str(tmp_path / "single"), "--results",
                 str(tmp_path / "single.npz")]) == 0
    with np.load(tmp_path / "sweep.npz") as stacked, np.load(tmp_path / "single.npz") as single:
        np.testing.assert_allclose(single["val_loss"], stacked["val_loss"], rtol=0, atol=stack_tolerance)


def test_several_presets_train_the_union_of_their_runs_once():
    from joma_lib.lm.cli import _parser, configs_from_args

    configs = configs_from_args(_parser().parse_args(["run", "--preset", "paper", "paper-lr", "--out", "x"]))
    assert len(configs) == 30 == len({c.name for c in configs})  # 12 + 21, three of them in both
    assert {(c.n_layers, c.lr) for c in configs if c.n_layers == 5} == {(5, lr) for lr in
                                                                        [1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2]}
    # the library's count of the paper sweep (the Performance and Re-run pages, the GPU benchmark) is these runs
    from joma_lib.lm.presets import paper_sweep_configs

    assert paper_sweep_configs() == configs


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


def test_every_setting_of_a_run_says_what_it_sets_and_its_default():
    """Each option of ``run`` that sets a field of RunConfig has a help that names the field's default, the
    paper's (a None default in words)."""
    from dataclasses import fields

    from joma_lib.lm.cli import _parser
    from joma_lib.lm.config import RunConfig

    run = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    by_dest = {a.dest: a for a in run._actions}
    names = {"n_layers": "layers", "lr": "lr", "seed": "seeds", "log_checkpoints": "log_checkpoints",
             "precision": "precision"}
    for field in fields(RunConfig):
        action = by_dest[names.get(field.name, field.name)]
        assert action.help, field.name
        if field.name not in ("log_checkpoints", "precision"):  # a flag, and a default that depends on the preset
            default = field.default
            shown = "(default: " if default is None else f"default: {default:g}" if isinstance(default, float) \
                else f"default: {default}"
            assert shown in action.help, (field.name, action.help)


def test_unknown_choices_are_refused_by_the_parser(tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--data", "wikitext5", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert figures_main(["sweep", str(tmp_path / "missing"), "-o", str(tmp_path / "x.png")]) == 2


def test_wikitext_offline_runs_on_the_named_stand_in(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["run", "--data", "wikitext2", "--layers", "1", "--steps", "2", "--eval-interval", "2", "--eval-chunks",
            "1", "--seq-len", "5", "--batch-size", "2", "--max-vocab", "100", "--d", "8", "--d-ff", "8",
            "--device", "cpu", "--no-progress", "--out", str(tmp_path)]
    assert main(args) == 0
    assert "using the offline stand-in wikivital" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["wikivital_L1_lr0.0001_s1"]


def test_python_m_joma_lib_lm_is_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "joma_lib.lm", "status", "--help"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python -m joma_lib.lm status")


def test_against_a_deadline_the_cheapest_stacks_train_first(tmp_path, monkeypatch):
    """With --stop-after (a lent GPU), the stacks go in order of their runs' layers summed, so that the time left
    finishes whole stacks: the paper sweep's 10-layer stack of 3 before the 5-layer stacks of 7."""
    from dataclasses import replace

    from joma_lib.lm.presets import PAPER_GPU_STACK, paper_sweep_configs
    from joma_lib.lm.sweep import DeadlineReached, run_sweep

    order = []

    def record(unit, *args):
        order.append((unit[0].n_layers, len(unit)))
        if len(order) == 6:
            raise DeadlineReached("every stack seen")
        return []

    monkeypatch.setattr(sweep_module, "load_lm_data", lambda *args: type("Data", (), {"note": ""})())
    monkeypatch.setattr(sweep_module, "_run_unit", record)
    configs = [replace(c, precision="fp32") for c in paper_sweep_configs()]
    with pytest.raises(DeadlineReached):
        run_sweep(configs, tmp_path, "cpu", progress=False, log=lambda _: None, stack=True, stop_after=60,
                  stack_size=PAPER_GPU_STACK)
    assert order == [(1, 3), (2, 3), (10, 3), (5, 7), (5, 7), (5, 7)]
