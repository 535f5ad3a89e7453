"""Table 1: the combination hierarchy, the multilayer Transformer and the alignment score."""

from __future__ import annotations

from dataclasses import replace
from math import prod

import numpy as np
import pytest
import torch

from joma_lib.combination_hierarchy import CombinationHierarchy
from joma_lib.figures.harness import compute
from joma_lib.multilayer import (
    CONFIGS,
    TABLE1_SETTINGS,
    HierarchyTransformer,
    Table1Config,
    alignment_score,
    main,
    train_and_score,
)


@pytest.fixture(scope="module")
def table1() -> dict[str, np.ndarray]:
    """The quick configuration of Table 1, trained once for every test here (the book's data)."""
    return compute("table1")


def test_table1_quick_shapes_and_range(table1: dict[str, np.ndarray]) -> None:
    quick = CONFIGS["quick"]
    assert table1["scores"].shape == (len(TABLE1_SETTINGS), len(quick.seeds), 2)
    for key in ("scores", "scores_init"):
        assert table1[key].shape == table1["scores"].shape
        assert np.all((table1[key] >= 0) & (table1[key] <= 1))
    assert np.allclose(table1["mean"], table1["scores"].mean(axis=1))


def test_table1_quick_layer0_aligns_better_than_layer1(table1: dict[str, np.ndarray]) -> None:
    mean = table1["mean"]
    assert np.all(mean[:, 0] >= 0.8), mean
    assert np.all(mean[:, 0] > mean[:, 1]), mean
    assert np.all(table1["scores"][:, :, 0] > table1["scores"][:, :, 1])  # for every seed, too


def test_table1_quick_training_raises_layer1_not_layer0(table1: dict[str, np.ndarray]) -> None:
    # the control: random ReLU neurons, max-pooled over positions, already detect the level-0 token sets
    assert np.all(table1["mean_init"][:, 0] >= 0.8)
    assert table1["mean"][:, 1].mean() > table1["mean_init"][:, 1].mean() + 0.02


def test_table1_quick_learns_the_task(table1: dict[str, np.ndarray]) -> None:
    # chance is ln 20 = 3.0; some classes of the (10, 20) settings share their leaf set, so not all reach 0
    assert np.all(table1["final_loss"] < 0.3)


def test_combination_hierarchy_structure() -> None:
    data = CombinationHierarchy(n_vocab=100, seq_len=30, level_sizes=(20, 30), n_class=20, n_combinations=3, seed=4)
    assert [c.shape for c in data.children] == [(20, 3), (30, 3), (20, 3)]
    for k, children in enumerate(data.children):
        below = 99 if k == 0 else data.level_sizes[k - 1]
        assert np.all(np.diff(children, axis=1) > 0) and children.max() < below  # distinct, sorted children
        assert len({tuple(row) for row in children}) == len(children)  # distinct sets within a level


def test_combination_hierarchy_sample_is_consistent() -> None:
    data = CombinationHierarchy(n_vocab=50, seq_len=10, level_sizes=(6, 8), n_class=5, n_combinations=(2, 2, 2))
    sample = data.sample(200, np.random.default_rng(0))
    assert sample.tokens.shape == (200, 10) and sample.tokens.dtype == np.int64
    assert np.array_equal(sample.active[-1], np.eye(5, dtype=bool)[sample.labels])
    for i in range(200):
        real = sample.tokens[i][sample.tokens[i] != data.pad]
        n_pad = 10 - real.size
        assert np.all(sample.tokens[i, :n_pad] == data.pad) and np.all(np.diff(real) > 0)  # left-padded, sorted
        expected = set(np.unique(data.children[0][sample.active[0][i]]).tolist())
        assert set(real.tolist()) == expected
        for k in (1, 2):  # a symbol is on exactly when one of its parents is
            below = set(np.unique(data.children[k][sample.active[k][i]]).tolist())
            assert below == set(np.flatnonzero(sample.active[k - 1][i]).tolist())
    assert (sample.tokens != data.pad).sum(axis=1).max() <= prod(data.n_combinations)


def test_alignment_score() -> None:
    rng = np.random.default_rng(0)
    active = rng.random((500, 6)) < 0.3
    noise = rng.random((500, 10))
    assert alignment_score(active, np.concatenate([active * 2.0, noise], axis=1)) == pytest.approx(1.0)
    assert alignment_score(active, noise) < 0.2
    assert alignment_score(np.zeros((500, 3)), noise) == 0.0  # latents never on
    assert alignment_score(active, np.ones((500, 4))) == 0.0  # dead neurons
    half = np.concatenate([active[:, :3] * 1.0, np.zeros((500, 1))], axis=1)
    assert alignment_score(active, half, min_corr=0.5) == pytest.approx(1.0)  # poorly matched latents left out


def test_model_is_causal_and_shapes() -> None:
    torch.manual_seed(0)
    model = HierarchyTransformer(n_vocab=20, n_class=4, n_layers=2, d_model=8, d_hidden=12)
    tokens = torch.randint(0, 20, (3, 7))
    logits, hiddens = model(tokens)
    assert logits.shape == (3, 4) and [h.shape for h in hiddens] == [(3, 7, 12)] * 2
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 20
    _, hiddens2 = model(changed)
    assert torch.allclose(hiddens[1][:, :-1], hiddens2[1][:, :-1])  # earlier positions do not see the last token


def test_training_is_deterministic_on_cpu() -> None:
    tiny = replace(CONFIGS["quick"], steps=5, n_test=64)
    first = train_and_score(tiny, 2, (10, 20), seed=7, device="cpu")
    second = train_and_score(tiny, 2, (10, 20), seed=7, device="cpu")
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    assert not np.array_equal(first.scores, first.scores_init)  # five Adam steps move the neurons


def test_command_line_runs_and_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", "quick", "--steps", "2", "--seeds", "1", "--device", "cpu", "--no-progress"]) == 0
    assert "layer 0" in capsys.readouterr().out
    for argv, message in [(["--config", "huge"], "config must be one of"),
                          (["--device", "tpu"], "device must be one of"),
                          (["--seeds", "one"], "seeds must be integers"),
                          (["--steps", "0"], "steps must be")]:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize("call, match", [
    (lambda: Table1Config(steps=0), "steps"),
    (lambda: Table1Config(lr=0.0), "lr"),
    (lambda: Table1Config(seeds=()), "seeds"),
    (lambda: Table1Config(n_layers=1), "n_layers"),
    (lambda: CombinationHierarchy(n_vocab=10, level_sizes=(50, 20), n_combinations=2), "level 0"),
    (lambda: CombinationHierarchy(seq_len=20, n_combinations=3), "seq_len"),
    (lambda: CombinationHierarchy(n_combinations=(2, 2)), "n_combinations"),
    (lambda: CombinationHierarchy(level_sizes=()), "level_sizes"),
    (lambda: alignment_score(np.zeros((5, 2)), np.zeros((4, 3))), "same number"),
    (lambda: train_and_score(CONFIGS["quick"], 2, (10, 20), seed=-1), "seed"),
])
def test_bad_inputs_raise_clear_errors(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
