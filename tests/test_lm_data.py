"""Corpora, tokenizer, vocabulary and batching of the language-model experiments."""

import os

import pytest
import torch

from joma_lib.lm import data as lm_data
from joma_lib.lm.data import (
    UNK,
    CorpusUnavailable,
    Vocab,
    batchify,
    get_chunk,
    load_lm_data,
    load_splits,
    n_chunks,
    split_documents,
    tokenize,
)


def test_tokenize_splits_punctuation_and_drops_quotes_and_colons():
    assert tokenize('The "Big" cat, (really)! Is it? Yes; no: 3.5 <br />end') == [
        "the", "big", "cat", ",", "(", "really", ")", "!", "is", "it", "?", "yes", "no", "3", ".", "5", "end"]
    assert tokenize("Don't") == ["don", "'", "t"]
    assert tokenize("   ") == []


def test_vocab_orders_by_frequency_then_alphabet_with_unk_first():
    vocab = Vocab.build(["b a b", "c a b", "<unk> d"])
    assert vocab.itos == (UNK, "b", "a", "c", "d")
    assert vocab.encode(["b zzz a", "", "d"]).tolist() == [1, 0, 2, 4]
    capped = Vocab.build(["b a b", "c a b", "d"], max_size=3)
    assert capped.itos == (UNK, "b", "a")
    assert capped.encode(["c d b"]).tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match="max_size"):
        Vocab.build(["a"], max_size=1)


def test_batchify_streams_are_contiguous_and_chunks_shift_by_one():
    ids = torch.arange(103)
    streams = batchify(ids, 4)
    assert streams.shape == (4, 25)
    assert streams[1].tolist() == list(range(25, 50))
    assert n_chunks(streams, 10) == 3  # 24 usable inputs: 10 + 10 + 4
    x, y = get_chunk(streams, 2, 10)
    assert x.shape == y.shape == (4, 4)
    assert torch.equal(y, x + 1)
    with pytest.raises(ValueError, match="index"):
        get_chunk(streams, 3, 10)
    with pytest.raises(ValueError, match="n_streams"):
        batchify(ids, 0)
    with pytest.raises(ValueError, match="at least 2 tokens per stream"):
        batchify(torch.arange(5), 4)


def test_seeded_document_split_is_a_partition_and_reproducible():
    docs = [f"doc {i}" for i in range(100)]
    train, valid, test = split_documents(docs, seed=3)
    assert (len(train), len(valid), len(test)) == (90, 5, 5)
    assert sorted(train + valid + test) == sorted(docs)
    assert split_documents(docs, seed=3) == (train, valid, test)
    assert split_documents(docs, seed=4) != (train, valid, test)


def test_offline_corpora_load_with_their_sources():
    wiki, note = load_splits("wikivital")
    assert "CC BY-SA" in note and len(wiki.train) > 8000 and len(wiki.valid) > 400
    assert not set(wiki.train) & set(wiki.valid)
    ptb, _ = load_splits("ptb")
    assert len(ptb.valid) > 3000 and "licence unknown" in ptb.source
    lm = load_lm_data("ptb", n_streams=20, eval_streams=10, max_vocab=500, max_train_fraction=0.05)
    assert len(lm.vocab) == 500 and lm.train.shape[0] == 20 and lm.valid.shape[0] == 10
    assert int(lm.train.max()) < 500 and int(lm.valid.min()) >= 0


def test_wikitext_offline_fails_fast_with_a_clear_message(monkeypatch, no_network):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CorpusUnavailable, match="wikitext2 needs"):  # at once: no connection is even tried
        load_splits("wikitext2", fallback=False)
    splits, note = load_splits("wikitext103")
    assert splits.name == "wikivital"
    assert "wikitext103 unavailable" in note and "stand-in wikivital" in note


def test_unreachable_hub_is_detected_without_retries(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(lm_data.importlib.util, "find_spec", lambda name: object())  # pretend datasets exists
    monkeypatch.setattr(lm_data, "_hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(CorpusUnavailable, match="not reachable"):
        lm_data.wikitext_splits("wikitext2")
    assert os.environ.get("HF_HUB_OFFLINE") is None


def test_bad_corpus_names_are_rejected():
    with pytest.raises(ValueError, match="name must be one of"):
        load_splits("wikitext5")
    with pytest.raises(ValueError, match="max_train_fraction"):
        load_lm_data("ptb", max_train_fraction=0.0)
