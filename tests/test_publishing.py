"""Publishing: the repository URL lives in pyproject.toml only, and everything that names it agrees; the install
cell of the chapters (Colab, Binder, a wheel) is written once, in _ext/install_cell.py, and reaches every notebook."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import install_cell
import nbformat

ROOT = Path(__file__).resolve().parents[1]


def repository_url() -> str:
    """The one source of the repository's address: ``[project.urls] Repository`` of pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


def chapters() -> list[Path]:
    return sorted(p for p in (ROOT / "book").glob("*.md") if "\nkernelspec:" in p.read_text())


def test_config_and_citation_use_the_pyproject_url():
    url = repository_url()
    assert url.startswith("https://github.com/")
    config = (ROOT / "_config.yml").read_text()
    assert re.search(r"^repository:\n  url: (\S+)$", config, re.M).group(1) == url  # type: ignore[union-attr]
    citation = (ROOT / "CITATION.cff").read_text()
    assert re.search(r'^repository-code: "([^"]+)"$', citation, re.M).group(1) == url  # type: ignore[union-attr]


def test_the_install_cell_is_written_once_and_installs_from_the_pyproject_url():
    code = install_cell.install_code()
    assert install_cell.repository_url() == repository_url()
    assert f'"joma-companion @ git+{repository_url()}"' in code and 'os.environ.get("JOMA_WHEEL")' in code
    compile(code, "install cell", "exec")
    for page in (ROOT / "book").glob("*.md"):  # the pages leave it to _ext/install_cell.py
        assert install_cell.MARKER not in page.read_text(), f"{page.name} spells the install cell; remove it"


def _first_import(text: str) -> int:
    return min(i for i in (text.find("from joma_lib"), text.find("import joma_lib")) if i >= 0)


def test_every_chapter_that_imports_joma_lib_is_read_with_the_install_cell_first():
    expected = "```{code-cell} ipython3\n:tags: [remove-cell]\n" + install_cell.install_code()
    pages = [p for p in chapters() if "joma_lib" in p.read_text()]
    assert len(pages) >= 8
    for page in pages:
        text = install_cell.with_install_cell(page.read_text())
        assert 0 <= text.find(expected) < _first_import(text), f"{page.name}: no install cell before joma_lib"
        assert text.find(expected) == text.find("```{code-cell}"), f"{page.name}: the install cell is not the first"
        assert install_cell.with_install_cell(text) == text  # inserted once


def test_every_twin_has_the_install_cell_as_its_first_code_cell(tmp_path):
    pages = chapters()
    install_cell.main(["-o", str(tmp_path), *map(str, pages)])
    for page in pages:
        nb = nbformat.read(tmp_path / f"{page.stem}.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        if not code:  # a page without code (the symbol table) needs no install
            assert "joma_lib" not in page.read_text()
            continue
        assert code[0].source.rstrip("\n") == install_cell.install_code().rstrip("\n"), page.name
        assert code[0].metadata["tags"] == ["remove-cell"]
        assert len(code) == page.read_text().count("```{code-cell}") + 1, page.name


def test_every_twin_writer_uses_the_install_cell_script():
    assert "    install_cell: _ext\n" in (ROOT / "_config.yml").read_text()  # the book
    assert "_ext/install_cell.py $(BOOK_MD)" in (ROOT / "Makefile").read_text()  # make twins
    assert "_ext/install_cell.py -o" in (ROOT / ".ci" / "colab_rehearsal.sh").read_text()  # the rehearsal
    workflow = (ROOT / ".github" / "workflows" / "notebooks.yml").read_text()  # the notebooks branch (Colab)
    assert "python _ext/install_cell.py" in workflow and "jupytext --to ipynb" not in workflow


def test_no_other_file_spells_the_repository_url():
    url = repository_url()
    allowed = {"pyproject.toml", "_config.yml", "CITATION.cff"}
    for path in [*ROOT.glob("*.*"), *(ROOT / "book").glob("*.md"), *(ROOT / "binder").glob("*")]:
        if path.is_file() and path.name not in allowed and path.suffix != ".ipynb":
            text = path.read_text(errors="replace")
            assert url.split("//")[1] not in text, f"{path.name} writes the repository URL; derive it instead"
