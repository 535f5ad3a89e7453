"""How many operations one training step of a stack dispatches: on a GPU, each is a kernel, and the paper's model is
small enough that a step costs about its number of kernels times a few microseconds, whatever the arithmetic.

Counted on any machine, no GPU needed: the step of :class:`joma_lib.lm.stack_step.StackStep` as it runs on a GPU
(the counter-hash dropout masks, the read-out of all runs at once, the per-run clip and fused Adam), at the paper's
shapes (d 200, FFN 200, one head, dropout 0.2, 20 x 35 tokens), in bf16 autocast, for each depth and stack size.
Every ATen operation that is not a view counts (a view launches nothing); reads of host scalars
(``_local_scalar_dense`` of a CPU tensor) do not. The count is of the second step of its shape (the first records
the dropout sites' sizes, see :class:`joma_lib.lm.stacked.CounterMasks`). One difference from a GPU remains: there
the read-out pads its vocabulary and columns to aligned widths (:data:`joma_lib.lm.model.READ_OUT_ALIGN`), 2
operations more a step.
Results go to ``joma_lib/kit/benchmark_results/<--results-name>.json``::

    python benchmarks/bench_step_ops.py
    python benchmarks/bench_step_ops.py --layers 1 5 --stacks 1 21 --no-write
"""

from __future__ import annotations

import argparse
import collections
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from joma_lib.kit.benchmarks import results_path, save_results
from joma_lib.lm.model import TransformerLM
from joma_lib.base.precision import PrecisionUnavailableError, require
from joma_lib.lm.stack_step import AdamState, StackStep, on_device
from joma_lib.lm.stacked import CounterMasks, StackedLM

#: ATen operations that only reinterpret memory (no kernel), and host-side scalar reads
NOT_KERNELS = {"view", "_unsafe_view", "reshape", "_reshape_alias", "transpose", "t", "slice", "select", "unsqueeze",
               "squeeze", "expand", "as_strided", "permute", "detach", "alias", "split", "split_with_sizes", "unbind",
               "lift_fresh", "_local_scalar_dense"}


class OpCount(TorchDispatchMode):
    """Counts the ATen operations dispatched inside the block, by name, views and host reads left out."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if name not in NOT_KERNELS:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def step_ops(n_layers: int, n_runs: int, vocab: int) -> collections.Counter[str]:
    """The operations of one (second) stacked step of ``n_runs`` runs of depth ``n_layers``, by name."""
    cpu = torch.device("cpu")
    models = []
    for seed in range(n_runs):
        torch.manual_seed(seed)
        models.append(TransformerLM(vocab, n_layers))
    stack = StackedLM.from_models(models, CounterMasks(list(range(n_runs)), 0, cpu), cpu)
    stack.batched_read_out = True  # as on a GPU
    step = StackStep(stack, AdamState(list(stack.params.values())), on_device([1e-4] * n_runs, cpu),
                     on_device([0.5] * n_runs, cpu), "bf16", capture=False)
    tokens = torch.randint(0, vocab, (20, 36))
    x, y = tokens[:, :-1], tokens[:, 1:]
    step.step(x, y)
    with OpCount() as count:
        step.step(x, y)
    return count.ops


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, nargs="+", default=[1, 2, 5, 10])
    p.add_argument("--stacks", type=int, nargs="+", default=[1, 3, 7, 21])
    p.add_argument("--vocab", type=int, default=28_782)
    p.add_argument("--results-name", default="lm_step_ops", help="store as joma_lib/kit/benchmark_results/<this>.json")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()
    results_path(args.results_name)  # a bad name fails now, not after the counts
    try:  # a CPU whose bf16 kernels die (joma_lib.base.cpu) must not run them
        require("bf16", torch.device("cpu"), "this count (of the bf16 step a GPU trains)")
    except PrecisionUnavailableError as err:
        p.error(str(err))
    rows = []
    print(f"operations (GPU kernels) of one stacked training step, vocabulary {args.vocab}, bf16")
    print(f"{'layers':>6} " + " ".join(f"{f'R={r}':>7}" for r in args.stacks) + "   most frequent (R=1)")
    for n_layers in args.layers:
        counts = {r: step_ops(n_layers, r, args.vocab) for r in args.stacks}
        totals = {r: sum(c.values()) for r, c in counts.items()}
        top = ", ".join(f"{name} {n}" for name, n in counts[args.stacks[0]].most_common(4))
        print(f"{n_layers:>6} " + " ".join(f"{totals[r]:>7}" for r in args.stacks) + f"   {top}", flush=True)
        rows.append({"layers": n_layers, "ops": {str(r): totals[r] for r in args.stacks}})
    if not args.no_write:
        save_results(args.results_name, {"settings": {k: v for k, v in vars(args).items() if k != "no_write"},
                                         "rows": rows})


if __name__ == "__main__":
    main()
