"""CONTRIBUTING.md's recipes, followed literally: their code blocks are read from the guide and applied in
temporary folders ("Add a figure" and "Add a claim" as a chapter package on the chapters' path, "Add a page" on a
copy of the files the book's layout checks read), then the commands or checks each recipe promises are run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import book_layout
import install_cell
import numpy as np
import pytest
import torch

import joma_lib.chapters as chapters_package
from joma_lib.theory.attention_kinds import ATTENTION_KINDS, AttentionKind
from joma_lib.chapters.theorem1.widget import theorem1_live_widget
from joma_lib.kit import harness
from joma_lib.kit.cli import main
from joma_lib.kit.registry import registry

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "CONTRIBUTING.md").read_text()
_BLOCK = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)(?P=fence)$", re.M | re.S)
_MODULES = ("joma_lib.chapters.mypage.figures", "joma_lib.chapters.mypage")


def recipe(title: str) -> str:
    """The text of the recipe ``### <title>``."""
    return GUIDE.split(f"\n### {title}\n", 1)[1].split("\n### ", 1)[0]


def blocks(text: str, lang: str | None = None) -> list[str]:
    """The code blocks of ``text`` (in language ``lang``, if given), without the indentation of their fence."""
    return [re.sub(f"^{m['indent']}", "", m["body"], flags=re.M) for m in _BLOCK.finditer(text)
            if lang is None or m["lang"] == lang]


def page_steps() -> dict[str, str]:
    """``{file: block}`` of "Add a page", in the recipe's order: each step names its file in bold, then its block."""
    parts = re.split(r"^\d+\. \*\*`([^`]+)`\*\*", recipe("Add a page"), flags=re.M)
    return {path: blocks(body)[0] for path, body in zip(parts[1::2], parts[2::2], strict=True)}


@pytest.fixture
def recipe_module(tmp_path, monkeypatch):
    """The recipe's module as joma_lib/chapters/mypage/figures.py, in a temporary folder on the chapters' path;
    ``recipe_module(source)`` (re)writes the module and clears what was imported of it.

    No bytecode of it is written: a rewrite of the same size in the same second would otherwise be imported from
    the first version's (Python checks a .pyc by the source's size and mtime in whole seconds)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    package_dir = tmp_path / "pkg" / "mypage"
    package_dir.mkdir(parents=True)
    (package_dir / "__init__.py").write_text('"""The mypage chapter."""\n')
    monkeypatch.setattr(chapters_package, "__path__", [*chapters_package.__path__, str(package_dir.parent)])
    monkeypatch.setattr(harness, "REFERENCE_DIR", tmp_path / "reference")
    (tmp_path / "reference").mkdir()
    monkeypatch.chdir(tmp_path)  # make writes figures_out/ in the working folder

    def write(source: str) -> Path:
        (package_dir / "figures.py").write_text(source)
        registry.cache_clear()
        for name in _MODULES:
            sys.modules.pop(name, None)
        return tmp_path

    yield write
    registry.cache_clear()
    for name in _MODULES:
        sys.modules.pop(name, None)


FIGURE_MODULE = blocks(recipe("Add a figure"), "python")[0]


def test_add_a_figure(recipe_module, capsys):
    tmp_path = recipe_module(FIGURE_MODULE)
    text = recipe("Add a figure")
    assert "joma_lib/chapters/<page>/figures.py" in text and "from joma_lib.kit.registry import" in FIGURE_MODULE
    assert "`joma_lib.kit`" in text and "joma_lib.chapters.<page>" in text  # what a page imports
    commands = re.findall(r"^\s*\.venv/bin/python -m joma_lib\.figures (.*?)\s*(?:#.*)?$", text, re.M)
    assert [c.split()[0] for c in commands] == ["make", "update", "verify"]
    assert "c-my-decay" in registry()  # found without any central edit
    for command in commands:
        assert main(shlex.split(command)) == 0, command
    assert (tmp_path / "figures_out" / "c-my-decay.png").stat().st_size > 1000
    assert (tmp_path / "reference" / "c-my-decay.npz").is_file()
    assert "c-my-decay" in capsys.readouterr().out

    # verify really compares: data that moved beyond the tolerance fail it
    module = sys.modules["joma_lib.chapters.mypage.figures"]
    original = module.make_decay
    spec = registry()["c-my-decay"]  # frozen dataclass: swap its data function for the check, then restore
    object.__setattr__(spec, "make", lambda **kw: {k: v * (1 + 1e-6) for k, v in original(**kw).items()})
    try:
        assert main(["verify", "c-my-decay"]) == 1
    finally:
        object.__setattr__(spec, "make", original)
    np.testing.assert_allclose(spec.make(rate=0.5)["y"][-1], np.exp(-5.0))


def _claims(capsys, *argv: str) -> tuple[int, dict[str, dict]]:
    capsys.readouterr()
    code = main(["claims", *argv])
    return code, {row["id"]: row for row in json.loads(capsys.readouterr().out)}


def test_add_a_claim(recipe_module, capsys):
    text = recipe("Add a claim")
    (claim,) = blocks(text, "python")
    command = re.search(r"^\s*\.venv/bin/python -m joma_lib\.figures (claims .*?)\s*(?:#.*)?$", text, re.M)[1]
    assert "claims=(" in FIGURE_MODULE
    recipe_module(FIGURE_MODULE.replace("claims=(", "claims=(" + claim, 1))
    code, rows = _claims(capsys, *shlex.split(command)[1:], "--json")
    assert code == 0 and set(rows) == {"my-decay-halved-by-2", "my-decay-small-at-end"}
    row = rows["my-decay-halved-by-2"]
    assert row["verdict"] == "holds" and row["threshold"] == "< 0.5" and row["kind"] == "companion"
    np.testing.assert_allclose(float(row["value"]), np.exp(-1.0), rtol=1e-2)  # linear interpolation at t = 2

    # a claim that the data contradict fails, and fails the command while the book says it holds
    contradicted = claim.replace('"<", 0.5', '"<", 0.3')
    assert contradicted != claim
    recipe_module(FIGURE_MODULE.replace("claims=(", "claims=(" + contradicted, 1))
    code, rows = _claims(capsys, "c-my-decay", "--json")
    assert code == 1 and rows["my-decay-halved-by-2"]["verdict"] == "fails"
    assert 'book_says="fails"' in text  # ... and passes once the book reports it as failing
    reported = contradicted.replace('kind="companion"', 'book_says="fails", kind="companion"')
    recipe_module(FIGURE_MODULE.replace("claims=(", "claims=(" + reported, 1))
    code, rows = _claims(capsys, "c-my-decay", "--json")
    assert code == 0 and rows["my-decay-halved-by-2"]["verdict"] == "fails"


@pytest.fixture
def book_copy(tmp_path) -> Path:
    """A copy of what the layout checks read: `_toc.yml`, the README and the pages."""
    for name in ("_toc.yml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "book", tmp_path / "book", ignore=shutil.ignore_patterns("*.ipynb", "_*"))
    return tmp_path


def apply_page_recipe(root: Path, steps: dict[str, str]) -> None:
    """Each block over the line it starts with (a file that does not exist yet: the block is the file)."""
    for path, block in steps.items():
        target = root / path
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block)
            continue
        lines = target.read_text().splitlines(keepends=True)
        anchor = block.splitlines(keepends=True)[0]
        assert anchor in lines, f"{path} has no line {anchor!r} (the recipe's block starts with it)"
        index = lines.index(anchor)
        target.write_text("".join(lines[:index]) + block + "".join(lines[index + 1:]))


def layout_errors(root: Path) -> list[str]:
    """The checks of tests/test_toc.py and the page rules (tests/test_publishing.py, tests/test_page_template.py)."""
    return (book_layout.toc_errors(root) + book_layout.page_errors(root, "mypage")
            + book_layout.figure_page_errors(root, {"c-my-decay": "book/mypage.md"}))


def test_add_a_page(book_copy):
    steps = page_steps()
    assert list(steps) == ["book/mypage.md", "_toc.yml", "README.md", "book/intro.md",
                           "joma_lib/chapters/mypage/__init__.py"]
    assert book_layout.toc_errors(book_copy) == []  # the copy is the book: its checks pass
    apply_page_recipe(book_copy, steps)
    assert layout_errors(book_copy) == []
    assert "book/mypage.md" in book_layout.content_chapters(book_copy)
    page = (book_copy / "book" / "mypage.md").read_text()
    assert 'show("c-my-decay")' in page and 'check_claims("c-my-decay", data)' in page
    assert install_cell.MARKER in install_cell.with_install_cell(page)  # the book and the notebooks install first
    exported = re.search(r"__all__ = (\[.*\])", steps["joma_lib/chapters/mypage/__init__.py"])[1]
    assert [("joma_lib.chapters.mypage", eval(exported))] == [  # the chapter's surface: what its page imports
        (module, names) for cell in book_layout.code_cells(page)
        for module, names in book_layout.library_imports(cell) if module != book_layout.KIT]


@pytest.mark.parametrize("skipped", ["book/mypage.md", "_toc.yml", "README.md", "book/intro.md",
                                     "joma_lib/chapters/mypage/__init__.py"])
def test_add_a_page_fails_naming_a_skipped_step(book_copy, skipped):
    steps = page_steps()
    del steps[skipped]
    apply_page_recipe(book_copy, steps)
    errors = layout_errors(book_copy)
    assert errors and any(skipped in error for error in errors), errors


@pytest.mark.parametrize(("change", "expected"), [
    (lambda page: page.split("---\n", 2)[2], "no front matter with a kernelspec"),
    (lambda page: install_cell.with_install_cell(page), "spells the install cell"),
    (lambda page: page.replace("from joma_lib.kit import", "from joma_lib.kit.harness import"),
     "imports joma_lib.kit.harness"),
    (lambda page: page.replace("import make_decay", "import _make_decay"), "public names"),
])
def test_a_page_off_the_rules_fails(book_copy, change, expected):
    apply_page_recipe(book_copy, page_steps())
    page = book_copy / "book" / "mypage.md"
    page.write_text(change(page.read_text()))
    assert any(expected in error for error in layout_errors(book_copy))


def test_add_an_attention_kind(monkeypatch, theorem1_holds):
    text = recipe("Add an attention kind")
    (entry,) = blocks(text, "python")
    kinds = eval("{" + entry + "}", {"AttentionKind": AttentionKind, "torch": torch, "np": np})
    assert list(kinds) == ["exp2"]
    for name, kind in kinds.items():
        monkeypatch.setitem(ATTENTION_KINDS, name, kind)
    theorem1_holds("exp2")  # Theorem 1 holds for it
    widget = theorem1_live_widget()
    assert "exp2" in widget.controls["attention"].options  # the widget's menu lists it
    assert widget.update(attention="exp2") > 0.0 and widget.error is None  # and runs it (torch engine: no score)
