"""``python -m joma_lib table1``: runs, and rejects bad arguments with a usage error."""

from __future__ import annotations

import json

import pytest
import torch

from joma_lib.base.precision import candidates
from joma_lib.theory.table1.cli import main


def test_command_line_runs_and_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", "quick", "--steps", "2", "--seeds", "1", "--device", "cpu", "--no-progress"]) == 0
    assert "L0 trained" in capsys.readouterr().out
    for argv, message in [(["--config", "huge"], "config must be one of"),
                          (["--device", "tpu"], "device must be one of"),
                          (["--seeds", "one"], "seeds must be integers"),
                          (["--steps", "0"], "steps must be"),
                          (["--save", "table.json"], "--save must name an .npz file")]:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_stacked_command_line_stops_resumes_and_saves(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    argv = ["--config", "check", "--steps", "3", "--seeds", "1", "--device", "cpu", "--no-progress", "--stack",
            "--out", str(tmp_path / "run"), "--every", "1"]
    assert main(argv + ["--stop-after", "2", "--stack-size", "2"]) == 0
    assert "stopped after 2 steps" in capsys.readouterr().out
    assert main(argv + ["--stack-size", "2"]) == 0
    assert "L0 trained" in capsys.readouterr().out
    assert main(argv + ["--save", str(tmp_path / "table.npz")]) == 0  # the finished folder, read back
    assert "L0 trained" in capsys.readouterr().out
    assert (tmp_path / "table.npz").exists() and (tmp_path / "table.json").exists()
    for extra, message in [(["--every", "0"], "--every must be an integer in [1, "),
                           (["--stop-after", "13"], "--stop-after must be an integer in [1, 12]"),
                           (["--stack-size", "5"], "--stack-size must be an integer in [1, 4]"),
                           (["--init-only", "x.json"], "--stack trains; --init-only does not")]:
        with pytest.raises(SystemExit) as exit_info:
            main(argv + extra)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
    for argv_bad, message in [(["--out", str(tmp_path)], "--out needs --stack"),
                              (["--stack", "--stop-after", "2"], "--stop-after needs --out"),
                              (["--stack", "--every", "2"], "--every needs --out"),
                              (["--stack-size", "2"], "--stack-size needs --stack"),
                              (["--compile"], "--compile needs --stack"),
                              (["--stack", "--out", str(tmp_path / "table.npz")], "--out must be a folder")]:
        with pytest.raises(SystemExit):
            main(argv_bad)
        assert message in capsys.readouterr().err


def test_precision_is_chosen_recorded_and_refused_by_name(capsys: pytest.CaptureFixture[str], tmp_path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``--precision``: a bad name is a usage error; ``auto`` times the stack's step in each precision this CPU
    runs (fp32, and bf16 where the probe passes), keeps the choice in the cache and records the precision used in
    the result's manifest, where a later call with another precision is refused (its stacks would mix two)."""
    monkeypatch.setenv("JOMA_CACHE", str(tmp_path / "cache"))
    base = ["--config", "check", "--steps", "2", "--seeds", "1", "--device", "cpu", "--no-progress", "--stack"]
    with pytest.raises(SystemExit) as exit_info:
        main(base + ["--precision", "fp16"])
    assert exit_info.value.code == 2
    assert "--precision must be one of ['auto', 'fp32', 'bf16', 'tf32'], got 'fp16'" in capsys.readouterr().err
    out = ["--out", str(tmp_path / "run"), "--save", str(tmp_path / "table.npz")]
    assert main(base + ["--precision", "auto"] + out) == 0
    chosen = json.loads((tmp_path / "table.json").read_text())["config"]["precision"]
    among = candidates(torch.device("cpu"))
    assert chosen in among
    if len(among) == 1:  # a CPU whose bf16 products do not run: nothing to measure, fp32
        return
    assert len(list((tmp_path / "cache").glob("precision-auto-*.json"))) == 1  # measured once, kept
    other = next(p for p in among if p != chosen)
    assert main(base + ["--precision", other] + out) == 2
    assert "holds a finished run of other settings" in capsys.readouterr().err


def test_on_a_cpu_whose_bf16_dies_table1_trains_in_fp32_and_says_so(tmp_path) -> None:
    """A fresh process whose bf16 probe children die by SIGILL (``JOMA_PROBE_INJECT``), empty cache: ``--precision
    bf16`` trains in fp32 with a notice, ``auto`` measures nothing and takes fp32; the manifest records fp32."""
    import os
    import subprocess
    import sys

    from joma_lib.base import cpu

    env = {k: v for k, v in os.environ.items() if k not in (cpu.ISA_ENV, cpu.INJECT_ENV, "JOMA_PRECISION")}
    env |= {"JOMA_CACHE": str(tmp_path / "cache"), cpu.INJECT_ENV: "sigill"}
    base = ["--config", "check", "--steps", "2", "--seeds", "1", "--device", "cpu", "--no-progress", "--stack"]
    for precision in ("bf16", "auto"):
        out = tmp_path / precision
        proc = subprocess.run([sys.executable, "-m", "joma_lib", "table1", *base, "--precision", precision,
                               "--out", str(out), "--save", str(out / "table.npz")],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads((out / "table.json").read_text())["config"]["precision"] == "fp32"
        assert "killed by SIGILL" in proc.stderr or precision == "auto"  # the probe ran once, in the first call
        assert ("cannot run here; this run trains in fp32" in proc.stderr) == (precision == "bf16")
    assert not list((tmp_path / "cache").glob("precision-auto-*.json"))  # one candidate: nothing measured
