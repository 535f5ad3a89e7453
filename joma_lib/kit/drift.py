"""Run reports, and the drift alarm that compares two of them.

A *run report* (:func:`run_report`; ``python -m joma_lib.figures report --out FILE``) records what ``verify`` and
``claims`` find in one environment: for every figure its largest deviation from the committed reference and the
tolerance it was measured against (or why it could not be checked), every claim's verdict, the device and the
installed packages' versions.

The weekly drift alarm (``.github/workflows/drift.yml``) makes two reports of the same commit, one with the
pinned dependencies (``constraints.txt``) and one with their newest releases, and :func:`compare_reports` them: a
figure that is within its tolerance when pinned and beyond it (or fails) with the newest releases has drifted, a
claim whose verdict differs has changed, and the packages whose versions differ are the suspects.
:func:`issue_text` writes the issue that names them (``python -m joma_lib.figures drift PINNED NEWEST``).

The same report, made on a GPU (``JOMA_DEVICE=cuda``) and committed, feeds the CPU/GPU parity table
(:mod:`joma_lib.kit.parity`).
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from joma_lib.base.device import on_gpu
from joma_lib.base.io import InputUnavailableError, atomic_path
from joma_lib.kit.claims import error_text, evaluate_figure, online_results
from joma_lib.kit.harness import compare_with_reference, stored_or_computed
from joma_lib.kit.receipts import device_name
from joma_lib.kit.registry import figure_ids

ISSUE_TITLE = "Drift alarm: figures or claims move with the newest releases of the dependencies"
ISSUE_LABEL = "drift-alarm"
KEY_PACKAGES = ("torch", "numpy", "scipy", "matplotlib")
"""Listed first among the packages that moved: the ones the figures' numbers depend on most."""


def run_report(ids: list[str] | None = None, store: Path | None = None) -> dict[str, Any]:
    """What ``verify`` and ``claims`` find here for ``ids`` (all figures when None), with the device and the
    installed packages. Data kept in ``store`` (a figure store) are compared instead of being computed again."""
    figures: dict[str, dict[str, Any]] = {}
    claims: dict[str, dict[str, Any]] = {}
    for fig_id in ids or figure_ids():
        try:
            data, _ = stored_or_computed(fig_id, store)
            comparison = compare_with_reference(fig_id, data)
            rows = evaluate_figure(fig_id, data)
        except InputUnavailableError as err:
            figures[fig_id] = {"skipped": error_text(err)}
            continue
        except Exception as err:  # noqa: BLE001 - a figure that raises is a finding, the others are still checked
            figures[fig_id] = {"error": error_text(err)}
            continue
        figures[fig_id] = {k: v for k, v in asdict(comparison).items() if k != "fig_id"}
        claims.update({r.claim_id: r.as_json() for r in rows})
    if ids is None:
        claims.update({r.claim_id: r.as_json() for r in online_results()})
    packages = {dist.metadata["Name"].lower().replace("_", "-"): dist.version for dist in metadata.distributions()}
    return {"device": device_name("cuda" if on_gpu() else "cpu"), "python": platform.python_version(),
            "packages": dict(sorted(packages.items())), "figures": figures, "claims": claims}


def write_report(report: dict[str, Any], path: Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")


def read_report(path: Path) -> dict[str, Any]:
    """A run report written by :func:`write_report`; a :class:`ValueError` naming the file otherwise."""
    try:
        report = json.loads(Path(path).read_text())
        if not all(isinstance(report.get(key), dict) for key in ("packages", "figures", "claims")):
            raise ValueError("it lacks 'packages', 'figures' or 'claims'")
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} is not a run report (python -m joma_lib.figures report --out FILE): {err}") from None
    return dict(report)


def checked(entry: dict[str, Any]) -> bool:
    """The figure was compared with its reference (not skipped, did not raise)."""
    return "ratio" in entry


def within(entry: dict[str, Any]) -> bool:
    """The figure was compared and is within its tolerance."""
    return checked(entry) and bool(entry["passed"])


@dataclass(frozen=True)
class Drift:
    """What moved between a pinned run and a newest run of the same commit."""

    figures: list[tuple[str, dict[str, Any], dict[str, Any]]]  # (figure id, pinned entry, newest entry)
    claims: list[tuple[str, dict[str, Any], dict[str, Any]]]  # (claim id, pinned row, newest row)
    packages: list[tuple[str, str, str]]  # (name, pinned version, newest version); "-" when absent
    failing_both: list[str]  # figures out of tolerance (or raising) already with the pinned dependencies

    def __bool__(self) -> bool:
        return bool(self.figures or self.claims)


def compare_reports(pinned: dict[str, Any], newest: dict[str, Any]) -> Drift:
    """Figures within tolerance when pinned but not with the newest releases, claims whose verdict differs, and the
    packages whose versions differ (:data:`KEY_PACKAGES` first)."""
    figures = [(fig_id, pinned["figures"][fig_id], entry) for fig_id, entry in sorted(newest["figures"].items())
               if fig_id in pinned["figures"] and within(pinned["figures"][fig_id]) and not within(entry)
               and "skipped" not in entry]
    failing_both = sorted(fig_id for fig_id, entry in pinned["figures"].items()
                          if not within(entry) and "skipped" not in entry)
    claims = [(claim_id, pinned["claims"][claim_id], row) for claim_id, row in sorted(newest["claims"].items())
              if claim_id in pinned["claims"] and row["verdict"] != pinned["claims"][claim_id]["verdict"]
              and "not-run" not in (row["verdict"], pinned["claims"][claim_id]["verdict"])]
    names = set(pinned["packages"]) | set(newest["packages"])
    moved = [(name, pinned["packages"].get(name, "-"), newest["packages"].get(name, "-")) for name in names
             if pinned["packages"].get(name) != newest["packages"].get(name)]
    moved.sort(key=lambda m: (KEY_PACKAGES.index(m[0]) if m[0] in KEY_PACKAGES else len(KEY_PACKAGES), m[0]))
    return Drift(figures, claims, moved, failing_both)


def deviation_text(entry: dict[str, Any]) -> str:
    """One figure's finding in a report: its deviation against its tolerance, or why it was not compared."""
    if not checked(entry):
        return entry.get("error") or entry.get("skipped") or "not checked"
    if entry.get("message"):
        return f"{entry['message']} (array {entry['worst_array']})"
    return (f"largest deviation {entry['max_abs_dev']:.3g} in `{entry['worst_array']}`, "
            f"{entry['ratio']:.3g} x its tolerance (rtol {entry['rtol']:.1g}, atol {entry['atol']:.1g})")


def issue_text(drift: Drift, pinned: dict[str, Any], newest: dict[str, Any], run_url: str = "") -> str:
    """The body of the drift-alarm issue (Markdown): which figures drifted and by how much, which claims changed
    verdict, and which packages moved."""
    lines = ["The weekly drift alarm ran the same commit twice: with the pinned dependencies (`constraints.txt`) and "
             "with their newest releases" + (f" ([the run]({run_url}))" if run_url else "") + ".", ""]
    if drift.figures:
        lines += [f"**{len(drift.figures)} figure(s) drifted beyond their tolerance** with the newest releases:", "",
                  "| figure | newest releases | pinned |", "|---|---|---|"]
        lines += [f"| `{fig_id}` | {deviation_text(new)} | {deviation_text(old)} |"
                  for fig_id, old, new in drift.figures]
        lines.append("")
    if drift.claims:
        lines += [f"**{len(drift.claims)} claim(s) changed verdict:**", "", "| claim | figure | pinned | newest |",
                  "|---|---|---|---|"]
        lines += [f"| `{claim_id}` | `{new.get('figure') or '-'}` | {old['verdict']} ({_value(old)}) | "
                  f"{new['verdict']} ({_value(new)}) |" for claim_id, old, new in drift.claims]
        lines.append("")
    if not drift:
        lines += ["No figure drifted and no claim changed verdict.", ""]
    lines += ["**Packages that moved** (pinned -> newest; the figures' main dependencies first):", ""]
    lines += [f"- {name}: {old} -> {new}" for name, old, new in drift.packages] or ["- none"]
    if drift.failing_both:
        lines += ["", "Already failing with the pinned dependencies, so not counted as drift (see CI): "
                  + ", ".join(f"`{f}`" for f in drift.failing_both) + "."]
    lines += ["", f"Devices: {pinned.get('device', '?')} (pinned), {newest.get('device', '?')} (newest)."]
    return "\n".join(lines) + "\n"


def _value(row: dict[str, Any]) -> str:
    value = row.get("value")
    return f"{value:.4g}; claimed {row.get('threshold')}" if isinstance(value, float) else "no value"
