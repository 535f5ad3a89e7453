"""benchmarks/ci_cpu.py: each Python process logs its own CPU seconds, and the table sorts them by kind."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("ci_cpu", ROOT / "benchmarks" / "ci_cpu.py")
ci_cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci_cpu)

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"


def _python(log: Path | None, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER", "JOMA_CPU_LOG")}
    environment |= {"PYTHONPATH": str(ci_cpu.SITE), **env}
    if log is not None:
        environment["JOMA_CPU_LOG"] = str(log)
    return subprocess.run([sys.executable, "-c", BURN], env=environment, cwd=cwd, capture_output=True, text=True,
                          check=True, timeout=60)


def test_a_process_logs_its_own_cpu_time_and_the_test_it_ran_under(tmp_path):
    _python(tmp_path, PYTEST_CURRENT_TEST="tests/test_x.py::test_y (call)", PYTEST_XDIST_WORKER="gw1")
    (record,) = ci_cpu.read_log(tmp_path)
    assert 0.3 <= record["cpu"] < 5 and record["argv"].endswith(" -c")
    assert record["test"] == "tests/test_x.py::test_y (call)" and record["worker"] == "gw1"
    assert ci_cpu.kind_of(record) == "make test: processes its tests start"


def test_without_a_log_folder_nothing_is_written(tmp_path):
    done = _python(None, cwd=tmp_path, TMPDIR=str(tmp_path))
    assert not list(tmp_path.iterdir()) and done.stderr == ""


@pytest.mark.parametrize("worker, test, argv, kind", [
    ("gw0", "", "/x/.venv/bin/python -c", "make test: its workers"),
    ("gw0", "tests/t.py::a (call)", "/x/.venv/bin/python -m joma_lib.figures list",
     "make test: processes its tests start"),
    ("", "tests/t.py::a (call)", "/x/.venv/bin/python /x/joma_lib/figures/__main__.py verify c-rerun-quick",
     "trained figures under other numerics (phase 1's test)"),
    ("", "", "/x/.venv/bin/python /x/.venv/lib/python3.11/site-packages/ipykernel_launcher.py -f k.json",
     "book pages (kernels)"),
    ("", "", "/c/venv-1/bin/python /c/venv-1/lib/python3.11/site-packages/ipykernel_launcher.py -f k.json",
     "rehearsal pages (kernels, reader's venv)"),
    ("", "", "/x/.venv/bin/python /x/joma_lib/figures/__main__.py verify c-fig7-quick",
     "trained figures verified beside the book and in the numerics matrix"),
    ("", "", "/x/.venv/bin/python /x/joma_lib/figures/__main__.py verify --from store", "other"),
])
def test_each_kind_of_process_is_told_apart(worker, test, argv, kind):
    assert ci_cpu.kind_of({"worker": worker, "test": test, "argv": argv, "cpu": 1.0}) == kind


def test_the_table_sums_each_kind_and_what_was_not_logged(tmp_path):
    records = [{"pid": i, "cpu": cpu, "wall": 1.0, "argv": argv, "test": test, "worker": worker}
               for i, (cpu, argv, test, worker) in enumerate([
                   (30.0, "py -c", "", "gw0"), (10.0, "py -c", "", "gw1"),
                   (5.0, "py -m x", "tests/t.py::a (call)", "gw0"),
                   (7.0, "py -m x", "tests/t.py::a (setup)", "gw0")])]
    for r in records:
        (tmp_path / f"{r['pid']}.json").write_text(json.dumps(r))
    text = ci_cpu.table(ci_cpu.read_log(tmp_path), wall=40.0, cores=2)
    assert "    40.0      2  make test: its workers" in text
    assert "    12.0      2  make test: processes its tests start" in text
    assert "    52.0      4  logged in all" in text and "    28.0         not logged" in text
    assert "    12.0  tests/t.py::a" in text  # setup and call of one test together


def test_table_refuses_a_log_that_is_not_a_folder(tmp_path, capsys):
    with pytest.raises(SystemExit):
        ci_cpu.main(["table", str(tmp_path / "missing")])
    assert "LOG_DIR must be a folder" in capsys.readouterr().err


def test_the_largest_processes_are_named_without_their_folders():
    argv = "/tmp/ci/clone/.venv/bin/python /tmp/ci/clone/joma_lib/figures/__main__.py verify c-rerun-quick --from /s/t"
    assert ci_cpu.short(argv) == "bin/python figures/__main__.py verify c-rerun-quick --from s/t"


def test_run_refuses_an_existing_clone_folder_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ci_cpu.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.raises(SystemExit):
        ci_cpu.main(["run", "--clone", str(tmp_path)])
    assert "--clone must be a path that does not exist yet" in capsys.readouterr().err
    assert not list((tmp_path / "tmp").iterdir())  # no scratch folder was made
