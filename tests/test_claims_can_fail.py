"""A claim is evidence only if a plausible wrong output fails it.

Each test feeds one claim the committed reference data with one thing broken the way a wrong result would be
(a curve frozen at its minimum, weights that never moved, logits that never left their start, a flat entropy with a dip
inside the run, a control in place of the trained network) and checks the verdict turns to ``fails``. The
paper's Table 1 claims that cannot tell training from none are checked to hold on the untrained networks and on
the shuffled-label controls, which is what their ``blind`` note says.
"""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.kit import compute
from joma_lib.kit.harness import REFERENCE_DIR, load_reference
from joma_lib.kit.registry import Claim, FigureData, get_spec


def claim(fig_id: str, claim_id: str) -> Claim:
    return next(c for c in get_spec(fig_id).claims if c.claim_id == claim_id)


def verdict(fig_id: str, claim_id: str, data: FigureData) -> str:
    return claim(fig_id, claim_id).evaluate(data)[1]


def test_a_fig4_entropy_frozen_at_its_minimum_misses_the_limit():
    data = dict(load_reference("fig4"))
    assert verdict("fig4", "fig4-entropy-limit", data) == "holds"
    entropy = data["entropy"].copy()
    entropy[int(np.argmin(entropy)):] = entropy.min()
    assert verdict("fig4", "fig4-entropy-limit", {**data, "entropy": entropy}) == "fails"


def test_fig5_attention_that_never_spreads_back_or_never_got_sparse_is_not_sparse_then_dense():
    """The rise after the minimum, counted only after a drop of more than 1 nat: frozen at its minimum it has no
    rise; shrunk to a 0.9-nat drop it was never sparse, although it still rises by 0.59 nat."""
    data = dict(load_reference("fig5"))
    entropy = data["entropy"]
    value, held = claim("fig5", "fig5-sparse-then-dense").evaluate(data)
    assert held == "holds" and value == pytest.approx(entropy[-1] - entropy.min())
    frozen = entropy.copy()
    frozen[int(np.argmin(entropy)):] = entropy.min()
    assert verdict("fig5", "fig5-sparse-then-dense", {**data, "entropy": frozen}) == "fails"
    shallow = entropy[0] + (entropy - entropy[0]) * 0.9 / (entropy[0] - entropy.min())
    assert shallow[-1] - shallow.min() > 0.5
    assert verdict("fig5", "fig5-sparse-then-dense", {**data, "entropy": shallow}) == "fails"


def test_fig3_a_component_that_catches_up_or_keeps_growing_breaks_its_claims():
    """Component 0 must end largest by a factor 2, read at the last checkpoint: it fails where component 1 ends at
    0.6 of it, or where component 0 falls back at the very end; and the others must stop growing: it fails where
    component 1 climbs steadily over the last 500 steps."""
    data = dict(load_reference("fig3"))
    v_node0, steps = data["v_node0"], data["steps"]
    assert verdict("fig3", "fig3-salient-takes-all", data) == "holds"
    assert verdict("fig3", "fig3-others-saturate", data) == "holds"
    caught_up = v_node0.copy()
    caught_up[-1, 1] = 0.6 * v_node0[-1, 0]
    assert verdict("fig3", "fig3-salient-takes-all", {**data, "v_node0": caught_up}) == "fails"
    fell_back = v_node0.copy()
    fell_back[-1, 0] = 0.5 * np.abs(v_node0[-1, 1:]).max()
    assert verdict("fig3", "fig3-salient-takes-all", {**data, "v_node0": fell_back}) == "fails"
    growing = v_node0.copy()
    late = steps >= 1500
    growing[late, 1] += 0.1 * (steps[late] - 1500) / 500  # 0.1 more by the end: over 5 % of component 0's growth
    assert verdict("fig3", "fig3-others-saturate", {**data, "v_node0": growing}) == "fails"


def test_relu_weights_that_never_moved_do_not_settle_at_the_centres():
    data = dict(load_reference("c-thm3-relu"))
    assert verdict("c-thm3-relu", "thm3-relu-settles-at-centres", data) == "holds"
    cos = data["cos_relu"].copy()
    cos[:] = cos[0]  # every run stays at its start
    assert verdict("c-thm3-relu", "thm3-relu-settles-at-centres", {**data, "cos_relu": cos}) == "fails"


@pytest.mark.parametrize("claim_id", ["thm1-exp-invariant", "thm1-linear-invariant"])
def test_an_invariant_with_logits_that_never_moved_fails(claim_id):
    data = dict(load_reference("c-invariant-residual"))
    assert verdict("c-invariant-residual", claim_id, data) == "holds"
    frozen = {**data, "residual": np.zeros_like(data["residual"]), "max_z_move": np.zeros_like(data["max_z_move"])}
    assert verdict("c-invariant-residual", claim_id, frozen) == "fails"  # a zero residual for no reason


@pytest.mark.parametrize("figure", ["c-invariant-residual", "c-invariant-lr-ratio"])
def test_a_real_run_whose_logits_stay_at_their_start_fails_the_invariant_claims(figure):
    """At a learning rate of 1e-9 nothing moves and the residual is ~0. Linear attention starts at z = 1, so a guard
    on |z| itself (the figures' first version) let its claim hold for no reason; the move from the start does not."""
    data = compute(figure, lr=1e-9, steps=100, phis=("identity",))
    exact = [list(data["attentions"]).index(kind) for kind in ("linear", "exp")]
    assert data["max_z_move"].max() < 1e-6 and data["residual"][exact].max() < 1e-3  # the residual alone would pass
    for paper_claim in (c for c in get_spec(figure).claims if c.kind == "paper"):
        assert paper_claim.evaluate(data)[1] == "fails", paper_claim.claim_id


def test_a_flat_quick_rerun_entropy_with_a_dip_inside_fails():
    data = dict(load_reference("c-rerun-quick"))
    assert verdict("c-rerun-quick", "fig6-rerun-bounce-quick", data) == "holds"
    with np.load(REFERENCE_DIR / "c-rerun-quick.fp32.npz") as fp32:  # the reference of CPUs that train in fp32
        assert verdict("c-rerun-quick", "fig6-rerun-bounce-quick", dict(fp32)) == "holds"
    entropy = np.full_like(data["attn_entropy"], 3.0)
    entropy[:, entropy.shape[1] // 2, :] -= 0.01  # a dip below the bar, inside the run
    assert verdict("c-rerun-quick", "fig6-rerun-bounce-quick", {**data, "attn_entropy": entropy}) == "fails"


def test_the_quick_rerun_bounce_is_blind_to_a_flat_curve_with_the_runs_own_scatter():
    """A drop at the first checkpoint, then flat with the scatter of the run's last seven checkpoints: the claim
    holds on a good share of such curves, so it is marked blind and counts for nothing."""
    data = dict(load_reference("c-rerun-quick"))
    entropy = data["attn_entropy"]
    scatter = float(np.nanmean(np.nanstd(entropy[:, -7:, :], axis=1, ddof=1)))
    assert 0.03 < scatter < 0.1
    rng = np.random.default_rng(0)
    flat = np.where(np.isnan(entropy), np.nan, 2.0)
    flat[:, 0] = np.where(np.isnan(entropy[:, 0]), np.nan, 3.0)
    held = [verdict("c-rerun-quick", "fig6-rerun-bounce-quick",
                    {**data, "attn_entropy": flat + scatter * rng.standard_normal(flat.shape)}) == "holds"
            for _ in range(200)]
    assert np.mean(held) > 0.3
    assert claim("c-rerun-quick", "fig6-rerun-bounce-quick").blind


def _as_trained(data: FigureData, kind: str) -> FigureData:
    """Table 1's data with the ``kind`` networks (``init``, ``control``) in place of the trained ones."""
    return {**data, "trained": data[kind], "trained_mean": data[f"{kind}_mean"], "trained_std": data[f"{kind}_std"]}


@pytest.mark.parametrize("claim_id", ["table1-layer0-aligned", "table1-layer0-above-layer1"])
@pytest.mark.parametrize("kind", ["init", "control"])
def test_the_blind_table1_claims_hold_without_training(claim_id, kind):
    data = load_reference("table1")
    assert claim("table1", claim_id).blind  # the paper's reading (aligned) and ours (above layer 1)
    assert verdict("table1", claim_id, _as_trained(data, kind)) == "holds"


def test_table1_learning_fails_when_the_control_stands_in_for_training():
    data = load_reference("table1")
    assert verdict("table1", "table1-layer0-learns", _as_trained(data, "control")) == "fails"  # margin 0 < 2 SDs


def test_a_linear_node_does_not_rest_near_the_centres_with_weight_decay():
    """The portrait's claim counts end points on a centre: the linear node's end points (one direction for every
    start, as Theorem 3 says of a linear update) in place of the ReLU node's fail it."""
    data = dict(load_reference("c-thm3-portrait"))
    assert verdict("c-thm3-portrait", "thm3-decay-rests-near-centres", data) == "holds"
    ends, centres = data["final_linear"], data["centres"]
    cos = (ends @ centres.T) / np.outer(np.linalg.norm(ends, axis=1), np.linalg.norm(centres, axis=1))
    assert verdict("c-thm3-portrait", "thm3-decay-rests-near-centres", {**data, "cos_relu": cos.max(axis=1)}) == "fails"


def test_cooccurrence_claims_fail_on_a_nan_in_a_later_tree_and_on_a_flat_curve():
    """Which heights a tree has comes from H <= L, not from the NaNs of the data under test, and a NaN in any tree (not
    only the first) reaches the verdict; the 1 - H/L claim bounds the size of its error, so a flat 1/2 fails it."""
    data = dict(load_reference("c-cooccurrence"))
    ids = [c.claim_id for c in get_spec("c-cooccurrence").claims]
    assert [verdict("c-cooccurrence", i, data) for i in ids] == ["holds"] * 4
    exact, sampled = data["exact"].copy(), data["monte_carlo"].copy()
    exact[1:, 2] = np.nan  # a value that should be there, in every tree but the first
    assert [verdict("c-cooccurrence", i, {**data, "exact": exact}) for i in ids] == ["fails"] * 4
    sampled[1:, 2] = np.nan
    assert verdict("c-cooccurrence", "thm5-monte-carlo", {**data, "monte_carlo": sampled}) == "fails"
    flat = np.where(data["H"][None, :] <= data["tree_heights"][:, None], 0.5, np.nan)
    assert verdict("c-cooccurrence", "thm5-one-minus-h-over-l", {**data, "exact": flat}) == "fails"
