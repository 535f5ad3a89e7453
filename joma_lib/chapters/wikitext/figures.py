"""Figures of the "Real text" page: attention entropy while a Transformer trains on WikiText-2 (paper Figs. 6, 8).

Both figures are drawn from the authors' published sweep results (see :mod:`joma_lib.lm.authors`), which are
licensed **CC BY-NC 4.0** by the paper's authors (Tian, Wang, Zhang, Chen, Du). The committed reference data of
``fig6`` and ``fig8`` are seed-averaged curves derived from those results: they carry the same licence and
attribution (the ``source`` array of each data set states it) and may only be reused non-commercially.

The drawing code is shared with our own re-run (:mod:`joma_lib.kit.sweeps`).
"""

from __future__ import annotations



import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from joma_lib.kit.style import heatmap
from joma_lib.kit.registry import Claim, FigureData, FigureSpec, Tolerance
from joma_lib.lm.authors import ATTRIBUTION, SweepRuns, official_runs, seed_average
from joma_lib.lm.data import OFFLINE_SOURCES
from joma_lib.lm.presets import PRESETS
from joma_lib.base.validation import check_float, check_int




from joma_lib.kit.sweeps import BOUNCE_MIN_DROP, entropy_panels, panel_summary, plot_fig6, plot_fig8
from joma_lib.lm.authors import EntropySummary

FIG6_DEPTHS = (1, 2, 5, 10)
FIG8_LRS = (1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2)


def make_fig6(directory: str | None = None, nlayers: tuple[int, ...] = FIG6_DEPTHS, lr: float = 1e-4) -> FigureData:
    """Fig. 6 (WikiText-2 row): entropy per layer vs minibatch for each number of layers in ``nlayers`` at one lr,
    seed-averaged.

    ``directory`` holds the authors' ``.pt`` files (default: searched for, downloaded when online).
    """
    nlayers = tuple(check_int("nlayers[i]", n, 1) for n in nlayers)
    lr = check_float("lr", lr, 0.0, low_open=True)
    return entropy_panels(official_runs(directory), [(n, lr) for n in nlayers], source=ATTRIBUTION)


def make_fig8(directory: str | None = None, nlayers: int = 5, lrs: tuple[float, ...] = FIG8_LRS) -> FigureData:
    """Fig. 8: entropy per layer vs minibatch of the ``nlayers``-layer model for each lr, seed-averaged."""
    nlayers = check_int("nlayers", nlayers, 1)
    lrs = tuple(check_float("lrs[i]", lr, 0.0, low_open=True) for lr in lrs)
    return entropy_panels(official_runs(directory), [(nlayers, lr) for lr in lrs], source=ATTRIBUTION)


# Pure arithmetic (means over seeds) on the published float32 numbers: anything beyond float64 rounding means the
# data or the aggregation changed.
EXACT = Tolerance(rtol=1e-10, atol=1e-12)

# The panel titles of the paper (Figs. 6 and 8), printed to 3 and 2 decimals.
FIG6_PAPER_LOSSES = (5.357, 5.255, 5.169, 5.110)
FIG8_PAPER_LOSSES = (6.41, 5.89, 5.67, 5.23, 5.17, 5.30, 6.76)


def _summary_of_nlayers(data: FigureData, nlayers: int) -> EntropySummary:
    return panel_summary(data, int(np.flatnonzero(data["nlayers"] == nlayers)[0]))


def _bounce_if_interior(summary: EntropySummary, layers: slice) -> np.ndarray:
    """Bounce of the chosen layers; NaN where the minimum is at the first or last checkpoint."""
    return np.where(summary.interior[layers], summary.bounce[layers], np.nan)


# "Early" means within the first tenth of the run (5,800 of 58,000 steps): the 1-layer minimum lies at 2,000.
EARLY_FRACTION = 0.1


def _dropped(summary: EntropySummary, layers: slice) -> np.ndarray:
    """Whether each chosen layer's minimum lies at least :data:`~joma_lib.kit.sweeps.BOUNCE_MIN_DROP` of its start
    below its start, ``min H <= (1 - BOUNCE_MIN_DROP) H(0)``: about 0.5 nats from 2.5, over ten times the authors'
    checkpoint-to-checkpoint scatter (0.01-0.04 nats), and the drop Fig. 7's stable-rank bounce asks for."""
    return summary.minimum[layers] <= (1.0 - BOUNCE_MIN_DROP) * summary.initial[layers]


def early_drop_bounce(data: FigureData) -> float:
    """Claim ``fig6-authors-bounce``: the 1-layer model's rise after its minimum, ``H(end) - min H`` (nats); NaN
    unless the minimum lies inside the run, within its first :data:`EARLY_FRACTION` of steps and at least
    :data:`~joma_lib.kit.sweeps.BOUNCE_MIN_DROP` of the start below the start (the entropy drops early, then bounces
    back)."""
    p = int(np.flatnonzero(data["nlayers"] == 1)[0])
    summary, steps = panel_summary(data, p), data["minibatch"][p]
    early = summary.argmin_minibatch[0] <= steps[0] + EARLY_FRACTION * (steps[-1] - steps[0])
    shape = bool(summary.interior[0] and early and _dropped(summary, slice(0, 1))[0])
    return float(summary.bounce[0]) if shape else float("nan")


def suppressed_lower_bounce(data: FigureData) -> float:
    """Claim ``fig6-deep-lower-layers-suppressed``: the largest rise after the minimum, ``H(end) - min H`` (nats),
    of layers 0-2 of the 10-layer model; NaN unless each of them dropped by at least
    :data:`~joma_lib.kit.sweeps.BOUNCE_MIN_DROP` of its start (the drop happens and the bounce does not; layers that
    never moved have no rise either)."""
    summary = _summary_of_nlayers(data, 10)
    lower = slice(0, 3)
    return float(summary.bounce[lower].max()) if np.all(_dropped(summary, lower)) else float("nan")


def _shallow_smallest_bounce(data: FigureData) -> float:
    """Smallest rise after an interior minimum over every layer of the 1-, 2- and 5-layer models (NaN if some
    layer's minimum is at an end of the run)."""
    # numpy's min, not Python's, which drops a NaN that does not come first (a 2- or 5-layer model's layer without
    # an interior minimum)
    return float(np.min([np.min(_bounce_if_interior(_summary_of_nlayers(data, n), slice(None))) for n in (1, 2, 5)]))


def _loss_gap(data: FigureData, printed: Sequence[float], decimals: int) -> float:
    return float(np.abs(np.round(data["min_val_loss"], decimals) - np.asarray(printed)).max())


FIG6_CLAIMS = (
    Claim("fig6-authors-losses", "Fig. 6",
          "The authors' runs give the panel titles' best validation losses 5.357/5.255/5.169/5.110 (1/2/5/10 "
          "layers): max gap after rounding to 3 decimals", lambda d: _loss_gap(d, FIG6_PAPER_LOSSES, 3), "<", 5e-4,
          kind="paper", threshold_set="before-data"),
    Claim("fig6-authors-bounce", "Fig. 6, Theorem 4",
          f"1-layer model: attention entropy drops early, then bounces back: rise after its minimum (nats), counted "
          f"only if the minimum lies inside the run, in its first {EARLY_FRACTION:.0%} of steps and at least "
          f"{BOUNCE_MIN_DROP:.0%} below the start",
          early_drop_bounce, ">", 0.6,
          kind="paper", threshold_set="after-data",
          threshold_note="the 0.6-nat bar was read off the authors' data, where the rise is 0.659"),
    Claim("fig6-deeper-lower-loss", "Fig. 6",
          "More layers reach a lower validation loss: largest increase of the best loss from one depth to the next",
          lambda d: float(np.diff(d["min_val_loss"]).max()), "<", 0.0,
          kind="paper", threshold_set="before-data"),
    Claim("fig6-deep-upper-layers-bounce", "Fig. 6",
          "10 layers: layers 3-9 bounce back, smallest rise after their minimum (nats)",
          lambda d: float(np.min(_bounce_if_interior(_summary_of_nlayers(d, 10), slice(3, None)))), ">", 0.2,
          kind="paper", threshold_set="after-data",
          threshold_note="the 0.2-nat bar and the layer range 3-9 were both read off the authors' data, where the "
                         "smallest rise of layers 3-9 is 0.234"),
    Claim("fig6-authors-shallow-every-layer-bounce", "Fig. 6",
          "Our reading of the authors' runs: every layer of the 1-, 2- and 5-layer models drops to an interior "
          "minimum and climbs back, smallest rise (nats)",
          _shallow_smallest_bounce, ">", 0.1,
          kind="companion", threshold_set="after-data",
          threshold_note="the page's 0.1-nat bar, read off the authors' data (the 5-layer model's lowest layer "
                         "rises least)"),
    Claim("fig6-deep-lower-layers-suppressed", "Fig. 6",
          f"Our reading of the authors' 10-layer runs: the lowest layers 0-2 drop, each to at least "
          f"{BOUNCE_MIN_DROP:.0%} below its start, and hardly rise after their minimum: largest rise (nats)",
          suppressed_lower_bounce, "<", 0.05,
          kind="companion", threshold_set="after-data",
          threshold_note="a first 'layers 0-1 <= 0.05' became layers 0-2 < 0.05 after the data; layer 2's rise is "
                         "0.047"),
)


def _best_lr_offset(data: FigureData) -> float:
    """|log10(lr with the lowest best validation loss) - log10(1e-4)|."""
    return float(abs(np.log10(data["lr"][np.argmin(data["min_val_loss"])]) + 4.0))


FIG8_CLAIMS = (
    Claim("fig8-authors-losses", "Fig. 8",
          "Reading the authors' files gives the best validation losses 6.41/5.89/5.67/5.23/5.17/5.30/6.76 that were "
          "computed from the same files (a guard of the reader; the paper's Fig. 8 titles were not seen): max gap "
          "after rounding to 2 decimals", lambda d: _loss_gap(d, FIG8_PAPER_LOSSES, 2), "<", 5e-3,
          kind="sanity", threshold_set="before-data"),
    Claim("fig8-lr-optimum", "Fig. 8",
          "In the authors' runs the best validation losses (which their plotting script writes into the panel "
          "titles; the paper's own titles were not seen) are lowest at lr 1e-4, the rate of Fig. 6 (the panel the "
          r"script sets in bold): $|\log_{10}(\mathrm{best\ lr}) + 4|$", _best_lr_offset, "<", 0.01,
          kind="paper", threshold_set="before-data"),
    Claim("fig8-high-lr-collapse", "Fig. 8",
          "At lr 1e-3 and 1e-2 the layer-0 attention collapses onto one token: largest final layer-0 entropy",
          lambda d: float(d["attn_entropy"][d["lr"] >= 1e-3, -1, 0].max()), "<", 0.05,
          kind="companion", threshold_set="after-data",
          threshold_note="the 0.05 bar was read off the authors' data, where the largest final entropy is 0.01"),
)


# --- The grid behind the page's kernel-free explorer ---

WIKITEXT_SOURCES = ("authors", "rerun")
RERUN_PRESET = "rerun-full"
RERUN_RESULTS = Path(__file__).resolve().parents[2] / "lm" / "results" / f"{RERUN_PRESET}.npz"
"""The committed results of our CPU re-run (written by ``python -m joma_lib.lm run --preset rerun-full``)."""


def _cells(runs: SweepRuns, nlayers: np.ndarray, lrs: np.ndarray, n_checkpoints: int, n_layers: int,
           ) -> dict[str, np.ndarray]:
    """Seed averages of ``runs`` on the grid ``nlayers x lrs`` (NaN / 0 seeds where a cell was not run)."""
    shape = (nlayers.size, lrs.size)
    out = {"minibatch": np.full(n_checkpoints, np.nan), "attn_entropy": np.full(shape + (n_checkpoints, n_layers),
                                                                                np.nan),
           "val_loss": np.full(shape + (n_checkpoints,), np.nan), "min_val_loss": np.full(shape, np.nan),
           "n_seeds": np.zeros(shape, dtype=np.int64)}
    present = set(runs.configs())
    for i, layers in enumerate(nlayers):
        for j, lr in enumerate(lrs):
            if not any(n == layers and np.isclose(r, lr, rtol=1e-6) for n, r in present):
                continue
            avg = seed_average(runs, int(layers), float(lr))
            c = avg.minibatch.size
            if np.isnan(out["minibatch"][0]):
                out["minibatch"][:c] = avg.minibatch
            elif np.any(out["minibatch"][:c] != avg.minibatch):
                raise ValueError("all cells of one source must share the checkpoint steps")
            out["attn_entropy"][i, j, :c, :layers] = avg.attn_entropy
            out["val_loss"][i, j, :c] = avg.val_loss
            out["min_val_loss"][i, j] = avg.min_val_loss
            out["n_seeds"][i, j] = avg.seeds.size
    return out


def make_wikitext_grid(directory: str | None = None, rerun: str = str(RERUN_RESULTS)) -> FigureData:
    """Seed-averaged attention entropy per layer and validation loss over source x layers x learning rate.

    Sources (:data:`WIKITEXT_SOURCES`): the authors' WikiText-2 sweep (``directory``, see
    :func:`joma_lib.lm.authors.official_runs`; CC BY-NC 4.0, the ``source`` array attributes it) and our
    re-run (``rerun``: the committed results of the ``rerun-full`` preset). The grid's axes are the union
    of both sources' numbers of layers and learning rates; a cell a source did not run is NaN (``n_seeds`` 0).
    Arrays: ``minibatch`` (S, C) (NaN-padded), ``attn_entropy`` (S, N, R, C, Lmax), ``val_loss`` (S, N, R, C),
    ``min_val_loss`` / ``n_seeds`` (S, N, R), ``nlayers`` (N), ``lrs`` (R), ``source`` (S) strings.
    """
    with np.load(rerun, allow_pickle=False) as npz:
        ours = SweepRuns.from_arrays({name: npz[name] for name in npz.files})
    sweeps = (official_runs(directory), ours)
    nlayers = np.array(sorted({n for s in sweeps for n, _ in s.configs()}), dtype=np.int64)
    lrs = np.array(sorted({float(f"{lr:.6g}") for s in sweeps for _, lr in s.configs()}))
    n_checkpoints = max(s.minibatch.shape[1] for s in sweeps)
    cells = [_cells(s, nlayers, lrs, n_checkpoints, int(nlayers.max())) for s in sweeps]
    data = {key: np.stack([c[key] for c in cells]) for key in cells[0]}
    our_source = f"our re-run (preset {RERUN_PRESET}) on {OFFLINE_SOURCES[PRESETS[RERUN_PRESET]['data']]}"
    return {"nlayers": nlayers, "lrs": lrs, **data, "source": np.array([ATTRIBUTION, our_source])}


def _outline(x: float, y: float):
    """A white square around grid cell (x, y) of a heat map."""
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, ec="white", lw=2)


def plot_wikitext_grid(data: FigureData) -> Figure:
    """Best validation loss (left) and the bounce of the lowest layer's entropy, ``H(end) - min H`` (right),
    over layers x learning rate, in the authors' runs; cells our re-run also trained are outlined."""
    nlayers, lrs = data["nlayers"], data["lrs"]
    entropy = data["attn_entropy"][0, :, :, :, 0]
    bounce = entropy[..., -1] - np.nanmin(entropy, axis=-1, initial=np.inf, where=~np.isnan(entropy))
    fig = Figure(figsize=(8.8, 3.6), layout="constrained")
    axes = fig.subplots(1, 2)
    x_labels, y_labels = [f"{lr:.0e}" for lr in lrs], [str(n) for n in nlayers]
    heatmap(fig, axes[0], data["min_val_loss"][0], x_labels, y_labels, "nats / token", cmap="viridis_r", vmin=None)
    heatmap(fig, axes[1], bounce, x_labels, y_labels, "nats", cmap="magma")
    for ax, title in zip(axes, ("lowest validation loss (seed mean)", "layer 0: entropy bounce H(end) - min H")):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("learning rate")
        ax.set_ylabel("layers")
        ax.tick_params(axis="x", labelrotation=45)
        for i, j in zip(*np.nonzero(data["n_seeds"][1])):
            ax.add_patch(_outline(j, i))
    fig.text(0.0, -0.02, textwrap.fill(f"Data: {data['source'][0]}", 110), fontsize=9, color="0.35", ha="left",
             va="top")
    return fig






# float64 numpy simulation stored in float32: allow a few float32 ulps plus platform exp differences.


FIGURES = [
    FigureSpec(
        fig_id="fig6",
        title="Attention entropy while training on WikiText-2, 1/2/5/10 layers (authors' runs, CC BY-NC 4.0)",
        paper_ref="Fig. 6 (top row)",
        chapter="book/wikitext.md",
        make=make_fig6,
        plot=plot_fig6,
        params={"nlayers": FIG6_DEPTHS, "lr": 1e-4},
        default_tol=EXACT,
        claims=FIG6_CLAIMS,
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
        claims=FIG8_CLAIMS,
    ),
    FigureSpec(
        fig_id="c-wikitext-grid",
        title="Grid of the Figs. 6/8 explorer: authors' runs (CC BY-NC 4.0) and our re-run, layers x learning rate",
        paper_ref="companion (Figs. 6, 8)",
        chapter="book/wikitext.md",
        make=make_wikitext_grid,
        plot=plot_wikitext_grid,
        default_tol=Tolerance(rtol=1e-10, atol=1e-12),
    ),
]
