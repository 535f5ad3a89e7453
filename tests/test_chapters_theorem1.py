"""The Theorem 1 chapter (joma_lib.chapters.theorem1): data properties of the invariant-residual companion figures,
the numbers the page reads off its checks, and the live widget, whose fast (numpy) run is the torch reference run and
which redraws for every option."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from joma_lib.theory.attention_kinds import ATTENTION_KINDS, ATTENTIONS, AttentionKind
from joma_lib.theory.block import ACTIVATIONS
from joma_lib.chapters.theorem1.readings import flow_readings, linear_step, residual_readings
from joma_lib.chapters.theorem1.widget import LR_RATIOS, CheckDrawing, simulate, theorem1_live_widget, theorem1_widget
from joma_lib.theory.invariants import theorem1_toy, toy_check
from joma_lib.kit import compute, load_reference
from joma_lib.kit.fallback import with_static_view
from joma_lib.kit.widget import LiveWidget

torch.set_num_threads(1)


def check_residual_figure(d):
    att, phis = list(d["attentions"]), list(d["phis"])
    res = d["residual"]
    for a in ("linear", "exp"):
        i = att.index(a)
        assert res[i, :, 0].max() <= 2e-2                            # O(lr) at lr 0.1
        ratio = res[i, :, 0, -1] / res[i, :, 1, -1]
        assert np.all((ratio > 1.5) & (ratio < 2.5))                 # halves with the learning rate
        assert d["max_z_move"][i].min() >= 0.5                       # not vacuous
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
    assert d["residual"].shape == (2, 2, 2) and d["max_z_move"].min() >= 0.5  # the logits move: not vacuous
    assert d["residual"].max() <= 2e-2                                       # scaled by eta_z/eta_w: holds
    assert d["residual_unscaled"].min() > 0.3                                # the ratio ignored: fails
    with pytest.raises(ValueError, match="ratios"):
        compute("c-invariant-lr-ratio", ratios=(0.0,))


def test_a_lost_logit_move_in_either_run_shows_in_the_smaller_move(monkeypatch):
    """max_z_move is the smaller of the two rates' moves; a NaN in the second run must not be skipped."""
    from joma_lib.chapters.theorem1 import figures

    moves = iter([0.5, np.nan, np.nan, 0.5])
    monkeypatch.setattr(figures, "logit_move", lambda z: next(moves))
    data = figures.make_invariant_residual(attentions=("linear",), phis=("tanh", "silu"), steps=4, n_points=2)
    assert np.isnan(data["max_z_move"]).all()


def test_flow_readings_summarise_the_table_by_activation_and_ratio():
    rows = [("exp", "tanh", 1.0, 0.9, 1e-11, 1e-11), ("exp", "relu", 1.0, 0.7, 3e-7, 3e-7),
            ("linear", "silu", 3.0, 2.0, 2e-11, 0.4), ("exp", "silu", 2.0, 1.5, 5e-12, 0.2)]
    assert flow_readings(rows) == {"thm1-flow-zmin": 0.7, "thm1-flow-smooth": 2e-11, "thm1-flow-relu": 3e-7,
                                   "thm1-flow-unscaled": 0.2}
    # a run that lost its numbers (NaN) after the first row shows in every reading it enters, never read past
    lost = [*rows[:2], ("linear", "silu", 3.0, np.nan, np.nan, np.nan), rows[3]]
    assert all(np.isnan(v) for k, v in flow_readings(lost).items() if k != "thm1-flow-relu")


def test_residual_readings_read_the_exact_kinds_and_softmax_apart():
    # residual: attention (linear, exp, softmax) x phi (2) x learning rate (lr, lr / 2) x time (3)
    residual = np.zeros((3, 2, 2, 3))
    residual[:2, :, 0, -1], residual[:2, :, 1, -1] = 2e-3, 1e-3  # halves exactly ...
    residual[1, 1, 1, -1] = 0.8e-3                                 # ... but once: 2e-3 / 0.8e-3 = 2.5
    residual[2, :, :, -1] = [[0.5, 0.7], [0.6, 0.4]]
    d = {"attentions": np.array(["linear", "exp", "softmax"]), "residual": residual,
         "max_z_move": np.array([[0.8, 0.6], [0.9, 1.0], [0.1, 0.1]])}
    got = residual_readings(d)
    assert got["thm1-sgd-exact-max"] == 2e-3 and got["thm1-sgd-exact-zmove"] == 0.6  # softmax's is not counted
    assert got["thm1-sgd-halving"] == pytest.approx(0.5) and got["thm1-sgd-softmax-min"] == 0.4


def test_the_linear_step_is_the_exercise_solution():
    """The page's exercise on linear attention: its hand-written numpy step, from the exp toy's weights and z = 1,
    is the library's step, and the linear invariant moves by dz^2 - sum_k dv_k^2 (second order)."""
    spec, X, y, state = theorem1_toy("exp", "tanh")
    lin_spec, X_lin, _, lin_state = theorem1_toy("linear", "tanh")
    assert np.array_equal(X_lin, X) and np.array_equal(lin_state.W[0], state.W[0]) and np.all(lin_state.z[0] == 1)
    U_C, u_q = spec.embeddings()
    W, W_out, Y, lr = state.W[0], state.W_out[0], np.eye(spec.n_classes)[:, y], 0.1
    z = np.ones(X.shape[0])
    f = U_C @ (X * z[:, None]) + u_q[:, None]
    h = np.tanh(W.T @ f)
    p = np.exp(W_out.T @ h)
    p /= p.sum(axis=0)
    gh = (W_out @ (Y - p)) * (1 - h**2) / X.shape[1]
    V = U_C.T @ W
    step = linear_step(lr)
    np.testing.assert_allclose(step["dv"], U_C.T @ (lr * f @ gh.T), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(step["dz"], lr * (X * (V @ gh)).sum(axis=1), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(step["drift"], step["dz"] ** 2 - (step["dv"] ** 2).sum(axis=1), rtol=1e-8, atol=1e-16)
    assert np.abs(step["drift"]).max() < 0.05 * np.abs(step["dz"]).max()


@pytest.fixture(scope="module")
def widget() -> LiveWidget:
    return theorem1_live_widget()


def test_the_widget_offers_every_registered_kind_and_activation(widget):
    """The menus are the registries (by name), so the tests below cover every option the widget offers."""
    assert list(widget.controls["attention"].options) == list(ATTENTIONS)
    assert list(widget.controls["phi"].options) == list(ACTIVATIONS)
    assert tuple(widget.controls["lr_ratio"].options) == LR_RATIOS


@pytest.mark.parametrize(("attention", "phi"), list(itertools.product(ATTENTIONS, ACTIVATIONS)))
def test_fast_run_is_the_torch_reference(attention, phi):
    """The widget's run (numpy engine, hand-written gradients) equals toy_check's torch engine (autograd) to
    rounding, at the smallest and largest learning-rate ratio the widget offers."""
    for lr_ratio, seed in ((LR_RATIOS[0], 0), (LR_RATIOS[-1], 9)):
        fast = simulate(attention, phi, lr_ratio=lr_ratio, seed=seed)
        ref = toy_check(attention, phi, seed, steps=150, lr_ratio=lr_ratio, engine="torch")
        assert fast.keys() == ref.keys()
        assert np.abs(ref["z"][-1] - ref["z"][0]).max() > 1e-2  # the logits moved
        for key in ref:
            np.testing.assert_allclose(fast[key], ref[key], rtol=1e-10, atol=1e-12,
                                       err_msg=f"{key} at lr_ratio={lr_ratio}, seed={seed}")


def test_a_kind_without_numpy_score_runs_on_the_torch_reference(monkeypatch):
    """A kind registered without ``score`` (CONTRIBUTING.md, "Add an attention kind") still runs in the widget."""
    monkeypatch.setitem(ATTENTION_KINDS, "exp2", AttentionKind(
        "exp2", kernel=lambda s, x: x * torch.exp(2 * s), potential=lambda z: z, inverse_potential=lambda g, z0: g,
        coefficient=lambda temperature: 1.0 / temperature))
    data = simulate("exp2", "tanh", lr_ratio=2.0, seed=1, steps=30)
    ref = toy_check("exp2", "tanh", 1, steps=30, lr_ratio=2.0)
    for key in ref:
        np.testing.assert_array_equal(data[key], ref[key])


def test_the_widget_redraws_for_every_option(widget):
    """Every attention kind x activation, every ratio and the extreme seeds: a new picture of that run, no error,
    and the figure's artists are reused (not piled up)."""
    drawing = widget.draw
    assert isinstance(drawing, CheckDrawing)
    changes = [{"attention": a, "phi": phi} for a, phi in itertools.product(ATTENTIONS, ACTIVATIONS)]
    changes += [{"lr_ratio": r} for r in LR_RATIOS] + [{"seed": 9}, {"seed": 0}]
    before = widget.image.value
    for change in changes:
        assert widget.update(**change) > 0.0 and widget.error is None, (change, widget.status.value)
        assert widget.image.value[:8] == PNG_SIGNATURE and widget.image.value != before, change
        before = widget.image.value
        data = simulate(**widget.values)
        steps, residual = drawing.scaled.get_data()
        np.testing.assert_array_equal(steps, data["steps"][1:])
        np.testing.assert_array_equal(residual, data["residual"][1:])
        np.testing.assert_array_equal(drawing.logits.get_data()[1], data["z"][-1])
        values = widget.values
        assert f"{values['attention']} attention, phi = {values['phi']}" in drawing.title.get_text()
        assert "final residual" in widget.status.value
    assert len(drawing.ax_r.lines) == 2 and len(drawing.ax_z.lines) == 2 and len(widget.draw.figure.axes) == 2


def test_the_static_view_shows_the_default_picture():
    html = with_static_view(theorem1_widget(), alt="Theorem 1 widget").static_html()
    # one picture, and its phone layout for narrow screens
    assert html.count("<img ") == 1 and html.count("data:image/png;base64,") == 2 and 'alt="Theorem 1 widget"' in html


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
