"""The phone layout of registry figures (joma_lib.kit.phone) and its files (harness.save_outputs)."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure
from PIL import Image

from joma_lib.kit.harness import TEXT_PX_KEY, draw, load_reference, save_outputs
from joma_lib.kit.phone import PHONE_WIDTH_IN, smallest_text_px, stack_for_phone


def test_panels_are_stacked_in_reading_order_with_their_twins():
    fig = Figure(figsize=(8.8, 3), layout="constrained")
    left, right = fig.subplots(1, 2)
    twin = right.twinx()
    left.set_title("left")
    stack_for_phone(fig)
    assert fig.get_size_inches()[0] == PHONE_WIDTH_IN
    fig.draw_without_rendering()
    assert left.get_position().y0 > right.get_position().y1  # left on top, right below
    assert twin.get_position().bounds == pytest.approx(right.get_position().bounds)


@pytest.mark.parametrize("anchor", [(0.5, -0.15), (0.5, 0.98)])
def test_a_legend_in_columns_becomes_one_column_and_an_outside_one_moves_inside(anchor, tmp_path):
    """A legend of three columns anchored below its panel used to become a column the phone layout had no room
    for: the axes collapsed and the saved picture grew to hundreds of millions of pixels."""
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax in axes:
        for k in range(6):
            ax.plot([0, 1], [k, k + 1], label=f"line {k}")
    axes[0].legend(loc="upper center", bbox_to_anchor=anchor, ncols=3)
    stack_for_phone(fig)
    fig.savefig(tmp_path / "phone.png", dpi=50)
    legend = axes[0].get_legend()
    assert legend._ncols == 1 and [t.get_text() for t in legend.texts] == [f"line {k}" for k in range(6)]
    assert min(axes[0].get_position().height, axes[1].get_position().height) > 0.1  # the panels did not collapse
    with Image.open(tmp_path / "phone.png") as image:
        assert image.size[0] == round(PHONE_WIDTH_IN * 50)
    inside = legend.get_window_extent().transformed(axes[0].transAxes.inverted())
    assert anchor[1] > 0 or (inside.y0 >= 0 and inside.y1 <= 1)  # the outside one now sits inside its panel


def test_smallest_text_px_is_the_smallest_visible_font():
    fig = Figure()
    ax = fig.subplots()
    ax.set_title("title", fontsize=12)
    ax.text(0, 0, "small", fontsize=7)
    ax.text(0, 0, "hidden", fontsize=2, visible=False)
    assert smallest_text_px(fig, 144) == pytest.approx(14.0)


@pytest.mark.parametrize("fig_id", ["fig5", "c-thm2-saliency"])
def test_saved_phone_layout_is_narrow_and_records_its_text_size(fig_id, tmp_path):
    data = load_reference(fig_id)
    paths = save_outputs(fig_id, draw(fig_id, data), data, tmp_path)
    with Image.open(paths[0]) as wide, Image.open(paths[-1]) as phone:
        assert paths[-1].name == f"{fig_id}.phone.png"
        assert phone.width < 0.6 * wide.width
        # shown 360 CSS px wide (a 390 px phone), the smallest text stays above 9 CSS px
        assert float(phone.text[TEXT_PX_KEY]) * 360 / phone.width >= 9.0
