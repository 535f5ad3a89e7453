"""Sphinx extension: serve MathJax 3 from a PyPI package instead of a CDN.

Sphinx loads MathJax from jsDelivr by default, so equations do not render where the book is
read offline, and every page makes a third-party request. When the package
``django-static-mathjax`` (MathJax 3.2.2, Apache-2.0; it ships the ``es5`` build as plain files,
no Django needed) is installed, this extension

* points ``mathjax_path`` at ``_static/mathjax/tex-chtml.js`` (at ``config-inited``), and
* copies the parts of the ``es5`` build that ``tex-chtml`` loads at run time (the combined
  component, its CommonHTML fonts and the TeX extensions it may autoload) into the HTML output
  when the build finishes. The context menu is disabled in ``_config.yml`` (``enableMenu: false``),
  so the accessibility components and speech maps it would load (``a11y``, ``sre``: 4.3 MB) and the
  lazy/safe UI are not shipped, nor the TeX packages the pages never autoload (``all-packages``,
  ``mhchem``).

Sphinx adds MathJax only to pages whose source has equations. A page whose maths arrive in a cell's HTML
output (the claims ledger's table) has none in its source, so this extension also marks every page whose
body holds a ``class="math`` element as having equations, just before Sphinx decides.

Without the package the build keeps Sphinx's CDN default and says so once in the log.
Enabled in ``_config.yml`` under ``sphinx: local_extensions:`` (``sphinx_mathjax: _ext``).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sphinx.util import logging

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.config import Config

logger = logging.getLogger(__name__)

TARGET = "mathjax"
PARTS = ("tex-chtml.js", "output/chtml/fonts", "input/tex/extensions")
UNUSED = ("all-packages.js", "mhchem.js")


def mathjax_es5_dir() -> Path | None:
    """The ``es5`` folder of the installed MathJax package, or None if it is not installed."""
    spec = importlib.util.find_spec("mathjax")  # a plain folder package: finding it runs no code
    if spec is None or not spec.submodule_search_locations:
        return None
    es5 = Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "es5"
    return es5 if (es5 / "tex-chtml.js").exists() else None


def _use_local(app: Sphinx, config: Config) -> None:
    if mathjax_es5_dir() is None:
        logger.info("sphinx_mathjax: django-static-mathjax not installed; MathJax comes from the CDN")
        return
    config.mathjax_path = f"{TARGET}/tex-chtml.js"


def _copy(app: Sphinx, exception: Exception | None) -> None:
    es5 = mathjax_es5_dir()
    if exception is not None or es5 is None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / TARGET
    for part in PARTS:
        src, out = es5 / part, dest / part
        if src.is_dir():
            shutil.copytree(src, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*UNUSED))
        elif src.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out)


def _math_in_outputs(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                     doctree: Any) -> None:
    """Before Sphinx's ``install_mathjax`` (priority 500): a page with maths in its HTML gets MathJax too."""
    if 'class="math' in str(context.get("body", "")):
        app.env.get_domain("math").data["has_equations"][pagename] = True


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point."""
    app.connect("config-inited", _use_local)
    app.connect("html-page-context", _math_in_outputs, priority=400)
    app.connect("build-finished", _copy)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
