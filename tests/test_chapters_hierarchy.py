"""The hierarchy chapter (joma_lib.chapters.hierarchy): Fig. 5, the co-occurrence figure and widget, and the
kernel-free grid of Theorem 5."""

from __future__ import annotations

from pathlib import Path

import re
import numpy as np
import pytest

from joma_lib.chapters.hierarchy.explorer import hierarchy_explorer
from joma_lib.chapters.hierarchy.figures import make_cooccurrence, make_fig5, make_hierarchy_grid
from joma_lib.latent_tree import (
    HBLT,
    association_time,
    cooccurrence_exact,
)


def test_hierarchy_grid_matches_theorem5_and_the_association_time(payload, cell_data):
    data = make_hierarchy_grid(depths=(2, 4), rhos=(0.75, 0.9), n_times=401)
    tree = HBLT(depth=4, rho=0.9)
    for h in range(1, 5):
        p = cooccurrence_exact(tree, 2 ** (h - 1), 0)
        assert data["cooccurrence"][1, 1, h - 1] == pytest.approx(p, rel=1e-12)
        assert data["assoc_time"][1, 1, h - 1] == pytest.approx(association_time(4 * p, 0.9), rel=1e-12)
    assert np.all(np.isnan(data["cooccurrence"][0, :, 2:]))  # a height-2 tree has no H = 3, 4
    assert np.all(np.diff(data["assoc_time"][1, :, :4], axis=-1) > 0)  # near tokens first
    at_t90 = [np.interp(data["assoc_time"][1, 1, h], data["times"], data["association"][1, 1, h]) for h in range(4)]
    np.testing.assert_allclose(at_t90, 0.9, atol=0.005)  # v/mu reaches 0.9 at the quadrature's time
    p = payload(hierarchy_explorer(data).html("h"))
    ys = cell_data(p, (0, 1))
    assert ys[0][:2] == pytest.approx(data["cooccurrence"][0, 1, :2], rel=1e-2) and ys[0][2:] == [None, None]
    with pytest.raises(ValueError, match="depths"):
        make_hierarchy_grid(depths=(4, 2))


def test_fig5_association_order_and_sparse_then_dense() -> None:
    data = make_fig5()
    t = data["assoc_time"]
    assert t.shape == (4,) and np.all(np.diff(t) > 0.05)  # low common ancestor first, the root last
    H, query = data["cla_height"], int(data["query"])
    v, mu, times = data["v"], data["mu"], data["times"]
    for h in range(1, 4):  # at the moment the H-token is associated, the farther ones are not yet
        near = int(np.flatnonzero(H[query] == h)[0])
        far = int(np.flatnonzero(H[query] == h + 1)[0])
        k = int(np.searchsorted(times, t[h - 1]))
        assert v[k, near] / mu[near] > v[k, far] / mu[far] + 0.02
    e = data["entropy"]
    assert e.min() < e[0] - 1.0 and e[-1] > e.min() + 0.5  # attention first sparse, then dense
    k = int(np.argmin(e))
    assert np.argmax(data["attention_per_token_by_height"][k]) == 0


def test_fig5_refuses_a_tree_too_shallow_for_its_panels() -> None:
    with pytest.raises(ValueError, match="depth"):
        make_fig5(depth=1)


def test_cooccurrence_figure_data() -> None:
    data = make_cooccurrence(depths=(4, 6), n_samples=20_000)
    for i, L in enumerate(data["depths"]):
        ok = ~np.isnan(data["exact"][i])
        assert ok.sum() == L
        assert np.all(np.abs(data["monte_carlo"][i, ok] - data["exact"][i, ok]) <= 3 * data["stderr"][i, ok])
        assert np.all(np.diff(data["exact"][i, ok]) < 0)


def test_cooccurrence_widget_follows_its_controls() -> None:
    from joma_lib.chapters.hierarchy.widget import CooccurrenceWidget

    explorer = CooccurrenceWidget(depth=6, height=2)
    assert explorer.image.value[:4] == b"\x89PNG"
    explorer.controls["depth"].value = 10
    assert explorer.controls["rho"].value == pytest.approx(0.9) and explorer.controls["rho"].disabled
    expected = cooccurrence_exact(HBLT(depth=10, rho=0.9), 2, 0)
    assert f"{expected:.4f}" in explorer.status.value
    explorer.controls["tie_rho"].value = False
    explorer.controls["rho"].value = 0.5
    explorer.controls["channel"].value = list(explorer.controls["channel"].options)[1]  # inheritance: rho^H
    assert f"{0.5 ** 2:.4f}" in explorer.status.value


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """A synthetic stored run of the full configuration, read back for the paper-scale claims, and its file: at
    initialisation and on shuffled labels the diagonal scores sit near 0.5, trained near 0.9, seed noise 0.02."""
    from joma_lib.chapters.hierarchy.table1_paper import make_table1_paper
    from joma_lib.table1.runs import CONFIGS, Table1Result, save_result

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
    from joma_lib.chapters.hierarchy.table1_paper import PAPER_CLAIMS

    data = paper_run[0] if trained_like == "right" else dict(paper_run[0], trained=paper_run[0][trained_like])
    verdicts = {claim.claim_id: claim.evaluate(data)[1] for claim in PAPER_CLAIMS}
    assert len(verdicts) == 4
    # an untrained network, or one trained on shuffled labels, scores like both controls: every claim fails
    assert set(verdicts.values()) == {"holds" if trained_like == "right" else "fails"}, verdicts


def test_paper_scale_claims_wait_for_the_run_and_refuse_another_configuration(paper_run, tmp_path) -> None:
    import json
    import shutil

    from joma_lib.chapters.hierarchy.table1_paper import WAITING, make_table1_paper
    from joma_lib.io import InputUnavailableError
    from joma_lib.kit.registry import online_claims

    waiting = {k: v for k, v in online_claims().items() if k.startswith("table1-paper-")}
    assert len(waiting) == 4 and all(o.claim.kind == "paper" and o.claim.threshold_set == "before-data"
                                     for o in waiting.values())
    with pytest.raises(InputUnavailableError, match=re.escape(WAITING)):
        make_table1_paper(str(tmp_path / "missing.npz"))
    assert not bool(paper_run[0]["tf32"])
    shutil.copy(paper_run[1], tmp_path / "run.npz")
    manifest = json.loads(paper_run[1].with_suffix(".json").read_text())
    for change, accepted in (({"tf32": True}, True), ({"d_model": 32}, False)):
        (tmp_path / "run.json").write_text(json.dumps({"config": {**manifest["config"], **change}}))
        if accepted:
            assert bool(make_table1_paper(str(tmp_path / "run.npz"))["tf32"])
        else:
            with pytest.raises(ValueError, match="not made with the full configuration"):
                make_table1_paper(str(tmp_path / "run.npz"))
