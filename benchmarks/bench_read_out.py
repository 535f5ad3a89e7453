"""The bf16 read-out (the largest products of the paper's language model) with and without its aligned padding, and
for a stack of runs, run by run or all at once.

:class:`~joma_lib.lm.model.LinearCrossEntropy` in bf16, forward and backward, for one run at the paper's shapes
(20 x 35 tokens, d = 200, the authors' vocabulary of 28,782 words): unpadded (leading dimensions V = 28,782 and
d + 1 = 201, no multiples of 8) and padded as :data:`~joma_lib.lm.model.READ_OUT_ALIGN` pads on a GPU (V to a
multiple of 64, [h, 1] to one of 8). Then, padded, the read-outs of a stack of ``--stack`` runs: one run after the
other (as a stack on a CPU reads out) and all at once with a leading run axis (as a stack on a GPU does,
:attr:`~joma_lib.lm.stacked.StackedLM.batched_read_out`). All take turns, median of ``--repeats``
(CUDA-synchronised, not captured: a captured step launches the same kernels with less overhead); it prints each, the
two ratios and the products' rate, and stores them as ``read_out.json``. Whether the padding and the batched read-out
stay on a GPU is these ratios' to say::

    python benchmarks/bench_read_out.py --device cuda          # benchmarks/gpu_checks.sh runs it
    python benchmarks/bench_read_out.py --device cpu --repeats 5 --no-write
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from bench_lm_step import time_alternately
from joma_lib.kit.benchmarks import median_ms, save_results
from joma_lib.lm.model import READ_OUT_ALIGN, LinearCrossEntropy


def read_out_step(tokens: int, d: int, vocab: int, align: tuple[int, int], device: torch.device,
                  runs: int | None = None, at_once: bool = True):
    """One forward and backward pass of the bf16 read-out over ``tokens`` rows, padded to ``align``: of one run, or
    of a stack of ``runs`` runs, all at once (a leading run axis) or one run after the other."""
    gen = torch.Generator().manual_seed(0)
    lead = () if runs is None else (runs,)
    h = torch.randn(*lead, tokens, d, generator=gen).to(device).requires_grad_()
    weight = (0.05 * torch.randn(*lead, vocab, d, generator=gen)).to(device).requires_grad_()
    bias = (0.1 * torch.randn(*lead, vocab, generator=gen)).to(device).requires_grad_()
    targets = torch.randint(0, vocab, (tokens,), generator=gen).to(device)

    def step() -> None:
        if at_once:
            LinearCrossEntropy.apply(h, weight, bias, targets, torch.bfloat16, align).sum().backward()
            return
        parts = zip(h.unbind(), weight.unbind(), bias.unbind(), strict=True)
        torch.stack([LinearCrossEntropy.apply(*part, targets, torch.bfloat16, align)
                     for part in parts]).sum().backward()
    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=20 * 35)
    p.add_argument("--d", type=int, default=200)
    p.add_argument("--vocab", type=int, default=28_782)
    p.add_argument("--stack", type=int, default=7, help="runs of the stack read out run by run and at once")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", type=Path, default=None,
                   help="store in this folder (default joma_lib/kit/benchmark_results)")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()
    for name, low in (("--tokens", 1), ("--d", 1), ("--vocab", 2), ("--stack", 2), ("--repeats", 1)):
        if getattr(args, name[2:]) < low:
            p.error(f"{name} must be at least {low}, got {getattr(args, name[2:])}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here")
    device = torch.device(args.device)
    padded = READ_OUT_ALIGN["cuda"]
    runs = args.stack
    shapes = (args.tokens, args.d, args.vocab)
    one_by_one, at_once = f"{runs} runs, one by one", f"{runs} runs, at once"
    steps = {"unpadded": read_out_step(*shapes, (1, 1), device),
             "padded": read_out_step(*shapes, padded, device),
             one_by_one: read_out_step(*shapes, padded, device, runs, at_once=False),
             at_once: read_out_step(*shapes, padded, device, runs)}
    runs_of = {name: runs if name in (one_by_one, at_once) else 1 for name in steps}
    times = {name: median_ms(found) for name, found in
             time_alternately(steps, args.repeats, 3, device, "wall").items()}
    flop = 3 * 2 * args.tokens * args.d * args.vocab  # one run's forward product and the backward's two
    print(f"bf16 read-out, {args.tokens} tokens x d {args.d} x vocabulary {args.vocab}, on {device}, "
          f"median of {args.repeats} (padded to multiples of {padded[0]} rows and {padded[1]} columns)")
    for name, ms in times.items():
        print(f"{name:<22} {ms:8.3f} ms   {flop * runs_of[name] / ms / 1e9:8.1f} TFLOP/s")
    ratio = times["unpadded"] / times["padded"]
    batched = times[one_by_one] / times[at_once]
    print(f"unpadded / padded: {ratio:.2f}x; {runs} runs one by one / at once: {batched:.2f}x")
    if not args.no_write:
        results = {"tokens": args.tokens, "d": args.d, "vocab": args.vocab, "align": list(padded), "stack": runs,
                   "median_ms": times, "unpadded_over_padded": ratio, "one_by_one_over_at_once": batched}
        print(f"wrote {save_results('read_out', results, folder=args.out)}")


if __name__ == "__main__":
    main()
