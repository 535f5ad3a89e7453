"""The WikiText chapter (joma_lib.chapters.wikitext): Figs. 6 and 8 from the authors' runs and the kernel-free grid.

The Fig. 6/8 tests need the authors' sweep files (the ``official_dir`` fixture) and are skipped without them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from joma_lib.kit.sweeps import panel_title, plot_fig6
from joma_lib.chapters.wikitext.explorer import wikitext_explorer
from joma_lib.chapters.wikitext.figures import FIG6_PAPER_LOSSES, make_fig6, make_fig8
from joma_lib.kit import load_reference


def test_wikitext_reference_grid_agrees_with_fig6_and_fig8_and_the_explorer_shows_it(payload, cell_data):
    """The committed grid against the committed Fig. 6 / Fig. 8 data (both from the authors' runs)."""
    grid, fig6, fig8 = (load_reference(f) for f in ("c-wikitext-grid", "fig6", "fig8"))
    nlayers, lrs = list(grid["nlayers"]), list(grid["lrs"])
    for p, n in enumerate(fig6["nlayers"]):
        cell = (0, nlayers.index(int(n)), lrs.index(1e-4))
        np.testing.assert_allclose(grid["attn_entropy"][cell][:, :n], fig6["attn_entropy"][p, :, :n], rtol=1e-12)
        assert grid["min_val_loss"][cell] == pytest.approx(fig6["min_val_loss"][p], rel=1e-12)
    for p, lr in enumerate(fig8["lr"]):
        cell = (0, nlayers.index(5), int(np.argmin(np.abs(np.log(grid["lrs"] / lr)))))
        assert grid["min_val_loss"][cell] == pytest.approx(fig8["min_val_loss"][p], rel=1e-12)
    ex = wikitext_explorer(grid)
    payload_ = payload(ex.html("w"))
    ys = cell_data(payload_, (1, 0, lrs.index(1e-3)))  # our re-run, 1 layer
    assert ys[0][0] is not None and all(y[0] is None for y in ys[1:-1])  # one layer drawn, the others hidden
    assert "no run" in ex.titles[1, 4, 0]


def test_fig6_titles_match_the_paper(official_dir: Path) -> None:
    data = make_fig6(directory=str(official_dir))
    titles = [panel_title(data, p, "layers") for p in range(4)]
    assert titles == ["Layers: 1, val_loss: 5.357", "Layers: 2, val_loss: 5.255",
                      "Layers: 5, val_loss: 5.169", "Layers: 10, val_loss: 5.110"]
    assert data["n_seeds"].tolist() == [3, 3, 3, 3]
    fig = plot_fig6(data)  # 4 panels, then a colour bar for each of the 5- and 10-layer panels
    assert [ax.get_title() for ax in fig.axes[:4]] == titles and len(fig.axes) == 6
    assert [len(ax.lines) for ax in fig.axes[:4]] == [1, 2, 5, 10]


def test_fig8_titles_and_best_lr_match_the_paper(official_dir: Path) -> None:
    data = make_fig8(directory=str(official_dir))
    assert [f"{v:.2f}" for v in data["min_val_loss"]] == ["6.41", "5.89", "5.67", "5.23", "5.17", "5.30", "6.76"]
    assert panel_title(data, 4, "lr") == "lr: 1e-4, val: 5.17"
    assert data["lr"][np.argmin(data["min_val_loss"])] == pytest.approx(1e-4)
    assert data["n_seeds"].tolist() == [3, 3, 1, 3, 3, 3, 3]  # the 1e-5 cell has one seed in the published data


# --- the claims' measures on made-up panels: each guard of a measure changes a verdict ---

STEPS = np.arange(0, 58_001, 1000)


def _curve(drop_at: int, drop: float, rise: float, start: float = 2.5) -> np.ndarray:
    """An entropy that falls by ``drop`` to its minimum at step ``drop_at``, then climbs by ``rise`` to the end."""
    down = start - drop * np.minimum(STEPS / max(drop_at, 1), 1.0)
    return np.where(STEPS <= drop_at, down, start - drop + rise * (STEPS - drop_at) / max(STEPS[-1] - drop_at, 1))


BOUNCING = _curve(2000, 1.0, 0.7)  # early, deep, and a rise of 0.7 nats
FLAT_LOW = _curve(4000, 1.0, 0.02)  # drops and hardly rises


def _panels(curves: dict[int, list[np.ndarray]], losses: dict[int, float], lr: float = 1e-4) -> dict[str, np.ndarray]:
    """Fig. 6-shaped data: one panel per depth, ``curves[depth]`` its layers' entropies, ``losses[depth]`` its best
    validation loss."""
    depths = sorted(curves)
    entropy = np.full((len(depths), STEPS.size, max(depths)), np.nan)
    for p, depth in enumerate(depths):
        entropy[p, :, :depth] = np.stack(curves[depth], axis=1)
    return {"nlayers": np.array(depths), "lr": np.full(len(depths), lr), "minibatch": np.tile(STEPS, (len(depths), 1)),
            "attn_entropy": entropy, "min_val_loss": np.array([losses[d] for d in depths]),
            "val_loss": np.array([[losses[d]] * STEPS.size for d in depths])}


def _fig6(one: np.ndarray = BOUNCING, five: np.ndarray = BOUNCING, ten_lower: np.ndarray = FLAT_LOW,
          ten_upper: tuple[np.ndarray, ...] = (BOUNCING,) * 7, losses: tuple[float, ...] = FIG6_PAPER_LOSSES):
    curves = {1: [one], 2: [BOUNCING] * 2, 5: [BOUNCING] * 4 + [five], 10: [ten_lower] * 3 + list(ten_upper)}
    return _panels(curves, dict(zip((1, 2, 5, 10), losses, strict=True)))


def _fig6_verdicts(data) -> dict[str, str]:
    from joma_lib.chapters.wikitext.figures import FIG6_CLAIMS

    return {claim.claim_id: claim.evaluate(data)[1] for claim in FIG6_CLAIMS}


def test_fig6_claims_hold_on_panels_shaped_like_the_authors():
    assert set(_fig6_verdicts(_fig6()).values()) == {"holds"}


@pytest.mark.parametrize("one", [
    _curve(20_000, 1.0, 0.7),  # the minimum late in the run, not early
    _curve(58_000, 1.0, 0.0),  # the entropy only falls: its minimum is the last checkpoint
    _curve(2000, 0.3, 0.7),  # a drop of 0.3 nats from 2.5 (12 %): no real drop
])
def test_the_one_layer_bounce_needs_an_early_deep_interior_minimum(one):
    assert _fig6_verdicts(_fig6(one=one))["fig6-authors-bounce"] == "fails"


def test_every_layer_of_the_shallow_models_and_of_layers_3_9_must_rise_after_an_interior_minimum():
    falls = _curve(58_000, 1.0, 0.0)
    assert _fig6_verdicts(_fig6(five=falls))["fig6-authors-shallow-every-layer-bounce"] == "fails"  # the 5-layer top
    # layer 3 of the 10-layer model, the lowest of the upper layers: an interior minimum and no rise, or no minimum
    # inside the run at all, though it ends high above where it started
    for layer3 in (FLAT_LOW, _curve(58_000, 1.0, 0.0), _curve(0, 0.0, 1.0)):
        upper = (layer3,) + (BOUNCING,) * 6
        assert _fig6_verdicts(_fig6(ten_upper=upper))["fig6-deep-upper-layers-bounce"] == "fails"


def test_the_deep_models_lowest_layers_must_drop_and_not_rise():
    from joma_lib.chapters.wikitext.figures import suppressed_lower_bounce

    assert suppressed_lower_bounce(_fig6()) == pytest.approx(0.02)
    for lower in (_curve(4000, 0.3, 0.02), np.full(STEPS.size, 2.5)):  # a drop of 12 %, or none
        data = _fig6(ten_lower=lower)
        assert np.isnan(suppressed_lower_bounce(data))
        assert _fig6_verdicts(data)["fig6-deep-lower-layers-suppressed"] == "fails"


@pytest.mark.parametrize("losses, failing", [
    ((*FIG6_PAPER_LOSSES[:3], FIG6_PAPER_LOSSES[3] + 0.001), {"fig6-authors-losses"}),  # a title off by 0.001
    ((*FIG6_PAPER_LOSSES[:2], FIG6_PAPER_LOSSES[1] + 0.014, FIG6_PAPER_LOSSES[3]),  # 5 layers worse than 2
     {"fig6-authors-losses", "fig6-deeper-lower-loss"}),
])
def test_the_titles_and_the_depth_order_are_read_from_every_panel(losses, failing):
    verdicts = _fig6_verdicts(_fig6(losses=losses))
    assert {k for k, v in verdicts.items() if v == "fails"} == failing
