"""The figure command line (joma_lib.kit.cli): one failing figure never stops the others."""

import dataclasses
import json
import subprocess
import sys

import pytest

from joma_lib.kit.cli import main
from joma_lib.kit.registry import get_spec, registry

RAISING, OTHER = "c-thm4-rates", "c-cooccurrence"  # two cheap figures with claims


@pytest.fixture
def one_figure_raises(monkeypatch):
    def boom(**_):
        raise RuntimeError("injected fault\nover two lines")

    monkeypatch.setitem(registry(), RAISING, dataclasses.replace(get_spec(RAISING), make=boom))


def test_verify_reports_the_raising_figure_checks_the_next_and_exits_1(one_figure_raises, capsys):
    assert main(["verify", RAISING, OTHER]) == 1
    out = capsys.readouterr().out
    assert f"{RAISING} ERROR: RuntimeError: injected fault over two lines" in out
    row = next(line for line in out.splitlines() if line.startswith(OTHER))
    assert row.rstrip().endswith("ok")


def test_claims_json_is_written_with_verdict_error_for_the_raising_figure(one_figure_raises, capsys):
    assert main(["claims", "--json", RAISING, OTHER]) == 1
    rows = json.loads(capsys.readouterr().out)
    raised = [r for r in rows if r["figure"] == RAISING]
    assert raised and all(r["verdict"] == "error" and r["reason"].startswith("RuntimeError: injected") for r in raised)
    others = [r for r in rows if r["figure"] == OTHER]
    assert len(others) == len(get_spec(OTHER).claims) and all(r["verdict"] == "holds" for r in others)


def test_claims_exits_1_when_a_claim_the_book_says_holds_fails(monkeypatch, capsys):
    spec = get_spec(OTHER)
    claim = spec.claims[0]
    flipped = dataclasses.replace(claim, relation={"<": ">=", "<=": ">", ">": "<=", ">=": "<"}[claim.relation])
    monkeypatch.setitem(registry(), OTHER, dataclasses.replace(spec, claims=(flipped, *spec.claims[1:])))
    assert main(["claims", OTHER]) == 1
    assert f"{claim.claim_id}: the book says it holds, here it fails" in capsys.readouterr().out
    monkeypatch.setitem(registry(), OTHER, spec)
    assert main(["claims", OTHER]) == 0


def test_make_writes_the_other_figures_and_exits_1(one_figure_raises, tmp_path, capsys):
    assert main(["make", RAISING, OTHER, "--out", str(tmp_path)]) == 1
    assert f"{RAISING} ERROR: RuntimeError" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(
        f"{OTHER}.{ext}" for ext in ("png", "svg", "npz", "csv", "phone.png"))


def test_cli_runs_as_module():
    out = subprocess.run([sys.executable, "-m", "joma_lib.figures", "list"], capture_output=True, text=True,
                         check=True).stdout
    assert "c-setting-embeddings" in out
