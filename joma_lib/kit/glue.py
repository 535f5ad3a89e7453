"""Pasting values and figures into a page: :func:`glue`, the book's ``{glue:...}`` roles, with a plain-notebook
fallback."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store ``value`` under ``name`` for the page (``{glue:figure}``, ``{glue:text}``).

    In the book build this is :func:`myst_nb.glue`. In a plain notebook (Colab, Binder, a laptop
    without the book's build tools) there is no page to paste into, so a figure is shown in place
    and a number printed: the notebook still runs and the reader still sees what the page shows.
    """
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        from IPython.display import Image
        from IPython.display import display as ipython_display

        if isinstance(value, Image):
            ipython_display(value)
        elif display:
            print(f"{name} = {value!r}")
        return
    myst_glue(name, value, display=display)


def and_list(items: Iterable[object]) -> str:
    """The items as prose lists them: ``1``, ``1 and 2``, ``1, 2 and 10``."""
    words = [str(item) for item in items]
    if not words:
        raise ValueError("and_list needs at least one item")
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
