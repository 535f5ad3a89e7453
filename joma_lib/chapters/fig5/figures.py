"""Figures of the "Paper Fig. 5" page: the tree and its co-occurrence (a), the order of association (b), where the
attention goes meanwhile, and the grid of the page's explorer (:mod:`.grid`)."""

from __future__ import annotations

import numpy as np
from joma_lib.chapters.fig5.drawing import plot_fig5, plot_fig5_attention, plot_fig5_tree
from joma_lib.chapters.fig5.grid import make_hierarchy_grid, plot_hierarchy_grid
from joma_lib.chapters.fig5.query import query_run, query_times
from joma_lib.kit.registry import Claim, FigureData, FigureSpec, Tolerance
from joma_lib.theory.latent_tree import (
    HBLT,
    association_dynamics,
    association_targets,
    attention_from_association,
    cla_height_matrix,
    cooccurrence_matrix,
)
from joma_lib.theory.softmax_dynamics import row_entropy
from joma_lib.base.validation import check_int

def fig5_tree(tree_height: int = 4, branching: int = 2) -> HBLT:
    """Our tree for Paper Fig. 5 (a schematic that fixes neither ``L`` nor ``rho``): an HBLT with a binary root and
    ``rho = 1 - 1/L``, the tie under which our reconstruction of Theorem 5 gives the paper's ``1 - H/L``."""
    tree_height = check_int("tree_height", tree_height, 2, 8)
    return HBLT(tree_height=tree_height, branching=branching, rho=1 - 1 / tree_height)


def make_fig5_tree(tree_height: int = 4, branching: int = 2, query: int = 0) -> FigureData:
    """Data of Paper Fig. 5(a): the height of the common ancestor of every pair of tokens and the co-occurrence
    ``P[l | m]`` it induces (Theorem 5)."""
    tree = fig5_tree(tree_height, branching)
    return {"cla_height": cla_height_matrix(tree), "cooccurrence": cooccurrence_matrix(tree),
            "query": np.asarray(tree.leaf_index("query", query)), "branching": np.asarray(tree.branching)}


def make_fig5(tree_height: int = 4, branching: int = 2, scale: float = 4.0, query: int = 0,
              fraction: float = 0.9, t_max: float = 2.0, n_times: int = 201) -> FigureData:
    """Data of Paper Fig. 5(b): the association ``v_l(t) / mu_l`` of one query with every token and the entropy of
    its attention (:func:`.query.query_run` on the tree of :func:`fig5_tree`). ``assoc_time[H-1]`` is the time at
    which ``v_l`` reaches ``fraction * mu_l`` for a token whose CLA with the query is at height ``H``."""
    run = query_run(fig5_tree(tree_height, branching), query, scale, fraction, t_max, n_times)
    return {"height": run.heights, "times": run.times, "mu": run.mu, "v": run.v, "entropy": run.entropy,
            "t_sparse": np.asarray(run.times[int(np.argmin(run.entropy))]), "assoc_time": run.assoc_time,
            "fraction": np.asarray(fraction), "query": np.asarray(query)}


def make_fig5_attention(tree_height: int = 4, branching: int = 2, scale: float = 4.0, query: int = 0,
                        t_max: float = 2.0, n_times: int = 201) -> FigureData:
    """Where the attention goes in Paper Fig. 5(b): the attention of ``query`` per token of each height over time,
    and the attention of every query at the moment ``query``'s is sparsest and at the end."""
    tree = fig5_tree(tree_height, branching)
    query = tree.leaf_index("query", query)
    times = query_times(t_max, n_times)
    attention = np.empty((tree.n_leaves, times.size, tree.n_leaves))
    for m in range(tree.n_leaves):
        mu = association_targets(tree, m, scale)
        attention[m] = attention_from_association(mu, association_dynamics(mu, times))
    sparse = int(np.argmin(row_entropy(attention[query])))
    heights = cla_height_matrix(tree)[query]
    per_token = np.stack([attention[query][:, heights == h].mean(axis=1) for h in range(1, tree.tree_height + 1)],
                         axis=1)
    return {"times": times, "attention_per_token_by_height": per_token, "t_sparse": np.asarray(times[sparse]),
            "attention_sparse": attention[:, sparse], "attention_final": attention[:, -1],
            "query": np.asarray(query)}


def _association_order(data: FigureData) -> float:
    """Smallest increase of the association time from one ancestor height to the next (> 0: in order)."""
    return float(np.diff(data["assoc_time"]).min())


def _fig5_bounce(data: FigureData) -> float:
    e = data["entropy"]
    return float(e[-1] - e.min()) if e.min() < e[0] - 1.0 else float("nan")


FIG5_CLAIMS = (
    Claim("fig5-order", "Fig. 5(b), Theorems 4-5",
          "The query associates first with tokens whose common ancestor is lowest: smallest gap between "
          "association times of successive heights", _association_order, ">", 0.0,
          kind="sanity", threshold_set="before-data"),
    Claim("fig5-sparse-then-dense", "Fig. 5",
          "Attention of the query drops by > 1 nat (sparse), then spreads back: rise after the minimum (nats)",
          _fig5_bounce, ">", 0.5,
          kind="companion", threshold_set="after-data",
          threshold_note="the book's 0.5-nat bar and its data first appear together in d2eb6fa; the value is 1.16"),
)


FIG5_TOL = Tolerance(rtol=1e-6, atol=1e-8)

FIGURES = [
    FigureSpec(fig_id="c-fig5-tree", title="Paper Fig. 5(a): the latent tree and the co-occurrence it induces",
               paper_ref="Fig. 5(a)", chapter="book/fig5.md", make=make_fig5_tree, plot=plot_fig5_tree,
               default_tol=FIG5_TOL),
    FigureSpec(fig_id="fig5", title="Paper Fig. 5(b): the query associates first with the tokens of a low common "
               "ancestor", paper_ref="Fig. 5(b)", chapter="book/fig5.md", make=make_fig5, plot=plot_fig5,
               default_tol=FIG5_TOL, claims=FIG5_CLAIMS),
    FigureSpec(fig_id="c-fig5-attention", title="Paper Fig. 5(b), the attention: on the nearest tokens first, "
               "then spread out", paper_ref="companion (Fig. 5(b))", chapter="book/fig5.md", make=make_fig5_attention,
               plot=plot_fig5_attention, default_tol=FIG5_TOL),
    FigureSpec(fig_id="c-hierarchy-grid", title="Grid of the Theorem 5 / Fig. 5 explorer: tree height x polarity",
               paper_ref="companion (Theorem 5, Fig. 5)", chapter="book/fig5.md", make=make_hierarchy_grid,
               plot=plot_hierarchy_grid, default_tol=FIG5_TOL),
]
