"""Data properties of paper Figs. 2 and 3 and of the invariant-residual companion figure."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from joma_lib.kit import compare, compute, get_spec, load_reference

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def fig_data(figure_data):
    """Data of the paper figures (computed in about 6 s on one core unless kept by the book build), compared with
    the committed reference."""
    data = {fig_id: figure_data(fig_id) for fig_id in ("fig2a", "fig2b", "fig3")}
    for fig_id, fresh in data.items():
        outcome = compare(get_spec(fig_id), fresh, load_reference(fig_id))
        assert outcome.passed, f"{fig_id}: {outcome}"
    return data


@pytest.mark.parametrize(("fig_id", "threshold"), [("fig2a", 0.98), ("fig2b", 0.90)])
def test_fig2_softmax_prediction_tracks_the_logits(fig_data, fig_id, threshold):
    """T1c in Fig. 2's protocol: NC(z-hat, z) >= 0.98 (Gaussian X) / 0.90 (random X) for all t >= 100, 3 seeds."""
    d = fig_data[fig_id]
    assert d["nc_full"].shape[0] >= 3 and d["steps"][-1] == 2000
    late = d["steps"] >= 100
    assert d["nc_full"][:, late].min() >= threshold
    # the sum-of-squares term carries most of the prediction at the end of training
    assert d["nc_sum_sq"][:, -1].min() >= 0.9
    assert np.all(d["nc_sum_sq"][:, -1] > np.abs(d["nc_mean_attn"][:, -1]))
    # and training did something: the loss fell and the logits' mean attention moved
    assert np.all(d["loss"][:, -1] < d["loss"][:, 0] - 0.2)
    assert np.all(d["b_bar_drift"] > 0.1)


def test_fig2_inputs_are_token_frequencies(fig_data):
    for fig_id in ("fig2a", "fig2b"):
        np.testing.assert_allclose(fig_data[fig_id]["X"].sum(axis=0), 1.0, rtol=1e-12)
    # Gaussian X: the distinct tokens form a bump that moves with the class
    peaks = fig_data["fig2a"]["X"][:10].argmax(axis=0)
    assert np.all(np.diff(peaks) >= 0) and peaks[0] == 0 and peaks[-1] == 9


def test_fig3_most_salient_component_keeps_growing(fig_data):
    d = fig_data["fig3"]
    v0, steps = d["v0"], d["steps"]
    assert d["V_init"].shape == d["V_final"].shape == (20, 20)
    np.testing.assert_allclose(d["V_final"][:4, 0], v0[-1], rtol=1e-12)
    end = v0[-1]
    assert end[0] > 2 * np.abs(end[1:]).max()                      # component 0 dominates (sim: 1.67 vs 0.37)
    second_half = steps >= 1000
    assert np.all(np.diff(v0[second_half, 0]) > 0)                  # ... and keeps growing
    last = steps >= 1500
    growth = v0[last][-1] - v0[last][0]
    assert growth[0] >= 0.3
    assert np.all(np.abs(growth[1:]) <= 0.05 * growth[0])           # the others have saturated


def check_residual_figure(d):
    att, phis = list(d["attentions"]), list(d["phis"])
    res = d["residual"]
    for a in ("linear", "exp"):
        i = att.index(a)
        assert res[i, :, 0].max() <= 2e-2                            # O(lr) at lr 0.1
        ratio = res[i, :, 0, -1] / res[i, :, 1, -1]
        assert np.all((ratio > 1.5) & (ratio < 2.5))                 # halves with the learning rate
        assert d["max_abs_z"][i].min() >= 0.5                        # not vacuous
    i = att.index("softmax")
    assert res[i, :, :, -1].min() > 0.3                              # heterogeneous inputs break it
    assert len(phis) == res.shape[1]


def test_invariant_residual_reference():
    check_residual_figure(load_reference("c-invariant-residual"))


def test_invariant_residual_fresh(kept_figure_data):
    """Fresh data: the whole figure as the book build computed it (figure store), or else a cheaper subset here."""
    kept = kept_figure_data("c-invariant-residual")
    check_residual_figure(kept if kept is not None else
                          compute("c-invariant-residual", phis=("identity", "relu"), steps=300))


def test_invariant_holds_at_unequal_learning_rates_only_once_scaled():
    d = compute("c-invariant-lr-ratio", ratios=(0.25, 4.0), phis=("identity", "tanh"))
    assert d["residual"].shape == (2, 2, 2) and d["max_abs_z"].min() >= 0.5  # the logits move: not vacuous
    assert d["residual"].max() <= 2e-2                                       # scaled by eta_z/eta_w: holds
    assert d["residual_unscaled"].min() > 0.3                                # the ratio ignored: fails
    with pytest.raises(ValueError, match="ratios"):
        compute("c-invariant-lr-ratio", ratios=(0.0,))
