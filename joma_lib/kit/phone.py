"""A phone layout of any registry figure: its panels stacked in one narrow column.

The figures are drawn for the book's text column (8.8 in wide, several panels side by side). On a phone that
picture is scaled down to about 360 CSS px, and 10 pt text ends up near 5 px. :func:`stack_for_phone` re-lays
the same drawing out for a phone: every panel (with its twins, colour bars and legends, which follow it under
the constrained layout) gets a row of its own, in reading order, in a figure :data:`PHONE_WIDTH_IN` wide, and
long titles and notes wrap. The book serves this variant to narrow screens (``<picture>``, see
``_ext/sphinx_figures.py``).

:func:`smallest_text_px` is the height, in pixels of the saved image, of the smallest text a figure holds: the
browser test scales it by the image's displayed width to check that no figure text renders below 9 CSS px.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.text import Text

PHONE_WIDTH_IN = 4.0  # a 390 px phone shows ~360 CSS px of column: 9 pt text stays above 9 CSS px
PHONE_DPI = 150.0  # the phone layout of a widget's picture (the registry figures use savefig.dpi, also 150)
# screens that get the phone layout (the same query as _ext/sphinx_figures.py, which does not import the package)
PHONE_MEDIA = "(max-width: 640px)"
TEXT_PX_KEY = "joma:smallest-text-px"  # PNG text chunk: the smallest text's height in the image's pixels
MIN_PANEL_HEIGHT_IN = 2.4
MAX_PANEL_HEIGHT_IN = 4.0
WRAP_ABOVE_CHARS = 30


def _panels(fig: Figure) -> list[list]:
    """The figure's grid axes grouped by panel (an axes and its twins share one), in reading order, where its
    layout engine puts them."""
    engine = fig.get_layout_engine()
    if engine is not None:  # stack_for_phone gives every figure one
        engine.execute(fig)
    groups: dict[tuple[float, float, float, float], list] = {}
    for ax in fig.axes:
        if ax.get_subplotspec() is None:  # colour bars, insets: they follow their parent
            continue
        box = ax.get_position()
        groups.setdefault(tuple(np.round(box.bounds, 3)), []).append(ax)
    # top to bottom (by the panel's top edge), then left to right
    return [groups[k] for k in sorted(groups, key=lambda b: (-round(b[1] + b[3], 2), b[0]))]


def _wrappable(fig: Figure) -> list[Text]:
    """Titles, axis labels and the figure's own texts (not legends or tick labels: matplotlib wraps those badly)."""
    suptitle = getattr(fig, "_suptitle", None)  # matplotlib keeps the Text object private
    texts = [*fig.texts] + ([suptitle] if suptitle is not None else [])
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label]
    return texts


def _outside(ax: Axes, legend: Any) -> bool:
    """Whether ``legend`` is anchored outside its axes (``bbox_to_anchor`` beyond the axes' unit square)."""
    anchor = legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    return bool(min(anchor.x0, anchor.y0) < 0 or max(anchor.x1, anchor.y1) > 1)


def _one_column(ax: Axes, legend: Any) -> None:
    """Draw ``legend`` again, same entries (matplotlib keeps them private), in one column: at its place, or inside
    the axes where it was anchored outside them (a column of entries below a narrow panel leaves the constrained
    layout no room: the axes collapse and the saved picture grows to gigapixels)."""
    title = legend.get_title()
    entries = [(h, t.get_text()) for h, t in zip(legend.legend_handles, legend.texts) if h is not None]
    place: dict[str, Any] = ({"loc": "best"} if _outside(ax, legend)
                             else {"loc": legend._loc, "bbox_to_anchor": legend._bbox_to_anchor})
    ax.legend([h for h, _ in entries], [label for _, label in entries], ncols=1,
              fontsize=legend.texts[0].get_fontsize(), title=title.get_text() or None,
              title_fontsize=title.get_fontsize(), **place)


def stack_for_phone(fig: Figure) -> Figure:
    """Re-lay ``fig`` out in place for a phone (see the module docstring) and return it.

    A figure with one panel only gets the narrow width. Panel heights keep their wide-layout height within
    [:data:`MIN_PANEL_HEIGHT_IN`, :data:`MAX_PANEL_HEIGHT_IN`].
    """
    if fig.get_layout_engine() is None:  # a widget's drawing may place its axes by hand: let the stack make room
        fig.set_layout_engine("constrained")
    panels = _panels(fig)
    width, height = fig.get_size_inches()
    heights = [float(np.clip(group[0].get_position().height * height * 1.25, MIN_PANEL_HEIGHT_IN,
                             MAX_PANEL_HEIGHT_IN)) for group in panels]
    if panels:
        grid = GridSpec(len(panels), 1, figure=fig, height_ratios=heights)
        for k, group in enumerate(panels):
            for ax in group:
                ax.set_subplotspec(grid[k, 0])
    for text in _wrappable(fig):
        if len(text.get_text()) > WRAP_ABOVE_CHARS:
            text.set_wrap(True)
    for ax in fig.axes:  # legends in one column: a row of entries is wider than the phone
        if ax.get_legend() is not None and ax.get_legend()._ncols > 1:
            _one_column(ax, ax.get_legend())
    fig.set_size_inches(PHONE_WIDTH_IN, sum(heights) + 0.4 * len(panels) + 0.3)
    return fig


def smallest_text_px(fig: Figure, dpi: float) -> float:
    """Height in pixels, at ``dpi``, of the smallest font of the figure's visible, non-empty texts."""
    sizes = [text.get_fontsize() for text in fig.findobj(Text) if text.get_text().strip() and text.get_visible()]
    return float(min(sizes)) * dpi / 72.0 if sizes else float("inf")
