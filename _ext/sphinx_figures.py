"""Sphinx extension: phones get each registry figure in its phone layout (``<picture>``).

A page shows a registry figure with ``show("fig2a")`` and ``{glue:figure} fig2a`` (``:name: fig2a``); next to
``_generated/fig2a.png`` the harness writes ``_generated/fig2a.phone.png``, the same figure with its panels
stacked in one narrow column (:mod:`joma_lib.kit.phone`). Scaled to a phone's column, the wide picture's
10 pt text shrinks to about 5 CSS px; the phone layout keeps it above 9 px. For every ``<figure id="...">``
whose phone layout exists, this extension

* copies the phone layout into the output's ``_images/`` folder, and
* wraps the figure's ``<img>`` in a ``<picture>`` whose ``<source>`` serves the phone layout to screens
  narrower than :data:`PHONE_MAX_PX` (the browser downloads one of the two pictures, never both).

It runs after ``sphinx_site`` (which links each image to its full-size file), so the link stays around the
picture. Under every such figure whose receipt the harness wrote (``_generated/<fig_id>.receipt.json`` and
``.cite.json``, :mod:`joma_lib.kit.receipts`), it adds two collapsed blocks: the receipt (what made the figure:
version, commit, data hash, libraries, device, source, deviation from the reference, date) and "Cite this figure"
(BibTeX and plain text), both shown from those files as written, never typed into a page. Enabled in ``_config.yml``
under ``sphinx: local_extensions:`` (``sphinx_figures: _ext``).
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sphinx.application import Sphinx

PHONE_MAX_PX = 640
PHONE_SUFFIX = ".phone.png"  # joma_lib.kit.harness.PHONE_SUFFIX (the extension does not import the package)
RECEIPT_SUFFIX = ".receipt.json"  # joma_lib.kit.receipts.RECEIPT_SUFFIX
CITE_SUFFIX = ".cite.json"  # joma_lib.kit.receipts.CITE_SUFFIX
GENERATED = "_generated"
_FIGURE = re.compile(r'(<figure\b[^>]*\bid="([\w-]+)"[^>]*>)(.*?)(</figure>)', re.S)
_IMG = re.compile(r'<img\b[^>]*\bsrc="([^"]*_images/)[^"]+"[^>]*>')


def picture(body: str, phone_images: dict[str, Path]) -> tuple[str, dict[str, Path]]:
    """``body`` with the ``<img>`` of each figure named in ``phone_images`` wrapped in a ``<picture>``;
    also the images to copy (output name under ``_images/`` -> source file)."""
    used: dict[str, Path] = {}

    def figure(match: re.Match[str]) -> str:
        fig_id, inner = match.group(2), match.group(3)
        source = phone_images.get(fig_id)
        if source is None or "<picture" in inner:
            return match.group(0)
        name = f"{fig_id}{PHONE_SUFFIX}"

        def wrap(img: re.Match[str]) -> str:
            used[name] = source
            return (f'<picture><source media="(max-width: {PHONE_MAX_PX}px)" srcset="{img.group(1)}{name}">'
                    f"{img.group(0)}</picture>")

        return match.group(1) + _IMG.sub(wrap, inner, count=1) + match.group(4)

    return _FIGURE.sub(figure, body), used


def receipt_blocks(receipt: dict[str, Any], citation: dict[str, str]) -> str:
    """The two collapsed blocks under a figure: its receipt (the ``lines`` the harness wrote) and its citation."""
    rows = "".join(f"<tr><th>{html.escape(label)}</th><td>{html.escape(value)}</td></tr>"
                   for label, value in receipt["lines"])
    fig_id = html.escape(receipt["fig_id"])
    return (f'<details class="joma-receipt"><summary>Receipt of this figure ({fig_id})</summary>'
            f'<table class="joma-receipt-table">{rows}</table>'
            f"<p>The same: <code>python -m joma_lib.figures receipt {fig_id}</code></p></details>"
            f'<details class="joma-cite"><summary>Cite this figure</summary>'
            f'<pre class="joma-cite-bibtex">{html.escape(citation["bibtex"])}</pre>'
            f'<p class="joma-cite-text">{html.escape(citation["text"])}</p>'
            f"<p>The same: <code>python -m joma_lib.figures cite {fig_id}</code></p></details>")


def with_receipts(body: str, folder: Path) -> str:
    """``body`` with :func:`receipt_blocks` after every figure whose receipt and citation are in ``folder``."""

    def figure(match: re.Match[str]) -> str:
        receipt, citation = (folder / f"{match.group(2)}{suffix}" for suffix in (RECEIPT_SUFFIX, CITE_SUFFIX))
        if not receipt.exists() or not citation.exists():
            return match.group(0)
        return match.group(0) + receipt_blocks(json.loads(receipt.read_text()), json.loads(citation.read_text()))

    return _FIGURE.sub(figure, body)


def _page(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if "body" not in context or "<figure" not in context["body"]:
        return
    folder = Path(app.srcdir) / Path(pagename).parent / GENERATED
    if not folder.is_dir():
        return
    phone_images = {p.name[: -len(PHONE_SUFFIX)]: p for p in folder.glob(f"*{PHONE_SUFFIX}")}
    context["body"], used = picture(with_receipts(context["body"], folder), phone_images)
    images = Path(app.outdir) / "_images"
    images.mkdir(parents=True, exist_ok=True)
    for name, source in used.items():
        shutil.copyfile(source, images / name)


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point: after sphinx_site's html-page-context handler (priority 500)."""
    app.connect("html-page-context", _page, priority=600)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
