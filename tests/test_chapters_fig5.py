"""The fig5 chapter (joma_lib.chapters.fig5): the three figures of Paper Fig. 5, the query's run and the kernel-free
grid over tree height and polarity."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.chapters.fig5.explorer import hierarchy_explorer
from joma_lib.chapters.fig5.figures import FIG5_CLAIMS, make_fig5, make_fig5_attention, make_fig5_tree
from joma_lib.chapters.fig5.grid import make_hierarchy_grid
from joma_lib.chapters.fig5.query import linear_query_run, query_run
from joma_lib.theory.latent_tree import HBLT, association_time, cooccurrence_exact


def test_hierarchy_grid_matches_theorem5_and_the_association_time(payload, cell_data):
    data = make_hierarchy_grid(tree_heights=(2, 4), rhos=(0.75, 0.9), n_times=401)
    tree = HBLT(tree_height=4, rho=0.9)
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
    with pytest.raises(ValueError, match="tree_heights"):
        make_hierarchy_grid(tree_heights=(4, 2))


def test_fig5_association_order_and_sparse_then_dense() -> None:
    data = make_fig5()
    t = data["assoc_time"]
    assert t.shape == (4,) and np.all(np.diff(t) > 0.05)  # low common ancestor first, the root last
    H, v, mu, times = data["height"], data["v"], data["mu"], data["times"]
    assert H[int(data["query"])] == 0 and np.bincount(H).tolist() == [1, 1, 2, 4, 8]
    for h in range(1, 4):  # at the moment the H-token is associated, the farther ones are not yet
        near = int(np.flatnonzero(H == h)[0])
        far = int(np.flatnonzero(H == h + 1)[0])
        k = int(np.searchsorted(times, t[h - 1]))
        assert v[k, near] / mu[near] > v[k, far] / mu[far] + 0.02
    e = data["entropy"]
    assert e.min() < e[0] - 1.0 and e[-1] > e.min() + 0.5  # attention first sparse, then dense
    assert float(data["t_sparse"]) == times[int(np.argmin(e))]


def test_the_fig5_claims_read_every_height_and_every_checkpoint() -> None:
    """``fig5-order`` is the smallest step between successive heights' association times, wherever it lies, and a
    height that never associates (NaN) leaves it unmet; ``fig5-sparse-then-dense`` is unmet with a lost entropy."""
    order, bounce = (next(c for c in FIG5_CLAIMS if c.claim_id == i).measure
                     for i in ("fig5-order", "fig5-sparse-then-dense"))
    for times, smallest in (([0.2, 0.1, 0.3, 0.5], -0.1), ([0.1, 0.2, 0.4, 0.3], -0.1), ([0.1, 0.3, 0.4, 0.6], 0.1)):
        assert order({"assoc_time": np.array(times)}) == pytest.approx(smallest), times
    assert np.isnan(order({"assoc_time": np.array([0.1, np.nan, 0.3, 0.4])}))
    e = np.array([3.0, 1.5, np.nan, 1.0, 2.0])
    assert np.isnan(bounce({"entropy": e}))
    assert bounce({"entropy": np.nan_to_num(e, nan=1.2)}) == pytest.approx(1.0)  # the same curve, whole


def test_fig5_attention_is_on_the_sibling_when_sparsest_and_spread_at_the_end() -> None:
    data = make_fig5_attention(query=5)
    assert float(data["t_sparse"]) == float(make_fig5(query=5)["t_sparse"])
    k = int(np.searchsorted(data["times"], float(data["t_sparse"])))
    assert np.argmax(data["attention_per_token_by_height"][k]) == 0
    np.testing.assert_array_equal(np.argmax(data["attention_sparse"], axis=1), np.arange(16) ^ 1)  # the siblings
    for rows in (data["attention_sparse"], data["attention_final"]):
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=1e-12)
        assert np.all(np.diag(rows) == 0)  # no self-attention
    assert data["attention_final"][0, 2] > data["attention_sparse"][0, 2]  # a cousin gets attention back


def test_fig5_tree_is_theorem5_on_the_tree_of_the_figure() -> None:
    data = make_fig5_tree()
    tree = HBLT(tree_height=4, rho=0.75)
    assert data["cooccurrence"][0, 8] == pytest.approx(cooccurrence_exact(tree, 8, 0), rel=1e-12)
    assert data["cla_height"][0].tolist() == [0, 1, 2, 2, 3, 3, 3, 3] + [4] * 8


@pytest.mark.parametrize("make", [make_fig5, make_fig5_attention, make_fig5_tree])
def test_fig5_figures_refuse_a_tree_too_shallow_for_their_panels(make) -> None:
    with pytest.raises(ValueError, match="tree_height"):
        make(tree_height=1)


def test_query_run_and_its_linear_twin() -> None:
    run = query_run(HBLT(tree_height=3, rho=0.9), query=2, scale=3.0, n_times=101)
    assert run.heights[2] == 0 and run.mu[2] == 0.0 and run.v.shape == (101, 8)
    assert run.dip == pytest.approx(run.entropy[0] - run.entropy.min()) and run.dip > 0
    assert np.all(np.diff(run.assoc_time) > 0)
    t_star, v, entropy = linear_query_run(run.mu, n_times=20)
    assert t_star == pytest.approx(np.sqrt(np.pi / 2) / run.mu.max())
    assert v.shape == (20, 8) and np.all(v[:, 2] == 0) and np.all(np.diff(entropy) < 0)
    with pytest.raises(ValueError, match="until"):
        linear_query_run(run.mu, until=1.0)
