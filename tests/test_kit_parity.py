"""The CPU/GPU parity table (joma_lib.kit.parity): read from a committed GPU run report, or said to be waiting; it
says how many of the registered figures the report reached."""

from __future__ import annotations

import pytest

from joma_lib.kit import drift, parity
from joma_lib.kit.registry import figure_ids

REGISTERED = ["fig4", "fig6", "table1"]


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
    text = parity.parity_markdown(path, REGISTERED)
    assert text.startswith("On the NVIDIA H100 80GB HBM3 (torch 2.9.0+cu128): 3 of the 3 figures reached, of which 1 "
                           "lie within their GPU tolerance")
    assert "Not reached" not in text and "bit for bit" not in text
    assert "| `fig4` | largest deviation 2.5e-07 in `attn`, 0.2 x its tolerance (rtol 0.0001, atol 1e-06) | " \
           "within tolerance |" in text
    assert "| `table1` |" in text and "**beyond tolerance**" in text and "| `fig6` |" in text and "not checked" in text
    assert parity.parity_table(path).data == parity.parity_markdown(path)


def test_a_report_cut_short_says_how_many_of_the_registered_figures_it_reached(tmp_path):
    path = tmp_path / "gpu_verify.json"
    drift.write_report(_report("GPU: NVIDIA H200"), path)
    registered = ["fig2a", *REGISTERED, "fig8"]
    text = parity.parity_markdown(path, registered)
    assert text.startswith("On the NVIDIA H200 (torch 2.9.0+cu128): 3 of the 5 figures reached, of which 1 lie within")
    assert "Not reached, waiting for the next GPU run: `fig2a`, `fig8`." in text and "| `fig8` |" not in text
    assert parity.parity_coverage(path, registered) == (REGISTERED, ["fig2a", "fig8"])
    # a figure the report holds that is no longer registered is named, not counted
    text = parity.parity_markdown(path, ["fig4", "fig6"])
    assert "2 of the 2 figures reached, of which 1 lie" in text and "No longer registered, left out: `table1`." in text
    assert "| `table1` |" not in text
    # without a report nothing is reached; by default the registry's figures are counted
    assert parity.parity_coverage(tmp_path / "none.json", registered) == ([], sorted(registered))
    assert parity.parity_coverage(tmp_path / "none.json") == ([], figure_ids())


def test_figures_that_agree_bit_for_bit_are_counted_as_not_computed_by_the_gpu(tmp_path):
    report = _report("GPU: NVIDIA H200")
    report["figures"]["fig4"]["max_abs_dev"] = 0.0
    drift.write_report(report, tmp_path / "gpu_verify.json")
    text = parity.parity_markdown(tmp_path / "gpu_verify.json", REGISTERED)
    assert "1 lie within their GPU tolerance of the CPU reference. 1 of them agree bit for bit" in text


def test_the_committed_gpu_report_counts_the_registry():
    reached, missing = parity.parity_coverage()
    assert reached and sorted(reached + missing) == figure_ids()
    assert f"{len(reached)} of the {len(figure_ids())} figures reached" in parity.parity_markdown()


def test_a_report_made_on_a_cpu_is_refused(tmp_path):
    path = tmp_path / "gpu_verify.json"
    drift.write_report(_report("CPU: AMD EPYC"), path)
    with pytest.raises(ValueError, match="was not made on a GPU"):
        parity.parity_markdown(path)
