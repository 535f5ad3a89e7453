"""bf16 mixed precision of the language model: the blockwise read-out, train_step, the run configuration."""

import copy
import json
import os
from dataclasses import replace

import pytest
import torch

from joma_lib.base import precision as precision_module
from joma_lib.base.cpu import Bf16Support, bf16_support
from joma_lib.kit import harness
from joma_lib.kit.registry import FigureSpec, registry
from joma_lib.lm.data import load_lm_data
from joma_lib.lm.model import TransformerLM, bits_dropout
from joma_lib.base.precision import (PrecisionUnavailableError, auto_choice, cached_choice, candidates,
                                     measure_choice, require, resolve, usable)
from joma_lib.lm.config import RunConfig
from joma_lib.lm.step import make_optimizer, train_run, train_step
from joma_lib.lm.sweep import sweep_precision, train_on_cpu

torch.set_num_threads(1)

VOCAB = 300


def _model(n_layers: int = 2) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(VOCAB, n_layers, d=16, d_ff=16)


def _batch(batch: int = 8, seq: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (batch, seq + 1), generator=gen)
    return tokens[:, :-1], tokens[:, 1:]


@pytest.mark.bf16
@pytest.mark.parametrize("upstream", [1.0, 3.0])
def test_bf16_read_out_matches_fp32_cross_entropy_to_bf16_precision(upstream):
    model = _model().eval()
    x, y = _batch()  # 160 tokens: more than one block of rows
    results = []
    for precision in ("fp32", "bf16"):
        model.zero_grad()
        if precision == "fp32":
            logits, _ = model(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        else:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model.loss(x, y)
        (upstream * loss).backward()
        assert loss.dtype == torch.float32
        results.append((float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (loss32, grads32), (loss16, grads16) = results
    assert loss16 == pytest.approx(loss32, rel=1e-2)  # bf16 keeps 8 bits: relative error ~2^-8 per product
    assert all(g.dtype == torch.float32 for g in grads16.values())
    flat32, flat16 = (torch.cat([g.flatten() for g in grads.values()]) for grads in (grads32, grads16))
    assert float((flat16 - flat32).norm() / flat32.norm()) < 0.02
    for name, g32 in grads32.items():  # per tensor looser: a ReLU input near 0 may flip sign in bf16
        assert float((grads16[name] - g32).norm() / g32.norm()) < 0.1, name


@pytest.mark.bf16
def test_bf16_steps_decrease_the_loss_and_keep_fp32_master_weights_and_optimizer_state():
    model = _model()
    optimizer = make_optimizer(model, 3e-3)
    x, y = _batch()
    losses = [float(train_step(model, optimizer, x, y, 0.5, precision="bf16")) for _ in range(15)]
    assert losses[-1] < losses[0] - 0.3
    for p in model.parameters():
        assert p.dtype == torch.float32
        state = optimizer.state[p]
        assert state["exp_avg"].dtype == torch.float32 and state["exp_avg_sq"].dtype == torch.float32


@pytest.mark.bf16
def test_bf16_and_fp32_training_agree_to_bf16_tolerance():
    model32 = _model()
    model16 = copy.deepcopy(model32)
    opt32, opt16 = make_optimizer(model32, 1e-3), make_optimizer(model16, 1e-3)
    x, y = _batch()
    for step in range(5):
        torch.manual_seed(step)  # the same dropout masks for both
        loss32 = float(train_step(model32, opt32, x, y, 0.5, "fp32"))
        torch.manual_seed(step)
        loss16 = float(train_step(model16, opt16, x, y, 0.5, "bf16"))
        assert loss16 == pytest.approx(loss32, rel=1e-2), step


def test_bad_precision_is_rejected_with_the_allowed_values():
    model = _model()
    x, y = _batch()
    with pytest.raises(ValueError, match=r"precision must be one of \['fp32', 'bf16', 'tf32'\]"):
        train_step(model, make_optimizer(model, 1e-3), x, y, 0.5, precision="fp16")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.2, 0.5, 0.1])
def test_bits_dropout_keeps_1_minus_p_scales_by_its_inverse_and_is_unbiased(dtype, p):
    torch.manual_seed(3)
    x = torch.ones(400, 500, dtype=dtype)  # 200,000 entries: the keep rate to ~0.002 (2 sigma)
    m = bits_dropout(x, p).float()
    kept = m > 0
    scale = float(torch.tensor(1 / (1 - p), dtype=dtype))
    assert torch.all(m[kept] == scale) and torch.all(m[~kept] == 0)
    n = m.numel()
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(float(kept.float().mean()) - (1 - p)) < 4 * sigma + 2**-15 + abs(1 / scale - (1 - p))
    assert abs(float(m.mean()) - 1) < 4 * scale * sigma  # E[m] = k s / 2^15 = 1 to 2^-16 s
    torch.manual_seed(3)
    assert torch.equal(bits_dropout(x, p).float(), m)  # the masks come from torch's seeded generator


def test_bits_dropout_gradient_is_the_mask_and_bad_p_is_rejected():
    x = torch.randn(30, 40, requires_grad=True)
    y = bits_dropout(x, 0.2)
    y.sum().backward()
    assert torch.equal(x.grad, torch.where(y.detach() != 0, 1.25, 0.0))  # d(x m)/dx = m
    assert bits_dropout(x, 0.0) is x
    with pytest.raises(ValueError, match="p must be"):
        bits_dropout(x, 1.0)


@pytest.mark.bf16
def test_cpu_training_draws_the_same_bits_dropout_masks_in_fp32_and_bf16():
    model = _model().train()
    x = torch.randn(4, 10, 16)
    layer = model.layers[0]
    masks = []
    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(7)
        dropped = layer.drop(x.to(dtype))
        torch.manual_seed(7)
        assert torch.equal(dropped, bits_dropout(x.to(dtype), 0.2))
        masks.append(dropped != 0)
    assert torch.equal(masks[0], masks[1])
    x_tok, y_tok = _batch()
    with torch.no_grad():
        torch.manual_seed(7)
        train_loss = float(model.loss(x_tok, y_tok))
        torch.manual_seed(7)
        assert float(model.loss(x_tok, y_tok)) == train_loss  # seeded: the same masks again
        assert float(model.eval().loss(x_tok, y_tok)) != train_loss  # and dropout was on


# ----------------------------------------------------------------------------- precision "auto" and its records

def _tiny(**changes):
    settings = dict(data="ptb", n_layers=1, lr=3e-3, seed=5, steps=4, eval_interval=4, eval_chunks=1, seq_len=8,
                    batch_size=4, eval_batch_size=3, max_vocab=200, d=16, d_ff=16)
    return RunConfig(**{**settings, **changes})


def test_measure_choice_picks_the_precision_whose_step_is_faster():
    # a clock that the step itself advances: the choice is tested without depending on this machine's load
    for slow, fast in (("fp32", "bf16"), ("bf16", "fp32")):
        now = [0.0]
        steps = {slow: [0.030, 0.031, 0.029, 0.5, 0.030, 0.030], fast: [0.001, 0.002, 0.001, 0.001, 0.9, 0.001]}
        step = lambda p: now.__setitem__(0, now[0] + steps[p].pop(0))  # noqa: E731
        choice = measure_choice(step, threads=1, clock=lambda: now[0])
        assert choice.precision == fast  # one outlier step (0.9 s) does not flip a median
        assert (getattr(choice, f"{slow}_ms") == pytest.approx(30.0)
                and getattr(choice, f"{fast}_ms") == pytest.approx(1.0))
    now = [0.0]
    tie = measure_choice(lambda p: now.__setitem__(0, now[0] + 0.5), threads=1, clock=lambda: now[0])
    assert tie.precision == "fp32"


def test_on_a_gpu_auto_measures_tf32_too_and_never_picks_the_slower_precision():
    """The GPU case, with the step's own clock: bf16 slower than fp32 (the unstacked step is launch-bound there)
    is never picked; tf32 wins where it is fastest."""
    for times, best in (({"fp32": 0.010, "tf32": 0.009, "bf16": 0.012}, "tf32"),
                        ({"fp32": 0.010, "tf32": 0.011, "bf16": 0.012}, "fp32"),
                        ({"fp32": 0.010, "tf32": 0.004, "bf16": 0.002}, "bf16")):
        now = [0.0]
        choice = measure_choice(lambda p, t=times: now.__setitem__(0, now[0] + t[p]), threads=1,
                                clock=lambda: now[0], among=("fp32", "tf32", "bf16"))
        assert choice.precision == best and choice.tf32_ms == pytest.approx(1e3 * times["tf32"])


def test_tf32_is_a_gpu_precision_and_trains_in_fp32_on_the_cpu():
    cpu = torch.device("cpu")
    assert usable("tf32", cpu) == "fp32" and "tf32" not in candidates(cpu)
    model = _model()
    x, y = _batch()
    torch.manual_seed(0)
    tf32 = train_step(model, make_optimizer(model, 1e-3), x, y, 0.5, precision=usable("tf32", cpu))
    model = _model()
    torch.manual_seed(0)
    assert torch.equal(tf32, train_step(model, make_optimizer(model, 1e-3), x, y, 0.5, precision="fp32"))


def test_auto_never_measures_bf16_where_it_runs_only_on_reference_kernels(monkeypatch):
    """bf16 that runs but not on oneDNN (a CPU with AVX2 and no AVX-512) stays usable when asked for, is never a
    candidate of auto (fp32 without a measurement), and fails a requirement at speed, naming what needed it."""
    cpu = torch.device("cpu")
    slow = Bf16Support(True, "DEFAULT", "", ("DEFAULT: ok",), accelerated=False)
    monkeypatch.setattr(precision_module, "bf16_support", lambda: slow)
    monkeypatch.delenv(precision_module.PRECISION_ENV, raising=False)
    assert usable("bf16", cpu) == "bf16" and candidates(cpu) == ("fp32",)
    assert resolve("auto", cpu, {"n_layers": 1}, 1, lambda p: pytest.fail("auto measured")) == "fp32"
    require("bf16", cpu, "figure X")
    with pytest.raises(PrecisionUnavailableError, match=r"^figure X needs bf16 at speed.*reference kernels"):
        require("bf16", cpu, "figure X", at_speed=True)
    monkeypatch.setattr(precision_module, "bf16_support", lambda: replace(slow, accelerated=True))
    assert candidates(cpu) == ("fp32", "bf16")
    require("bf16", cpu, "figure X", at_speed=True)


def test_auto_choice_is_cached_per_shapes_and_not_measured_again(tmp_path, monkeypatch):
    monkeypatch.setenv("JOMA_CACHE", str(tmp_path))
    shapes = {"n_layers": 3, "vocab": 50}
    first = auto_choice(shapes, 1, lambda p: None)
    assert cached_choice(shapes, 1) == first
    assert auto_choice(shapes, 1, lambda p: pytest.fail("measured again")) == first
    assert cached_choice({**shapes, "n_layers": 4}, 1) is None and cached_choice(shapes, 2) is None


def test_jomaprecision_overrides_auto_and_a_sweep_uses_one_precision(monkeypatch):
    configs = [_tiny(precision="auto", n_layers=n) for n in (1, 2)] + [_tiny(precision="fp32", n_layers=3)]
    monkeypatch.setenv("JOMA_PRECISION", "fp32")
    assert [c.precision for c in sweep_precision(configs, torch.device("cpu"))] == ["fp32", "fp32", "fp32"]
    monkeypatch.setenv("JOMA_PRECISION", "bf16")
    expected = "bf16" if bf16_support().usable else "fp32"
    assert [c.precision for c in sweep_precision(configs, torch.device("cpu"))] == [expected, expected, "fp32"]
    monkeypatch.setenv("JOMA_PRECISION", "fp16")
    with pytest.raises(ValueError, match="JOMA_PRECISION must be one of"):
        sweep_precision(configs, torch.device("cpu"))


def test_run_metadata_records_the_precision_used_and_a_resume_keeps_it(tmp_path, monkeypatch):
    data = load_lm_data("ptb", 4, 3, 200, max_train_fraction=0.01)
    cfg = _tiny(precision="auto", steps=8)
    monkeypatch.setenv("JOMA_PRECISION", "fp32")
    assert train_run(cfg, tmp_path, device="cpu", progress=False, data=data, stop_at=5) is None
    saved = torch.load(tmp_path / cfg.name / "checkpoint.pt", weights_only=True)
    assert saved["precision_used"] == "fp32"
    monkeypatch.setenv("JOMA_PRECISION", "bf16")  # auto would now pick bf16: the resumed run stays in fp32
    train_run(cfg, tmp_path, device="cpu", progress=False, data=data)
    meta = json.loads((tmp_path / cfg.name / "result.json").read_text())
    assert meta["config"]["precision"] == "auto" and meta["precision_used"] == "fp32"
    assert meta["onednn_isa_limit"] == os.environ.get("ONEDNN_MAX_CPU_ISA", "DEFAULT")


def test_a_reference_manifest_records_the_training_precision_and_a_variant_has_its_own_file(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "REFERENCE_DIR", tmp_path)
    monkeypatch.setenv("JOMA_PRECISION", "fp32")
    spec = FigureSpec(fig_id="c-tiny-lm", title="tiny", paper_ref="companion", chapter="book/rerun.md",
                      make=lambda: {"val_loss": train_on_cpu([_tiny(precision="auto")])["val_loss"]},
                      plot=lambda d: None, trained=True, reference_variant=lambda: "fp32")
    monkeypatch.setitem(registry(), spec.fig_id, spec)
    path = harness.update_reference(spec.fig_id)
    assert path.name == "c-tiny-lm.fp32.npz"
    env = json.loads(path.with_suffix(".json").read_text())["environment"]
    assert env["precision"] == "fp32" and env["onednn_isa_limit"] in ("DEFAULT", "AVX512_CORE_BF16",
                                                                       "AVX512_CORE", "AVX2")
    assert harness.verify(spec.fig_id).passed
