"""The hierarchy chapter (joma_lib.chapters.hierarchy): Fig. 5, the co-occurrence figure and widget, and the
kernel-free grid of Theorem 5."""

from __future__ import annotations


import numpy as np
import pytest

from joma_lib.chapters.hierarchy.explorer import hierarchy_explorer
from joma_lib.chapters.hierarchy.figures import make_cooccurrence, make_fig5, make_hierarchy_grid
from joma_lib.latent_tree import (
    HBLT,
    association_time,
    cooccurrence_exact,
)


def test_hierarchy_grid_matches_theorem5_and_the_association_time(payload, cell_data):
    data = make_hierarchy_grid(depths=(2, 4), rhos=(0.75, 0.9), n_times=401)
    tree = HBLT(depth=4, rho=0.9)
    for h in range(1, 5):
        p = cooccurrence_exact(tree, 2 ** (h - 1), 0)
        assert data["cooccurrence"][1, 1, h - 1] == pytest.approx(p, rel=1e-12)
        assert data["assoc_time"][1, 1, h - 1] == pytest.approx(association_time(4 * p, 0.9), rel=1e-12)
    assert np.all(np.isnan(data["cooccurrence"][0, :, 2:]))  # a height-2 tree has no H = 3, 4
    assert np.all(np.diff(data["assoc_time"][1, :, :4], axis=-1) > 0)  # near tokens first
    at_t90 = [np.interp(data["assoc_time"][1, 1, h], data["times"], data["association"][1, 1, h]) for h in range(4)]
    np.testing.assert_allclose(at_t90, 0.9, atol=0.005)  # v/mu reaches 0.9 at the quadrature's time
    p = payload(hierarchy_explorer(data).html("h"))
    ys = cell_data(p, (0, 1))
    assert ys[0][:2] == pytest.approx(data["cooccurrence"][0, 1, :2], rel=1e-2) and ys[0][2:] == [None, None]
    with pytest.raises(ValueError, match="depths"):
        make_hierarchy_grid(depths=(4, 2))


def test_fig5_association_order_and_sparse_then_dense() -> None:
    data = make_fig5()
    t = data["assoc_time"]
    assert t.shape == (4,) and np.all(np.diff(t) > 0.05)  # low common ancestor first, the root last
    H, query = data["cla_height"], int(data["query"])
    v, mu, times = data["v"], data["mu"], data["times"]
    for h in range(1, 4):  # at the moment the H-token is associated, the farther ones are not yet
        near = int(np.flatnonzero(H[query] == h)[0])
        far = int(np.flatnonzero(H[query] == h + 1)[0])
        k = int(np.searchsorted(times, t[h - 1]))
        assert v[k, near] / mu[near] > v[k, far] / mu[far] + 0.02
    e = data["entropy"]
    assert e.min() < e[0] - 1.0 and e[-1] > e.min() + 0.5  # attention first sparse, then dense
    k = int(np.argmin(e))
    assert np.argmax(data["attention_per_token_by_height"][k]) == 0


def test_fig5_refuses_a_tree_too_shallow_for_its_panels() -> None:
    with pytest.raises(ValueError, match="depth"):
        make_fig5(depth=1)


def test_cooccurrence_figure_data() -> None:
    data = make_cooccurrence(depths=(4, 6), n_samples=20_000)
    for i, L in enumerate(data["depths"]):
        ok = ~np.isnan(data["exact"][i])
        assert ok.sum() == L
        assert np.all(np.abs(data["monte_carlo"][i, ok] - data["exact"][i, ok]) <= 3 * data["stderr"][i, ok])
        assert np.all(np.diff(data["exact"][i, ok]) < 0)


def test_cooccurrence_widget_follows_its_controls() -> None:
    from joma_lib.chapters.hierarchy.widget import CooccurrenceWidget

    explorer = CooccurrenceWidget(depth=6, height=2)
    assert explorer.image.value[:4] == b"\x89PNG"
    explorer.controls["depth"].value = 10
    assert explorer.controls["rho"].value == pytest.approx(0.9) and explorer.controls["rho"].disabled
    expected = cooccurrence_exact(HBLT(depth=10, rho=0.9), 2, 0)
    assert f"{expected:.4f}" in explorer.status.value
    explorer.controls["tie_rho"].value = False
    explorer.controls["rho"].value = 0.5
    explorer.controls["channel"].value = list(explorer.controls["channel"].options)[1]  # inheritance: rho^H
    assert f"{0.5 ** 2:.4f}" in explorer.status.value
