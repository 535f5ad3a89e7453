"""The Theorem 1 panel: its fast (numpy) run is the torch reference run, and it redraws for every option."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from joma_lib.attention_kinds import ATTENTION_KINDS, ATTENTIONS, AttentionKind
from joma_lib.block import ACTIVATIONS
from joma_lib.invariants import toy_check
from joma_lib.kit.fallback import with_static_view
from joma_lib.kit.widget import LiveWidget
from joma_lib.chapters.theorem1.widget import LR_RATIOS, CheckDrawing, theorem1_live_widget, theorem1_widget, simulate

torch.set_num_threads(1)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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
