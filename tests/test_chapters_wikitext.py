"""The WikiText chapter (joma_lib.chapters.wikitext): Figs. 6 and 8 from the authors' runs and the kernel-free grid.

The Fig. 6/8 tests need the authors' sweep files (the ``official_dir`` fixture) and are skipped without them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from joma_lib.kit.sweeps import panel_title, plot_fig6
from joma_lib.chapters.wikitext.explorer import wikitext_explorer
from joma_lib.chapters.wikitext.figures import make_fig6, make_fig8
from joma_lib.kit import load_reference


def test_wikitext_reference_grid_agrees_with_fig6_and_fig8_and_the_explorer_shows_it(payload, cell_data):
    """The committed grid against the committed Fig. 6 / Fig. 8 data (both from the authors' runs)."""
    grid, fig6, fig8 = (load_reference(f) for f in ("c-wikitext-grid", "fig6", "fig8"))
    nlayers, lrs = list(grid["nlayers"]), list(grid["lrs"])
    for p, n in enumerate(fig6["nlayers"]):
        cell = (0, nlayers.index(int(n)), lrs.index(1e-4))
        np.testing.assert_allclose(grid["attn_entropy"][cell][:, :n], fig6["attn_entropy"][p, :, :n], rtol=1e-12)
        assert grid["min_val_loss"][cell] == pytest.approx(fig6["min_val_loss"][p], rel=1e-12)
    for p, lr in enumerate(fig8["lr"]):
        cell = (0, nlayers.index(5), int(np.argmin(np.abs(np.log(grid["lrs"] / lr)))))
        assert grid["min_val_loss"][cell] == pytest.approx(fig8["min_val_loss"][p], rel=1e-12)
    ex = wikitext_explorer(grid)
    payload_ = payload(ex.html("w"))
    ys = cell_data(payload_, (1, 0, lrs.index(1e-3)))  # our re-run, 1 layer
    assert ys[0][0] is not None and all(y[0] is None for y in ys[1:-1])  # one layer drawn, the others hidden
    assert "no run" in ex.titles[1, 4, 0]


def test_fig6_titles_match_the_paper(official_dir: Path) -> None:
    data = make_fig6(directory=str(official_dir))
    titles = [panel_title(data, p, "layers") for p in range(4)]
    assert titles == ["Layers: 1, val_loss: 5.357", "Layers: 2, val_loss: 5.255",
                      "Layers: 5, val_loss: 5.169", "Layers: 10, val_loss: 5.110"]
    assert data["n_seeds"].tolist() == [3, 3, 3, 3]
    fig = plot_fig6(data)  # 4 panels, then a colour bar for each of the 5- and 10-layer panels
    assert [ax.get_title() for ax in fig.axes[:4]] == titles and len(fig.axes) == 6
    assert [len(ax.lines) for ax in fig.axes[:4]] == [1, 2, 5, 10]


def test_fig8_titles_and_best_lr_match_the_paper(official_dir: Path) -> None:
    data = make_fig8(directory=str(official_dir))
    assert [f"{v:.2f}" for v in data["min_val_loss"]] == ["6.41", "5.89", "5.67", "5.23", "5.17", "5.30", "6.76"]
    assert panel_title(data, 4, "lr") == "lr: 1e-4, val: 5.17"
    assert data["lr"][np.argmin(data["min_val_loss"])] == pytest.approx(1e-4)
    assert data["n_seeds"].tolist() == [3, 3, 1, 3, 3, 3, 3]  # the 1e-5 cell has one seed in the published data
