"""How to cite a figure of the companion: a BibTeX entry and a plain-text reference for every registered figure.

The companion's version, its repository, its site and (once a release has been archived) its DOI come from one
place, ``pyproject.toml`` (``[project] version`` and ``[project.urls]``): read from the checkout when there is
one, from the installed package's metadata otherwise. ``CITATION.cff`` and ``.zenodo.json`` carry the same
entry for the companion itself; ``tests/test_kit_citation.py`` checks that they agree with this module.

A figure's entry names the figure (title, id, and the label of its anchor on the page, which is its id), the
companion's version and DOI, the versioned address of the figure's anchor (``<site>/v<version>/<page>.html#<id>``,
kept by every release, see ``_ext/book_release.py``) and the paper it reproduces.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from joma_lib.kit.registry import get_spec

PACKAGE = "joma-companion"
PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
COMPANION_TITLE = "JoMA, worked through: an executable companion to Tian et al. (ICLR 2024)"
COMPANION_AUTHOR = "The JoMA companion contributors"
PAPER = ("Yuandong Tian, Yiping Wang, Zhenyu Zhang, Beidi Chen and Simon S. Du. JoMA: Demystifying Multilayer "
         "Transformers via JOint Dynamics of MLP and Attention. ICLR 2024. arXiv:2310.00535")


@dataclass(frozen=True)
class Project:
    """The companion as ``pyproject.toml`` describes it."""

    version: str
    repository: str
    site: str  # the Pages site, ending in "/"
    doi: str  # "" until a release has been archived (Zenodo) and its DOI written into pyproject.toml

    def versioned_url(self, page: str, anchor: str = "") -> str:
        """The address of ``page`` (``book/fig7.md``) in this version's copy of the site, never moved later."""
        html = re.sub(r"\.(md|ipynb)$", ".html", page)
        return f"{self.site}v{self.version}/{html}" + (f"#{anchor}" if anchor else "")


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
    return Project(version, urls["Repository"], urls["Documentation"].rstrip("/") + "/", doi)


@dataclass(frozen=True)
class FigureCitation:
    """The two forms of one figure's citation."""

    bibtex: str
    text: str

    def as_json(self) -> dict[str, str]:
        return {"bibtex": self.bibtex, "text": self.text}


def _bibtex_escape(value: str) -> str:
    return re.sub(r"([&%$#_])", r"\\\1", value)


def cite(fig_id: str) -> FigureCitation:
    """BibTeX and plain text citing ``fig_id`` in this version of the companion."""
    spec, proj = get_spec(fig_id), project()
    url = proj.versioned_url(spec.chapter, fig_id)
    detail = spec.paper_ref.removeprefix("companion").strip(" ()")
    reproduces = (f"reproducing {spec.paper_ref} of" if not spec.paper_ref.startswith("companion") else
                  f"a companion figure{f' ({detail})' if detail else ''}, not in the paper, to")
    what = f'Figure "{spec.title}" (id {fig_id}, label {fig_id}), {reproduces}'
    key = re.sub(r"[^\w-]", "-", f"joma-companion-{fig_id}-v{proj.version}")
    fields = {
        "title": f"{{{_bibtex_escape(spec.title)}}}",
        "author": f"{{{COMPANION_AUTHOR}}}",
        "howpublished": f"{{{COMPANION_TITLE}, version {proj.version}}}",
        "version": f"{{{proj.version}}}",
        **({"doi": f"{{{proj.doi}}}"} if proj.doi else {}),
        "url": f"{{{url}}}",
        "note": f"{{{_bibtex_escape(what)} {_bibtex_escape(PAPER)}}}",
    }
    width = max(map(len, fields))
    bibtex = "\n".join([f"@misc{{{key},"] + [f"  {k:<{width}} = {v}," for k, v in fields.items()] + ["}"])
    doi = f" doi:{proj.doi}." if proj.doi else ""
    text = (f'{COMPANION_AUTHOR}. {what} {PAPER}. In: {COMPANION_TITLE}, version {proj.version}.{doi} {url}')
    return FigureCitation(bibtex, text)
