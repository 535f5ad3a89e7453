"""The stacked step (joma_lib.lm.stack_step): each run's clip and Adam are torch's, with its own lr and clip."""

from __future__ import annotations

import pytest
import torch

from joma_lib.lm.stack_step import AdamState, clip_, fused_adam_, on_device


def test_clip_and_adam_of_each_run_are_torchs_with_its_own_learning_rate_and_clip():
    torch.manual_seed(0)
    shapes = [(5, 3), (4,), (2, 2, 2)]
    lrs, clips = [1e-2, 3e-3], [0.5, 100.0]  # run 0 is clipped, run 1 is not
    params = [torch.randn(2, *s, dtype=torch.float64) for s in shapes]
    state = AdamState(params)
    singles = [[p[r].clone().requires_grad_() for p in params] for r in range(2)]
    optimizers = [torch.optim.Adam(singles[r], lr=lrs[r], fused=True) for r in range(2)]
    for step in range(6):
        grads = [torch.randn_like(p) for p in params]
        if step == 3:  # a fresh optimiser for every run, as the authors' reset at an epoch boundary
            state.reset()
            optimizers = [torch.optim.Adam(singles[r], lr=lrs[r], fused=True) for r in range(2)]
        for r in range(2):
            for p, g in zip(singles[r], grads, strict=True):
                p.grad = g[r].clone()
            torch.nn.utils.clip_grad_norm_(singles[r], clips[r], foreach=True)
            optimizers[r].step()
        clip_(grads, on_device(clips, torch.device("cpu")))
        fused_adam_(params, grads, state, on_device(lrs, torch.device("cpu")))
    for r in range(2):
        for p, single in zip(params, singles[r], strict=True):
            assert torch.equal(p[r], single.detach())


def test_the_cpu_update_is_the_unstacked_runners_fused_adam_bit_for_bit():
    """On the CPU each run's slices go through torch's fused Adam, the unstacked runner's kernel: the same numbers
    exactly, through a reset, in float32 as the runner trains."""
    torch.manual_seed(0)
    shapes = [(7, 5), (6,), (3, 2, 4)]
    lrs = [1e-3, 3e-2, 1e-4]
    params = [torch.randn(3, *s) for s in shapes]
    state = AdamState(params)
    singles = [[p[r].clone().requires_grad_() for p in params] for r in range(3)]
    optimizers = [torch.optim.Adam(singles[r], lr=lrs[r], fused=True) for r in range(3)]
    for step in range(7):
        grads = [torch.randn_like(p) for p in params]
        grads[0] = torch.randn(3, 5, 7).transpose(1, 2)  # strided, as the gradient of a transposed weight comes
        if step == 4:
            state.reset()
            optimizers = [torch.optim.Adam(singles[r], lr=lrs[r], fused=True) for r in range(3)]
        for r in range(3):
            for p, g in zip(singles[r], grads, strict=True):
                # contiguous, as the unstacked model's gradients come: given a strided gradient, torch's fused CPU
                # Adam (torch 2.13) walks it in the parameter's layout and updates the wrong entries
                p.grad = g[r].clone(memory_format=torch.contiguous_format)
            optimizers[r].step()
        fused_adam_(params, grads, state, on_device(lrs, torch.device("cpu")))
    for r in range(3):
        for p, single in zip(params, singles[r], strict=True):
            assert torch.equal(p[r], single.detach())
    assert state.steps.tolist() == [3.0, 3.0, 3.0]


def _two_run_stack(device: torch.device):
    from joma_lib.lm.model import TransformerLM
    from joma_lib.lm.stacked import StackedLM, mask_source
    models = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        models.append(TransformerLM(50, 2, d=32, d_ff=32, dropout=0.2))
    return StackedLM.from_models(models, mask_source(device, [1, 2]), device)


def _key_bias(name: str, param: torch.Tensor) -> torch.Tensor | None:
    """The key bias of an attention layer's input projection (its middle third), or None for another parameter."""
    if not name.endswith("self_attn.in_proj.bias"):
        return None
    d = param.shape[-1] // 3
    return param[..., d:2 * d]


def test_the_key_bias_gradient_is_rounding_noise():
    """The key bias adds q.b_k to every score of a query, and softmax ignores a shift shared by its row: so its
    gradient is zero in exact arithmetic, and what is computed is rounding noise, which Adam (dividing by its own
    root mean square) turns into steps of up to lr. Two correct steps that sum in different orders therefore train
    different key biases, with no effect on the loss: the comparisons of steps below leave it out."""
    stack = _two_run_stack(torch.device("cpu"))
    x, y = torch.randint(0, 50, (4, 12)), torch.randint(0, 50, (4, 12))
    grads = dict(zip(stack.params, torch.autograd.grad(stack.losses(x, y).sum(), list(stack.params.values())),
                     strict=True))
    key = [_key_bias(n, g) for n, g in grads.items() if _key_bias(n, g) is not None]
    rest = [g for n, g in grads.items() if _key_bias(n, g) is None]
    assert len(key) == 2 and max(k.abs().max() for k in key) < 1e-6 * min(g.abs().max() for g in rest)


@pytest.mark.bf16
def test_bf16_copies_of_the_layers_weights_train_as_autocast_bit_for_bit():
    """A bf16 step reads bf16 copies of the layers' linear weights and biases, made and widened back in one
    multi-tensor copy each (stack_step.Bf16Copies) instead of autocast's cast of each at every use: every loss and
    every parameter after 5 steps is the one autocast's casts train, exactly."""
    from joma_lib.lm.stack_step import StackStep
    cpu = torch.device("cpu")
    trained = []
    for copies in (True, False):
        stack = _two_run_stack(cpu)
        step = StackStep(stack, AdamState(list(stack.params.values())), on_device([1e-3, 3e-3], cpu),
                         on_device([0.5, 0.5], cpu), "bf16")
        assert step._copies is not None and len(step._copies.copies) == 16  # 2 layers x 4 maps x weight, bias
        if not copies:
            step._copies = None  # autocast casts each weight where it is used
        torch.manual_seed(0)
        for _ in range(5):
            step.step(torch.randint(0, 50, (4, 12)), torch.randint(0, 50, (4, 12)))
        trained.append((step.running.clone(), {n: p.detach().clone() for n, p in stack.params.items()}))
        assert all(p.dtype == torch.float32 for p in stack.params.values())  # the model is left its own weights
    (running, params), (running_cast, params_cast) = trained
    assert torch.equal(running, running_cast)
    for name, p in params.items():
        assert torch.equal(p, params_cast[name]), name


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_captured_step_is_the_eager_step_on_a_gpu(precision: str):
    """On a GPU the step is captured as a CUDA graph after its warm-up steps; replaying it trains as eagerly: the
    same losses and every parameter the same, but the key biases (see the test above: on an H200, 2026-11-27,
    they differed by up to 6e-5 after 8 steps, every other parameter within the tolerance below).

    In bf16 (the bf16 copies of the layers' weights, made and widened inside the captured graph) the losses only,
    within 1e-3 relative, set before any bf16 step was captured: the two runs differ only in the order of the
    embedding gradient's atomic additions (float32 rounding, as in fp32), which can move a weight across a bf16
    rounding boundary (a relative 4e-3 step in that entry), and Adam turns near-zero gradients of either sign
    into steps of up to lr, so no parameter tolerance is derived. A replay that read stale copies would train its
    steps with the weights of the capture."""
    from joma_lib.lm.stack_step import StackStep
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    device = torch.device("cuda")
    results = {}
    for capture in (True, False):
        stack = _two_run_stack(device)
        step = StackStep(stack, AdamState(list(stack.params.values())), on_device([1e-3, 3e-3], device),
                         on_device([0.5, 0.5], device), precision, capture=capture)
        torch.manual_seed(0)
        for _ in range(8):
            step.step(torch.randint(0, 50, (4, 12), device=device), torch.randint(0, 50, (4, 12), device=device))
        kept = {n: p.detach().clone() for n, p in stack.params.items()}
        for n, p in kept.items():
            if (k := _key_bias(n, p)) is not None:
                k.zero_()
        results[capture] = (step.mode, step.running.clone(), kept)
    assert results[True][0] == "cuda-graph" and results[False][0] == "eager"
    if precision == "bf16":
        torch.testing.assert_close(results[True][1], results[False][1], rtol=1e-3, atol=0)
        return
    torch.testing.assert_close(results[True][1], results[False][1], rtol=1e-5, atol=1e-6)
    for name, a in results[True][2].items():
        torch.testing.assert_close(a, results[False][2][name], rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")


def _bench_step_ops():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("bench_step_ops",
                                                  Path(__file__).parents[1] / "benchmarks" / "bench_step_ops.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.bf16  # the step counted is a bf16 step, as a GPU trains
def test_a_stacked_step_launches_about_seventy_kernels_a_layer_and_a_few_a_run():
    """On a GPU the paper's small model costs about its number of kernels; counted here without one (each ATen
    operation that is not a view). Before the masks were hashed all at once and clip and Adam became multi-tensor
    calls, a layer took ~420 operations and a step of 3 runs of 1 layer ~625; then ~107 a layer, until bf16 copies
    of the layers' weights replaced autocast's casts (89) and the masks of all sites of a dtype were made at once
    (72). A run more took ~38 until the runs' read-outs became one batched read-out (6), then the norms of all
    runs' gradients one multi-tensor call (3: its clip's scaling and its Adam). The bounds (set after measuring 72 a
    layer and 6 an extra run) keep them from creeping back."""
    step_ops = _bench_step_ops().step_ops
    one, two = sum(step_ops(1, 1, 500).values()), sum(step_ops(2, 1, 500).values())
    pair = sum(step_ops(1, 2, 500).values())
    assert two - one <= 80, two - one  # a layer
    assert pair - one <= 10, pair - one  # a run more in the stack


def test_the_compile_benchmark_refuses_bf16_where_it_dies_before_building_a_model(tmp_path):
    """On a CPU whose bf16 kernels die by SIGILL (the probe's injected fault), bench_lm_compile.py stops at its
    start with one line naming --precision, and no traceback: it would otherwise run bf16 there."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "JOMA_CACHE": str(tmp_path), "JOMA_PROBE_INJECT": "sigill"}
    script = Path(__file__).parents[1] / "benchmarks" / "bench_lm_compile.py"
    done = subprocess.run([sys.executable, str(script), "--device", "cpu", "--no-write"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "error: --precision bf16 needs bf16, which cannot run on this machine" in done.stderr.splitlines()[-1]


def test_the_step_profile_ranks_where_a_steps_time_goes(tmp_path, monkeypatch, capsys):
    """benchmarks/profile_lm_stack.py (run on a GPU by gpu_checks.sh) on a CPU: the eager step's operators, their
    time per step ranked, stored; a count below 1 is refused at the start, naming its option."""
    import importlib
    import json
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "benchmarks"))
    profile_main = importlib.import_module("profile_lm_stack").main
    small = ["--device", "cpu", "--layers", "1", "--stack", "2", "--vocab", "300", "--precision", "fp32", "--top", "5"]
    monkeypatch.setattr(sys, "argv", ["profile_lm_stack.py", *small, "--steps", "0"])
    with pytest.raises(SystemExit) as refused:
        profile_main()
    assert refused.value.code == 2 and "--steps must be at least 1 (got 0)" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["profile_lm_stack.py", *small, "--steps", "2", "--out", str(tmp_path)])
    profile_main()
    eager = json.loads((tmp_path / "lm_profile.json").read_text())["results"]["modes"]["eager"]
    ranked = [row["ms"] for row in eager["by_name"]]
    assert len(ranked) == 5 and ranked == sorted(ranked, reverse=True) and 0 < sum(ranked) <= eager["busy_ms"]
    assert eager["events"] > 50 and eager["wall_ms"] > 0  # a 1-layer step is a hundred-odd operators
