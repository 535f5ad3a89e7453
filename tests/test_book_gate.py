"""The strict book build is a gate: a chapter that raises must fail it.

We build a throwaway book with the project's own ``_config.yml`` (same execution and warning settings as
``make book-strict``): once clean (must succeed), once with a cell that raises (must exit non-zero); both with the
notebooks executed one after another (myst-nb) and two at a time ahead of the read (``JOMA_BOOK_JOBS=2``,
_ext/sphinx_execute_ahead.py), which must change nothing but when they run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JB = Path(sys.executable).with_name("jupyter-book")

PAGE = """---
jupytext:
  text_representation: {{extension: .md, format_name: myst, format_version: 0.13}}
kernelspec: {{display_name: Python 3, language: python, name: python3}}
---
# Gate

```{{code-cell}} ipython3
x = 1 + 1
{extra}
```
"""


def _build(tmp_path: Path, extra: str, jobs: str = "") -> subprocess.CompletedProcess:
    book = tmp_path / "book"
    (book / "book").mkdir(parents=True)
    config = (ROOT / "_config.yml").read_text().replace('html_static_path: ["_vendor"]', "html_static_path: []")
    (book / "_config.yml").write_text(config)
    shutil.copy(ROOT / "references.bib", book / "references.bib")
    shutil.copy(ROOT / "pyproject.toml", book / "pyproject.toml")  # the repository URL of _ext/install_cell.py
    shutil.copytree(ROOT / "_ext", book / "_ext", ignore=shutil.ignore_patterns("__pycache__"))  # local extensions
    (book / "_toc.yml").write_text("format: jb-book\nroot: book/intro.md\nchapters:\n  - file: book/gate.md\n"
                                   "  - file: book/second.md\n")
    (book / "book" / "intro.md").write_text("# Intro\n\n```{bibliography}\n```\n")
    (book / "book" / "gate.md").write_text(PAGE.format(extra=extra))
    (book / "book" / "second.md").write_text(PAGE.format(extra="print(x)").replace("# Gate", "# Second"))
    env = {**os.environ, "JOMA_BOOK_JOBS": jobs}
    return subprocess.run([str(JB), "build", str(book), "--all", "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.skipif(not JB.exists(), reason="jupyter-book is not installed in this environment")
@pytest.mark.parametrize("jobs", ["", "2"])
@pytest.mark.parametrize("extra, should_pass", [("", True), ("raise RuntimeError('chapter broke')", False)])
def test_strict_build_fails_exactly_when_a_notebook_raises(tmp_path, extra, should_pass, jobs):
    result = _build(tmp_path, extra, jobs)
    log = result.stdout + result.stderr
    assert (result.returncode == 0) is should_pass, log[-3000:]
    if not should_pass:
        assert "chapter broke" in log
    # the read stops at the first notebook that raises (gate, read first); with jobs, both were executed ahead, two at
    # a time, and the read takes them from the cache, executing only one that failed ahead (which then fails the build)
    if jobs:
        assert "[execute-ahead] executing 2 notebook(s), 2 at a time" in log, log[-3000:]
        assert "book/second: executed in" in log
        assert ("book/gate: executed in" in log) is should_pass
        assert ("book/gate failed (CellExecutionError" in log) is not should_pass
        assert log.count("Using cached notebook") == (2 if should_pass else 0), log[-3000:]
        assert log.count("Executed notebook in") == 0
    else:
        assert "[execute-ahead]" not in log and "Using cached notebook" not in log
        assert log.count("Executed notebook in") == (2 if should_pass else 0)


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_job_count_is_refused_with_its_name(monkeypatch, value):
    from sphinx.errors import ConfigError

    import sphinx_execute_ahead

    monkeypatch.setenv("JOMA_BOOK_JOBS", value)
    with pytest.raises(ConfigError, match=f"JOMA_BOOK_JOBS must be a whole number >= 1.*{value!r}"):
        sphinx_execute_ahead.jobs()


def test_the_ledger_pages_are_executed_last():
    import sphinx_execute_ahead

    order = sphinx_execute_ahead.page_order(["book/conclusion", "book/theorem1", "book/claims", "book/audit"])
    assert order == ["book/audit", "book/theorem1", "book/claims", "book/conclusion"]
