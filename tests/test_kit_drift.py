"""The drift alarm (joma_lib.kit.drift): two run reports of one commit compared, and the issue that names the drift."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from joma_lib.kit import drift, harness
from joma_lib.kit.cli import main
from joma_lib.kit.registry import Claim, FigureSpec

registry_module = importlib.import_module("joma_lib.kit.registry")


@pytest.fixture
def toy(monkeypatch, tmp_path, toy_spec):
    """The toy figure with a claim on its last value (sin 1 = 0.8415 < 0.842), its reference in tmp_path; returns a
    function that makes the figure drift, as a new release of a dependency changing its numbers would."""
    claim = Claim("toy-last-below", "companion", "y ends below 0.842", lambda d: float(d["y"][-1]), "<", 0.842,
                  kind="companion", threshold_set="before-data")
    spec = FigureSpec(**{**toy_spec.__dict__, "claims": (claim,)})
    monkeypatch.setattr(registry_module, "registry", lambda: {"c-toy": spec})
    monkeypatch.setattr(harness, "REFERENCE_DIR", tmp_path)
    harness.update_reference("c-toy")

    def make_drift(relative: float) -> None:
        drifted = FigureSpec(**{**spec.__dict__, "make": lambda **p: {
            k: v * (1 + relative) if k == "y" else v for k, v in toy_spec.make(**p).items()}})
        monkeypatch.setattr(registry_module, "registry", lambda: {"c-toy": drifted})

    return make_drift


def _newest(report: dict, **versions: str) -> dict:
    return {**report, "packages": {**report["packages"], **versions}, "device": "CPU: newest"}


def test_a_drifted_figure_is_named_with_its_deviation_and_the_packages_that_moved(toy):
    pinned = drift.run_report(["c-toy"])
    assert pinned["figures"]["c-toy"]["passed"] and pinned["claims"]["toy-last-below"]["verdict"] == "holds"
    assert pinned["packages"]["numpy"] == np.__version__
    toy(1e-3)  # 1000x y's tolerance (rtol 1e-6), and the claim's value crosses 0.842
    newest = _newest(drift.run_report(["c-toy"]), numpy="99.0", pandas="9.9")
    found = drift.compare_reports(pinned, newest)
    assert found and [f for f, _, _ in found.figures] == ["c-toy"] and found.failing_both == []
    assert ([(c, old["verdict"], new["verdict"]) for c, old, new in found.claims]
            == [("toy-last-below", "holds", "fails")])
    assert found.packages[0] == ("numpy", np.__version__, "99.0")  # the main dependencies first
    assert ("pandas", pinned["packages"].get("pandas", "-"), "9.9") in found.packages
    text = drift.issue_text(found, pinned, newest, run_url="https://example.org/run/1")
    ratio = newest["figures"]["c-toy"]["ratio"]
    assert (f"| `c-toy` | largest deviation {newest['figures']['c-toy']['max_abs_dev']:.3g} in `y`, "
            f"{ratio:.3g} x its " in text)
    assert 900 < ratio < 1100 and "rtol 1e-06" in text
    assert "| `toy-last-below` | `c-toy` | holds (0.8415; claimed < 0.842) | fails (0.8423; claimed < 0.842) |" in text
    assert f"- numpy: {np.__version__} -> 99.0" in text and "[the run](https://example.org/run/1)" in text


def test_no_drift_within_tolerance_and_a_figure_failing_already_when_pinned_is_not_drift(toy):
    pinned = drift.run_report(["c-toy"])
    toy(1e-8)  # a hundredth of the tolerance
    newest = _newest(drift.run_report(["c-toy"]), numpy="99.0")
    found = drift.compare_reports(pinned, newest)
    assert not found and found.packages == [("numpy", np.__version__, "99.0")]
    assert "No figure drifted and no claim changed verdict." in drift.issue_text(found, pinned, newest)
    broken = {**pinned, "figures": {"c-toy": {"error": "RuntimeError: boom"}}}
    again = drift.compare_reports(broken, _newest(broken))
    assert not again and again.failing_both == ["c-toy"]
    assert "Already failing with the pinned dependencies" in drift.issue_text(again, broken, broken)


def test_the_commands_write_a_report_and_exit_1_on_drift(toy, tmp_path, capsys):
    assert main(["report", "c-toy", "--out", str(tmp_path / "pinned.json")]) == 0
    toy(1e-3)
    assert main(["report", "c-toy", "--out", str(tmp_path / "newest.json")]) == 0
    assert "1 beyond tolerance or failing: c-toy" in capsys.readouterr().out
    assert main(["drift", str(tmp_path / "pinned.json"), str(tmp_path / "pinned.json")]) == 0
    capsys.readouterr()
    assert main(["drift", str(tmp_path / "pinned.json"), str(tmp_path / "newest.json"),
                 "--issue", str(tmp_path / "issue.md")]) == 1
    assert capsys.readouterr().out == (tmp_path / "issue.md").read_text()
    assert "drifted beyond their tolerance" in (tmp_path / "issue.md").read_text()
    (tmp_path / "bad.json").write_text(json.dumps({"figures": {}}))
    assert main(["drift", str(tmp_path / "bad.json"), str(tmp_path / "newest.json")]) == 2
    assert "is not a run report" in capsys.readouterr().err


def test_the_weekly_workflow_runs_both_reports_and_only_its_alarm_job_writes():
    from pathlib import Path

    import yaml

    workflow = yaml.safe_load((Path(__file__).resolve().parents[1] / ".github/workflows/drift.yml").read_text())
    assert workflow[True]["schedule"] and workflow["permissions"] == {}
    report, alarm = workflow["jobs"]["report"], workflow["jobs"]["alarm"]
    assert (report["strategy"]["matrix"]["deps"] == ["pinned", "newest"]
            and report["permissions"] == {"contents": "read"})
    runs = " ".join(str(step.get("run", "")) for step in report["steps"])
    assert ("joma_lib.figures report --out" in runs and "--upgrade -r requirements.txt" in runs
            and "-c constraints" not in runs)
    assert alarm["permissions"] == {"contents": "read", "issues": "write"}
    script = alarm["steps"][-1]["run"]
    assert "joma_lib.figures drift report-pinned.json report-newest.json" in script
    assert "ISSUE_TITLE" in script and "ISSUE_LABEL" in script and "gh issue edit" in script
