"""The "combination hierarchy" behind the paper's Table 1 (the authors' synthetic data, re-implemented).

Described in ``official_code.md`` Sec. 4; this is our own implementation of that description:

* a vocabulary of ``n_vocab`` tokens whose last id is padding, so ``n_vocab - 1`` leaf tokens;
* latent levels ``i = 0..J-1`` of sizes ``level_sizes + (n_class,)``; every symbol of level
  ``i`` is a random set of ``n_combinations[i]`` distinct symbols of the level below (leaf
  tokens for ``i = 0``), all sets distinct within a level; a symbol may have several parents,
  so the structure is a layered DAG rather than a tree;
* a sequence: a class label ``y`` (the top-level symbol), drawn uniformly; its descendants
  are switched on level by level (deterministically: no noise beyond the label); the leaf
  tokens that are on are written in increasing order, left-padded to ``seq_len`` (``T``).

Unlike the HBLT of :mod:`joma_lib.theory.latent_tree` nothing here is random once the label is drawn:
the only question for a network is which combinations of tokens form which latent.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb, prod

import numpy as np

from joma_lib.base.validation import check_int


@dataclass(frozen=True)
class HierarchySample:
    """One batch: token sequences, their labels and which latent symbols are on."""

    tokens: np.ndarray  # (n, seq_len) int64, left-padded with the padding id
    labels: np.ndarray  # (n,) int64, the class (top-level symbol)
    active: tuple[np.ndarray, ...]  # active[i]: (n, size of level i) bool, for levels 0..J-1


class CombinationHierarchy:
    """A random combination hierarchy (see the module docstring); the structure is fixed by ``seed``.

    Args:
        n_vocab: vocabulary size ``M`` including the padding token ``M - 1``.
        seq_len: sequence length ``T``; must hold the largest leaf set ``prod(n_combinations)``.
        level_sizes: number of latent symbols of the levels below the classes, bottom first.
        n_class: number of classes (symbols of the top level).
        n_combinations: children per symbol, one per level (``len(level_sizes) + 1`` values) or one int for all.
        seed: seed of the random structure.
    """

    def __init__(self, n_vocab: int = 100, seq_len: int = 30, level_sizes: tuple[int, ...] = (10, 20),
                 n_class: int = 20, n_combinations: int | tuple[int, ...] = 2, seed: int = 0) -> None:
        self.n_vocab = check_int("n_vocab", n_vocab, 3, 100_000)
        self.seq_len = check_int("seq_len", seq_len, 1, 10_000)
        self.n_class = check_int("n_class", n_class, 2, 100_000)
        if isinstance(level_sizes, (int, np.integer)) or len(level_sizes) < 1:
            raise ValueError(f"level_sizes must be a non-empty sequence of integers, got {level_sizes!r}")
        sizes = tuple(check_int(f"level_sizes[{i}]", s, 1, 100_000) for i, s in enumerate(level_sizes))
        n_levels = len(sizes) + 1
        if isinstance(n_combinations, (int, np.integer)):
            n_combinations = (int(n_combinations),) * n_levels
        if len(n_combinations) != n_levels:
            raise ValueError(f"n_combinations must be one int or {n_levels} ints (one per level), "
                             f"got {n_combinations!r}")
        self.n_combinations = tuple(check_int(f"n_combinations[{i}]", p, 1, 64)
                                    for i, p in enumerate(n_combinations))
        self.level_sizes = sizes + (self.n_class,)
        below_sizes = (self.n_vocab - 1,) + self.level_sizes[:-1]
        for i, (size, below, p) in enumerate(zip(self.level_sizes, below_sizes, self.n_combinations)):
            if p > below or comb(below, p) < size:
                raise ValueError(f"level {i}: cannot draw {size} distinct sets of n_combinations[{i}]={p} "
                                 f"out of {below} symbols; use fewer symbols or a larger level below")
        if prod(self.n_combinations) > self.seq_len:
            raise ValueError(f"seq_len must be >= prod(n_combinations) = {prod(self.n_combinations)} "
                             f"(the largest leaf set), got {self.seq_len}")
        self.seed = check_int("seed", seed, 0)
        rng = np.random.default_rng(self.seed)
        self.children = tuple(_distinct_subsets(rng, below, p, size)
                              for size, below, p in zip(self.level_sizes, below_sizes, self.n_combinations))

    @property
    def pad(self) -> int:
        """The padding token id ``M - 1``."""
        return self.n_vocab - 1

    def _incidence(self, i: int) -> np.ndarray:
        """``A[a, c] = 1`` when symbol ``a`` of level ``i`` has child ``c`` of the level below."""
        below = self.n_vocab - 1 if i == 0 else self.level_sizes[i - 1]
        A = np.zeros((self.level_sizes[i], below), dtype=bool)
        np.put_along_axis(A, self.children[i], True, axis=1)
        return A

    def sample(self, n: int, rng: np.random.Generator) -> HierarchySample:
        """Draw ``n`` sequences: label, top-down activation, sorted left-padded leaves."""
        n = check_int("n", n, 1, 10**7)
        return self.of_labels(rng.integers(self.n_class, size=n))

    def of_labels(self, labels: np.ndarray) -> HierarchySample:
        """The sequences of the given class labels (integers in ``[0, n_class)``): each row is a function of its
        label alone (no randomness)."""
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.dtype.kind not in "iu" or np.any(labels < 0) or np.any(labels >= self.n_class):
            raise ValueError(f"labels must be a 1-D array of integer class labels in [0, {self.n_class - 1}], got "
                             f"{labels!r}")
        n = labels.size
        on = np.eye(self.n_class, dtype=bool)[labels]
        active = [on]
        for i in range(len(self.level_sizes) - 1, -1, -1):
            on = (on.astype(np.int64) @ self._incidence(i).astype(np.int64)) > 0
            active.insert(0, on)
        leaves, latents = active[0], tuple(active[1:])
        ids = np.where(leaves, np.arange(self.n_vocab - 1), -1)
        ids = np.sort(ids, axis=1)[:, -self.seq_len:]  # off tokens (-1) sort first: left padding
        if ids.shape[1] < self.seq_len:
            ids = np.concatenate([np.full((n, self.seq_len - ids.shape[1]), -1), ids], axis=1)
        tokens = np.where(ids < 0, self.pad, ids).astype(np.int64)
        return HierarchySample(tokens=tokens, labels=labels.astype(np.int64), active=latents)


def _distinct_subsets(rng: np.random.Generator, n_items: int, size: int, count: int) -> np.ndarray:
    """``count`` distinct sorted subsets of ``size`` items out of ``n_items``, as rows of an int array."""
    seen: set[tuple[int, ...]] = set()
    rows: list[tuple[int, ...]] = []
    while len(rows) < count:
        subset = tuple(sorted(int(i) for i in rng.choice(n_items, size=size, replace=False)))
        if subset not in seen:
            seen.add(subset)
            rows.append(subset)
    return np.asarray(rows, dtype=np.int64)
