"""A stack's time (:mod:`joma_lib.base.stack_time`): the line between two measured sizes, and a measured cost kept in
the runs' folder and taken again there, on the same machine, for a while and for no larger a stack."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import joma_lib.base.stack_time as stack_time_module
from joma_lib.base.stack_time import REMEMBER_SECONDS, linear_in_runs, remembered_cost


@dataclass(frozen=True)
class Cost:
    runs: int
    step: tuple[float, float]


def test_a_stack_lies_on_the_line_between_the_sizes_measured() -> None:
    assert linear_in_runs(1, 5, 2.0, 10.0) == 2.0 and linear_in_runs(5, 5, 2.0, 10.0) == 10.0
    assert linear_in_runs(3, 5, 2.0, 10.0) == pytest.approx(6.0) and linear_in_runs(1, 1, 4.0, 4.0) == 4.0
    with pytest.raises(ValueError, match=r"r must be in \[1, 5\]"):
        linear_in_runs(6, 5, 2.0, 10.0)


def test_a_measured_cost_is_taken_again_for_as_many_runs_or_fewer_for_a_while(tmp_path) -> None:
    measured: list[int] = []
    now = [1000.0]

    def measure(runs: int) -> Cost:
        measured.append(runs)
        return Cost(runs, (0.5, 0.5 + runs))

    def cost(runs: int, key: str = "a", device: str = "cpu") -> tuple[Cost, bool]:
        return remembered_cost(tmp_path, {"shape": key}, runs, torch.device(device), Cost, lambda: measure(runs),
                               clock=lambda: now[0])

    assert cost(4) == (Cost(4, (0.5, 4.5)), True)
    assert cost(4) == (Cost(4, (0.5, 4.5)), False) and cost(2) == (Cost(4, (0.5, 4.5)), False)  # kept, as read back
    assert cost(5) == (Cost(5, (0.5, 5.5)), True)  # a larger stack than measured: measured again, and kept
    assert cost(3, key="b")[1] and measured == [4, 5, 3]  # another shape
    now[0] += REMEMBER_SECONDS + 1
    assert cost(2)[1]  # too old: measured again
    for path in tmp_path.iterdir():
        path.write_text("{half a file")
    assert cost(1)[1] and not cost(1)[1]  # an unreadable file: measured again, then kept
    assert all(p.name.startswith(".stack-cost-") for p in tmp_path.iterdir())  # hidden beside the runs


def test_a_cost_timed_on_other_threads_on_another_cpu_or_ahead_of_the_clock_is_measured_again(tmp_path,
                                                                                              monkeypatch) -> None:
    """The folder travels (a loan's runs come back here) and a machine's clock can step back: a cost is reused only
    where it was timed, as it was timed, and in the past."""
    now = [1000.0]

    def cost() -> bool:
        return remembered_cost(tmp_path, {"shape": "a"}, 1, torch.device("cpu"), Cost, lambda: Cost(1, (1.0, 1.0)),
                               clock=lambda: now[0])[1]

    assert cost() and not cost()
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        assert cost()
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setattr(stack_time_module, "cache_file", lambda: Path("cpu-probe-of-another-machine.json"))
    assert cost()
    monkeypatch.undo()
    now[0] -= 60  # the cost kept above now reads as timed a minute from now
    assert cost()


def test_a_folder_that_cannot_be_written_means_measuring_each_time(tmp_path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    calls: list[int] = []
    for _ in range(2):
        cost, now = remembered_cost(blocked, {"shape": "a"}, 1, torch.device("cpu"), Cost,
                                    lambda: calls.append(1) or Cost(1, (1.0, 1.0)))
        assert now and cost == Cost(1, (1.0, 1.0))
    assert len(calls) == 2
