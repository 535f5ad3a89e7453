"""The layout of the code and its tests: one test file per module, modules of at most 450 lines, and test files
that stand alone (no issue numbers for a reader to look up, no imports of other test files).

Every check walks the package or the test folder, so a module added, split or renamed is checked without a list to
keep up to date here.
"""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from pathlib import Path

import pytest

import joma_lib

PACKAGE = Path(joma_lib.__file__).resolve().parent
TESTS = Path(__file__).resolve().parent
MAX_LINES = 450


def modules() -> list[str]:
    """Dotted paths below ``joma_lib`` of every module (``kit.registry``), ``__init__`` and ``__main__`` left out."""
    return sorted(".".join(path.relative_to(PACKAGE).with_suffix("").parts) for path in PACKAGE.rglob("*.py")
                  if path.stem not in ("__init__", "__main__"))


def suites() -> list[Path]:
    return sorted(TESTS.glob("*.py"))


def expected_test_files(module: str) -> list[str]:
    """``kit.registry`` -> ``test_kit_registry.py``; a chapter's module may also be covered by its chapter's file
    (``chapters.theorem1.figures`` -> ``test_chapters_theorem1.py``)."""
    parts = module.split(".")
    names = [f"test_{'_'.join(parts)}.py"]
    if parts[0] == "chapters" and len(parts) == 3:
        names.append(f"test_chapters_{parts[1]}.py")
    return names


@pytest.mark.parametrize("module", modules())
def test_every_module_has_its_test_file(module: str) -> None:
    names = expected_test_files(module)
    assert any((TESTS / name).is_file() for name in names), (
        f"joma_lib.{module} has no test file: add tests/{' or tests/'.join(names)} (moving its tests there)")


@pytest.mark.parametrize("module", modules())
def test_no_module_is_longer_than_450_lines(module: str) -> None:
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    n_lines = len(path.read_text(encoding="utf-8").splitlines())
    assert n_lines <= MAX_LINES, f"joma_lib/{path.relative_to(PACKAGE)} has {n_lines} lines (at most {MAX_LINES})"


@pytest.mark.parametrize("path", suites(), ids=lambda p: p.name)
def test_no_test_file_cites_an_issue_number(path: Path) -> None:
    cited = [f"line {i}: {line.strip()}" for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bissues? \d+", line, flags=re.IGNORECASE)]
    assert not cited, f"{path.name} cites issue numbers; say what is checked instead:\n" + "\n".join(cited)


def imported_modules(path: Path) -> list[str]:
    """Every module a file imports, at any depth (``import a.b``, ``from a import b``, ``from . import b``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found += [base] if node.module else [base + alias.name for alias in node.names]
    return found


@pytest.mark.parametrize("path", suites(), ids=lambda p: p.name)
def test_no_test_file_imports_another(path: Path) -> None:
    local = {p.stem for p in suites()}
    bad = [name for name in imported_modules(path)
           if name.lstrip(".").split(".")[0] in local | {"tests"} or name.startswith(".")]
    assert not bad, f"{path.name} imports {bad}: put shared fixtures and helpers in tests/conftest.py"


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """The walkers themselves: a chapter's module maps to both names, and a relative or direct import is seen."""
    assert expected_test_files("chapters.theorem1.figures") == ["test_chapters_theorem1_figures.py",
                                                                 "test_chapters_theorem1.py"]
    assert expected_test_files("base.ode") == ["test_base_ode.py"]
    assert "kit.registry" in modules() and not any(m.endswith(("__init__", "__main__")) for m in modules())
    sample = tmp_path / "test_x.py"
    sample.write_text("import os\nfrom test_harness import TOY\nfrom . import helpers\n\n"
                      "def f():\n    import conftest\n")
    assert imported_modules(sample) == ["os", "test_harness", ".helpers", "conftest"]


def layers() -> list[str]:
    """The layers of the import contract (``pyproject.toml``), top first: ``__main__ : figures`` gives two."""
    contracts = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layered = next(c for c in contracts["contracts"] if c["id"] == "layers")
    return [name.strip() for layer in layered["layers"] for name in layer.split(":")]


def test_the_top_of_the_package_is_its_layers() -> None:
    """``joma_lib/`` holds ``__init__.py``, ``__main__.py`` and one package per layer of the contract, nothing else;
    each layer's docstring says what it holds and what it may import."""
    top = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and not p.name.endswith(".egg-info"))
    assert top == sorted(["__init__.py", "__main__.py"] + [name for name in layers() if name != "__main__"])
    for name in layers():
        if name != "__main__":
            doc = importlib.import_module(f"joma_lib.{name}").__doc__ or ""
            assert len(doc.split()) >= 15, f"joma_lib/{name}/__init__.py says in a few lines what the layer holds"


def packages() -> list[str]:
    """Every package below joma_lib, dotted (``kit``, ``chapters.theorem1``, ...)."""
    return sorted(".".join(path.parent.relative_to(PACKAGE).parts) for path in PACKAGE.rglob("__init__.py")
                  if path.parent != PACKAGE)


@pytest.mark.parametrize("package", packages())
def test_no_exported_name_is_shadowed_by_a_submodule(package: str) -> None:
    """Every public name of a package is the object it exports, never one of its submodules: once a module
    ``joma_lib.kit.ledger`` was loaded after the function ``ledger`` was bound in ``joma_lib.kit``, Python rebound
    the name to the module, and a page calling ``ledger(...)`` got "'module' object is not callable"."""
    import importlib
    from types import ModuleType

    module = importlib.import_module(f"joma_lib.{package}")
    shadowed = sorted(name for name in getattr(module, "__all__", ())
                      if isinstance(getattr(module, name), ModuleType))
    assert not shadowed, f"joma_lib.{package}.{shadowed} are submodules, not the names it exports: rename one"
