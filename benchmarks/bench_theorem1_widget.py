"""Redraw time of the Theorem 1 widget (target: well under one second per redraw).

Prints, for every attention kind, the median over a few redraws of the simulation alone and of the full
redraw (simulation + drawing + PNG encoding), measured side by side in one run.
"""

from __future__ import annotations

import statistics
import time

import torch

from joma_lib.block import ATTENTIONS
from joma_lib.widgets.theorem1 import render_png, simulate


def median_seconds(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    torch.set_num_threads(1)
    render_png("exp", "relu", 1.0, 0)  # warm-up (imports, first torch call)
    print(f"{'attention':<10} {'simulate [s]':>13} {'full redraw [s]':>16}")
    for attention in ATTENTIONS:
        sim = median_seconds(lambda: simulate(attention, "relu", 2.0, 1))
        full = median_seconds(lambda: render_png(attention, "relu", 2.0, 1))
        print(f"{attention:<10} {sim:>13.3f} {full:>16.3f}")


if __name__ == "__main__":
    main()
