"""Figures of the "Real text" page: attention entropy while a Transformer trains on WikiText-2 (paper Figs. 6, 8).

Both figures are drawn from the authors' published sweep results (see :mod:`joma_lib.lm.authors`), which are
licensed **CC BY-NC 4.0** by the paper's authors (Tian, Wang, Zhang, Chen, Du). The committed reference data of
``fig6`` and ``fig8`` are seed-averaged curves derived from those results: they carry the same licence and
attribution (the ``source`` array of each data set states it) and may only be reused non-commercially.

The drawing code is shared with our own re-run: any :class:`~joma_lib.lm.authors.SweepRuns` goes through
:func:`entropy_panels` (one panel per ``(nlayers, lr)`` cell, averaged over seeds) and :func:`plot_entropy_panels`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure

from joma_lib.figures.registry import FigureData, FigureSpec, Tolerance
from joma_lib.lm.authors import ATTRIBUTION, EntropySummary, SweepRuns, official_runs, seed_average, summarize_entropy
from joma_lib.validation import check_choice, check_float, check_int

FIG6_DEPTHS = (1, 2, 5, 10)
FIG8_LRS = (1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2)
TITLE_STYLES = ("layers", "lr")
LEGEND_MAX_LAYERS = 4  # up to this depth a legend names the layers; deeper models get a colour bar


def panel_summary(data: FigureData, p: int) -> EntropySummary:
    """Start, minimum, end and bounce of each layer's entropy in panel ``p`` of :func:`entropy_panels` data."""
    p = check_int("p", p, 0, int(data["nlayers"].size) - 1)
    depth = int(data["nlayers"][p])
    return summarize_entropy(data["minibatch"][p], data["attn_entropy"][p, :, :depth])


def entropy_panels(runs: SweepRuns, cells: Sequence[tuple[int, float]], source: str = "") -> FigureData:
    """Seed averages of the ``(nlayers, lr)`` cells, stacked panel by panel: the data of Figs. 6 and 8.

    Arrays (``P`` panels, ``C`` checkpoints, ``Lmax`` = deepest model):
    ``nlayers`` / ``lr`` / ``n_seeds`` ``[P]``; ``minibatch`` ``[P, C]``; ``val_loss`` ``[P, C]`` (seed mean);
    ``min_val_loss`` ``[P]`` (minimum over checkpoints of the seed mean: the panel title);
    ``attn_entropy`` ``[P, C, Lmax]`` (seed mean, NaN beyond a panel's depth); ``source`` (a string).
    All cells must share the checkpoint steps.
    """
    if len(cells) == 0:
        raise ValueError("cells must name at least one (nlayers, lr) pair")
    averages = [seed_average(runs, n, lr) for n, lr in cells]
    steps = averages[0].minibatch
    if any(a.minibatch.shape != steps.shape or np.any(a.minibatch != steps) for a in averages):
        raise ValueError("all cells must share the same checkpoint steps to be drawn side by side")
    lmax = max(a.nlayers for a in averages)
    entropy = np.full((len(averages), steps.size, lmax), np.nan)
    for p, avg in enumerate(averages):
        entropy[p, :, :avg.nlayers] = avg.attn_entropy
    return {
        "nlayers": np.array([a.nlayers for a in averages], dtype=np.int64),
        "lr": np.array([a.lr for a in averages]),
        "n_seeds": np.array([a.seeds.size for a in averages], dtype=np.int64),
        "minibatch": np.stack([a.minibatch for a in averages]),
        "val_loss": np.stack([a.val_loss for a in averages]),
        "min_val_loss": np.array([a.min_val_loss for a in averages]),
        "attn_entropy": entropy,
        "source": np.asarray(source),
    }


def panel_title(data: FigureData, p: int, style: str) -> str:
    """Title of panel ``p`` as in the paper: ``Layers: N, val_loss: X.XXX`` or ``lr: X, val: Y.YY``."""
    check_choice("style", style, TITLE_STYLES)
    if style == "layers":
        return f"Layers: {int(data['nlayers'][p])}, val_loss: {data['min_val_loss'][p]:.3f}"
    mantissa, exponent = f"{data['lr'][p]:e}".split("e")
    return f"lr: {float(mantissa):g}e{int(exponent)}, val: {data['min_val_loss'][p]:.2f}"


def layer_colours(depth: int) -> list[tuple[float, float, float, float]]:
    """Colour of each layer of a ``depth``-layer model: ``rainbow(layer / depth)`` as in the paper."""
    return [colormaps["rainbow"](layer / depth) for layer in range(depth)]


def plot_entropy_panels(data: FigureData, style: str = "layers", ylim: tuple[float, float] | None = None,
                        panel_width: float = 3.6) -> Figure:
    """One panel per cell, one curve per layer coloured ``rainbow(layer / nlayers)``, x in thousands of steps.

    Shallow models get a legend, deeper ones a colour bar per depth; the panel with the lowest validation loss
    has a bold title. ``style`` picks the title (:func:`panel_title`); ``ylim`` fixes the y range (the paper's
    Fig. 6 uses (1, 2.7), Fig. 8 (0, 2.7)); ``panel_width`` is in inches.
    """
    panel_width = check_float("panel_width", panel_width, 0.5, 10.0)
    n_panels = int(data["nlayers"].size)
    fig = Figure(figsize=(panel_width * n_panels + 0.8, 3.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, n_panels, sharey=True, squeeze=False)[0])
    best = int(np.argmin(data["min_val_loss"]))
    for p, ax in enumerate(axes):
        depth = int(data["nlayers"][p])
        steps_k = data["minibatch"][p] / 1000.0
        for layer, colour in enumerate(layer_colours(depth)):
            ax.plot(steps_k, data["attn_entropy"][p, :, layer], color=colour, label=f"layer{layer}")
        ax.set_title(panel_title(data, p, style), fontsize=10, fontweight="bold" if p == best else "normal")
        ax.set_xlabel("Minibatch (k)")
        if depth <= LEGEND_MAX_LAYERS:
            ax.legend(fontsize=8, loc="lower right")
        if ylim is not None:
            ax.set_ylim(*ylim)
    axes[0].set_ylabel("Attention entropy (nats)")
    for depth in sorted({int(n) for n in data["nlayers"]} - set(range(LEGEND_MAX_LAYERS + 1))):
        group = [ax for ax, n in zip(axes, data["nlayers"]) if int(n) == depth]
        mappable = ScalarMappable(BoundaryNorm(np.arange(depth + 1) - 0.5, depth), ListedColormap(layer_colours(depth)))
        bar = fig.colorbar(mappable, ax=group, ticks=range(depth), pad=0.01)
        bar.set_label("layer")
    if str(data["source"]):
        fig.text(0.0, -0.02, f"Data: {data['source']}", fontsize=7, color="0.35", ha="left", va="top")
    return fig


def make_fig6(directory: str | None = None, depths: tuple[int, ...] = FIG6_DEPTHS, lr: float = 1e-4) -> FigureData:
    """Fig. 6 (WikiText-2 row): entropy per layer vs minibatch for each depth at one lr, seed-averaged.

    ``directory`` holds the authors' ``.pt`` files (default: searched for, downloaded when online).
    """
    depths = tuple(check_int("depths[i]", n, 1) for n in depths)
    lr = check_float("lr", lr, 0.0, low_open=True)
    return entropy_panels(official_runs(directory), [(n, lr) for n in depths], source=ATTRIBUTION)


def make_fig8(directory: str | None = None, nlayers: int = 5, lrs: tuple[float, ...] = FIG8_LRS) -> FigureData:
    """Fig. 8: entropy per layer vs minibatch of the ``nlayers``-layer model for each lr, seed-averaged."""
    nlayers = check_int("nlayers", nlayers, 1)
    lrs = tuple(check_float("lrs[i]", lr, 0.0, low_open=True) for lr in lrs)
    return entropy_panels(official_runs(directory), [(nlayers, lr) for lr in lrs], source=ATTRIBUTION)


def plot_fig6(data: FigureData) -> Figure:
    """Fig. 6 layout: titles ``Layers: N, val_loss: X``, y range (1, 2.7)."""
    return plot_entropy_panels(data, style="layers", ylim=(1.0, 2.7))


def plot_fig8(data: FigureData) -> Figure:
    """Fig. 8 layout: titles ``lr: X, val: Y``, y range (0, 2.7)."""
    return plot_entropy_panels(data, style="lr", ylim=(0.0, 2.7), panel_width=2.4)


# Pure arithmetic (means over seeds) on the published float32 numbers: anything beyond float64 rounding means the
# data or the aggregation changed.
EXACT = Tolerance(rtol=1e-10, atol=1e-12)

FIGURES = [
    FigureSpec(
        fig_id="fig6",
        title="Attention entropy while training on WikiText-2, 1/2/5/10 layers (authors' runs, CC BY-NC 4.0)",
        paper_ref="Fig. 6 (top row)",
        chapter="book/wikitext.md",
        make=make_fig6,
        plot=plot_fig6,
        params={"depths": FIG6_DEPTHS, "lr": 1e-4},
        default_tol=EXACT,
    ),
    FigureSpec(
        fig_id="fig8",
        title="Attention entropy of a 5-layer model on WikiText-2 for 7 learning rates (authors' runs, CC BY-NC 4.0)",
        paper_ref="Fig. 8",
        chapter="book/wikitext.md",
        make=make_fig8,
        plot=plot_fig8,
        params={"nlayers": 5, "lrs": FIG8_LRS},
        default_tol=EXACT,
    ),
]
