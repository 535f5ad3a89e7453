"""The hierarchy chapter (joma_lib.chapters.hierarchy): Theorem 5's co-occurrence figure and widget."""

from __future__ import annotations


import numpy as np
import pytest

from joma_lib.chapters.hierarchy.figures import COOCCURRENCE_SAMPLES, make_cooccurrence
from joma_lib.theory.latent_tree import HBLT, cooccurrence_exact


def test_cooccurrence_figure_data() -> None:
    data = make_cooccurrence(tree_heights=(4, 6), n_samples=COOCCURRENCE_SAMPLES)
    for i, L in enumerate(data["tree_heights"]):
        ok = ~np.isnan(data["exact"][i])
        assert ok.sum() == L
        assert np.all(np.abs(data["monte_carlo"][i, ok] - data["exact"][i, ok]) <= 3 * data["stderr"][i, ok])
        assert np.all(np.diff(data["exact"][i, ok]) < 0)
    with pytest.raises(ValueError, match="tree_heights"):
        make_cooccurrence(tree_heights=())


def test_cooccurrence_widget_follows_its_controls() -> None:
    from joma_lib.chapters.hierarchy.widget import CooccurrenceWidget

    explorer = CooccurrenceWidget(tree_height=6, height=2)
    assert explorer.image.value[:4] == b"\x89PNG"
    explorer.controls["tree_height"].value = 10
    assert explorer.controls["rho"].value == pytest.approx(0.9) and explorer.controls["rho"].disabled
    expected = cooccurrence_exact(HBLT(tree_height=10, rho=0.9), 2, 0)
    assert f"{expected:.4f}" in explorer.status.value
    explorer.controls["tie_rho"].value = False
    explorer.controls["rho"].value = 0.5
    explorer.controls["channel"].value = list(explorer.controls["channel"].options)[1]  # inheritance: rho^H
    assert f"{0.5 ** 2:.4f}" in explorer.status.value
