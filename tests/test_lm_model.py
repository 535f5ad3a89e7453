"""The paper's language model (joma_lib.lm.model): layers, positions, the causal mask, fused attention and read-out."""

import math

import pytest
import torch

from joma_lib.lm.model import TransformerLM, causal_mask, mask_constants, sinusoidal_positions

torch.set_num_threads(1)


def _model(n_layers: int = 2, vocab: int = 50, seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(vocab, n_layers, d=16, d_ff=16)


def test_layers_start_identical_and_positions_are_sinusoidal():
    model = _model(3)
    first = model.layers[0].state_dict()
    for layer in model.layers[1:]:
        assert all(torch.equal(first[k], v) for k, v in layer.state_dict().items())
    pe = sinusoidal_positions(10, 6)
    assert torch.allclose(pe[3, 0], torch.tensor(math.sin(3.0)))
    assert torch.allclose(pe[3, 5], torch.tensor(math.cos(3.0 / 10000 ** (4 / 6))))
    # parameters: embedding + head + per layer (QKV, out, W1, W2, two LayerNorms)
    d, v = 16, 50
    per_layer = 3 * d * d + 3 * d + d * d + d + 2 * (d * d + d) + 4 * d
    assert sum(p.numel() for p in model.parameters()) == v * d + v * d + v + 3 * per_layer


def test_causal_mask_keeps_the_future_out():
    model = _model().eval()
    x = torch.randint(0, 50, (3, 12))
    y = x.clone()
    y[:, 7:] = torch.randint(0, 50, (3, 5))
    with torch.no_grad():
        for attention in (False, True):
            lx, maps = model(x, return_attention=attention)
            ly, _ = model(y, return_attention=attention)
            assert torch.allclose(lx[:, :7], ly[:, :7], atol=1e-6)
            assert not torch.allclose(lx[:, 7:], ly[:, 7:], atol=1e-3)
    for a in maps:
        assert torch.all(a.triu(diagonal=1) == 0)
        assert torch.allclose(a.sum(-1), torch.ones(3, 12), atol=1e-6)
    assert torch.equal(causal_mask(3), torch.tensor([[0.0, -math.inf, -math.inf], [0, 0, -math.inf], [0, 0, 0]]))


def test_fused_and_materialised_attention_agree_in_value_and_gradient():
    model = _model().eval()
    x = torch.randint(0, 50, (4, 20))
    grads = []
    outs = []
    for attention in (False, True):
        model.zero_grad()
        logits, maps = model(x, return_attention=attention)
        logits.square().mean().backward()
        outs.append(logits.detach())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
        assert len(maps) == (2 if attention else 0)
    assert torch.allclose(outs[0], outs[1], atol=1e-5)
    assert torch.allclose(grads[0], grads[1], atol=1e-5, rtol=1e-4)


def test_bad_model_arguments_are_rejected():
    with pytest.raises(ValueError, match="n_layers"):
        TransformerLM(50, 0)
    with pytest.raises(ValueError, match="dropout"):
        TransformerLM(50, 1, dropout=1.0)
    model = _model(1)
    with pytest.raises(ValueError, match="int64"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="sequence length"):
        TransformerLM(50, 1, d=8, d_ff=8, max_len=4)(torch.zeros(1, 5, dtype=torch.int64))


@pytest.mark.parametrize("upstream", [1.0, 3.0])
def test_fused_read_out_loss_matches_cross_entropy_in_value_and_gradient(upstream):
    model = _model().eval()
    x, y = torch.randint(0, 50, (4, 20)), torch.randint(0, 50, (4, 20))
    grads = []
    losses = []
    for fused in (True, False):
        model.zero_grad()
        if fused:
            loss = model.loss(x, y)
        else:
            logits, _ = model(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 50), y.reshape(-1))
        (upstream * loss).backward()
        losses.append(float(loss.detach()))
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    assert torch.allclose(grads[0], grads[1], atol=1e-6, rtol=1e-4)
    with pytest.raises(ValueError, match="targets"):
        model.loss(x, y[:, :5])


@pytest.mark.parametrize("branch, align", [(torch.float32, None), (torch.float64, (1, 1)), (torch.float64, (64, 8))])
def test_the_read_out_of_a_stack_at_once_is_each_runs_read_out(branch, align):
    """The fused read-out with a leading run axis (a stack's runs at once, as a GPU trains them) gives each run the
    loss and gradients of its own read-out, under an upstream gradient that differs by run. In float64, both code
    paths: the full-precision one (``dtype`` float32) and the mixed-precision one run in float64 (``dtype`` float64:
    its padding, its blocks of rows, which one run's read-out on a CPU forms and the stack's does not, its
    indexing), so only the order of the products' sums can differ: 1e-12 of the largest entry."""
    from joma_lib.lm.model import LinearCrossEntropy

    gen = torch.Generator().manual_seed(1)
    runs, n, d, vocab = 3, 300, 24, 101  # 300 rows: two blocks of one run's logits on a CPU
    h = torch.randn(runs, n, d, generator=gen, dtype=torch.float64)
    weight = 0.3 * torch.randn(runs, vocab, d, generator=gen, dtype=torch.float64)
    bias, targets = torch.randn(runs, vocab, generator=gen, dtype=torch.float64), torch.randint(0, vocab, (n,))
    upstream = torch.tensor([0.5, 1.0, 3.0], dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (h, weight, bias)]
    losses = LinearCrossEntropy.apply(*leaves, targets, branch, align)
    assert losses.shape == (runs,)
    (losses * upstream).sum().backward()
    for r in range(runs):
        alone = [t[r].clone().requires_grad_() for t in (h, weight, bias)]
        loss = LinearCrossEntropy.apply(*alone, targets, branch, align)
        (loss * upstream[r]).backward()
        for stacked, single in ((losses[r].detach(), loss.detach()),
                                *((t.grad[r], a.grad) for t, a in zip(leaves, alone, strict=True))):
            assert float((stacked - single).abs().max()) <= 1e-12 * float(single.abs().max()), r


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_the_mask_constants_round_the_scale_as_torch_does(dtype):
    """The dropout scale 1/(1-p) rounded to the activation's dtype in plain Python is torch's rounding, bit for bit,
    and so is the threshold derived from it (the masks are then those of the tensor arithmetic they replace)."""
    int_dtype = {2: torch.int16, 4: torch.int32, 8: torch.int64}[torch.empty(0, dtype=dtype).element_size()]
    for k in range(1, 500):
        p = k / 526
        scale = torch.tensor(1 / (1 - p), dtype=dtype)
        assert mask_constants(p, dtype) == (round(2**15 / float(scale)), int(scale.view(int_dtype))), p


@pytest.mark.bf16
def test_the_bf16_read_out_padded_to_aligned_widths_is_the_read_out_unpadded():
    """On a GPU the bf16 read-out pads the vocabulary (zero rows of W, bias -inf) and [h, 1] (zero columns) to
    aligned widths (``READ_OUT_ALIGN``). The padding adds probability 0 and gradient 0: at the paper's sizes on the
    CPU the loss and db came out bit for bit and dh, dW within 1e-5 of their largest entry (the products' sums,
    over 28,800 terms instead of 28,782, in another order): well inside bf16's 2^-8. Every gradient has its
    unpadded shape."""
    from joma_lib.lm.model import READ_OUT_ALIGN, LinearCrossEntropy

    assert READ_OUT_ALIGN["cuda"] == (64, 8) and "cpu" not in READ_OUT_ALIGN
    gen = torch.Generator().manual_seed(0)
    n, d, vocab = 300, 200, 28_782
    h, weight = torch.randn(n, d, generator=gen), 0.05 * torch.randn(vocab, d, generator=gen)
    bias, targets = 0.1 * torch.randn(vocab, generator=gen), torch.randint(0, vocab, (n,), generator=gen)
    found = []
    for align in ((1, 1), (64, 8)):
        leaves = [t.clone().requires_grad_() for t in (h, weight, bias)]
        loss = LinearCrossEntropy.apply(*leaves, targets, torch.bfloat16, align)
        loss.backward()
        found.append([loss.detach(), *(t.grad for t in leaves)])
    (loss, dh, dw, db), (loss_pad, dh_pad, dw_pad, db_pad) = found
    assert dh_pad.shape == h.shape and dw_pad.shape == weight.shape and db_pad.shape == bias.shape
    assert torch.isfinite(dw_pad).all() and torch.equal(loss_pad, loss)
    for plain, padded in ((dh, dh_pad), (dw, dw_pad), (db, db_pad)):
        assert float((padded - plain).abs().max()) <= 1e-4 * float(plain.abs().max())
