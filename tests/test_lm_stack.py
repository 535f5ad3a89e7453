"""Runs trained as one stack (joma_lib.lm.stack) are the runs trained one by one.

The tolerance of the comparison was measured before it was set. On the CPU a stacked run draws its unstacked
run's dropout masks from the same generator state, and in float64 the two agree to 1e-12 after 30 steps
(tests/test_lm_stacked.py checks one step to 1e-12); what remains in float32 is rounding: the batched products
sum in another order. Its effect on the measurements was measured against another rounding of the same
training, torch's non-fused Adam in place of the fused one, on this test's sweep (300 steps, 2 layers of width
16, PTB, Adam reset every 44 steps, 5 runs): largest differences over all checkpoints, stacked vs unstacked /
non-fused vs fused Adam: validation loss 2.2e-7..4.9e-7 / 1.3e-7..3.8e-7, attention entropy 1.3e-7..2.1e-6 /
6e-8..1.2e-6 for learning rates 1e-3 and 3e-3. At lr 1e-2 the training is chaotic at this size: either change
moves the loss by 0.06-0.13, so no learning rate above 3e-3 is used here. Tolerance: 2e-5 absolute, about
10x the largest measured rounding effect (the test trains 200 of those 300 steps).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest
import torch

from joma_lib.lm.data import load_lm_data, n_chunks
from joma_lib.lm.runs import load_checkpoint
from joma_lib.lm.stack import shares, stack_key, stack_precision, stacks, train_stack
from joma_lib.lm.step import train_run

KEYS = ("val_loss", "attn_entropy", "stable_rank", "train_loss")


@pytest.fixture(scope="module")
def sweep_data():
    """A sliver of PTB: 44 batches per epoch, so 200 steps cross four Adam resets."""
    return load_lm_data("ptb", 4, 3, 200, max_train_fraction=0.002)


@pytest.fixture(scope="module")
def sweep(tiny_run, sweep_data):
    """Four runs with distinct seeds and learning rates, and clips that bite (0.5) or not (5.0)."""
    base = replace(tiny_run, steps=200, eval_interval=50)
    assert n_chunks(sweep_data.train, base.seq_len) < 60  # Adam is reset inside the run
    return [replace(base, lr=lr, seed=seed, clip=clip)
            for lr, seed, clip in ((3e-3, 5, 0.5), (1e-3, 6, 0.5), (3e-3, 7, 5.0), (1e-3, 8, 0.5))]


def _close(a: dict[str, np.ndarray], b: dict[str, np.ndarray], atol: float) -> None:
    np.testing.assert_array_equal(a["minibatch"], b["minibatch"])
    for key in KEYS:
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=atol, equal_nan=True, err_msg=key)


def test_a_stacked_sweep_trains_every_run_as_its_unstacked_run(tmp_path, sweep, sweep_data, stack_tolerance):
    stacked = train_stack(sweep, tmp_path / "stack", "cpu", progress=False, data=sweep_data, checkpoint_seconds=0)
    assert stacked is not None
    for cfg, result in zip(sweep, stacked, strict=True):
        _close(train_run(cfg, tmp_path / "single", "cpu", progress=False, data=sweep_data), result, stack_tolerance)
        assert (tmp_path / "stack" / cfg.name / "result.json").exists()
    # a finished stack is read back, not trained again
    again = train_stack(sweep, tmp_path / "stack", "cpu", progress=False, data=sweep_data)
    assert again is not None and all(np.array_equal(a["val_loss"], b["val_loss"]) for a, b in zip(again, stacked))


def test_a_stopped_stack_resumes_stacked_or_one_run_at_a_time_to_the_same_numbers(tmp_path, sweep, sweep_data,
                                                                                  stack_tolerance):
    runs = [replace(c, steps=120) for c in sweep[:2]]
    whole = train_stack(runs, tmp_path / "whole", "cpu", progress=False, data=sweep_data)
    assert whole is not None
    # stopped before step 70 (its last checkpoint: step 50), resumed as a stack: bit for bit the uninterrupted stack
    assert train_stack(runs, tmp_path / "a", "cpu", progress=False, data=sweep_data, stop_at=70,
                       checkpoint_seconds=0) is None
    assert load_checkpoint(tmp_path / "a" / runs[0].name / "checkpoint.pt")["step"] == 50
    resumed = train_stack(runs, tmp_path / "a", "cpu", progress=False, data=sweep_data)
    assert resumed is not None
    for a, b in zip(resumed, whole, strict=True):
        for key in ("minibatch", *KEYS):
            np.testing.assert_array_equal(a[key], b[key])
    # a stack stopped by its deadline (checkpoint at the current step, between two evaluations), resumed by the
    # unstacked runner: the run's numbers, to the stacking tolerance
    assert train_stack(runs, tmp_path / "b", "cpu", progress=False, data=sweep_data, stop_after=1e-9) is None
    assert load_checkpoint(tmp_path / "b" / runs[0].name / "checkpoint.pt")["step"] == 1
    for cfg, result in zip(runs, whole, strict=True):
        _close(train_run(cfg, tmp_path / "b", "cpu", progress=False, data=sweep_data), result, stack_tolerance)


def test_runs_that_stopped_at_different_steps_train_on_as_one_stack_each(tmp_path, sweep, sweep_data,
                                                                         stack_tolerance):
    runs = [replace(c, steps=100) for c in sweep[:3]]
    train_run(runs[0], tmp_path, "cpu", progress=False, data=sweep_data, stop_at=60)  # checkpoint at 50
    train_run(runs[1], tmp_path, "cpu", progress=False, data=sweep_data)  # finished
    results = train_stack(runs, tmp_path, "cpu", progress=False, data=sweep_data)
    assert results is not None
    for cfg, result in zip(runs, results, strict=True):
        _close(train_run(cfg, tmp_path / "single", "cpu", progress=False, data=sweep_data), result, stack_tolerance)


def test_auto_precision_of_a_stacked_sweep_is_measured_on_its_stacked_step_once(tiny_run, monkeypatch, tmp_path):
    monkeypatch.setenv("JOMA_CACHE", str(tmp_path))
    monkeypatch.delenv("JOMA_PRECISION", raising=False)
    runs = [replace(tiny_run, precision="auto", seed=s, n_layers=n) for s in (1, 2) for n in (1, 2)]
    chosen = stack_precision(runs, torch.device("cpu"))
    assert len({c.precision for c in chosen}) == 1 and chosen[0].precision in ("fp32", "bf16")
    monkeypatch.setenv("JOMA_PRECISION", "fp32")
    assert {c.precision for c in stack_precision(runs, torch.device("cpu"))} == {"fp32"}


def test_stacks_group_runs_that_differ_in_seed_lr_and_clip_only(tiny_run):
    a, b = replace(tiny_run, lr=1e-3, seed=1), replace(tiny_run, lr=3e-3, seed=2, clip=1.0)
    deeper = replace(tiny_run, n_layers=3)
    assert stack_key(a) == stack_key(b) != stack_key(deeper)
    assert stacks([a, deeper, b]) == [[a, b], [deeper]]
    c = replace(tiny_run, lr=1e-2, seed=3)
    assert stacks([a, deeper, b, c], size=2) == [[a, b], [c], [deeper]]  # each shape cut in order, none mixed
    with pytest.raises(ValueError, match="stack_size"):
        stacks([a], size=0)


def test_shares_cut_each_stack_for_the_workers_and_hand_out_the_costliest_first(tiny_run):
    one = [replace(tiny_run, n_layers=1, seed=s) for s in (1, 2, 3, 4)]
    two = [replace(tiny_run, n_layers=2, seed=s) for s in (1, 2, 3)]
    assert shares([one, two], 1) == [one, two]
    assert shares([one, two], 2) == [two[:2], one[:2], one[2:], two[2:]]  # costs 4, 2, 2, 2: longest first
    pieces = shares([one, two], 3)
    assert sorted(c.name for piece in pieces for c in piece) == sorted(c.name for c in one + two)
    assert max(len(piece) for piece in pieces) == 2 and all(stacks(piece) == [piece] for piece in pieces)


@pytest.mark.parametrize("configs, message", [
    (lambda c: [], "at least one run"),
    (lambda c: [c, replace(c, n_layers=3)], "differ only in clip, lr, seed"),
    (lambda c: [replace(c, arch="gptneox", n_heads=2, d=16)], "arch 'paper'"),
    (lambda c: [c, c], "distinct runs"),
])
def test_configs_that_cannot_stack_are_refused_before_any_work(tmp_path, tiny_run, configs, message):
    with pytest.raises(ValueError, match=message):
        train_stack(configs(tiny_run), tmp_path, "cpu", progress=False)
    assert not any(tmp_path.iterdir())


def _compiled_against_written(out, runs, data, device: str, atol: float, **compile_options) -> None:
    """Train ``runs`` as one stack twice, the loss compiled and as written; compare (``atol``) and check the results
    say which."""
    import json
    from functools import partial

    plain = train_stack(runs, out / "plain", device, progress=False, data=data)
    with pytest.MonkeyPatch.context() as patch:
        if compile_options:
            patch.setattr(torch, "compile", partial(torch.compile, **compile_options))
        compiled = train_stack(runs, out / "compiled", device, progress=False, data=data, compiled=True)
    assert plain is not None and compiled is not None
    for a, b in zip(compiled, plain, strict=True):
        _close(a, b, atol)
    assert json.loads((out / "compiled" / runs[0].name / "result.json").read_text())["compiled"] is True
    assert json.loads((out / "plain" / runs[0].name / "result.json").read_text())["compiled"] is False


def test_a_stack_with_its_loss_compiled_trains_as_the_stack_as_written(tmp_path, sweep, sweep_data, stack_tolerance):
    """--compile: the runner routes each stack's training loss through torch.compile (here with the aot_eager
    backend, which traces forward and backward as inductor would but runs them as written: the generated kernels
    are the GPU test's, a C++ build per test being too slow for the CPU suite). Compiling changes at most the
    rounding, as stacking does: the stacking tolerance (inductor on the CPU, by hand: 7e-9 apart)."""
    runs = [replace(c, steps=50) for c in sweep[:2]]
    _compiled_against_written(tmp_path, runs, sweep_data, "cpu", stack_tolerance, backend="aot_eager")


@pytest.mark.gpu
def test_a_stack_compiled_on_the_gpu_trains_as_the_stack_as_written(tmp_path, sweep, sweep_data, stack_tolerance):
    """The same with inductor's generated kernels, each step captured as a CUDA graph: what --compile trains, within
    the 10x stacking tolerance of the other GPU tests (set before any compiled run was measured)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    _compiled_against_written(tmp_path, [replace(c, steps=100) for c in sweep[:2]], sweep_data, "cuda",
                              10 * stack_tolerance)


@pytest.mark.gpu
def test_a_stack_on_the_gpu_trains_each_run_as_it_trains_alone(tmp_path, sweep, sweep_data, stack_tolerance):
    """On a GPU every run's masks are a hash of its own seed and step: a run stacked with others and the same run
    stacked alone draw the same masks, and differ by the rounding of the batched products (and the GPU's
    non-deterministic sums): the tolerance is the CPU one, x10."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    runs = [replace(c, steps=100) for c in sweep]
    together = train_stack(runs, tmp_path / "all", "cuda", progress=False, data=sweep_data)
    assert together is not None
    for cfg, result in zip(runs, together, strict=True):
        alone = train_stack([cfg], tmp_path / "one", "cuda", progress=False, data=sweep_data)
        assert alone is not None
        for key in KEYS:
            np.testing.assert_allclose(alone[0][key], result[key], rtol=0, atol=10 * stack_tolerance, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("stacked", [True, False], ids=["stack", "alone"])
def test_a_stopped_run_resumes_on_the_gpu_to_the_uninterrupted_numbers(tmp_path, sweep, sweep_data, stacked,
                                                                       stack_tolerance):
    """A checkpoint written on the GPU resumes there: its random-number states come back as CPU byte tensors (a
    first GPU loan found the stacked runner refusing them, the checkpoint having been read onto the GPU). The
    unstacked runner draws its GPU masks from torch's CUDA stream, the stacked one from a counter hash: each
    resumes to its own uninterrupted numbers."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    runs = [replace(c, steps=120) for c in sweep[:2]]

    def train(out, **stop):
        if stacked:
            return train_stack(runs, out, "cuda", progress=False, data=sweep_data, **stop)
        done = [train_run(cfg, out, "cuda", progress=False, data=sweep_data, stop_at=stop.get("stop_at"))
                for cfg in runs]
        return None if None in done else done

    whole = train(tmp_path / "whole")
    assert whole is not None
    assert train(tmp_path / "cut", stop_at=70, **({"checkpoint_seconds": 0} if stacked else {})) is None
    assert load_checkpoint(tmp_path / "cut" / runs[0].name / "checkpoint.pt")["step"] == 50
    resumed = train(tmp_path / "cut")
    assert resumed is not None
    for a, b in zip(resumed, whole, strict=True):
        for key in KEYS:
            np.testing.assert_allclose(a[key], b[key], rtol=0, atol=10 * stack_tolerance, equal_nan=True)


def test_against_a_deadline_checkpoints_take_at_most_their_share_of_the_time(tmp_path, tiny_run, tiny_run_data,
                                                                            monkeypatch):
    """Each checkpoint made to take 0.2 s: without a deadline one is written at every evaluation step
    (checkpoint_seconds=0); against one (never reached here), the next waits 1 / CHECKPOINT_SHARE times as long as the
    last took (4 s per run), so only the first and the last are written in a run of under a second."""
    import joma_lib.lm.stack as stack_module

    written = []

    def slow_save(path, state):
        time.sleep(0.2)
        written.append((path.parent.name, state["step"]))

    monkeypatch.setattr(stack_module, "save_checkpoint", slow_save)
    runs = [replace(tiny_run, seed=s) for s in (5, 6)]
    assert train_stack(runs, tmp_path / "a", "cpu", progress=False, data=tiny_run_data, checkpoint_seconds=0)
    assert sorted({step for _, step in written}) == [0, 4, 8, 12]
    written.clear()
    assert train_stack(runs, tmp_path / "b", "cpu", progress=False, data=tiny_run_data, checkpoint_seconds=0,
                       stop_after=600)
    assert sorted(written) == sorted((r.name, step) for r in runs for step in (0, 12))
