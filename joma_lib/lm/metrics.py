"""What the paper measures along training (Figs. 6 and 8; Fig. 7 reconstructed): attention entropy, validation loss,
stable rank.

* Attention entropy of one layer: for each causal attention row ``a_q`` (query ``q``,
  keys ``0..q``), ``H(a_q) = -sum_k a_qk log(a_qk + 1e-8)`` in nats, averaged over query
  positions and sequences (the authors' statistic; not normalised by ``log(q+1)``, so
  uniform attention over 35 positions gives ``mean_q ln q = 2.632``).
* Validation loss: token-averaged next-token cross-entropy (nats) over the evaluated chunks.
* Stable rank ``srank(W) = ||W||_F^2 / ||W||_2^2`` of each layer's lower MLP weight ``W_1``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Protocol

import torch
import torch.nn.functional as F

from joma_lib.lm.data import get_chunk, n_chunks
from joma_lib.base.validation import check_int

ENTROPY_EPS = 1e-8


class LanguageModel(Protocol):
    """What :func:`evaluate` needs of a model (:class:`~joma_lib.lm.model.TransformerLM`, ``NeoXLM``)."""

    n_layers: int
    training: bool

    def __call__(self, tokens: torch.Tensor, return_attention: bool = False
                 ) -> tuple[torch.Tensor, list[torch.Tensor]]: ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...

    def train(self, mode: bool = True) -> object: ...

    def eval(self) -> object: ...


def mean_attention_entropy(attn: torch.Tensor) -> torch.Tensor:
    """Mean row entropy (nats) of attention maps ``[..., T_query, T_key]`` whose rows sum to 1 (paper Figs. 6, 8).

    One number per map: the mean over every query row, with ``ENTROPY_EPS`` inside the logarithm as in the
    authors' training script. The per-row, exact (``0 ln 0 = 0``) entropy is
    :func:`joma_lib.theory.softmax_dynamics.row_entropy`.
    """
    attn = check_tensor("attn", attn)
    if attn.ndim < 2 or attn.numel() == 0:
        raise ValueError(f"attn must be non-empty with at least 2 dimensions [query, key], "
                         f"got shape {tuple(attn.shape)}")
    low, high = float(attn.min()), float(attn.max())
    if low < 0.0 or high > 1.0:
        raise ValueError(f"attn must hold attention weights in [0, 1], got values in [{low:g}, {high:g}]")
    return -(attn * torch.log(attn + ENTROPY_EPS)).sum(dim=-1).mean()


def uniform_causal_entropy(t: int) -> float:
    """Entropy of uniform causal attention over ``t`` positions (at most 2^20):
    ``(1/t) sum_{q=1..t} ln q = ln(t!) / t``."""
    t = check_int("t", t, 1, 1 << 20)
    return math.lgamma(t + 1) / t


def check_tensor(name: str, value: object) -> torch.Tensor:
    """``value`` if it is a floating-point tensor of finite numbers; TypeError/ValueError naming ``name``."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point torch.Tensor, got {type(value).__name__}")
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"{name} must contain only finite numbers, got {value!r}")
    return value


def stable_rank_of_singular_values(s: torch.Tensor) -> torch.Tensor:
    """``sum_i (s_i / s_0)^2`` over the last axis of descending singular values: ``||W||_F^2 / ||W||_2^2`` in ratios,
    so that the squares of a tiny or huge ``W`` neither under- nor overflow."""
    return ((s / s[..., :1]) ** 2).sum(dim=-1)


def stable_rank(w: torch.Tensor) -> float:
    """``||W||_F^2 / ||W||_2^2``: between 1 (rank one) and ``rank(W)`` (all singular values equal)."""
    w = check_tensor("w", w)
    if w.ndim != 2 or w.numel() == 0:
        raise ValueError(f"w must be a non-empty matrix, got shape {tuple(w.shape)}")
    s = torch.linalg.svdvals(w.detach().double())
    if s[0] == 0:
        raise ValueError(f"w must not be the zero matrix (its stable rank is undefined), got {w!r}")
    return float(stable_rank_of_singular_values(s))


@torch.no_grad()
def evaluate(model: LanguageModel, streams: torch.Tensor, seq_len: int, max_chunks: int | None = None
             ) -> tuple[float, list[float]]:
    """Validation loss and per-layer attention entropy over the first ``max_chunks`` chunks (dropout off).

    Both are averaged over all evaluated tokens/query rows (chunks weighted by length).
    """
    total = n_chunks(streams, seq_len)
    count = total if max_chunks is None else min(total, check_int("max_chunks", max_chunks, 1))
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    loss_sum, tokens = 0.0, 0
    entropy_sum = torch.zeros(model.n_layers, dtype=torch.float64)
    for i in range(count):
        x, y = (t.to(device) for t in get_chunk(streams, i, seq_len))
        logits, maps = model(x, return_attention=True)
        loss_sum += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum"))
        tokens += y.numel()
        entropy_sum += torch.stack([mean_attention_entropy(a).double().cpu() * a.shape[0] * a.shape[1] for a in maps])
    model.train(was_training)
    return loss_sum / tokens, (entropy_sum / tokens).tolist()
