"""Sphinx extension: keep the published site clean, light and self-contained.

* **No thebe.** ``_config.yml`` has ``launch_buttons: thebe: false``, yet ``sphinx_thebe`` (always
  loaded by Jupyter Book) registers its inline ``const THEBE_JS_URL = ...`` script at
  ``env-before-read-docs``, i.e. after the HTML builder has started, so Sphinx records it with the
  registry *and* the builder and every page declared the constant twice (a ``SyntaxError`` in the
  console). Pages get neither that script, nor ``sphinx-thebe.js``/``.css``.
* **A landing page with a title.** Jupyter Book's ``index.html`` only redirects to the root
  chapter; it is rewritten with the book's title, a canonical link and a visible link.
* **No source maps.** The theme ships ``.map`` files (3.5 MB) that readers never need; they are
  removed from the output with the ``sourceMappingURL`` comments that point to them.
* **Readable, accessible figures.** Every image of a numbered figure gets the caption's first
  sentence as its alt text (instead of a hashed file name) and links to its full-size file
  (click to enlarge).
* **Phones and dark mode.** ``static/joma-site.css``: long inline code wraps, wide tables and
  display equations scroll inside the column; in dark mode (the theme follows the reader's system setting)
  figures keep a white paper, and tables, ledger cards and HTML outputs keep the page's dark background and
  text colour (WCAG AA contrast, checked by tests/test_browser.py).

Enabled in ``_config.yml`` under ``sphinx: local_extensions:`` (``sphinx_site: _ext``).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docutils import nodes  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from sphinx.application import Sphinx

STATIC = Path(__file__).with_name("static")
CSS = "joma-site.css"
# abbreviations whose full stop ends no sentence (the captions cite "Fig. 4", "Eq. (3)", ...)
ABBREVIATIONS = ("Fig.", "Figs.", "Eq.", "Eqs.", "Thm.", "Sec.", "e.g.", "i.e.", "vs.", "cf.", "approx.", "al.")
LEAD_MAX = 60
THEBE_MARKERS = ("THEBE_JS_URL", "sphinx-thebe")
SOURCE_MAP_COMMENT = re.compile(rb"\n?(//# sourceMappingURL=\S+|/\*# sourceMappingURL=\S+ \*/)\s*$")


def _is_thebe(asset: Any) -> bool:
    """Whether a Sphinx ``_JavaScript``/``_CascadingStyleSheet`` asset (or plain name) belongs to thebe."""
    text = " ".join(str(x) for x in (getattr(asset, "filename", asset), getattr(asset, "attributes", {}).get("body")))
    return any(marker in text for marker in THEBE_MARKERS)


def _drop_thebe(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not _is_thebe(asset)]


def landing_page(title: str, target: str) -> str:
    """HTML of an ``index.html`` that names the book and forwards to ``target`` (the root chapter)."""
    t, url = html.escape(title), html.escape(target, quote=True)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{t}</title>\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<link rel="canonical" href="{url}">\n<link rel="icon" href="_static/favicon.svg" type="image/svg+xml">\n'
            f'<meta http-equiv="refresh" content="0; url={url}">\n</head>\n'
            f'<body>\n<h1>{t}</h1>\n<p><a href="{url}">Open the book</a></p>\n</body>\n</html>\n')


def strip_source_maps(static: Path) -> int:
    """Delete ``*.map`` under ``static`` and the comments that reference them; return how many maps went."""
    maps = list(static.rglob("*.map"))
    for path in maps:
        path.unlink()
    for path in [*static.rglob("*.js"), *static.rglob("*.css")]:
        raw = path.read_bytes()
        cleaned = SOURCE_MAP_COMMENT.sub(b"\n", raw)
        if cleaned != raw:
            path.write_bytes(cleaned)
    return len(maps)


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (a full stop, ``?`` or ``!`` then a space), skipping abbreviations."""
    text = " ".join(text.split())
    for match in re.finditer(r"[.?!](?=\s|$)", text):
        head = text[: match.end()]
        if head.rsplit(" ", 1)[-1].lstrip("(") not in ABBREVIATIONS:
            return head
    return text


def caption_alt(caption: str) -> str:
    """Alt text of a figure from its caption: the first sentence, plus the next one if the first is only a
    short bold lead such as "Companion figure." or "Paper Fig. 3."."""
    first = first_sentence(caption)
    rest = " ".join(caption.split())[len(first):].strip()
    if len(first) < LEAD_MAX and rest:
        return f"{first} {first_sentence(rest)}"
    return first


def _alt_from_captions(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    for figure in doctree.findall(nodes.figure):
        captions = list(figure.findall(nodes.caption))
        if not captions:
            continue
        alt = caption_alt(captions[0].astext())
        for image in figure.findall(nodes.image):
            image["alt"] = alt


IMG = re.compile(r'(<a\b[^>]*>\s*)?(<img\b[^>]*\bsrc="([^"]*_images/[^"]+)"[^>]*>)')


def link_images(body: str) -> str:
    """Wrap every content image (``_images/...``) that is not already a link in a link to its own file."""
    def wrap(match: re.Match[str]) -> str:
        if match.group(1):
            return match.group(0)
        return f'<a class="reference internal image-reference" href="{match.group(3)}">{match.group(2)}</a>'
    return IMG.sub(wrap, body)


def _page(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    _drop_thebe(app, pagename, templatename, context, doctree)
    if "body" in context:
        context["body"] = link_images(context["body"])


def _add_static(app: Sphinx) -> None:
    app.config.html_static_path.append(str(STATIC))
    app.add_css_file(CSS)


def _finish(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    root = app.config.root_doc
    if root != "index":
        (out / "index.html").write_text(landing_page(app.config.html_title, f"{root}.html"), encoding="utf-8")
    strip_source_maps(out / "_static")


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point."""
    app.connect("builder-inited", _add_static)
    app.connect("doctree-resolved", _alt_from_captions)
    app.connect("html-page-context", _page)
    app.connect("build-finished", _finish, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
