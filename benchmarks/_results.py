"""Shared by the benchmarks: the machine's description and the stored results file each one writes.

Every benchmark prints its table and writes ``joma_lib/benchmark_results/<name>.json`` (atomically) with the
date, the machine and the numbers; ``book/performance.md`` reads these files.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from joma_lib.io import atomic_path

RESULTS_DIR = Path(__file__).resolve().parents[1] / "joma_lib" / "benchmark_results"
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "process": time.process_time}


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """What the numbers were measured on: CPU, core count, load average, Python and torch versions."""
    import torch

    info: dict[str, Any] = {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
                            "torch": torch.__version__, "platform": platform.platform()}
    if hasattr(os, "getloadavg"):
        info["load_average_1min"] = round(os.getloadavg()[0], 2)
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def median_ms(times: list[float]) -> float:
    return 1000.0 * statistics.median(times)


def write_results(name: str, results: dict[str, Any], note: str = "") -> Path:
    """Write ``joma_lib/benchmark_results/<name>.json`` with the date, the machine, ``note`` and ``results``."""
    path = RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "date": datetime.date.today().isoformat(), "machine": machine(), "note": note,
               "results": results}
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path}")
    return path
