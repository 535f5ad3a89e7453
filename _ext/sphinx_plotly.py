"""Sphinx extension: serve plotly.js from the installed ``plotly`` package, never from a CDN.

Pages that show a plotly figure embed it with ``include_plotlyjs=False`` (see
:meth:`joma_lib.explorable.Explorer.html`), so they need a global ``Plotly``. This extension

* writes the bundle that ships with the ``plotly`` Python package to
  ``_static/plotly-<version>.min.js`` of the HTML output (no copy of it lives in git), and
* adds a ``<script>`` tag for it to the pages whose body holds a plotly graph div, and only
  to those (4-5 MB that other pages need not load).

Enabled in ``_config.yml`` under ``sphinx: local_extensions:`` (``sphinx_plotly: _ext``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sphinx.application import Sphinx

GRAPH_MARKER = 'class="plotly-graph-div"'


def bundle_name() -> str:
    """File name of the bundle under ``_static``, versioned so browsers never keep a stale copy."""
    from plotly.offline import get_plotlyjs_version

    return f"plotly-{get_plotlyjs_version()}.min.js"


def _add_script(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """On pages with a plotly graph, load the bundle in the head (before the inline plot scripts run)."""
    if GRAPH_MARKER in context.get("body", ""):
        app.add_js_file(bundle_name())


def _write_bundle(app: Sphinx, exception: Exception | None) -> None:
    """Write the installed plotly.js into the HTML output's ``_static`` folder."""
    if exception is not None or app.builder.format != "html":
        return
    from plotly.offline import get_plotlyjs

    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / bundle_name()).write_text(get_plotlyjs(), encoding="utf-8")


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point: connect the two hooks."""
    app.connect("html-page-context", _add_script)
    app.connect("build-finished", _write_bundle)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
