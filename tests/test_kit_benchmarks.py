"""The stored benchmark results (joma_lib.kit.benchmarks): round trip, atomic replacement, names checked."""

from __future__ import annotations

import json

import pytest

from joma_lib.kit import benchmarks


def test_saved_results_load_back_with_the_date_and_the_machine(tmp_path, capsys):
    results = {"settings": {"repeats": 3}, "rows": [{"layers": 1, "median_ms": 1.5}]}
    path = benchmarks.save_results("toy_bench", results, note="a note", folder=tmp_path)
    assert path == tmp_path / "toy_bench.json" and f"wrote {path}" in capsys.readouterr().out
    stored = benchmarks.load_results("toy_bench", folder=tmp_path)
    assert stored["benchmark"] == "toy_bench" and stored["note"] == "a note" and stored["results"] == results
    assert {"cpu", "cores", "python", "torch", "platform"} <= set(stored["machine"])
    assert stored["date"].count("-") == 2


def test_a_failed_write_leaves_the_previous_file_and_no_partial_file(tmp_path):
    benchmarks.save_results("toy_bench", {"rows": [1]}, folder=tmp_path)
    before = (tmp_path / "toy_bench.json").read_text()
    with pytest.raises(TypeError):
        benchmarks.save_results("toy_bench", {"rows": [object()]}, folder=tmp_path)  # not JSON-serialisable
    assert (tmp_path / "toy_bench.json").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["toy_bench.json"]


def test_a_failure_while_writing_leaves_no_file(tmp_path, monkeypatch):
    def broken_write(self, text):
        self.write_bytes(text[:10].encode())  # a partial write, then the disk fails
        raise OSError("disk full")

    monkeypatch.setattr(benchmarks.Path, "write_text", broken_write)
    with pytest.raises(OSError, match="disk full"):
        benchmarks.save_results("toy_bench", {"rows": []}, folder=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["", "../escape", "sub/dir", "Upper", "with space", "dot.json", "_hidden"])
def test_a_name_that_is_not_a_plain_file_name_is_refused(tmp_path, name):
    with pytest.raises(ValueError, match="benchmark result name"):
        benchmarks.save_results(name, {}, folder=tmp_path)
    with pytest.raises(ValueError, match="benchmark result name"):
        benchmarks.load_results(name, folder=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_result_names_the_stored_ones(tmp_path):
    (tmp_path / "other.json").write_text(json.dumps({"results": {}}))
    with pytest.raises(FileNotFoundError, match="no stored benchmark 'missing'.*stored: other"):
        benchmarks.load_results("missing", folder=tmp_path)


@pytest.mark.parametrize("name", ["dynamics", "explorers", "lm_stack", "lm_step", "lm_step_ops", "lm_step_ops_ed7ff84",
                                  "lm_step_ops_f73b237", "lm_stack_ed7ff84",
                                  "lm_step_system", "lm_sweep",
                                  "table1_bench", "table1_spread", "theorem1_widget"])
def test_the_shipped_results_load(name):
    stored = benchmarks.load_results(name)
    assert stored["benchmark"] == name and {"date", "machine", "results"} <= set(stored)


def test_the_allocator_is_set_by_name_before_anything_is_timed():
    with pytest.raises(ValueError, match="allocator must be one of kept, system"):
        benchmarks.apply_allocator("jemalloc")
    assert benchmarks.apply_allocator("system") == "system"
