"""The book's layout checks, written once and parameterised by a root folder.

``_toc.yml`` is the one list of the book's pages; the README's chapter table, the intro's map and the figure
registry must agree with it, and every page is a MyST notebook that leaves the install cell to
``_ext/install_cell.py`` and imports only the kit and its own chapter package. ``tests/test_toc.py`` runs these
checks on the repository, ``tests/test_contributing.py`` on a copy to which the "Add a page" recipe of
CONTRIBUTING.md was applied. Each check returns a list of errors (empty: it passes), and each error names the
file to fix.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # no stubs in the dev requirements

import install_cell

REFERENCE_PART = "Reference"
"""The ``_toc.yml`` part of the reproduction guide, the claims ledger, ... : pages that are not chapters."""
KIT = "joma_lib.kit"


def toc_chapters(root: Path) -> dict[str, list[str]]:
    """``{part caption: [page files]}`` of ``root/_toc.yml``, in its order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    return {part["caption"]: [ch["file"] for ch in part["chapters"]] for part in toc["parts"]}


def toc_pages(root: Path) -> set[str]:
    """Every page of the book: the root page and the pages of every part."""
    root_page: str = yaml.safe_load((root / "_toc.yml").read_text())["root"]
    return {root_page} | {f for files in toc_chapters(root).values() for f in files}


def content_chapters(root: Path) -> list[str]:
    """The chapters (pages of every part but the Reference part), in ``_toc.yml`` order."""
    return [f for caption, files in toc_chapters(root).items() if caption != REFERENCE_PART for f in files]


def _differences(what: str, listed: Iterable[str], chapters: list[str], ordered: bool = True) -> list[str]:
    listed = list(listed)
    errors = [f"{what} lacks {page}, which _toc.yml lists" for page in chapters if page not in listed]
    errors += [f"{what} lists {page}, which _toc.yml does not" for page in listed if page not in chapters]
    if ordered and not errors and listed != chapters:
        errors.append(f"{what} lists the chapters in another order than _toc.yml: {listed}")
    return errors


def missing_pages(root: Path) -> list[str]:
    """Pages that ``_toc.yml`` lists but that do not exist."""
    return [f"_toc.yml lists {page}, which does not exist" for page in sorted(toc_pages(root))
            if not (root / page).is_file()]


def pages_outside_toc(root: Path) -> list[str]:
    """MyST notebooks of ``book/`` that ``_toc.yml`` does not list (the book would build them as orphans)."""
    pages = toc_pages(root)
    return [f"_toc.yml does not list {page.relative_to(root).as_posix()}"
            for page in sorted((root / "book").glob("*.md"))
            if install_cell.is_notebook(page.read_text()) and page.relative_to(root).as_posix() not in pages]


def readme_errors(root: Path) -> list[str]:
    """The README's chapter table (rows ``| `book/<page>.md` | ...``) lists exactly the chapters, in order."""
    rows = re.findall(r"^\| `(book/[\w.]+\.md)` \|", (root / "README.md").read_text(), flags=re.M)
    return _differences("README.md's chapter table", rows, content_chapters(root))


def intro_map_errors(root: Path) -> list[str]:
    """The intro's map (the ``{doc}`` links of its tables) covers exactly the chapters."""
    intro = (root / "book" / "intro.md").read_text()
    table = "\n".join(line for line in intro.splitlines() if line.startswith("|"))
    mapped = {f"book/{name}.md" for name in re.findall(r"\{doc\}`(\w+)`", table)}
    return _differences("book/intro.md's map", sorted(mapped), content_chapters(root), ordered=False)


def figure_page_errors(root: Path, chapters_of_figures: dict[str, str]) -> list[str]:
    """Every figure (``{fig_id: FigureSpec.chapter}``) is shown by a page of ``_toc.yml``."""
    pages = toc_pages(root)
    return [f"figure {fig_id}: its chapter {page} is not in _toc.yml"
            for fig_id, page in chapters_of_figures.items() if page not in pages]


def toc_errors(root: Path) -> list[str]:
    """Every check of the page list: the pages exist, and the README's table and the intro's map agree."""
    return missing_pages(root) + pages_outside_toc(root) + readme_errors(root) + intro_map_errors(root)


def library_imports(source: str) -> list[tuple[str, list[str]]]:
    """``(module, imported names)`` of every import of ``joma_lib`` in a code cell (magics and shell lines
    dropped)."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom):
            found.append(("." * node.level + (node.module or ""), [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return [(module, names) for module, names in found if module.split(".")[0] == "joma_lib"]


def code_cells(text: str) -> list[str]:
    """The sources of the ``{code-cell}`` blocks of a MyST notebook."""
    return re.findall(r"^```\{code-cell\}[^\n]*\n(?::[^\n]*\n)*(.*?)^```", text, flags=re.M | re.S)


def page_errors(root: Path, page: str) -> list[str]:
    """``root/book/<page>.md`` is a MyST notebook (jupytext + kernelspec front matter) that leaves the install
    cell to ``_ext/install_cell.py``, imports public names of ``joma_lib.kit`` and of its own chapter package only,
    and that package exists (``joma_lib/chapters/<page>/__init__.py``)."""
    path = f"book/{page}.md"
    if not (root / path).is_file():
        return [f"{path} does not exist"]
    text = (root / path).read_text()
    if not install_cell.is_notebook(text):
        return [f"{path} has no front matter with a kernelspec: copy the header of an existing chapter"]
    errors = [f"{path} spells the install cell; _ext/install_cell.py inserts it"] if install_cell.MARKER in text else []
    chapter = f"joma_lib.chapters.{page}"
    for cell in code_cells(text):
        for module, names in library_imports(cell):
            if module not in (KIT, chapter):
                errors.append(f"{path} imports {module}; a page imports from {KIT} and {chapter} only")
            if not names or any(name.startswith("_") for name in names):
                errors.append(f"{path} imports {module} {names}: import its public names")
            if module == chapter and not (root / "joma_lib" / "chapters" / page / "__init__.py").is_file():
                errors.append(f"{path} imports {chapter}, which has no joma_lib/chapters/{page}/__init__.py")
    return errors
