"""The allocator kept for training loops (joma_lib.base.memory): freed memory is reused, not faulted in again.

Each check runs in a fresh process, since the setting is for the rest of the process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from joma_lib.base.memory import keep_freed_memory

# A training loop in small: gradient steps of a stacked read-out (two runs' 30,000 x 300 weights, 72 MB; its
# gradient is allocated and freed at every step). The page faults of 8 steps, the fewest of a few such windows, before
# and after the setting: kept, the heap still grows for its first windows, by a step's output (3,750 pages) or its
# gradient (17,578) now and then, until its free blocks fit every step's buffers (measured: 23,906-52,735 in the
# first window, 0-11,251 in the second, then 0-3,750); the system allocator faults ~150,000 in every window.
_PROBE = """
import json, resource
import torch
from joma_lib.base.memory import keep_freed_memory

torch.manual_seed(0)
weight, hidden = torch.randn(2, 30_000, 300, requires_grad=True), torch.randn(2, 64, 300)

def faults() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(8):
        (grad,) = torch.autograd.grad((hidden @ weight.transpose(1, 2)).square().sum(), [weight])
        weight.data.add_(grad, alpha=-1e-6)
        del grad
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults()
system = min(faults() for _ in range(2))
took = keep_freed_memory()
faults()
print(json.dumps({"took": took, "system": system, "kept": min(faults() for _ in range(4))}))
"""


def _probe() -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the setting is glibc's")
def test_kept_memory_is_reused_without_page_faults():
    probe = _probe()
    if not probe["took"]:
        pytest.skip("this C library is not glibc: nothing was changed")
    # the system allocator faults the gradient's pages in again at every step (72 MB: 17,578 pages of 4 KiB, or
    # 35 huge pages); kept, the heap serves it from pages already in once it has grown to fit (measured: 0 in the
    # fewest of 4 windows, against ~150,000)
    assert probe["system"] >= 8 * 30, probe
    assert probe["kept"] <= probe["system"] // 10, probe


def test_the_training_entry_points_keep_freed_memory(tmp_path, tiny_run, tiny_run_data):
    """What trains sets it before its first step: the LM runner, the stacked runner, both Table 1 runners."""
    from joma_lib.lm.stack import train_stack
    from joma_lib.lm.step import train_run
    from joma_lib.theory.table1.model import Table1Config
    from joma_lib.theory.table1.runs import run_table1
    from joma_lib.theory.table1.stacked_run import run_table1_stacked

    table = Table1Config(d_model=8, d_hidden=16, steps=2, batch_size=8, lr=3e-3, n_test=32, cpu_threads=1,
                         settings=((2, (10, 20)),), seeds=(3,))
    entry_points = {
        "train_run": lambda: train_run(tiny_run, tmp_path / "one", "cpu", progress=False, data=tiny_run_data,
                                       stop_at=1),
        "train_stack": lambda: train_stack([tiny_run], tmp_path / "stack", "cpu", progress=False, data=tiny_run_data,
                                           stop_at=1),
        "run_table1": lambda: run_table1(table, "cpu"),
        "run_table1_stacked": lambda: run_table1_stacked(table, "cpu")}
    for name, call in entry_points.items():
        keep_freed_memory.cache_clear()
        call()
        assert keep_freed_memory.cache_info().currsize == 1, name


class _OtherLibc:
    """A C library that is not glibc: it has mallopt (musl's does nothing) but no gnu_get_libc_version."""

    def mallopt(self, *args: int) -> int:
        raise AssertionError("mallopt must not be called where the C library is not glibc")


@pytest.mark.parametrize("libc", [lambda _: _OtherLibc(), lambda _: (_ for _ in ()).throw(TypeError("no CDLL(None)"))])
def test_where_the_c_library_is_not_glibc_nothing_is_changed(monkeypatch, libc):
    import ctypes

    monkeypatch.setattr(ctypes, "CDLL", libc)
    assert keep_freed_memory.__wrapped__() is False
