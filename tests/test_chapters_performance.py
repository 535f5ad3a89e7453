"""The performance chapter (joma_lib.chapters.performance): the bf16-against-fp32 re-run and its measure."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.chapters.performance.figures import bf16_inside_fp32_band, plot_precision


def _data() -> dict[str, np.ndarray]:
    """Three fp32 seeds and three bf16 seeds over 5 checkpoints, the bf16 mean outside the fp32 range at two."""
    fp32 = np.array([[5.0, 3.0, 2.0, 2.5, 2.8], [5.0, 3.2, 2.2, 2.6, 3.0], [5.0, 3.4, 2.4, 2.7, 3.2]])
    bf16 = np.array([[5.0, 3.1, 2.5, 2.55, 3.3], [5.0, 3.3, 2.7, 2.65, 3.5], [5.0, 3.2, 2.6, 2.6, 3.4]])
    return {"minibatch": np.arange(5) * 20, "attn_entropy": np.stack([fp32, bf16]),
            "val_loss": np.stack([fp32 + 1, bf16 + 1]), "seeds": np.array([1, 2, 3])}


def test_the_band_measure_counts_checkpoints_after_the_first():
    # bf16 means after step 0: 3.2 (inside 3.0-3.4), 2.6 (outside 2.0-2.4), 2.6 (inside 2.5-2.7), 3.4 (outside)
    assert bf16_inside_fp32_band(_data()) == pytest.approx(0.5)
    data = _data()
    data["attn_entropy"][1] = data["attn_entropy"][0]  # identical runs lie inside their own range everywhere
    assert bf16_inside_fp32_band(data) == 1.0


def test_the_figure_draws_entropy_and_loss_with_the_fp32_band():
    fig = plot_precision(_data())
    assert [ax.get_ylabel() for ax in fig.axes] == ["attention entropy (nats)", "validation loss (nats)"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["fp32, range of 3 seeds", "fp32, seed mean", "bf16, seed mean"]
