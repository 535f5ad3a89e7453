"""Drawing of the Paper Fig. 5 figures (:mod:`.figures` makes their data): one question per figure, the paper's
panel letters in the titles. Colour by height ``H`` of the common ancestor with the query, the same in all three:
dark for the nearest tokens, yellow for the farthest."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from joma_lib.kit.registry import FigureData


def height_colours(tree_height: int) -> list[Any]:
    """One colour per height ``H = 1..tree_height`` (viridis, dark = near)."""
    cmap = colormaps["viridis"]
    return [cmap(k / max(tree_height - 1, 1)) for k in range(tree_height)]


def _draw_tree(ax: Any, tree_height: int, branching: int, heights: np.ndarray, query: int) -> None:
    """The complete tree, leaves coloured by the height of their common ancestor with the query."""
    n_leaves = branching**tree_height
    x = np.arange(n_leaves, dtype=float)
    for h in range(1, tree_height + 1):
        parents = x.reshape(-1, branching).mean(axis=1)
        for j, px in enumerate(parents):
            for cx in x[j * branching:(j + 1) * branching]:
                ax.plot([px, cx], [h, h - 1], color="0.6", lw=0.8, zorder=1)
        ax.scatter(parents, np.full(parents.size, h), s=60 if h < tree_height else 160,
                   color="0.85" if h < tree_height else "0.55", edgecolor="k", zorder=2)
        x = parents
    ax.text(x[0], tree_height + 0.35, r"$y_0$ (label)", ha="center", fontsize=9)
    colours = height_colours(tree_height)
    ax.scatter(np.arange(n_leaves), np.zeros(n_leaves), s=90, edgecolor="k", zorder=3,
               c=[colours[h - 1] if h > 0 else "k" for h in heights])
    ax.annotate("query $m$", (query, 0), (query, -0.9), ha="center", fontsize=9,
                arrowprops={"arrowstyle": "->", "lw": 0.8})
    ax.set_ylim(-1.2, tree_height + 0.7)
    ax.set_yticks(range(tree_height + 1))
    ax.set_ylabel("height")
    ax.set_xticks([])
    ax.grid(False)
    ax.legend([Line2D([], [], marker="o", ls="", color=c, markeredgecolor="k") for c in colours],
              [f"H = {h}" for h in range(1, tree_height + 1)], loc="upper right", fontsize=9)


def _attention_map(fig: Figure, ax: Any, values: np.ndarray, title: str) -> None:
    """Attention (or co-occurrence) of every query (rows) over the tokens (columns), colour bar below."""
    im = ax.imshow(values, cmap="magma", vmin=0)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("token $l$")
    ax.set_ylabel("query $m$")
    ax.set_xticks(range(0, values.shape[0], 4))
    ax.set_yticks(range(0, values.shape[0], 4))
    ax.grid(False)
    fig.colorbar(im, ax=ax, location="bottom", shrink=0.7, pad=0.02, aspect=30)


def plot_fig5_tree(data: FigureData) -> Figure:
    """(a) the tree, leaves coloured by the height of their common ancestor with the query; (b) the co-occurrence
    ``P[l | m]`` of every pair: blocks that follow the tree."""
    H, query = data["cla_height"], int(data["query"])
    fig = Figure(figsize=(8.8, 3.9), layout="constrained")
    tree_ax, map_ax = fig.subplots(1, 2, width_ratios=(1.5, 1.0))
    _draw_tree(tree_ax, int(H.max()), int(data["branching"]), H[query], query)
    tree_ax.set_title("(a) latent tree; colour: height $H$ of the common ancestor with $m$", fontsize=10)
    _attention_map(fig, map_ax, data["cooccurrence"], r"(b) co-occurrence $P[l\mid m]$")
    return fig


def plot_fig5(data: FigureData) -> Figure:
    """(b) the association ``v_l / mu_l`` of the query with one token per height (dotted: 90% reached), and the
    entropy of its attention over the same time (dotted: its minimum)."""
    times, v, mu, H = data["times"], data["v"], data["mu"], data["height"]
    tree_height = int(H.max())
    colours = height_colours(tree_height)
    fig = Figure(figsize=(8.8, 3.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    for h in range(1, tree_height + 1):
        l = int(np.flatnonzero(H == h)[0])
        left.plot(times, v[:, l] / mu[l], color=colours[h - 1],
                  label=f"H = {h}: {float(data['fraction']):.0%} at t = {data['assoc_time'][h - 1]:.2f}")
        left.axvline(data["assoc_time"][h - 1], color=colours[h - 1], ls=":", lw=0.8)
    left.set_xlabel("time $t$")
    left.set_ylabel(r"$v_l(t) / \mu_l$")
    left.set_title("(b) association of the query with a token at height $H$", fontsize=10)
    left.legend(fontsize=9, loc="lower right")  # the curves have reached 1 where the legend sits
    right.plot(times, data["entropy"], "k-")
    right.axvline(float(data["t_sparse"]), color="0.5", ls=":", lw=0.8)
    right.set_xlabel("time $t$")
    right.set_ylabel("entropy (nats)")
    right.set_title("entropy of the query's attention", fontsize=10)
    return fig


def plot_fig5_attention(data: FigureData) -> Figure:
    """Top: the attention the query pays to one token at each height, over time (dotted: the sparsest moment).
    Bottom: the attention of every query at that moment and at the end (the diagonal is 0: no self-attention)."""
    times, per_token = data["times"], data["attention_per_token_by_height"]
    colours = height_colours(per_token.shape[1])
    fig = Figure(figsize=(8.8, 7.6), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=(1.0, 1.25))
    ax = fig.add_subplot(grid[0, :])
    for h in range(1, per_token.shape[1] + 1):
        ax.plot(times, per_token[:, h - 1], color=colours[h - 1], label=f"H = {h}")
    ax.axvline(float(data["t_sparse"]), color="0.5", ls=":", lw=0.8)
    ax.set_xlabel("time $t$")
    ax.set_ylabel("attention per token")
    ax.set_title("(b) the query's attention to one token at height $H$: sparse, then dense", fontsize=10)
    ax.legend(fontsize=9, loc="upper right")  # above the curves once they have settled
    _attention_map(fig, fig.add_subplot(grid[1, 0]), data["attention_sparse"],
                   f"every query at t = {float(data['t_sparse']):.2f} (sparsest)")
    _attention_map(fig, fig.add_subplot(grid[1, 1]), data["attention_final"],
                   f"every query at t = {times[-1]:g} (end)")
    return fig
