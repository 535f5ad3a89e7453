"""Figures of the "Our re-run" page: attention entropy and stable rank while our model trains on real text.

* ``c-rerun-full``: the CPU reproduction (1- and 2-layer models on Wikipedia leads, preset
  ``rerun-full`` of :mod:`joma_lib.lm.train`, two seeds, about 11 minutes on 2 cores). ``make``
  reads the committed results written by the one documented command
  (``python -m joma_lib.lm.train run --preset rerun-full --jobs 2 --out runs/rerun-full --results
  joma_lib/lm/results/rerun-full.npz``); it does not retrain.
* ``c-rerun-srank``: the stable rank of each layer's lower MLP weight in the same runs.
* ``c-rerun-quick``: a shortened run (preset ``rerun-quick``, about a minute) that ``make``
  really trains, so that CI checks the training code against its committed reference.

The entropy panels are drawn by the same code as the paper's Figs. 6 and 8 from the
authors' runs (:mod:`joma_lib.figures.wikitext`), from the same data structure
(:class:`joma_lib.lm.authors.SweepRuns`).
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure

from joma_lib.figures.registry import FigureData, FigureSpec, Tolerance
from joma_lib.figures.wikitext import entropy_panels, layer_colours, plot_entropy_panels, plot_fig6, plot_fig8
from joma_lib.lm.authors import SweepRuns
from joma_lib.lm.data import OFFLINE_SOURCES
from joma_lib.lm.train import PRESETS, RunConfig, load_sweep, run_sweep, sweep_configs

RESULTS_DIR = Path(__file__).resolve().parents[1] / "lm" / "results"
FULL_RESULTS = RESULTS_DIR / "rerun-full.npz"


def load_runs(path: str | Path) -> dict[str, np.ndarray]:
    """Our sweep arrays from a run directory (finished runs) or a collected ``.npz``."""
    path = Path(path)
    if path.is_dir():
        return load_sweep(path)[0]
    if not path.is_file():
        raise ValueError(f"{path} is neither a run directory nor a results .npz")
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def sweep_panels(runs: dict[str, np.ndarray], source: str) -> FigureData:
    """Entropy panels (one per depth and lr, seed-averaged, as Fig. 6) plus the seed-mean stable rank and loss."""
    sweep = SweepRuns.from_arrays(runs)
    cells = sweep.configs()
    data = entropy_panels(sweep, cells, source=source)
    data["stable_rank"] = np.full_like(data["attn_entropy"], np.nan)
    data["train_loss"] = np.full_like(data["val_loss"], np.nan)
    for p, (n, lr) in enumerate(cells):
        mask = (sweep.nlayers == n) & np.isclose(sweep.lr, lr, rtol=1e-6, atol=0.0)
        data["stable_rank"][p, :, :n] = runs["stable_rank"][mask][:, :, :n].mean(axis=0)
        data["train_loss"][p] = runs["train_loss"][mask].mean(axis=0)
    return data


def _source(preset: str) -> str:
    return f"our re-run (preset {preset}) on {OFFLINE_SOURCES[PRESETS[preset]['data']]}"


def make_full(path: str = str(FULL_RESULTS)) -> FigureData:
    """Data of ``c-rerun-full`` / ``c-rerun-srank``: the committed results of the full CPU reproduction."""
    return sweep_panels(load_runs(path), _source("rerun-full"))


def make_quick(**overrides: Any) -> FigureData:
    """Train the ``rerun-quick`` preset on the CPU (deterministic algorithms, one thread) and return its panels.

    ``overrides`` change :class:`~joma_lib.lm.train.RunConfig` fields (e.g. ``steps``).
    """
    settings = dict(PRESETS["rerun-quick"])
    layers, lrs, seeds = settings.pop("layers"), settings.pop("lr"), settings.pop("seeds")
    base = replace(RunConfig(**settings), **overrides)
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        with tempfile.TemporaryDirectory() as out:
            runs, _ = run_sweep(sweep_configs(base, layers, lrs, seeds), out, device="cpu", progress=False,
                             log=lambda _: None)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
    return sweep_panels(runs, _source("rerun-quick"))


def plot_rerun(data: FigureData) -> Figure:
    """Entropy per layer vs minibatch, one panel per depth, drawn like the paper's Fig. 6 (free y range)."""
    return plot_entropy_panels(data, style="layers")


def plot_stable_rank(data: FigureData) -> Figure:
    """Stable rank ``||W_1||_F^2 / ||W_1||_2^2`` of each layer's lower MLP weight vs minibatch, one panel per depth."""
    n_panels = int(data["nlayers"].size)
    fig = Figure(figsize=(3.6 * n_panels + 0.8, 3.2), layout="constrained")
    axes = fig.subplots(1, n_panels, sharey=True, squeeze=False)[0]
    for p, ax in enumerate(axes):
        depth = int(data["nlayers"][p])
        for layer, colour in enumerate(layer_colours(depth)):
            ax.plot(data["minibatch"][p] / 1000.0, data["stable_rank"][p, :, layer], color=colour,
                    label=f"layer{layer}")
        ax.set_title(f"Layers: {depth}, lr {data['lr'][p]:g}", fontsize=10)
        ax.set_xlabel("Minibatch (k)")
        ax.legend(fontsize=8)
    axes[0].set_ylabel(r"stable rank of $W_1$")
    return fig


def plot_sweep(path: str | Path, figure: str = "fig6", lr: float | None = None) -> Figure:
    """Fig. 6 (all depths at one lr) or Fig. 8 (all lrs of the deepest model) from our runs, as from the authors'."""
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
        depth = int(sweep.nlayers.max())
        return plot_fig8(entropy_panels(sweep, [c for c in sweep.configs() if c[0] == depth], source="our runs"))
    raise ValueError(f"figure must be 'fig6' or 'fig8', got {figure!r}")


# The full run is read from a committed file, so its data must match the reference to rounding. The quick run is
# trained anew: with one thread and deterministic algorithms it repeats bit for bit on one machine, but other CPUs
# (instruction sets) and GPUs reorder float sums, which a few hundred Adam steps amplify to ~1e-3..1e-2.
READ_BACK = Tolerance(rtol=1e-12, atol=1e-12)
TRAINED = Tolerance(rtol=0.0, atol=0.03, gpu_atol=0.1)

FIGURES = [
    FigureSpec(
        fig_id="c-rerun-full",
        title="Our CPU re-run: attention entropy of 1- and 2-layer models on Wikipedia text",
        paper_ref="companion (Fig. 6 analogue)",
        chapter="book/rerun.md",
        make=make_full,
        plot=plot_rerun,
        default_tol=READ_BACK,
    ),
    FigureSpec(
        fig_id="c-rerun-srank",
        title="Our CPU re-run: stable rank of the lower MLP weight",
        paper_ref="companion (Fig. 7 analogue)",
        chapter="book/rerun.md",
        make=make_full,
        plot=plot_stable_rank,
        default_tol=READ_BACK,
    ),
    FigureSpec(
        fig_id="c-rerun-quick",
        title="Shortened CPU re-run, retrained by CI",
        paper_ref="companion (Fig. 6 analogue)",
        chapter="book/rerun.md",
        make=make_quick,
        plot=plot_rerun,
        tolerances={"minibatch": READ_BACK, "nlayers": READ_BACK, "lr": READ_BACK, "n_seeds": READ_BACK,
                    "stable_rank": Tolerance(rtol=0.0, atol=0.5, gpu_atol=1.0)},
        default_tol=TRAINED,
    ),
]
