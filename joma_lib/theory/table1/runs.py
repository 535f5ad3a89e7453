"""Paper Table 1, whole: the named configurations (:data:`CONFIGS`), every (setting, seed) trained with real and with
shuffled labels (:func:`run_table1`), the result as a table (:class:`Table1Result`) and as a stored file
(:func:`save_result`, :data:`WIDE_RESULTS_FILE`). One run (model, training, scores) is
:mod:`joma_lib.theory.table1.model`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from joma_lib.base.io import atomic_paths
from joma_lib.theory.table1.model import TABLE1_SETTINGS, RunResult, Setting, Table1Config, train_and_score
from joma_lib.base.validation import as_finite_array
from joma_lib.base.memory import keep_freed_memory

PAPER_DATA_QUICK = Table1Config(d_model=32, d_hidden=128, steps=300, batch_size=32, lr=3e-3, n_test=1024,
                                 cpu_threads=1, seeds=(1, 2, 3))
"""The paper's data sizes (M = 100, C = 20, MLP width 128 = 4 x 32) on the quick CPU training budget."""

CONFIGS: dict[str, Table1Config] = {
    # The authors' run as we reconstruct it (their README command, with lr, wd and d as filtered by their table
    # script: lr 1e-4 where the README says 1e-5; 5 seeds is our choice, the number of theirs is not known).
    # 20 runs (40 with the shuffled-label controls) x 10k steps: an estimated few minutes per run on a GPU
    # (not measured), days on a CPU
    # (one step of width 1024 took 6-35 s on the shared 2-core machine).
    "full": Table1Config(),
    # The larger run of book/table1.md, same data, steps and controls as "quick" but 4x the width (MLP 4 x d as
    # in "quick"): the widest that fits 10 CPU-minutes on one core. Measured on the shared 2-core machine (20 vs
    # 80 steps, extrapolated to the 24 runs of 300 steps): width 128: 314-452 CPU-s, 160: 685, 192: 810, 256: 1414.
    "wide": replace(PAPER_DATA_QUICK, d_model=128, d_hidden=512),
    # Scaled down for 2 CPU cores (a few CPU-minutes for the whole table: 130 s on one core of a 2-core AMD EPYC):
    # width 32 instead of 1024, 300 Adam steps of 32 sequences at lr 3e-3 instead of 10k steps of 128 at 1e-4, 3 seeds,
    # one thread.
    "quick": PAPER_DATA_QUICK,
    # A check of the machinery, not of the paper (stacked against unstacked, checkpoints, a GPU's first run):
    # 2 settings x 2 seeds x real/shuffled labels at width 16, 20 steps; seconds on a CPU, scores meaningless.
    "check": Table1Config(d_model=16, d_hidden=64, steps=20, batch_size=16, lr=3e-3, n_test=64, cpu_threads=1,
                          settings=TABLE1_SETTINGS[::2], seeds=(1, 2)),
}


WIDE_RESULTS_FILE = Path(__file__).parent / "results" / "table1-wide.npz"
"""The stored run of the ``wide`` configuration (``python -m joma_lib table1 --config wide --device cpu --save
<this file>``), read back by the figure ``c-table1-wide``."""


PAPER_RESULTS_FILE = Path(__file__).parent / "results" / "table1-paper.npz"
"""The stored run of the ``full`` configuration, the authors' as we reconstruct it (``python -m joma_lib table1
--config full --stack --device cuda --save <this file>``), with its manifest beside it (``.json``:
:func:`config_record`), read back by the figure ``c-table1-paper``."""


def config_record(config: Table1Config) -> dict[str, Any]:
    """What defines a run's numbers, as JSON: every field of ``config`` except the CPU thread count."""
    record = asdict(config)
    del record["cpu_threads"]
    return json.loads(json.dumps(record))  # tuples as lists, as they read back


@dataclass(frozen=True)
class Table1Result:
    """Alignment matrices ``[setting, seed, layer, level]`` of the trained networks, the same networks at
    initialisation, and the shuffled-label controls; final training losses ``[setting, seed]``."""

    settings: tuple[Setting, ...]
    seeds: tuple[int, ...]
    scores: np.ndarray  # (n_settings, n_seeds, n_layers, n_levels)
    scores_init: np.ndarray  # the same networks before training
    scores_control: np.ndarray  # the same initial networks trained on shuffled labels
    final_loss: np.ndarray  # (n_settings, n_seeds): mean training loss over the last 10% of steps
    final_loss_control: np.ndarray  # the same for the shuffled-label controls
    scores_change: np.ndarray  # alignment of the change training made (change_alignment_matrix), real labels
    scores_change_control: np.ndarray  # the same for the shuffled-label controls

    def arrays(self) -> dict[str, np.ndarray]:
        """Every field as a numpy array (settings as ``n_combinations`` and ``level_sizes``), for an npz file."""
        return {"n_combinations": np.array([n for n, _ in self.settings]),
                "level_sizes": np.array([sizes for _, sizes in self.settings]), "seeds": np.asarray(self.seeds),
                "scores": self.scores, "scores_init": self.scores_init, "scores_control": self.scores_control,
                "final_loss": self.final_loss, "final_loss_control": self.final_loss_control,
                "scores_change": self.scores_change, "scores_change_control": self.scores_change_control}

    def format(self) -> str:
        """The paper's table as text: per setting, ``mean +- std`` (ddof=1) over seeds of the diagonal scores."""
        n_diag = min(self.scores.shape[2], self.scores.shape[3] - 1)  # the class level is not in the paper's table
        kinds = {"trained": self.scores, "init": self.scores_init, "control": self.scores_control}
        cols = [f"L{k} {kind}" for kind in kinds for k in range(n_diag)]
        lines = [f"{'comb':>4} {'level sizes':>12}  " + "  ".join(f"{c:>15}" for c in cols)]
        for i, (n_comb, sizes) in enumerate(self.settings):
            cells = [f"{s[i, :, k, k].mean():.3f} +- {seed_std(s[i, :, k, k]):.3f}"
                     for s in kinds.values() for k in range(n_diag)]
            lines.append(f"{n_comb:>4} {str(tuple(sizes)):>12}  " + "  ".join(f"{c:>15}" for c in cells))
        return "\n".join(lines)


def seed_std(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Standard deviation over seeds with ``ddof=1`` (as the authors' table script); 0 for a single seed."""
    values = as_finite_array("values", values)
    n = values.size if axis is None else values.shape[axis]
    if n == 0:
        raise ValueError(f"values must hold at least one seed's value, got {values!r}")
    return values.std(axis=axis, ddof=1) if n > 1 else np.zeros_like(values.mean(axis=axis))


def run_table1(config: Table1Config, device: str | None = None, progress: bool = False) -> Table1Result:
    """Train and score every (setting, seed) of ``config``, with real and with shuffled labels: the whole Table 1."""
    n_levels(config)
    keep_freed_memory()
    return table_of(config, train_runs(config, device, progress))


RunKey = tuple[int, int, bool]
"""A run of the table: (setting index, seed index, shuffled labels)."""


def train_runs(config: Table1Config, device: str | None = None, progress: bool = False) -> dict[RunKey, RunResult]:
    """Every run of the table trained alone (:func:`~joma_lib.theory.table1.model.train_and_score`), by
    :data:`RunKey`."""
    return {(i, j, shuffled): train_and_score(config, n_comb, sizes, seed, device, progress, shuffle_labels=shuffled)
            for i, (n_comb, sizes) in enumerate(config.settings)
            for j, seed in enumerate(config.seeds) for shuffled in (False, True)}


def n_levels(config: Table1Config) -> int:
    """The number of latent levels scored (classes included), the same for every setting or a ValueError."""
    levels = {len(sizes) + 1 for _, sizes in config.settings}
    if len(levels) != 1:
        raise ValueError(f"all settings must have the same number of latent levels, got {sorted(levels)}")
    return levels.pop()


def table_of(config: Table1Config, runs: Mapping[RunKey, RunResult]) -> Table1Result:
    """The table of ``runs[setting index, seed index, shuffled labels]``; the final loss is the mean over the last
    10% of steps."""
    n_steps_tail = max(1, config.steps // 10)
    shape = (len(config.settings), len(config.seeds), config.n_layers, n_levels(config))
    scores, scores_init, scores_control = np.empty(shape), np.empty(shape), np.empty(shape)
    change, change_control = np.empty(shape), np.empty(shape)
    final_loss, final_loss_control = np.empty(shape[:2]), np.empty(shape[:2])
    for i, j in np.ndindex(*shape[:2]):
        run, control = runs[i, j, False], runs[i, j, True]
        scores[i, j], scores_init[i, j], scores_control[i, j] = run.scores, run.scores_init, control.scores
        change[i, j], change_control[i, j] = run.scores_change, control.scores_change
        final_loss[i, j] = run.losses[-n_steps_tail:].mean()
        final_loss_control[i, j] = control.losses[-n_steps_tail:].mean()
    return Table1Result(config.settings, config.seeds, scores, scores_init, scores_control, final_loss,
                        final_loss_control, change, change_control)


def save_result(result: Table1Result, path: Path, config: Table1Config | None = None) -> None:
    """Write :meth:`Table1Result.arrays` to ``path`` (npz) atomically: a complete file or none. With ``config``,
    its :func:`config_record` goes beside it (``path`` with suffix ``.json``), written together with the npz."""
    if path.suffix != ".npz":
        raise ValueError(f"path must end in .npz, got {str(path)!r}")
    arrays: dict[str, Any] = result.arrays()  # Any: numpy's stub types savez's keywords as allow_pickle
    paths = [path] if config is None else [path, path.with_suffix(".json")]
    with atomic_paths(paths) as tmps:
        with tmps[0].open("wb") as handle:
            np.savez(handle, **arrays)
        if config is not None:
            tmps[1].write_text(json.dumps({"config": config_record(config)}, indent=1) + "\n")


def load_result(path: Path) -> Table1Result:
    """The :class:`Table1Result` that :func:`save_result` wrote to ``path``."""
    with np.load(path, allow_pickle=False) as npz:
        a = {key: npz[key] for key in npz.files}
    settings = tuple((int(n), tuple(int(s) for s in sizes)) for n, sizes in zip(a["n_combinations"], a["level_sizes"]))
    return Table1Result(settings, tuple(int(seed) for seed in a["seeds"]), a["scores"], a["scores_init"],
                        a["scores_control"], a["final_loss"], a["final_loss_control"], a["scores_change"],
                        a["scores_change_control"])
