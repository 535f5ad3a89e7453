"""CONTRIBUTING.md's "Add a figure" recipe, followed literally: its example module is written to a temporary
folder on the figure package's path, and its make/update/verify commands are run on it."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

import joma_lib.chapters as chapters_package
from joma_lib.kit import harness
from joma_lib.kit.cli import main
from joma_lib.kit.registry import registry

GUIDE = (Path(__file__).resolve().parents[1] / "CONTRIBUTING.md").read_text()


def recipe_section() -> str:
    return GUIDE.split("### Add a figure", 1)[1].split("\n### ", 1)[0]


@pytest.fixture
def recipe_module(tmp_path, monkeypatch):
    """The recipe's module as joma_lib/chapters/mypage/figures.py, in a temporary folder on the chapters' path."""
    code = re.search(r"```python\n(.*?)```", recipe_section(), flags=re.S).group(1)
    package_dir = tmp_path / "pkg"
    (package_dir / "mypage").mkdir(parents=True)
    (package_dir / "mypage" / "__init__.py").write_text('"""The mypage chapter."""\n')
    (package_dir / "mypage" / "figures.py").write_text("\n".join(line[3:] if line.startswith("   ") else line
                                                     for line in code.splitlines()) + "\n")
    monkeypatch.setattr(chapters_package, "__path__", [*chapters_package.__path__, str(package_dir)])
    monkeypatch.setattr(harness, "REFERENCE_DIR", tmp_path / "reference")
    (tmp_path / "reference").mkdir()
    registry.cache_clear()
    yield tmp_path
    registry.cache_clear()
    for name in ("joma_lib.chapters.mypage.figures", "joma_lib.chapters.mypage"):
        sys.modules.pop(name, None)


def test_add_a_figure_recipe_works_as_written(recipe_module, monkeypatch, capsys):
    tmp_path = recipe_module
    commands = re.findall(r"^\s*\.venv/bin/python -m joma_lib\.figures (.*?)\s*(?:#.*)?$", recipe_section(), re.M)
    assert [c.split()[0] for c in commands] == ["make", "update", "verify"]
    assert "c-my-decay" in registry()  # found without any central edit
    monkeypatch.chdir(tmp_path)  # make writes figures_out/ in the working folder
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
