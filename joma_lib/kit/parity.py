"""CPU/GPU parity: for each figure, its deviation on a GPU from the CPU reference, against its GPU tolerance.

The table reads a run report (:mod:`joma_lib.kit.drift`) made on a GPU and committed beside the benchmark results:

    JOMA_DEVICE=cuda python -m joma_lib.figures report --out joma_lib/kit/benchmark_results/gpu_verify.json

``verify`` on a GPU compares with the CPU references under each array's GPU tolerance (``Tolerance.gpu_rtol`` /
``gpu_atol``, or the calibrated one), so the report holds exactly what the table shows. Until a report is
committed, :func:`parity_table` says that the table is waiting for one, and how to make it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from joma_lib.kit.drift import checked, deviation_text, read_report

GPU_REPORT = Path(__file__).parent / "benchmark_results" / "gpu_verify.json"
REPORT_COMMAND = "JOMA_DEVICE=cuda python -m joma_lib.figures report --out joma_lib/kit/benchmark_results/gpu_verify.json"


def parity_markdown(path: Path = GPU_REPORT) -> str:
    """The parity table as Markdown (figure, deviation on the GPU against its GPU tolerance, verdict), headed by the
    GPU's name; a sentence saying the table waits for a GPU run when ``path`` does not exist."""
    if not path.exists():
        return ("**Waiting for a GPU run.** No GPU has run `verify` for this version yet, so there is no CPU/GPU "
                "table here. Once the figures have been verified on a GPU and the report committed "
                f"(`{REPORT_COMMAND}`), this section lists, for every figure, how far the GPU's data lie from the CPU "
                "reference, against the tolerance allowed on a GPU.")
    report = read_report(path)
    device = str(report.get("device", ""))
    if not device.startswith("GPU: "):
        raise ValueError(f"{path} was not made on a GPU (device {device!r}); make it with `{REPORT_COMMAND}`")
    figures: dict[str, dict[str, Any]] = report["figures"]
    within = sum(bool(entry.get("passed")) for entry in figures.values())
    lines = [f"On the {device.removeprefix('GPU: ')} (torch {report['packages'].get('torch', '?')}), "
             f"{within} of {len(figures)} figures lie within their GPU tolerance of the CPU reference.", "",
             "| figure | on the GPU, against the CPU reference | verdict |", "|---|---|---|"]
    for fig_id, entry in sorted(figures.items()):
        verdict = ("within tolerance" if entry["passed"] else "**beyond tolerance**") if checked(entry) else (
            "not checked" if "skipped" in entry else "**failed**")
        lines.append(f"| `{fig_id}` | {deviation_text(entry)} | {verdict} |")
    return "\n".join(lines)


def parity_table(path: Path = GPU_REPORT) -> Any:
    """:func:`parity_markdown` for a page (an IPython ``Markdown`` object)."""
    from IPython.display import Markdown

    return Markdown(parity_markdown(path))
