"""The live-kernel panel of the modified-MLP dynamics: it reacts to its controls."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.chapters.theorems3_4.widget import ModifiedMLPWidget, modified_mlp_widget


def test_panel_redraws_on_control_changes():
    explorer = ModifiedMLPWidget(n_steps=1000)
    first = explorer.image.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    explorer.controls["temperature"].value = 1.0       # an observed change triggers a redraw
    assert explorer.image.value != first
    ms = explorer.update(nonlinear=False, n=5)
    assert ms > 0 and len(explorer.drawing.v_lines) == 5
    assert not any(line.get_visible() for line in explorer.drawing.mu_lines)  # no targets in the linear case
    x, y = explorer.drawing.entropy_line.get_data()
    assert x[-1] == 1000 and y[-1] < 0.3                # most salient takes all
    assert "entropy: start" in explorer.status.value


def test_panel_matches_library_run():
    explorer = ModifiedMLPWidget(n_steps=500)
    steps, v0 = explorer.drawing.v_lines[-1].get_data()
    from joma_lib.softmax_dynamics import fig4_mu, simulate_softmax_attention

    run = simulate_softmax_attention(fig4_mu(), n_steps=500)
    np.testing.assert_allclose(v0, run.v[steps, -1], rtol=1e-12)


def test_panel_rejects_unknown_controls_and_builds_widget():
    explorer = ModifiedMLPWidget(n_steps=200)
    with pytest.raises(ValueError, match="unknown controls"):
        explorer.update(colour="red")
    assert modified_mlp_widget(n_steps=200).children
