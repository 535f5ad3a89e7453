"""The hierarchy chapter (joma_lib.chapters.hierarchy): Theorem 5's co-occurrence figure and widget."""

from __future__ import annotations


import numpy as np
import pytest

from joma_lib.chapters.hierarchy.figures import COOCCURRENCE_CLAIMS, COOCCURRENCE_SAMPLES, make_cooccurrence
from joma_lib.kit.registry import FigureData
from joma_lib.theory.latent_tree import HBLT, cooccurrence_exact

CLAIMS = {claim.claim_id: claim for claim in COOCCURRENCE_CLAIMS}
# (tree, height H) of the one altered entry: the first tree at its top height H = L, the second at H = 1 and H = L
PLACES = ((0, 4), (1, 1), (1, 6))


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


@pytest.fixture(scope="module")
def trees() -> FigureData:
    return make_cooccurrence(tree_heights=(4, 6), n_samples=2000)


def _set(data: FigureData, key: str, tree: int, H: int, value: float) -> FigureData:
    array = data[key].copy()
    array[tree, H - 1] = value
    return {**data, key: array}


def _measure(claim_id: str, data: FigureData) -> float:
    return CLAIMS[claim_id].evaluate(data)[0]


@pytest.mark.parametrize("tree, H", PLACES)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_each_theorem5_claim_reports_one_bad_height_of_either_tree(trees, tree, H, sign):
    """One entry made wrong, above or below, in the first tree or the last, at the first height or at H = L: each
    claim's value is that entry's error, so every height of every tree is read, by its size."""
    assert [c.evaluate(trees)[1] for c in COOCCURRENCE_CLAIMS] == ["holds"] * 4
    exact, stderr = trees["exact"][tree, H - 1], trees["stderr"][tree, H - 1]
    off_closed_form = _set(trees, "exact", tree, H, exact + sign * 1e-9)
    assert _measure("thm5-cooccurrence", off_closed_form) == pytest.approx(1e-9, rel=1e-3)
    off_sample = _set(trees, "monte_carlo", tree, H, exact + sign * 50 * stderr)
    assert _measure("thm5-monte-carlo", off_sample) == pytest.approx(50.0)
    bound = trees["error_bound"][tree, H - 1]
    off_bound = _set(trees, "approx", tree, H, exact - sign * (bound + 0.01))
    assert _measure("thm5-one-minus-h-over-l", off_bound) == pytest.approx(0.01)


@pytest.mark.parametrize("tree, H", [place for place in PLACES if place[1] > 1])
def test_a_rise_at_any_height_of_either_tree_breaks_the_decrease(trees, tree, H):
    rising = _set(trees, "exact", tree, H, trees["exact"][tree, H - 2] + 0.01)
    assert _measure("thm5-decreasing-in-height", rising) == pytest.approx(0.01)
