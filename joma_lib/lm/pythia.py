"""Pythia checkpoints and a small Pythia-architecture model (paper Fig. 7).

Fig. 7 of the paper follows the stable rank ``||W||_F^2 / ||W||_2^2`` of the lower MLP matrix
(in GPT-NeoX/Pythia: ``mlp.dense_h_to_4h``) of pre-trained models over their training
checkpoints. Two sources of such checkpoints:

* **online**: EleutherAI's Pythia models on the Hugging Face hub, one git revision per
  training step (``revision="step1000"``), read with ``transformers``'
  ``GPTNeoXForCausalLM`` (:func:`checkpoint_stable_ranks` with a hub id such as
  ``"EleutherAI/pythia-70m"``);
* **offline**: a folder holding one ``save_pretrained`` folder per step (``step0/``,
  ``step1/``, ...), the same format (the tests build one), or our own small model of the
  same architecture (:class:`NeoXLM`) trained by :mod:`joma_lib.lm.step` with
  ``arch="gptneox"``, measured on Pythia's checkpoint schedule (:func:`pythia_steps`; Fig. 7's row reads the
  checkpoints of :func:`fig7_steps`).

``transformers`` is imported only when a model is built or loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from joma_lib.base.io import InputUnavailableError
from joma_lib.lm.metrics import stable_rank
from joma_lib.base.startup import env_flag
from joma_lib.base.validation import check_float, check_int

if TYPE_CHECKING:
    from transformers import GPTNeoXForCausalLM

#: the Pythia suite's public checkpoints: step 0, 1, 2, 4, ..., 512, then every 1000 up to 143000
PYTHIA_LAST_STEP = 143_000
PYTHIA_MODEL = "EleutherAI/pythia-70m"


class PythiaUnavailable(InputUnavailableError):
    """Pythia checkpoints cannot be fetched here (offline mode, no network, or no ``transformers``)."""


def pythia_steps(last: int = PYTHIA_LAST_STEP, every: int = 1000) -> list[int]:
    """Pythia's checkpoint schedule up to ``last``: 0 and the powers of two below ``every``, then multiples of it."""
    last, every = check_int("last", last, 0), check_int("every", every, 1)
    early = [0] + [2**k for k in range(every.bit_length()) if 2**k < every]
    return sorted({s for s in early if s <= last} | set(range(every, last + 1, every)))


FIG7_DENSE_BELOW = 10_000
"""Below this step Fig. 7's row reads every public checkpoint: the drop and its minimum fall there (our stand-in's
minima are at steps 1,000-3,000)."""
FIG7_SPARSE_EVERY = 8_000
"""From :data:`FIG7_DENSE_BELOW` on, the row reads one checkpoint in this many steps (and the last one)."""


def fig7_steps(last: int = PYTHIA_LAST_STEP, dense_below: int = FIG7_DENSE_BELOW,
               sparse_every: int = FIG7_SPARSE_EVERY) -> list[int]:
    """The checkpoints of :func:`pythia_steps` that Fig. 7's row reads: all of them below ``dense_below`` (the whole
    log-spaced start and every 1,000 steps), then every ``sparse_every`` steps from ``dense_below``, and ``last``."""
    dense_below, sparse_every = check_int("dense_below", dense_below, 1), check_int("sparse_every", sparse_every, 1)
    steps = pythia_steps(last)
    return [s for s in steps if s < dense_below or (s - dense_below) % sparse_every == 0 or s == steps[-1]]


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise PythiaUnavailable("GPT-NeoX models need the `transformers` package "
                                "(pip install transformers==5.23.0)") from None
    return transformers


def neox_config(vocab_size: int, n_layers: int, d: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                max_len: int = 2048) -> Any:
    """A ``GPTNeoXConfig`` with Pythia's architecture choices at another size.

    Pythia: rotary embeddings on a quarter of each head, parallel attention and MLP branches,
    GeLU MLP, untied input and output embeddings, pre-LN.
    """
    check_int("n_heads", n_heads, 1)
    if check_int("d", d, 1) % n_heads:
        raise ValueError(f"d ({d}) must be a multiple of n_heads ({n_heads})")
    return _transformers().GPTNeoXConfig(
        vocab_size=check_int("vocab_size", vocab_size, 2), hidden_size=d,
        num_hidden_layers=check_int("n_layers", n_layers, 1, 64), num_attention_heads=n_heads,
        intermediate_size=check_int("d_ff", d_ff, 1), hidden_act="gelu", rotary_pct=0.25,
        max_position_embeddings=check_int("max_len", max_len, 1), use_parallel_residual=True,
        attention_dropout=check_float("dropout", dropout, 0, 1, high_open=True), hidden_dropout=dropout,
        tie_word_embeddings=False)


def mlp_input_weights(model: GPTNeoXForCausalLM) -> list[torch.Tensor]:
    """Each layer's lower MLP matrix ``mlp.dense_h_to_4h.weight`` (``[d_ff, d]``), from the first layer up."""
    return [cast(torch.Tensor, layer.get_submodule("mlp.dense_h_to_4h").weight) for layer in model.gpt_neox.layers]


def hub_available() -> None:
    """Raise :class:`PythiaUnavailable` within seconds when the Hugging Face hub cannot be used."""
    from joma_lib.lm.data import _hub_reachable

    _transformers()
    if env_flag("HF_HUB_OFFLINE"):
        raise PythiaUnavailable("Pythia checkpoints come from the Hugging Face hub, but HF_HUB_OFFLINE is set")
    if not _hub_reachable():
        raise PythiaUnavailable("Pythia checkpoints come from the Hugging Face hub, which is not reachable from here")


def load_checkpoint(source: str | Path, step: int) -> GPTNeoXForCausalLM:
    """The model at training step ``step``: ``<source>/step<step>/`` if ``source`` is a folder, else the hub
    repository ``source`` at ``revision="step<step>"`` (:class:`PythiaUnavailable` offline)."""
    transformers = _transformers()
    step = check_int("step", step, 0)
    if Path(source).is_dir():
        folder = Path(source) / f"step{step}"
        if not folder.is_dir():
            raise ValueError(f"no checkpoint folder {folder}")
        return transformers.GPTNeoXForCausalLM.from_pretrained(folder, dtype=torch.float32)
    hub_available()
    try:
        return transformers.GPTNeoXForCausalLM.from_pretrained(str(source), revision=f"step{step}",
                                                               dtype=torch.float32)
    except OSError as err:
        raise PythiaUnavailable(f"loading {source} at revision step{step} failed: {err}") from err


def checkpoint_stable_ranks(source: str | Path = PYTHIA_MODEL, steps: Sequence[int] | None = None,
                            progress: bool = True) -> dict[str, np.ndarray]:
    """Stable rank of every layer's ``dense_h_to_4h`` at each checkpoint (Fig. 7).

    ``source`` is a hub id (default Pythia-70M, online) or a folder of ``step<N>/`` checkpoints.
    Returns ``step [S]`` and ``stable_rank [S, L]``; the default steps are :func:`fig7_steps`.
    """
    from tqdm.auto import tqdm

    steps = fig7_steps() if steps is None else [check_int("step", s, 0) for s in steps]
    if not steps:
        raise ValueError("steps must name at least one checkpoint")
    if not Path(source).is_dir():
        hub_available()
    rows = []
    for step in tqdm(steps, desc=f"{source}", disable=not progress):
        model = load_checkpoint(source, step)
        rows.append([stable_rank(w) for w in mlp_input_weights(model)])
        del model
    return {"step": np.asarray(steps, dtype=np.int64), "stable_rank": np.asarray(rows, dtype=np.float64)}


class NeoXLM(nn.Module):
    """A randomly initialised ``GPTNeoXForCausalLM`` behind the interface the training runner uses.

    ``forward(tokens, return_attention)`` -> logits and (when asked) one head-averaged
    ``[B, T, T]`` attention map per layer (as the authors' entropy statistic averages heads);
    ``loss(tokens, targets)`` for already shifted targets; ``lower_mlp_weights()`` the
    ``dense_h_to_4h`` matrices.
    """

    def __init__(self, vocab_size: int, n_layers: int, d: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                 max_len: int = 2048) -> None:
        super().__init__()
        config = neox_config(vocab_size, n_layers, d, n_heads, d_ff, dropout, max_len)
        self.net = _transformers().GPTNeoXForCausalLM(config)
        self.n_layers = n_layers

    def forward(self, tokens: torch.Tensor, return_attention: bool = False
                ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits ``[B, T, V]`` and, when ``return_attention``, the head-averaged attention maps."""
        if not return_attention:
            return self.net(input_ids=tokens).logits, []
        self.net.set_attn_implementation("eager")
        try:
            out = self.net(input_ids=tokens, output_attentions=True)
        finally:
            self.net.set_attn_implementation("sdpa")
        return out.logits, [a.mean(dim=1) for a in out.attentions]

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Token-mean next-token cross-entropy (nats) of ``targets`` (the inputs shifted by one)."""
        if targets.shape != tokens.shape:
            raise ValueError(f"targets must have the shape of tokens {tuple(tokens.shape)}, got {tuple(targets.shape)}")
        logits = self.net(input_ids=tokens).logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def lower_mlp_weights(self) -> list[torch.Tensor]:
        """``dense_h_to_4h.weight`` of every layer, the matrices of Fig. 7."""
        return mlp_input_weights(self.net)
