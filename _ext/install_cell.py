"""The install cell, written once: the hidden code cell that installs ``joma_lib`` where it is not importable.

A reader who opens a chapter on Colab or Binder (the ``.ipynb`` twins of the ``notebooks`` branch) has no
``joma_lib``; the cell installs it from the repository, or from the wheel or requirement named by ``JOMA_WHEEL``
(what ``.ci/colab_rehearsal.sh`` sets). The chapters' sources (``book/*.md``) do not contain the cell; it is
inserted before the first code cell of every MyST notebook that has one:

* in the book, at read time, by this module as a Sphinx extension (``source-read``; enabled in ``_config.yml``
  under ``sphinx: local_extensions:``), so the executed notebook and its download carry it;
* in the twins, by this module as a script: ``python _ext/install_cell.py [-o FOLDER] book/<page>.md ...``
  writes ``<page>.ipynb`` next to each page or into ``FOLDER`` (``make twins``, ``.ci/colab_rehearsal.sh``,
  ``.github/workflows/notebooks.yml``).

The repository's address comes from ``[project.urls] Repository`` of ``pyproject.toml``, its one source.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[1]
MARKER = "# Colab / Binder: install the companion's library when it is not importable"
"""The cell's first line: how a notebook that already has the cell is recognised."""
CODE = MARKER + """
# (JOMA_WHEEL, if set, names a wheel or requirement to install instead of the repository).
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("joma_lib") is None:
    source = os.environ.get("JOMA_WHEEL") or "joma-companion @ git+{url}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", source], check=True)
"""
"""The cell's code; ``{url}`` is the repository's address."""
_FRONT_MATTER = re.compile(r"\A---\n(.*?\n)---\n", re.S)
_FIRST_CODE_CELL = re.compile(r"^```\{code-cell\}", re.M)


def repository_url(root: Path = ROOT) -> str:
    """``[project.urls] Repository`` of ``pyproject.toml``."""
    url: str = tomllib.loads((root / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    return url


def install_code(url: str | None = None) -> str:
    """The install cell's code (for the repository at ``url``; default: :func:`repository_url`)."""
    return CODE.format(url=repository_url() if url is None else url)


def is_notebook(text: str) -> bool:
    """Whether ``text`` is a MyST notebook: front matter with a ``kernelspec``."""
    front = _FRONT_MATTER.match(text)
    return front is not None and re.search(r"^kernelspec:", front.group(1), re.M) is not None


def with_install_cell(text: str, url: str | None = None) -> str:
    """``text`` (a page's MyST source) with the install cell before its first code cell.

    Unchanged when ``text`` is not a MyST notebook, has no code cell, or already has the cell.
    """
    first = _FIRST_CODE_CELL.search(text)
    if not is_notebook(text) or first is None or MARKER in text:
        return text
    cell = "```{code-cell} ipython3\n:tags: [remove-cell]\n" + install_code(url) + "```\n\n"
    return text[:first.start()] + cell + text[first.start():]


def write_twin(page: Path, folder: Path | None = None) -> Path:
    """Write the ``.ipynb`` twin of ``page`` (a MyST notebook), install cell included, into ``folder``
    (default: next to the page); return its path."""
    import jupytext

    notebook = jupytext.reads(with_install_cell(page.read_text()), fmt="md:myst")
    out = (page.parent if folder is None else folder) / f"{page.stem}.ipynb"
    jupytext.write(notebook, out, fmt="ipynb")
    return out


def _source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    source[0] = with_install_cell(source[0])


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point."""
    app.connect("source-read", _source_read)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: list[str] | None = None) -> None:
    """Command line: write the ``.ipynb`` twins of the pages named."""
    parser = argparse.ArgumentParser(description="write the .ipynb twins of MyST pages, with the install cell")
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="folder for the twins (default: next to each page)")
    args = parser.parse_args(argv)
    for page in args.pages:
        write_twin(page, args.output)


if __name__ == "__main__":
    main()
