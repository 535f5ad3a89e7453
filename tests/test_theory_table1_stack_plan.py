"""Table 1's stacks sized to the time left (:mod:`joma_lib.theory.table1.stack_plan`): the cost model, the plan, the
real timing on the CPU, and the command line's ``--finish-within`` (trains what fits, exit 75 for the rest)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from joma_lib.base.stack_time import PLAN_SHARE, DeadlineReached
import joma_lib.theory.table1.stack_plan as stack_plan_module
from joma_lib.theory.table1.cli import main
from joma_lib.theory.table1.model import Table1Config
from joma_lib.theory.table1.stack_plan import FittedSizes, Table1StackCost, measure_cost

TINY = Table1Config(d_model=8, d_hidden=16, steps=9, batch_size=8, lr=3e-3, n_test=32, cpu_threads=1,
                    settings=((2, (10, 20)), (3, (10, 20))), seeds=(3,))
#: 1,000 steps of 0.1 s for one run, 0.4 s for ten, and 5 s a run outside its steps: a stack of R takes
#: 100 + 300 (R - 1) / 9 + 5 R seconds (105 s for one, 450 s for ten)
COST = Table1StackCost(runs=10, steps=1000, step=(0.1, 0.4), per_run=5.0)


def test_a_stack_costs_its_steps_on_the_line_between_the_sizes_timed_and_its_runs_outside_them() -> None:
    assert COST.seconds(1) == pytest.approx(105) and COST.seconds(10) == pytest.approx(450)
    assert COST.seconds(4) == pytest.approx(100 + 100 + 20)
    assert COST.fitting(451 / PLAN_SHARE) == 10 and COST.fitting(449 / PLAN_SHARE) == 9
    assert COST.fitting(221 / PLAN_SHARE) == 4 and COST.fitting(104 / PLAN_SHARE) == 0
    with pytest.raises(ValueError, match=r"r must be in \[1, 10\]"):
        COST.seconds(11)


def test_fitted_sizes_plan_with_the_time_left_and_stop_when_no_stack_fits(tmp_path) -> None:
    lines: list[str] = []
    sizes = FittedSizes(TINY, torch.device("cpu"), tmp_path, 220 / PLAN_SHARE + 5, log=lines.append)
    sizes.cost = COST  # as measured: no stack above 10 runs is asked for here
    assert sizes(10) == 4  # the time fits four of the ten waiting
    assert sizes(3) == 3  # three waiting: at most three, however much time is left
    assert any("planned with" in line and "a stack of 4 Table 1 run(s), about 220 s" in line for line in lines)
    assert any("a stack of 4 Table 1 run(s): done in" in line for line in lines)  # reported at the next plan
    sizes.finish_by -= 1000
    with pytest.raises(DeadlineReached, match=r"6 Table 1 run\(s\) not started: a stack of one needs about 105 s"):
        sizes(6)
    capped = FittedSizes(TINY, torch.device("cpu"), tmp_path, 1e6, cap=2, log=lines.append)
    capped.cost = COST
    assert capped(10) == 2
    with pytest.raises(ValueError, match="finish_within must be"):
        FittedSizes(TINY, torch.device("cpu"), tmp_path, 0)


def test_a_plan_that_wants_more_runs_than_were_timed_times_them_again(tmp_path, monkeypatch) -> None:
    timed: list[int] = []
    monkeypatch.setattr(stack_plan_module, "measure_cost",
                        lambda config, n_runs, device: timed.append(n_runs) or replace(COST, runs=n_runs))
    sizes = FittedSizes(TINY, torch.device("cpu"), tmp_path, 1e6, log=lambda _: None)
    sizes.cost = replace(COST, runs=2)  # timed for two runs, in an earlier plan
    assert sizes(4) == 4 and timed == [4]


def test_a_stack_is_timed_at_one_run_and_at_all_and_a_run_outside_its_steps_is_built_and_scored(monkeypatch) -> None:
    """On a clock where building a stack takes 10 s, its step 1 s per run, scoring a run 3 s, and nothing else."""
    clock = [0.0]
    monkeypatch.setattr(stack_plan_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))  # its clock only

    def build(config: Table1Config, n_runs: int, device: torch.device) -> SimpleNamespace:
        clock[0] += 10
        return SimpleNamespace(runs=n_runs, params={})

    def step(probe: SimpleNamespace) -> None:
        clock[0] += probe.runs

    def score(*_: object) -> None:
        clock[0] += 3

    for name, fake in (("probe_stack", build), ("probe_step", step), ("score_runs", score)):
        monkeypatch.setattr(stack_plan_module, name, fake)
    cost = measure_cost(TINY, 3, torch.device("cpu"))
    assert cost.step == (1.0, 3.0) and cost.per_run == 13.0


def test_measuring_a_stack_times_it_here_and_leaves_the_random_state_alone() -> None:
    before = torch.get_rng_state()
    cost = measure_cost(TINY, 3, torch.device("cpu"))
    assert torch.equal(torch.get_rng_state(), before)
    assert cost.runs == 3 and cost.steps == TINY.steps
    assert all(np.isfinite(cost.step)) and min(cost.step) > 0 and cost.per_run > 0
    with pytest.raises(ValueError, match=r"n_runs must be an integer in \[1, 4\]"):
        measure_cost(TINY, 5, torch.device("cpu"))


def test_the_command_line_trains_the_stacks_that_fit_and_exits_75_for_the_rest(capsys, tmp_path) -> None:
    argv = ["--config", "check", "--steps", "3", "--seeds", "1", "--device", "cpu", "--no-progress", "--stack",
            "--out", str(tmp_path / "run")]
    assert main(argv + ["--finish-within", "0.001"]) == 75  # not even one run's stack in a millisecond
    captured = capsys.readouterr()
    assert "4 Table 1 run(s) not started" in captured.err and "run the same command again" in captured.err
    assert "timed on cpu" in captured.out and not list((tmp_path / "run").glob("stack-*"))
    assert main(argv + ["--finish-within", "3600", "--stack-size", "3"]) == 0
    out = capsys.readouterr().out
    assert "a stack of 3 Table 1 run(s)" in out and "a stack of 1 Table 1 run(s): done in" in out
    assert "L0 trained" in out
    for extra, message in [(["--finish-within", "0"], "--finish-within must be in (0, "),
                           (["--finish-within", "soon"], "--finish-within must be a finite number"),
                           (["--finish-within", "nan"], "--finish-within must be a finite number")]:
        with pytest.raises(SystemExit) as exit_info:
            main(argv + extra)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    for bad, message in [(["--finish-within", "60"], "--finish-within needs --stack"),
                         (["--stack", "--finish-within", "60"], "--finish-within needs --out")]:
        with pytest.raises(SystemExit):
            main(["--config", "check", "--device", "cpu", *bad])
        assert message in capsys.readouterr().err
