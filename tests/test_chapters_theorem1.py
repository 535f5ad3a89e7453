"""The Theorem 1 chapter (joma_lib.chapters.theorem1): data properties of paper Figs. 2 and 3 and of the
invariant-residual companion figure, the kernel-free grid, and the live panel, whose fast (numpy) run is the torch
reference run and which redraws for every option."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from joma_lib.attention_kinds import ATTENTION_KINDS, ATTENTIONS, AttentionKind
from joma_lib.block import ACTIVATIONS
from joma_lib.chapters.theorem1.explorer import theorem1_explorer
from joma_lib.chapters.theorem1.figures import make_theorem1_grid
from joma_lib.chapters.theorem1.widget import LR_RATIOS, CheckDrawing, simulate, theorem1_live_widget, theorem1_widget
from joma_lib.invariants import toy_check
from joma_lib.kit import compare, compute, get_spec, load_reference
from joma_lib.kit.fallback import with_static_view
from joma_lib.kit.widget import LiveWidget

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


def test_theorem1_grid_cells_are_the_toy_runs_and_the_explorer_shows_them(payload, cell_data):
    data = make_theorem1_grid(attentions=("exp", "softmax"), concentrations=(0.1, 10.0), temperatures=(1.0, 2.0),
                          steps=120, record_every=20)
    run = toy_check("softmax", "identity", 0, concentration=10.0, steps=120, record_every=20, temperature=2.0)
    np.testing.assert_allclose(data["nc"][1, 1, 1], run["nc"], rtol=1e-12)
    np.testing.assert_allclose(data["residual"][1, 1, 1], run["residual"], rtol=1e-12)
    assert np.all(data["residual"][0, ..., -1] < 0.01)  # exp attention: the invariant is an identity
    ex = theorem1_explorer(data)
    p = payload(ex.html("t1"))
    ys = cell_data(p, (1, 1, 1))
    np.testing.assert_allclose(ys[1], run["nc"][1:], rtol=1e-3)  # NC panel, from step 1 on
    with pytest.raises(ValueError, match="attentions"):
        make_theorem1_grid(attentions=("cubic",))
    with pytest.raises(ValueError, match="at most 200 runs"):
        make_theorem1_grid(concentrations=tuple(range(1, 30)), temperatures=tuple(range(1, 5)))


@pytest.fixture(scope="module")
def panel() -> LiveWidget:
    return theorem1_live_widget()


def test_the_panel_offers_every_registered_kind_and_activation(panel):
    """The menus are the registries (by name), so the tests below cover every option the panel offers."""
    assert list(panel.controls["attention"].options) == list(ATTENTIONS)
    assert list(panel.controls["phi"].options) == list(ACTIVATIONS)
    assert tuple(panel.controls["lr_ratio"].options) == LR_RATIOS


@pytest.mark.parametrize(("attention", "phi"), list(itertools.product(ATTENTIONS, ACTIVATIONS)))
def test_fast_run_is_the_torch_reference(attention, phi):
    """The panel's run (numpy engine, hand-written gradients) equals toy_check's torch engine (autograd) to
    rounding, at the smallest and largest learning-rate ratio the panel offers."""
    for lr_ratio, seed in ((LR_RATIOS[0], 0), (LR_RATIOS[-1], 9)):
        fast = simulate(attention, phi, lr_ratio=lr_ratio, seed=seed)
        ref = toy_check(attention, phi, seed, steps=150, lr_ratio=lr_ratio, engine="torch")
        assert fast.keys() == ref.keys()
        assert np.abs(ref["z"][-1] - ref["z"][0]).max() > 1e-2  # the logits moved
        for key in ref:
            np.testing.assert_allclose(fast[key], ref[key], rtol=1e-10, atol=1e-12,
                                       err_msg=f"{key} at lr_ratio={lr_ratio}, seed={seed}")


def test_a_kind_without_numpy_score_runs_on_the_torch_reference(monkeypatch):
    """A kind registered without ``score`` (CONTRIBUTING.md, "Add an attention kind") still runs in the panel."""
    monkeypatch.setitem(ATTENTION_KINDS, "exp2", AttentionKind(
        "exp2", kernel=lambda s, x: x * torch.exp(2 * s), potential=lambda z: z, inverse_potential=lambda g, z0: g,
        coefficient=lambda temperature: 1.0 / temperature))
    data = simulate("exp2", "tanh", lr_ratio=2.0, seed=1, steps=30)
    ref = toy_check("exp2", "tanh", 1, steps=30, lr_ratio=2.0)
    for key in ref:
        np.testing.assert_array_equal(data[key], ref[key])


def test_the_panel_redraws_for_every_option(panel):
    """Every attention kind x activation, every ratio and the extreme seeds: a new picture of that run, no error,
    and the figure's artists are reused (not piled up)."""
    drawing = panel.draw
    assert isinstance(drawing, CheckDrawing)
    changes = [{"attention": a, "phi": phi} for a, phi in itertools.product(ATTENTIONS, ACTIVATIONS)]
    changes += [{"lr_ratio": r} for r in LR_RATIOS] + [{"seed": 9}, {"seed": 0}]
    before = panel.image.value
    for change in changes:
        assert panel.update(**change) > 0.0 and panel.error is None, (change, panel.status.value)
        assert panel.image.value[:8] == PNG_SIGNATURE and panel.image.value != before, change
        before = panel.image.value
        data = simulate(**panel.values)
        steps, residual = drawing.scaled.get_data()
        np.testing.assert_array_equal(steps, data["steps"][1:])
        np.testing.assert_array_equal(residual, data["residual"][1:])
        np.testing.assert_array_equal(drawing.logits.get_data()[1], data["z"][-1])
        values = panel.values
        assert f"{values['attention']} attention, phi = {values['phi']}" in drawing.title.get_text()
        assert "final residual" in panel.status.value
    assert len(drawing.ax_r.lines) == 2 and len(drawing.ax_z.lines) == 2 and len(panel.draw.figure.axes) == 2


def test_the_static_view_shows_the_default_picture():
    html = with_static_view(theorem1_widget(), alt="Theorem 1 panel").static_html()
    # one picture, and its phone layout for narrow screens
    assert html.count("<img ") == 1 and html.count("data:image/png;base64,") == 2 and 'alt="Theorem 1 panel"' in html


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
