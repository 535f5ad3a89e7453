"""Redraw time of the Theorem 1 widget (target: a median under 100 ms per redraw).

Prints, for every attention kind, the median over ``--repeats`` redraws of the simulation alone and of
the full redraw of the panel (``Panel.update``: simulation + drawing + PNG encoding into the image widget),
wall clock and the process's CPU time side by side (the latter is what a loaded, shared machine changes
least), and stores them in ``joma_lib/benchmark_results/theorem1_widget.json`` (the Performance page).
Each timed redraw changes a control (the seed alternates between 1 and 2), as a reader's click does::

    python benchmarks/bench_theorem1_widget.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from _results import median_ms, write_results

from joma_lib.attention_kinds import ATTENTIONS
from joma_lib.widgets.theorem1 import invariant_explorer, simulate


def timed(fn: Callable[[], object], repeats: int) -> dict[str, float]:
    """Median wall-clock and CPU milliseconds of ``repeats`` calls."""
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return {"wall_ms": median_ms(wall), "cpu_ms": median_ms(cpu)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--no-write", action="store_true", help="print only; do not update joma_lib/benchmark_results/")
    args = p.parse_args()
    torch.set_num_threads(1)
    panel = invariant_explorer()  # builds the figure and draws once (warm-up)
    print(f"{'attention':<10} {'simulate wall/CPU [ms]':>23} {'full redraw wall/CPU [ms]':>26}")
    rows = {}
    for attention in ATTENTIONS:
        sim = timed(lambda: simulate(attention, "relu", 2.0, 1), args.repeats)
        seeds = iter([1, 2] * args.repeats)
        full = timed(lambda: panel.update(attention=attention, phi="relu", lr_ratio=2.0, seed=next(seeds)),
                     args.repeats)
        if panel.error is not None:
            raise RuntimeError(f"the panel refused a redraw: {panel.error}")
        rows[attention] = {"simulate": sim, "redraw": full}
        print(f"{attention:<10} {sim['wall_ms']:>14.0f} / {sim['cpu_ms']:>5.0f} "
              f"{full['wall_ms']:>17.0f} / {full['cpu_ms']:>5.0f}")
    if not args.no_write:
        write_results("theorem1_widget", {"settings": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
