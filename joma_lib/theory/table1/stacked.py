"""Table 1 trained as one stacked model: every run of a configuration (each setting x seed, with real and with
shuffled labels) is one slice of a leading run axis, so one step trains them all.

Every run stays the run :func:`joma_lib.theory.table1.model.train_and_score` trains: its seed's initial network (built
by :func:`~joma_lib.theory.table1.model.setup_run`, then stacked), its own batches, its own label shuffling, its own
Adam state (Adam with L2 weight decay is elementwise, so one optimiser over the stacked tensors keeps every run's
moments in its slice), and its loss: the mean over its batch, summed over runs before the backward pass, so each run's
gradient is its own. The scores are computed run by run, on the unstacked network, as before. Stacking changes only the
summation order inside the matrix products (see ``tests/test_theory_table1_stacked.py``).

The batches. A batch is a function of its labels
(:meth:`~joma_lib.theory.combination_hierarchy.CombinationHierarchy.of_labels` works row by row), so each run's token
table ``(n_class, seq_len)`` is made once and a batch's tokens are looked up on the device. The labels come from each
run's own numpy stream, one ``integers`` (and for a control one ``permutation``) call per step exactly as unstacked,
since a single call for many steps would not draw the same numbers; they are drawn ahead, a chunk of steps at a time, in
a background thread (:class:`LabelStream`).

The engine: hand-written batched products (``torch.baddbmm``/``bmm``, the embedding as one lookup in the flattened
tables) rather than ``torch.func`` (``vmap`` over ``functional_call`` of
:class:`~joma_lib.theory.table1.model.HierarchyTransformer`). Measured with
``benchmarks/bench_table1_stack.py --device cpu --threads 1`` (the methods taking turns, median of 20-30 steps) on the
shared 2-core CPU, time per run-step against one run alone: at width 16 (``check``, 8 runs, bound by dispatch) bmm 2.6x
faster, vmap 2.2x; at width 32 (``quick``, 24 runs) bmm 1.29x, vmap 1.20x, and with 8 runs 0.92x and 0.97x; at width 128
(``wide``, 4 runs, bound by arithmetic) 0.99x and 0.95x. So on a CPU stacking gains only where dispatch dominates, the
two engines are within the machine's noise elsewhere, and bmm is never the slower by more than that noise. Dispatch is
what a GPU step is bound by, where the batched products have the edge; and they need no functional copy of the module's
parameters: the optimiser works on plain tensors that a checkpoint saves as they are.

The last layer at the last position: the loss reads the classifier at the last position only, so the last layer
computes its keys and values at every position and its query, attention and MLP at that one position, as the
unstacked model does (:meth:`~joma_lib.theory.table1.model.HierarchyTransformer.forward`). At the paper's sizes
(3 layers, width 1024, MLP 400, 30 positions) that is 15% fewer multiply-adds a step; measured on the shared 2-core
CPU before and after (``--config full --runs 2 --threads 2``, median of 4 steps): a stacked step 10.0 -> 8.5 s, a
run alone 5.8 -> 4.9 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from joma_lib.base.run_axis import affine, layer_norm
from joma_lib.theory.combination_hierarchy import CombinationHierarchy
from joma_lib.theory.table1.model import HierarchyTransformer, Setting, Table1Config, later_positions
from joma_lib.base.validation import check_int

@dataclass(frozen=True)
class Run:
    """One slice of the stack: setting index and value, seed index and value, shuffled labels or not."""

    i_setting: int
    setting: Setting
    i_seed: int
    seed: int
    shuffled: bool


def stack_runs(config: Table1Config) -> list[Run]:
    """Every run of ``config``'s table, in a fixed order: setting, seed, then trained before its control."""
    return [Run(i, setting, j, seed, shuffled) for i, setting in enumerate(config.settings)
            for j, seed in enumerate(config.seeds) for shuffled in (False, True)]


def stack_parameters(models: Sequence[HierarchyTransformer]) -> dict[str, torch.Tensor]:
    """The models' parameters stacked along a new leading run axis, as leaf tensors that require grad."""
    names = [name for name, _ in models[0].named_parameters()]
    return {name: torch.stack([dict(m.named_parameters())[name].detach() for m in models]).requires_grad_()
            for name in names}


def unstack(params: dict[str, torch.Tensor], run: int, model: HierarchyTransformer) -> HierarchyTransformer:
    """``model`` with the parameters of slice ``run`` of the stack (copied in place)."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(params[name][run])
    return model


def _linear(x: torch.Tensor, params: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """Per run ``x W^T (+ b)`` of the stacked map ``name``: ``x`` ``(R, n, d_in)`` -> ``(R, n, d_out)``."""
    return affine(x, params[f"{name}.weight"], params.get(f"{name}.bias"))


def _layer_norm(x: torch.Tensor, params: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """Per run LayerNorm ``name`` over the last axis, with the run's own scale and shift."""
    return layer_norm(x, params[f"{name}.weight"], params[f"{name}.bias"])


def stacked_logits(params: dict[str, torch.Tensor], tokens: torch.Tensor, n_layers: int) -> torch.Tensor:
    """:class:`~joma_lib.theory.table1.model.HierarchyTransformer`'s class logits for every run: ``tokens``
    ``(R, B, T)`` -> ``(R, B, n_class)``; the same layers (attention, residual, LayerNorm, ReLU MLP, residual,
    LayerNorm), and as there the last layer computes its keys and values at every position and the rest at the last
    position only, the one the classifier reads."""
    R, B, T = tokens.shape
    embedding = params["embedding.weight"]  # (R, V, D): run r's token t is row r V + t of the flattened table
    V, D = embedding.shape[1:]
    offsets = V * torch.arange(R, device=tokens.device)[:, None]
    x = F.embedding(tokens.reshape(R, B * T) + offsets, embedding.reshape(R * V, D))  # (R, B*T, D)
    mask = later_positions(T, tokens.device)
    for layer in range(n_layers):
        block = f"blocks.{layer}"
        first = T - 1 if layer == n_layers - 1 else 0  # the positions this layer computes: first .. T - 1
        kept = x.reshape(R, B, T, D)[:, :, first:].reshape(R, B * (T - first), D)
        q = _linear(kept, params, f"{block}.query").reshape(R * B, T - first, D)
        k, v = (_linear(x, params, f"{block}.{name}").reshape(R * B, T, D) for name in ("key", "value"))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(D)
        attention = torch.softmax(scores.masked_fill(mask[first:], float("-inf")), dim=-1)
        x = _layer_norm(torch.bmm(attention, v).reshape(R, B * (T - first), D) + kept, params,
                        f"{block}.norm_attention")
        hidden = torch.relu(_linear(x, params, f"{block}.up"))
        x = _layer_norm(_linear(hidden, params, f"{block}.down") + x, params, f"{block}.norm_mlp")
    return _linear(x.reshape(R, B, -1, D)[:, :, -1], params, "classifier")


def stacked_losses(params: dict[str, torch.Tensor], tokens: torch.Tensor, labels: torch.Tensor,
                   n_layers: int) -> torch.Tensor:
    """Every run's mean cross-entropy over its batch, ``(R,)``: ``labels`` ``(R, B)``."""
    logits = stacked_logits(params, tokens, n_layers)
    R, B, C = logits.shape
    return F.cross_entropy(logits.reshape(R * B, C), labels.reshape(R * B), reduction="none").reshape(R, B).mean(1)


@dataclass(frozen=True)
class LabelChunk:
    """The labels of steps ``[start, start + len)``: ``draws`` (what the batch's sequences are made of) and
    ``targets`` (what the loss is taken against: the draws, or their permutation for a control), both
    ``(steps, R, B)``; ``states``: every run's generator states once the chunk is drawn."""

    start: int
    draws: np.ndarray
    targets: np.ndarray
    states: list[dict[str, Any]]


class LabelStream:
    """Every run's label stream, as :func:`~joma_lib.theory.table1.model.train_and_score` draws it: per step
    ``rng.integers(n_class, size=batch_size)`` with ``rng = default_rng(seed)``, and for a control
    ``shuffler.permutation`` of them with ``shuffler = default_rng((seed, 2))``. Resumable from :meth:`states`."""

    def __init__(self, runs: Sequence[Run], n_class: int, batch_size: int,
                 states: list[dict[str, Any]] | None = None) -> None:
        self.runs, self.n_class, self.batch_size = list(runs), n_class, batch_size
        self.rngs = [np.random.default_rng(run.seed) for run in self.runs]
        self.shufflers = [np.random.default_rng((run.seed, 2)) for run in self.runs]
        if states is not None:
            if len(states) != 2 * len(self.runs):
                raise ValueError(f"states must hold {2 * len(self.runs)} generator states, got {len(states)}")
            for gen, state in zip(self.rngs + self.shufflers, states):
                gen.bit_generator.state = state
        self.states = [dict(gen.bit_generator.state) for gen in self.rngs + self.shufflers]

    def draw(self, start: int, steps: int) -> LabelChunk:
        """The next ``steps`` steps of every run (they must follow the last chunk drawn)."""
        draws = np.empty((steps, len(self.runs), self.batch_size), dtype=np.int64)
        targets = np.empty_like(draws)
        for r, (run, rng, shuffler) in enumerate(zip(self.runs, self.rngs, self.shufflers)):
            for step in range(steps):
                draws[step, r] = rng.integers(self.n_class, size=self.batch_size)
                targets[step, r] = shuffler.permutation(draws[step, r]) if run.shuffled else draws[step, r]
        self.states = [dict(gen.bit_generator.state) for gen in self.rngs + self.shufflers]
        return LabelChunk(start, draws, targets, self.states)

    def chunks(self, bounds: Sequence[tuple[int, int]]) -> Iterator[LabelChunk]:
        """The chunks ``[(start, stop), ...]`` (consecutive), each drawn in a background thread while the
        previous one trains."""
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = [pool.submit(self.draw, start, stop - start) for start, stop in bounds[:1]]
            for k in range(len(bounds)):
                chunk = pending.pop().result()
                if k + 1 < len(bounds):
                    start, stop = bounds[k + 1]
                    pending.append(pool.submit(self.draw, start, stop - start))
                yield chunk


def token_tables(config: Table1Config, runs: Sequence[Run], device: torch.device) -> torch.Tensor:
    """Every run's tokens of each class, ``(R, n_class, seq_len)``: a batch's tokens are ``table[r, labels]``."""
    tables = [CombinationHierarchy(config.n_vocab, config.seq_len, run.setting[1], config.n_class, run.setting[0],
                                   seed=run.seed).of_labels(np.arange(config.n_class)).tokens for run in runs]
    return torch.from_numpy(np.stack(tables)).to(device)


def chunk_bounds(start: int, stop: int, chunk: int, every: int) -> list[tuple[int, int]]:
    """Consecutive ``(start, stop)`` chunks of at most ``chunk`` steps covering ``[start, stop)`` that also end at
    every multiple of ``every`` (a checkpoint)."""
    check_int("chunk", chunk, 1, 10**7)
    bounds, at = [], start
    while at < stop:
        end = min(stop, at + chunk, (at // every + 1) * every)
        bounds.append((at, end))
        at = end
    return bounds
