"""A picture for widgets where no kernel runs (the book's web pages).

An ipywidget is alive only while a Python kernel serves it. On a static page its controls
cannot react, and without the widgets' JavaScript it shows nothing at all. :func:`with_static_view`
wraps a widget so that its cell output carries two views of it:

* the live widget (``application/vnd.jupyter.widget-view+json``), which Jupyter, Colab, Binder and
  VS Code show when a kernel is attached;
* an HTML view (``text/html``): the widget's current picture(s) (its ``Image`` widgets, i.e. the
  figure at the settings it was created with) and a line on how to make it live.

The book's build keeps the HTML view and drops the widget one (``nb_mime_priority_overrides`` in
``_config.yml``), so the page shows the figure at the default settings and loads no widget JavaScript.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from joma_lib.kit.phone import PHONE_MEDIA

if TYPE_CHECKING:
    import ipywidgets

LIVE_NOTE = ("This is the widget at its default settings, drawn when the page was built. Its controls need a "
             "running Python kernel: open the chapter in Colab or Binder (launch button at the top of the page), "
             "or run it in Jupyter on your machine.")


def widget_images(widget: ipywidgets.Widget) -> Iterator[tuple[str, bytes]]:
    """``(format, bytes)`` of every non-empty ``Image`` widget inside ``widget``, depth first."""
    import ipywidgets as widgets

    if isinstance(widget, widgets.Image) and widget.value:
        yield str(widget.format), bytes(widget.value)
    for child in getattr(widget, "children", ()):
        yield from widget_images(child)


def _data_uri(fmt: str, data: bytes) -> str:
    return f"data:image/{fmt};base64,{base64.b64encode(data).decode('ascii')}"


class StaticView:
    """Displays as the live widget in a kernel, and as its picture plus :data:`LIVE_NOTE` elsewhere."""

    def __init__(self, widget: ipywidgets.Widget, alt: str, note: str = LIVE_NOTE) -> None:
        import ipywidgets as widgets

        if not isinstance(widget, widgets.Widget):
            raise TypeError(f"widget must be an ipywidgets widget, got {type(widget).__name__}")
        if not isinstance(alt, str) or not alt.strip():
            raise ValueError("alt must be a non-empty description of the widget's figure")
        self.widget, self.alt, self.note = widget, alt, note

    def static_html(self) -> str:
        """The HTML view: each image of the widget (full width, at most its own size) and the note. The drawing
        of a :class:`~joma_lib.kit.widget.LiveWidget` also comes in its phone layout, which narrow screens show
        instead (``<picture>``): scaled to a phone's column, the wide drawing's text would be unreadable."""
        from joma_lib.kit.widget import LiveWidgetBox

        images = [f'<img src="{_data_uri(fmt, data)}" alt="{html.escape(self.alt)}" style="max-width:100%;height:auto">'
                  for fmt, data in widget_images(self.widget)]
        if not images:
            raise ValueError("the widget holds no image to show without a kernel")
        if isinstance(self.widget, LiveWidgetBox):
            phone = _data_uri("png", self.widget.live_widget.phone_png())
            images[0] = f'<picture><source media="{PHONE_MEDIA}" srcset="{phone}">{images[0]}</picture>'
        return (f'<div class="joma-widget-static">{"".join(images)}'
                f"<p><em>{html.escape(self.note)}</em></p></div>")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_(**kwargs))
        bundle["text/html"] = self.static_html()
        return bundle


def with_static_view(widget: ipywidgets.Widget, alt: str, note: str = LIVE_NOTE) -> StaticView:
    """``widget`` for a notebook cell, with a static picture for pages without a kernel (see the module)."""
    return StaticView(widget, alt, note)
