"""The figs2_3 chapter (joma_lib.chapters.figs2_3): data properties of paper Figs. 2 and 3, the kernel-free grid of
Theorem 1 over bags and temperature and its explorer, and the numbers the page reads off them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from joma_lib.chapters.figs2_3.explorer import theorem1_explorer
from joma_lib.chapters.figs2_3.figures import make_theorem1_grid, v_node0_late_growth
from joma_lib.chapters.figs2_3.readings import (fig2_readings, grid_readings, softmax_nc_by_concentration,
                                                softmax_residual_sources)
from joma_lib.theory.invariants import toy_check
from joma_lib.kit import compare, get_spec, load_reference

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
    v_node0, steps = d["v_node0"], d["steps"]
    assert d["V_init"].shape == d["V_final"].shape == (20, 20)
    np.testing.assert_allclose(d["V_final"][:4, 0], v_node0[-1], rtol=1e-12)
    end = v_node0[-1]
    assert end[0] > 2 * np.abs(end[1:]).max()                      # component 0 dominates (sim: 1.67 vs 0.37)
    second_half = steps >= 1000
    assert np.all(np.diff(v_node0[second_half, 0]) > 0)             # ... and keeps growing
    last = steps >= 1500
    growth = v_node0[last][-1] - v_node0[last][0]
    assert growth[0] >= 0.3
    assert np.all(np.abs(growth[1:]) <= 0.05 * growth[0])           # the others have saturated


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


def test_fig2_readings_take_the_worst_seed_from_step_100():
    steps = np.array([0, 50, 100, 150])
    gaussian = {"steps": steps, "nc_full": np.array([[0.0, 0.2, 0.99, 0.995], [0.0, 0.1, 0.98, 0.999]]),
                "nc_mean_attn": np.array([[0.0, 0.0, 0.0, -0.05], [0.0, 0.0, 0.0, 0.02]]),
                "b_bar_drift": np.array([0.4, 0.5]), "z_move": np.array([2.5, 2.4])}
    random = {"steps": steps, "nc_full": np.array([[0.0, 0.3, 0.95, 0.96]]),
              "nc_mean_attn": np.array([[0.0, 0.0, 0.0, 0.45]]), "b_bar_drift": np.array([0.3]),
              "z_move": np.array([1.1])}
    assert fig2_readings(gaussian, random) == {
        "fig2a-nc-min": 0.98, "fig2b-nc-min": 0.95, "fig2-drift-low": 0.3, "fig2-drift-high": 0.5,
        "fig2a-mean-attn-max": 0.05, "fig2b-mean-attn-min": 0.45}


def test_v_node0_late_growth_is_counted_from_step_1500():
    steps = np.array([0, 1000, 1500, 2000])
    v_node0 = np.array([[0.0, 0.0], [1.0, 0.5], [1.2, 0.6], [1.5, 0.6]])
    np.testing.assert_allclose(v_node0_late_growth({"steps": steps, "v_node0": v_node0}), [0.3, 0.0], atol=1e-15)


def test_softmax_nc_by_concentration_is_the_toy_run_from_step_100():
    nc = softmax_nc_by_concentration((0.1,), seeds=(1,), record_every=20)
    run = toy_check("softmax", "identity", 1, concentration=0.1, record_every=20)
    assert nc.shape == (1, 1) and nc[0, 0] == run["nc"][5:].min()  # steps 0, 20, ..., 400: index 5 is step 100


def test_grid_readings_find_the_cells_the_page_names():
    conc, temps, steps = np.array([0.1, 1.0, 10.0, 100.0]), np.array([0.5, 1.0, 2.0]), np.array([0, 50, 100, 200])
    nc = np.ones((3, 4, 3, 4))
    soft = np.array([[0.5, 0.7, 0.8], [0.8, 0.85, 0.9], [0.93, 0.95, 0.96], [0.94, 0.92, 0.97]])
    nc[2, ..., 2:] = soft[..., None]
    nc[2, ..., :2] = -1.0  # before step 100: not read
    residual = np.full((3, 4, 3, 4), 1e-3)
    residual[2, ..., -1] = 0.5
    residual[2, 3, 1, -1] = 0.2
    grid = {"attentions": np.array(["linear", "exp", "softmax"]), "concentrations": conc, "temperatures": temps,
            "steps": steps, "nc": nc, "residual": residual}
    got = grid_readings(grid, sparse=0.1, similar=10.0, temperature=1.0)
    assert got == {"thm1-grid-exact-max": 1e-3, "thm1-grid-exact-nc-min": 1.0, "thm1-grid-nc-sparse": 0.7,
                   "thm1-grid-nc-similar": 0.92, "thm1-grid-nc-worst": 0.5, "thm1-grid-worst-concentration": 0.1,
                   "thm1-grid-worst-temperature": 0.5, "thm1-grid-t-low": 0.5, "thm1-grid-t-high": 2.0,
                   "thm1-grid-nc-sparse-hot": 0.8, "thm1-grid-nc-t-fall": pytest.approx(0.02),
                   "thm1-grid-softmax-res-min": 0.2}


def test_the_softmax_residual_splits_into_a_moving_mean_attention_and_the_factorisation():
    """softmax_residual_sources: its residual is the grid's (tau = 1, the theorem as stated), and summing the
    theorem's rate with the current mean attention b-bar(t) leaves a smaller, still O(1) residual."""
    grid = load_reference("c-thm1-grid")
    concentrations = (0.1, 1000.0)
    sources = softmax_residual_sources(concentrations)
    attention, temperature = list(grid["attentions"]).index("softmax"), list(grid["temperatures"]).index(1.0)
    columns = [list(grid["concentrations"]).index(c) for c in concentrations]
    np.testing.assert_allclose(sources["residual"], grid["residual"][attention, columns, temperature, -1], rtol=1e-6)
    assert np.all(sources["b_bar_drift"] > 0)
    assert np.all(sources["residual_moving"] < sources["residual"]) and np.all(sources["residual_moving"] > 0.1)
