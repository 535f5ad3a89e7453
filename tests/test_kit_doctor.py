"""``python -m joma_lib doctor``: a dozen lines, exit 0, and the probe's verdict, on a good and a failing CPU."""

import os
import subprocess
import sys

from joma_lib.base import cpu


def _doctor(tmp_path, **env):
    clean = {k: v for k, v in os.environ.items() if k not in (cpu.ISA_ENV, cpu.INJECT_ENV, "JOMA_PRECISION")}
    proc = subprocess.run([sys.executable, "-m", "joma_lib", "doctor"], capture_output=True, text=True, timeout=600,
                          env={**clean, "JOMA_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1", **env})
    lines = proc.stdout.splitlines()
    return proc.returncode, dict(line.split(":", 1) for line in lines), lines


def test_doctor_reports_every_item_in_a_dozen_lines_and_exits_0(tmp_path):
    rc, rows, lines = _doctor(tmp_path, JOMA_PRECISION="fp32")
    assert rc == 0 and len(lines) <= 14
    assert [name for name in rows] == ["python", "torch", "cpu", "bf16 probe", "probe cache", "oneDNN ceiling",
                                       "precision auto", "gpu", "threads", "authors' files", "hugging face hub"]
    assert rows["bf16 probe"].strip().startswith(("bf16 usable", "bf16 unusable"))
    assert rows["precision auto"].strip() == "fp32 (JOMA_PRECISION is set)"
    assert rows["hugging face hub"].strip() == "not asked (HF_HUB_OFFLINE is set)"
    assert "could not tell" not in "\n".join(lines)


def test_doctor_on_a_cpu_whose_bf16_dies_reports_the_sigill_and_picks_fp32(tmp_path):
    rc, rows, _ = _doctor(tmp_path, **{cpu.INJECT_ENV: "sigill"})
    assert rc == 0
    assert "DEFAULT: killed by SIGILL" in rows["bf16 probe"] and "fall back to fp32" in rows["bf16 probe"]
    assert rows["precision auto"].strip() == "fp32 (bf16 cannot run here)"
    assert rows["oneDNN ceiling"].strip() == "DEFAULT"
