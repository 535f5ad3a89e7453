"""Publishing: the repository URL lives in pyproject.toml only, and everything that names it agrees."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def repository_url() -> str:
    """The one source of the repository's address: ``[project.urls] Repository`` of pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


def install_cell(url: str) -> str:
    """The install cell every chapter starts with (Colab, Binder, or a wheel named by JOMA_WHEEL)."""
    return ("# Colab / Binder: install the companion's library when it is not importable\n"
            "# (JOMA_WHEEL, if set, names a wheel or requirement to install instead of the repository).\n"
            "import importlib.util, os, subprocess, sys\n"
            'if importlib.util.find_spec("joma_lib") is None:\n'
            f'    source = os.environ.get("JOMA_WHEEL") or "joma-companion @ git+{url}"\n'
            '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", source], check=True)\n')


def chapters() -> list[Path]:
    return sorted(p for p in (ROOT / "book").glob("*.md") if "\nkernelspec:" in p.read_text())


def test_config_and_citation_use_the_pyproject_url():
    url = repository_url()
    assert url.startswith("https://github.com/")
    config = (ROOT / "_config.yml").read_text()
    assert re.search(r"^repository:\n  url: (\S+)$", config, re.M).group(1) == url  # type: ignore[union-attr]
    citation = (ROOT / "CITATION.cff").read_text()
    assert re.search(r'^repository-code: "([^"]+)"$', citation, re.M).group(1) == url  # type: ignore[union-attr]


def test_every_chapter_that_imports_joma_lib_starts_with_the_same_install_cell():
    expected = install_cell(repository_url())
    pages = [p for p in chapters() if "joma_lib" in p.read_text()]
    assert len(pages) >= 8
    for page in pages:
        text = page.read_text()
        first_import = min(i for i in (text.find("from joma_lib"), text.find("import joma_lib")) if i >= 0)
        assert 0 <= text.find(expected) < first_import, (
            f"{page.name}: needs the install cell before it imports joma_lib:\n{expected}")


def test_no_other_file_spells_the_repository_url():
    url = repository_url()
    allowed = {"pyproject.toml", "_config.yml", "CITATION.cff"}
    for path in [*ROOT.glob("*.*"), *(ROOT / "book").glob("*.md"), *(ROOT / "binder").glob("*")]:
        if path.is_file() and path.name not in allowed and path.suffix != ".ipynb":
            text = path.read_text(errors="replace")
            if path.parent.name == "book":
                text = text.replace(install_cell(url), "")
            assert url.split("//")[1] not in text, f"{path.name} writes the repository URL; derive it instead"
