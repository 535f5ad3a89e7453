"""The re-run chapter (joma_lib.chapters.rerun): the measures its claims evaluate, on curves with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.chapters.rerun.figures import entropy_bounce, make_adam_reset, smallest_bounce, srank_drop, srank_rebound
from joma_lib.kit import get_claim
from joma_lib.kit.sweeps import entropy_panels


@pytest.mark.parametrize("curve, bounce", [
    ([3.0, 1.0, 2.5], 1.5),        # an interior minimum: the rise after it
    ([3.0, 2.0, 1.0], 0.0),        # still falling at the end: no bounce
    ([1.0, 2.0, 3.0], 0.0),        # the minimum at the start: no bounce
])
def test_entropy_bounce(curve, bounce):
    assert entropy_bounce(np.array(curve)) == pytest.approx(bounce)


def test_smallest_bounce_over_every_layer_of_every_depth(toy_runs):
    # seed-mean entropies: 1 layer [2, 1.1, 1.4, 1.7] (0.6); 2 layers [2, 1.5, 1.4, 1.6] (0.2), [2.1, 1.9, 2, 2] (0.1)
    data = entropy_panels(toy_runs(), [(1, 1e-3), (2, 1e-3)], source="toy")
    assert smallest_bounce(data) == pytest.approx(0.1)
    data["attn_entropy"][1, -1, 1] = 1.0  # the top layer's minimum moves to the last checkpoint
    assert np.isnan(smallest_bounce(data))
    data["attn_entropy"][1, -1, 1] = 2.0
    data["attn_entropy"][1, 1, 1] = np.nan  # a value missing inside the run, in a later panel than the first
    assert np.isnan(smallest_bounce(data))


def test_stable_rank_drop_and_rebound_use_only_each_depths_layers():
    srank = np.full((2, 3, 2), np.nan)  # [depth panel, checkpoint, layer]; the 1-layer panel's second is NaN
    srank[0, :, 0] = [4.0, 2.0, 3.0]  # drop to 0.5 of the start, rebound 1/2 of the drop
    srank[1, :, 0] = [5.0, 1.0, 4.0]  # 0.2, 3/4
    srank[1, :, 1] = [2.0, 1.5, 1.6]  # 0.75, 1/5
    data = {"nlayers": np.array([1, 2]), "stable_rank": srank}
    assert srank_drop(data) == pytest.approx(0.75)  # the shallowest drop
    assert srank_rebound(data) == pytest.approx(0.2)  # the weakest rebound
    data["stable_rank"][0, :, 0] = [4.0, 2.0, 2.1]
    assert srank_rebound(data) == pytest.approx(0.05)  # now the first panel's
    data["stable_rank"][0, :, 0] = [4.0, 2.0, 3.0]
    data["stable_rank"][1, :, 1] = [2.0, 1.9, 2.5]  # a dip of 5 % then a rise: no drop, so no bounce
    assert srank_rebound(data) == 0.0
    data["stable_rank"][1, 1, 1] = np.nan  # a value missing, in a later panel than the first: no verdict
    assert np.isnan(srank_drop(data)) and np.isnan(srank_rebound(data))


def test_the_standin_corpus_sizes_are_those_the_runs_read():
    """The page's corpus size and epoch length: one epoch is the first Adam reset of the stored no-reset run."""
    from joma_lib.chapters.rerun import corpus_size
    from joma_lib.kit import harness

    sizes = corpus_size("wikivital")
    per_stream = sizes["train_tokens"] // 20
    assert sizes["train_tokens"] == 20 * per_stream and sizes["epoch_steps"] == -(-(per_stream - 1) // 35)
    assert sizes["vocab"] > 33_278  # the paper-scale runs cut it to WikiText-2's standard vocabulary size
    reset = harness.load_reference("c-rerun-adam-reset")
    assert int(reset["epoch_boundaries"][0]) == sizes["epoch_steps"]


def test_deeper_lower_loss_is_the_largest_rise_from_one_depth_to_the_next():
    """The stored run has two depths; with more, every deeper model must reach a lower loss than the one before."""
    measure = get_claim("fig6-rerun-deeper-lower-loss").measure
    assert measure({"min_val_loss": np.array([5.0, 4.8])}) == pytest.approx(-0.2)
    assert measure({"min_val_loss": np.array([5.0, 4.8, 4.9])}) == pytest.approx(0.1)
    assert np.isnan(measure({"min_val_loss": np.array([5.0, 4.8, np.nan])}))  # the deepest model lost


def test_the_adam_reset_bounce_is_the_seed_means_and_the_claim_reads_the_run_without_resets():
    data = make_adam_reset()
    for key in ("reset", "noreset"):
        assert data[f"bounce_{key}"] == pytest.approx(entropy_bounce(data[f"entropy_{key}"].mean(axis=0)))
    claim = get_claim("fig6-bounce-without-adam-reset")
    assert claim.evaluate({**data, "bounce_reset": np.array(0.0)})[1] == "holds"
    assert claim.evaluate({**data, "bounce_noreset": np.array(0.0)})[1] == "fails"
