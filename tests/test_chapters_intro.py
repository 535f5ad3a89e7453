"""The introduction chapter (joma_lib.chapters.intro): the three-panel summary of JoMA's story."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.chapters.intro.figures import make_summary, plot_summary


@pytest.fixture(scope="module")
def summary() -> dict[str, np.ndarray]:
    return make_summary(n_steps=400, record_every=20, tree_height=3, n_times=201)


def test_the_summary_starts_uniform_and_the_linear_mlp_collapses_below_the_nonlinear(summary):
    assert summary["steps"][-1] == 400 and summary["entropy_linear"].shape == summary["steps"].shape
    for name in ("entropy_linear", "entropy_nonlinear"):
        assert summary[name][0] == pytest.approx(np.log(10))  # v = 0: uniform attention over 10 tokens
    assert summary["entropy_linear"][-1] < summary["entropy_nonlinear"][-1]


def test_near_tokens_are_associated_first_and_reach_90_percent_at_their_time(summary):
    times, association, t90 = summary["times"], summary["association"], summary["assoc_time"]
    assert association.shape == (201, 3) and np.all(np.diff(t90) > 0)  # height 1 first, the root last
    reached = [np.interp(t90[h], times, association[:, h]) for h in range(3) if t90[h] <= times[-1]]
    assert reached, "no height reaches 90 % within the plotted time"
    np.testing.assert_allclose(reached, 0.9, atol=0.01)


def test_the_summary_draws_three_titled_panels(summary):
    fig = plot_summary(summary)
    assert [ax.get_title()[:3] for ax in fig.axes] == ["(a)", "(b)", "(c)"]
    assert len(fig.axes[2].get_lines()) == 2 * 3  # a curve and its 90 % time for each height


@pytest.mark.parametrize("kwargs, name", [({"tree_height": 1}, "tree_height"), ({"scale": 0.0}, "scale"),
                                          ({"n_steps": 5}, "n_steps")])
def test_bad_settings_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_summary(**kwargs)
