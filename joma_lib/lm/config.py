"""Settings of one language-model run (:class:`RunConfig`) and of a sweep of them (:func:`sweep_configs`).

A run is one (corpus, depth, lr, seed); its defaults are the paper's (Figs. 6 and 8). Its name is its
folder's (:mod:`joma_lib.lm.runs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from joma_lib.lm.data import CORPORA
from joma_lib.base.precision import PRECISION_CHOICES
from joma_lib.base.validation import check_choice, check_float, check_int

ADAM_RESET = ("epoch", "never")
#: the word vocabulary of WikiText-2's token files (the authors' tokenizer keeps fewer words, about 28,782 by our
#: reading of their code): the read-out size of the throw-away model that times a config without ``max_vocab``
#: (precision ``auto``), and the cap of the paper-scale runs on the offline stand-in (``--max-vocab 33278``)
WIKITEXT2_VOCAB = 33_278
#: ``paper``: the authors' post-LN model (:class:`~joma_lib.lm.model.TransformerLM`); ``gptneox``: Pythia's architecture
#: (:class:`~joma_lib.lm.pythia.NeoXLM`, Fig. 7)
ARCHS = ("paper", "gptneox")

#: CPU threads of every run unless told otherwise: results depend on the thread count, never on ``--jobs``.
DEFAULT_THREADS = 1


@dataclass(frozen=True)
class RunConfig:
    """Settings of one training run; the defaults are the paper's (WikiText-2, lr 1e-4, 20 epochs).

    ``adam_reset="epoch"`` rebuilds Adam at every epoch, as the authors' script did (``"never"`` keeps
    one optimiser for the whole run); ``eval_chunks=None`` evaluates on the whole validation split;
    ``precision="bf16"`` trains in bf16 mixed precision (:func:`~joma_lib.lm.step.train_step`), the checkpoint
    measurements stay fp32; ``"auto"`` takes the faster of the two on this machine (:mod:`joma_lib.base.precision`; the
    precision used is recorded in the checkpoint and the result, and a resume keeps it); ``log_checkpoints`` adds the
    powers of two below ``eval_interval`` to the checkpoints (Pythia's schedule when ``eval_interval=1000``);
    ``n_heads`` is used by ``arch="gptneox"`` only.
    """

    data: str = "wikitext2"
    n_layers: int = 1
    lr: float = 1e-4
    seed: int = 1
    steps: int = 58_000
    eval_interval: int = 1000
    eval_chunks: int | None = None
    seq_len: int = 35
    batch_size: int = 20
    eval_batch_size: int = 10
    max_vocab: int | None = None
    d: int = 200
    d_ff: int = 200
    dropout: float = 0.2
    clip: float = 0.5
    adam_reset: str = "epoch"
    data_seed: int = 0
    precision: str = "fp32"
    arch: str = "paper"
    n_heads: int = 1
    log_checkpoints: bool = False

    def validated(self) -> RunConfig:
        """Self, after checking every field (ValueError naming the field otherwise)."""
        check_choice("data", self.data, CORPORA)
        check_int("n_layers", self.n_layers, 1, 64)
        check_float("lr", self.lr, 0, 1, low_open=True)
        check_int("seed", self.seed, 0)
        check_int("steps", self.steps, 1)
        check_int("eval_interval", self.eval_interval, 1, self.steps)
        if self.eval_chunks is not None:
            check_int("eval_chunks", self.eval_chunks, 1)
        check_int("seq_len", self.seq_len, 1, 5000)
        check_int("batch_size", self.batch_size, 1)
        check_int("eval_batch_size", self.eval_batch_size, 1)
        if self.max_vocab is not None:
            check_int("max_vocab", self.max_vocab, 2)
        check_int("d", self.d, 1)
        check_int("d_ff", self.d_ff, 1)
        check_float("dropout", self.dropout, 0, 1, high_open=True)
        check_float("clip", self.clip, 0, low_open=True)
        check_choice("adam_reset", self.adam_reset, ADAM_RESET)
        check_int("data_seed", self.data_seed, 0)
        check_choice("precision", self.precision, PRECISION_CHOICES)
        check_choice("arch", self.arch, ARCHS)
        check_int("n_heads", self.n_heads, 1, self.d)
        if self.arch == "paper" and self.n_heads != 1:
            raise ValueError(f"n_heads must be 1 for arch='paper' (one head, as the paper), got {self.n_heads}")
        if self.arch == "gptneox" and self.d % self.n_heads:
            raise ValueError(f"d ({self.d}) must be a multiple of n_heads ({self.n_heads})")
        if not isinstance(self.log_checkpoints, bool):
            raise TypeError(f"log_checkpoints must be a bool, got {type(self.log_checkpoints).__name__}")
        return self

    @property
    def name(self) -> str:
        """Directory name of the run (prefixed by a non-default architecture, suffixed ``_noreset`` and by a
        non-default precision)."""
        arch = "" if self.arch == "paper" else f"{self.arch}_"
        reset = "" if self.adam_reset == "epoch" else "_noreset"
        precision = "" if self.precision == "fp32" else f"_{self.precision}"
        return f"{arch}{self.data}_L{self.n_layers}_lr{self.lr:g}_s{self.seed}{reset}{precision}"

    def checkpoints(self) -> np.ndarray:
        """Steps at which the metrics are recorded: 0, eval_interval, 2*eval_interval, ..., and ``steps``
        (and 1, 2, 4, ... below ``eval_interval`` with ``log_checkpoints``)."""
        marks = np.append(np.arange(0, self.steps + 1, self.eval_interval), self.steps)
        if self.log_checkpoints:
            marks = np.append(marks, [2**k for k in range(self.eval_interval.bit_length())
                                      if 2**k < min(self.eval_interval, self.steps)])
        return np.unique(marks)


def same_config(saved: Mapping[str, Any], cfg: RunConfig) -> bool:
    """Whether a stored config is ``cfg``; fields added to :class:`RunConfig` since it was stored count as
    their defaults (the behaviour the stored run had)."""
    return {**asdict(RunConfig()), **saved} == asdict(cfg)


def sweep_configs(base: RunConfig, layers: Sequence[int], lrs: Sequence[float], seeds: Sequence[int]
                  ) -> list[RunConfig]:
    """One config per (layers, lr, seed), in that nesting order; each axis must hold at least one value."""
    for name, axis in (("layers", layers), ("lrs", lrs), ("seeds", seeds)):
        if isinstance(axis, (str, bytes)) or not isinstance(axis, Sequence) or len(axis) == 0:
            raise ValueError(f"{name} must be a non-empty list, got {axis!r}")
    try:
        return [replace(base, n_layers=n, lr=lr, seed=s).validated() for n in layers for lr in lrs for s in seeds]
    except (TypeError, ValueError) as err:
        raise type(err)(f"{err} (in the sweep: layers={list(layers)}, lrs={list(lrs)}, seeds={list(seeds)})") from None
