"""Claims of the theory chapters (Theorems 1-4, Figs. 2-4, the explorer) that held on outputs where the mechanism did
not happen: runs that never moved, a component left behind, a dead node, the wrong token winning. Each test builds
such an output (a real run at a tiny learning rate, or one array of the committed reference altered) and checks that
the claim fails, and that the unaltered reference still gives the book's verdict."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.kit import compute
from joma_lib.kit.harness import load_reference
from joma_lib.kit.registry import FigureData, get_claim, get_spec


def verdict(fig_id: str, claim_id: str, data: FigureData) -> str:
    return next(c for c in get_spec(fig_id).claims if c.claim_id == claim_id).evaluate(data)[1]


@pytest.mark.parametrize("fig_id, claim_id", [("fig2a", "thm1-softmax-nc-gaussian"),
                                              ("fig2b", "thm1-softmax-nc-random")])
def test_logits_that_never_moved_do_not_confirm_the_softmax_invariant(fig_id, claim_id):
    """At lr 1e-9 nothing moves: the prediction equals the logits, NC 1 (it held before the move guard)."""
    assert verdict(fig_id, claim_id, load_reference(fig_id)) == "holds"
    frozen = compute(fig_id, lr=1e-9, steps=200)
    assert frozen["z_move"].max() < 1e-6 and frozen["nc_full"][:, -1].min() > 0.99
    assert verdict(fig_id, claim_id, frozen) == "fails"


def test_a_largest_target_left_behind_is_an_order_violation():
    data = load_reference("fig4")
    assert verdict("fig4", "fig4-salient-first", data) == "holds"
    for frozen in (1, 2):  # the largest target(s) never move from their start
        v = data["v_snapshots"].copy()
        v[:, -frozen:] = v[0, -frozen:]
        assert verdict("fig4", "fig4-salient-first", {**data, "v_snapshots": v}) == "fails"


def test_order_violations_count_the_first_steps_at_90_percent_of_each_target():
    """Six targets, each component at half its target until its own step, then at 95 % of it: reached in order of
    size, no violation; in the reverse order, one per neighbouring pair."""
    mu, steps = np.arange(1.0, 7.0), np.arange(6)
    claim = get_claim("fig4-salient-first")
    for reach_at, violations in ((steps[::-1], 0.0), (steps, 5.0)):
        v = np.where(steps[:, None] >= reach_at[None, :], 0.95, 0.5) * mu  # [snapshot, component]
        assert claim.evaluate({"mu": mu, "v_snapshots": v, "snapshot_steps": steps})[0] == violations


def test_a_theorem2_integration_stuck_at_zero_conserves_nothing():
    data = load_reference("c-thm2-closed-form")
    assert verdict("c-thm2-closed-form", "thm2-conserved-ratio", data) == "holds"
    stuck = {**data, "ratio_sqrt2": np.zeros_like(data["ratio_sqrt2"])}
    assert verdict("c-thm2-closed-form", "thm2-conserved-ratio", stuck) == "fails"


def test_the_most_salient_token_must_diverge_for_the_finite_limits():
    data = load_reference("c-thm2-closed-form")
    assert verdict("c-thm2-closed-form", "thm2-finite-limits", data) == "holds"
    v = data["v_closed"].copy()
    v[:, int(np.argmax(np.abs(data["saliency"])))] = 0.0  # the most salient token frozen at its start
    assert verdict("c-thm2-closed-form", "thm2-finite-limits", {**data, "v_closed": v}) == "fails"


def test_the_linear_contrast_must_fall_and_the_most_salient_token_must_win():
    data = load_reference("c-fig4-variants")
    assert verdict("c-fig4-variants", "thm2-linear-entropy-monotone", data) == "holds"
    assert verdict("c-fig4-variants", "thm2-linear-sparse", data) == "holds"
    flat = {**data, "linear_entropy": np.full_like(data["linear_entropy"], np.log(10))}  # frozen at uniform
    assert verdict("c-fig4-variants", "thm2-linear-entropy-monotone", flat) == "fails"
    swapped = data["linear_v"][:, ::-1].copy()  # the least salient token ends on top, with the same entropy
    assert verdict("c-fig4-variants", "thm2-linear-sparse", {**data, "linear_v": swapped}) == "fails"


def test_the_explorer_grid_must_be_won_by_the_most_salient_token():
    data = load_reference("c-explorer-grid")
    assert verdict("c-explorer-grid", "explore-linear-sparse-everywhere", data) == "holds"
    v = data["v"].copy()
    v[0, 0, 0, -1] = v[0, 0, 0, -1, ::-1]  # one linear run (first spread, first temperature): the wrong token wins
    assert verdict("c-explorer-grid", "explore-linear-sparse-everywhere", {**data, "v": v}) == "fails"


def test_a_dead_node_is_no_stable_mixed_resting_point():
    """A bias of -0.9 closes the node's gates: it decays to 0, where the Jacobian is -lambda I (it held before)."""
    assert verdict("c-thm3-portrait", "thm3-decay-mixed-rest-stable", load_reference("c-thm3-portrait")) == "holds"
    dead = compute("c-thm3-portrait", bias=-0.9, n_grid=5)
    assert np.linalg.norm(dead["mixed_rest"]) < 1e-6 and dead["mixed_eigenvalues"].max() < 0
    assert verdict("c-thm3-portrait", "thm3-decay-mixed-rest-stable", dead) == "fails"
    centre = {**load_reference("c-thm3-portrait")}
    centre["mixed_rest"] = 1.3 * centre["centres"][0]  # resting on a centre is not mixed either
    assert verdict("c-thm3-portrait", "thm3-decay-mixed-rest-stable", centre) == "fails"


def test_linear_runs_ending_on_different_centres_are_not_one_direction():
    """Each end point exactly on a centre has cosine 1 with its nearest centre: the old spread of cosines was 0."""
    data = load_reference("c-thm3-relu")
    assert verdict("c-thm3-relu", "thm3-linear-single-direction", data) == "holds"
    traj = data["traj_linear"].copy()
    centres = data["centres"] / np.linalg.norm(data["centres"], axis=1, keepdims=True)
    traj[-1] = centres[1 + np.arange(traj.shape[1]) % 2]
    cos = data["cos_linear"].copy()
    cos[-1] = 1.0
    assert verdict("c-thm3-relu", "thm3-linear-single-direction",
                   {**data, "traj_linear": traj, "cos_linear": cos}) == "fails"


def test_an_entropy_that_only_falls_is_not_sparse_then_dense():
    """Fig. 4's drop counts only down to an interior minimum: a curve falling by as much, but to its last point,
    has neither the dip nor the rise."""
    data = load_reference("fig4")
    falling = np.linspace(data["entropy"][0], data["entropy"].min(), data["entropy"].size)
    for claim_id in ("fig4-sparse", "fig4-sparse-then-dense"):
        assert verdict("fig4", claim_id, data) == "holds"
        assert verdict("fig4", claim_id, {**data, "entropy": falling}) == "fails"


def test_too_few_targets_reached_leave_no_order_to_judge():
    """Only the two largest of six targets reach 90 %, in order: no violation among them, but no verdict either."""
    mu, steps = np.arange(1.0, 7.0), np.arange(6)
    v = np.full((steps.size, mu.size), 0.5) * mu
    v[1:, 4], v[:, 5] = 0.95 * mu[4], 0.95 * mu[5]
    assert get_claim("fig4-salient-first").evaluate({"mu": mu, "v_snapshots": v, "snapshot_steps": steps})[1] == "fails"


def test_the_linear_entropy_may_not_rise_at_any_step_after_the_first_nor_end_high():
    data = load_reference("c-fig4-variants")
    rise = data["linear_entropy"].copy()
    rise[2] = rise[1] + 1e-6  # one small rise, at the second step
    assert verdict("c-fig4-variants", "thm2-linear-entropy-monotone", {**data, "linear_entropy": rise}) == "fails"
    late = data["linear_entropy"].copy()
    late[-1] = 1.0  # down to 0, then up again at the end: the final entropy is what counts
    assert verdict("c-fig4-variants", "thm2-linear-sparse", {**data, "linear_entropy": late}) == "fails"


def test_every_rate_ratio_is_judged_at_the_last_time():
    data = load_reference("c-thm4-rates")
    assert verdict("c-thm4-rates", "thm4-rate-ratio", data) == "holds"
    ratios = data["ratios"].copy()
    ratios[-1, 0] *= 1.01  # the first pair's ratio 1 % off its limit at t = 200, the second pair's as it was
    assert verdict("c-thm4-rates", "thm4-rate-ratio", {**data, "ratios": ratios}) == "fails"


@pytest.mark.parametrize("claim_id, i", [("thm1-linear-invariant", 0), ("thm1-exp-invariant", 1)])
def test_the_invariant_is_judged_on_every_activation_at_every_time_of_the_larger_rate(claim_id, i):
    """A residual of 0.1 at one time inside the run, for one activation other than the first, at lr 0.1 fails the
    claim; so does a run of one activation in which no logit moved."""
    data = load_reference("c-invariant-residual")
    assert verdict("c-invariant-residual", claim_id, data) == "holds"
    residual = data["residual"].copy()
    residual[i, 2, 0, residual.shape[-1] // 2] = 0.1
    assert verdict("c-invariant-residual", claim_id, {**data, "residual": residual}) == "fails"
    still = data["max_z_move"].copy()
    still[i, 3] = 0.1
    assert verdict("c-invariant-residual", claim_id, {**data, "max_z_move": still}) == "fails"


def test_every_learning_rate_ratio_counts_and_every_run_must_move():
    data = load_reference("c-invariant-lr-ratio")
    assert verdict("c-invariant-lr-ratio", "thm1-any-lr-ratio", data) == "holds"
    residual = data["residual"].copy()
    residual[1, 2, 5] = 0.05  # one ratio, one activation, exp attention
    assert verdict("c-invariant-lr-ratio", "thm1-any-lr-ratio", {**data, "residual": residual}) == "fails"
    still = data["max_z_move"].copy()
    still[0, 1, 0] = 0.1  # one run in which no logit moved
    assert verdict("c-invariant-lr-ratio", "thm1-any-lr-ratio", {**data, "max_z_move": still}) == "fails"


def test_theorem2_closed_form_and_conserved_ratio_are_judged_at_every_time_after_0():
    """One token off by 3e-5 (relative) at one time, the first after 0 for the ratio, mid-run for the integration:
    each claim fails (a mean over times, or the last time alone, would let it pass)."""
    data = load_reference("c-thm2-closed-form")
    ratio, v_ode = data["ratio_sqrt2"].copy(), data["v_ode"].copy()
    ratio[1, 2] *= 1 + 3e-5
    v_ode[v_ode.shape[0] // 2, 2] *= 1 + 3e-5
    assert verdict("c-thm2-closed-form", "thm2-conserved-ratio", {**data, "ratio_sqrt2": ratio}) == "fails"
    assert verdict("c-thm2-closed-form", "thm2-closed-form", data) == "holds"
    assert verdict("c-thm2-closed-form", "thm2-closed-form", {**data, "v_ode": v_ode}) == "fails"


def test_the_most_salient_token_by_size_must_take_the_attention_and_keep_it():
    data = load_reference("c-thm2-saliency")
    claim = "thm2-most-salient-takes-all"
    assert verdict("c-thm2-saliency", claim, data) == "holds"
    # every saliency and v negated: the attention (P[l|m] e^{v^2/2}) is the same, the winner is the largest |saliency|
    assert verdict("c-thm2-saliency", claim, {**data, "saliency": -data["saliency"], "v": -data["v"]}) == "holds"
    other = data["attention"].copy()
    other[-1] = other[-1, ::-1]  # another token ends on top
    assert verdict("c-thm2-saliency", claim, {**data, "attention": other}) == "fails"
    back = data["entropy"].copy()
    back[-1] = 0.5 * back[0]  # sparse on the way, dense again at the end
    assert verdict("c-thm2-saliency", claim, {**data, "entropy": back}) == "fails"


def test_fig2_needs_every_seeds_logits_to_move():
    data = load_reference("fig2a")
    still = data["z_move"].copy()
    still[1] = 0.1  # the second seed's logits never moved: its NC of 1 says nothing
    assert verdict("fig2a", "thm1-softmax-nc-gaussian", {**data, "z_move": still}) == "fails"


def test_fig3_compares_sizes_and_growth_whatever_their_sign():
    """Component 0 must end largest in absolute value, and grow late by more than any other changes, up or down."""
    data = load_reference("fig3")
    assert verdict("fig3", "fig3-salient-takes-all", data) == "holds"
    assert verdict("fig3", "fig3-others-saturate", data) == "holds"
    late = data["steps"] >= 1500
    for component, end in ((1, -3.0), (0, -3.0)):  # another component ends at -3; component 0 ends at -3
        v = data["v_node0"].copy()
        v[-1, component] = end
        assert verdict("fig3", "fig3-salient-takes-all", {**data, "v_node0": v}) == "fails", (component, end)
    grown = data["v_node0"][late, 0][-1] - data["v_node0"][late, 0][0]
    for component, change in ((0, -2 * grown), (2, -0.5)):  # component 0 shrinks late; component 2 falls late
        v = data["v_node0"].copy()
        v[late, component] += np.linspace(0.0, change, int(late.sum()))
        assert verdict("fig3", "fig3-others-saturate", {**data, "v_node0": v}) == "fails", (component, change)


def test_the_explorer_grid_is_judged_on_its_densest_linear_run():
    """One linear run of the grid (not the first spread) that keeps 0.01 nats of entropy at the end fails the claim,
    though every other run ends at 0."""
    data = load_reference("c-explorer-grid")
    entropy = data["entropy"].copy()
    entropy[0, 3, 2, -1] = 0.01
    assert verdict("c-explorer-grid", "explore-linear-sparse-everywhere", {**data, "entropy": entropy}) == "fails"


def test_relu_weights_must_end_at_a_centre_not_pass_one():
    """Runs that come within cosine 0.995 of a centre mid-run and end at 0.95 have not settled there: with only two
    runs ending above 0.99 the claim fails."""
    data = load_reference("c-thm3-relu")
    assert verdict("c-thm3-relu", "thm3-relu-settles-at-centres", data) == "holds"
    cos = data["cos_relu"].copy()
    cos[cos.shape[0] // 2] = 0.995
    cos[-1] = 0.95
    cos[-1, :2] = 0.995
    assert verdict("c-thm3-relu", "thm3-relu-settles-at-centres", {**data, "cos_relu": cos}) == "fails"
