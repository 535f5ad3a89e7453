"""The stored benchmark results: one JSON file per benchmark in the package folder ``joma_lib/kit/benchmark_results/``.

Every script in ``benchmarks/`` prints its table and stores its numbers with :func:`save_results` (atomically, with
the date and the machine they were measured on); the book's Performance page reads them back with
:func:`load_results` (a stored Table 1 benchmark's rows: :func:`table1_steps`). This module is the only code that
knows where the files live. The timing helpers the scripts share (:data:`CLOCKS`, :func:`median_ms`) are here too,
and the allocator choice of the scripts that time training steps (:func:`add_allocator_option`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from joma_lib.base.cpu import cpu_identity
from joma_lib.base.io import atomic_path
from joma_lib.base.memory import keep_freed_memory

RESULTS_DIR = Path(__file__).resolve().parent / "benchmark_results"
"""Where the results live: shipped with the package (``[tool.setuptools.package-data]``)."""
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "process": time.process_time}
"""The two clocks a benchmark may time with: wall clock and this process's CPU time."""
_NAME = re.compile(r"[a-z0-9][a-z0-9_]*")


ALLOCATORS = {"kept": "freed memory kept for the next step, as the runners train (joma_lib.base.memory)",
              "system": "the C library's defaults, as the authors' script runs"}
"""How the steps a benchmark times get their memory (one choice for every step of the process)."""


def add_allocator_option(parser: argparse.ArgumentParser) -> None:
    """``--allocator kept|system`` (default kept): see :data:`ALLOCATORS`."""
    parser.add_argument("--allocator", choices=sorted(ALLOCATORS), default="kept",
                        help="; ".join(f"{k}: {v}" for k, v in ALLOCATORS.items()) + " (default kept)")


def apply_allocator(choice: str) -> str:
    """Set the process's allocator to ``choice`` (of :data:`ALLOCATORS`) before anything is timed; returns the one in
    effect, in words (``kept`` falls back to ``system`` where the C library is not glibc)."""
    if choice not in ALLOCATORS:
        raise ValueError(f"allocator must be one of {', '.join(sorted(ALLOCATORS))}, got {choice!r}")
    return "kept" if choice == "kept" and keep_freed_memory() else "system"


def median_ms(times: list[float]) -> float:
    """The median of ``times`` (seconds), in milliseconds."""
    return 1000.0 * statistics.median(times)


def machine() -> dict[str, Any]:
    """What the numbers were measured on: CPU, core count, load average, Python and torch versions, the GPU."""
    import torch

    info: dict[str, Any] = {"cpu": cpu_identity().model, "cores": os.cpu_count(), "python": platform.python_version(),
                            "torch": torch.__version__, "platform": platform.platform()}
    if hasattr(os, "getloadavg"):
        info["load_average_1min"] = round(os.getloadavg()[0], 2)
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def results_path(name: str, folder: Path | None = None) -> Path:
    """The file of benchmark ``name``: ``<folder>/<name>.json`` (default folder: :data:`RESULTS_DIR`).

    ``name`` is lower-case letters, digits and underscores (it becomes a file name), else :class:`ValueError`.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"a benchmark result name is lower-case letters, digits and '_' (a file name), not {name!r}")
    return (RESULTS_DIR if folder is None else folder) / f"{name}.json"


def save_results(name: str, results: Mapping[str, Any], note: str = "", folder: Path | None = None) -> Path:
    """Store ``results`` as benchmark ``name`` with the date, the :func:`machine` and ``note``; return the file.

    The file is replaced atomically: when ``results`` cannot be written (not JSON-serialisable, say), the
    previous file, if any, is left as it was and no partial file remains.
    """
    path = results_path(name, folder)
    payload = {"benchmark": name, "date": datetime.date.today().isoformat(), "machine": machine(), "note": note,
               "results": dict(results)}
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path}")
    return path


def load_results(name: str, folder: Path | None = None) -> dict[str, Any]:
    """The stored benchmark ``name``: ``{"benchmark", "date", "machine", "note", "results"}``."""
    path = results_path(name, folder)
    if not path.is_file():
        stored = sorted(p.stem for p in path.parent.glob("*.json"))
        raise FileNotFoundError(f"no stored benchmark {name!r} in {path.parent} "
                                f"(stored: {', '.join(stored) or 'none'})")
    result: dict[str, Any] = json.loads(path.read_text())
    return result


TABLE1_ENGINE = "stacked (bmm)"
"""The Table 1 stack the command line trains with (``benchmarks/bench_table1_stack.py`` also times the vmap
alternative; it names each row ``"<method>, <precision>"``, a compiled stack ``"<method>, compiled, <precision>"``)."""

#: Table 1's stack trains compiled (``--compile``) when the compiled step is at least this much faster in the precision
#: the stack as written is fastest in, its losses at most this far (relative) from the uncompiled ones on the same
#: weights: rounding, not another computation. The language model's bars; set before any compiled Table 1 step ran.
TABLE1_COMPILE_SPEEDUP, TABLE1_COMPILE_AGREES = 1.1, 1e-2


def _table1_stacks(table1: Mapping[str, Any], compiled: bool) -> dict[str, Mapping[str, Any]]:
    """The stored stacked rows of :data:`TABLE1_ENGINE`, compiled or not, by precision."""
    return {row["precision"]: row for name, row in table1["results"]["rows"].items()
            if name.startswith(f"{TABLE1_ENGINE}, ") and bool(row.get("compiled")) == compiled}


def table1_compile_pays(table1: Mapping[str, Any]) -> bool:
    """Whether a stored ``table1_bench`` says Table 1's runs should compile (:data:`TABLE1_COMPILE_SPEEDUP`,
    :data:`TABLE1_COMPILE_AGREES`, in the precision of the fastest stack as written)."""
    plain, compiled = _table1_stacks(table1, False), _table1_stacks(table1, True)
    if not plain:
        return False
    best = min(plain, key=lambda p: plain[p]["per_run_step_ms"])
    apart = table1["results"].get("compiled_loss_apart", {}).get(best, float("inf"))
    return (best in compiled and apart <= TABLE1_COMPILE_AGREES
            and plain[best]["per_run_step_ms"] >= TABLE1_COMPILE_SPEEDUP * compiled[best]["per_run_step_ms"])


def table1_steps(table1: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """In a stored ``table1_bench``: the Table 1 step as the command line trains it, the fastest row of
    :data:`TABLE1_ENGINE` over the precisions timed (what its ``--precision auto`` keeps), compiled where that pays
    (:func:`table1_compile_pays`), and one run alone."""
    stacks = _table1_stacks(table1, table1_compile_pays(table1))
    alone = [row for name, row in table1["results"]["rows"].items() if name.startswith("unstacked, ")]
    if not stacks or len(alone) != 1:
        raise ValueError(f"a stored Table 1 benchmark has rows '{TABLE1_ENGINE}, <precision>' and one "
                         f"'unstacked, <precision>', got {sorted(table1['results']['rows'])}")
    return min(stacks.values(), key=lambda row: row["whole_table_s"]), alone[0]
