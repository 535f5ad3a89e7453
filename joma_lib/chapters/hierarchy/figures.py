"""Figures of the "Many layers" page: Theorem 5, Fig. 5, and the grid of the page's explorer (:mod:`.grid`)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from joma_lib.chapters.hierarchy.grid import make_hierarchy_grid, plot_hierarchy_grid
from joma_lib.softmax_dynamics import row_entropy
from joma_lib.kit.registry import Claim, FigureData, FigureSpec, Tolerance
from joma_lib.latent_tree import (
    HBLT,
    approximation_error_bound,
    association_dynamics,
    association_targets,
    association_time,
    attention_from_association,
    cla_height_matrix,
    cooccurrence_approx,
    cooccurrence_exact,
    cooccurrence_matrix,
    cooccurrence_monte_carlo,
    sample_hblt,
)
from joma_lib.validation import check_float, check_int


# --- Fig. 5 --------------------------------------------------------------------------------------


def make_fig5(depth: int = 4, branching: int = 2, scale: float = 4.0, query: int = 0, fraction: float = 0.9,
              t_max: float = 2.0, n_times: int = 201) -> FigureData:
    """Data of Fig. 5: the tree, its co-occurrence, and the association dynamics it drives.

    The tree is an HBLT with ``rho = 1 - 1/depth`` and a binary root. For every query ``m`` the
    targets ``mu_l = scale * P[l | m]`` drive ``dv/dt = (mu - v) o exp(v^2/2)``; the attention is
    ``b_l ∝ P[l | m] exp(v_l^2/2)``. ``assoc_time[H-1]`` is the time at which ``v_l`` reaches
    ``fraction * mu_l`` for a token whose CLA with the query is at height ``H`` (by quadrature).
    """
    depth = check_int("depth", depth, 2, 8)
    tree = HBLT(depth=depth, branching=branching, rho=1 - 1 / depth)
    query = tree.leaf_index("query", query)
    t_max = check_float("t_max", t_max, 0.0, 1e3, low_open=True)
    n_times = check_int("n_times", n_times, 10, 10_000)
    H = cla_height_matrix(tree)
    P = cooccurrence_matrix(tree)
    times = np.linspace(0.0, t_max, n_times)
    attention = np.empty((tree.n_leaves, times.size, tree.n_leaves))
    for m in range(tree.n_leaves):
        mu_m = association_targets(tree, m, scale)
        v_m = association_dynamics(mu_m, times)
        attention[m] = attention_from_association(mu_m, v_m)
        if m == query:
            mu, v = mu_m, v_m
    entropy = np.asarray(row_entropy(attention[query]))
    sparse = int(np.argmin(entropy))
    per_token = np.stack([attention[query][:, H[query] == h].mean(axis=1) for h in range(1, depth + 1)], axis=1)
    first = [int(np.flatnonzero(H[query] == h)[0]) for h in range(1, depth + 1)]
    return {
        "cla_height": H,
        "cooccurrence": P,
        "times": times,
        "mu": mu,
        "v": v,
        "attention_per_token_by_height": per_token,
        "entropy": entropy,
        "t_sparse": np.asarray(times[sparse]),
        "attention_sparse": attention[:, sparse],
        "attention_final": attention[:, -1],
        "assoc_time": np.array([association_time(mu[l], fraction) for l in first]),
        "fraction": np.asarray(fraction),
        "query": np.asarray(query),
        "branching": np.asarray(tree.branching),
    }


def _draw_tree(ax, depth: int, branching: int, heights: np.ndarray, query: int, cmap) -> None:
    """The complete tree, leaves coloured by the height of their common ancestor with the query."""
    n_leaves = branching**depth
    x = np.arange(n_leaves, dtype=float)
    for h in range(1, depth + 1):
        parents = x.reshape(-1, branching).mean(axis=1)
        for j, px in enumerate(parents):
            for cx in x[j * branching:(j + 1) * branching]:
                ax.plot([px, cx], [h, h - 1], color="0.6", lw=0.8, zorder=1)
        ax.scatter(parents, np.full(parents.size, h), s=60 if h < depth else 160,
                   color="0.85" if h < depth else "0.55", edgecolor="k", zorder=2)
        x = parents
    ax.text(x[0], depth + 0.35, r"$y_0$ (label)", ha="center", fontsize=9)
    leaf_x = np.arange(n_leaves)
    colors = [cmap((h - 1) / max(depth - 1, 1)) if h > 0 else "k" for h in heights]
    ax.scatter(leaf_x, np.zeros(n_leaves), s=90, c=colors, edgecolor="k", zorder=3)
    ax.annotate("query $m$", (query, 0), (query, -0.9), ha="center", fontsize=9,
                arrowprops={"arrowstyle": "->", "lw": 0.8})
    ax.set_ylim(-1.2, depth + 0.7)
    ax.set_yticks(range(depth + 1))
    ax.set_ylabel("height")
    ax.set_xticks([])
    ax.grid(False)
    ax.set_title("(a) latent tree; leaf colour: height $H$ of the common ancestor with $m$", fontsize=10)


def plot_fig5(data: FigureData) -> Figure:
    """(a) tree; (b) co-occurrence and the entropy of the query's attention; (c) association dynamics and the
    attention per height; attention at the sparsest time and at the end. Two panels per row, each heat map
    with its colour bar below it (titles and colour bars never share a column)."""
    import matplotlib as mpl
    from matplotlib.lines import Line2D

    H, times, v, mu = data["cla_height"], data["times"], data["v"], data["mu"]
    query, branching = int(data["query"]), int(data["branching"])
    depth = int(H.max())
    cmap = mpl.colormaps["viridis"]
    colours = [cmap(k / max(depth - 1, 1)) for k in range(depth)]
    fig = Figure(figsize=(8.8, 12.0), layout="constrained")
    grid = fig.add_gridspec(4, 2, height_ratios=(1.0, 1.15, 1.0, 1.15))
    ax = fig.add_subplot(grid[0, :])
    _draw_tree(ax, depth, branching, H[query], query, cmap)
    ax.legend([Line2D([], [], marker="o", ls="", color=c, markeredgecolor="k") for c in colours],
              [f"H = {h}" for h in range(1, depth + 1)], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9)
    for cell, key, title in [(grid[1, 0], "cooccurrence", r"(b) co-occurrence $P[l\mid m]$"),
                             (grid[3, 0], "attention_sparse",
                              f"attention at t = {float(data['t_sparse']):.2f} (sparsest)"),
                             (grid[3, 1], "attention_final", f"attention at t = {times[-1]:g} (end)")]:
        ax = fig.add_subplot(cell)
        im = ax.imshow(data[key], cmap="magma", vmin=0)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("token $l$")
        ax.set_ylabel("query $m$")
        ax.set_xticks(range(0, H.shape[0], 4))
        ax.set_yticks(range(0, H.shape[0], 4))
        ax.grid(False)
        fig.colorbar(im, ax=ax, location="bottom", shrink=0.7, pad=0.02, aspect=30)
    ax = fig.add_subplot(grid[1, 1])
    ax.plot(times, data["entropy"], "k-")
    ax.axvline(float(data["t_sparse"]), color="0.5", ls=":", lw=0.8)
    ax.set_xlabel("time $t$")
    ax.set_ylabel("entropy (nats)")
    ax.set_title("entropy of the query's attention", fontsize=10)
    ax = fig.add_subplot(grid[2, 0])
    for h in range(1, depth + 1):
        l = int(np.flatnonzero(H[query] == h)[0])
        ax.plot(times, v[:, l] / mu[l], color=colours[h - 1],
                label=f"H = {h}: {float(data['fraction']):.0%} at t = {data['assoc_time'][h - 1]:.2f}")
        ax.axvline(data["assoc_time"][h - 1], color=colours[h - 1], ls=":", lw=0.8)
    ax.set_xlabel("time $t$")
    ax.set_ylabel(r"$v_l(t) / \mu_l$")
    ax.set_title("(c) association of the query", fontsize=10)
    ax.legend(fontsize=9, loc="lower right")  # the curves have reached 1 where the legend sits
    ax = fig.add_subplot(grid[2, 1])
    for h in range(1, depth + 1):
        ax.plot(times, data["attention_per_token_by_height"][:, h - 1], color=colours[h - 1], label=f"H = {h}")
    ax.set_xlabel("time $t$")
    ax.set_ylabel("attention per token at height $H$")
    ax.set_title("attention: sparse, then dense", fontsize=10)
    ax.axvline(float(data["t_sparse"]), color="0.5", ls=":", lw=0.8)
    ax.legend(fontsize=9, loc="center right")
    return fig


# --- Theorem 5 companion figure -------------------------------------------------------------------


def make_cooccurrence(depths: tuple[int, ...] = (4, 6, 8, 10), branching: int = 2, n_samples: int = 20_000,
                      seed: int = 0) -> FigureData:
    """``P[l | m]`` against the CLA height ``H`` for trees of several heights ``L`` (``rho = 1 - 1/L``).

    Rows are the depths, columns ``H = 1..max(depths)`` (NaN past ``L``): exact (message
    passing), Monte Carlo with its standard error (``n_samples`` sequences, pair ``m = 0``,
    ``l = B^(H-1)``), the paper's ``1 - H/L`` and the bound of its error.
    """
    depths = tuple(check_int("depth", L, 2, 10) for L in depths)
    if not depths:
        raise ValueError("depths must name at least one tree height")
    n_samples = check_int("n_samples", n_samples, 100, 10**6)
    width = max(depths)
    exact, mc, stderr, approx, bound = (np.full((len(depths), width), np.nan) for _ in range(5))
    for i, L in enumerate(depths):
        tree = HBLT(depth=L, branching=branching, rho=1 - 1 / L)
        leaves = sample_hblt(tree, n_samples, seed=seed + i).leaves
        for H in range(1, L + 1):
            l = branching ** (H - 1)
            exact[i, H - 1] = cooccurrence_exact(tree, l, 0)
            mc[i, H - 1], stderr[i, H - 1] = cooccurrence_monte_carlo(leaves, l, 0)
        approx[i, :L] = cooccurrence_approx(np.arange(1, L + 1), L)
        bound[i, :L] = approximation_error_bound(np.arange(1, L + 1), L)
    return {"depths": np.asarray(depths), "H": np.arange(1, width + 1), "exact": exact, "monte_carlo": mc,
            "stderr": stderr, "approx": approx, "error_bound": bound}


def plot_cooccurrence(data: FigureData) -> Figure:
    """Left: P[l|m] vs H/L (exact, Monte Carlo, 1 - H/L). Right: exact - (1 - H/L) and its bound."""
    fig = Figure(figsize=(8.8, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    H = data["H"]
    for i, L in enumerate(data["depths"]):
        x = H[:L] / L
        line, = left.plot(x, data["exact"][i, :L], "-", label=f"exact, L = {L}")
        left.errorbar(x, data["monte_carlo"][i, :L], yerr=3 * data["stderr"][i, :L], fmt="o", ms=3,
                      color=line.get_color(), capsize=2)
        right.plot(x, data["exact"][i, :L] - data["approx"][i, :L], "o-", ms=3, color=line.get_color(),
                   label=f"L = {L}")
        right.plot(x, data["error_bound"][i, :L], ":", color=line.get_color())
    grid = np.linspace(0, 1, 50)
    left.plot(grid, 1 - grid, "k--", label="$1 - H/L$ (paper)")
    left.set_xlabel("$H / L$")
    left.set_ylabel(r"$P[l \mid m]$")
    left.set_title(r"co-occurrence, $\rho = 1 - 1/L$; dots: Monte Carlo $\pm 3$ s.e.", fontsize=10)
    left.legend(fontsize=9)
    right.set_yscale("log")
    right.set_xlabel("$H / L$")
    right.set_ylabel(r"$P[l \mid m] - (1 - H/L)$")
    right.set_title("error of the approximation (dotted: bound $H(2H-1)/2L^2$)", fontsize=10)
    right.legend(fontsize=9)
    return fig


# --- Table 1 -------------------------------------------------------------------------------------


def _cooccurrence_rows(data: FigureData) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """(depth L, heights H, exact, Monte Carlo z scores) per tree depth, over the heights that exist."""
    rows = []
    for i, depth in enumerate(data["depths"]):
        ok = ~np.isnan(data["exact"][i])
        z = (data["monte_carlo"][i, ok] - data["exact"][i, ok]) / data["stderr"][i, ok]
        rows.append((int(depth), data["H"][ok], data["exact"][i, ok], z))
    return rows


def _closed_form_gap(data: FigureData) -> float:
    return max(float(np.abs(exact - 0.5 * (1 + (1 - 1 / depth) ** (2 * heights))).max())
               for depth, heights, exact, _ in _cooccurrence_rows(data))


def _approx_excess(data: FigureData) -> float:
    """Largest amount by which the error of 1 - H/L exceeds its bound H(2H-1)/2L^2."""
    ok = ~np.isnan(data["exact"])
    return float(np.max((data["exact"] - data["approx"] - data["error_bound"])[ok]))


def _association_order(data: FigureData) -> float:
    """Smallest increase of the association time from one ancestor height to the next (> 0: in order)."""
    return float(np.diff(data["assoc_time"]).min())


def _fig5_bounce(data: FigureData) -> float:
    e = data["entropy"]
    return float(e[-1] - e.min()) if e.min() < e[0] - 1.0 else float("nan")


COOCCURRENCE_CLAIMS = (
    Claim("thm5-cooccurrence", "Theorem 5 (reconstruction)",
          r"Binary latent tree, flip probability $(1-\rho)/2$: $\mathbb P[l\mid m] = (1+\rho^{2H})/2$; max gap "
          "between exact and closed form",
          _closed_form_gap, "<", 1e-12,
          kind="sanity", threshold_set="before-data"),
    Claim("thm5-monte-carlo", "Theorem 5 (reconstruction)",
          "Sampled sequences agree with the exact co-occurrence: worst |z| score (3 standard errors, as on the page)",
          lambda d: max(float(np.abs(z).max()) for *_, z in _cooccurrence_rows(d)), "<=", 3.0,
          kind="companion", threshold_set="before-data"),
    Claim("thm5-decreasing-in-height", "Theorem 5",
          "Co-occurrence falls with the height H of the common ancestor: largest step-to-step change",
          lambda d: max(float(np.diff(exact).max()) for _, _, exact, _ in _cooccurrence_rows(d)), "<", 0.0,
          kind="sanity", threshold_set="before-data"),
    Claim("thm5-one-minus-h-over-l", "Theorem 5",
          r"$\mathbb P[l\mid m] \approx 1 - H/L$ for $\rho = 1 - 1/L$: error above the bound $H(2H-1)/2L^2$ "
          "(at most 0: within it)",
          _approx_excess, "<=", 1e-15,
          kind="sanity", threshold_set="before-data"),
)
FIG5_CLAIMS = (
    Claim("fig5-order", "Fig. 5, Theorem 5",
          "The query associates first with tokens whose common ancestor is lowest: smallest gap between "
          "association times of successive heights", _association_order, ">", 0.0,
          kind="sanity", threshold_set="before-data"),
    Claim("fig5-sparse-then-dense", "Fig. 5",
          "Attention of the query drops by > 1 nat (sparse), then spreads back: rise after the minimum (nats)",
          _fig5_bounce, ">", 0.5,
          kind="companion", threshold_set="after-data",
          threshold_note="the book's 0.5-nat bar and its data first appear together in d2eb6fa; the value is 1.16"),
)


FIGURES = [
    FigureSpec(
        fig_id="fig5",
        title="Latent tree, induced attention, and the order in which the query associates with tokens",
        paper_ref="Fig. 5",
        chapter="book/hierarchy.md",
        make=make_fig5,
        plot=plot_fig5,
        default_tol=Tolerance(rtol=1e-6, atol=1e-8),
        claims=FIG5_CLAIMS,
    ),
    FigureSpec(
        fig_id="c-cooccurrence",
        title="Theorem 5: co-occurrence against the height of the common ancestor",
        paper_ref="companion (Thm. 5)",
        chapter="book/hierarchy.md",
        make=make_cooccurrence,
        plot=plot_cooccurrence,
        default_tol=Tolerance(rtol=1e-9, atol=1e-12),
        claims=COOCCURRENCE_CLAIMS,
    ),
    FigureSpec(
        fig_id="c-hierarchy-grid",
        title="Grid of the Theorem 5 / Fig. 5 explorer: tree height x polarity",
        paper_ref="companion (Theorem 5, Fig. 5)",
        chapter="book/hierarchy.md",
        make=make_hierarchy_grid,
        plot=plot_hierarchy_grid,
        default_tol=Tolerance(rtol=1e-6, atol=1e-8),
    ),
]
