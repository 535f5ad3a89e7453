"""The Theorem 2 chapter (joma_lib.chapters.theorem2): its figures' data against the reference and the closed form,
and the variants of Theorem 2's ODE that the page's hidden cells check its erf section and exercises with."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import erf

from joma_lib.chapters.theorem2 import (
    THEOREM2_SALIENCY,
    attention_near_blowup,
    blowup_time,
    erf_spread,
    euler_steps,
    integrate_linear_attention,
    integrate_temperature,
    linear_closed_form,
    temperature_blowup_time,
)

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


# ------------------------------------------------------------------ variants: the page's hidden checks
SALIENCY = np.array(THEOREM2_SALIENCY)


def test_erf_spread_tells_the_conserved_ratio_from_the_printed_one():
    t = np.array([0.2, 0.5, 0.9, 0.999]) * blowup_time(SALIENCY)
    v = linear_closed_form(SALIENCY, t)
    assert erf_spread(v, SALIENCY, np.sqrt(2)).shape == (4,)
    assert erf_spread(v, SALIENCY, np.sqrt(2)).max() < 1e-12
    printed = erf_spread(v, SALIENCY, 2.0)              # the slides' erf(v/2): spreads more and more
    assert printed[0] > 1e-4 and np.all(np.diff(printed) > 0) and printed[2] > 0.1


def test_temperature_sqrt2_conserves_the_printed_ratio():
    t_star = temperature_blowup_time(SALIENCY, np.sqrt(2))
    assert t_star == pytest.approx(np.sqrt(np.pi) / np.abs(SALIENCY).max(), rel=1e-14)
    assert temperature_blowup_time(SALIENCY, 1.0) == pytest.approx(blowup_time(SALIENCY), rel=1e-15)
    t = np.array([0.5, 0.9, 0.99]) * t_star
    v = integrate_temperature(SALIENCY, np.sqrt(2), t)
    np.testing.assert_allclose(erf(v / 2) / SALIENCY, np.repeat((t / np.sqrt(np.pi))[:, None], SALIENCY.size, 1),
                               rtol=1e-8)
    assert erf_spread(v, SALIENCY, 2.0).max() < 1e-8 and erf_spread(v, SALIENCY, np.sqrt(2)).min() > 0.01


def test_temperature_one_is_theorem2():
    t = np.array([0.3, 0.8, 0.95]) * blowup_time(SALIENCY)
    np.testing.assert_allclose(integrate_temperature(SALIENCY, 1.0, t), linear_closed_form(SALIENCY, t), rtol=1e-8)


def test_linear_attention_is_sinh():
    t = np.array([0.5, 1.0, 3.0])
    np.testing.assert_allclose(integrate_linear_attention(SALIENCY, t), np.sinh(np.outer(t, SALIENCY)), rtol=1e-8,
                               atol=1e-12)


def test_euler_steps_are_first_order():
    exact = np.sinh(3.0 * SALIENCY)
    errors = [np.abs(euler_steps(lambda v: SALIENCY * np.sqrt(1 + v * v), np.zeros(5), 3.0, n) - exact).max()
              for n in (2_000, 4_000)]
    assert errors[1] == pytest.approx(errors[0] / 2, rel=0.05)    # halving the step halves the error
    np.testing.assert_allclose(euler_steps(lambda v: SALIENCY, np.zeros(5), 2.0, 7), 2.0 * SALIENCY, rtol=1e-14)


def test_attention_near_blowup():
    time_left = np.geomspace(1.0, 1e-12, 50)
    tie = attention_near_blowup([1.0, 1.0, 0.5], [0.2, 0.6, 0.9], time_left)
    np.testing.assert_allclose(tie.sum(axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(tie[0], [0.2 / 1.7, 0.6 / 1.7, 0.9 / 1.7], rtol=1e-14)  # t = 0: by co-occurrence
    np.testing.assert_allclose(tie[-1], [0.25, 0.75, 0.0], atol=1e-9)  # the tied leaders split by co-occurrence
    near = attention_near_blowup([1.0, 0.99], [0.5, 0.5], time_left)
    assert np.all(np.diff(near[:, 0]) >= 0) and near[-1, 0] > 0.99 and near[time_left > 1e-3, 0].max() < 0.9


@pytest.mark.parametrize("call", [
    lambda: attention_near_blowup([1.0, 0.5], [0.5], [0.5]),             # one co-occurrence too few
    lambda: attention_near_blowup([1.0, 0.5], [0.5, 0.0], [0.5]),        # P[l|m] = 0
    lambda: attention_near_blowup([1.0, 0.5], [0.5, 0.5], [0.0]),        # at t* itself
    lambda: attention_near_blowup([1.0, 0.5], [0.5, 0.5], [1e-17]),      # rounds to t*
    lambda: attention_near_blowup([[1.0, 0.5]], [0.5, 0.5], [0.5]),      # two problems
    lambda: temperature_blowup_time(SALIENCY, 0.0),
    lambda: integrate_temperature([0.0, 0.0], 1.0, [1.0]),
    lambda: euler_steps(lambda v: v, [1.0], 1.0, 0),
])
def test_variants_reject_bad_input(call):
    with pytest.raises(ValueError):
        call()
