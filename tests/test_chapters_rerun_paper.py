"""The pre-registered claims of the paper-scale re-run (joma_lib.chapters.rerun.paper): not-run until its data
exist, and able to fail on a run without the mechanism."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.kit.sweeps import paper_runs_waiting
from joma_lib.chapters.rerun import paper
from joma_lib.lm.presets import paper_sweep_configs
from joma_lib.base.io import InputUnavailableError
from joma_lib.kit.registry import online_claims
from joma_lib.kit.sweeps import PAPER_SO_FAR

STEPS = np.arange(0, 59_000, 1000)


def _sweep(entropy_shape, loss_of) -> dict[str, np.ndarray]:
    """A collected sweep of the 30 runs (3 seeds) whose every entropy curve is ``entropy_shape(steps, layer, lr)``
    and whose validation loss is ``loss_of(depth, lr)`` minus a small decrease over training."""
    cells = [(d, 1e-4) for d in paper.FIG6_DEPTHS] + [(5, lr) for lr in paper.FIG8_LRS if lr != 1e-4]
    runs = [(d, lr, s) for d, lr in cells for s in (1, 2, 3)]
    out = {"nlayers": np.array([r[0] for r in runs]), "lr": np.array([r[1] for r in runs]),
           "seed": np.array([r[2] for r in runs]), "minibatch": np.tile(STEPS, (len(runs), 1))}
    out["attn_entropy"] = np.full((len(runs), len(STEPS), 10), np.nan)
    out["val_loss"] = np.zeros((len(runs), len(STEPS)))
    for i, (d, lr, s) in enumerate(runs):
        for j in range(d):
            out["attn_entropy"][i, :, j] = entropy_shape(STEPS, j, lr) + 0.001 * s
        out["val_loss"][i] = loss_of(d, lr) + 0.3 * np.exp(-STEPS / 5000)
    return out


def _dip_and_bounce(steps, layer, lr):
    if lr >= 1e-3 and layer == 0:
        return 2.5 * np.exp(-steps / 1000)  # collapses to one token
    return 2.5 - 1.2 * np.exp(-((steps - 4000) / 3000) ** 2) - 0.5 * (steps < 4000) * steps / 4000


def _paper_like_loss(depth, lr):
    return 5.4 - 0.1 * np.log2(depth) + 0.3 * (np.log10(lr) + 4) ** 2


def _verdicts(data) -> dict[str, str]:
    return {c.claim_id: c.evaluate(data)[1] for c in paper.PAPER_CLAIMS}


def test_the_claims_hold_on_a_run_that_shows_the_papers_patterns():
    assert set(_verdicts(_sweep(_dip_and_bounce, _paper_like_loss)).values()) == {"holds"}


@pytest.mark.parametrize("shape, loss, failing", [
    # entropy that only falls: no rebound anywhere
    (lambda s, j, lr: 2.5 - s / 60_000, _paper_like_loss,
     {"fig6-paper-rerun-every-layer-dips-and-recovers", "fig6-paper-rerun-deep-upper-layers-recover",
      "fig8-paper-rerun-best-lr-dips-and-recovers", "fig8-paper-rerun-high-lr-collapse"}),
    # an untrained network: flat entropy, the same loss at every depth and learning rate
    (lambda s, j, lr: np.full(len(s), 2.632), lambda d, lr: 10.3,
     {c.claim_id for c in paper.PAPER_CLAIMS}),
    # the mechanism in the attention, but depth does not help and the best lr sits at an end of the range
    (_dip_and_bounce, lambda d, lr: 5.4 + 0.01 * d - 0.2 * np.log10(lr),
     {"fig6-paper-rerun-depth-lowers-loss", "fig8-paper-rerun-lr-u-shape", "fig8-paper-rerun-best-lr-is-fig6-rate",
      "fig8-paper-rerun-best-lr-dips-and-recovers"}),
    # a U over learning rate, the mechanism at its bottom, but the bottom at 5e-5 instead of Fig. 6's rate
    (_dip_and_bounce, lambda d, lr: 5.4 - 0.1 * np.log2(d) + 0.3 * (np.log10(lr) + 4.3) ** 2,
     {"fig8-paper-rerun-best-lr-is-fig6-rate"}),
])
def test_a_run_without_the_mechanism_fails_them(shape, loss, failing):
    verdicts = _verdicts(_sweep(shape, loss))
    assert {k for k, v in verdicts.items() if v == "fails"} == failing


def _without(data, drop) -> dict[str, np.ndarray]:
    return {k: v[~drop] for k, v in data.items()}


def test_a_hole_in_the_sweep_fails_the_claims_it_touches_and_is_not_skipped():
    # Python's min and max skip a NaN that does not come first; numpy's keep it: every case below held before
    good = _sweep(_dip_and_bounce, _paper_like_loss)
    top_lr = np.isclose(good["lr"], 1e-2)
    # the lr-1e-2 runs absent: every claim that reads them fails, the others still hold
    assert {k for k, v in _verdicts(_without(good, top_lr)).items() if v == "fails"} == {
        "fig8-paper-rerun-lr-u-shape", "fig8-paper-rerun-best-lr-is-fig6-rate",
        "fig8-paper-rerun-best-lr-dips-and-recovers", "fig8-paper-rerun-high-lr-collapse"}
    # layer 0 does not collapse at lr 1e-2, and one seed's last value there is missing
    loose = {k: v.copy() for k, v in good.items()}
    loose["attn_entropy"][top_lr, :, 0] = 2.5
    loose["attn_entropy"][np.flatnonzero(top_lr)[0], -1, 0] = np.nan
    assert _verdicts(loose)["fig8-paper-rerun-high-lr-collapse"] == "fails"
    # a loss that only falls with lr has no U, whether or not its best end is in the file
    falling = _sweep(_dip_and_bounce, lambda d, lr: 5.4 - 0.1 * np.log2(d) - 0.2 * (np.log10(lr) + 6))
    assert _verdicts(falling)["fig8-paper-rerun-lr-u-shape"] == "fails"
    assert _verdicts(_without(falling, np.isclose(falling["lr"], 1e-2)))["fig8-paper-rerun-lr-u-shape"] == "fails"
    # the 5-layer runs at lr 1e-4 only fall, and one of them is cut short after 30,000 steps (collect pads with NaN)
    cut = {k: v.copy() for k, v in good.items()}
    rows = np.flatnonzero((cut["nlayers"] == 5) & np.isclose(cut["lr"], 1e-4))
    cut["attn_entropy"][rows, :, :5] = (2.5 - STEPS / 60_000)[:, None]
    cut["attn_entropy"][rows[0], 31:] = cut["val_loss"][rows[0], 31:] = np.nan
    assert _verdicts(cut)["fig6-paper-rerun-every-layer-dips-and-recovers"] == "fails"


def test_the_claims_wait_for_every_run_of_the_sweep_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(paper, "PAPER_RESULTS", tmp_path / "rerun-paper.npz")
    good = _sweep(_dip_and_bounce, _paper_like_loss)
    assert paper.incomplete_runs(good) == []
    names = [c.name for c in paper_sweep_configs()]
    top_lr = np.isclose(good["lr"], 1e-2)
    cut = {k: v.copy() for k, v in good.items()}
    cut["val_loss"][0, -1] = np.nan  # the first run lost its last evaluation
    twice = {k: np.concatenate([v, v[:1]]) for k, v in good.items()}  # the first run is in the file twice
    short = {k: v[:, :-1] if k in ("minibatch", "val_loss", "attn_entropy") else v for k, v in good.items()}
    for data, missing in ((_without(good, top_lr), 3), (cut, 1), (twice, 1), (short, 30)):
        assert len(paper.incomplete_runs(data)) == missing
        assert set(paper.incomplete_runs(data)) <= set(names)
        np.savez(tmp_path / "rerun-paper.npz", **data)
        with pytest.raises(InputUnavailableError, match=f"holds {30 - missing} of the paper sweep's 30 runs whole"):
            paper.fetch_paper_rerun()


def test_they_are_in_the_ledger_as_claims_set_before_data_and_not_run_until_the_run_is_stored(
        tmp_path, monkeypatch):
    claims = {k: v for k, v in online_claims().items() if k.startswith(("fig6-paper-rerun", "fig8-paper-rerun"))}
    assert len(claims) == len(paper.PAPER_CLAIMS) == 7
    assert {(o.claim.threshold_set, o.page) for o in claims.values()} == {("before-data", "book/rerun.md")}
    # the paper's own claims, as on the WikiText page for the authors' runs: the upper layers of the 10-layer model
    # recover, depth lowers the loss, Fig. 8's best rate is Fig. 6's; the rest are our readings (companion checks)
    paper_kind = {"fig6-paper-rerun-deep-upper-layers-recover", "fig6-paper-rerun-depth-lowers-loss",
                  "fig8-paper-rerun-best-lr-is-fig6-rate"}
    assert {k for k, o in claims.items() if o.claim.kind == "paper"} == paper_kind
    assert {o.claim.kind for k, o in claims.items() if k not in paper_kind} == {"companion"}
    monkeypatch.setattr(paper, "PAPER_RESULTS", tmp_path / "rerun-paper.npz")
    done, total = paper.paper_runs_in()
    with pytest.raises(InputUnavailableError, match="rerun-paper.npz") as raised:
        paper.fetch_paper_rerun()
    # the reason says how many of the sweep's runs are in, and that the claims wait for all of them
    assert f"{done} of the paper sweep's {total} runs have finished" in str(raised.value)
    assert f"the claims are judged when all {total} are in" in str(raised.value)
    np.savez(tmp_path / "rerun-paper.npz", **_sweep(_dip_and_bounce, _paper_like_loss))
    assert paper.fetch_paper_rerun()["attn_entropy"].shape == (30, len(STEPS), 10)


def test_the_runs_so_far_give_each_depths_dips_and_best_loss():
    # a sweep with only the 1- and 2-layer runs: a dip of 0.5 to the minimum at step 20,000, then a rebound of 0.2
    full = _sweep(lambda t, j, lr: np.where(t <= 20_000, 2.5 - 0.5 * t / 20_000, 2.0 + 0.2 * (t - 20_000) / 38_000),
                  lambda d, lr: 5.0 - 0.1 * d)
    keep = full["nlayers"] <= 2
    rows = paper.so_far_rows({k: v[keep] for k, v in full.items()})
    assert [(r["layers"], r["lr"], r["seeds"]) for r in rows] == [(1, 1e-4, 3), (2, 1e-4, 3)]
    assert [len(r["dip_and_rebound"]) for r in rows] == [1, 2]
    assert np.allclose([x for r in rows for x in r["dip_and_rebound"]], 0.2)
    assert [r["best_val_loss"] for r in rows] == pytest.approx([4.9, 4.8])
    # a loss that keeps falling: best at the last checkpoint, and the final loss is the best
    assert [r["best_step"] for r in rows] == [58_000, 58_000]
    assert [r["final_val_loss"] for r in rows] == pytest.approx([r["best_val_loss"] for r in rows])


def test_the_runs_so_far_rows_show_over_fitting():
    # a loss that is best at step 27,000 and then rises by 0.1 to the end
    full = _sweep(lambda t, j, lr: 2.5 - 0.5 * np.sin(np.pi * t / 58_000), lambda d, lr: 5.0 - 0.1 * d)
    keep = full["nlayers"] <= 2
    data = {k: v[keep] for k, v in full.items()}
    data["val_loss"] = np.tile(5.0 + 0.1 * np.abs(STEPS - 27_000) / 31_000, (keep.sum(), 1))
    rows = paper.so_far_rows(data)
    assert [r["best_step"] for r in rows] == [27_000, 27_000]
    assert [r["best_val_loss"] for r in rows] == pytest.approx([5.0, 5.0])
    assert [r["final_val_loss"] for r in rows] == pytest.approx([5.1, 5.1])


def test_the_stored_runs_so_far_are_paper_scale_runs_of_the_sweep():
    """The committed runs so far are runs of the pre-registered sweep, whole: 58,000 steps, an evaluation every
    1,000."""
    with np.load(PAPER_SO_FAR) as npz:
        data = {k: npz[k] for k in npz.files}
    configs = {(c.n_layers, c.lr, c.seed) for c in paper_sweep_configs()}
    assert {(int(n), float(lr), int(s)) for n, lr, s in zip(data["nlayers"], data["lr"], data["seed"])} <= configs
    assert (data["minibatch"][:, -1] == 58_000).all() and (np.diff(data["minibatch"], axis=1) == 1000).all()
    assert np.isfinite(data["val_loss"]).all()


def test_the_runs_in_are_the_sweeps_runs_among_the_finished_ones(tmp_path):
    full = _sweep(_dip_and_bounce, _paper_like_loss)
    assert paper.paper_runs_in(tmp_path / "none.npz") == (0, 30)
    np.savez(tmp_path / "all.npz", **full)
    assert paper.paper_runs_in(tmp_path / "all.npz") == (30, 30)
    keep = (full["nlayers"] <= 2) | (full["lr"] == 1e-2)  # the 1- and 2-layer runs, and the 5-layer ones at lr 1e-2
    np.savez(tmp_path / "some.npz", **{k: v[keep] for k, v in full.items()})
    assert paper.paper_runs_in(tmp_path / "some.npz") == (9, 30)
    other = {k: v[keep].copy() for k, v in full.items()}
    other["seed"][:] = 7  # runs of another seed are no runs of the sweep
    np.savez(tmp_path / "other.npz", **other)
    assert paper.paper_runs_in(tmp_path / "other.npz") == (0, 30)


def test_the_runs_in_agree_with_the_runs_the_performance_page_plans():
    """The ledger's reason and the performance page count the same finished runs of the stored sweep so far."""
    done, total = paper.paper_runs_in()
    assert total == len(paper_sweep_configs())
    assert done == total - sum(paper_runs_waiting().values())


def test_the_claims_name_the_corpus_vocabulary_and_precision_of_the_stored_runs(tmp_path):
    """Every claim says what its runs trained on, read from the json beside the stored results: the stand-in and its
    capped vocabulary in bf16 for the runs so far, WikiText-2 with its whole vocabulary where a sweep trained there."""
    import json

    meta = json.loads(PAPER_SO_FAR.with_suffix(".json").read_text())
    assert {(c["data"], c["max_vocab"]) for c in meta["configs"]} == {("wikivital", 33_278)}
    assert paper.trained_setting((PAPER_SO_FAR,)) == (
        True, "the Wikipedia-leads stand-in, vocabulary capped at 33,278 words, bf16")
    standin, setting = paper.trained_setting()  # the whole sweep's results once they exist, else the runs so far
    assert paper.RERUN.endswith("on a stand-in corpus") == standin
    assert all(f"(on {setting}; the paper's model and schedule" in c.statement for c in paper.PAPER_CLAIMS)
    wt2 = {"configs": [dict(meta["configs"][0], data="wikitext2", max_vocab=None, precision="fp32")], "trained": []}
    (tmp_path / "wt2.json").write_text(json.dumps(wt2))
    assert paper.trained_setting((tmp_path / "none.npz", tmp_path / "wt2.npz")) == (
        False, "WikiText-2, its whole vocabulary, fp32")
    assert paper.trained_setting((tmp_path / "none.npz",))[0] is False


def _cell(data, depth, lr=1e-4) -> np.ndarray:
    return np.flatnonzero((data["nlayers"] == depth) & np.isclose(data["lr"], lr))


FALLS = 2.5 - STEPS / 60_000  # an entropy that only falls
RISES = 1.5 + STEPS / 60_000  # one that only rises: no dip before it
SHALLOW_REBOUND = np.where(STEPS <= 20_000, 2.5 - 1.2 * STEPS / 20_000, 1.3 + 0.1 * (STEPS - 20_000) / 38_000)


@pytest.mark.parametrize("upper, layers, verdict", [
    (FALLS, range(0, 3), "holds"),  # the lowest layers hardly bounce, as in the authors' 10-layer run
    (FALLS, [6], "fails"),  # one upper layer that does not recover is enough
    (RISES, range(3, 10), "fails"),  # rising from the start is no recovery
    (SHALLOW_REBOUND, range(3, 10), "fails"),  # a dip of 1.2 nats and a rebound of 0.1: the rebound is what counts
])
def test_the_deep_model_is_judged_on_each_of_its_upper_layers_rebound(upper, layers, verdict):
    data = _sweep(_dip_and_bounce, _paper_like_loss)
    for j in layers:
        data["attn_entropy"][_cell(data, 10), :, j] = upper
    verdicts = _verdicts(data)
    assert verdicts["fig6-paper-rerun-deep-upper-layers-recover"] == verdict
    assert verdicts["fig6-paper-rerun-every-layer-dips-and-recovers"] == "holds"  # it reads the 1-, 2-, 5-layer models


def test_the_best_loss_is_the_best_checkpoints_not_the_last():
    """The runs over-fit, as those so far do: the deeper models and the rate of Fig. 6 reach the lowest losses and
    then rise the most, so that at the last checkpoint the order is reversed. The claims read the best loss."""
    data = _sweep(_dip_and_bounce, _paper_like_loss)
    rising = np.clip((STEPS - 20_000) / 38_000, 0, None)  # from step 20,000 to the end
    for i, (depth, lr) in enumerate(zip(data["nlayers"], data["lr"], strict=True)):
        best = _paper_like_loss(depth, lr)
        data["val_loss"][i] = best + 0.3 * np.exp(-STEPS / 5000) + (14.0 - 2 * best) * rising  # ends at 14 - best
    final = data["val_loss"][[_cell(data, d)[0] for d in paper.FIG6_DEPTHS], -1]
    assert np.diff(final).min() > 0  # at the last checkpoint the deeper model is the worse
    verdicts = _verdicts(data)
    assert verdicts["fig6-paper-rerun-depth-lowers-loss"] == "holds"
    assert verdicts["fig8-paper-rerun-best-lr-is-fig6-rate"] == "holds"
    assert verdicts["fig8-paper-rerun-lr-u-shape"] == "holds"


@pytest.mark.parametrize("by_depth, verdict", [((5.4, 5.3, 5.2, 5.1), "holds"), ((5.4, 5.3, 5.2, 5.25), "fails")])
def test_every_added_depth_must_lower_the_best_loss(by_depth, verdict):
    loss = dict(zip(paper.FIG6_DEPTHS, by_depth, strict=True))
    data = _sweep(_dip_and_bounce, lambda d, lr: loss[d] + 0.3 * (np.log10(lr) + 4) ** 2)
    assert _verdicts(data)["fig6-paper-rerun-depth-lowers-loss"] == verdict


@pytest.mark.parametrize("low_end, high_end, verdict", [(0.5, 0.5, "holds"), (0.05, 1.0, "fails"),
                                                         (1.0, 0.05, "fails")])
def test_the_u_needs_both_ends_worse_than_the_bar(low_end, high_end, verdict):
    def loss(d, lr):
        worse = {1e-6: low_end, 1e-2: high_end}.get(lr, 0.3 * abs(np.log10(lr) + 4) / 3)
        return 5.4 - 0.1 * np.log2(d) + worse
    data = _sweep(_dip_and_bounce, loss)
    assert paper.lr_u_depth(data) == pytest.approx(min(low_end, high_end))
    assert _verdicts(data)["fig8-paper-rerun-lr-u-shape"] == verdict


@pytest.mark.parametrize("collapsed, verdict", [((1e-3, 1e-2), "holds"), ((1e-3,), "fails"), ((1e-2,), "fails")])
def test_layer_0_must_collapse_at_both_high_rates(collapsed, verdict):
    data = _sweep(_dip_and_bounce, _paper_like_loss)
    for lr in (1e-3, 1e-2):
        if lr not in collapsed:
            data["attn_entropy"][_cell(data, 5, lr), :, 0] = FALLS
    assert _verdicts(data)["fig8-paper-rerun-high-lr-collapse"] == verdict


def test_a_cells_curves_are_the_mean_of_its_seeds():
    data = _sweep(_dip_and_bounce, _paper_like_loss)
    rows = _cell(data, 5, 1e-3)
    data["attn_entropy"][rows, -1, 0] = [0.0, 0.0, 0.12]  # one seed of three collapses less: the mean is 0.04
    data["val_loss"][rows, -1] = [4.0, 5.0, 9.0]
    entropy, loss = paper.seed_mean(data, 5, 1e-3)
    assert entropy.shape == (len(STEPS), 5) and loss.shape == (len(STEPS),)
    assert entropy[-1, 0] == pytest.approx(0.04) and loss[-1] == pytest.approx(6.0)
    assert np.allclose(entropy[:-1], data["attn_entropy"][rows, :-1, :5].mean(axis=0))
    assert _verdicts(data)["fig8-paper-rerun-high-lr-collapse"] == "holds"


def test_a_run_is_whole_with_every_layer_of_its_depth_and_none_beyond():
    data = _sweep(_dip_and_bounce, _paper_like_loss)
    assert np.isnan(data["attn_entropy"][_cell(data, 2), :, 2:]).all()  # layers a model does not have
    assert paper.incomplete_runs(data) == []
    data["attn_entropy"][_cell(data, 2)[1], 30, 1] = np.nan  # its top layer's entropy lost at one checkpoint
    assert paper.incomplete_runs(data) == [c.name for c in paper_sweep_configs() if (c.n_layers, c.seed) == (2, 2)]
