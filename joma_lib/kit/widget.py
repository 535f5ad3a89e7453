"""The one widget API of the book: controls -> a compute function -> a draw function -> an image.

A :class:`LiveWidget` owns named ipywidgets controls. On every change it calls ``compute(**values)`` (a plain
library function whose keyword arguments are the control names), then ``draw(result, values)`` (returns a
matplotlib Figure), encodes the figure as PNG into an image widget and writes ``summary(result, values)``
into a status line. A value the widget cannot honour (outside a control's range, not finite, or refused by
``compute`` with a ValueError) is reported in the status line, the last good image stays, and the next valid
value redraws normally. Compute and draw functions stay plain functions, testable and usable without
ipywidgets; the widget needs a live kernel to react (on a static page it shows its first drawing).
"""

from __future__ import annotations

import html
import io
import math
import pickle
import time
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from joma_lib.kit.phone import PHONE_DPI, TEXT_PX_KEY, smallest_text_px, stack_for_phone
from joma_lib.kit.style import figure_style

Values = dict[str, Any]


def figure_png(figure: Figure, dpi: float = 80, metadata: Mapping[str, str] | None = None,
               tight: bool = False) -> bytes:
    """``figure`` encoded as PNG (fast zlib level: the image is redrawn on every change); ``tight`` crops it to
    what is drawn (``bbox_inches="tight"``)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata=dict(metadata or {}), pil_kwargs={"compress_level": 1},
                   bbox_inches="tight" if tight else None)
    return buffer.getvalue()


class LiveWidgetBox(widgets.HBox):
    """The box a :class:`LiveWidget` shows (:attr:`LiveWidget.widget`); ``live_widget`` leads back to it (see
    ``fallback``)."""

    def __init__(self, live_widget: LiveWidget, children: list[widgets.Widget]) -> None:
        super().__init__(children)
        self.live_widget = live_widget


def control_error(name: str, control: widgets.ValueWidget, value: Any) -> str | None:
    """Why ``control`` cannot show ``value`` (the message names the control and its allowed values), or None."""
    if isinstance(control, widgets.Checkbox):
        return None if isinstance(value, bool) else f"{name} must be True or False, got {value!r}"
    options = getattr(control, "options", None)
    if options is not None:
        allowed = [opt[1] if isinstance(opt, tuple) else opt for opt in options]
        return None if value in allowed else f"{name} must be one of {allowed}, got {value!r}"
    low, high = getattr(control, "min", None), getattr(control, "max", None)
    if low is None or high is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"{name} must be a finite number in [{low:g}, {high:g}], got {value!r}"
    if not low <= value <= high:
        return f"{name} must be in [{low:g}, {high:g}], got {value!r}"
    if isinstance(control, widgets.IntSlider) and value != int(value):
        return f"{name} must be an integer in [{low}, {high}], got {value!r}"
    return None


class LiveWidget:
    """Named controls wired to ``compute(**values)`` and ``draw(result, values) -> Figure``.

    ``summary(result, values)`` gives the status line (HTML); ``legend`` is a fixed caption under the image.
    Subclasses may override :meth:`link` to adjust dependent controls before each computation.

    ``initial`` sets controls by name before the first drawing. Unlike a control built with a ``value`` (which
    ipywidgets silently clamps into its range, or refuses with a TraitError), a value a control cannot take is
    refused with a ValueError that names the control, its allowed values and the value given.
    """

    def __init__(self, controls: Mapping[str, widgets.ValueWidget], compute: Callable[..., Any],
                 draw: Callable[[Any, Values], Figure], summary: Callable[[Any, Values], str] | None = None,
                 legend: str = "", dpi: float = 80, initial: Mapping[str, Any] | None = None) -> None:
        self.controls = dict(controls)
        for name, value in (initial or {}).items():
            message = control_error(name, self.controls[name], value)
            if message is not None:
                raise ValueError(message)
            self.controls[name].value = value
        self.compute, self.draw, self.summary = compute, draw, summary
        self.legend, self.dpi = legend, dpi
        self.image = widgets.Image(format="png")
        self.status = widgets.HTML()
        self.error: str | None = None
        self.result: Any = None
        self.last_ms = 0.0
        self._busy = False
        self._observe(True)
        self.redraw()

    @property
    def values(self) -> Values:
        """Current control values, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def _observe(self, on: bool) -> None:
        for control in self.controls.values():
            (control.observe if on else control.unobserve)(self._on_change, names="value")

    def _on_change(self, _: dict) -> None:
        self.redraw()

    def link(self) -> None:
        """Adjust dependent controls before computing (default: nothing)."""

    def update(self, **values: Any) -> float:
        """Set controls by name and redraw once; returns the redraw time in ms.

        A value a control cannot take is reported in the status line (nothing changes); an unknown control
        name is a programming error (ValueError).
        """
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(f"unknown controls {sorted(unknown)}; known: {sorted(self.controls)}")
        for name, value in values.items():
            message = control_error(name, self.controls[name], value)
            if message is not None:
                self._show_error(message)
                return 0.0
        self._observe(False)
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._observe(True)
        return self.redraw()

    def _show_error(self, message: str) -> None:
        self.error = message
        self.status.value = f"<span style='color:#b00'>{html.escape(message)}</span>"

    def redraw(self) -> float:
        """Compute and draw for the current values; returns the elapsed time in ms (0 if refused)."""
        if self._busy:  # a control changed by link() itself
            return 0.0
        self._busy = True
        start = time.perf_counter()
        try:
            self._observe(False)
            try:
                self.link()
            finally:
                self._observe(True)
            values = self.values
            try:
                result = self.compute(**values)
            except ValueError as exc:
                self._show_error(str(exc))
                return 0.0
            with figure_style():
                self.image.value = figure_png(self.draw(result, values), self.dpi)
            self.result, self.error = result, None
            self.last_ms = (time.perf_counter() - start) * 1e3
            self.status.value = self.summary(result, values) if self.summary else ""
            return self.last_ms
        finally:
            self._busy = False

    def phone_png(self) -> bytes:
        """The current drawing in its phone layout (:func:`~joma_lib.kit.phone.stack_for_phone`) as PNG; its
        ``TEXT_PX_KEY`` text chunk records the height of its smallest text in its own pixels. It is laid out on a
        copy: a draw function may keep one figure and update it in place (``Fig4Drawing``)."""
        with figure_style():
            figure = stack_for_phone(pickle.loads(pickle.dumps(self.draw(self.result, self.values))))
            return figure_png(figure, PHONE_DPI, {TEXT_PX_KEY: f"{smallest_text_px(figure, PHONE_DPI):.2f}"},
                              tight=True)

    @property
    def widget(self) -> widgets.Widget:
        """Controls on the left; image, legend and status line on the right."""
        right: list[widgets.Widget] = [self.image]
        if self.legend:
            right.append(widgets.HTML(f"<small>{html.escape(self.legend)}</small>"))
        right.append(self.status)
        return LiveWidgetBox(self, [widgets.VBox(list(self.controls.values())), widgets.VBox(right)])
