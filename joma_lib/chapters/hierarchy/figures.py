"""Figures of the Theorem 5 page: the co-occurrence of two tokens against the height of their common ancestor."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from joma_lib.kit.registry import Claim, FigureData, FigureSpec, Tolerance
from joma_lib.theory.latent_tree import (
    HBLT,
    approximation_error_bound,
    cooccurrence_approx,
    cooccurrence_exact,
    cooccurrence_monte_carlo,
    sample_hblt,
)
from joma_lib.base.validation import check_int

COOCCURRENCE_SAMPLES = 20_000
"""Sequences sampled per tree for the Monte Carlo column of ``c-cooccurrence`` (its caption says how many)."""


def make_cooccurrence(tree_heights: tuple[int, ...] = (4, 6, 8, 10), branching: int = 2,
                      n_samples: int = COOCCURRENCE_SAMPLES, seed: int = 0) -> FigureData:
    """``P[l | m]`` against the CLA height ``H`` for trees of several heights ``L`` (``rho = 1 - 1/L``).

    Rows are the tree heights, columns ``H = 1..max(tree_heights)`` (NaN past ``L``): exact (message
    passing), Monte Carlo with its standard error (``n_samples`` sequences, pair ``m = 0``,
    ``l = B^(H-1)``), the paper's ``1 - H/L`` and the bound of its error.
    """
    tree_heights = tuple(check_int("tree_height", L, 2, 10) for L in tree_heights)
    if not tree_heights:
        raise ValueError("tree_heights must name at least one tree height")
    n_samples = check_int("n_samples", n_samples, 100, 10**6)
    width = max(tree_heights)
    exact, mc, stderr, approx, bound = (np.full((len(tree_heights), width), np.nan) for _ in range(5))
    for i, L in enumerate(tree_heights):
        tree = HBLT(tree_height=L, branching=branching, rho=1 - 1 / L)
        leaves = sample_hblt(tree, n_samples, seed=seed + i).leaves
        for H in range(1, L + 1):
            l = branching ** (H - 1)
            exact[i, H - 1] = cooccurrence_exact(tree, l, 0)
            mc[i, H - 1], stderr[i, H - 1] = cooccurrence_monte_carlo(leaves, l, 0)
        approx[i, :L] = cooccurrence_approx(np.arange(1, L + 1), L)
        bound[i, :L] = approximation_error_bound(np.arange(1, L + 1), L)
    return {"tree_heights": np.asarray(tree_heights), "H": np.arange(1, width + 1), "exact": exact, "monte_carlo": mc,
            "stderr": stderr, "approx": approx, "error_bound": bound}


def plot_cooccurrence(data: FigureData) -> Figure:
    """Left: P[l|m] vs H/L (exact, Monte Carlo, 1 - H/L). Right: exact - (1 - H/L) and its bound."""
    fig = Figure(figsize=(8.8, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    H = data["H"]
    for i, L in enumerate(data["tree_heights"]):
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


def _cooccurrence_rows(data: FigureData) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """(tree height L, heights H, exact, Monte Carlo z scores) per tree, over the heights that exist (``H <= L``: read
    from the heights, not from the data under test, so that a NaN where a value should be is not skipped)."""
    rows = []
    for i, L in enumerate(data["tree_heights"]):
        ok = data["H"] <= L
        z = (data["monte_carlo"][i, ok] - data["exact"][i, ok]) / data["stderr"][i, ok]
        rows.append((int(L), data["H"][ok], data["exact"][i, ok], z))
    return rows


def _worst(values: list[float]) -> float:
    """The largest of per-tree values; NaN if any is NaN (Python's ``max`` skips a NaN that does not come first)."""
    return float(np.max(values))


def _closed_form_gap(data: FigureData) -> float:
    return _worst([float(np.abs(exact - 0.5 * (1 + (1 - 1 / L) ** (2 * heights))).max())
                   for L, heights, exact, _ in _cooccurrence_rows(data)])


def _approx_excess(data: FigureData) -> float:
    """Largest amount by which the size of the error of 1 - H/L exceeds its bound H(2H-1)/2L^2, over the heights that
    exist (``H <= L``)."""
    ok = data["H"][None, :] <= data["tree_heights"][:, None]
    return float(np.max((np.abs(data["exact"] - data["approx"]) - data["error_bound"])[ok]))


COOCCURRENCE_CLAIMS = (
    Claim("thm5-cooccurrence", "Theorem 5 (reconstruction)",
          r"Binary latent tree, flip probability $(1-\rho)/2$: $\mathbb P[l\mid m] = (1+\rho^{2H})/2$; max gap "
          "between exact and closed form",
          _closed_form_gap, "<", 1e-12,
          kind="sanity", threshold_set="before-data"),
    Claim("thm5-monte-carlo", "Theorem 5 (reconstruction)",
          "Sampled sequences agree with the exact co-occurrence: worst |z| score (3 standard errors, as on the page)",
          lambda d: _worst([float(np.abs(z).max()) for *_, z in _cooccurrence_rows(d)]), "<=", 3.0,
          kind="companion", threshold_set="before-data"),
    Claim("thm5-decreasing-in-height", "Theorem 5",
          "Co-occurrence falls with the height H of the common ancestor: largest step-to-step change",
          lambda d: _worst([float(np.diff(exact).max()) for _, _, exact, _ in _cooccurrence_rows(d)]), "<", 0.0,
          kind="sanity", threshold_set="before-data"),
    Claim("thm5-one-minus-h-over-l", "Theorem 5",
          r"$\mathbb P[l\mid m] \approx 1 - H/L$ for $\rho = 1 - 1/L$: size of the error above the bound "
          r"$H(2H-1)/2L^2$ (at most 0: within it)",
          _approx_excess, "<=", 1e-15,
          kind="sanity", threshold_set="before-data"),
)


FIGURES = [
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
]
