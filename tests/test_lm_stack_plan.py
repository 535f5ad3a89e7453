"""Stacks sized to the time left (joma_lib.lm.stack_plan, ``lm run --stack --finish-within``): the cost model, the
plan, the step and evaluation timed on this machine, and a sweep that starts only what fits."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

import joma_lib.lm.stack_plan as stack_plan_module
import joma_lib.lm.sweep as sweep_module
from joma_lib.lm.cli import main
from joma_lib.lm.data import n_chunks
from joma_lib.lm.stack import train_stack
from joma_lib.base.stack_time import PLAN_SHARE
from joma_lib.lm.stack_plan import TIMED_CHUNKS, StackCost, measure_cost, plan, waiting
from joma_lib.lm.sweep import DeadlineReached, run_sweep

torch.set_num_threads(1)


def linear(runs: int, fixed: float, per_run: float, layers: int = 1) -> StackCost:
    """A shape whose stack of R runs takes ``fixed + per_run * R`` seconds (one step, no evaluation)."""
    return StackCost(runs, layers, 1, 0, (fixed + per_run, fixed + per_run * runs), (0.0, 0.0))


def test_a_stack_costs_its_measured_sizes_and_is_linear_between_them():
    # the H200's 5-layer step (lm_stack.json: 2.65 ms alone, 7.64 ms for 7), 58,000 steps, 59 evaluations
    cost = StackCost(7, 5, 58_000, 59, (2.65e-3, 7.64e-3), (0.2, 0.8))
    assert cost.seconds(1) == pytest.approx(58_000 * 2.65e-3 + 59 * 0.2)
    assert cost.seconds(7) == pytest.approx(58_000 * 7.64e-3 + 59 * 0.8)
    assert cost.seconds(4) == pytest.approx((cost.seconds(1) + cost.seconds(7)) / 2)
    for r in (0, 8):
        with pytest.raises(ValueError, match=r"r must be in \[1, 7\]"):
            cost.seconds(r)


def test_a_stacks_start_is_paid_once_whatever_its_size():
    cost = replace(StackCost(7, 5, 58_000, 59, (2.65e-3, 7.64e-3), (0.2, 0.8)), start=40.0)
    plain = replace(cost, start=0.0)
    assert all(cost.seconds(r) == pytest.approx(plain.seconds(r) + 40.0) for r in (1, 4, 7))


def test_the_plan_finishes_the_most_runs_that_fit():
    a, b = linear(3, 100, 10), linear(3, 100, 10, layers=2)
    budget = 1 / PLAN_SHARE  # seconds of time left per second a plan may fill
    assert plan([a, b], [3, 3], 0) == [0, 0]
    assert plan([a, b], [3, 3], 109 * budget) == [0, 0]  # the cheapest stack (110 s) does not fit
    assert plan([a, b], [3, 3], 125 * budget) == [0, 2]  # 2 runs fit either way: the deeper ones
    assert plan([a, b], [3, 3], 220 * budget) == [0, 3]  # one stack of 3 (130 s) beats two of 1 (220 s)
    assert plan([a, b], [3, 3], 250 * budget) == [2, 3]  # two stacks once both fit (120 + 130 s)
    assert plan([a, b], [1, 3], 1e9) == [1, 3]  # never more runs than are waiting
    # the paper sweep as the H200 measured it (no evaluation here), in an 800 s loan (680 s to fill): the 10-layer
    # stack of 3 (395 s) and 3 runs of 5 layers (250 s) would fit, 6 runs; 11 runs of 5 layers alone (635 s) do
    l10 = StackCost(3, 10, 58_000, 59, (4.57e-3, 6.81e-3), (0.0, 0.0))
    l5 = StackCost(21, 5, 58_000, 59, (2.65e-3, 2.65e-3 + 20 * 0.83e-3), (0.0, 0.0))
    assert l10.seconds(3) + l5.seconds(3) <= PLAN_SHARE * 800 < l5.seconds(12)
    assert plan([l10, l5], [3, 21], 800) == [0, 11]
    with pytest.raises(ValueError, match="limits must give each shape at most its measured runs"):
        plan([a, b], [4, 3], 100)
    with pytest.raises(ValueError, match="seconds"):
        plan([a, b], [3, 3], -1)


def test_a_tie_in_runs_goes_to_more_layers_trained_then_to_the_shorter_plan():
    budget = 1 / PLAN_SHARE
    shallow, deep = linear(3, 0, 10, layers=1), linear(3, 0, 20, layers=2)
    # 4 runs fit in 60 s: 3 shallow and 1 deep (50 s, 5 layers trained) or 2 and 2 (60 s, 6): the deeper mix
    assert plan([shallow, deep], [3, 3], 60 * budget) == [2, 2]
    cheap, dear = linear(1, 0, 10, layers=2), linear(1, 0, 20, layers=2)
    assert plan([cheap, dear], [1, 1], 25 * budget) == [1, 0]  # one run of the same depth fits either way


@pytest.fixture()
def runs(tiny_run):
    """Three runs of one shape (seeds, learning rates apart) and one deeper run, in fp32."""
    base = replace(tiny_run, precision="fp32", steps=8)
    return [replace(base, seed=s, lr=lr) for s, lr in ((5, 3e-3), (6, 1e-3), (7, 3e-3))] + [replace(base, n_layers=3)]


def test_the_step_and_the_evaluation_are_timed_here_and_leave_the_random_state_alone(runs, tiny_run_data):
    before = torch.get_rng_state()
    cost = measure_cost(runs[:3], tiny_run_data, torch.device("cpu"))
    assert torch.equal(torch.get_rng_state(), before)
    assert (cost.runs, cost.layers, cost.steps, cost.evaluations) == (3, 2, 8, len(runs[0].checkpoints()))
    assert all(t > 0 for t in cost.step + cost.evaluation)
    assert measure_cost(runs[:1], tiny_run_data, torch.device("cpu")).runs == 1
    with pytest.raises(ValueError, match="precision decided"):
        measure_cost([replace(runs[0], precision="auto")], tiny_run_data, torch.device("cpu"))


def test_an_evaluation_is_timed_on_a_few_chunks_and_scaled_to_every_chunk_it_reads(runs, tiny_run_data, monkeypatch):
    """On a clock where evaluating a chunk takes 1 s per run of the stack and nothing else takes time: an evaluation
    reads every validation chunk, or ``eval_chunks`` of them, and is timed on at most TIMED_CHUNKS, then scaled up;
    it is timed on a stack of one run and on a stack of all the shape's runs."""
    clock = [0.0]
    monkeypatch.setattr(stack_plan_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))  # its clock only

    def one_second_a_chunk_and_run(model, valid, seq_len, chunks):
        clock[0] += chunks * model.n_runs

    monkeypatch.setattr(stack_plan_module, "evaluate_stack", one_second_a_chunk_and_run)
    every = n_chunks(tiny_run_data.valid, runs[0].seq_len)
    assert every > TIMED_CHUNKS + 1
    for eval_chunks, read in ((None, every), (every - 1, every - 1)):
        group = [replace(run, eval_chunks=eval_chunks) for run in runs[:3]]
        cost = measure_cost(group, tiny_run_data, torch.device("cpu"))
        assert cost.step == (0.0, 0.0) and cost.evaluation == pytest.approx((read, 3 * read))


def _stacked_runs(out) -> dict[str, int]:
    return {p.parent.name: json.loads(p.read_text())["stacked_runs"] for p in out.glob("*/result.json")}


def test_a_sweep_starts_only_what_fits_and_plans_again_with_the_time_left(tmp_path, runs, tiny_run_data, monkeypatch):
    """Each stack of R runs is made to cost 100 + 100 R seconds; given 420 s (357 s to fill), the first plan fits 2
    of the 3 runs of a shape (300 s) and nothing besides; they train in a second, so the next plan, with ~420 s
    left, fits one more run (200 s): the deeper one (a tie in runs); the plan after that the third run."""
    monkeypatch.setattr(sweep_module, "load_lm_data", lambda *args: tiny_run_data)
    monkeypatch.setattr(sweep_module, "measure_cost",
                        lambda group, data, dev: linear(len(group), 100, 100, group[0].n_layers))
    lines: list[str] = []
    run_sweep(runs, tmp_path, "cpu", progress=False, log=lines.append, stack=True, finish_within=420)
    stacked = _stacked_runs(tmp_path)
    assert sorted(stacked.values()) == [1, 1, 2, 2]
    assert stacked[runs[3].name] == 1 and sorted(stacked[r.name] for r in runs[:3]) == [1, 2, 2]
    assert [line.split(": a stack of ")[1] for line in lines if line.startswith("planned")] == [
        "2 run(s) of 2 layer(s), about 300 s", "1 run(s) of 3 layer(s), about 200 s",
        "1 run(s) of 2 layer(s), about 200 s"]


def test_a_compiled_sweep_plans_each_stack_with_the_time_its_step_takes_to_compile(tmp_path, runs, tiny_run_data,
                                                                                  monkeypatch):
    """The stacks of the sweep above (100 + 100 R seconds each, as timed), compiled, each given 60 s more to compile:
    with 420 s (357 s to fill) only one run fits the first plan (260 s), where two did uncompiled (300 s)."""
    monkeypatch.setattr(sweep_module, "load_lm_data", lambda *args: tiny_run_data)
    monkeypatch.setattr(sweep_module, "measure_cost",
                        lambda group, data, dev: linear(len(group), 100, 100, group[0].n_layers))
    monkeypatch.setattr(sweep_module, "train_stack", lambda *args, **kwargs: None)  # stopped at once: nothing trained
    lines: list[str] = []
    with pytest.raises(DeadlineReached, match="stopped at the deadline"):
        run_sweep(runs, tmp_path, "cpu", progress=False, log=lines.append, stack=True, finish_within=420,
                  compiled=True, compile_seconds=60)
    assert [line.split(": a stack of ")[1] for line in lines if line.startswith("planned")] == [
        "1 run(s) of 3 layer(s), about 260 s"]
    assert all(line.endswith("; 60 s to compile a stack") for line in lines if line.startswith("timed"))
    for kwargs in ({}, {"compiled": True}):  # an allowance is for a compiled sweep against a deadline only
        with pytest.raises(ValueError, match="compile_seconds needs compiled and finish_within"):
            run_sweep(runs, tmp_path, "cpu", progress=False, stack=True, compile_seconds=60, **kwargs)


def test_runs_already_started_finish_first_and_the_rest_wait_when_no_stack_fits(tmp_path, runs, tiny_run_data,
                                                                                monkeypatch, capsys):
    monkeypatch.setattr(sweep_module, "load_lm_data", lambda *args: tiny_run_data)
    measured: list[int] = []
    monkeypatch.setattr(sweep_module, "measure_cost",
                        lambda group, data, dev: measured.append(len(group)) or linear(len(group), 100, 100))
    # two runs stopped in an earlier call (checkpointed at step 4 of 8)
    assert train_stack(runs[:2], tmp_path, "cpu", progress=False, data=tiny_run_data, stop_at=4) is None
    assert [r.name for r in waiting(runs, tmp_path)] == [runs[2].name, runs[3].name]
    with pytest.raises(DeadlineReached, match=r"2 run\(s\) not started: the smallest stack of them needs about 200 s"):
        run_sweep(runs, tmp_path, "cpu", progress=False, log=lambda _: None, stack=True, finish_within=100)
    assert _stacked_runs(tmp_path) == {runs[0].name: 2, runs[1].name: 2}  # finished, though no new stack fitted
    assert not (tmp_path / runs[2].name).exists() and not (tmp_path / runs[3].name).exists()
    # a second call on this folder (a loan's next call) plans with the first call's measurements
    lines: list[str] = []
    with pytest.raises(DeadlineReached):
        run_sweep(runs, tmp_path, "cpu", progress=False, log=lines.append, stack=True, finish_within=100)
    assert measured == [1, 1] and sum(line.startswith("timed earlier on cpu") for line in lines) == 2
    # the command line: exit 75 and the reason; bad values refused before any work
    args = ["run", "--data", "ptb", "--layers", "2", "--lr", "3e-3", "--seeds", "5", "--steps", "8", "--eval-interval",
            "4", "--eval-chunks", "2", "--seq-len", "10", "--batch-size", "4", "--eval-batch-size", "3",
            "--max-vocab", "200", "--d", "16", "--d-ff", "16", "--device", "cpu", "--no-progress", "--precision",
            "fp32", "--out", str(tmp_path / "cli")]
    assert main([*args, "--stack", "--finish-within", "50"]) == 75
    assert "not started" in capsys.readouterr().err
    for extra, message in ((["--stack", "--finish-within", "0"], "--finish-within must be"),
                           (["--stack", "--compile", "--finish-within", "10", "--compile-seconds", "-1"],
                            "--compile-seconds must be"),
                           (["--stack", "--finish-within", "10", "--compile-seconds", "5"],
                            "--compile-seconds needs --compile and --finish-within"),
                           (["--finish-within", "10"], "--finish-within needs --stack and --jobs 1"),
                           (["--stack", "--jobs", "2", "--finish-within", "10"], "got --jobs 2"),
                           (["--stack", "--engine", "slurm", "--finish-within", "10"], "--finish-within is for "
                                                                                        "--engine local"),
                           (["--stack", "--compile", "--engine", "slurm", "--compile-seconds", "5"],
                            "--compile-seconds is for --engine local")):
        assert main([*args, *extra]) == 2
        assert message in capsys.readouterr().err
