"""The static view of widgets (joma_lib.kit.fallback): what a page without a kernel shows."""

from __future__ import annotations

import base64

import ipywidgets as widgets
import pytest

from joma_lib.kit.fallback import LIVE_NOTE, widget_images, with_static_view
from joma_lib.chapters.hierarchy.widget import cooccurrence_widget
from joma_lib.chapters.theorem3.widget import theorem3_widget

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_bundle_keeps_the_live_widget_and_adds_the_default_picture():
    widget = cooccurrence_widget()
    bundle = with_static_view(widget, alt="co-occurrence <curve>")._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == widget.model_id
    html = bundle["text/html"]
    encoded = html.split("base64,", 1)[1].split('"', 1)[0]
    assert base64.b64decode(encoded).startswith(PNG_SIGNATURE)  # the widget's figure at its defaults
    assert 'alt="co-occurrence &lt;curve&gt;"' in html and "Colab or Binder" in html and LIVE_NOTE[:40] in html


def test_images_are_found_in_nested_boxes_in_order():
    first, second = widgets.Image(value=b"a", format="png"), widgets.Image(value=b"b", format="jpeg")
    widget = widgets.HBox([widgets.VBox([first, widgets.Image(format="png")]), widgets.VBox([second])])
    assert list(widget_images(widget)) == [("png", b"a"), ("jpeg", b"b")]  # the empty image is skipped


def test_bad_input_is_rejected():
    with pytest.raises(TypeError, match="widget must be an ipywidgets widget"):
        with_static_view("not a widget", alt="x")
    with pytest.raises(ValueError, match="alt"):
        with_static_view(widgets.VBox([]), alt=" ")
    with pytest.raises(ValueError, match="no image"):
        with_static_view(widgets.VBox([]), alt="x").static_html()


@pytest.mark.parametrize("make_widget", [cooccurrence_widget, theorem3_widget])
def test_a_widgets_picture_comes_with_its_phone_layout(make_widget):
    """Narrow screens get the drawing stacked in one column, its smallest text >= 9 CSS px in a 360 px column."""
    import io

    from PIL import Image

    from joma_lib.kit.phone import PHONE_MEDIA, TEXT_PX_KEY

    html = with_static_view(make_widget(), alt="the widget's drawing").static_html()
    assert html.count("<picture>") == 1 and f'<source media="{PHONE_MEDIA}" srcset="data:image/png;base64,' in html
    wide, phone = (Image.open(io.BytesIO(base64.b64decode(part.split('"', 1)[0])))
                   for part in html.split("base64,")[1:][::-1])  # the <source> (phone) comes first
    assert phone.width < wide.width * 1.2 and phone.height > phone.width * 0.8
    assert float(phone.text[TEXT_PX_KEY]) * 360 / phone.width >= 9.0


def test_the_phone_layout_leaves_the_live_figure_alone():
    """Fig. 4's widget keeps one figure and updates it in place: its phone picture is laid out on a copy."""
    from joma_lib.chapters.theorem4.widget import ModifiedMLPWidget

    widget = ModifiedMLPWidget()
    figure = widget.draw.figure
    size, boxes = figure.get_size_inches().copy(), [ax.get_position().bounds for ax in figure.axes]
    assert widget.phone_png().startswith(PNG_SIGNATURE)
    assert (figure.get_size_inches() == size).all() and [ax.get_position().bounds for ax in figure.axes] == boxes
