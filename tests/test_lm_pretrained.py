"""Pretrained-model loading (joma_lib.lm.pretrained) for the embedding check (book/audit.md), offline."""


import numpy as np
import pytest

from joma_lib.base.io import InputUnavailableError
from joma_lib.lm.data import _package_dir
from joma_lib.lm.pretrained import (
    SOURCES,
    hidden_state_cosines,
    hub_available,
    load_pretrained,
    token_embedding_cosines,
)


@pytest.fixture(scope="module")
def minilm():
    return load_pretrained("minilm-l6")


def test_packaged_encoder_loads_offline_and_has_its_known_shape(minilm):
    assert type(minilm.model).__name__ == "BertModel"
    assert minilm.model.get_input_embeddings().weight.shape == (30522, 384)
    assert load_pretrained("minilm-l6") is minilm  # loaded once per process


def test_token_embedding_cosines_are_pairwise_and_bounded(minilm):
    cos = token_embedding_cosines(minilm.model, n_tokens=300, seed=1)
    assert cos.shape == (300 * 299 // 2,)
    assert np.all((cos >= 0) & (cos <= 1 + 1e-6))
    centred = token_embedding_cosines(minilm.model, n_tokens=300, seed=1, centre=True)
    assert not np.allclose(cos, centred)


def test_hidden_state_cosines_cover_every_layer(minilm):
    texts = ["The cat sat on the mat while the dog slept.", "Paris is the capital and largest city of France."]
    within, across = hidden_state_cosines(minilm, texts, max_tokens=32)
    assert len(within) == 7 and across.shape == (6,)  # embedding output + 6 layers
    assert all(w.ndim == 1 and w.size > 10 and np.all(w <= 1 + 1e-6) for w in within)
    assert np.all(np.abs(across) <= 1 + 1e-6)
    with pytest.raises(ValueError, match="texts"):
        hidden_state_cosines(minilm, [])


def test_packaged_gguf_model_is_where_the_loader_looks():
    source = SOURCES["smollm2-135m"]
    path = _package_dir(source.package) / source.gguf_file
    assert path.is_file() and path.stat().st_size > 90e6


def test_hub_models_fail_fast_offline(monkeypatch, no_network):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not hub_available()
    for name in ("pythia-70m", "opt-125m"):
        with pytest.raises(InputUnavailableError, match="offline"):  # at once: no connection is even tried
            load_pretrained(name)


def test_unknown_model_is_rejected():
    with pytest.raises(ValueError, match="name must be one of"):
        load_pretrained("gpt-5")
