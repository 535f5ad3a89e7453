"""Redraw time of the Theorem 1 widget (target: a median under 100 ms per redraw).

Prints, for every attention kind, the median over ``--repeats`` runs of the widget's simulation (the numpy
engine), of the same simulation on the torch reference engine, and of a full redraw of the widget
(``LiveWidget.update``: simulation + drawing + PNG encoding into the image widget), each as wall clock and the
process's CPU time side by side (the latter is what a loaded, shared machine changes least). The three take
turns within each repeat, so a load that comes and goes slows them alike. Each timed redraw changes a control
(the seed alternates between 1 and 2), as a reader's click does. The numbers are stored in
``joma_lib/kit/benchmark_results/theorem1_widget.json`` (the Performance page)::

    python benchmarks/bench_theorem1_widget.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from joma_lib.theory.attention_kinds import ATTENTIONS
from joma_lib.theory.invariants import toy_check
from joma_lib.chapters.theorem1.widget import theorem1_live_widget, simulate
from joma_lib.kit.benchmarks import median_ms, save_results

PHI, LR_RATIO = "relu", 2.0


def timed(fns: dict[str, Callable[[int], object]], repeats: int) -> dict[str, dict[str, float]]:
    """Median wall-clock and CPU milliseconds of ``repeats`` calls ``fn(repeat)`` of each function, taking turns."""
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for repeat in range(repeats):
        for name, fn in fns.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn(repeat)
            wall[name].append(time.perf_counter() - w0)
            cpu[name].append(time.process_time() - c0)
    return {name: {"wall_ms": median_ms(wall[name]), "cpu_ms": median_ms(cpu[name])} for name in fns}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--no-write", action="store_true", help="print only; do not update joma_lib/kit/benchmark_results/")
    args = p.parse_args()
    torch.set_num_threads(1)
    widget = theorem1_live_widget()  # builds the figure and draws once (warm-up)
    toy_check(steps=2)  # first torch call
    print(f"{'attention':<10} {'simulate, torch':>16} {'simulate, numpy':>16} {'full redraw':>14}   "
          "(median wall / CPU ms)")
    rows = {}
    for attention in ATTENTIONS:
        def redraw(repeat: int, attention: str = attention) -> float:
            return widget.update(attention=attention, phi=PHI, lr_ratio=LR_RATIO, seed=1 + repeat % 2)

        rows[attention] = timed({
            "simulate_torch": lambda _, a=attention: toy_check(a, PHI, 1, steps=150, lr_ratio=LR_RATIO),
            "simulate": lambda _, a=attention: simulate(a, PHI, LR_RATIO, 1),
            "redraw": redraw,
        }, args.repeats)
        if widget.error is not None:
            raise RuntimeError(f"the widget refused a redraw: {widget.error}")
        print(f"{attention:<10}" + "".join(f"{rows[attention][k]['wall_ms']:>9.0f} / "
                                           f"{rows[attention][k]['cpu_ms']:>4.0f}"
                                           for k in ("simulate_torch", "simulate", "redraw")))
    if not args.no_write:
        save_results("theorem1_widget", {"settings": {**vars(args), "phi": PHI, "lr_ratio": LR_RATIO},
                                         "rows": rows})


if __name__ == "__main__":
    main()
