"""The grid behind the Fig. 5 page's kernel-free explorer: Theorem 5 and the Fig. 5 dynamics over tree
height x polarity (``c-hierarchy-grid``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from joma_lib.theory.softmax_dynamics import row_entropy
from joma_lib.kit.explorer import increasing_values
from joma_lib.kit.registry import FigureData
from joma_lib.kit.style import heatmap
from joma_lib.theory.latent_tree import (
    HBLT,
    association_dynamics,
    association_time,
    attention_from_association,
    cooccurrence_approx,
    cooccurrence_exact,
)
from joma_lib.base.validation import check_float, check_int


HIERARCHY_TREE_HEIGHTS = tuple(range(2, 11))
HIERARCHY_RHOS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def make_hierarchy_grid(tree_heights: Sequence[int] = HIERARCHY_TREE_HEIGHTS,
                        rhos: Sequence[float] = HIERARCHY_RHOS, scale: float = 4.0, fraction: float = 0.9,
                        t_max: float = 1.6, n_times: int = 65) -> FigureData:
    """Theorem 5 and the Fig. 5 dynamics over tree height ``L`` x polarity ``rho`` (binary tree, binary root,
    symmetric channel), for the query ``m = 0`` and one token per height ``H`` of the common ancestor.

    Returns (``nL`` tree heights ``L``, ``P`` polarities, ``Hmax = max L``, ``n`` times), NaN beyond a tree's height:
    ``cooccurrence`` (nL, P, Hmax) exact ``P[l | m]``; ``approx`` (nL, Hmax) the paper's ``1 - H/L``;
    ``association`` (nL, P, Hmax, n) ``v_l(t) / mu_l`` of ``dv/dt = (mu - v) o exp(v^2/2)`` with
    ``mu_l = scale P[l | m]`` (as ``fig5``); ``assoc_time`` (nL, P, Hmax) when ``v_l`` reaches
    ``fraction mu_l``; ``entropy`` (nL, P, n) of the query's attention over all ``2^L - 1`` other tokens.
    """
    L_values = np.array([check_int(f"tree_heights[{i}]", L, 1, 12) for i, L in enumerate(tree_heights)])
    if L_values.size == 0 or np.any(np.diff(L_values) <= 0):
        raise ValueError(f"tree_heights must be a non-empty, strictly increasing sequence of heights, "
                         f"got {tree_heights!r}")
    r_values = increasing_values("rhos", rhos, 0.0, 1.0)
    times = np.linspace(0.0, check_float("t_max", t_max, 0.0, 100.0, low_open=True),
                        check_int("n_times", n_times, 2, 1000))
    h_max = int(L_values.max())
    shape = (L_values.size, r_values.size)
    cooc, assoc_time = np.full(shape + (h_max,), np.nan), np.full(shape + (h_max,), np.nan)
    association, entropy = np.full(shape + (h_max, times.size), np.nan), np.empty(shape + (times.size,))
    approx = np.full((L_values.size, h_max), np.nan)
    for i, L in enumerate(L_values):
        heights = np.arange(1, L + 1)
        approx[i, :L] = cooccurrence_approx(heights, int(L))
        counts = 2 ** (heights - 1)  # leaves whose common ancestor with the query is at height H
        for j, rho in enumerate(r_values):
            tree = HBLT(tree_height=int(L), rho=float(rho))
            p = np.array([cooccurrence_exact(tree, int(c), 0) for c in counts])
            mu = check_float("scale", scale, 0.0, 10.0, low_open=True) * p
            v = association_dynamics(mu, times)
            cooc[i, j, :L] = p
            association[i, j, :L] = (v / mu).T
            assoc_time[i, j, :L] = [association_time(m, fraction) for m in mu]
            entropy[i, j] = row_entropy(attention_from_association(np.repeat(mu, counts),
                                                                         np.repeat(v, counts, axis=1)))
    return {"tree_heights": L_values, "rhos": r_values, "times": times, "cooccurrence": cooc, "approx": approx,
            "association": association, "assoc_time": assoc_time, "entropy": entropy,
            "scale": np.asarray(scale), "fraction": np.asarray(fraction)}


def plot_hierarchy_grid(data: FigureData) -> Figure:
    """Left: exact co-occurrence against ``H/L`` with the paper's ``1 - H/L``, for ``rho`` closest to
    ``1 - 1/L``; right: how much later the farthest token is associated than the nearest (ratio of times)."""
    tree_heights, rhos = data["tree_heights"], data["rhos"]
    fig = Figure(figsize=(8.8, 3.6), layout="constrained")
    ax_p, ax_t = fig.subplots(1, 2)
    colours = colormaps["viridis"](np.linspace(0, 0.9, tree_heights.size))
    for i, L in enumerate(tree_heights):
        j = int(np.argmin(np.abs(rhos - (1 - 1 / L))))
        heights = np.arange(1, L + 1)
        ax_p.plot(heights / L, data["cooccurrence"][i, j, :L], "o-", ms=3, color=colours[i],
                  label=f"L = {L}, \u03c1 = {rhos[j]:g}")
    ax_p.plot([0, 1], [1, 0], "k--", lw=1, label="1 - H/L (paper)")
    ax_p.set_xlabel("H / L")
    ax_p.set_ylabel("P[l | m]")
    ax_p.legend(fontsize=9, ncol=2)
    last = np.array([[data["assoc_time"][i, j, L - 1] for j in range(rhos.size)]
                     for i, L in enumerate(tree_heights)])
    heatmap(fig, ax_t, (last / data["assoc_time"][:, :, 0]).T, [f"{L}" for L in tree_heights],
             [f"{r:g}" for r in rhos], "time ratio, farthest / nearest", cmap="viridis", vmin=1.0)
    ax_t.set_xlabel("tree height L")
    ax_t.set_ylabel("polarity \u03c1")
    ax_t.set_title(f"time to {float(data['fraction']):.0%} of the target", fontsize=10)
    return fig
