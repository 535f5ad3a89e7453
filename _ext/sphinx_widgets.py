"""Sphinx extension: no ipywidgets state or JavaScript on the book's pages.

The book shows each widget as a static picture (see :mod:`joma_lib.kit.fallback` and
``nb_mime_priority_overrides`` in ``_config.yml``), so the widgets' embedded state (megabytes of
JSON, PNGs included) and the widget manager scripts are dead weight, and the scripts would come
from CDNs. myst-nb registers them per page (keys ``ipywidgets_state`` and ``ipywidgets_<i>``);
this hook drops them before myst-nb adds a page's scripts. ``nb_ipywidgets_js: {}`` in the config
already empties the script list; this hook also removes the state.

Enabled in ``_config.yml`` under ``sphinx: local_extensions:`` (``sphinx_widgets: _ext``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sphinx.application import Sphinx

WIDGET_KEY_PREFIX = "ipywidgets"


def _drop_widget_scripts(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                         doctree: Any) -> None:
    """Remove the page's ipywidgets entries from myst-nb's per-page script table."""
    per_page = getattr(app.env, "nb_metadata", {}).get(pagename, {}).get("js_files", {})
    for key in [k for k in per_page if k.startswith(WIDGET_KEY_PREFIX)]:
        del per_page[key]


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point: run before myst-nb's own html-page-context handler (priority 500)."""
    app.connect("html-page-context", _drop_widget_scripts, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
