"""How to cite a figure of the companion: a BibTeX entry and a plain-text reference for every registered figure.

The companion's version, its repository, its site and (once a release has been archived) its DOI come from one
place, ``pyproject.toml`` (``[project] version`` and ``[project.urls]``): read from the checkout when there is
one, from the installed package's metadata otherwise. ``CITATION.cff`` and ``.zenodo.json`` carry the same
entry for the companion itself; ``tests/test_kit_citation.py`` checks that they agree with this module.

A figure's entry names the figure (title, id, and the label of its anchor on the page, which is its id), the
companion's version and DOI, the versioned address of the figure's anchor (``<site>/v<version>/<page>.html#<id>``,
kept by every release, see ``_ext/book_release.py``) and the paper it reproduces. Only a release build
(``JOMA_RELEASE_TAG=v<version>``, set by the release workflow) cites the versioned address and the DOI; any other
build is a development build of the ``/latest/`` site, and says so with its commit: its figure may differ from the
release's.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from joma_lib.kit.registry import get_spec
from joma_lib.base.startup import declare_env

PACKAGE = "joma-companion"
PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
COMPANION_TITLE = "JoMA, worked through: an executable companion to Tian et al. (ICLR 2024)"
COMPANION_AUTHOR = "The JoMA companion contributors"
RELEASE_ENV = "JOMA_RELEASE_TAG"


def _release_tag(value: str) -> str:
    """``JOMA_RELEASE_TAG``'s form, checked at start-up; :func:`project` then checks it is this version's tag."""
    if not re.fullmatch(r"v\d+(\.\d+)*", value):
        raise ValueError(f"{RELEASE_ENV} must be a release tag v<version>, got {value!r}")
    return value


declare_env(RELEASE_ENV, "a release tag v<version> (the version in pyproject.toml), or unset", _release_tag)
"""Set to ``v<version>`` by the release workflow: this build is that release (unset: a development build)."""
PAPER = ("Yuandong Tian, Yiping Wang, Zhenyu Zhang, Beidi Chen and Simon S. Du. JoMA: Demystifying Multilayer "
         "Transformers via JOint Dynamics of MLP and Attention. ICLR 2024. arXiv:2310.00535")


@dataclass(frozen=True)
class Project:
    """The companion as ``pyproject.toml`` describes it."""

    version: str
    repository: str
    site: str  # the Pages site, ending in "/"
    doi: str  # "" until a release has been archived (Zenodo) and its DOI written into pyproject.toml
    released: bool = False  # this build is the release v<version> (RELEASE_ENV)

    def url(self, page: str, anchor: str = "") -> str:
        """The address of ``page`` (``book/fig7.md``): in this version's copy of the site, never moved later, for
        a release build; in ``/latest/`` for a development build."""
        html = re.sub(r"\.(md|ipynb)$", ".html", page)
        folder = f"v{self.version}" if self.released else "latest"
        return f"{self.site}{folder}/{html}" + (f"#{anchor}" if anchor else "")


@functools.cache
def git_commit() -> str:
    """The checkout's commit (``+local changes`` when tracked files differ from it); for an installed package, the
    commit pip recorded when it installed it from git (``direct_url.json``); else ``unknown``."""
    root = PYPROJECT.parent
    if not PYPROJECT.is_file():  # installed, not a checkout: never ask git about whatever folder holds the venv
        try:
            direct = json.loads(metadata.distribution(PACKAGE).read_text("direct_url.json") or "{}")
        except (metadata.PackageNotFoundError, ValueError):
            direct = {}
        commit = direct.get("vcs_info", {}).get("commit_id")
        return str(commit) if commit else "unknown (installed without a git commit)"

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return commit + (" +local changes" if dirty else "")


@functools.cache
def project() -> Project:
    """The companion's version and addresses: from the checkout's ``pyproject.toml`` (the one place they are
    written) when it is there, else from the installed package's metadata (``pip install`` of a wheel)."""
    if PYPROJECT.is_file():
        import tomllib

        table = tomllib.loads(PYPROJECT.read_text())["project"]
        version, urls = str(table["version"]), {str(k): str(v) for k, v in table.get("urls", {}).items()}
    else:
        meta = metadata.metadata(PACKAGE)
        version = meta["Version"]
        urls = dict(entry.split(", ", 1) for entry in meta.get_all("Project-URL") or [])
    doi = urls.get("DOI", "").removeprefix("https://doi.org/")
    tag = os.environ.get(RELEASE_ENV, "")
    if tag and tag != f"v{version}":
        raise ValueError(f"{RELEASE_ENV} must be unset or v{version} (the version in pyproject.toml), got {tag!r}")
    return Project(version, urls["Repository"], urls["Documentation"].rstrip("/") + "/", doi, released=bool(tag))


@dataclass(frozen=True)
class FigureCitation:
    """The two forms of one figure's citation."""

    bibtex: str
    text: str

    def as_json(self) -> dict[str, str]:
        return {"bibtex": self.bibtex, "text": self.text}


#: LaTeX's special characters in text, as a BibTeX field writes them (a bare ``^`` stops LaTeX: "Missing $ inserted")
_LATEX_ESCAPES = {**{c: "\\" + c for c in "&%$#_"}, "^": r"\^{}", "~": r"\~{}"}


def _bibtex_escape(value: str) -> str:
    return re.sub(r"[&%$#_^~]", lambda m: _LATEX_ESCAPES[m[0]], value)


def cite(fig_id: str) -> FigureCitation:
    """BibTeX and plain text citing ``fig_id`` in this build of the companion (a release, or a development build)."""
    spec, proj = get_spec(fig_id), project()
    url = proj.url(spec.chapter, fig_id)
    detail = spec.paper_ref.removeprefix("companion").strip()
    if detail.startswith("(") and detail.endswith(")"):  # "companion (Fig. 5(b))": the outer brackets only
        detail = detail[1:-1]
    reproduces = (f"reproducing {spec.paper_ref} of" if not spec.paper_ref.startswith("companion") else
                  f"a companion figure{f' ({detail})' if detail else ''}, not in the paper, to")
    what = f'Figure "{spec.title}" (id {fig_id}, label {fig_id}), {reproduces}'
    version = proj.version if proj.released else f"{proj.version}, development build at commit {git_commit()}"
    doi = proj.doi if proj.released else ""
    key = re.sub(r"[^\w-]", "-", f"joma-companion-{fig_id}-v{proj.version}")
    fields = {
        "title": f"{{{_bibtex_escape(spec.title)}}}",
        "author": f"{{{COMPANION_AUTHOR}}}",
        "howpublished": f"{{{COMPANION_TITLE}, version {_bibtex_escape(version)}}}",
        "version": f"{{{_bibtex_escape(version)}}}",
        **({"doi": f"{{{doi}}}"} if doi else {}),
        "url": f"{{{url}}}",
        "note": f"{{{_bibtex_escape(what)} {_bibtex_escape(PAPER)}}}",
    }
    width = max(map(len, fields))
    bibtex = "\n".join([f"@misc{{{key},"] + [f"  {k:<{width}} = {v}," for k, v in fields.items()] + ["}"])
    doi_text = f" doi:{doi}." if doi else ""
    text = f"{COMPANION_AUTHOR}. {what} {PAPER}. In: {COMPANION_TITLE}, version {version}.{doi_text} {url}"
    return FigureCitation(bibtex, text)
