"""Sphinx extension: the theme's icons as inline SVG, without the 1.5 MB Font Awesome script.

pydata-sphinx-theme loads ``_static/scripts/fontawesome.js`` (Font Awesome 6 Free, every icon, 1.49 MB)
on every page, only to turn the dozen ``<i class="fa-solid fa-...">`` of the header and footer into
SVG. When the build finishes, this extension does that once, on the server side:

* it reads the path data of the icons from that script (the three packs: brands, regular, solid),
* replaces each ``<i class="fa-...">`` of every HTML page with the same ``<svg class="svg-inline--fa ...">``
  that Font Awesome would have drawn (same classes and attributes, so the theme's CSS still applies),
* removes the ``<script>`` tag, and the script itself from ``_static``.

An icon the script does not hold is left as it was (and the build log says so). The few CSS rules
that Font Awesome would inject for inline SVG are in ``static/joma-site.css``.

Enabled in ``_config.yml`` under ``sphinx: local_extensions:`` (``sphinx_icons: _ext``).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sphinx.util import logging

if TYPE_CHECKING:
    from sphinx.application import Sphinx

logger = logging.getLogger(__name__)

SCRIPT = Path("_static") / "scripts" / "fontawesome.js"
# one icon of the script: name:[width,height,[aliases],"unicode","path" or ["path","path"]]
_ICON = re.compile(r'(?:"([\w-]+)"|\b([A-Za-z_$][\w$]*)):\[(\d+),(\d+),\[([^\]]*)\],"[0-9a-f]+",'
                   r'("(?:[^"\\]|\\.)*"|\[[^\]]*\])\]')
# where a pack ends: the script registers it with  d("fab",p)  (minified names vary)
_PACK = re.compile(r'\b[A-Za-z_$][\w$]*\("(fab|far|fas)",[A-Za-z_$][\w$]*\)')
_PREFIXES = {"fa-brands": "fab", "fab": "fab", "fa-regular": "far", "far": "far", "fa-solid": "fas", "fas": "fas",
             "fa": "fas"}
_ITAG = re.compile(r'<i\b([^>]*\bclass="([^"]*\bfa-[^"]*)"[^>]*)>\s*</i>')
_SCRIPT_TAG = re.compile(r'\s*<script\b[^>]*\bsrc="[^"]*scripts/fontawesome\.js[^"]*"[^>]*>\s*</script>')
Icon = tuple[int, int, tuple[str, ...]]


def read_icons(script: str) -> dict[str, dict[str, Icon]]:
    """Icons of a Font Awesome 6 ``all.min.js`` bundle: pack (``fab``/``far``/``fas``) -> name -> (w, h, paths).

    Aliases (e.g. ``search`` for ``magnifying-glass``) map to the same icon.
    """
    packs: dict[str, dict[str, Icon]] = {}
    start = 0
    for end in _PACK.finditer(script):
        pack = packs.setdefault(end.group(1), {})
        for m in _ICON.finditer(script, start, end.start()):
            raw = m.group(6)
            paths = tuple(re.findall(r'"((?:[^"\\]|\\.)*)"', raw)) if raw.startswith("[") else (raw[1:-1],)
            icon = (int(m.group(3)), int(m.group(4)), paths)
            pack.setdefault(m.group(1) or m.group(2), icon)
            for alias in re.findall(r'"([\w-]+)"', m.group(5)):
                pack.setdefault(alias, icon)
        start = end.end()
    return packs


def svg_for(attributes: str, classes: str, icons: dict[str, dict[str, Icon]]) -> str | None:
    """The inline SVG for an ``<i>`` with these attributes and classes, or None if its icon is unknown."""
    names = classes.split()
    prefix = next((_PREFIXES[c] for c in names if c in _PREFIXES), "fas")
    for name in (c[3:] for c in names if c.startswith("fa-") and c not in _PREFIXES):
        icon = icons.get(prefix, {}).get(name)
        if icon is None:
            continue
        width, height, paths = icon
        kept = [c for c in names if c not in _PREFIXES]
        rest = re.sub(r'\s*\bclass="[^"]*"', "", attributes).strip()
        rest = rest if "aria-hidden" in rest else f'{rest} aria-hidden="true"'.strip()
        body = "".join(f'<path fill="currentColor" d="{html.escape(p, quote=True)}"></path>' for p in paths)
        return (f'<svg class="svg-inline--fa {" ".join(kept)}" {rest} focusable="false" data-prefix="{prefix}" '
                f'data-icon="{name}" role="img" xmlns="http://www.w3.org/2000/svg" '
                f'viewBox="0 0 {width} {height}">{body}</svg>')
    return None


def inline_icons(page: str, icons: dict[str, dict[str, Icon]]) -> tuple[str, set[str]]:
    """``page`` with its Font Awesome ``<i>`` tags drawn as SVG and the script tag removed; also the unknown icons."""
    unknown: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        svg = svg_for(match.group(1), match.group(2), icons)
        if svg is None:
            unknown.add(match.group(2))
            return match.group(0)
        return svg

    page = _ITAG.sub(replace, page)
    return (page if unknown else _SCRIPT_TAG.sub("", page)), unknown


def _finish(app: Sphinx, exception: Exception | None) -> None:
    out = Path(app.outdir)
    script = out / SCRIPT
    if exception is not None or app.builder.format != "html" or not script.is_file():
        return
    icons = read_icons(script.read_text(encoding="utf-8"))
    unknown: set[str] = set()
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        new, missing = inline_icons(text, icons)
        unknown |= missing
        if new != text:
            page.write_text(new, encoding="utf-8")
    if unknown:  # the pages with an unknown icon keep the script
        logger.info(f"sphinx_icons: kept Font Awesome where icons are unknown: {sorted(unknown)}")
        return
    script.unlink()
    for extra in script.parent.glob("fontawesome.js*"):
        extra.unlink()


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point."""
    app.connect("build-finished", _finish, priority=800)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
