"""The drawing shared by the WikiText chapters (joma_lib.kit.sweeps): entropy panels of any run table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from joma_lib.kit.sweeps import entropy_panels, panel_summary, panel_title, plot_entropy_panels, plot_sweep
from joma_lib.lm.authors import (
    seed_average,
)


def test_panel_summary_equals_the_seed_average_summary(toy_runs) -> None:
    runs = toy_runs()
    data = entropy_panels(runs, [(2, 1e-3), (1, 1e-3)])
    for p, depth in enumerate([2, 1]):
        direct, from_panel = seed_average(runs, depth, 1e-3).entropy_summary(), panel_summary(data, p)
        for name in ("initial", "minimum", "argmin_minibatch", "final", "bounce", "interior"):
            np.testing.assert_array_equal(getattr(from_panel, name), getattr(direct, name))
    with pytest.raises(ValueError, match=r"p must be an integer in \[0, 1\]"):
        panel_summary(data, 2)


def test_plot_draws_any_run_table(toy_runs) -> None:
    data = entropy_panels(toy_runs(), [(1, 1e-3), (2, 1e-3)], source="toy")
    assert data["attn_entropy"].shape == (2, 4, 2) and np.isnan(data["attn_entropy"][0, :, 1]).all()
    fig = plot_entropy_panels(data)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["Layers: 1, val_loss: 3.500", "Layers: 2, val_loss: 3.000"]
    assert [ax.title.get_fontweight() for ax in fig.axes] == ["normal", "bold"]  # the lowest loss is bold
    assert [len(ax.lines) for ax in fig.axes] == [1, 2]
    data["lr"] = np.array([2.5e-4, 1e-2])
    assert [panel_title(data, p, "lr") for p in range(2)] == ["lr: 2.5e-4, val: 3.50", "lr: 1e-2, val: 3.00"]


def _save_runs(path: Path, cells: list[tuple[int, float]]) -> Path:
    """A collected ``.npz`` of one seed per ``(nlayers, lr)`` cell, 3 checkpoints, entropy falling then rising."""
    lmax = max(n for n, _ in cells)
    entropy = np.full((len(cells), 3, lmax), np.nan)
    for r, (n, _) in enumerate(cells):
        entropy[r, :, :n] = np.array([2.0, 1.0, 1.5])[:, None]
    np.savez(path, nlayers=np.array([n for n, _ in cells]), lr=np.array([lr for _, lr in cells]),
             seed=np.zeros(len(cells), dtype=np.int64), minibatch=np.tile([0, 10, 20], (len(cells), 1)),
             val_loss=np.tile([5.0, 4.0, 3.5], (len(cells), 1)), attn_entropy=entropy)
    return path


def _panels(fig: Figure) -> list[tuple[str, int]]:
    """Each entropy panel's title and number of curves (the colour-bar axes have no title)."""
    return [(ax.get_title(), len(ax.lines)) for ax in fig.axes if ax.get_title()]


def test_plot_sweep_fig8_takes_the_learning_rate_sweep_of_a_combined_folder(tmp_path: Path) -> None:
    # the presets paper (depths at 1e-4) and paper-lr (depth 5 at several lrs) collected together
    lrs = [1e-5, 1e-4, 1e-3]
    cells = [(n, 1e-4) for n in range(1, 11)] + [(5, lr) for lr in lrs if lr != 1e-4]
    runs = _save_runs(tmp_path / "both.npz", cells)
    fig8 = _panels(plot_sweep(runs, "fig8"))
    assert [title.split(",")[0] for title, _ in fig8] == ["lr: 1e-5", "lr: 1e-4", "lr: 1e-3"]
    assert {curves for _, curves in fig8} == {5}  # the 5-layer model, not the deepest (10 layers)
    fig6 = _panels(plot_sweep(runs, "fig6", lr=1e-4))
    assert [curves for _, curves in fig6] == list(range(1, 11))
    with pytest.raises(ValueError, match="several learning rates"):
        plot_sweep(runs, "fig6")


def test_plot_sweep_fig8_breaks_a_tie_by_the_deepest(tmp_path: Path) -> None:
    runs = _save_runs(tmp_path / "tie.npz", [(3, 1e-4), (3, 1e-3), (7, 1e-4), (7, 1e-3), (9, 1e-4)])
    assert {curves for _, curves in _panels(plot_sweep(runs, "fig8"))} == {7}
