"""The Performance page's GPU section: the language model's step per depth and the goals of the paper-scale work,
read from the stored GPU benchmarks (``lm_stack``: ``benchmarks/bench_lm_stack.py --device cuda``; ``table1_bench``:
``benchmarks/bench_table1_stack.py --config full --device cuda``). Every verdict is computed from the stored numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from joma_lib.chapters.performance.presentation import span
from joma_lib.kit.benchmarks import table1_steps
from joma_lib.lm.presets import paper_sweep_configs
from joma_lib.base.stack_time import PLAN_SHARE
from joma_lib.lm.stack_plan import StackCost, plan
from joma_lib.theory.table1.runs import CONFIGS
from joma_lib.theory.table1.stack_plan import Table1StackCost
from joma_lib.theory.table1.stacked import stack_runs

PAPER_SWEEP_RUNS = len(paper_sweep_configs())
"""The distinct runs of Figs. 6 and 8 (Fig. 6's 5-layer runs are Fig. 8's at its learning rate)."""
PAPER_STEPS = paper_sweep_configs()[0].steps
"""The training steps of every run of the paper sweep."""
TABLE1_RUNS = len(stack_runs(CONFIGS["full"]))
"""The runs of Table 1 at its full configuration."""
ONE_RUN_BAR = 5.0
"""The goal for one run: its step at least this many times as fast as the authors' step, on the same GPU."""
SWEEP_BAR_MINUTES = 10.0
"""The goal for the 30-run paper sweep of Figs. 6 and 8 on one GPU (training only), in minutes."""
TABLE1_BAR_MINUTES = 5.0
"""The goal for Table 1 at its full configuration, all 40 runs, on one GPU, in minutes."""
LOAN_MINUTES = 15
"""The device time of one GPU loan, in minutes."""
LOAN_OVERHEAD_SECONDS = {"the machine's start": 35, "the checks before the runs": 150,
                         "the pause between the loan's two calls": 45, "the runs' margin before the loan ends": 60}
"""Where a loan's time goes besides the paper-scale runs, as ``benchmarks/gpu_loans/README.md`` spends it (an
estimate): the start as loans have measured it; the checks that run first, 95 s for the three the last receipt timed
(bench-lm, tests-gpu, bench-compile) and the read-out and profile benchmarks added since, capped at 30 and 60 s; the
second call's start; and ``gpu_checks.sh``'s rule that a stack must end 60 s before the loan does."""
LOAN_RUN_SECONDS = 60 * LOAN_MINUTES - sum(LOAN_OVERHEAD_SECONDS.values())
"""What a loan leaves for training the paper-scale runs, in seconds."""


@dataclass(frozen=True)
class Goal:
    """One goal of the paper-scale work and what the stored GPU benchmarks make of it."""

    goal: str
    measured: str
    met: bool


def ratio_range(lm_stack: Mapping[str, Any], key: str) -> str:
    """The smallest and the largest of a ratio over the depths (``authors_over_one``, ``authors_over_stacked``),
    as the page writes them (one value where both print alike)."""
    values = [r[key] for r in lm_stack["results"]["rows"]]
    return span(float(np.min(values)), float(np.max(values)))  # numpy's: a NaN is never skipped


def step_rows(lm_stack: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per depth: the authors' step, our one-run step and our stacked step per run, each in its fastest
    precision, and the two ratios (the authors' step over ours)."""
    return [{"layers": r["layers"], "authors (ms)": round(r["median_ms"]["authors"], 2),
             "ours, one run (ms)": f"{r['median_ms'][r['best_one']]:.2f} ({r['best_one'].removeprefix('one ')})",
             "ours, stack of R, per run (ms)": (f"{r['stack_ms_per_run']:.2f} "
                                                f"({r['best_stack'].removeprefix('stack ')}, R = {r['stack']})"),
             "authors / one run": f"{r['authors_over_one']:.1f}x",
             "authors / stacked, per run": f"{r['authors_over_stacked']:.1f}x"} for r in lm_stack["results"]["rows"]]


def launch_bound(lm_stack: Mapping[str, Any]) -> dict[str, Any]:
    """What says the step is bound by how many kernels run, not by their arithmetic. ``stack_over_one``: a stack's
    step over one run's step, smallest and largest over the depths (the stack does R times the arithmetic), and
    ``stacks`` the smallest and largest R. ``layer_ms_one`` and ``layer_ms_stack``: the cost of one more layer
    (least-squares slope of the step over the depths, ms) for one run and for a stack of ``layer_stack`` runs, the
    stack size most depths were timed at (the slope is taken over those depths only, as R changes the step)."""
    rows = lm_stack["results"]["rows"]
    ratios = [r["median_ms"][r["best_stack"]] / r["median_ms"][r["best_one"]] for r in rows]
    sizes = [r["stack"] for r in rows]
    common = max(set(sizes), key=sizes.count)
    same = [r for r in rows if r["stack"] == common]
    if len(same) < 2:
        raise ValueError(f"the layer cost needs two depths timed at one stack size; stack sizes by depth: {sizes}")
    layers = [r["layers"] for r in same]
    return {"stack_over_one": (float(np.min(ratios)), float(np.max(ratios))), "stacks": (min(sizes), max(sizes)),
            "layer_stack": common,
            "layer_ms_one": float(np.polyfit(layers, [r["median_ms"][r["best_one"]] for r in same], 1)[0]),
            "layer_ms_stack": float(np.polyfit(layers, [r["median_ms"][r["best_stack"]] for r in same], 1)[0])}


def paper_scale_goals(lm_stack: Mapping[str, Any], table1: Mapping[str, Any]) -> list[Goal]:
    """The goals of the paper-scale work on one GPU, each with what the stored benchmarks measured or project."""
    rows = lm_stack["results"]["rows"]
    one, stacked = (float(np.min([r[key] for r in rows])) for key in ("authors_over_one", "authors_over_stacked"))
    sweep_min = lm_stack["results"]["projected_paper_sweep_s"] / 60
    t1, t1_alone = table1_steps(table1)
    t1_min, t1_alone_min = t1["whole_table_s"] / 60, t1_alone["whole_table_s"] / 60
    return [
        Goal(f"one run's step at least {ONE_RUN_BAR:.0f}x as fast as the authors' step",
             f"{ratio_range(lm_stack, 'authors_over_one')}x, by depth", one >= ONE_RUN_BAR),
        Goal(f"the same {ONE_RUN_BAR:.0f}x per run, runs of one shape stacked",
             f"{ratio_range(lm_stack, 'authors_over_stacked')}x, by depth", stacked >= ONE_RUN_BAR),
        Goal(f"the {PAPER_SWEEP_RUNS}-run paper sweep (Figs. 6 and 8) in at most {SWEEP_BAR_MINUTES:.0f} minutes",
             f"{sweep_min:.0f} minutes projected (stacks, training only)", sweep_min <= SWEEP_BAR_MINUTES),
        Goal(f"Table 1 at its full configuration, all {TABLE1_RUNS} runs, in at most {TABLE1_BAR_MINUTES:.0f} minutes",
             f"{t1_min:.0f} minutes projected stacked in {t1['precision']}{', compiled' if t1.get('compiled') else ''} "
             f"({t1_alone_min:.0f} run by run)",
             t1_min <= TABLE1_BAR_MINUTES),
    ]


def op_count_rows(*counts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per depth and stack size, the operations (GPU kernels) of one stacked step in stored counts made at
    successive versions of the code (``benchmarks/bench_step_ops.py``): ``first -> ... -> last`` and how many times
    fewer the last is than the first."""
    if len(counts) < 2:
        raise ValueError(f"operation counts are compared between at least two stored counts, got {len(counts)}")
    rows = []
    for by_count in zip(*(c["results"]["rows"] for c in counts), strict=True):
        first, last = by_count[0], by_count[-1]
        if any(c["layers"] != first["layers"] or c["ops"].keys() != first["ops"].keys() for c in by_count):
            raise ValueError("the operation counts were made at different depths or stack sizes")
        rows.append({"layers": first["layers"], **{
            f"R = {r}": " → ".join(str(c["ops"][r]) for c in by_count)
            + f" ({first['ops'][r] / last['ops'][r]:.1f}x fewer)" for r in first["ops"]}})
    return rows


def layer_cost_over_authors(lm_stack: Mapping[str, Any]) -> float:
    """What one more layer adds to one run's step (in its fastest precision), over what it adds to the authors' step
    timed beside it (least-squares slopes over the depths): a measure of our layer's cost that a faster or slower
    machine leaves alone, so that GPU measurements made on two machines compare."""
    rows = lm_stack["results"]["rows"]
    layers = [r["layers"] for r in rows]
    ours = np.polyfit(layers, [r["median_ms"][r["best_one"]] for r in rows], 1)[0]
    authors = np.polyfit(layers, [r["median_ms"]["authors"] for r in rows], 1)[0]
    return float(ours / authors)


def ops_per_layer(counts: Mapping[str, Any], stack: str = "1") -> float:
    """The operations one more layer adds to a step of ``stack`` runs (least-squares slope over the depths)."""
    rows = counts["results"]["rows"]
    return float(np.polyfit([r["layers"] for r in rows], [r["ops"][stack] for r in rows], 1)[0])


def ops_per_run(counts: Mapping[str, Any], layers: int = 1) -> float:
    """The operations one more run adds to a stack's step at depth ``layers`` (least-squares slope over the stack
    sizes)."""
    (row,) = [r for r in counts["results"]["rows"] if r["layers"] == layers]
    return float(np.polyfit([int(r) for r in row["ops"]], list(row["ops"].values()), 1)[0])


def stack_costs(lm_stack: Mapping[str, Any], waiting: Mapping[int, int], steps: int = PAPER_STEPS
                ) -> dict[int, StackCost]:
    """Per depth with runs waiting, the :class:`~joma_lib.lm.stack_plan.StackCost` of a stack of them from the stored
    step (training only, no evaluation): one run and a stack of R in their fastest precision, the line through the
    two extended to all ``waiting[depth]`` runs where more wait than R (an extrapolation, as the planner's own
    measurement at all of them is not stored)."""
    rows = {r["layers"]: r for r in lm_stack["results"]["rows"]}
    missing = sorted(set(waiting) - set(rows))
    if missing:
        raise ValueError(f"the stored step has no row for {missing} layers (it has {sorted(rows)})")
    costs = {}
    for layers, n in waiting.items():
        r = rows[layers]
        one, stack = r["median_ms"][r["best_one"]] / 1e3, r["median_ms"][r["best_stack"]] / 1e3
        per_run = (stack - one) / (r["stack"] - 1)
        costs[layers] = StackCost(n, layers, steps, 0, (one, one + per_run * (n - 1)), (0.0, 0.0))
    return costs


def table1_cost(table1: Mapping[str, Any]) -> Table1StackCost:
    """Table 1's stacks at its full configuration, training only, from a stored ``table1_bench``: the step of a
    stack of ``R`` runs on the line between one run alone and the stack timed (the step as the command line trains
    it, :func:`~joma_lib.kit.benchmarks.table1_steps`), as ``table1 --finish-within`` plans them
    (:mod:`joma_lib.theory.table1.stack_plan`)."""
    stack, alone = table1_steps(table1)
    return Table1StackCost(stack["runs"], CONFIGS["full"].steps, (alone["step_ms"] / 1e3, stack["step_ms"] / 1e3),
                           0.0)


def loans_needed(costs: Mapping[int, StackCost], seconds: float, fixed: int | None = None,
                 table1: Table1StackCost | None = None) -> int:
    """GPU loans of ``seconds`` each until every run of ``costs`` has finished, and with ``table1`` every run of
    Table 1 too. A stack whose training takes ``c`` occupies ``c / PLAN_SHARE`` of a loan (evaluations,
    checkpoints, its start: the margin the planner keeps), and one that does not end before the loan does is lost.
    ``fixed=None``: stacks sized to the time left, as ``lm run --finish-within`` plans them
    (:func:`~joma_lib.lm.stack_plan.plan`, made again after each stack); ``fixed=K``: stacks of at most K runs, the
    cheapest first, as ``--stop-after`` with ``--stack-size K`` trains them (a loan ends at the first stack that
    does not fit in what is left: it would be started, and lost). Table 1's stacks come after the sweep's in each
    loan (``gpu_checks.sh``), each as large as fits (at most the size timed), as ``table1 --finish-within`` plans
    them."""
    left = {layers: cost.runs for layers, cost in costs.items()}
    table1_left = 0 if table1 is None else TABLE1_RUNS
    loans = 0
    while any(left.values()) or table1_left:
        loans, time_left, trained = loans + 1, seconds, 0
        while any(left.values()):
            shapes = [layers for layers in left if left[layers]]
            if fixed is None:
                sizes = plan([costs[k] for k in shapes], [left[k] for k in shapes], time_left)
                chosen = [(costs[k].seconds(r), k, r) for k, r in zip(shapes, sizes, strict=True) if r]
                if not chosen:
                    break
                cost, layers, r = min(chosen)
            else:
                cost, layers, r = min((costs[k].seconds(min(fixed, left[k])), k, min(fixed, left[k])) for k in shapes)
                if cost > PLAN_SHARE * time_left:
                    break
            time_left, trained, left[layers] = time_left - cost / PLAN_SHARE, trained + r, left[layers] - r
        while table1 is not None and table1_left and (r := min(table1.fitting(time_left), table1_left)):
            time_left, trained, table1_left = time_left - table1.seconds(r) / PLAN_SHARE, trained + r, table1_left - r
        if not trained:
            raise ValueError(f"no stack of the waiting runs finishes in a loan of {seconds:g} s")
    return loans
