"""The figure registry (joma_lib.kit.registry): chapters' figures found by name, tolerances and claims."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest

from joma_lib.kit import harness
from joma_lib.kit.registry import Claim, Tolerance, figure_ids, get_claim, get_spec, online_claims, registry

registry_module = importlib.import_module("joma_lib.kit.registry")  # the module, not the function


def test_gpu_tolerance_is_used_only_on_gpu():
    tol = Tolerance(rtol=1e-7, atol=0.0, gpu_rtol=1e-3)
    assert tol.for_device(False) == (1e-7, 0.0)
    assert tol.for_device(True) == (1e-3, 0.0)


def test_every_registered_figure_is_well_formed():
    specs = registry()
    assert "c-setting-embeddings" in specs
    for fig_id, spec in specs.items():
        assert fig_id == spec.fig_id
        assert spec.fig_id.startswith(("fig", "table", "c-")), fig_id
        assert spec.chapter.startswith("book/") and spec.chapter.endswith(".md")
        assert (harness.REFERENCE_DIR / f"{fig_id}.npz").exists(), f"{fig_id} has no committed reference"


@pytest.mark.parametrize(("fields", "match"), [
    ({"kind": "guess", "threshold_set": "before-data"}, "kind must be one of"),
    ({"kind": "paper", "threshold_set": "later"}, "threshold_set must be one of"),
    ({"kind": "paper", "threshold_set": "after-data"}, "threshold_note must say"),
    ({"kind": "paper", "threshold_set": "after-data", "threshold_note": "saw 1\nthen 2"}, "one line"),
])
def test_kind_and_threshold_set_are_checked(fields, match):
    with pytest.raises(ValueError, match=match):
        Claim("toy-x", "Thm. 0", "x", lambda d: 0.0, "<", 1.0, **fields)
    with pytest.raises(TypeError):  # both fields are required: no claim is classified by default
        Claim("toy-x", "Thm. 0", "x", lambda d: 0.0, "<", 1.0)  # type: ignore[call-arg]


def test_claim_verdict_follows_its_relation_and_fails_on_nan(toy_spec):
    claim = Claim("c-toy-max", "companion", "max y below 0.9", lambda d: float(d["y"].max()), "<", 0.9,
                  kind="companion", threshold_set="before-data")
    data = toy_spec.make()
    value, verdict = claim.evaluate(data)
    assert value == pytest.approx(np.sin(1.0)) and verdict == "holds"
    assert claim.evaluate({"y": np.array([0.95])})[1] == "fails"
    assert claim.evaluate({"y": np.array([np.nan])})[1] == "fails"
    equal = Claim("toy-eq", "Thm. 0", "bound is inclusive", lambda d: 3.0, "<=", 3.0, kind="paper",
                  threshold_set="before-data")
    assert equal.evaluate(data)[1] == "holds"
    with pytest.raises(ValueError, match="relation"):
        Claim("c-bad", "companion", "x", lambda d: 0.0, "==", 0.0,  # type: ignore[arg-type]
              kind="companion", threshold_set="before-data")


def test_the_registry_is_the_figures_of_every_chapter_package():
    import joma_lib.chapters as chapters

    found = {}
    for info in pkgutil.iter_modules(chapters.__path__):
        if info.ispkg and (Path(chapters.__path__[0]) / info.name / "figures.py").is_file():
            module = importlib.import_module(f"joma_lib.chapters.{info.name}.figures")
            found.update({spec.fig_id: spec for spec in module.FIGURES})
    assert registry() == found and figure_ids() == sorted(found)
    assert "fig7-srank-bounce" in online_claims()


def test_an_unknown_figure_id_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown figure id 'fig99'; known ids: .*c-setting-embeddings"):
        get_spec("fig99")


def test_a_figure_id_defined_twice_names_the_id(tmp_path, monkeypatch):
    for name in ("a", "b"):
        folder = tmp_path / "twice" / name
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "figures.py").write_text(
            "from joma_lib.kit.registry import FigureSpec\n"
            "FIGURES = [FigureSpec(fig_id='c-same', title='t', paper_ref='companion', chapter='book/x.md', "
            "make=dict, plot=print)]\n")
    (tmp_path / "twice" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry_module, "CHAPTERS_PACKAGE", "twice")
    with pytest.raises(RuntimeError, match=r"figure id 'c-same' is defined twice \(twice.b.figures\)"):
        registry.__wrapped__()  # the uncached lookup: the cached registry of the book stays as it is


def test_a_claim_is_found_by_its_id_in_whichever_figure_states_it():
    claim = get_claim("thm5-monte-carlo")
    assert claim in get_spec("c-cooccurrence").claims
    with pytest.raises(ValueError, match=r"unknown claim id 'thm99'; known ids: .*thm5-monte-carlo"):
        get_claim("thm99")
