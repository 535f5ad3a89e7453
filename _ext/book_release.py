"""Releases of the book: one version, an offline bundle, and a Pages site that keeps every version.

* **One version.** ``[project] version`` of ``pyproject.toml`` is the only place the version is written by hand.
  As a Sphinx extension (``_config.yml``, ``sphinx: local_extensions:``) this module gives it to the book
  (``version``/``release`` and the footer); the figures' receipts and citations read it from there too
  (``joma_lib/kit/citation.py``). ``CITATION.cff`` and ``.zenodo.json`` repeat it for GitHub and Zenodo:
  ``check-version`` fails when they, or the release tag, disagree with it.
* **The offline bundle** (``bundle``): one zip with the built site (``html/``, opens from a local folder), the
  chapters' ``.ipynb`` twins (``notebooks/``), every figure's data, receipt and citation (``figures/``) and the
  claims ledger as JSON (``claims.json``), made from an existing build: ``_build/html``, ``book/_generated``
  (what the pages wrote), the figure store (``JOMA_FIGURE_STORE``: a figure no page shows, e.g. kept by
  ``verify --keep``, with its receipt and citation written from its kept data) and ``book/*.ipynb``.
* **The site** (``site``): the build of ``main`` under ``/latest/``, every release's site under ``/vX.Y.Z/`` (taken
  from the releases' bundles, so a published version never changes or disappears), ``versions.json``, and at the
  root a redirect for every page to its ``/latest/`` copy (the addresses of the site before versions keep working);
  a page split since (``MOVED_PAGES``) keeps its address in ``/latest/`` as a redirect that follows the anchor,
  and a page that handed figures to new pages (``GAVE_FIGURES``) sends their anchors there.

The release workflow (``.github/workflows/release.yml``) and the Pages workflow run these commands; ``.ci/run``
runs ``check-version``, ``bundle`` and ``site`` offline on its own build, so they cannot rot unnoticed::

    python _ext/book_release.py check-version [--tag vX.Y.Z]
    python _ext/book_release.py bundle --out dist        # dist/joma-companion-vX.Y.Z-offline.zip
    python _ext/book_release.py site --latest _build/html --releases DIR --out _site
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[1]
NAME = "joma-companion"
STORED = {".png", ".gz", ".zip", ".woff", ".woff2", ".jpg", ".jpeg"}  # already compressed: zipped as they are
_BUNDLE = re.compile(rf"^{NAME}-(v\d+\.\d+\.\d+)-offline\.zip$")


def pyproject_version(root: Path = ROOT) -> str:
    """``[project] version`` of ``pyproject.toml``: the companion's version."""
    return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])


def version_problems(root: Path = ROOT, tag: str | None = None) -> list[str]:
    """Where ``CITATION.cff``, ``.zenodo.json`` (and the release ``tag``, if given) disagree with pyproject.toml."""
    import yaml  # type: ignore[import-untyped]

    version = pyproject_version(root)
    found = {
        "CITATION.cff version": str(yaml.safe_load((root / "CITATION.cff").read_text()).get("version")),
        ".zenodo.json version": str(json.loads((root / ".zenodo.json").read_text()).get("version")),
    }
    if tag is not None:
        found["the release tag"] = tag.removeprefix("v") if tag.startswith("v") else f"{tag} (not v<version>)"
    return [f"{where} is {value}, pyproject.toml says {version}" for where, value in found.items() if value != version]


def bundle_name(version: str) -> str:
    return f"{NAME}-v{version}-offline.zip"


def _add_tree(archive: zipfile.ZipFile, folder: Path, prefix: str) -> None:
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        compress = zipfile.ZIP_STORED if path.suffix.lower() in STORED else zipfile.ZIP_DEFLATED
        archive.write(path, f"{prefix}/{path.relative_to(folder).as_posix()}", compress_type=compress)


def shown_figures(generated: Path) -> set[str]:
    """The figures a page showed: those whose receipt the harness wrote into ``generated``."""
    return {p.name.removesuffix(".receipt.json") for p in generated.glob("*.receipt.json")}


def make_bundle(out_dir: Path, version: str, html_dir: Path, notebooks: list[Path], generated: Path,
                kept: dict[str, list[Path]], figure_ids: list[str], claims: str) -> Path:
    """Write the offline bundle into ``out_dir`` and return its path (see the module docstring).

    Every figure in ``figure_ids`` must be there: shown by a page (its files in ``generated``) or, for one that no
    page shows, its files in the figure store (``kept``: figure id -> data, manifest, receipt, citation); a missing
    one, a missing site or no notebooks is a :class:`ValueError` naming it, and nothing is written."""
    shown = shown_figures(generated)
    missing = sorted(set(figure_ids) - shown - set(kept))
    problems = ([f"no built site at {html_dir} (index.html)"] * (not (html_dir / "index.html").exists())
                + ["no .ipynb twins (make twins)"] * (not notebooks)
                + [f"figures neither shown by a page ({generated}) nor kept in the figure store: {missing}"]
                * bool(missing))
    if problems:
        raise ValueError("cannot make the offline bundle: " + "; ".join(problems))
    top = f"{NAME}-v{version}"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / bundle_name(version)
    part = path.with_name(f".{path.name}.part")
    # level 1: a quarter of the default level's time for ~10% more bytes (the bundle is made in every CI run)
    with zipfile.ZipFile(part, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr(f"{top}/index.html", _redirect("html/index.html", f"{NAME} {version}, offline"))
        archive.writestr(f"{top}/README.txt", (
            f"{NAME} {version}, offline. Open index.html (or html/index.html) in a browser.\n"
            "notebooks/: the chapters as Jupyter notebooks. figures/: every figure's data (npz, CSV, SVG, PNG), its "
            "receipt (<id>.receipt.json: what made it) and citation (<id>.cite.json); of a figure no page shows, its "
            "data and manifest as the figure store kept them. claims.json: the claims ledger.\n"))
        archive.writestr(f"{top}/claims.json", claims)
        _add_tree(archive, html_dir, f"{top}/html")
        for notebook in sorted(notebooks):
            archive.write(notebook, f"{top}/notebooks/{notebook.name}")
        _add_tree(archive, generated, f"{top}/figures")
        for fig_id in sorted(set(kept) - shown):
            for kept_file in kept[fig_id]:
                archive.write(kept_file, f"{top}/figures/{kept_file.name}")
    part.replace(path)
    return path


def _redirect(target: str, title: str, note: str = "") -> str:
    """A page that sends the browser to ``target`` (relative), keeping the ``#anchor`` of the address."""
    url = html.escape(target, quote=True)
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<link rel="canonical" href="{url}"><meta http-equiv="refresh" content="0; url={url}">'
            f"<script>location.replace({json.dumps(target)} + location.hash)</script></head>"
            f'<body><p><a href="{url}">{html.escape(title)}</a></p>{note}</body></html>')


MOVED_PAGES: dict[str, tuple[str, ...]] = {
    # a page's old address, which readers may have cited -> the pages that took its content, the default last
    "book/theorems3_4.html": ("book/theorem3.html", "book/theorem4.html"),
}
"""Pages split or renamed: ``latest/`` keeps their old addresses as redirects that follow the ``#anchor`` (a figure
cited on the old page lands on the page that shows it now). Released versions keep the old pages themselves."""
GAVE_FIGURES: dict[str, tuple[str, ...]] = {
    # a page that kept its address but handed some figures to new pages -> those pages
    "book/theorem1.html": ("book/figs2_3.html",),
    "book/hierarchy.html": ("book/fig5.html",),
}
"""In ``latest/`` such a page sends an ``#anchor`` it no longer holds to the page that holds it now."""
_ANCHOR = re.compile(r"""\bid=["']([^"']+)["']""")


def _moved_redirect(site: Path, old: str, targets: tuple[str, ...]) -> str:
    """A redirect from ``old`` to the page of ``targets`` (paths in ``site``) that holds the address's anchor, else
    to the last of them."""
    depth = "../" * old.count("/")
    where: dict[str, str] = {}
    for target in targets[:-1]:
        for anchor in _ANCHOR.findall((site / target).read_text(encoding="utf-8")):
            where.setdefault(anchor, depth + target)
    default = depth + targets[-1]
    script = (f"<script>location.replace(({json.dumps(where)})[location.hash.slice(1)] || {json.dumps(default)})"
              " + location.hash)</script>")
    url = html.escape(default, quote=True)
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>This page has moved</title>'
            f'<meta http-equiv="refresh" content="0; url={url}">{script}</head><body><p>This page was split: '
            + ", ".join(f'<a href="{html.escape(depth + t, quote=True)}">{html.escape(t)}</a>' for t in targets)
            + "</p></body></html>")


def _anchors_elsewhere(site: Path, page: str, targets: tuple[str, ...]) -> str:
    """A script for ``page`` that sends an address whose ``#anchor`` the page lacks to the page of ``targets``
    that has it (empty when none of their anchors is missing from the page)."""
    own = set(_ANCHOR.findall((site / page).read_text(encoding="utf-8")))
    depth = "../" * page.count("/")
    where = {anchor: depth + target for target in targets
             for anchor in _ANCHOR.findall((site / target).read_text(encoding="utf-8")) if anchor not in own}
    if not where:
        return ""
    return (f"<script>(function(){{var to = ({json.dumps(where)})[location.hash.slice(1)];"
            " if (to) location.replace(to + location.hash);})();</script>")


def _version_key(tag: str) -> tuple[int, ...]:
    return tuple(int(part) for part in tag.removeprefix("v").split("."))


def assemble_site(out: Path, latest: Path, release_zips: list[Path]) -> list[str]:
    """Write the Pages site into ``out``: ``latest/`` (the build of main), ``vX.Y.Z/`` for every release bundle in
    ``release_zips``, ``versions.json``, and root redirects to ``latest/``; return the release tags, newest first."""
    if not (latest / "index.html").exists():
        raise ValueError(f"--latest must be a built site (with index.html), got {latest}")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(latest, out / "latest")
    for old, targets in MOVED_PAGES.items():
        if not (latest / old).exists() and all((latest / target).exists() for target in targets):
            (out / "latest" / old).write_text(_moved_redirect(latest, old, targets), encoding="utf-8")
    for giver, targets in GAVE_FIGURES.items():
        if all((latest / p).exists() for p in (giver, *targets)):
            script = _anchors_elsewhere(latest, giver, targets)
            text = (out / "latest" / giver).read_text(encoding="utf-8")
            (out / "latest" / giver).write_text(text.replace("</head>", script + "</head>", 1), encoding="utf-8")
    tags = []
    for bundle in release_zips:
        match = _BUNDLE.match(bundle.name)
        if match is None:
            raise ValueError(f"{bundle} is not a release bundle ({bundle_name('X.Y.Z')})")
        tag, prefix = match.group(1), f"{NAME}-{match.group(1)}/html/"
        with zipfile.ZipFile(bundle) as archive:
            for info in archive.infolist():
                relative = info.filename.removeprefix(prefix)
                if not info.filename.startswith(prefix) or info.is_dir() or not relative:
                    continue
                if relative.startswith("/") or ".." in Path(relative).parts:
                    raise ValueError(f"{bundle}: unsafe path {info.filename!r}")
                target = out / tag / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(info))
        tags.append(tag)
    tags.sort(key=_version_key, reverse=True)
    (out / "versions.json").write_text(json.dumps({"latest": "latest/", "releases": tags}, indent=2) + "\n")
    for page in (out / "latest").rglob("*.html"):
        relative = page.relative_to(out / "latest").as_posix()
        stub = out / relative
        stub.parent.mkdir(parents=True, exist_ok=True)
        depth = "../" * relative.count("/")
        versions = "".join(f'<li><a href="{depth}{t}/{relative}">{t}</a></li>' for t in tags)
        stub.write_text(_redirect(f"{depth}latest/{relative}", "The latest version of this page",
                                  f"<p>Released versions:</p><ul>{versions}</ul>" if tags else ""))
    return tags


def _kept_figures(fig_ids: list[str], store: Path | None) -> dict[str, list[Path]]:
    """The files in the figure ``store`` of the figures no page shows (``verify --keep`` kept them), each with the
    receipt and citation written now from its kept data (:mod:`joma_lib.kit.receipts`), as ``show`` would."""
    from functools import partial

    from joma_lib.kit import harness, receipts

    kept: dict[str, list[Path]] = {}
    for fig_id in fig_ids if store is not None else []:
        npz = harness.reference_path(fig_id, store)
        if not npz.with_suffix(".json").exists():
            continue
        data = harness.load_reference(fig_id, store)  # checked against its manifest
        receipt = receipts.keep_receipt(fig_id, data, npz, "computed", {}, npz.with_suffix(".json"),
                                        compare=partial(harness.compare_with_reference, fig_id, data))
        kept[fig_id] = [npz, npz.with_suffix(".json"), receipt, npz.parent / f"{fig_id}.{receipts.CITE_SUFFIX}"]
    return kept


def _claims_json(store: Path | None) -> str:
    """The claims ledger as ``python -m joma_lib.figures claims --json`` prints it, evaluated on the figure store's
    data (a figure not kept there is computed)."""
    from joma_lib.kit.claims import ledger
    from joma_lib.kit.harness import stored_or_computed

    rows = ledger(load=lambda fig_id: stored_or_computed(fig_id, store)[0])
    return json.dumps([row.as_json() for row in rows], indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python _ext/book_release.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check-version", help="CITATION.cff, .zenodo.json (and --tag) agree with pyproject.toml")
    check.add_argument("--tag", help="the release tag, vX.Y.Z")
    bundle = sub.add_parser("bundle", help="the offline bundle of an existing build")
    bundle.add_argument("--out", type=Path, default=Path("dist"))
    bundle.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    bundle.add_argument("--generated", type=Path, default=ROOT / "book" / "_generated")
    bundle.add_argument("--store", type=Path, default=os.environ.get("JOMA_FIGURE_STORE") or None,
                        help="the figure store (default: JOMA_FIGURE_STORE)")
    site = sub.add_parser("site", help="the Pages site: latest/, every release's vX.Y.Z/, root redirects")
    site.add_argument("--latest", type=Path, required=True)
    site.add_argument("--releases", type=Path, help="a folder of release bundles (none: no released versions)")
    site.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "check-version":
            problems = version_problems(tag=args.tag)
            for problem in problems:
                print(f"error: {problem}", file=sys.stderr)
            if not problems:
                print(f"version {pyproject_version()}: pyproject.toml, CITATION.cff, .zenodo.json"
                      + (f" and the tag {args.tag}" if args.tag else "") + " agree")
            return 1 if problems else 0
        if args.command == "bundle":
            from joma_lib.kit.registry import figure_ids

            ids = figure_ids()
            kept = _kept_figures(sorted(set(ids) - shown_figures(args.generated)), args.store)
            path = make_bundle(args.out, pyproject_version(), args.html, sorted((ROOT / "book").glob("*.ipynb")),
                               args.generated, kept, ids, _claims_json(args.store))
            print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
            return 0
        zips = sorted(args.releases.glob(bundle_name("*"))) if args.releases else []
        tags = assemble_site(args.out, args.latest, zips)
        print(f"{args.out}: latest/ and {len(tags)} released version(s) {' '.join(tags)}")
        return 0
    except (ValueError, OSError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _footer(app: Sphinx, config: Any) -> None:
    """The book's version from pyproject.toml: Sphinx's ``version``/``release`` and a line in the footer."""
    version = pyproject_version()
    config.version = config.release = version
    options = dict(config.html_theme_options or {})
    options["extra_footer"] = (str(options.get("extra_footer", "")) +
                               f'<p class="joma-version">Version {html.escape(version)}</p>')
    config.html_theme_options = options


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point: the version, from pyproject.toml, into the book."""
    app.connect("config-inited", _footer)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    sys.exit(main())
