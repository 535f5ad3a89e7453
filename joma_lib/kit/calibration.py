"""Measured tolerances for trained figures: ``python -m joma_lib.figures calibrate [ids]``.

A figure whose ``make`` trains a network (``FigureSpec.trained``) is chaotic in the last bits: a different
CPU instruction set or BLAS kernel reorders float sums, and a few hundred Adam steps amplify that to a visible
difference. Its tolerance must therefore be measured, not guessed. ``calibrate`` regenerates the figure in
fresh subprocesses under several numerics *variants* (:data:`VARIANTS`: thread counts, ATen CPU capability,
``MKL_CBWR=COMPATIBLE``, oneDNN instruction-set ceilings, CUDA when present) and under other seeds
(``FigureSpec.calibration_seeds``), and records in the figure's reference json, per array:

* ``numerics_spread``: the largest ``|variant - reference|`` over all CPU variants (this machine's default
  included, so the difference between the machine that made the reference and this one counts too);
* ``seed_spread``: the largest ``|other seed - reference|``: the scale of genuine run-to-run variation;
* ``atol = MULTIPLE * numerics_spread`` (at least ``FLOOR``), ``rtol = 0``; ``gpu_atol`` likewise from the
  CUDA variant when one ran (else the spec's GPU allowance, at least ``atol``). Arrays that no variant moved
  (configuration arrays) keep the spec's tolerance.

``verify`` then uses these tolerances (:func:`~joma_lib.kit.harness.calibrated_tolerances`). Training curves are
compared point-wise at that tolerance, which is of the order of the seed spread (the ratio is recorded): the point-wise
check catches a changed or broken training loop, while the paper's content is checked by the figure's claims, evaluated
on summary statistics (minimum, rise, best loss) with thresholds stated in advance.

A figure trained in the precision that ``auto`` picks per machine has one reference per precision
(:attr:`~joma_lib.kit.registry.FigureSpec.reference_variant`); ``JOMA_PRECISION=fp32`` (or ``bf16``) selects
which one ``update`` and ``calibrate`` make, and every variant runs in that precision.

Every trained ``make`` pins its torch thread count (one thread), so the data do not depend on ``--jobs`` or on
the machine's core count; the ``threads-1``/``threads-2`` variants check that.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from joma_lib.kit.harness import compute, load_reference, reference_path
from joma_lib.kit.registry import FigureData, get_spec
from joma_lib.base.io import atomic_path, write_npz

MULTIPLE = 3.0  # tolerance = MULTIPLE x the largest deviation measured
FLOOR = 1e-6  # smallest absolute tolerance given to an array that some variant moved

CPU = {"JOMA_DEVICE": "cpu"}
VARIANTS: dict[str, dict[str, str]] = {
    "default": {**CPU},
    "threads-1": {**CPU, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    "threads-2": {**CPU, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
    "aten-default": {**CPU, "ATEN_CPU_CAPABILITY": "default"},
    "aten-avx2": {**CPU, "ATEN_CPU_CAPABILITY": "avx2"},
    "aten-avx512": {**CPU, "ATEN_CPU_CAPABILITY": "avx512"},
    "mkl-compatible": {**CPU, "MKL_CBWR": "COMPATIBLE"},
    # oneDNN's bf16 kernels below its default (AMX) ceiling: the path of CPUs whose AMX cannot run (joma_lib.base.cpu)
    "onednn-avx512-bf16": {**CPU, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
    "onednn-avx2": {**CPU, "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "cuda": {"JOMA_DEVICE": "cuda"},
}


def available_variants() -> list[str]:
    """The variants that can run here (``cuda`` only when torch sees a GPU)."""
    import torch

    return [name for name in VARIANTS if name != "cuda" or torch.cuda.is_available()]


def trained_figure_ids() -> list[str]:
    """Registered figures whose ``make`` trains a network."""
    from joma_lib.kit.registry import figure_ids

    return [fig_id for fig_id in figure_ids() if get_spec(fig_id).trained]


def run_variant(fig_id: str, env: Mapping[str, str], params: Mapping[str, Any], out: Path) -> FigureData:
    """Regenerate ``fig_id`` with ``params`` in a fresh Python process under ``env``; return its data."""
    cmd = [sys.executable, "-m", "joma_lib.kit.calibration", fig_id, str(out), json.dumps(dict(params))]
    subprocess.run(cmd, env={**os.environ, **env}, check=True, stdout=subprocess.DEVNULL)
    with np.load(out, allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


def max_deviation(new: FigureData, ref: FigureData) -> dict[str, float]:
    """Per numeric array, ``max |new - ref|``. NaN positions must agree (there they count as equal), as verify
    requires: a run that lost values where the reference has them, or the other way round, is an error, never a
    small spread."""
    dev = {}
    for name, b in ref.items():
        a = np.asarray(new[name])
        if b.dtype.kind not in "fciub":
            continue
        if a.shape != b.shape:
            raise ValueError(f"array {name!r}: shape {a.shape} differs from the reference's {b.shape}")
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        lost = np.isnan(a64) != np.isnan(b64)
        if lost.any():
            raise ValueError(f"array {name!r}: NaN where the reference has a number, or the other way round, at "
                             f"{int(lost.sum())} of {lost.size} entries; a run that lost values measures no spread")
        diff = np.abs(np.nan_to_num(a64 - b64, nan=0.0))
        dev[name] = float(diff.max()) if diff.size else 0.0
    return dev


def derive(fig_id: str, runs: Mapping[str, Mapping[str, float]], seed_runs: Mapping[str, Mapping[str, float]]
           ) -> dict[str, dict[str, Any]]:
    """Per-array spreads and the tolerances derived from them (see the module docstring)."""
    spec = get_spec(fig_id)
    cpu = [dev for name, dev in runs.items() if name != "cuda"]
    arrays: dict[str, dict[str, Any]] = {}
    for name in sorted(cpu[0]):
        spread = max(dev[name] for dev in cpu)
        seed = max((dev[name] for dev in seed_runs.values()), default=None)
        entry: dict[str, Any] = {"numerics_spread": spread, "seed_spread": seed}
        if spread > 0:
            entry.update(rtol=0.0, atol=max(MULTIPLE * spread, FLOOR))
        else:
            entry.update(rtol=spec.tolerance(name).rtol, atol=spec.tolerance(name).atol)
        if "cuda" in runs:  # measured on a GPU
            entry["gpu_atol"] = max(MULTIPLE * runs["cuda"][name], FLOOR, entry["atol"])
        else:  # not measured: the spec's GPU allowance, never below the CPU's measured tolerance
            entry["gpu_atol"] = max(spec.tolerance(name).for_device(True)[1], entry["atol"])
        if seed:
            entry["atol_over_seed_spread"] = entry["atol"] / seed
        arrays[name] = entry
    return arrays


def calibrate(fig_id: str, variants: Sequence[str] | None = None, jobs: int = 1,
              reference_dir: Path | None = None, log: Any = print) -> dict[str, Any]:
    """Run the variants and seeds of ``fig_id``, write the ``calibration`` block into its reference json."""
    spec = get_spec(fig_id)
    if not spec.trained:
        raise ValueError(f"{fig_id!r} is not a trained figure; calibrate applies to: {', '.join(trained_figure_ids())}")
    names = list(variants) if variants else available_variants()
    for name in names:
        if name not in VARIANTS:
            raise ValueError(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    ref = load_reference(fig_id, reference_dir)
    jobs_list: list[tuple[str, dict[str, str], dict[str, Any]]] = [(n, VARIANTS[n], {}) for n in names]
    jobs_list += [(f"seed {json.dumps(dict(o), sort_keys=True)}", VARIANTS["default"], dict(o))
                  for o in spec.calibration_seeds]
    with tempfile.TemporaryDirectory() as tmp:
        def one(job: tuple[str, dict[str, str], dict[str, Any]]) -> tuple[str, dict[str, float]]:
            label, env, params = job
            data = run_variant(fig_id, env, params, Path(tmp) / f"run{jobs_list.index(job)}.npz")
            dev = max_deviation(data, ref)
            log(f"{fig_id} [{label}]: largest deviation {max(dev.values()):.3g} "
                f"({max(dev, key=lambda k: dev[k])})")
            return label, dev
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = dict(pool.map(one, jobs_list))
    runs = {n: results[n] for n in names}
    seed_runs = {label: dev for label, dev in results.items() if label not in names}
    record = {
        "multiple": MULTIPLE, "floor_atol": FLOOR,
        "variants": {n: VARIANTS[n] for n in names},
        "seeds": [dict(o) for o in spec.calibration_seeds],
        "thread_independent": all(runs[n] == runs["default"] for n in runs if n.startswith("threads-"))
        if "default" in runs and any(n.startswith("threads-") for n in runs) else None,
        "max_deviation": {label: dev for label, dev in results.items()},
        "arrays": derive(fig_id, runs, seed_runs),
    }
    json_path = reference_path(fig_id, reference_dir).with_suffix(".json")
    manifest = json.loads(json_path.read_text())
    manifest["calibration"] = record
    with atomic_path(json_path) as tmp_json:
        tmp_json.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return record


def _worker(argv: Sequence[str]) -> None:
    """Subprocess entry: compute one figure with JSON parameter overrides and write its npz."""
    parser = argparse.ArgumentParser(prog="python -m joma_lib.kit.calibration")
    parser.add_argument("fig_id")
    parser.add_argument("out")
    parser.add_argument("params", nargs="?", default="{}")
    args = parser.parse_args(argv)
    write_npz(Path(args.out), compute(args.fig_id, **json.loads(args.params)))


if __name__ == "__main__":
    _worker(sys.argv[1:])
