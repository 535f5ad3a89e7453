"""The CPU/GPU parity table (joma_lib.kit.parity): read from a committed GPU run report, or said to be waiting."""

from __future__ import annotations

import pytest

from joma_lib.kit import drift, parity


def _report(device: str) -> dict:
    return {"device": device, "packages": {"torch": "2.9.0+cu128"}, "claims": {}, "figures": {
        "fig4": {"passed": True, "worst_array": "attn", "max_abs_dev": 2.5e-7, "rtol": 1e-4, "atol": 1e-6,
                 "ratio": 0.2, "message": ""},
        "table1": {"passed": False, "worst_array": "acc", "max_abs_dev": 0.2, "rtol": 0.0, "atol": 0.1,
                   "ratio": 2.0, "message": ""},
        "fig6": {"skipped": "InputUnavailableError: the authors' file is not here"}}}


def test_without_a_gpu_run_the_table_says_it_is_waiting(tmp_path):
    text = parity.parity_markdown(tmp_path / "gpu_verify.json")
    assert text.startswith("**Waiting for a GPU run.**") and parity.REPORT_COMMAND in text and "|" not in text
    assert parity.GPU_REPORT.name == "gpu_verify.json" and parity.GPU_REPORT.parent.name == "benchmark_results"


def test_a_committed_gpu_report_becomes_the_table_with_the_gpu_named(tmp_path):
    path = tmp_path / "gpu_verify.json"
    drift.write_report(_report("GPU: NVIDIA H100 80GB HBM3"), path)
    text = parity.parity_markdown(path)
    assert text.startswith("On the NVIDIA H100 80GB HBM3 (torch 2.9.0+cu128), 1 of 3 figures lie within their GPU")
    assert "| `fig4` | largest deviation 2.5e-07 in `attn`, 0.2 x its tolerance (rtol 0.0001, atol 1e-06) | " \
           "within tolerance |" in text
    assert "| `table1` |" in text and "**beyond tolerance**" in text and "| `fig6` |" in text and "not checked" in text
    assert parity.parity_table(path).data == text


def test_a_report_made_on_a_cpu_is_refused(tmp_path):
    path = tmp_path / "gpu_verify.json"
    drift.write_report(_report("CPU: AMD EPYC"), path)
    with pytest.raises(ValueError, match="was not made on a GPU"):
        parity.parity_markdown(path)
