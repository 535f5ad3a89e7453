"""Receipts (joma_lib.kit.receipts): written by ``show`` with the figure's data, kept in the store, printed alike."""

from __future__ import annotations

import hashlib
import importlib
import json

import numpy as np
import pytest
import scipy
import torch

from joma_lib.base.io import InputUnavailableError
from joma_lib.kit import harness, receipts
from joma_lib.kit.cli import main
from joma_lib.kit.registry import FigureSpec

registry_module = importlib.import_module("joma_lib.kit.registry")


def _unavailable(**_: object) -> dict[str, np.ndarray]:
    raise InputUnavailableError("the authors' file is not here")


@pytest.fixture
def figures(monkeypatch, tmp_path, toy_spec):
    """Toy figures (computed, read from a stored run, input unavailable), their references in tmp_path/ref."""
    stored_run = FigureSpec(**{**toy_spec.__dict__, "fig_id": "c-run", "stored_run": True})
    offline = FigureSpec(**{**toy_spec.__dict__, "fig_id": "c-offline", "make": _unavailable})
    monkeypatch.setattr(registry_module, "registry",
                        lambda: {"c-toy": toy_spec, "c-run": stored_run, "c-offline": offline})
    monkeypatch.setattr(harness, "REFERENCE_DIR", tmp_path / "ref")
    for fig_id in ("c-toy", "c-run"):
        harness.update_reference(fig_id)
    harness.write_reference("c-offline", toy_spec.make(scale=2.0))
    return tmp_path


def _receipt(folder, fig_id):
    return json.loads((folder / f"{fig_id}.{receipts.RECEIPT_SUFFIX}").read_text())


def test_show_writes_the_receipt_beside_the_data_and_into_the_store(figures, monkeypatch, capsys):
    store, gen = figures / "store", figures / "gen"
    monkeypatch.setenv(harness.STORE_ENV, str(store))
    harness.show("c-toy", out_dir=gen)
    receipt = _receipt(gen, "c-toy")
    assert receipt["sha256"] == hashlib.sha256((gen / "c-toy.npz").read_bytes()).hexdigest()
    assert receipt["versions"] == {"torch": torch.__version__, "numpy": np.__version__, "scipy": scipy.__version__}
    assert receipt["source"] == "computed" and receipt["device"].startswith("CPU: ")
    assert receipt["deviation"]["passed"] and receipt["deviation"]["ratio"] <= 1
    assert receipt["deviation"]["max_abs_dev"] == 0 and receipt["precision"].startswith("no model trained")
    assert receipt["companion_version"] and receipt["git_commit"]
    kept = json.loads((store / "c-toy.json").read_text())["receipt"]
    assert kept == {k: v for k, v in receipt.items() if k != "lines"}
    assert json.loads((gen / f"c-toy.{receipts.CITE_SUFFIX}").read_text())["bibtex"].startswith("@misc{")
    # the command line prints the same lines, from the page's folder or from the store
    capsys.readouterr()
    assert main(["receipt", "c-toy", "--from", str(gen)]) == 0
    from_page = capsys.readouterr().out
    assert main(["receipt", "c-toy", "--from", str(store)]) == 0
    assert capsys.readouterr().out == from_page == receipts.receipt_text(receipt) + "\n"
    assert [list(line) for line in receipts.receipt_lines(receipt)] == receipt["lines"]
    # a second page drawing the kept data: the date of the run that computed them, the hash of its own file
    kept_date = receipt["date"]
    harness.show("c-toy", out_dir=figures / "gen2")
    again = _receipt(figures / "gen2", "c-toy")
    assert again["date"] == kept_date
    assert again["sha256"] == hashlib.sha256((figures / "gen2" / "c-toy.npz").read_bytes()).hexdigest()


def test_a_receipt_says_where_the_data_came_from(figures, monkeypatch, capsys):
    gen = figures / "gen"
    monkeypatch.delenv(harness.STORE_ENV, raising=False)
    harness.show("c-run", out_dir=gen)
    stored = _receipt(gen, "c-run")
    assert stored["source"] == "stored-run" and stored["precision"].startswith("trained beforehand, read back here")
    harness.show("c-offline", out_dir=gen)
    offline = _receipt(gen, "c-offline")
    assert offline["source"] == "reference" and offline["deviation"] is None
    assert "drawn from the committed reference data" in receipts.receipt_text(offline)
    harness.show("c-toy", out_dir=gen, scale=3.0)
    assert _receipt(gen, "c-toy")["source"] == "overrides" and _receipt(gen, "c-toy")["deviation"] is None


def test_a_drifted_figure_shows_its_deviation_beyond_the_tolerance(figures, monkeypatch):
    ref = harness.load_reference("c-toy")
    harness.write_reference("c-toy", {**ref, "y": ref["y"] * (1 + 1e-3)})  # 1000x the tolerance
    monkeypatch.delenv(harness.STORE_ENV, raising=False)
    harness.show("c-toy", out_dir=figures / "gen")
    receipt = _receipt(figures / "gen", "c-toy")
    assert not receipt["deviation"]["passed"] and receipt["deviation"]["worst_array"] == "y"
    assert "BEYOND its tolerance rtol 1e-06" in receipts.receipt_text(receipt)


def test_no_receipt_yet_is_said_with_the_way_to_get_one(figures, monkeypatch, capsys):
    monkeypatch.delenv(harness.STORE_ENV, raising=False)
    monkeypatch.chdir(figures)
    assert main(["receipt", "c-toy"]) == 1
    err = capsys.readouterr().err
    assert "no receipt of c-toy" in err and "JOMA_FIGURE_STORE is not set" in err
    with pytest.raises(ValueError, match="source must be one of"):
        receipts.make_receipt("c-toy", figures / "ref" / "c-toy.npz", "guessed", {}, None, [])
