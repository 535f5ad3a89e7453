"""The bf16 capability probe (joma_lib.base.cpu) and the fallbacks it drives, proven by injected faults.

The machine running these tests may well run bf16 fine, so the failures are injected
(``JOMA_PROBE_INJECT``): a probe child that dies by SIGILL, on every oneDNN level or only above one. Each
scenario runs in a fresh Python process, as a user's would: oneDNN reads its instruction-set ceiling once,
at its first use, so a limit can only be proven in a process that has not used it yet.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from joma_lib.base import cpu

# A tiny bf16 run (2 layers, 12 steps) trained to the end; prints its result metadata as JSON.
TINY_RUN = textwrap.dedent("""
    import json, sys
    from joma_lib.lm.data import load_lm_data
    from joma_lib.lm.config import RunConfig
    from joma_lib.lm.step import train_run
    cfg = RunConfig(data="ptb", n_layers=2, lr=3e-3, seed=5, steps=12, eval_interval=4, eval_chunks=2, seq_len=10,
                    batch_size=4, eval_batch_size=3, max_vocab=200, d=16, d_ff=16, precision=sys.argv[2])
    data = load_lm_data("ptb", 4, 3, 200, max_train_fraction=0.01)
    result = train_run(cfg, sys.argv[1], device="cpu", progress=False, data=data)
    assert result is not None and result["val_loss"].shape == (4,)
    print(json.dumps(json.loads((__import__("pathlib").Path(sys.argv[1]) / cfg.name / "result.json").read_text())))
""")


def _run(tmp_path: Path, precision: str = "bf16", **env: str) -> tuple[dict, str]:
    """Train the tiny run in a fresh process with ``env`` and an empty cache; (result metadata, stderr)."""
    clean = {k: v for k, v in os.environ.items() if k not in (cpu.ISA_ENV, cpu.INJECT_ENV, "JOMA_PRECISION")}
    proc = subprocess.run([sys.executable, "-c", TINY_RUN, str(tmp_path / "runs"), precision],
                          env={**clean, "JOMA_CACHE": str(tmp_path / "cache"), **env}, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_a_probe_that_dies_by_sigill_everywhere_falls_back_to_fp32_with_a_notice(tmp_path):
    meta, stderr = _run(tmp_path, **{cpu.INJECT_ENV: "sigill"})
    assert meta["precision_used"] == "fp32" and meta["config"]["precision"] == "bf16"
    notices = [line for line in stderr.splitlines() if line.startswith("joma_lib:")]
    assert any("killed by SIGILL" in line and "fall back to fp32" in line for line in notices), stderr[-1000:]
    assert any("cannot run here; this run trains in fp32" in line for line in notices)
    verdict = json.loads(next((tmp_path / "cache").glob("bf16-probe-*.json")).read_text())
    assert not verdict["usable"] and len(verdict["attempts"]) == len(cpu.ISA_LEVELS)


def test_a_probe_that_dies_above_avx512_bf16_limits_onednn_in_process_and_trains_in_bf16(tmp_path):
    meta, stderr = _run(tmp_path, **{cpu.INJECT_ENV: "sigill-above:AVX512_CORE_BF16"})
    probe = json.loads(next((tmp_path / "cache").glob("bf16-probe-*.json")).read_text())
    assert probe["attempts"][0] == "DEFAULT: killed by SIGILL"
    if not probe["usable"]:  # this CPU cannot run bf16 under any ceiling: then fp32, as above
        assert meta["precision_used"] == "fp32"
        return
    assert probe["isa_limit"] == "AVX512_CORE_BF16" and "AMX" not in probe["onednn_isa"]
    assert meta["precision_used"] == "bf16" and meta["onednn_isa_limit"] == "AVX512_CORE_BF16"
    assert "oneDNN limited to AVX512_CORE_BF16" in stderr


@pytest.mark.parametrize("level", ["AVX2", "AVX512_CORE"])
def test_a_tiny_bf16_run_completes_under_a_user_set_onednn_ceiling(tmp_path, level):
    meta, _ = _run(tmp_path, **{cpu.ISA_ENV: level})
    probe = json.loads(next((tmp_path / "cache").glob("bf16-probe-*.json")).read_text())
    assert [a.split(":")[0] for a in probe["attempts"]] == [level]  # the user's ceiling alone is tried
    assert meta["onednn_isa_limit"] == level
    assert meta["precision_used"] == ("bf16" if probe["usable"] else "fp32")


def test_the_verdict_is_cached_per_machine_and_a_second_call_does_not_probe(tmp_path, monkeypatch):
    monkeypatch.setenv("JOMA_CACHE", str(tmp_path))
    monkeypatch.setenv(cpu.INJECT_ENV, "sigill")
    monkeypatch.setattr(cpu, "_applied", None)
    first = cpu.bf16_support()
    assert not first.usable and cpu.cache_file().exists()
    monkeypatch.setattr(cpu, "_applied", None)
    monkeypatch.setattr(cpu, "run_probe", lambda: pytest.fail("probed again despite the cached verdict"))
    assert cpu.bf16_support() == first
    monkeypatch.setenv(cpu.INJECT_ENV, "")  # another key (as another CPU or torch would be): another file
    assert cpu.cache_file() != next(tmp_path.glob("bf16-probe-*.json"))


def test_the_verdict_records_whether_pytorch_runs_bf16_products_on_onednn(tmp_path, monkeypatch):
    """``accelerated`` is PyTorch's own check, asked in the probe child, stored with the verdict, and said in the
    summary where bf16 runs only on PyTorch's reference kernels."""
    monkeypatch.setenv("JOMA_CACHE", str(tmp_path))
    for name in (cpu.ISA_ENV, cpu.INJECT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cpu, "_applied", None)
    verdict = cpu.bf16_support()
    ceiling = {cpu.ISA_ENV: verdict.isa_limit} if verdict.usable else {}
    asked = subprocess.run([sys.executable, "-c", "import torch; print(torch.ops.mkldnn._is_mkldnn_bf16_supported())"],
                           capture_output=True, text=True, timeout=300, env={**os.environ, **ceiling})
    assert verdict.accelerated == (verdict.usable and asked.stdout.strip() == "True")
    assert json.loads(cpu.cache_file().read_text())["accelerated"] == verdict.accelerated
    ok = cpu.Bf16Support(True, "DEFAULT", "", ("DEFAULT: ok",), accelerated=True)
    assert "reference kernels" not in ok.summary()
    slow = cpu.Bf16Support(True, "DEFAULT", "", ("DEFAULT: ok",), accelerated=False)
    assert slow.summary().endswith("but only on PyTorch's reference kernels: far slower than fp32")


def test_the_default_numerics_are_the_avx2_fp32_variant_only_without_avx512_and_accelerated_bf16(monkeypatch):
    monkeypatch.delenv(cpu.ISA_ENV, raising=False)
    for capability, accelerated, same in (("AVX2", False, True), ("AVX2", True, False), ("AVX512", False, False),
                                          ("DEFAULT", False, False)):
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda c=capability: c)
        monkeypatch.setattr(cpu, "_applied", cpu.Bf16Support(True, "DEFAULT", "", ("DEFAULT: ok",), accelerated))
        assert cpu.default_numerics_are_avx2_fp32() is same, (capability, accelerated)
    monkeypatch.setenv(cpu.ISA_ENV, "AVX2")  # a ceiling someone set: the default is not the machine's own
    assert not cpu.default_numerics_are_avx2_fp32()


def test_a_bad_injection_value_is_refused_by_the_child(tmp_path):
    env = {**os.environ, cpu.INJECT_ENV: "sigill-above:AMX"}
    proc = subprocess.run([sys.executable, "-m", "joma_lib.base.cpu", "--child"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0 and "sigill-above:<DEFAULT|AVX512_CORE_BF16|AVX512_CORE|AVX2>" in proc.stderr
