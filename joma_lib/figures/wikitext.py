"""Figures of the "Real text" page: attention entropy while a Transformer trains on WikiText-2 (paper Figs. 6, 8).

Both figures are drawn from the authors' published sweep results (see :mod:`joma_lib.lm.authors`), which are
licensed **CC BY-NC 4.0** by the paper's authors (Tian, Wang, Zhang, Chen, Du). The committed reference data of
``fig6`` and ``fig8`` are seed-averaged curves derived from those results: they carry the same licence and
attribution (the ``source`` array of each data set states it) and may only be reused non-commercially.

The drawing code is shared with our own re-run (:mod:`joma_lib.figures.sweep_plots`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from joma_lib.figures.registry import Claim, FigureData, FigureSpec, Tolerance
from joma_lib.figures.sweep_plots import entropy_panels, panel_summary, plot_fig6, plot_fig8
from joma_lib.lm.authors import ATTRIBUTION, EntropySummary, official_runs
from joma_lib.validation import check_float, check_int

FIG6_DEPTHS = (1, 2, 5, 10)
FIG8_LRS = (1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2)


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


# Pure arithmetic (means over seeds) on the published float32 numbers: anything beyond float64 rounding means the
# data or the aggregation changed.
EXACT = Tolerance(rtol=1e-10, atol=1e-12)

# The panel titles of the paper (Figs. 6 and 8), printed to 3 and 2 decimals.
FIG6_PAPER_LOSSES = (5.357, 5.255, 5.169, 5.110)
FIG8_PAPER_LOSSES = (6.41, 5.89, 5.67, 5.23, 5.17, 5.30, 6.76)


def _summary_of_depth(data: FigureData, depth: int) -> EntropySummary:
    return panel_summary(data, int(np.flatnonzero(data["nlayers"] == depth)[0]))


def _bounce_if_interior(summary: EntropySummary, layers: slice) -> np.ndarray:
    """Bounce of the chosen layers; NaN where the minimum is at the first or last checkpoint."""
    return np.where(summary.interior[layers], summary.bounce[layers], np.nan)


def _loss_gap(data: FigureData, printed: Sequence[float], decimals: int) -> float:
    return float(np.abs(np.round(data["min_val_loss"], decimals) - np.asarray(printed)).max())


FIG6_CLAIMS = (
    Claim("fig6-authors-losses", "Fig. 6",
          "The authors' runs give the panel titles' best validation losses 5.357/5.255/5.169/5.110 (1/2/5/10 "
          "layers): max gap after rounding to 3 decimals", lambda d: _loss_gap(d, FIG6_PAPER_LOSSES, 3), "<", 5e-4,
          kind="paper", threshold_set="before-data"),
    Claim("fig6-authors-bounce", "Fig. 6, Theorem 4",
          "1-layer model: attention entropy drops early, then bounces back: rise after the interior minimum (nats)",
          lambda d: float(_bounce_if_interior(_summary_of_depth(d, 1), slice(0, 1))[0]), ">", 0.6,
          kind="paper", threshold_set="after-data",
          threshold_note="the plan's 0.6-nat bar was read off the authors' data, where the rise is 0.659"),
    Claim("fig6-deeper-lower-loss", "Fig. 6",
          "More layers reach a lower validation loss: largest increase of the best loss from one depth to the next",
          lambda d: float(np.diff(d["min_val_loss"]).max()), "<", 0.0,
          kind="paper", threshold_set="before-data"),
    Claim("fig6-deep-upper-layers-bounce", "Fig. 6",
          "10 layers: layers 3-9 bounce back, smallest rise after their minimum (nats)",
          lambda d: float(np.min(_bounce_if_interior(_summary_of_depth(d, 10), slice(3, None)))), ">", 0.2,
          kind="paper", threshold_set="after-data",
          threshold_note="the 0.2-nat bar was read off the authors' data, where the smallest rise is 0.234"),
    Claim("fig6-deep-lower-layers-suppressed", "Fig. 6",
          "Our reading of the authors' 10-layer runs: the lowest layers 0-2 hardly rise after their minimum, "
          "largest rise (nats)",
          lambda d: float(_summary_of_depth(d, 10).bounce[:3].max()), "<", 0.05,
          kind="companion", threshold_set="after-data",
          threshold_note="the plan's 'layers 0-1 <= 0.05' became layers 0-2 < 0.05 after the data; layer 2's rise is 0.047"),
)


def _best_lr_offset(data: FigureData) -> float:
    """|log10(lr with the lowest best validation loss) - log10(1e-4)|."""
    return float(abs(np.log10(data["lr"][np.argmin(data["min_val_loss"])]) + 4.0))


FIG8_CLAIMS = (
    Claim("fig8-authors-losses", "Fig. 8",
          "The authors' runs give the panel titles' best validation losses 6.41/5.89/5.67/5.23/5.17/5.30/6.76: "
          "max gap after rounding to 2 decimals", lambda d: _loss_gap(d, FIG8_PAPER_LOSSES, 2), "<", 5e-3,
          kind="paper", threshold_set="before-data"),
    Claim("fig8-lr-optimum", "Fig. 8",
          "The panel titles' best validation losses are lowest at lr 1e-4, the rate of Fig. 6 (the panel the "
          r"authors' plotting script sets in bold): $|\log_{10}(\mathrm{best\ lr}) + 4|$", _best_lr_offset, "<", 0.01,
          kind="paper", threshold_set="before-data"),
    Claim("fig8-high-lr-collapse", "Fig. 8",
          "At lr 1e-3 and 1e-2 the layer-0 attention collapses onto one token: largest final layer-0 entropy",
          lambda d: float(d["attn_entropy"][d["lr"] >= 1e-3, -1, 0].max()), "<", 0.05,
          kind="companion", threshold_set="after-data",
          threshold_note="the 0.05 bar was read off the authors' data, where the largest final entropy is 0.01"),
)

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
]
