"""The Theorem 2 chapter (joma_lib.chapters.theorem2): its figures' data against the reference and the closed form."""

from __future__ import annotations

import numpy as np
import pytest

IDS = ("c-thm2-closed-form", "c-thm2-saliency")


@pytest.mark.parametrize("fig_id", IDS)
def test_matches_reference_and_draws(figures_by_id, fig_id, drawn_like_reference):
    drawn_like_reference(fig_id, figures_by_id[fig_id])


def test_thm2_closed_form_figure(figures_by_id):
    d = figures_by_id["c-thm2-closed-form"]
    np.testing.assert_allclose(d["v_ode"], d["v_closed"], rtol=1e-6, atol=1e-12)
    assert d["t"][-1] / d["t_star"] == pytest.approx(0.999)
    spread = np.ptp(d["ratio_half"][1:], axis=1)
    assert spread.max() > 0.2 and np.ptp(d["ratio_sqrt2"], axis=1).max() < 1e-6
    assert np.isnan(d["limits"][0]) and np.allclose(d["v_closed"][-1, 1:], d["limits"][1:], atol=2e-3)
