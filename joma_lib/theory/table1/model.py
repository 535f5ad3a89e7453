"""Paper Table 1: do the hidden MLP neurons of layer i of a Transformer align with latents of level i?

The model (our implementation of the description in ``official_code.md`` Sec. 3.3): trainable
token embeddings without positional encoding, then per layer single-head causal softmax
attention (no output projection) + residual + LayerNorm, a ReLU MLP + residual + LayerNorm,
and a linear classifier read at the last position. It is trained with Adam (L2 weight decay)
on fresh batches of the combination hierarchy (:mod:`joma_lib.theory.combination_hierarchy`) to
predict the class.

The score (:func:`alignment_score`) of layer ``j`` against level ``k``: the ReLU hidden
activations of the layer's MLP, max-pooled over positions, are correlated (Pearson) with the
indicator of every latent symbol of level ``k``; each latent keeps its best neuron; the score is
the mean over latents (those whose best correlation exceeds ``min_corr``, the authors' recipe).
The paper's Table 1 reports the diagonal ``j = k``; :func:`alignment_matrix` gives every pair.

Two controls share each trained network's seed, hence its initial weights and test sequences:
the network at initialisation, and the same network trained on shuffled labels (labels drawn
independently of the sequence), which sees the same inputs and optimiser but nothing to learn.

This module holds one run: its configuration (:class:`Table1Config`), the model, its training and its scores.
The named configurations and the whole table are in :mod:`joma_lib.theory.table1.runs`, the configuration search in
:mod:`joma_lib.theory.table1.exploration`, the command line in :mod:`joma_lib.theory.table1.cli`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from joma_lib.theory.combination_hierarchy import CombinationHierarchy, HierarchySample
from joma_lib.base.device import pinned_threads, resolve_device
from joma_lib.base.precision import PRECISIONS, record_used, require
from joma_lib.base.precision import numerics as precision_numerics
from joma_lib.base.validation import as_finite_array, check_choice, check_float, check_int

Setting = tuple[int, tuple[int, ...]]
"""A row group of Table 1: (number of combinations per symbol, sizes of the latent levels)."""

TABLE1_SETTINGS: tuple[Setting, ...] = ((2, (10, 20)), (2, (20, 30)), (3, (10, 20)), (3, (20, 30)))

TABLE1_SPREAD = 0.08
"""Regression tolerance of the trained and shuffled-label scores: at least the largest seed standard deviation
(ddof=1) of those scores in the reference run (0.075, a shuffled-label control; trained 0.069), which
book/table1.md and book/audit.md quote from the data."""


@dataclass(frozen=True)
class Table1Config:
    """Everything that defines one Table 1 run except the setting and the seed."""

    n_vocab: int = 100
    seq_len: int = 30
    n_class: int = 20
    n_layers: int = 3
    d_model: int = 1024
    d_hidden: int = 400
    steps: int = 10_000
    batch_size: int = 128
    lr: float = 1e-4
    weight_decay: float = 1e-4
    n_test: int = 1280
    min_corr: float = 0.01
    cpu_threads: int | None = None  # torch threads while training on the CPU; None keeps torch's setting
    # the training's (joma_lib.base.precision): fp32, tf32 (GPU) or bf16 autocast; scores in fp32
    precision: str = "fp32"
    settings: tuple[Setting, ...] = TABLE1_SETTINGS
    seeds: tuple[int, ...] = (1, 2, 3, 4, 5)

    def __post_init__(self) -> None:
        check_int("n_vocab", self.n_vocab, 3, 100_000)
        check_int("seq_len", self.seq_len, 1, 10_000)
        check_int("n_class", self.n_class, 2, 100_000)
        check_int("n_layers", self.n_layers, 1, 64)
        check_int("d_model", self.d_model, 1, 65_536)
        check_int("d_hidden", self.d_hidden, 1, 65_536)
        check_int("steps", self.steps, 1, 10**7)
        check_int("batch_size", self.batch_size, 1, 10**6)
        check_float("lr", self.lr, 0.0, 1.0, low_open=True)
        check_float("weight_decay", self.weight_decay, 0.0, 1.0)
        check_int("n_test", self.n_test, 2, 10**6)
        check_float("min_corr", self.min_corr, 0.0, 1.0)
        if self.cpu_threads is not None:
            check_int("cpu_threads", self.cpu_threads, 1, 1024)
        check_choice("precision", self.precision, PRECISIONS)
        if not self.seeds:
            raise ValueError("seeds must name at least one seed")
        for seed in self.seeds:
            check_int("seed", seed, 0, 2**31 - 1)
        if not self.settings:
            raise ValueError("settings must name at least one (n_combinations, level_sizes) pair")
        for n_comb, sizes in self.settings:
            check_int("n_combinations", n_comb, 1, 64)
            if self.n_layers < len(sizes):
                raise ValueError(f"n_layers must be >= the number of latent levels scored ({len(sizes)}), "
                                 f"got {self.n_layers}")


@contextmanager
def numerics(config: Table1Config, device: torch.device) -> Iterator[None]:
    """Run the block with the configuration's thread count on the CPU and full float32 matrix products on a GPU
    (whatever the caller had set; restored after): the numerics of the scores. The training inside it runs in
    ``config.precision`` (:func:`training_precision`). A precision ``device`` cannot run is refused here, before
    any work (:class:`~joma_lib.base.precision.PrecisionUnavailableError`)."""
    require(config.precision, device, f"Table 1's training in precision {config.precision}")
    before = torch.backends.cuda.matmul.allow_tf32
    with pinned_threads(config.cpu_threads if device.type == "cpu" else None):
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before


def training_precision(config: Table1Config, device: torch.device) -> AbstractContextManager[None]:
    """The training steps' numerics: ``config.precision`` (:func:`joma_lib.base.precision.numerics`: fp32, TF32
    products, or bf16 autocast with fp32 weights, Adam state and loss), noted for the manifests and receipts of the
    figures being made (:func:`~joma_lib.base.precision.record_used`)."""
    record_used(config.precision)
    return precision_numerics(config.precision, device)


class Block(nn.Module):
    """One layer: ``x <- LN(attn(x) + x)``, then ``x <- LN(W2 relu(W1 x) + x)``; returns the ReLU hidden too."""

    def __init__(self, d_model: int, d_hidden: int) -> None:
        super().__init__()
        self.query = nn.Linear(d_model, d_model, bias=False)
        self.key = nn.Linear(d_model, d_model, bias=False)
        self.value = nn.Linear(d_model, d_model, bias=False)
        self.norm_attention = nn.LayerNorm(d_model)
        self.up = nn.Linear(d_model, d_hidden)
        self.down = nn.Linear(d_hidden, d_model)
        self.norm_mlp = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, causal_mask: torch.Tensor, first: int = 0
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """The outputs of positions ``first`` onwards, ``(n, T - first, d_model)``, and their ReLU hidden: their
        queries attend to the keys and values of every position before them (each position is computed on its
        own after the attention, so the positions left out change nothing of the others)."""
        kept = x[:, first:]
        scores = self.query(kept) @ self.key(x).transpose(1, 2) / math.sqrt(x.shape[-1])
        attention = torch.softmax(scores.masked_fill(causal_mask[first:], float("-inf")), dim=-1)
        x = self.norm_attention(attention @ self.value(x) + kept)
        hidden = torch.relu(self.up(x))
        return self.norm_mlp(self.down(hidden) + x), hidden


class HierarchyTransformer(nn.Module):
    """Embedding -> ``n_layers`` blocks -> linear classifier at the last position (no positional encoding)."""

    def __init__(self, n_vocab: int, n_class: int, n_layers: int, d_model: int, d_hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_vocab, d_model)
        self.blocks = nn.ModuleList(Block(d_model, d_hidden) for _ in range(n_layers))
        self.classifier = nn.Linear(d_model, n_class)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Class logits ``(n, n_class)``, what the training reads. The classifier reads the last position, and
        what reaches it from the last block is that position alone: so the last block computes only the last
        position: its keys and values at every position, its query, attention and MLP at the last one. The
        earlier blocks feed every position to the next one's keys and values, so they compute them all. The
        same logits as computing every position, up to the rounding of the smaller products."""
        x, mask = self.embedding(tokens), later_positions(tokens.shape[1], tokens.device)
        for i, block in enumerate(self.blocks):
            x, _ = block(x, mask, first=tokens.shape[1] - 1 if i == len(self.blocks) - 1 else 0)
        return self.classifier(x[:, -1])

    def hidden_activations(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's ReLU hidden activations at every position, ``(n, seq_len, d_hidden)`` each (what the
        scores read)."""
        x, mask = self.embedding(tokens), later_positions(tokens.shape[1], tokens.device)
        hiddens = []
        for block in self.blocks:
            x, hidden = block(x, mask)
            hiddens.append(hidden)
        return hiddens


def later_positions(T: int, device: torch.device) -> torch.Tensor:
    """``(T, T)``, True where a query at row ``i`` would see a later position ``j > i`` (what attention masks)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(1)


def step_flops(config: Table1Config) -> int:
    """Floating-point operations of the matrix products of one training step of one run (forward and backward: a
    product's backward is two products of its size, one for each input), as :meth:`HierarchyTransformer.forward`
    computes them: per sequence of ``T`` positions, each layer but the last ``T (3 d^2 + 2 d h)`` multiply-adds
    for its query, key, value and MLP and ``2 T^2 d`` for its attention (every position's scores and mixed values,
    masked or not); the last layer ``2 T d^2`` for its keys and values and, at the last position only,
    ``d^2 + 2 d h + 2 T d``; the classifier ``d C``. Two operations per multiply-add, times 3, times the batch."""
    T, d, h = config.seq_len, config.d_model, config.d_hidden
    every_position = T * (3 * d * d + 2 * d * h) + 2 * T * T * d
    last = 2 * T * d * d + d * d + 2 * d * h + 2 * T * d
    per_sequence = (config.n_layers - 1) * every_position + last + d * config.n_class
    return 2 * 3 * config.batch_size * per_sequence


def alignment_score(active: np.ndarray, hidden: np.ndarray, min_corr: float = 0.01) -> float:
    """Mean over latents of the best Pearson correlation with a hidden neuron (paper Table 1).

    ``active``: ``(n, n_latents)`` 0/1 indicators of a latent level; ``hidden``: ``(n, n_units)``
    activations of one layer already max-pooled over positions. Constant columns (a latent never
    or always on, a dead neuron) correlate 0. Latents whose best correlation is ``<= min_corr``
    are left out of the mean (the authors' recipe, ``max_corrs[max_corrs > 0.01].mean()``); the score is 0 if
    none is left. ``min_corr`` lies in ``[0, 1]``, so the mean of what is kept is positive.
    """
    a = as_finite_array("active", active)
    h = as_finite_array("hidden", hidden)
    if a.ndim != 2 or h.ndim != 2 or a.shape[0] != h.shape[0] or a.shape[0] < 2:
        raise ValueError(f"active and hidden must be 2-D with the same number (>= 2) of rows, "
                         f"got shapes {a.shape} and {h.shape}")
    min_corr = check_float("min_corr", min_corr, 0.0, 1.0)
    a, h = a - a.mean(axis=0), h - h.mean(axis=0)
    norm_a, norm_h = np.linalg.norm(a, axis=0), np.linalg.norm(h, axis=0)
    safe = np.outer(np.where(norm_a > 0, norm_a, 1.0), np.where(norm_h > 0, norm_h, 1.0))
    corr = np.where(np.outer(norm_a > 0, norm_h > 0), a.T @ h / safe, 0.0)
    best = corr.max(axis=1)
    kept = best[best > min_corr]
    return min(float(kept.mean()), 1.0) if kept.size else 0.0  # a correlation passes 1 only by rounding


class RunResult(NamedTuple):
    """One trained model: ``scores[j, k]`` (layer ``j`` against latent level ``k``) after training,
    ``scores_init`` of the same network at initialisation, the training loss of every step, and
    ``scores_change``, the alignment of what training changed (:func:`change_alignment_matrix`)."""

    scores: np.ndarray
    scores_init: np.ndarray
    losses: np.ndarray
    scores_change: np.ndarray


def pooled_hiddens(model: HierarchyTransformer, test: HierarchySample, device: torch.device) -> list[np.ndarray]:
    """Every layer's hidden MLP activations on the test sequences, max-pooled over positions: ``(n, d_hidden)`` each."""
    with torch.no_grad():
        hiddens = model.hidden_activations(torch.from_numpy(test.tokens).to(device))
    return [h.amax(dim=1).cpu().numpy() for h in hiddens]


def _alignment_of(pooled: Sequence[np.ndarray], test: HierarchySample, min_corr: float) -> np.ndarray:
    """``alignment_score`` of every layer's pooled activations with every latent level: ``(n_layers, n_levels)``."""
    return np.array([[alignment_score(active, h, min_corr) for active in test.active] for h in pooled])


def alignment_matrix(model: HierarchyTransformer, test: HierarchySample, min_corr: float,
                     device: torch.device) -> np.ndarray:
    """``alignment_score`` of every layer's max-pooled hidden neurons with every latent level.

    Returns ``(n_layers, n_levels)``; the levels are those of ``test.active``, the classes last.
    """
    return _alignment_of(pooled_hiddens(model, test, device), test, min_corr)


def change_alignment_matrix(before: Sequence[np.ndarray], after: Sequence[np.ndarray], test: HierarchySample,
                            min_corr: float) -> np.ndarray:
    """Companion metric (not the paper's): ``alignment_score`` of the change that training made to every
    layer's pooled hidden activations, ``after - before`` per neuron and test sequence, with every latent level.

    The network at initialisation already scores high on level 0 (single tokens nearly determine the
    level-0 latents), so the paper's score cannot tell learning from initialisation; the change drops
    whatever the untrained network already computed. Returns ``(n_layers, n_levels)``.
    """
    if len(before) != len(after):
        raise ValueError(f"before and after must hold the same number of layers, got {len(before)} and {len(after)}")
    return _alignment_of([a - b for b, a in zip(before, after)], test, min_corr)


def setup_run(config: Table1Config, n_combinations: int, level_sizes: tuple[int, ...], seed: int,
           dev: torch.device) -> tuple[CombinationHierarchy, HierarchySample, HierarchyTransformer]:
    """The data generator, the test sequences and the initial network (on ``dev``) of one (setting, seed)."""
    seed = check_int("seed", seed, 0, 2**31 - 1)
    if config.n_layers < len(level_sizes):
        raise ValueError(f"n_layers must be >= len(level_sizes) = {len(level_sizes)}, got {config.n_layers}")
    data = CombinationHierarchy(config.n_vocab, config.seq_len, tuple(level_sizes), config.n_class,
                                n_combinations, seed=seed)
    test = data.sample(config.n_test, np.random.default_rng((seed, 1)))
    torch.manual_seed(seed)
    model = HierarchyTransformer(config.n_vocab, config.n_class, config.n_layers, config.d_model,
                                 config.d_hidden).to(dev)
    return data, test, model


def score_at_init(config: Table1Config, n_combinations: int, level_sizes: tuple[int, ...], seed: int,
                  device: str | None = None) -> np.ndarray:
    """The alignment matrix of the untrained network of one (setting, seed): no training, any width."""
    dev = resolve_device(device)
    with numerics(config, dev):
        _, test, model = setup_run(config, n_combinations, level_sizes, seed, dev)
        return alignment_matrix(model, test, config.min_corr, dev)


def token_baseline(config: Table1Config, n_combinations: int, level_sizes: tuple[int, ...], seed: int) -> float:
    """The level-0 score of "neurons" that merely detect one token each (presence in the sequence).

    When it is close to 1, a level-0 latent is on exactly when one of its tokens is present, and a
    network scores high on level 0 without having learned any combination of tokens.
    """
    data = CombinationHierarchy(config.n_vocab, config.seq_len, tuple(level_sizes), config.n_class,
                                n_combinations, seed=check_int("seed", seed, 0, 2**31 - 1))
    test = data.sample(config.n_test, np.random.default_rng((seed, 1)))
    present = (test.tokens[:, :, None] == np.arange(config.n_vocab - 1)).any(axis=1)
    return alignment_score(test.active[0], present, config.min_corr)


def token_memberships(config: Table1Config, n_combinations: int, level_sizes: tuple[int, ...], seed: int
                      ) -> np.ndarray:
    """How many of the level-0 symbols that some class switches on hold each leaf token (``n_vocab - 1`` counts;
    0: the token never occurs in any sequence)."""
    data = CombinationHierarchy(config.n_vocab, config.seq_len, tuple(level_sizes), config.n_class,
                                n_combinations, seed=check_int("seed", seed, 0, 2**31 - 1))
    used = data.of_labels(np.arange(config.n_class)).active[0].any(axis=0)
    return np.bincount(data.children[0][used].ravel(), minlength=config.n_vocab - 1)


def train_and_score(config: Table1Config, n_combinations: int, level_sizes: tuple[int, ...], seed: int,
                    device: str | None = None, progress: bool = False, shuffle_labels: bool = False) -> RunResult:
    """Train one model on one setting and score it before and after; deterministic on the CPU for a fixed seed.

    The training batches come from the generator seeded with ``seed``, the test sequences from an
    independent stream, so the same test set scores the network at initialisation and after training.
    ``shuffle_labels=True`` is the control: the same network (same initial weights, same input
    sequences) trained on labels permuted within each batch, so they carry no information.
    """
    seed = check_int("seed", seed, 0, 2**31 - 1)
    dev = resolve_device(device)
    rng = np.random.default_rng(seed)
    shuffler = np.random.default_rng((seed, 2))
    with numerics(config, dev):
        data, test, model = setup_run(config, n_combinations, level_sizes, seed, dev)
        pooled_init = pooled_hiddens(model, test, dev)
        scores_init = _alignment_of(pooled_init, test, config.min_corr)
        # foreach: every tensor's update in one call (torch's CPU default is a loop over the tensors): the same
        # numbers bit for bit (tests/test_theory_table1_model.py); measured on one core, two quick runs 6.2 -> 5.1 s,
        # the whole quick Table 1 73 -> 69 s
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, foreach=True)
        losses = np.empty(config.steps)
        steps = range(config.steps)
        if progress:
            from tqdm.auto import tqdm

            kind = ", shuffled labels" if shuffle_labels else ""
            steps = tqdm(steps, desc=f"comb {n_combinations}, levels {level_sizes}, seed {seed}{kind}", leave=False)
        with training_precision(config, dev):
            for step in steps:
                batch = data.sample(config.batch_size, rng)
                labels = shuffler.permutation(batch.labels) if shuffle_labels else batch.labels
                logits = model(torch.from_numpy(batch.tokens).to(dev))
                loss = nn.functional.cross_entropy(logits, torch.from_numpy(labels).to(dev))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses[step] = loss.item()
        scores, scores_change = trained_scores(model, test, pooled_init, config.min_corr, dev)
    return RunResult(scores, scores_init, losses, scores_change)


def trained_scores(model: HierarchyTransformer, test: HierarchySample, pooled_init: Sequence[np.ndarray],
                   min_corr: float, device: torch.device) -> tuple[np.ndarray, np.ndarray]:
    """A trained network's alignment matrix and that of the change from its initial pooled activations."""
    pooled = pooled_hiddens(model, test, device)
    return _alignment_of(pooled, test, min_corr), change_alignment_matrix(pooled_init, pooled, test, min_corr)
