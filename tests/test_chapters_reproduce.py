"""The reproduce chapter (joma_lib.chapters.reproduce): which depths of the paper sweep have finished, and how."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from joma_lib.chapters.reproduce import finished_paper_depths, paper_sweep_configs


def _collected(path: Path, runs: list[tuple[int, float, int]], data: str = "wikivital",
               precision: str = "bf16") -> Path:
    """A collected sweep as ``lm collect`` writes it, reduced to what the finished-run count reads."""
    np.savez(path, nlayers=np.array([n for n, _, _ in runs]), lr=np.array([lr for _, lr, _ in runs]),
             seed=np.array([s for _, _, s in runs]))
    configs = [{"n_layers": n, "lr": lr, "seed": s, "data": data} for n, lr, s in runs]
    path.with_suffix(".json").write_text(json.dumps({"configs": configs, "trained": [{"precision_used": precision}]}))
    return path


def test_a_depth_counts_as_finished_only_with_all_its_runs(tmp_path: Path) -> None:
    seeds = sorted({c.seed for c in paper_sweep_configs()})
    runs = [(1, 1e-4, s) for s in seeds] + [(2, 1e-4, s) for s in seeds[:-1]]  # depth 2 lacks its last seed
    done = finished_paper_depths(_collected(tmp_path / "so-far.npz", runs))
    assert done.depths == (1,) and done.corpora == ("wikivital",) and done.precisions == ("bf16",)


def test_nothing_has_finished_without_the_collected_file(tmp_path: Path) -> None:
    assert finished_paper_depths(tmp_path / "missing.npz") == ((), (), ())


def test_the_stored_runs_so_far_are_whole_depths_of_the_sweep() -> None:
    done = finished_paper_depths()
    assert set(done.depths) <= {c.n_layers for c in paper_sweep_configs()}
    assert bool(done.depths) == bool(done.corpora) == bool(done.precisions)
