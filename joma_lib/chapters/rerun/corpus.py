"""The size of the offline stand-in corpus the re-run trains on (Wikipedia vital-article leads), read from the
corpus itself rather than typed on the page."""

from __future__ import annotations

from functools import cache

from joma_lib.lm.config import RunConfig
from joma_lib.lm.data import load_lm_data, n_chunks


@cache
def standin_corpus(name: str = "wikivital") -> dict[str, int]:
    """Of the training split of corpus ``name`` (offline, no fallback), read as the runs read it: ``train_tokens``
    (the tokens of the 20 training streams), ``epoch_steps`` (the steps of one pass over them, windows of 35
    tokens) and ``vocab`` (its whole vocabulary, ``<unk>`` included, before any cap)."""
    cfg = RunConfig()
    data = load_lm_data(name, n_streams=cfg.batch_size, eval_streams=cfg.eval_batch_size, fallback=False)
    return {"train_tokens": int(data.train.numel()), "epoch_steps": n_chunks(data.train, cfg.seq_len),
            "vocab": len(data.vocab)}
