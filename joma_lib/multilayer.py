"""Paper Table 1: do the hidden MLP neurons of layer k of a Transformer align with latents of level k?

The model (our implementation of the description in ``official_code.md`` Sec. 3.3): trainable
token embeddings without positional encoding, then per layer single-head causal softmax
attention (no output projection) + residual + LayerNorm, a ReLU MLP + residual + LayerNorm,
and a linear classifier read at the last position. It is trained with Adam (L2 weight decay)
on fresh batches of the combination hierarchy (:mod:`joma_lib.combination_hierarchy`) to
predict the class.

The score (:func:`alignment_score`) of layer ``k``: the ReLU hidden activations of the
layer's MLP, max-pooled over positions, are correlated (Pearson) with the indicator of every
latent symbol of level ``k``; each latent keeps its best neuron; the score is the mean over
latents (those whose best correlation exceeds ``min_corr``, the authors' recipe). Every network
is also scored at initialisation, on the same test sequences, as a control: random ReLU
neurons max-pooled over positions already detect the level-0 token sets.

Command line (``--config quick`` runs on 2 CPU cores in about a minute; ``full`` is the
paper's configuration, meant for a GPU)::

    python -m joma_lib.multilayer --config quick|full --device auto|cpu|cuda --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from joma_lib.combination_hierarchy import CombinationHierarchy, HierarchySample
from joma_lib.device import DEVICE_CHOICES, resolve_device
from joma_lib.validation import check_choice, check_float, check_int

Setting = tuple[int, tuple[int, ...]]
"""A row group of Table 1: (number of combinations per symbol, sizes of the latent levels)."""

TABLE1_SETTINGS: tuple[Setting, ...] = ((2, (10, 20)), (2, (20, 30)), (3, (10, 20)), (3, (20, 30)))


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
        check_float("min_corr", self.min_corr, -1.0, 1.0)
        if self.cpu_threads is not None:
            check_int("cpu_threads", self.cpu_threads, 1, 1024)
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


CONFIGS: dict[str, Table1Config] = {
    # The paper's run (official_code.md Sec. 2.6: lr, wd, d as filtered by the table script; 5 seeds per
    # the secondary sources). About 20 runs x 10k steps: an estimated few minutes per run on a GPU
    # (not measured), days on a CPU
    # (one step of width 1024 took 6-35 s on the shared 2-core machine).
    "full": Table1Config(),
    # Scaled down for 2 CPU cores (about 40 s of CPU time for the whole table): width 32 instead of 1024,
    # 300 Adam steps of 32 sequences at lr 3e-3 instead of 10k steps of 128 at 1e-4, 3 seeds, one thread.
    "quick": Table1Config(d_model=32, d_hidden=128, steps=300, batch_size=32, lr=3e-3, n_test=1024,
                          cpu_threads=1, seeds=(1, 2, 3)),
}


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

    def forward(self, x: torch.Tensor, causal_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores = self.query(x) @ self.key(x).transpose(1, 2) / math.sqrt(x.shape[-1])
        attention = torch.softmax(scores.masked_fill(causal_mask, float("-inf")), dim=-1)
        x = self.norm_attention(attention @ self.value(x) + x)
        hidden = torch.relu(self.up(x))
        return self.norm_mlp(self.down(hidden) + x), hidden


class HierarchyTransformer(nn.Module):
    """Embedding -> ``n_layers`` blocks -> linear classifier at the last position (no positional encoding)."""

    def __init__(self, n_vocab: int, n_class: int, n_layers: int, d_model: int, d_hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_vocab, d_model)
        self.blocks = nn.ModuleList(Block(d_model, d_hidden) for _ in range(n_layers))
        self.classifier = nn.Linear(d_model, n_class)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Class logits ``(n, n_class)`` and every layer's ReLU hidden activations ``(n, seq_len, d_hidden)``."""
        T = tokens.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).triu(1)
        x = self.embedding(tokens)
        hiddens = []
        for block in self.blocks:
            x, hidden = block(x, mask)
            hiddens.append(hidden)
        return self.classifier(x[:, -1]), hiddens


def alignment_score(active: np.ndarray, hidden: np.ndarray, min_corr: float = 0.01) -> float:
    """Mean over latents of the best Pearson correlation with a hidden neuron (paper Table 1).

    ``active``: ``(n, n_latents)`` 0/1 indicators of a latent level; ``hidden``: ``(n, n_units)``
    activations of one layer already max-pooled over positions. Constant columns (a latent never
    or always on, a dead neuron) correlate 0. Latents whose best correlation is ``<= min_corr``
    are left out of the mean (the authors' recipe); the score is 0 if none is left.
    """
    a = np.asarray(active, dtype=float)
    h = np.asarray(hidden, dtype=float)
    if a.ndim != 2 or h.ndim != 2 or a.shape[0] != h.shape[0] or a.shape[0] < 2:
        raise ValueError(f"active and hidden must be 2-D with the same number (>= 2) of rows, "
                         f"got shapes {a.shape} and {h.shape}")
    min_corr = check_float("min_corr", min_corr, -1.0, 1.0)
    a, h = a - a.mean(axis=0), h - h.mean(axis=0)
    norm_a, norm_h = np.linalg.norm(a, axis=0), np.linalg.norm(h, axis=0)
    safe = np.outer(np.where(norm_a > 0, norm_a, 1.0), np.where(norm_h > 0, norm_h, 1.0))
    corr = np.where(np.outer(norm_a > 0, norm_h > 0), a.T @ h / safe, 0.0)
    best = corr.max(axis=1)
    kept = best[best > min_corr]
    return float(np.clip(kept.mean(), 0.0, 1.0)) if kept.size else 0.0


@contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch CPU threads (fixed for reproducible reductions), then restore."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class RunResult(NamedTuple):
    """One trained model: ``scores[k]`` of layer ``k`` after training, ``scores_init[k]`` of the same
    network at initialisation (the control), and the training loss of every step."""

    scores: np.ndarray
    scores_init: np.ndarray
    losses: np.ndarray


def layer_scores(model: HierarchyTransformer, test: HierarchySample, n_levels: int, min_corr: float,
                 device: torch.device) -> np.ndarray:
    """``alignment_score`` of layer ``k``'s max-pooled hidden neurons with latent level ``k``, ``k < n_levels``."""
    with torch.no_grad():
        _, hiddens = model(torch.from_numpy(test.tokens).to(device))
    return np.array([alignment_score(test.active[k], hiddens[k].amax(dim=1).cpu().numpy(), min_corr)
                     for k in range(n_levels)])


def train_and_score(config: Table1Config, n_combinations: int, level_sizes: tuple[int, ...], seed: int,
                    device: str | None = None, progress: bool = False) -> RunResult:
    """Train one model on one setting and score it before and after; deterministic on the CPU for a fixed seed.

    The training batches come from the generator seeded with ``seed``, the test sequences from an
    independent stream, so the same test set scores the network at initialisation and after training.
    """
    seed = check_int("seed", seed, 0, 2**31 - 1)
    dev = resolve_device(device)
    data = CombinationHierarchy(config.n_vocab, config.seq_len, tuple(level_sizes), config.n_class,
                                n_combinations, seed=seed)
    if config.n_layers < len(level_sizes):
        raise ValueError(f"n_layers must be >= len(level_sizes) = {len(level_sizes)}, got {config.n_layers}")
    rng = np.random.default_rng(seed)
    test = data.sample(config.n_test, np.random.default_rng((seed, 1)))
    with _torch_threads(config.cpu_threads if dev.type == "cpu" else None):
        torch.manual_seed(seed)
        model = HierarchyTransformer(config.n_vocab, config.n_class, config.n_layers, config.d_model,
                                     config.d_hidden).to(dev)
        scores_init = layer_scores(model, test, len(level_sizes), config.min_corr, dev)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        losses = np.empty(config.steps)
        steps = range(config.steps)
        if progress:
            from tqdm.auto import tqdm

            steps = tqdm(steps, desc=f"comb {n_combinations}, levels {level_sizes}, seed {seed}", leave=False)
        for step in steps:
            batch = data.sample(config.batch_size, rng)
            logits, _ = model(torch.from_numpy(batch.tokens).to(dev))
            loss = nn.functional.cross_entropy(logits, torch.from_numpy(batch.labels).to(dev))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses[step] = loss.item()
        scores = layer_scores(model, test, len(level_sizes), config.min_corr, dev)
    return RunResult(scores, scores_init, losses)


@dataclass(frozen=True)
class Table1Result:
    """Scores of every setting, seed and layer, ``[setting, seed, layer]``, after training and at initialisation."""

    settings: tuple[Setting, ...]
    seeds: tuple[int, ...]
    scores: np.ndarray  # (n_settings, n_seeds, n_levels)
    scores_init: np.ndarray  # (n_settings, n_seeds, n_levels): the same networks before training
    final_loss: np.ndarray  # (n_settings, n_seeds): mean training loss over the last 10% of steps

    def format(self) -> str:
        """The table as text, one row per setting: ``mean +- std`` over seeds per layer, trained and untrained."""
        n_levels = self.scores.shape[2]
        cols = [f"layer {k} {kind}" for kind in ("trained", "untrained") for k in range(n_levels)]
        lines = [f"{'combinations':>12} {'level sizes':>12}  " + "  ".join(f"{c:>17}" for c in cols)]
        for i, (n_comb, sizes) in enumerate(self.settings):
            cells = [f"{s[i, :, k].mean():>7.3f} +- {s[i, :, k].std():.3f}"
                     for s in (self.scores, self.scores_init) for k in range(n_levels)]
            lines.append(f"{n_comb:>12} {str(tuple(sizes)):>12}  " + "  ".join(f"{c:>17}" for c in cells))
        return "\n".join(lines)


def run_table1(config: Table1Config, device: str | None = None, progress: bool = False) -> Table1Result:
    """Train and score every (setting, seed) of ``config``: the whole Table 1."""
    n_levels = {len(sizes) for _, sizes in config.settings}
    if len(n_levels) != 1:
        raise ValueError(f"all settings must have the same number of latent levels, got {sorted(n_levels)}")
    n_steps_tail = max(1, config.steps // 10)
    shape = (len(config.settings), len(config.seeds), n_levels.pop())
    scores, scores_init = np.empty(shape), np.empty(shape)
    final_loss = np.empty(shape[:2])
    for i, (n_comb, sizes) in enumerate(config.settings):
        for j, seed in enumerate(config.seeds):
            run = train_and_score(config, n_comb, sizes, seed, device, progress)
            scores[i, j], scores_init[i, j] = run.scores, run.scores_init
            final_loss[i, j] = run.losses[-n_steps_tail:].mean()
    return Table1Result(config.settings, config.seeds, scores, scores_init, final_loss)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: train and print Table 1 for the chosen configuration."""
    parser = argparse.ArgumentParser(prog="python -m joma_lib.multilayer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="quick", help=f"one of {sorted(CONFIGS)} (default quick)")
    parser.add_argument("--device", default=None, help=f"one of {list(DEVICE_CHOICES)} (default $JOMA_DEVICE or auto)")
    parser.add_argument("--seeds", nargs="+", default=None, help="seeds (default: the configuration's)")
    parser.add_argument("--steps", default=None, help="override the number of Adam steps")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)
    try:
        config = CONFIGS[check_choice("config", args.config, sorted(CONFIGS))]
        if args.seeds is not None:
            config = replace(config, seeds=tuple(_parse_int("seeds", s) for s in args.seeds))
        if args.steps is not None:
            config = replace(config, steps=_parse_int("steps", args.steps))
        device = resolve_device(args.device)
    except ValueError as err:
        parser.error(str(err))
    print(f"Table 1, {args.config} configuration on {device}: {config}", flush=True)
    result = run_table1(config, device=device.type, progress=not args.no_progress)
    print(result.format())
    return 0


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be integers, got {text!r}") from None


if __name__ == "__main__":
    sys.exit(main())
