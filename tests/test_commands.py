"""Every shell command shown in the book, the README and CONTRIBUTING does something.

The commands are read from the text: lines (in code blocks or indented) and inline code that start with a command,
joined across ``\\`` continuations and line breaks inside inline code. Each is checked without its side effects:

* ``python -m <module> [subcommand and positionals] --help`` runs in this process (the module is imported once):
  it must exist, exit 0 and print something, and every option the shown command uses must be in that help;
* ``make <target>`` runs as ``make -n`` (make's documented dry run; all targets in one call): the target must exist;
* ``bash <script>`` and ``python <script>``: the script must exist; a test file given to pytest must exist.

Other programs (``jupyter-book``, ``pip``, ...) are not ours and are not run.
"""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "book").glob("*.md")) + [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
_PYTHON = ("python", "python3", ".venv/bin/python")
_STARTS = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\.venv/bin/python3?|python3?|make|bash)\s+\S")
_INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
_SEPARATORS = {"&&", "||", ";", "|"}


def shown_commands(text: str) -> list[str]:
    """The commands a page shows: whole lines that start with one (continuations joined) and inline code spans."""
    found: list[str] = []
    lines = text.splitlines()
    k = 0
    while k < len(lines):
        line = lines[k].strip()
        if _STARTS.match(line):
            while line.endswith("\\") and k + 1 < len(lines):
                k += 1
                line = line[:-1].rstrip() + " " + lines[k].strip()
            found.append(line)
        k += 1
    for span in _INLINE.findall(text):
        span = " ".join(span.split())
        if _STARTS.match(span):
            found.append(span)
    return found


def simple_commands(command: str) -> list[list[str]]:
    """One shown command as its simple commands (split at ``&&``, ``;``, ``|``), comments and ``VAR=value`` gone."""
    tokens = shlex.split(command.replace("$PWD", str(ROOT)), comments=True)
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            parts.append([])
        else:
            parts[-1].append(token)
    result = []
    for part in parts:
        while part and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", part[0]):
            part = part[1:]
        if part:
            result.append(part)
    return result


def all_commands() -> list[tuple[str, list[str]]]:
    """(where, simple command) for every command shown, once each."""
    seen: dict[tuple[str, ...], str] = {}
    for path in SOURCES:
        for command in shown_commands(path.read_text(encoding="utf-8")):
            for part in simple_commands(command):
                seen.setdefault(tuple(part), path.name)
    return [(where, list(part)) for part, where in seen.items()]


def module_help(argv: list[str]) -> tuple[int, str]:
    """``python -m argv[0] argv[1:] --help`` in this process: (exit status, what it printed)."""
    out = io.StringIO()
    status = 0
    old_argv = sys.argv
    sys.argv = [argv[0], *argv[1:], "--help"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module was imported before as a library
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        sys.argv = old_argv
    return status, out.getvalue()


def python_module_checks(part: list[str]) -> list[str]:
    """What is wrong with ``python -m module ...`` (empty when nothing is)."""
    module, args = part[2], part[3:]
    head = []  # subcommand and positionals: everything before the first option
    for arg in args:
        if arg.startswith("-"):
            break
        head.append(arg)
    if module == "pytest":
        return [f"no test file {arg}" for arg in args if arg.startswith("tests/") and not (ROOT / arg).exists()]
    try:
        status, text = module_help([module, *head])
    except ImportError as err:
        return [f"unknown module {module}: {err}"]
    problems = []
    if status != 0:
        problems.append(f"--help exits {status}: {text.strip()[-300:]}")
    if not text.strip():
        problems.append("prints nothing with --help")
    options = {arg.split("=")[0] for arg in args if arg.startswith("-") and arg not in {"-", "--"}}
    for option in sorted(options):
        if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text):
            problems.append(f"unknown option {option}")
    return problems


def checks(part: list[str]) -> list[str]:
    """What is wrong with one simple command (empty when nothing is)."""
    program = part[0]
    if program in _PYTHON and len(part) >= 3 and part[1] == "-m":
        return python_module_checks(part)
    if program in _PYTHON and len(part) >= 2:
        return [] if (ROOT / part[1]).is_file() else [f"no script {part[1]}"]
    if program == "bash" and len(part) >= 2:
        return [] if (ROOT / part[1]).is_file() else [f"no script {part[1]}"]
    if program == "make":
        run = subprocess.run(["make", "-n", *part[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
        return [] if run.returncode == 0 else [f"make -n fails: {run.stderr.strip()[-300:]}"]
    return []


def test_the_extraction_reads_blocks_continuations_and_inline_code():
    text = ("Run\n\n```bash\npython -m joma_lib.lm run --preset x \\\n    --out runs/x   # a comment\n```\n\n"
            "    .venv/bin/python -m joma_lib.figures make table1 --full\n\n"
            "or `python -m joma_lib table1 --config\nfull --device cuda` and `make book && bash .ci/run`;"
            " not `python` alone, nor ``python -m nothing``.\n")
    commands = shown_commands(text)
    assert commands == ["python -m joma_lib.lm run --preset x --out runs/x   # a comment",
                        ".venv/bin/python -m joma_lib.figures make table1 --full",
                        "python -m joma_lib table1 --config full --device cuda", "make book && bash .ci/run"]
    assert simple_commands(commands[0]) == [["python", "-m", "joma_lib.lm", "run", "--preset", "x", "--out", "runs/x"]]
    assert simple_commands("A=1 make book && bash .ci/run") == [["make", "book"], ["bash", ".ci/run"]]


def test_the_checks_catch_a_module_that_prints_nothing_an_unknown_option_and_a_missing_target():
    assert checks(["python", "-m", "joma_lib.no_such_module"])[0].startswith("unknown module")
    assert checks(["python", "-m", "joma_lib", "table1", "--config", "full", "--no-such-option"]) == \
        ["unknown option --no-such-option"]
    assert "prints nothing with --help" in checks(["python", "-m", "joma_lib.base.validation"])  # no command line
    assert checks(["make", "no-such-target"])[0].startswith("make -n fails")
    assert checks(["bash", ".ci/no-such-script"]) == ["no script .ci/no-such-script"]


def test_every_shown_command_runs():
    commands = all_commands()
    assert len(commands) > 20  # the extraction found the pages' commands
    makes = [part for _, part in commands if part[0] == "make"]
    targets = sorted({arg for part in makes for arg in part[1:] if "=" not in arg})
    together = subprocess.run(["make", "-n", *targets], cwd=ROOT, capture_output=True, text=True, timeout=120)
    others = commands if together.returncode else [(w, part) for w, part in commands if part[0] != "make"]
    wrong = [f"{where}: {shlex.join(part)}: {'; '.join(problems)}"
             for where, part in others if (problems := checks(part))]
    assert wrong == []


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_another_torch_is_installed_against_constraints_without_the_torch_pins(tmp_path):
    """The README's `make book TORCH="torch==2.5.1"`: constraints.txt pins torch (and sympy, which older torch
    releases pin to another version), so another torch is installed against a filtered copy written into the venv;
    the default keeps constraints.txt itself."""
    venv = tmp_path / "venv"

    def dry_setup(*overrides: str) -> list[str]:
        run = subprocess.run(["make", "-n", "setup", f"VENV={venv}", *overrides], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, check=True)
        return run.stdout.splitlines()

    default = [line for line in dry_setup() if "/uv pip install " in line]
    assert len(default) == 2 and all(" -c constraints.txt " in line for line in default), default
    assert '"torch==2.13.0"' in default[0] and "torch==2.13.0" in (ROOT / "constraints.txt").read_text().splitlines()

    other = dry_setup("TORCH=torch==2.5.1")
    filtered = venv / "constraints-other-torch.txt"
    installs = [line for line in other if "/uv pip install " in line]
    assert len(installs) == 2 and all(f" -c {filtered} " in line for line in installs), installs
    assert '"torch==2.5.1"' in installs[0]
    (write,) = [line for line in other if line.startswith("grep ")]
    assert other.index(write) < other.index(installs[0])
    venv.mkdir()
    subprocess.run(write, shell=True, cwd=ROOT, check=True, timeout=60)
    kept = filtered.read_text().splitlines()
    pinned = (ROOT / "constraints.txt").read_text().splitlines()
    dropped = {line.split("==")[0] for line in set(pinned) - set(kept)}
    assert dropped == {"torch", "sympy", "mpmath", "networkx"} and set(kept) <= set(pinned)
