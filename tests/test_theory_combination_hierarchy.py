"""The random combination hierarchy (joma_lib.theory.combination_hierarchy): its structure is fixed by the seed, its
samples are determined by the label, and impossible settings are refused naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.theory.combination_hierarchy import CombinationHierarchy


def test_the_structure_is_fixed_by_the_seed():
    a, b, c = (CombinationHierarchy(seed=s) for s in (3, 3, 4))
    assert all(np.array_equal(x, y) for x, y in zip(a.children, b.children))
    assert not all(np.array_equal(x, y) for x, y in zip(a.children, c.children))
    assert a.pad == 99 and a.level_sizes == (10, 20, 20)


def test_sequences_of_one_class_are_one_leaf_set():
    """Every symbol turns on all its children, so the label alone fixes the tokens of a sequence."""
    data = CombinationHierarchy(n_vocab=40, seq_len=8, level_sizes=(6,), n_class=4, n_combinations=(2, 3))
    sample = data.sample(300, np.random.default_rng(1))
    for label in range(4):
        rows = sample.tokens[sample.labels == label]
        assert len(rows) > 0 and (rows == rows[0]).all()
    assert ((sample.tokens != data.pad).sum(axis=1) <= 6).all()  # at most 2 x 3 leaves


@pytest.mark.parametrize("kwargs, match", [
    ({"level_sizes": ()}, "level_sizes must be a non-empty"),
    ({"level_sizes": 5}, "level_sizes must be a non-empty"),
    ({"n_combinations": (2, 2)}, r"n_combinations must be one int or 3 ints"),
    ({"n_vocab": 5, "level_sizes": (10,)}, r"level 0: cannot draw 10 distinct sets"),
    ({"seq_len": 7}, r"seq_len must be >= prod\(n_combinations\) = 8"),
    ({"n_class": 1}, "n_class"),
])
def test_impossible_settings_are_refused_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CombinationHierarchy(**kwargs)


@pytest.mark.parametrize("labels", [[-1], [20], [1.5], np.array([0.0, 1.0]), [[0, 1]], [True]])
def test_labels_outside_the_classes_are_refused_naming_them(labels):
    """-1 gave class 19's sequence, 20 and 1.5 a bare IndexError (n_class = 20)."""
    with pytest.raises(ValueError, match=r"labels must be a 1-D array of integer class labels in \[0, 19\], got"):
        CombinationHierarchy().of_labels(labels)
    np.testing.assert_array_equal(CombinationHierarchy().of_labels([19, 0]).labels, [19, 0])
