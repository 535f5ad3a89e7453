"""joma_lib.chapters.table1: the Table 1 page's configuration line, its table, and the claims' measures."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from joma_lib.chapters.table1 import config_text, level_specificity, reference_claims, table1_markdown
from joma_lib.chapters.table1.table1 import (change_alignment_margin, layer0_init_margin, layer0_learning_margin,
                                             level_specificity_sd)
from joma_lib.kit.claims import format_value, ledger
from joma_lib.kit.harness import load_reference


def test_a_configuration_is_named_with_its_widths_training_and_seeds():
    assert config_text("quick") == "quick (model width 32 / MLP width 128, 300 steps x 32, lr 0.003, seeds 1-3)"
    assert config_text("full").startswith("full (model width 1024 / MLP width 400, 10,000 steps x 128, lr 0.0001")
    with pytest.raises(ValueError, match="config"):
        config_text("huge")


def test_the_table_has_one_row_per_setting_in_the_papers_layout():
    data = load_reference("table1")
    lines = table1_markdown(data).splitlines()
    assert len(lines) == 2 + data["trained_mean"].shape[0] and lines[0].startswith("| p | level sizes |")
    assert f"{data['trained_mean'][0, 0, 0]:.3f} ± {data['trained_std'][0, 0, 0]:.3f}" in lines[2]


def test_level_specificity_in_seed_deviations_has_the_sign_of_the_raw_margin():
    data = load_reference("table1")
    assert np.sign(level_specificity_sd(data)) == np.sign(level_specificity(data))
    diagonal = dict(data)
    trained = data["trained"].copy()
    for k in (0, 1):
        trained[:, :, k, k] = trained[:, :, :, k].max(axis=2) + 0.1  # layer k made the best for level k
    diagonal["trained"], diagonal["trained_mean"] = trained, trained.mean(axis=1)
    assert level_specificity(diagonal) > 0 and level_specificity_sd(diagonal) > 2


def test_the_reference_values_the_page_quotes_are_the_ledgers():
    # the ledger reads a trained figure's committed reference, so the page's reference values must be its rows
    rows = ledger(["table1"], load=load_reference)
    assert reference_claims() == {row.claim_id: (format_value(row.value), row.verdict) for row in rows}
    assert all(row.verdict == row.book_says for row in rows)  # the page says both runs give the book's verdicts


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """A synthetic stored run of the full configuration, read back for the paper-scale claims, and its file: at
    initialisation and on shuffled labels the diagonal scores sit near 0.5, trained near 0.9, seed noise 0.02."""
    from joma_lib.chapters.table1.table1_paper import make_table1_paper
    from joma_lib.theory.table1.runs import CONFIGS, Table1Result, save_result

    config, path = CONFIGS["full"], tmp_path_factory.mktemp("paper") / "run.npz"
    rng = np.random.default_rng(0)
    shape = (len(config.settings), len(config.seeds), config.n_layers, 3)
    trained, init, control = (mean + 0.02 * rng.standard_normal(shape) for mean in (0.9, 0.5, 0.5))
    losses = np.ones(shape[:2])
    save_result(Table1Result(config.settings, config.seeds, trained, init, control, losses, losses, init, control),
                path, config)
    return make_table1_paper(str(path)), path


@pytest.mark.parametrize("trained_like", ["right", "init", "control"])
def test_paper_scale_claims_tell_a_trained_network_from_its_controls(trained_like, paper_run) -> None:
    from joma_lib.chapters.table1.table1_paper import PAPER_CLAIMS

    data = paper_run[0] if trained_like == "right" else dict(paper_run[0], trained=paper_run[0][trained_like])
    verdicts = {claim.claim_id: claim.evaluate(data)[1] for claim in PAPER_CLAIMS}
    assert len(verdicts) == 4
    # an untrained network, or one trained on shuffled labels, scores like both controls: every claim fails
    assert set(verdicts.values()) == {"holds" if trained_like == "right" else "fails"}, verdicts


def test_a_network_that_learned_nothing_fails_the_paper_scale_claims_when_the_control_sinks(paper_run) -> None:
    """Shuffled labels can lower the score below initialisation (they do in our smaller runs): the untrained scores
    in place of the trained ones then clear the control by far, and the claims above the control still fail."""
    from joma_lib.chapters.table1.table1_paper import PAPER_CLAIMS

    data = dict(paper_run[0])
    data["control"] = data["init"] - 0.1
    verdicts = {claim.claim_id: claim.evaluate(data)[1] for claim in PAPER_CLAIMS}
    assert set(verdicts.values()) == {"holds"}, verdicts
    nothing_learned = {claim.claim_id: claim.evaluate(dict(data, trained=data["init"])) for claim in PAPER_CLAIMS}
    assert all(value <= 0.0 for value, _ in nothing_learned.values()), nothing_learned  # none above itself
    assert {verdict for _, verdict in nothing_learned.values()} == {"fails"}, nothing_learned


def test_paper_scale_claims_wait_for_the_run_and_refuse_another_configuration(paper_run, tmp_path) -> None:
    import json
    import shutil

    from joma_lib.chapters.table1.table1_paper import WAITING, make_table1_paper
    from joma_lib.base.io import InputUnavailableError
    from joma_lib.kit.registry import online_claims

    waiting = {k: v for k, v in online_claims().items() if k.startswith("table1-paper-")}
    assert len(waiting) == 4 and all(o.claim.kind == "paper" and o.claim.threshold_set == "before-data"
                                     for o in waiting.values())
    with pytest.raises(InputUnavailableError, match=re.escape(WAITING)):
        make_table1_paper(str(tmp_path / "missing.npz"))
    assert str(paper_run[0]["precision"]) == "fp32"
    shutil.copy(paper_run[1], tmp_path / "run.npz")
    manifest = json.loads(paper_run[1].with_suffix(".json").read_text())
    for change, accepted in (({"precision": "bf16"}, True), ({"precision": "tf32"}, True),
                             ({"precision": "fp16"}, False), ({"d_model": 32}, False)):
        (tmp_path / "run.json").write_text(json.dumps({"config": {**manifest["config"], **change}}))
        if accepted:
            assert str(make_table1_paper(str(tmp_path / "run.npz"))["precision"]) == change["precision"]
        else:
            with pytest.raises(ValueError, match="not made with the full configuration"):
                make_table1_paper(str(tmp_path / "run.npz"))


def test_the_layer0_margins_read_layer_0_at_level_0():
    """Each margin compares one entry of the score tables, layer 0's score of level 0, between the trained networks
    and their control (shuffled labels, initialisation, the shuffled-label change): an advantage placed there shows,
    the same advantage at another layer or level does not."""
    rng = np.random.default_rng(0)
    control = rng.normal(0.5, 0.01, load_reference("table1")["trained"].shape)  # [setting, seed, layer, level]
    control[:, :, 1:] -= 0.5  # every other entry 0.5 lower, so that reading it in either table shows
    control[:, :, 0, 1:] -= 0.5
    measures = ((layer0_learning_margin, "trained", "control"), (layer0_init_margin, "trained", "init"),
                (change_alignment_margin, "change", "change_control"))
    for layer, level in ((0, 0), (0, 1), (1, 0)):
        real = control.copy()
        real[:, :, layer, level] += 1.0  # 100 seed standard deviations
        for measure, real_key, control_key in measures:
            margin = measure({real_key: real, control_key: control})
            assert (margin > 10) == ((layer, level) == (0, 0)), (measure.__name__, layer, level, margin)


def test_the_paper_scale_margins_read_layer_i_at_level_i_in_both_tables(paper_run):
    """Each paper-scale claim compares layer i's score of level i, trained against untrained or control, and only
    that entry: the diagonal entries and the rest of the tables all differ, so reading another entry in either table
    gives another verdict."""
    from joma_lib.chapters.table1.table1_paper import PAPER_CLAIMS

    rng = np.random.default_rng(1)
    base = np.full(paper_run[0]["init"].shape, 0.1)  # [setting, seed, layer, level]
    base[:, :, 0, 0], base[:, :, 1, 1] = 0.3, 0.6
    diagonal = np.zeros(base.shape, dtype=bool)
    diagonal[:, :, 0, 0] = diagonal[:, :, 1, 1] = True
    untrained = base + 0.01 * rng.standard_normal(base.shape)
    for advantage_at, verdict in ((diagonal, "holds"), (~diagonal, "fails")):
        trained = untrained + 0.4 * advantage_at + 0.01 * rng.standard_normal(base.shape)
        data = dict(paper_run[0], trained=trained, init=untrained, control=untrained.copy())
        verdicts = {claim.claim_id: claim.evaluate(data)[1] for claim in PAPER_CLAIMS}
        assert set(verdicts.values()) == {verdict}, verdicts


def test_the_pooled_margin_is_the_mean_gap_over_the_root_mean_square_of_both_seed_sds():
    from joma_lib.chapters.table1.table1 import SD_FLOOR, pooled_margin

    real = np.array([[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]])  # two settings; seed SD 1 (ddof=1)
    control = np.zeros((2, 3))  # seed SD 0: the pooled SD is sqrt((1 + 0) / 2)
    assert pooled_margin(real, control) == pytest.approx(2.0 / np.sqrt(0.5))  # the smaller setting's
    assert pooled_margin(control, real) == pytest.approx(-6.0 / np.sqrt(0.5))
    # no seed spread at all: the SD is floored, and the margin is finite
    assert pooled_margin(np.ones((1, 3)), np.zeros((1, 3))) == pytest.approx(1.0 / SD_FLOOR)


@pytest.mark.parametrize("change", ["seeds", "settings"])
def test_a_stored_run_of_other_seeds_or_shape_is_refused(change, paper_run, tmp_path):
    from joma_lib.chapters.table1.table1 import stored_table1

    with np.load(paper_run[1]) as npz:
        arrays = {key: npz[key] for key in npz.files}
    if change == "seeds":
        arrays["seeds"] = arrays["seeds"] + 100
    else:
        arrays["scores"] = arrays["scores"][:-1]
    np.savez(tmp_path / "run.npz", **arrays)
    with pytest.raises(ValueError, match="does not hold a run of the full configuration"):
        stored_table1(tmp_path / "run.npz", "full")
    assert stored_table1(paper_run[1], "full")["trained"].shape == paper_run[0]["trained"].shape


def test_table1_alignment_is_the_worst_settings():
    """table1-layer0-aligned reads every setting: one setting other than the first below 0.8 fails it."""
    from joma_lib.kit.registry import get_claim

    data = load_reference("table1")
    claim = get_claim("table1-layer0-aligned")
    assert claim.evaluate(data)[1] == "holds"
    low = data["trained_mean"].copy()
    low[2, 0, 0] = 0.7
    assert claim.evaluate({**data, "trained_mean": low})[1] == "fails"
