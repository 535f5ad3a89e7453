"""The start-up frame of every entry point (joma_lib.base.startup): each environment variable the project reads is
declared where it is read and checked at start-up, with its name and allowed values in the error; Ctrl-C and the
usual faults end a command line in one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import joma_lib
import joma_lib.kit  # noqa: F401 - imports every module that declares a variable, as a page does
import joma_lib.lm.authors  # noqa: F401
import joma_lib.lm.data  # noqa: F401
from joma_lib.base import startup

#: a value each declared variable refuses, and one it takes (a folder is the test's tmp_path)
BAD_AND_GOOD = {
    "JOMA_DEVICE": ("tpu", "cpu"),
    "JOMA_PRECISION": ("fp16", "fp32"),
    "ONEDNN_MAX_CPU_ISA": ("bogus", "avx2"),
    "JOMA_PROBE_INJECT": ("boom", "sigill-above:AVX2"),
    "JOMA_CACHE": ("<file>", "<folder>"),
    "JOMA_FIGURE_STORE": ("<file>", "<folder>"),
    "JOMA_OFFICIAL_DIR": ("<file>", "<folder>"),
    "OMP_NUM_THREADS": ("0", "4,2"),
    "MKL_NUM_THREADS": ("abc", "1"),
    "HF_HUB_OFFLINE": ("maybe", "false"),
    "HF_DATASETS_OFFLINE": ("2", "ON"),
    "JOMA_RELEASE_TAG": ("1.0", "v0.1.0"),
}


def _value(text: str, tmp_path: Path) -> str:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    return {"<file>": str(a_file), "<folder>": str(tmp_path)}.get(text, text)


def test_every_variable_read_in_the_library_is_declared():
    source = "\n".join(p.read_text() for p in Path(joma_lib.__file__).parent.rglob("*.py"))
    read = set(re.findall(r"environ(?:\.get)?[\(\[]\s*\"([A-Z][A-Z0-9_]+)\"", source))
    read |= set(re.findall(r"env_flag\(\"([A-Z][A-Z0-9_]+)\"\)", source))
    read |= set(re.findall(r"^[A-Z_]+_ENV = \"([A-Z][A-Z0-9_]+)\"", source, flags=re.M))
    assert read and read <= set(startup.ENV_VARS), sorted(read - set(startup.ENV_VARS))
    assert set(BAD_AND_GOOD) == set(startup.ENV_VARS)


@pytest.mark.parametrize("name", sorted(BAD_AND_GOOD))
def test_a_bad_value_is_refused_at_start_up_naming_the_variable_and_its_allowed_values(name, monkeypatch, tmp_path):
    bad, good = (_value(v, tmp_path) for v in BAD_AND_GOOD[name])
    for other in startup.ENV_VARS:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, bad)
    with pytest.raises(ValueError) as err:
        startup.check_environment()
    message = str(err.value)
    assert message.startswith(f"environment variable {name} ") and bad in message, message
    assert message.count(startup.ENV_VARS[name].allowed) == 1, message  # its allowed values, once
    monkeypatch.setenv(name, good)
    startup.check_environment()
    monkeypatch.setenv(name, "")  # set but empty: as unset
    startup.check_environment()


@pytest.mark.parametrize("value, offline", [("", False), ("0", False), ("false", False), ("No", False), ("1", True),
                                            ("TRUE", True), ("on", True)])
def test_a_flag_reads_yes_and_no_in_any_spelling(monkeypatch, value, offline):
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert startup.env_flag("HF_HUB_OFFLINE") is offline


@pytest.mark.parametrize("fault, code, line", [
    (ValueError("x must be in [0, 1], got 2"), 2, "error: x must be in [0, 1], got 2"),
    (OSError(28, "No space left on device"), 2, "error: [Errno 28] No space left on device"),
    (KeyboardInterrupt("run r stopped at step 5"), 130,
     "interrupted: run r stopped at step 5; it was kept; run the same command again"),
])
def test_a_command_ends_in_one_line(capsys, fault, code, line):
    def body() -> int:
        raise fault

    assert startup.command(body, interrupted="it was kept") == code
    assert capsys.readouterr().err == line + "\n"


@pytest.mark.parametrize("command", [["joma_lib", "doctor"], ["joma_lib", "table1", "--config", "quick"],
                                     ["joma_lib.figures", "list"], ["joma_lib.lm", "status", "--out", "runs"]],
                         ids=" ".join)
def test_every_command_line_refuses_a_bad_variable_in_one_line_before_any_work(command, tmp_path):
    """The package's command lines, each in a fresh process: whatever they import first (the kit checks the
    environment when it is imported), a bad variable ends as one ``error:`` line and exit code 2."""
    env = {k: v for k, v in os.environ.items() if k not in startup.ENV_VARS} | {"JOMA_DEVICE": "tpu"}
    proc = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "error: environment variable JOMA_DEVICE must be one of ['auto', 'cpu', 'cuda'], got 'tpu'"]
    assert not any(tmp_path.iterdir())  # nothing was made


def test_no_module_of_the_library_loads_torchs_compiler_when_imported():
    """``torch._dynamo`` takes ~1.3 s to import, paid by every page, test worker and command line that loads it:
    the library loads it only when it compiles (:func:`~joma_lib.lm.model.trace_mask_constants_as_constant`)."""
    code = ("import importlib, pkgutil, sys, joma_lib\n"
            "for m in pkgutil.walk_packages(joma_lib.__path__, 'joma_lib.'):\n"
            "    if not m.name.endswith('__main__'):\n"
            "        importlib.import_module(m.name)\n"
            "print(sorted(name for name in sys.modules if name.startswith('torch._dynamo')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert proc.stdout.strip() == "[]"


def test_a_deferred_ctrl_c_is_recorded_once_and_a_second_one_raises():
    import os
    import signal
    import threading

    from joma_lib.base.startup import deferred_interrupt

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt() as interrupted:
            os.kill(os.getpid(), signal.SIGINT)
            assert interrupted == [signal.SIGINT]  # recorded, not raised: the caller saves first
            os.kill(os.getpid(), signal.SIGINT)  # a second one: at once
    assert signal.getsignal(signal.SIGINT) is before
    seen: list[list[int]] = []

    def elsewhere() -> None:  # no handler can be set outside the main thread: nothing deferred, nothing changed
        with deferred_interrupt() as interrupted:
            seen.append(interrupted)

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert seen == [[]] and signal.getsignal(signal.SIGINT) is before
