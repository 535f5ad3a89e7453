"""joma_lib.lm.config: one run's settings (RunConfig), their checks, names and checkpoints; sweeps of them."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from joma_lib.lm.config import RunConfig, same_config, sweep_configs


@pytest.mark.parametrize(("fields", "message"), [
    ({"n_layers": 0}, r"n_layers must be"),
    ({"lr": 0.0}, r"lr must be"),
    ({"dropout": 1.0}, r"dropout must be"),
    ({"eval_interval": 10, "steps": 5}, r"eval_interval must be"),
    ({"adam_reset": "sometimes"}, r"adam_reset must be one of"),
    ({"precision": "half"}, r"precision must be one of"),
    ({"arch": "gpt5"}, r"arch must be one of"),
    ({"n_heads": 2}, r"n_heads must be 1 for arch='paper'"),
    ({"arch": "gptneox", "d": 10, "n_heads": 3}, r"d \(10\) must be a multiple of n_heads \(3\)"),
])
def test_a_bad_field_is_refused_by_name(fields, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**fields).validated()


def test_log_checkpoints_must_be_a_bool():
    with pytest.raises(TypeError, match="log_checkpoints must be a bool, got int"):
        RunConfig(log_checkpoints=1).validated()  # type: ignore[arg-type]


def test_the_name_marks_every_non_default_choice():
    assert RunConfig().name == "wikitext2_L1_lr0.0001_s1"  # fp32 runs of the paper's setting keep their names
    assert RunConfig(precision="bf16").name.endswith("_bf16")
    assert RunConfig(adam_reset="never", n_layers=5, lr=1e-3, seed=2).name == "wikitext2_L5_lr0.001_s2_noreset"
    assert RunConfig(arch="gptneox", n_heads=2, data="ptb").name.startswith("gptneox_ptb_")


def test_checkpoints_are_every_interval_and_the_last_step():
    assert RunConfig(steps=25, eval_interval=10).checkpoints().tolist() == [0, 10, 20, 25]
    assert RunConfig(steps=20, eval_interval=10).checkpoints().tolist() == [0, 10, 20]
    log = RunConfig(steps=20, eval_interval=10, log_checkpoints=True).checkpoints().tolist()
    assert log == [0, 1, 2, 4, 8, 10, 20]  # Pythia's powers of two below the interval


def test_a_stored_config_without_a_newer_field_counts_it_as_the_default():
    stored = asdict(RunConfig())
    del stored["log_checkpoints"]  # written before the field existed
    assert same_config(stored, RunConfig())
    assert not same_config(stored, RunConfig(log_checkpoints=True))


def test_a_sweep_nests_layers_then_learning_rates_then_seeds():
    runs = sweep_configs(RunConfig(), layers=[1, 2], lrs=[1e-4, 1e-3], seeds=[1, 2])
    assert [(r.n_layers, r.lr, r.seed) for r in runs] == [
        (n, lr, s) for n in (1, 2) for lr in (1e-4, 1e-3) for s in (1, 2)]
    with pytest.raises(ValueError, match="n_layers must be"):
        sweep_configs(RunConfig(), layers=[0], lrs=[1e-4], seeds=[1])
