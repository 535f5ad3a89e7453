"""Fig. 7 plumbing: Pythia's checkpoint schedule, loading per-step checkpoints, our Pythia-architecture model."""

import time
from dataclasses import replace

import numpy as np
import pytest
import torch

from joma_lib.base.io import InputUnavailableError
from joma_lib.lm.data import load_lm_data
from joma_lib.lm.metrics import stable_rank, uniform_causal_entropy
from joma_lib.lm.pythia import PythiaUnavailable, checkpoint_stable_ranks, fig7_steps, neox_config, pythia_steps
from joma_lib.lm.config import RunConfig
from joma_lib.lm.step import train_run

transformers = pytest.importorskip("transformers")
torch.set_num_threads(1)


def test_pythia_schedule_is_the_public_one():
    steps = pythia_steps()
    assert steps[:12] == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000]
    assert steps[-1] == 143_000 and len(steps) == 154  # 11 log-spaced + 143 every 1000
    assert pythia_steps(2500, every=500) == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 500, 1000, 1500, 2000, 2500]


def test_fig7_reads_every_checkpoint_below_10000_then_every_8000th():
    steps = fig7_steps()
    assert [s for s in steps if s < 10_000] == [s for s in pythia_steps() if s < 10_000]  # 1,000 to 9,000 included
    assert {1000, 2000, 3000} <= set(steps) and steps[-1] == 143_000
    assert [s for s in steps if s >= 10_000] == [*range(10_000, 143_000, 8_000), 143_000]
    assert fig7_steps(5000, dense_below=2000, sparse_every=2000) == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000,
                                                                   2000, 4000, 5000]


def _known_spectrum(rows: int, cols: int, singular: list[float], seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(rows, rows, generator=gen))
    v, _ = torch.linalg.qr(torch.randn(cols, cols, generator=gen))
    s = torch.zeros(rows, cols)
    s[range(len(singular)), range(len(singular))] = torch.tensor(singular)
    return u @ s @ v.T


def test_stable_ranks_of_saved_step_checkpoints(tmp_path):
    """Checkpoints saved as Pythia's (one save_pretrained folder per step) give the stable rank of each
    layer's dense_h_to_4h: known spectra in layer 0, and the directly computed value in layer 1."""
    config = neox_config(vocab_size=50, n_layers=2, d=16, n_heads=2, d_ff=64)
    spectra = {0: [1.0] * 16, 1: [2.0, 1.0, 1.0], 4: [1.0, 0.5]}  # stable ranks 16, 1.5, 1.25
    direct = {}
    for step, singular in spectra.items():
        torch.manual_seed(step)
        model = transformers.GPTNeoXForCausalLM(config)
        with torch.no_grad():
            model.gpt_neox.layers[0].mlp.dense_h_to_4h.weight.copy_(_known_spectrum(64, 16, singular, step))
        direct[step] = stable_rank(model.gpt_neox.layers[1].mlp.dense_h_to_4h.weight)
        model.save_pretrained(tmp_path / f"step{step}")
    out = checkpoint_stable_ranks(tmp_path, [0, 1, 4], progress=False)
    assert out["step"].tolist() == [0, 1, 4] and out["stable_rank"].shape == (3, 2)
    np.testing.assert_allclose(out["stable_rank"][:, 0], [16.0, 1.5, 1.25], rtol=1e-5)
    np.testing.assert_allclose(out["stable_rank"][:, 1], [direct[s] for s in (0, 1, 4)], rtol=1e-6)
    with pytest.raises(ValueError, match="step2"):
        checkpoint_stable_ranks(tmp_path, [2], progress=False)


def test_hub_checkpoints_fail_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(PythiaUnavailable, match="HF_HUB_OFFLINE") as err:
        checkpoint_stable_ranks("EleutherAI/pythia-70m", [0, 1000], progress=False)
    assert isinstance(err.value, InputUnavailableError)  # the book falls back to its stand-in
    assert time.perf_counter() - start < 5


def test_bad_model_settings_are_refused():
    with pytest.raises(ValueError, match="multiple of n_heads"):
        neox_config(50, 2, d=10, n_heads=3, d_ff=8)


def test_runner_trains_the_pythia_architecture_on_the_log_schedule(tmp_path):
    cfg = RunConfig(data="ptb", arch="gptneox", n_layers=2, n_heads=2, d=16, d_ff=64, dropout=0.0, lr=3e-3,
                    seed=3, steps=12, eval_interval=8, log_checkpoints=True, eval_chunks=2, seq_len=10,
                    batch_size=4, eval_batch_size=3, max_vocab=200, adam_reset="never")
    assert cfg.checkpoints().tolist() == [0, 1, 2, 4, 8, 12]
    assert replace(cfg, log_checkpoints=False).checkpoints().tolist() == [0, 8, 12]
    data = load_lm_data("ptb", 4, 3, 200, max_train_fraction=0.01)
    result = train_run(cfg, tmp_path, device="cpu", progress=False, data=data)
    assert result["minibatch"].tolist() == [0, 1, 2, 4, 8, 12]
    assert result["stable_rank"].shape == result["attn_entropy"].shape == (6, 2)
    assert np.all((result["stable_rank"] >= 1) & (result["stable_rank"] <= 16))
    assert np.all(result["attn_entropy"] <= uniform_causal_entropy(10) + 1e-6)
    assert result["val_loss"][-1] < result["val_loss"][0]
    assert (tmp_path / "gptneox_ptb_L2_lr0.003_s3_noreset" / "result.npz").is_file()
