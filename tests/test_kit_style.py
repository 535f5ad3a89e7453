"""The book's figure style (joma_lib.kit.style), and figure text that stays readable on the page: every
registered figure, drawn from its reference data in the book's style and saved as the page shows it
(``bbox_inches="tight"`` at ``savefig.dpi``), has no text smaller than 9 CSS px once the image is scaled to the
book's content width (672 px on a desktop)."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from joma_lib.kit import harness
from joma_lib.kit.registry import figure_ids
from joma_lib.kit.style import RC, figure_style, heatmap

CONTENT_WIDTH_PX = 672  # sphinx-book-theme's text column on a desktop
MIN_TEXT_PX = 9.0


def displayed_text_px(fig_id: str) -> tuple[float, float, str]:
    """(smallest text in CSS px as displayed, saved width in inches, that text) for one figure."""
    data = harness.load_reference(fig_id)
    fig = harness.draw(fig_id, data)
    with figure_style():
        dpi = float(mpl.rcParams["savefig.dpi"])
        canvas = FigureCanvasAgg(fig)
        renderer = canvas.get_renderer()
        fig.draw(renderer)
        width_in = fig.get_tightbbox(renderer).width + 2 * float(mpl.rcParams["savefig.pad_inches"])
    texts = [t for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and t.get_window_extent(renderer).width > 0]
    smallest = min(texts, key=lambda t: t.get_fontsize())
    scale = min(1.0, CONTENT_WIDTH_PX / (width_in * dpi))  # wider images are scaled down to the column
    return smallest.get_fontsize() * dpi / 72 * scale, width_in, smallest.get_text()


@pytest.mark.parametrize("fig_id", figure_ids())
def test_figure_text_is_at_least_9px_at_the_books_width(fig_id):
    px, width_in, text = displayed_text_px(fig_id)
    assert px >= MIN_TEXT_PX, (f"{fig_id}: text {text!r} shows at {px:.1f} px in a {width_in:.1f}-inch-wide figure; "
                               f"use fewer panels per row, a narrower figure or larger fonts")


def test_the_style_holds_inside_its_block_only():
    before = mpl.rcParams["savefig.facecolor"], mpl.rcParams["svg.hashsalt"]
    with figure_style():
        assert all(mpl.rcParams[key] == value for key, value in RC.items())
        assert mpl.rcParams["savefig.facecolor"] == "white"  # legible in the dark theme
    assert (mpl.rcParams["savefig.facecolor"], mpl.rcParams["svg.hashsalt"]) == before


def test_a_heatmap_has_one_tick_per_grid_value_and_a_labelled_colour_bar():
    fig = Figure()
    ax = fig.subplots()
    heatmap(fig, ax, np.arange(6.0).reshape(2, 3), ["a", "b", "c"], ["lo", "hi"], "value")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["lo", "hi"]
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "value"
    assert ax.images[0].get_array()[1, 2] == 5.0  # values[y, x], origin at the bottom


@pytest.mark.parametrize("fig_id", ["fig6", "table1", "c-thm2-saliency"])  # panels in a grid, a table, a colour bar
def test_a_layout_fixed_once_saves_the_picture_the_layout_engine_draws(fig_id):
    """fix_layout runs the constrained layout once, at the saved dpi, and turns the engine off: the saved PNG is
    the one saving with the engine on gives, pixel for pixel (laid out at 72 dpi instead, all three differ)."""
    import io

    from PIL import Image

    from joma_lib.kit.style import fix_layout

    data = harness.load_reference(fig_id)
    pictures = []
    for fixed in (False, True):
        with figure_style():
            fig = harness.draw(fig_id, data)
            if fixed:
                fix_layout(fig)
                assert type(fig.get_layout_engine()).__name__ == "PlaceHolderLayoutEngine"
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", bbox_inches="tight")
        pictures.append(np.asarray(Image.open(buffer)))
    assert pictures[0].shape == pictures[1].shape and np.array_equal(*pictures)
