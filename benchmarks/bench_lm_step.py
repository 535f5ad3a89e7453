"""Time one training step of our language model against the authors' way of training it.

Both models have the paper's architecture (d = 200, FFN 200, one head, post-LN,
dropout 0.2, untied output over ``--vocab`` words, 20 streams x 35 tokens):

* baseline: sequence-first layers built on ``nn.MultiheadAttention`` called with
  ``need_weights=True`` at every step (the authors' training path, which materialises the
  [B, T, T] attention probabilities), torch's default Adam and gradient clipping;
* ours: :class:`joma_lib.lm.model.TransformerLM` through :func:`joma_lib.lm.train.train_step`
  (fused ``scaled_dot_product_attention``, fused Adam, foreach clipping).

The two steps alternate in one process (same inputs, same thread count). Reported: tokens
per second from the fastest step of each (the least disturbed by other processes on a
shared machine) and the ratio of both the fastest and the median step times (goal >= 1.5x)::

    python benchmarks/bench_lm_step.py                  # CPU, and the GPU when there is one
    python benchmarks/bench_lm_step.py --layers 1 2 --repeats 20 --device cpu
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from joma_lib.lm.model import PostLNLayer, TransformerLM, causal_mask
from joma_lib.lm.train import make_optimizer, train_step


class BaselineLayer(PostLNLayer):
    """The same post-LN layer, sequence-first, with ``nn.MultiheadAttention`` always returning its weights."""

    def __init__(self, d: int, d_ff: int, dropout: float) -> None:
        super().__init__(d, d_ff, dropout)
        self.self_attn = nn.MultiheadAttention(d, 1, dropout=dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, attn = self.self_attn(x, x, x, attn_mask=mask, need_weights=True)
        return self.after_attention(x, a), attn


class BaselineLM(TransformerLM):
    """The same language model (same embedding, read-out and initialisation), sequence-first, whose layers
    return their attention maps in training too."""

    def __init__(self, vocab: int, n_layers: int, d: int = 200, d_ff: int = 200, dropout: float = 0.2) -> None:
        super().__init__(vocab, n_layers, d, d_ff, dropout)
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


def bench(device: torch.device, n_layers: int, vocab: int, batch: int, seq: int, repeats: int, warmup: int
          ) -> dict[str, list[float]]:
    """Seconds per step of the baseline and of ours, ``repeats`` of each, measured alternately."""
    torch.manual_seed(0)
    base = BaselineLM(vocab, n_layers).to(device).train()
    ours = TransformerLM(vocab, n_layers).to(device).train()
    opt_base = torch.optim.Adam(base.parameters(), lr=1e-4)
    opt_ours = make_optimizer(ours, 1e-4)
    tokens = torch.randint(0, vocab, (batch, seq + 1), device=device)
    x, y = tokens[:, :-1], tokens[:, 1:]
    mask = causal_mask(seq, device)
    steps = {
        "baseline": lambda: baseline_step(base, opt_base, x.T.contiguous(), y.T.contiguous(), mask),
        "ours": lambda: train_step(ours, opt_ours, x, y, 0.5),
    }
    times: dict[str, list[float]] = {k: [] for k in steps}
    for i in range(warmup + repeats):
        for name, step in steps.items():
            _sync(device)
            t0 = time.perf_counter()
            step()
            _sync(device)
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, nargs="+", default=[1, 2, 5])
    p.add_argument("--vocab", type=int, default=28_782, help="the paper's WikiText-2 vocabulary by default")
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--seq", type=int, default=35)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    args = p.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    devices = [torch.device("cpu")] if args.device != "cuda" else []
    if args.device in ("auto", "cuda") and torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, vocab {args.vocab}, "
          f"batch {args.batch} x {args.seq} tokens, median of {args.repeats} steps")
    print(f"{'device':<6} {'layers':>6} {'baseline tok/s':>15} {'ours tok/s':>11} {'ratio (fastest)':>16} "
          f"{'ratio (median)':>15}")
    n_tok = args.batch * args.seq
    for device in devices:
        for n in args.layers:
            t = bench(device, n, args.vocab, args.batch, args.seq, args.repeats, args.warmup)
            best = {k: min(v) for k, v in t.items()}
            median = {k: statistics.median(v) for k, v in t.items()}
            print(f"{device.type:<6} {n:>6} {n_tok / best['baseline']:>15.0f} {n_tok / best['ours']:>11.0f} "
                  f"{best['baseline'] / best['ours']:>15.2f}x {median['baseline'] / median['ours']:>14.2f}x")


if __name__ == "__main__":
    main()
