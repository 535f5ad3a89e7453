"""The figure harness (joma_lib.kit.harness): verify must fail loudly, never pass by accident."""

from __future__ import annotations

import importlib
import json
import sys

import numpy as np
import pytest

from joma_lib.base.io import InputUnavailableError
from joma_lib.kit import harness
from joma_lib.kit.cli import main
from joma_lib.kit.registry import FigureSpec, Tolerance

registry_module = importlib.import_module("joma_lib.kit.registry")  # the module, not the function


def _make_offline(**_: object) -> dict[str, np.ndarray]:
    raise InputUnavailableError("third-party file not found")


@pytest.fixture
def toy_registry(monkeypatch, tmp_path, toy_spec):
    """Replace the discovered registry with toy figures and a temporary reference folder."""
    offline = FigureSpec(fig_id="c-offline", title="needs a download", paper_ref="companion", chapter="book/none.md",
                         make=_make_offline, plot=toy_spec.plot)
    monkeypatch.setattr(registry_module, "registry", lambda: {"c-toy": toy_spec, "c-offline": offline})
    monkeypatch.setattr(harness, "REFERENCE_DIR", tmp_path)
    return tmp_path


def test_update_then_verify_passes(toy_registry):
    harness.update_reference("c-toy")
    manifest = json.loads((toy_registry / "c-toy.json").read_text())
    assert manifest["arrays"]["y"]["rtol"] == 1e-6
    assert harness.verify("c-toy").passed
    assert main(["verify", "c-toy"]) == 0


def test_reference_beyond_tolerance_fails_and_names_the_figure(toy_registry, capsys):
    harness.update_reference("c-toy")
    ref = harness.load_reference("c-toy")
    ref["y"] = ref["y"] * (1 + 1e-4)  # 100x the tolerance
    harness.write_reference("c-toy", ref)
    result = harness.verify("c-toy")
    assert not result.passed and result.worst_array == "y" and result.ratio > 10
    assert main(["verify", "c-toy"]) == 1
    out = capsys.readouterr().out
    assert "c-toy" in out and "FAIL" in out


def test_deviation_within_tolerance_passes(toy_registry):
    harness.update_reference("c-toy")
    ref = harness.load_reference("c-toy")
    ref["y"] = ref["y"] * (1 + 1e-7)
    harness.write_reference("c-toy", ref)
    assert harness.verify("c-toy").passed


def test_compare_reports_the_worst_array_and_its_deviation_and_lets_matching_nans_pass(toy_spec):
    """Within tolerance, the report still names the array that came closest to its bound, its largest deviation and
    the share of the bound it used (the verify table's columns); NaN at the same places in both counts as equal."""
    ref = {"x": np.array([0.0, np.nan, 2.0]), "y": np.array([1.0, 2.0, np.nan])}
    same = harness.compare(toy_spec, {k: v.copy() for k, v in ref.items()}, ref)
    assert same.passed and same.ratio == 0.0 and same.max_abs_dev == 0.0
    bound = 1e-9 + 1e-6 * 2.0  # y's tolerance (atol 1e-9, rtol 1e-6) where the reference is 2
    new = {"x": ref["x"].copy(), "y": ref["y"] + np.array([0.0, 0.25 * bound, 0.0])}
    result = harness.compare(toy_spec, new, ref)
    assert result.passed and result.worst_array == "y"
    assert result.max_abs_dev == pytest.approx(0.25 * bound) and result.ratio == pytest.approx(0.25)
    new["y"] = ref["y"] + np.array([0.0, 1.5 * bound, 0.0])
    beyond = harness.compare(toy_spec, new, ref)
    assert not beyond.passed and beyond.ratio == pytest.approx(1.5)


def test_shape_or_name_change_fails(toy_registry):
    harness.update_reference("c-toy")
    ref = harness.load_reference("c-toy")
    harness.write_reference("c-toy", {"x": ref["x"], "y": np.append(ref["y"], 0.0)})
    assert "shape" in harness.verify("c-toy").message
    harness.write_reference("c-toy", {"x": ref["x"]})
    assert "array names differ" in harness.verify("c-toy").message


def test_the_same_values_in_another_shape_fail(toy_spec):
    ref = {"x": np.arange(6.0).reshape(2, 3), "y": np.array([1.0])}
    result = harness.compare(toy_spec, {"x": np.arange(6.0).reshape(3, 2), "y": ref["y"]}, ref)
    assert not result.passed and result.worst_array == "x" and "shape (3, 2) != reference (2, 3)" in result.message


def test_an_array_the_new_data_lack_fails_and_is_named(toy_spec):
    ref = {"x": np.array([1.0]), "y": np.array([2.0]), "z": np.array([3.0])}
    result = harness.compare(toy_spec, {"x": ref["x"].copy(), "y": ref["y"].copy()}, ref)
    assert not result.passed and "missing ['z']" in result.message


def test_a_purely_relative_tolerance_where_the_reference_is_zero(toy_spec):
    """With atol 0 the bound is 0 where the reference is 0: an exact match there uses none of it, any deviation
    there is beyond it, and neither hides a deviation elsewhere (0/0 is NaN, and the largest of NaN and 5 is NaN)."""
    relative = {"y": Tolerance(rtol=1e-6, atol=0.0)}
    ref = {"x": np.array([1.0]), "y": np.array([0.0, 2.0])}
    same = harness.compare(toy_spec, {k: v.copy() for k, v in ref.items()}, ref, tolerances=relative)
    assert same.passed and same.ratio == 0.0
    elsewhere = harness.compare(toy_spec, {"x": ref["x"], "y": np.array([0.0, 2.0 * (1 + 5e-6)])}, ref,
                                tolerances=relative)
    assert not elsewhere.passed and elsewhere.worst_array == "y" and elsewhere.ratio == pytest.approx(5.0)
    at_zero = harness.compare(toy_spec, {"x": ref["x"], "y": np.array([1e-300, 2.0])}, ref, tolerances=relative)
    assert not at_zero.passed and at_zero.ratio == float("inf")


def test_missing_reference_is_an_error_not_a_pass(toy_registry, capsys):
    with pytest.raises(harness.MissingReferenceError, match="no reference data for 'c-toy'"):
        harness.verify("c-toy")
    assert main(["verify", "c-toy"]) == 1
    assert "ERROR" in capsys.readouterr().out


def test_unknown_figure_id_gives_clear_message(toy_registry, capsys):
    assert main(["verify", "fig99"]) == 2
    err = capsys.readouterr().err
    assert "unknown figure id 'fig99'" in err and "c-toy" in err


def test_make_writes_all_formats(toy_registry, tmp_path, toy_spec):
    out = tmp_path / "out"
    assert main(["make", "c-toy", "--out", str(out)]) == 0
    for ext in ("png", "svg", "npz", "csv"):
        assert (out / f"c-toy.{ext}").stat().st_size > 0
    rows = (out / "c-toy.csv").read_text().splitlines()
    assert rows[0] == "array,index,value" and len(rows) == 1 + 10
    with np.load(out / "c-toy.npz") as npz:
        np.testing.assert_array_equal(npz["y"], toy_spec.make()["y"])
    assert main(["make", "c-toy", "--full", "--out", str(out / "full")]) == 0
    with np.load(out / "full" / "c-toy.npz") as npz:
        np.testing.assert_array_equal(npz["y"], toy_spec.make(scale=2.0, n=7)["y"])


def test_unavailable_input_is_skipped_or_failed_on_request(toy_registry, capsys, toy_spec):
    harness.write_reference("c-offline", toy_spec.make())
    assert main(["verify", "c-offline"]) == 0
    out = capsys.readouterr().out
    assert "SKIPPED (input unavailable): third-party file not found" in out and "not checked" in out
    assert main(["verify", "--require-inputs", "c-offline"]) == 1


def test_show_draws_the_reference_when_the_input_is_unavailable(toy_registry, tmp_path, capsys, toy_spec):
    harness.write_reference("c-offline", toy_spec.make(scale=2.0))
    data = harness.show("c-offline", out_dir=tmp_path / "gen")
    np.testing.assert_array_equal(data["y"], toy_spec.make(scale=2.0)["y"])
    assert "drawn from the reference data" in capsys.readouterr().out
    assert (tmp_path / "gen" / "c-offline.png").stat().st_size > 0
    with pytest.raises(InputUnavailableError):  # explicit parameters are never silently replaced
        harness.show("c-offline", out_dir=tmp_path / "gen", scale=3.0)


def test_show_runs_without_the_book_build_tools(tmp_path, monkeypatch,
        toy_spec):
    """On Colab/Binder only requirements.txt is installed: no myst_nb. A chapter must still run and show."""
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # `import myst_nb` now raises ImportError
    monkeypatch.setattr(registry_module, "registry", lambda: {"c-toy": toy_spec})
    shown: list[object] = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    data = harness.show("c-toy", out_dir=tmp_path)
    assert np.allclose(data["y"], np.sin(data["x"]))
    assert (tmp_path / "c-toy.png").stat().st_size > 0
    assert len(shown) == 1 and type(shown[0]).__name__ == "Image"  # the figure is displayed in place


def test_large_figure_data_offers_a_gzipped_csv(tmp_path):
    """A figure with many values offers ``.csv.gz`` (same rows as the plain CSV), small ones ``.csv``."""
    import gzip

    big = {"x": np.arange(harness.CSV_GZIP_ABOVE + 1, dtype=float) / 3}
    small = {"x": np.arange(5, dtype=float) / 3}
    assert harness.csv_name("c-big", big) == "c-big.csv.gz"
    assert harness.csv_name("c-small", small) == "c-small.csv"
    harness.write_csv(tmp_path / "big.csv.gz", big)
    harness.write_csv(tmp_path / "big.csv", big)
    raw = (tmp_path / "big.csv.gz").read_bytes()
    assert gzip.decompress(raw) == (tmp_path / "big.csv").read_bytes()
    assert len(raw) < (tmp_path / "big.csv").stat().st_size / 2
    harness.write_csv(tmp_path / "again.csv.gz", big)
    assert (tmp_path / "again.csv.gz").read_bytes() == raw  # byte-stable: no time stamp


def test_show_keeps_its_data_in_the_store_and_verify_from_compares_them(toy_registry, tmp_path, monkeypatch, capsys,
        toy_spec):
    """One computation per figure: the book's ``show`` keeps the data, ``verify --from`` compares those."""
    calls: list[float] = []

    def counting_make(scale: float = 1.0, n: int = 5) -> dict[str, np.ndarray]:
        calls.append(scale)
        return toy_spec.make(scale, n)

    toy = FigureSpec(**{**toy_spec.__dict__, "make": counting_make})
    monkeypatch.setattr(registry_module, "registry", lambda: {"c-toy": toy})
    harness.update_reference("c-toy")
    store = tmp_path / "store"
    monkeypatch.setenv(harness.STORE_ENV, str(store))
    harness.show("c-toy", out_dir=tmp_path / "gen")
    assert (store / "c-toy.npz").exists() and len(calls) == 2
    harness.show("c-toy", out_dir=tmp_path / "gen")  # a second page showing it draws the kept data
    harness.show("c-toy", out_dir=tmp_path / "gen", scale=1.0)  # explicit parameters: always computed
    assert len(calls) == 3
    capsys.readouterr()
    assert main(["verify", "--from", str(store), "c-toy"]) == 0 and len(calls) == 3
    out = capsys.readouterr().out
    assert "ok (stored)" in out and f"1 figure(s) compared from {store}" in out
    assert main(["verify", "c-toy"]) == 0 and len(calls) == 4  # without --from: computed, as for a reader


def test_verify_from_computes_what_the_store_lacks_or_made_otherwise(toy_registry, tmp_path, monkeypatch, capsys,
        toy_spec):
    """Data kept for other params, under another oneDNN ceiling, or wrong data, are never passed off as checked."""
    harness.update_reference("c-toy")
    store = tmp_path / "store"
    store.mkdir()
    assert main(["verify", "--from", str(store), "c-toy"]) == 0
    assert "ok (computed)" in capsys.readouterr().out
    harness.write_reference("c-toy", toy_spec.make(scale=1.5), store)  # kept data that disagree with the reference
    assert main(["verify", "--from", str(store), "c-toy"]) == 1
    assert "(stored)" in capsys.readouterr().out
    manifest = json.loads((store / "c-toy.json").read_text())
    for key, value in [("params", {"scale": 2.0}), ("environment", {"onednn_isa_limit": "AVX2"})]:
        (store / "c-toy.json").write_text(json.dumps({**manifest, key: value}))
        assert harness.load_stored("c-toy", store) is None
        assert main(["verify", "--from", str(store), "c-toy"]) == 0
        assert "ok (computed)" in capsys.readouterr().out
    (store / "c-toy.npz").write_bytes(b"damaged")
    with pytest.raises(harness.CorruptReferenceError, match="sha256"):
        harness.load_stored("c-toy", store)
    assert main(["verify", "--from", str(tmp_path / "absent"), "c-toy"]) == 2
    assert "--from must be an existing folder" in capsys.readouterr().err


def test_verify_keep_stores_what_it_computed_for_the_next_verify(toy_registry, tmp_path, capsys):
    """``verify --from DIR --keep`` (CI's side lane) keeps what it computed; a later ``verify --from DIR`` draws it."""
    harness.update_reference("c-toy")
    store = tmp_path / "store"
    store.mkdir()
    assert main(["verify", "--from", str(store), "c-toy"]) == 0
    assert not (store / "c-toy.npz").exists()  # without --keep nothing is written
    assert main(["verify", "--from", str(store), "--keep", "c-toy"]) == 0
    assert "ok (computed)" in capsys.readouterr().out
    assert harness.load_stored("c-toy", store) is not None
    assert main(["verify", "--from", str(store), "c-toy"]) == 0
    assert "ok (stored)" in capsys.readouterr().out
    assert main(["verify", "--keep", "c-toy"]) == 2
    assert "--keep needs --from" in capsys.readouterr().err


def test_an_entry_being_written_is_not_read_half(toy_registry, tmp_path, toy_spec):
    """Between the npz and its manifest (another notebook keeping the figure right now) the store has no entry yet."""
    store = tmp_path / "store"
    harness.write_reference("c-toy", toy_spec.make(), store)
    (store / "c-toy.json").unlink()  # as seen between the writer's two renames
    assert harness.load_stored("c-toy", store) is None
    harness.write_reference("c-toy", toy_spec.make(), store)
    assert harness.load_stored("c-toy", store) is not None
