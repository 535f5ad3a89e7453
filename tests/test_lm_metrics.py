"""The metrics measured on the language model (joma_lib.lm.metrics): attention entropy, stable rank, evaluation."""

import math

import pytest
import torch

from joma_lib.lm.data import batchify
from joma_lib.lm.metrics import evaluate, mean_attention_entropy, stable_rank, uniform_causal_entropy
from joma_lib.lm.model import TransformerLM

torch.set_num_threads(1)


def test_entropy_of_uniform_causal_and_one_hot_attention():
    t = 35
    uniform = torch.tril(torch.ones(t, t))
    uniform = uniform / uniform.sum(-1, keepdim=True)
    assert float(mean_attention_entropy(uniform)) == pytest.approx(uniform_causal_entropy(t), abs=1e-5)
    assert uniform_causal_entropy(t) == pytest.approx(2.632, abs=1e-3)
    one_hot = torch.eye(t)[torch.randint(0, t, (t,))]
    assert float(mean_attention_entropy(one_hot)) == pytest.approx(0.0, abs=1e-6)
    batch = torch.stack([uniform, one_hot])  # the mean runs over sequences and query rows
    assert float(mean_attention_entropy(batch)) == pytest.approx(uniform_causal_entropy(t) / 2, abs=1e-5)



def test_entropy_sums_over_the_keys_of_each_query():
    """A map of 2 queries over 4 keys, one uniform row and one one-hot row: ln(4) / 2. (Summed over the queries
    instead, a square map gives the same mean; this one does not.)"""
    attn = torch.tensor([[[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]]], dtype=torch.float64)  # [map, query, key]
    assert float(mean_attention_entropy(attn)) == pytest.approx(math.log(4.0) / 2, abs=1e-6)


def test_stable_rank_of_known_spectra():
    q1, _ = torch.linalg.qr(torch.randn(20, 20, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))
    for r in (1, 3, 8):
        s = torch.zeros(20, 8, dtype=torch.float64)
        s[range(r), range(r)] = 2.5
        assert stable_rank(q1 @ s @ q2) == pytest.approx(r, rel=1e-10)
    assert stable_rank(torch.diag(torch.tensor([1.0, 0.1]))) == pytest.approx(1.01, rel=1e-6)
    assert stable_rank(torch.diag(torch.tensor([3.0, 2.0, 1.0]))) == pytest.approx(14 / 9, rel=1e-6)
    with pytest.raises(ValueError, match="zero matrix"):
        stable_rank(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="matrix"):
        stable_rank(torch.ones(3))


def test_evaluate_matches_a_direct_computation():
    torch.manual_seed(0)
    model = TransformerLM(50, 1, d=16, d_ff=16)
    streams = batchify(torch.randint(0, 50, (10 * 31,)), 10)
    loss, entropy = evaluate(model, streams, seq_len=10)  # chunks of 10, 10, 10
    assert model.training  # evaluate restores the mode
    model.eval()
    with torch.no_grad():
        parts = [model(streams[:, i:i + 10], return_attention=True) for i in (0, 10, 20)]
    ce = [torch.nn.functional.cross_entropy(lg.reshape(-1, 50), streams[:, i + 1:i + 11].reshape(-1))
          for (lg, _), i in zip(parts, (0, 10, 20))]
    assert loss == pytest.approx(float(sum(ce) / 3), rel=1e-5)
    assert entropy[0] == pytest.approx(float(sum(mean_attention_entropy(m[0]) for _, m in parts) / 3), rel=1e-5)
    assert 0 < entropy[0] <= uniform_causal_entropy(10) + 1e-6
