"""The drawing shared by the WikiText chapters (joma_lib.kit.sweeps): entropy panels of any run table."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.kit.sweeps import entropy_panels, panel_summary, panel_title, plot_entropy_panels
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
