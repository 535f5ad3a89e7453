"""Named sweeps (:mod:`joma_lib.lm.presets`): a preset's configs, with its seeds or others and changed fields."""

import pytest

from joma_lib.lm.presets import PRESETS, preset_configs


def test_a_preset_gives_one_config_per_layers_lr_and_seed():
    configs = preset_configs("rerun-full")
    assert [(c.n_layers, c.lr, c.seed) for c in configs] == [(1, 1e-3, 1), (1, 1e-3, 2), (2, 1e-3, 1), (2, 1e-3, 2)]
    assert {c.steps for c in configs} == {PRESETS["rerun-full"]["steps"]} and configs[0].data == "wikivital"


def test_seeds_and_overrides_replace_the_presets():
    configs = preset_configs("rerun-quick", seeds=[7, 8], steps=100, eval_interval=25)
    assert [c.seed for c in configs] == [7, 8, 7, 8]
    assert {(c.steps, c.eval_interval) for c in configs} == {(100, 25)}


def test_an_unknown_preset_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="preset must be one of .*rerun-quick"):
        preset_configs("rerun-slow")
