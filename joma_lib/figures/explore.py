"""Figure of the "Explore without a kernel" page: the precomputed grid behind the plotly explorer."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from joma_lib.explorable import FIG4_SPREAD, MODES, explorer_grid
from joma_lib.figures.registry import FigureData, FigureSpec, Tolerance


def plot_grid(data: FigureData) -> Figure:
    """Summary of the grid: how deep the nonlinear entropy dips and how far it comes back, and curves at T = 3.

    Left: ``ln d - min_t H`` (sparsification) and middle: ``H(end) - min_t H`` (bounce back), both for
    the nonlinear update over (spread of mu, T). Right: entropy curves at the temperature closest to 3,
    solid nonlinear, dashed linear, one colour per spread.
    """
    spreads, temps, steps = data["spreads"], data["temperatures"], data["steps"]
    nonlinear = data["entropy"][MODES.index("nonlinear")].astype(np.float64)
    d = data["mu"].shape[1]
    dip = np.log(d) - nonlinear.min(axis=-1)
    bounce = nonlinear[..., -1] - nonlinear.min(axis=-1)
    fig = Figure(figsize=(12, 3.6), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, values, title in [(axes[0], dip, "nonlinear: dip  ln d - min H"),
                              (axes[1], bounce, "nonlinear: bounce  H(end) - min H")]:
        im = ax.imshow(values.T, origin="lower", aspect="auto", cmap="magma", vmin=0,
                       extent=(-0.5, spreads.size - 0.5, -0.5, temps.size - 0.5))
        ax.set_xticks(range(spreads.size), [f"{s:g}" for s in spreads])
        ax.set_yticks(range(temps.size), [f"{t:g}" for t in temps])
        ax.set_xlabel(r"spread of $\mu$ (max - min)")
        ax.set_ylabel("temperature $T$")
        ax.set_title(title, fontsize=10)
        ax.grid(False)
        fig.colorbar(im, ax=ax, shrink=0.85, label="nats")
    ax = axes[2]
    k = int(np.argmin(np.abs(temps - 3.0)))
    colors = [f"C{i}" for i in range(spreads.size)]
    for i, s in enumerate(spreads):
        ax.plot(steps, nonlinear[i, k], color=colors[i], lw=2 if s == FIG4_SPREAD else 1, label=f"{s:g}")
        ax.plot(steps, data["entropy"][MODES.index("linear"), i, k], color=colors[i], ls="--", lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("attention entropy")
    ax.set_title(f"T = {temps[k]:g}: nonlinear (solid), linear (dashed)", fontsize=10)
    ax.legend(title=r"spread of $\mu$", fontsize=7, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


FIGURES = [
    FigureSpec(
        fig_id="c-explorer-grid",
        title="Grid of the kernel-free explorer: linear vs nonlinear dynamics over spread of mu and temperature",
        paper_ref="companion (Fig. 4 and Theorems 2, 4)",
        chapter="book/explore.md",
        make=explorer_grid,
        plot=plot_grid,
        # float64 numpy simulation stored in float32: allow a few float32 ulps plus platform exp differences.
        tolerances={"v": Tolerance(rtol=1e-5, atol=1e-6), "entropy": Tolerance(rtol=1e-5, atol=1e-6)},
        default_tol=Tolerance(rtol=1e-9, atol=1e-12),
    ),
]
