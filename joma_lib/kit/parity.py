"""CPU/GPU parity: for each figure, its deviation on a GPU from the CPU reference, against its GPU tolerance.

The table reads a run report (:mod:`joma_lib.kit.drift`) made on a GPU and committed beside the benchmark results:

    JOMA_DEVICE=cuda python -m joma_lib.figures report --out joma_lib/kit/benchmark_results/gpu_verify.json

``verify`` on a GPU compares with the CPU references under each array's GPU tolerance (``Tolerance.gpu_rtol`` /
``gpu_atol``, or the calibrated one), so the report holds exactly what the table shows. A report need not reach
every figure (a GPU loan's ``verify`` may stop at its time limit): the table says how many of the registered
figures it reached and names the others (:func:`parity_coverage`). Until a report is committed,
:func:`parity_table` says that the table is waiting for one, and how to make it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from joma_lib.kit.drift import checked, deviation_text, read_report
from joma_lib.kit.registry import figure_ids

GPU_REPORT = Path(__file__).parent / "benchmark_results" / "gpu_verify.json"
REPORT_COMMAND = ("JOMA_DEVICE=cuda python -m joma_lib.figures report "
                  "--out joma_lib/kit/benchmark_results/gpu_verify.json")


def _gpu_figures(path: Path) -> tuple[str, dict[str, dict[str, Any]]]:
    """The report's device line and its figures; a :class:`ValueError` when it was not made on a GPU."""
    report = read_report(path)
    device = str(report.get("device", ""))
    if not device.startswith("GPU: "):
        raise ValueError(f"{path} was not made on a GPU (device {device!r}); make it with `{REPORT_COMMAND}`")
    return f"{device.removeprefix('GPU: ')} (torch {report['packages'].get('torch', '?')})", report["figures"]


def _split(figures: dict[str, Any], registered: Sequence[str] | None) -> tuple[list[str], list[str]]:
    names = figure_ids() if registered is None else sorted(registered)
    return [f for f in names if f in figures], [f for f in names if f not in figures]


def parity_coverage(path: Path = GPU_REPORT, registered: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """The registered figures (``registered``, default the registry's) that the GPU report at ``path`` reached, and
    those it did not, each sorted; none reached when no report is committed."""
    return _split(_gpu_figures(path)[1] if path.exists() else {}, registered)


def parity_markdown(path: Path = GPU_REPORT, registered: Sequence[str] | None = None) -> str:
    """The parity table as Markdown (figure, deviation on the GPU against its GPU tolerance, verdict), headed by the
    GPU's name and by how many of the registered figures (``registered``, default the registry's) the report reached,
    naming those it did not; a sentence saying the table waits for a GPU run when ``path`` does not exist."""
    if not path.exists():
        return ("**Waiting for a GPU run.** No GPU has run `verify` for this version yet, so there is no CPU/GPU "
                "table here. Once the figures have been verified on a GPU and the report committed "
                f"(`{REPORT_COMMAND}`), this section lists, for every figure, how far the GPU's data lie from the CPU "
                "reference, against the tolerance allowed on a GPU.")
    machine, figures = _gpu_figures(path)
    reached, missing = _split(figures, registered)
    shown = {fig_id: figures[fig_id] for fig_id in reached}
    within = sum(bool(entry.get("passed")) for entry in shown.values())
    head = (f"On the {machine}: {len(reached)} of the {len(reached) + len(missing)} figures reached, of which "
            f"{within} lie within their GPU tolerance of the CPU reference.")
    if exact := [f for f, entry in shown.items() if checked(entry) and entry.get("max_abs_dev") == 0.0]:
        head += (f" {len(exact)} of them agree bit for bit: they read stored runs, or compute on the CPU whatever the "
                 "device, so for them the check is only that they run there.")
    if missing:
        head += " Not reached, waiting for the next GPU run: " + ", ".join(f"`{f}`" for f in missing) + "."
    if stale := sorted(set(figures) - set(reached)):
        head += " No longer registered, left out: " + ", ".join(f"`{f}`" for f in stale) + "."
    lines = [head, "", "| figure | on the GPU, against the CPU reference | verdict |", "|---|---|---|"]
    for fig_id, entry in shown.items():
        verdict = ("within tolerance" if entry["passed"] else "**beyond tolerance**") if checked(entry) else (
            "not checked" if "skipped" in entry else "**failed**")
        lines.append(f"| `{fig_id}` | {deviation_text(entry)} | {verdict} |")
    return "\n".join(lines)


def parity_table(path: Path = GPU_REPORT) -> Any:
    """:func:`parity_markdown` for a page (an IPython ``Markdown`` object)."""
    from IPython.display import Markdown

    return Markdown(parity_markdown(path))
