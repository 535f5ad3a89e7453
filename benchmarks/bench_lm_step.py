"""One training step of our language model against the authors' way of training it, with the GEMM roofline.

All models have the paper's architecture (d = 200, FFN 200, one head, post-LN, dropout 0.2,
untied output over ``--vocab`` words, 20 streams x 35 tokens):

* baseline: the authors' training loop, written here in our own code after their published
  script (see the reference notes on their code): sequence-first layers on
  ``nn.MultiheadAttention`` called with ``need_weights=True`` at every step (the [B, T, T]
  probabilities are materialised), logits ``[T, B, V]`` and ``F.cross_entropy`` on the
  ``[T*B, V]`` view, ``clip_grad_norm_(0.5)``, plain ``torch.optim.Adam`` (their script
  re-creates it each epoch, which costs nothing per step), torch's dropout, all in fp32;
* ours, fp32 and bf16: :class:`joma_lib.lm.model.TransformerLM` through
  :func:`joma_lib.lm.step.train_step` (fused read-out + cross-entropy, dropout masks from
  random integers, fused Adam, foreach clipping), with ``precision="fp32"`` and ``precision="bf16"``.

The three steps alternate in one process (same inputs, same threads), so a loaded machine
slows all of them alike; the ratios are of median step times. The roofline: every GEMM of
the step (forward and both backward products of each linear map, the attention products,
the read-out) timed alone at its own shape, in fp32 and in bf16; the precision ``auto`` picks at each depth
(:mod:`joma_lib.base.precision`, its own short measurement) is printed beside the faster one measured here;
"GEMM GFLOP/s" is the step's GEMM work over the summed GEMM times (the speed the step could reach if it were nothing but
its GEMMs), "achieved" is the same work over the measured step time. One command prints
everything and stores it in ``joma_lib/kit/benchmark_results/lm_step.json`` (the Performance page)::

    python benchmarks/bench_lm_step.py                        # 1/2/5/10 layers, wall clock
    python benchmarks/bench_lm_step.py --threads 1 --clock process   # CPU time: robust on a shared machine
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from joma_lib.base.cpu import bf16_support
from joma_lib.kit.benchmarks import CLOCKS, add_allocator_option, apply_allocator, median_ms, results_path, save_results
from joma_lib.lm.model import PostLNLayer, TransformerLM, bits_dropout, causal_mask
from joma_lib.lm.config import RunConfig
from joma_lib.lm.step import make_optimizer, run_precision, train_step


class BaselineLayer(PostLNLayer):
    """The same post-LN layer, sequence-first, with ``nn.MultiheadAttention`` always returning its weights."""

    def __init__(self, d: int, d_ff: int, dropout: float) -> None:
        super().__init__(d, d_ff, dropout)
        self.self_attn = nn.MultiheadAttention(d, 1, dropout=dropout)
        self.drop = nn.Dropout(dropout)  # torch's dropout, as theirs

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, attn = self.self_attn(x, x, x, attn_mask=mask, need_weights=True)
        return self.after_attention(x, a), attn


class BaselineLM(TransformerLM):
    """The same language model (same embedding, read-out and initialisation), sequence-first, whose layers
    return their attention maps in training too."""

    def __init__(self, vocab: int, n_layers: int, d: int = 200, d_ff: int = 200, dropout: float = 0.2) -> None:
        super().__init__(vocab, n_layers, d, d_ff, dropout)
        self.drop = nn.Dropout(dropout)
        layer = BaselineLayer(d, d_ff, dropout)
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(n_layers))

    def forward(self, src: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        x = self.drop(self.embedding(src) * math.sqrt(self.d) + self.pe[: src.shape[0], None, :])
        maps = []
        for layer in self.layers:
            x, attn = layer(x, mask)
            maps.append(attn)
        return self.decoder(x), maps


def baseline_step(model: BaselineLM, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                  mask: torch.Tensor) -> torch.Tensor:
    """The authors' update: forward with attention maps, CE, backward, clip 0.5, Adam."""
    optimizer.zero_grad()
    logits, _ = model(x, mask)
    loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optimizer.step()
    return loss.detach()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_gemms(n_layers: int, vocab: int, batch: int, seq: int, d: int = 200, d_ff: int = 200
               ) -> list[tuple[str, int, int, int, int]]:
    """The step's GEMMs as ``(what, count, m, k, n)`` (``[m, k] @ [k, n]``), forward and backward."""
    n_tok = batch * seq
    out: list[tuple[str, int, int, int, int]] = []
    for name, fan_in, fan_out, count in [("in_proj", d, 3 * d, n_layers), ("out_proj", d, d, n_layers),
                                          ("linear1", d, d_ff, n_layers), ("linear2", d_ff, d, n_layers),
                                          ("read-out", d, vocab, 1)]:
        out += [(f"{name} fwd", count, n_tok, fan_in, fan_out), (f"{name} dX", count, n_tok, fan_out, fan_in),
                (f"{name} dW", count, fan_out, n_tok, fan_in)]
    # scores Q K^T and probabilities x V, per stream; each has two backward products of the same size
    out += [("attention QK^T", 3 * n_layers * batch, seq, d, seq), ("attention PV", 3 * n_layers * batch, seq, seq, d)]
    return out


def time_alternately(calls: dict[str, Callable[[], object]], repeats: int, warmup: int, device: torch.device,
                     clock: str) -> dict[str, list[float]]:
    """Seconds of each call, ``warmup + repeats`` rounds of all calls in turn (the first ``warmup`` not kept)."""
    tick = CLOCKS[clock]
    times: dict[str, list[float]] = {k: [] for k in calls}
    for i in range(warmup + repeats):
        for name, call in calls.items():
            _sync(device)
            t0 = tick()
            call()
            _sync(device)
            if i >= warmup:
                times[name].append(tick() - t0)
    return times


def gemm_seconds(m: int, k: int, n: int, dtype: torch.dtype, device: torch.device, clock: str, repeats: int = 5
                 ) -> float:
    """Median time of one ``[m, k] @ [k, n]`` product in ``dtype``."""
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    return statistics.median(time_alternately({"gemm": lambda: a @ b}, repeats, 1, device, clock)["gemm"])


def roofline(gemms: list[tuple[str, int, int, int, int]], device: torch.device, clock: str
             ) -> tuple[float, dict[str, float]]:
    """GEMM work of the step (GFLOP) and, per dtype, the GFLOP/s of its GEMMs timed alone."""
    cache: dict[tuple[int, int, int, torch.dtype], float] = {}
    flops = sum(2.0 * c * m * k * n for _, c, m, k, n in gemms)
    speed = {}
    for label, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        seconds = 0.0
        for _, count, m, k, n in gemms:
            key = (m, k, n, dtype)
            if key not in cache:
                cache[key] = gemm_seconds(m, k, n, dtype, device, clock)
            seconds += count * cache[key]
        speed[label] = flops / seconds / 1e9
    return flops / 1e9, speed


def dropout_ms(device: torch.device, shape: tuple[int, ...], clock: str, repeats: int = 41
               ) -> dict[str, dict[str, float]]:
    """Median ms of one training-mode dropout (p = 0.2) of a ``shape`` tensor, per dtype: torch's
    ``F.dropout`` (the authors' masks) and ours, :func:`~joma_lib.lm.model.bits_dropout`, called alternately."""
    out = {}
    for label, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        x = torch.randn(shape, device=device).to(dtype)
        calls = {"torch": lambda: F.dropout(x, 0.2, True), "ours": lambda: bits_dropout(x, 0.2)}
        out[label] = {k: median_ms(v) for k, v in time_alternately(calls, repeats, 1, device, clock).items()}
    return out


def bench(device: torch.device, n_layers: int, vocab: int, batch: int, seq: int, repeats: int, warmup: int,
          clock: str) -> dict[str, list[float]]:
    """Seconds per step of the baseline and of ours in fp32 and bf16, ``repeats`` of each, measured alternately."""
    torch.manual_seed(0)
    base = BaselineLM(vocab, n_layers).to(device).train()
    ours = TransformerLM(vocab, n_layers).to(device).train()
    ours_bf16 = copy.deepcopy(ours)
    opt_base = torch.optim.Adam(base.parameters(), lr=1e-4)
    opt_ours, opt_bf16 = make_optimizer(ours, 1e-4), make_optimizer(ours_bf16, 1e-4)
    tokens = torch.randint(0, vocab, (batch, seq + 1), device=device)
    x, y = tokens[:, :-1], tokens[:, 1:]
    x_seq, y_seq = x.T.contiguous(), y.T.contiguous()
    mask = causal_mask(seq, device)
    steps: dict[str, Callable[[], object]] = {
        "baseline": lambda: baseline_step(base, opt_base, x_seq, y_seq, mask),
        "fp32": lambda: train_step(ours, opt_ours, x, y, 0.5, "fp32"),
        "bf16": lambda: train_step(ours_bf16, opt_bf16, x, y, 0.5, "bf16"),
    }
    return time_alternately(steps, repeats, warmup, device, clock)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, nargs="+", default=[1, 2, 5, 10])
    p.add_argument("--vocab", type=int, default=28_782, help="the paper's WikiText-2 vocabulary by default")
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--seq", type=int, default=35)
    p.add_argument("--repeats", type=int, default=25)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                   help="wall clock, or the process's CPU time (use with --threads 1 on a shared machine)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--results-name", default="lm_step", help="store as joma_lib/kit/benchmark_results/<this>.json")
    p.add_argument("--no-write", action="store_true", help="print only; do not update joma_lib/kit/benchmark_results/")
    add_allocator_option(p)
    args = p.parse_args()
    results_path(args.results_name)  # a bad name fails now, not after the measurements
    if not bf16_support().usable:  # before any bf16 operation (joma_lib.base.cpu)
        raise SystemExit(f"this benchmark compares fp32 with bf16, and {bf16_support().summary()}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    allocator = apply_allocator(args.allocator)  # for every step timed here
    devices = [torch.device("cpu")] if args.device != "cuda" else []
    if args.device in ("auto", "cuda") and torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, vocab {args.vocab}, "
          f"batch {args.batch} x {args.seq} tokens, median of {args.repeats} alternating steps, {args.clock} clock, "
          f"allocator {allocator}")
    dropout = {}
    if devices and devices[0].type == "cpu":  # the model draws its own masks on the CPU only
        dropout["cpu"] = dropout_ms(devices[0], (args.batch, args.seq, 200), args.clock)
        print(f"cpu: one dropout of [{args.batch}, {args.seq}, 200] activations, torch / ours (ms): "
              + ", ".join(f"{k} {v['torch']:.3f} / {v['ours']:.3f}" for k, v in dropout["cpu"].items()))
    print(f"{'device':<6} {'layers':>6} {'GFLOP':>6} {'GEMM GFLOP/s fp32/bf16':>23} "
          f"{'achieved GFLOP/s base/fp32/bf16':>32} {'ms base/fp32/bf16':>20} {'ratio fp32':>10} {'ratio bf16':>10} "
          f"{'auto picks / faster here':>24}")
    rows = []
    for device in devices:
        for n in args.layers:
            gflop, speed = roofline(step_gemms(n, args.vocab, args.batch, args.seq), device, args.clock)
            t = bench(device, n, args.vocab, args.batch, args.seq, args.repeats, args.warmup, args.clock)
            ms = {k: median_ms(v) for k, v in t.items()}
            achieved = {k: gflop / (v / 1000) for k, v in ms.items()}
            # what precision="auto" picks at these shapes (its own short measurement), against the faster one here
            auto = run_precision(RunConfig(n_layers=n, max_vocab=args.vocab, batch_size=args.batch, seq_len=args.seq,
                                           precision="auto"), device, torch.get_num_threads())
            row = {"device": device.type, "layers": n, "gflop": gflop, "gemm_gflops": speed,
                   "achieved_gflops": achieved, "median_ms": ms,
                   "ratio_fp32": ms["baseline"] / ms["fp32"], "ratio_bf16": ms["baseline"] / ms["bf16"],
                   "auto": auto, "faster": "bf16" if ms["bf16"] < ms["fp32"] else "fp32"}
            rows.append(row)
            print(f"{device.type:<6} {n:>6} {gflop:>6.1f} {speed['fp32']:>11.0f} /{speed['bf16']:>5.0f}      "
                  f"{achieved['baseline']:>14.0f} /{achieved['fp32']:>5.0f} /{achieved['bf16']:>5.0f}      "
                  f"{ms['baseline']:>6.0f}/{ms['fp32']:>4.0f}/{ms['bf16']:>4.0f} "
                  f"{row['ratio_fp32']:>9.2f}x {row['ratio_bf16']:>9.2f}x {auto:>15} / {row['faster']}", flush=True)
    if not args.no_write:
        save_results(args.results_name, {"settings": {k: v for k, v in vars(args).items() if k != "no_write"} |
                                 {"threads_used": torch.get_num_threads(), "allocator": allocator}, "rows": rows,
                                 "dropout_ms": dropout})


if __name__ == "__main__":
    main()
