"""The paper's language model (its Figs. 6 and 8): a causal post-LN Transformer.

It is the model of PyTorch's word-language-model tutorial as the authors configured it
(d = 200, FFN width 200, one head, dropout 0.2, ReLU, no final LayerNorm, untied
output layer), written batch-first:

    x_0 = sqrt(d) * E[tokens] + PE,   x_0 <- Dropout(x_0)
    h   = LN_1(x + Dropout(Attn(x)))                  (post-LN)
    x'  = LN_2(h + Dropout(W_2 Dropout(ReLU(W_1 h + b_1)) + b_2))
    logits = W_out x_last + b_out

with ``Attn(x) = softmax(Q K^T / sqrt(d) + causal mask) V`` followed by the output
projection. As in ``torch.nn.TransformerEncoder``, all layers start as copies of one
initialised layer. On the CPU every dropout mask comes from random integers
(:func:`bits_dropout`) instead of torch's ``bernoulli_``, so training there forms the
``[B, T, T]`` probabilities to drop them; elsewhere, and without dropout, the attention goes
through the fused ``scaled_dot_product_attention``, and the probabilities are returned only
when ``return_attention=True`` (the entropy checkpoints). :meth:`TransformerLM.loss` fuses
the read-out with the cross-entropy (:class:`LinearCrossEntropy`), in fp32 or, under bf16
autocast, blockwise in bf16 with an fp32 loss. ``W_1`` (``layer.linear1``) is the "lower MLP"
matrix whose stable rank the paper follows.
"""

from __future__ import annotations

import copy
import math
import struct
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from joma_lib.base.run_axis import affine
from joma_lib.base.validation import check_float, check_int


def sinusoidal_positions(max_len: int, d: int) -> torch.Tensor:
    """``PE[t, 2i] = sin(t / 10000^{2i/d})``, ``PE[t, 2i+1] = cos(...)``; shape ``[max_len, d]``."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div[: d // 2])
    return pe


def causal_mask(t: int, device: torch.device | None = None) -> torch.Tensor:
    """Additive mask ``[t, t]``: 0 where key <= query, ``-inf`` above the diagonal (``t`` >= 1 tokens)."""
    t = check_int("t", t, 1, 1 << 20)
    return torch.triu(torch.full((t, t), float("-inf"), device=device), diagonal=1)


_CHUNK_ROWS = 256  # rows of logits per block in low precision: [256, V] bf16 (15 MB) stays in the last-level cache

READ_OUT_ALIGN: dict[str, tuple[int, int]] = {"cuda": (64, 8)}
"""Per device type, the multiples to which the bf16 read-out (:class:`LinearCrossEntropy`) pads the vocabulary (rows
of ``W`` of zeros, their bias ``-inf``: probability 0, gradient 0) and the columns of ``[h, 1]`` (zeros), so that
each of its matrix products has aligned leading dimensions: tensor-core GEMMs read rows of whole 16-byte words,
and the paper's sizes (``V`` = 28,782, ``d + 1`` = 201) are no multiples of 8 bf16 elements. None on a CPU, whose
products do not need it (its numbers stay as they were)."""


def _per_run(scale: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``scale`` (one number, or one per run ``[R]``) shaped to multiply ``x`` (``[R, ...]``, or one run's) run by
    run."""
    return scale.view(scale.shape + (1,) * (x.dim() - scale.dim()))


class LinearCrossEntropy(torch.autograd.Function):
    """Token-mean cross-entropy of the logits ``z = h W^T + b``, fused with the read-out layer.

    ``loss = mean_i [log sum_v exp(z_iv) - z_{i, y_i}]`` and, with ``p_i = softmax(z_i)``,
    ``dloss/dz_i = (p_i - e_{y_i}) / N``. The forward pass turns the ``[N, V]`` logits into
    that gradient in place (one exponential per entry), so the backward pass is three
    matrix products: ``dh = G W``, ``dW = G^T h``, ``db = sum_i G_i``. The value and the
    gradients are those of ``F.cross_entropy(F.linear(h, W, b), y)``, with fewer passes over
    the largest tensor of the model.

    With a leading run axis (``h [R, N, d]``, ``W [R, V, d]``, ``b [R, V]``, the same targets ``[N]``) it is the
    read-out of every run of a stack at once, each product one batched product, and the loss is ``[R]``: each
    run's gradients are those of its own loss.

    ``dtype=torch.bfloat16`` (mixed precision): the products run in bf16 (fp32 accumulation
    inside the GEMM) and the logits of one run are formed block by block (``_CHUNK_ROWS`` rows on a CPU), each
    block turned into its softmax (fp32 reductions) while it is in cache and stored in bf16;
    ``db`` comes out of the ``dW`` product (``G^T [h, 1]``), the loss ``-mean log p_{i, y_i}``
    is taken in fp32 and the gradients are returned in the parameters' dtype (fp32), so no
    full fp32 ``[N, V]`` tensor is ever formed.
    """

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, target: torch.Tensor,
                dtype: torch.dtype = torch.float32, align: tuple[int, int] | None = None) -> torch.Tensor:
        n, d = h.shape[-2:]
        rows_all = torch.arange(n, device=h.device)
        if dtype == torch.float32:
            z = affine(h, weight, bias)
            z -= z.amax(dim=-1, keepdim=True)
            picked = z.gather(-1, target.expand(z.shape[:-1]).unsqueeze(-1))
            z.exp_()
            total = z.sum(dim=-1, keepdim=True)
            loss = (total.log() - picked).mean(dim=(-2, -1))
            z /= total * n
            z[..., rows_all, target] -= 1.0 / n
            ctx.save_for_backward(h, weight, z, z.sum(dim=-2))
            return loss
        runs, vocab = h.shape[:-2], weight.shape[-2]
        rows_to, cols_to = align if align is not None else READ_OUT_ALIGN.get(h.device.type, (1, 1))
        pad_rows, pad_cols = -vocab % rows_to, -(d + 1) % cols_to
        # h with a column of ones (and zeros to an aligned width): G^T [h, 1, 0] gives dW and db in one product
        h_low = torch.cat([h, h.new_ones(*runs, n, 1), h.new_zeros(*runs, n, pad_cols)], dim=-1).to(dtype)
        w_low, b_low = weight.to(dtype), bias.to(dtype)  # [(R,) V, d], [(R,) V]
        if pad_rows:
            w_low, b_low = F.pad(w_low, (0, 0, 0, pad_rows)), F.pad(b_low, (0, pad_rows), value=float("-inf"))
        g = torch.empty(*runs, n, vocab + pad_rows, dtype=dtype, device=h.device)
        # one run's logits on a CPU in blocks that stay in cache; on a GPU, or for a stack, blocks only add kernels
        rows = _CHUNK_ROWS if h.device.type == "cpu" and not runs else n
        for start in range(0, n, rows):  # each block of logits becomes its softmax in place
            block = g[..., start:start + rows, :]
            torch.softmax(affine(h_low[..., start:start + rows, :d], w_low, b_low, out=block), -1, out=block)
        picked = g[..., rows_all, target].float().clamp_min(torch.finfo(torch.float32).tiny)
        g[..., rows_all, target] -= 1.0  # G = p - e_y; the 1/N is applied to the small products in backward
        ctx.out_dtypes, ctx.vocab = (h.dtype, weight.dtype, bias.dtype), vocab
        ctx.save_for_backward(h_low, w_low, g)
        return -picked.log().mean(dim=-1)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None, None, None]:
        (grad,) = grad_outputs  # one output (the loss, one per run), so one incoming gradient
        if len(ctx.saved_tensors) == 4:  # fp32: G carries the 1/N
            h, weight, g, db = ctx.saved_tensors
            grads = (g @ weight, g.transpose(-2, -1) @ h, db)
            # a plain loss.backward() on the CPU needs no rescaling of the [V, d] gradient; on a GPU the check would
            # read the gradient back to the host (and break a captured step), so it always rescales there
            if grad.device.type != "cpu" or bool((grad != 1.0).any()):
                grads = tuple(x * _per_run(grad, x) for x in grads)
            return (*grads, None, None, None)
        h_aug, weight, g = ctx.saved_tensors
        scale = grad.float() / g.shape[-2]
        d, vocab = weight.shape[-1], ctx.vocab
        dw_aug = g.transpose(-2, -1) @ h_aug  # [(R,) V, d + 1] (and the padding): dW and db, unscaled
        out = (g @ weight, dw_aug[..., :vocab, :d], dw_aug[..., :vocab, d])
        return (*(x.to(dt).mul_(_per_run(scale, x)) for x, dt in zip(out, ctx.out_dtypes, strict=True)),
                None, None, None)


def read_out_loss(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Token-mean cross-entropy of the read-out ``h W^T + b`` (``h [N, d]``, ``targets [N]``), fused
    (:class:`LinearCrossEntropy`), in bf16 blocks under bf16 autocast and in fp32 otherwise; with a leading run axis
    on ``h``, ``W`` and ``b``, every run's at once (``[R]``)."""
    device_type = h.device.type
    dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else torch.float32
    with torch.autocast(device_type, enabled=False):
        return LinearCrossEntropy.apply(h.to(weight.dtype), weight, bias, targets, dtype)


_INT_OF_WIDTH = {2: torch.int16, 4: torch.int32, 8: torch.int64}
#: struct formats of each float dtype the masks meet, and of the unsigned integer of its width
_STRUCT_OF = {torch.float16: ("e", "H"), torch.float32: ("f", "I"), torch.float64: ("d", "Q")}


def mask_constants(p: float, dtype: torch.dtype) -> tuple[int, int]:
    """``(k, bits)`` of :func:`mask_multipliers`: ``s = 1 / (1 - p)`` rounded to ``dtype`` as torch rounds a Python
    float (bf16: fp32 rounded to nearest even on its upper 16 bits), ``k = round(2^15 / s)`` and the bit pattern
    of ``s`` as a signed integer of the dtype's width. Plain Python, no tensor, and a constant to a compiled model
    (:func:`trace_mask_constants_as_constant`): reading a tensor's value back would end the graph at every dropout."""
    value = 1 / (1 - p)
    if dtype == torch.bfloat16:
        f32 = int.from_bytes(struct.pack("<f", value), "little")
        raw, width = (f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16, 16
        scale = struct.unpack("<f", (raw << 16).to_bytes(4, "little"))[0]
    else:
        fmt, int_fmt = _STRUCT_OF[dtype]
        packed = struct.pack("<" + fmt, value)
        raw, width = struct.unpack("<" + int_fmt, packed)[0], 8 * len(packed)
        scale = struct.unpack("<" + fmt, packed)[0]
    return round(2**15 / scale), raw - (1 << width) if raw >> (width - 1) else raw


def trace_mask_constants_as_constant() -> None:
    """Mark :func:`mask_constants` for ``torch.compile`` as a constant of its arguments (it is then called while
    tracing, not traced). Called before compiling, not at import: the marker imports ``torch._dynamo`` (~1.3 s),
    which every page, worker and command line would otherwise pay."""
    torch.compiler.assume_constant_result(mask_constants)


def bits_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout ``x * m`` with ``m = s`` (kept) or ``0``, drawn from 15 random bits per entry.

    torch's CPU dropout draws its mask with ``bernoulli_`` (~8 ns an entry here). Here one
    ``random_`` call fills 64 bits per 4 entries (:func:`draw_mask_bits`), from which
    :func:`mask_multipliers` keeps each entry iff its 15 bits fall below a threshold (~5x faster than ``bernoulli_``).
    """
    check_float("p", p, 0, 1, high_open=True)
    if p == 0:
        return x
    words = draw_mask_bits(x.numel(), x.device).view(torch.int16)[: x.numel()]
    return x * mask_multipliers(words, p, x.dtype).view(x.shape)


def draw_mask_bits(n: int, device: torch.device, generator: torch.Generator | None = None) -> torch.Tensor:
    """The random bits of a mask of ``n`` entries: ``ceil(n / 4)`` int64 words from ``generator`` (torch's global
    one by default), all 64 bits uniform."""
    return torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), None, generator=generator)


def mask_multipliers(words: torch.Tensor, p: float, dtype: torch.dtype) -> torch.Tensor:
    """The mask ``m`` (``s`` or 0, in ``dtype``) that the random int16 ``words`` encode, one entry per word.

    Each entry's 16 bits, shifted right once, give a uniform integer ``u`` in ``[0, 2^15)`` (offset by ``-2^14``
    in the int16 arithmetic), kept iff ``u < k``; the sign of ``u - k`` selects the bit pattern of ``s`` or of 0,
    so no boolean tensor is formed. ``s = 1 / (1 - p)`` rounded to ``dtype`` and ``k = round(2^15 / s)``, so
    ``E[m] = k s / 2^15 = 1`` to within ``s / 2^16`` and the drop rate is ``p`` to within ``2^-15`` plus the
    rounding of ``s`` (none for p = 0.2: s = 1.25 is exact in bf16).
    """
    keep, scale_bits = mask_constants(p, dtype)
    u = words >> 1  # uniform in [-2^14, 2^14)
    keep_all_ones = ((u - (keep - 2**14)) >> 15).to(_INT_OF_WIDTH[dtype.itemsize])  # -1 where u < k, else 0
    return (keep_all_ones & scale_bits).view(dtype)


def draws_bits_masks(x: torch.Tensor, p: float) -> bool:
    """Whether this model's dropout of ``x`` at rate ``p`` draws its masks with :func:`bits_dropout`: on the CPU."""
    return p > 0 and x.device.type == "cpu"


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """The model's dropout: :func:`bits_dropout` on the CPU (:func:`draws_bits_masks`), ``F.dropout`` elsewhere."""
    if training and draws_bits_masks(x, p):
        return bits_dropout(x, p)
    return F.dropout(x, p, training)


class Dropout(nn.Dropout):
    """``nn.Dropout`` drawing its masks as :func:`dropout` does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


class CausalSelfAttention(nn.Module):
    """Single-head causal self-attention with a packed QKV projection (xavier init, zero biases)."""

    def __init__(self, d: int, dropout: float) -> None:
        super().__init__()
        self.in_proj = nn.Linear(d, 3 * d)
        self.out_proj = nn.Linear(d, d)
        self.dropout = dropout
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, x: torch.Tensor, return_attention: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x [B, T, d]`` -> output ``[B, T, d]`` and, if asked, the probabilities ``[B, T, T]``."""
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        p_drop = self.dropout if self.training else 0.0
        if not (return_attention or draws_bits_masks(x, p_drop)):  # the fused kernel draws torch's masks
            return self.out_proj(F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop, is_causal=True)), None
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + causal_mask(x.shape[1], x.device)
        attn = scores.softmax(dim=-1)
        return self.out_proj(dropout(attn, p_drop, self.training) @ v), attn if return_attention else None


class PostLNLayer(nn.Module):
    """One post-LN encoder layer: ``LN(x + Attn(x))`` then ``LN(h + W_2 ReLU(W_1 h))`` with dropout."""

    def __init__(self, d: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = CausalSelfAttention(d, dropout)
        self.linear1 = nn.Linear(d, d_ff)
        self.linear2 = nn.Linear(d_ff, d)
        self.norm1 = nn.LayerNorm(d)
        self.norm2 = nn.LayerNorm(d)
        self.drop = Dropout(dropout)

    def forward(self, x: torch.Tensor, return_attention: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        attn_out, attn = self.self_attn(x, return_attention)
        return self.after_attention(x, attn_out), attn

    def after_attention(self, x: torch.Tensor, attn_out: torch.Tensor) -> torch.Tensor:
        """Given the attention output: ``h = LN_1(x + Dropout(attn_out))``, then ``LN_2(h + Dropout(FFN(h)))``."""
        h = self.norm1(x + self.drop(attn_out))
        return self.norm2(h + self.drop(self.linear2(self.drop(F.relu(self.linear1(h))))))


class TransformerLM(nn.Module):
    """Causal post-LN Transformer language model; ``forward(tokens [B, T])`` -> logits ``[B, T, V]``."""

    pe: torch.Tensor  # buffer registered in __init__

    def __init__(self, vocab_size: int, n_layers: int, d: int = 200, d_ff: int = 200, dropout: float = 0.2,
                 max_len: int = 5000) -> None:
        super().__init__()
        self.vocab_size = check_int("vocab_size", vocab_size, 2)
        self.n_layers = check_int("n_layers", n_layers, 1, 64)
        self.d = check_int("d", d, 1)
        check_int("d_ff", d_ff, 1)
        check_float("dropout", dropout, 0, 1, high_open=True)
        self.max_len = check_int("max_len", max_len, 1)
        self.embedding = nn.Embedding(vocab_size, d)
        self.register_buffer("pe", sinusoidal_positions(max_len, d), persistent=False)
        self.drop = Dropout(dropout)
        layer = PostLNLayer(d, d_ff, dropout)
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(n_layers))
        self.decoder = nn.Linear(d, vocab_size)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def hidden(self, tokens: torch.Tensor, return_attention: bool = False
               ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Last layer's output ``[B, T, d]`` and, when ``return_attention``, one ``[B, T, T]`` map per layer."""
        self._check_ids("tokens", tokens)
        if not 1 <= tokens.shape[1] <= self.max_len:
            raise ValueError(f"tokens must have a sequence length (dim 1) in [1, max_len={self.max_len}], got "
                             f"{tokens.shape[1]}")
        x = self.drop(self.embedding(tokens) * math.sqrt(self.d) + self.pe[: tokens.shape[1]])
        maps = []
        for layer in self.layers:
            x, attn = layer(x, return_attention)
            if attn is not None:
                maps.append(attn)
        return x, maps

    def _check_ids(self, name: str, ids: object) -> None:
        """``ids`` must be an int64 tensor ``[batch, time]`` of token ids in ``[0, vocab_size)``; TypeError or
        ValueError naming ``name`` otherwise (an id out of range would fail deep in the embedding's lookup)."""
        if not isinstance(ids, torch.Tensor):
            raise TypeError(f"{name} must be an int64 torch.Tensor [batch, time] of token ids, got "
                            f"{type(ids).__name__}")
        if ids.ndim != 2 or ids.dtype != torch.int64:
            raise ValueError(f"{name} must be an int64 tensor [batch, time], got {ids.dtype} {tuple(ids.shape)}")
        if ids.numel():
            low, high = (int(x) for x in torch.aminmax(ids))
            if low < 0 or high >= self.vocab_size:
                raise ValueError(f"{name} must hold token ids in [0, {self.vocab_size - 1}] (vocab_size="
                                 f"{self.vocab_size}), got ids in [{low}, {high}]")

    def forward(self, tokens: torch.Tensor, return_attention: bool = False
                ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits ``[B, T, V]`` and, when ``return_attention``, one ``[B, T, T]`` attention map per layer."""
        x, maps = self.hidden(tokens, return_attention)
        return self.decoder(x), maps

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Token-mean next-token cross-entropy (nats), read-out fused with the loss (:class:`LinearCrossEntropy`).

        Under ``torch.autocast(..., dtype=torch.bfloat16)`` the layers run in bf16 and so does the
        read-out (blockwise, loss accumulated in fp32); the parameters and their gradients stay fp32.
        """
        x, _ = self.hidden(tokens)
        self._check_ids("targets", targets)
        if targets.shape != tokens.shape:
            raise ValueError(f"targets must have the shape of tokens {tuple(tokens.shape)}, got {tuple(targets.shape)}")
        return read_out_loss(x.reshape(-1, self.d), self.decoder.weight, self.decoder.bias, targets.reshape(-1))

    def lower_mlp_weights(self) -> list[torch.Tensor]:
        """``W_1`` of every layer (``[d_ff, d]``), the matrices of the stable-rank curve."""
        return [cast(PostLNLayer, layer).linear1.weight for layer in self.layers]
