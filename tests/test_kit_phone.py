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
