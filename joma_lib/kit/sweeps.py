"""Drawing of language-model sweeps: attention entropy per layer while a Transformer trains (paper Figs. 6, 8).

Shared by the paper's figures drawn from the authors' runs (:mod:`joma_lib.chapters.wikitext.figures`) and by our own
re-run (:mod:`joma_lib.chapters.rerun.figures`): any :class:`~joma_lib.lm.authors.SweepRuns` goes through
:func:`entropy_panels` (one panel per ``(nlayers, lr)`` cell, averaged over seeds) and
:func:`plot_entropy_panels`; :func:`plot_sweep` draws Fig. 6 or 8 from any runs of ours (``python -m joma_lib.figures
sweep``). This module declares no figure of its own.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure

from joma_lib.kit.registry import FigureData
from joma_lib.lm.authors import EntropySummary, SweepRuns, seed_average, summarize_entropy
from joma_lib.lm.presets import paper_sweep_configs
from joma_lib.lm.runs import load_sweep
from joma_lib.base.validation import check_choice, check_float, check_int

TITLE_STYLES = ("layers", "lr")
#: the stored results of our longer runs (npz + json), read back by the figures
RESULTS_DIR = Path(__file__).resolve().parents[1] / "lm" / "results"
#: the CPU re-run (preset ``rerun-full``), shown on the re-run page and hashed on the audit page
FULL_RESULTS = RESULTS_DIR / "rerun-full.npz"
#: the paper-scale runs of Figs. 6 and 8 finished so far on lent GPUs, collected (benchmarks/gpu_loans/README.md)
PAPER_SO_FAR = RESULTS_DIR / "rerun-paper-so-far.npz"
LEGEND_MAX_LAYERS = 4  # up to this depth a legend names the layers; deeper models get a colour bar


#: how far a curve must fall below its start, as a fraction of the start, before a climb after its minimum counts
#: as a bounce (:func:`bounce_fraction`): a flat curve with jitter, or one that only rises after a negligible dip,
#: has no drop to bounce back from
BOUNCE_MIN_DROP = 0.2


def bounce_fraction(curve: np.ndarray) -> float:
    """``(c_end - c_min) / (c_0 - c_min)``, the share of its drop that a positive curve (a stable rank) climbs back,
    if its minimum lies strictly inside it and at least :data:`BOUNCE_MIN_DROP` of ``c_0`` below ``c_0``; else 0
    (no drop, or no climb after it). NaN if a value is missing."""
    curve = np.asarray(curve, dtype=np.float64)
    if not np.isfinite(curve).all():
        return float("nan")
    k = int(np.argmin(curve))
    if k == 0 or k == curve.size - 1 or curve[k] > (1.0 - BOUNCE_MIN_DROP) * curve[0]:
        return 0.0
    return float((curve[-1] - curve[k]) / (curve[0] - curve[k]))


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


MAX_COLUMNS = 3  # panels per row: 3 x 2.6 in keeps 9-pt text >= 9 px at the book's 672-px width
SOURCE_WRAP = 120  # characters per line of the data credit under the panels

def layer_colours(depth: int) -> list[tuple[float, float, float, float]]:
    """Colour of each layer of a ``depth``-layer model: ``rainbow(layer / depth)`` as in the paper."""
    return [colormaps["rainbow"](layer / depth) for layer in range(depth)]


def plot_entropy_panels(data: FigureData, style: str = "layers", ylim: tuple[float, float] | None = None,
                        panel_width: float = 2.6) -> Figure:
    """One panel per cell, one curve per layer coloured ``rainbow(layer / nlayers)``, x in thousands of steps.

    Shallow models get a legend, deeper ones a colour bar per depth; the panel with the lowest validation loss
    has a bold title. ``style`` picks the title (:func:`panel_title`); ``ylim`` fixes the y range (the paper's
    Fig. 6 uses (1, 2.7), Fig. 8 (0, 2.7)); ``panel_width`` is in inches. Panels wrap into rows of at most
    :data:`MAX_COLUMNS`, so that the figure stays narrow enough to read at the book's width.
    """
    panel_width = check_float("panel_width", panel_width, 0.5, 10.0)
    n_panels = int(data["nlayers"].size)
    n_rows = -(-n_panels // MAX_COLUMNS)
    n_cols = -(-n_panels // n_rows)  # balanced rows: 4 panels as 2 x 2, 5 as 3 + 2
    fig = Figure(figsize=(panel_width * n_cols + 0.8, 2.9 * n_rows + 0.5), layout="constrained")
    grid = fig.subplots(n_rows, n_cols, sharey=True, squeeze=False)
    for ax in grid.ravel()[n_panels:]:
        ax.remove()
    axes = grid.ravel()[:n_panels]
    best = int(np.argmin(data["min_val_loss"]))
    for p, ax in enumerate(axes):
        depth = int(data["nlayers"][p])
        steps_k = data["minibatch"][p] / 1000.0
        for layer, colour in enumerate(layer_colours(depth)):
            ax.plot(steps_k, data["attn_entropy"][p, :, layer], color=colour, label=f"layer{layer}")
        ax.set_title(panel_title(data, p, style), fontsize=10, fontweight="bold" if p == best else "normal")
        ax.set_xlabel("Minibatch (k)")
        if depth <= LEGEND_MAX_LAYERS:
            ax.legend(fontsize=9, loc="lower right")
        if ylim is not None:
            ax.set_ylim(*ylim)
    for row in grid:
        row[0].set_ylabel("Attention entropy (nats)")
    for depth in sorted({int(n) for n in data["nlayers"]} - set(range(LEGEND_MAX_LAYERS + 1))):
        group = [ax for ax, n in zip(axes, data["nlayers"]) if int(n) == depth]
        mappable = ScalarMappable(BoundaryNorm(np.arange(depth + 1) - 0.5, depth), ListedColormap(layer_colours(depth)))
        bar = fig.colorbar(mappable, ax=group, ticks=range(depth), pad=0.01)
        bar.set_label("layer")
    if str(data["source"]):
        fig.text(0.0, -0.02, textwrap.fill(f"Data: {data['source']}", SOURCE_WRAP), fontsize=9, color="0.35",
                 ha="left", va="top")
    return fig


def plot_fig6(data: FigureData) -> Figure:
    """Fig. 6 layout: titles ``Layers: N, val_loss: X``, y range (1, 2.7)."""
    return plot_entropy_panels(data, style="layers", ylim=(1.0, 2.7))


def plot_fig8(data: FigureData) -> Figure:
    """Fig. 8 layout: titles ``lr: X, val: Y``, y range (0, 2.7)."""
    return plot_entropy_panels(data, style="lr", ylim=(0.0, 2.7), panel_width=2.6)


def load_runs(path: str | Path) -> dict[str, np.ndarray]:
    """Our sweep arrays from a run directory (finished runs) or a collected ``.npz``."""
    path = Path(path)
    if path.is_dir():
        return load_sweep(path)[0]
    if not path.is_file():
        raise ValueError(f"{path} is neither a run directory nor a results .npz")
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def paper_runs_waiting(finished: str | Path = PAPER_SO_FAR) -> dict[int, int]:
    """Per depth, how many of the paper sweep's distinct runs (:func:`~joma_lib.lm.presets.paper_sweep_configs`,
    told apart by depth, learning rate and seed) are not among the ``finished`` ones (collected runs; none finished
    when the file is missing); depths with none waiting are left out."""
    sweep = {(c.n_layers, f"{c.lr:g}", c.seed) for c in paper_sweep_configs()}
    finished = Path(finished)
    done: set[tuple[int, str, int]] = set()
    if finished.exists():
        runs = load_runs(finished)
        done = {(int(n), f"{lr:g}", int(s)) for n, lr, s in zip(runs["nlayers"], runs["lr"], runs["seed"], strict=True)}
    waiting = Counter(layers for layers, _, _ in sweep - done)
    return dict(sorted(waiting.items()))


def plot_sweep(path: str | Path, figure: str = "fig6", lr: float | None = None) -> Figure:
    """Fig. 6 (all depths at one lr) or Fig. 8 (all lrs of one depth) from our runs (a run directory or a collected
    ``.npz``), drawn as from the authors' (``python -m joma_lib.figures sweep``).

    Fig. 8 takes the depth trained at the most distinct learning rates (the learning-rate sweep; on a tie, the
    deepest), so one folder holding both presets ``paper`` and ``paper-lr`` draws the 5-layer sweep, not the
    10-layer model trained at one rate."""
    sweep = SweepRuns.from_arrays(load_runs(path))
    if figure == "fig6":
        lrs = sorted(set(sweep.lr.tolist()))
        if lr is None and len(lrs) > 1:
            raise ValueError(f"the runs have several learning rates {lrs}; choose one with --lr")
        chosen = lrs[0] if lr is None else lr
        cells = [(n, chosen) for n, cell_lr in sweep.configs() if np.isclose(cell_lr, chosen, rtol=1e-6)]
        if not cells:
            raise ValueError(f"no run has lr={chosen:g}; available: {lrs}")
        return plot_fig6(entropy_panels(sweep, cells, source="our runs"))
    if figure == "fig8":
        n_lrs = Counter(n for n, _ in sweep.configs())  # the distinct learning rates of each depth
        depth = max(n_lrs, key=lambda n: (n_lrs[n], n))
        return plot_fig8(entropy_panels(sweep, [c for c in sweep.configs() if c[0] == depth], source="our runs"))
    raise ValueError(f"figure must be 'fig6' or 'fig8', got {figure!r}")
