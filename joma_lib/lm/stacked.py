"""Runs of one shape as one model: the paper's language model with a leading run axis on every parameter.

``R`` runs that share their shapes (depth, widths, vocabulary, batch) and read the same batches (same corpus)
differ only in their seed, learning rate and clip. :class:`StackedLM` holds each parameter of
:class:`~joma_lib.lm.model.TransformerLM` as one tensor ``[R, ...]`` (the same names), and computes every
linear map of the ``R`` runs as one batched product (``torch.baddbmm``): on a GPU the step of ``R`` runs costs
about the kernel launches of one, and on a CPU each product is one larger GEMM.

Why batched products written out, not ``torch.func`` (``stack_module_state`` + ``vmap``): each run must draw
the dropout masks of its own unstacked run, from its own random stream and in the same order (so that a
stacked run is the same run, and a test can compare the two); ``vmap(randomness="different")`` draws every
run's masks from one generator. Written out, the forward pass of the stack reads next to the unstacked one
(:class:`~joma_lib.lm.model.PostLNLayer`) line by line, autograd derives the backward pass, and nothing in the
step reads a value back to the host, so the whole step can be captured as one CUDA graph
(:mod:`joma_lib.lm.stack`).

The masks (:func:`~joma_lib.lm.model.mask_multipliers`) come from :class:`GeneratorMasks` on the CPU (each
run's torch generator, continuing its unstacked run's state) and from :class:`CounterMasks` on a GPU
(a hash of the run's seed, the step and the dropout site: no generator state, so a captured graph replays new
masks at every step and a resumed run needs nothing but its step).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import NamedTuple, Protocol

import torch
import torch.nn.functional as F

from joma_lib.base.run_axis import affine, layer_norm
from joma_lib.lm.data import n_chunks
from joma_lib.lm.metrics import ENTROPY_EPS, stable_rank_of_singular_values
from joma_lib.lm.model import (
    TransformerLM,
    causal_mask,
    draw_mask_bits,
    mask_multipliers,
    read_out_loss,
    sinusoidal_positions,
    trace_mask_constants_as_constant,
)

#: elements of the largest activation (``[R, tokens, vocabulary]``) an evaluation forms at once; on a CPU few
#: enough to stay in cache (measured: 4M elements at a time evaluate ~20% faster than 32M)
EVAL_ELEMENTS = {"cpu": 2**22, "cuda": 2**28}


class MaskSource(Protocol):
    """Where a stack's dropout masks come from: ``multipliers(n, dtype, p)`` gives the mask of one dropout site of
    ``n`` entries per run at rate ``p``, ``[R, n]`` in ``dtype`` (each entry ``1 / (1 - p)`` or 0:
    :func:`~joma_lib.lm.model.mask_multipliers`), run after run in the unstacked runs' order."""

    def multipliers(self, n: int, dtype: torch.dtype, p: float) -> torch.Tensor: ...


class GeneratorMasks:
    """Each run's masks from its own torch generator, as its unstacked run draws them from torch's global one."""

    def __init__(self, generators: Sequence[torch.Generator], device: torch.device) -> None:
        self.generators = list(generators)
        self.device = device

    def multipliers(self, n: int, dtype: torch.dtype, p: float) -> torch.Tensor:
        words = torch.stack([draw_mask_bits(n, self.device, g).view(torch.int16)[:n] for g in self.generators])
        return mask_multipliers(words, p, dtype)


_GOLDEN = 0x9E3779B97F4A7C15 - 2**64  # splitmix64's constants, as signed 64-bit integers
_MIX1 = 0xBF58476D1CE4E5B9 - 2**64
_MIX2 = 0x94D049BB133111EB - 2**64


def _shift_right(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 words (torch's ``>>`` is arithmetic)."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def mix64(z: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser (Steele, Lea & Flood 2014) on int64 words, arithmetic modulo 2^64."""
    z = (z ^ _shift_right(z, 30)) * _MIX1
    z = (z ^ _shift_right(z, 27)) * _MIX2
    return z ^ _shift_right(z, 31)


class CounterMasks:
    """Counter-based masks: word ``i`` of dropout site ``s`` at step ``t`` of the run with seed ``seed`` is
    ``mix64(mix64(seed G + mix64(t G + s)) + i G)`` (``G`` the golden-ratio constant); its four int16 words are
    the random bits of four entries of the site's mask (:func:`~joma_lib.lm.model.mask_multipliers`).

    The step lives on the device (``step``, advanced by :meth:`advance` inside the step), the site is counted
    on the host and restarts at every step (:meth:`start_step`), so a captured step draws new masks at every
    replay, and the masks of a run do not depend on the runs stacked beside it.

    The hash and the mask made of it are chains of elementwise integer operations, each one kernel on a GPU: drawn
    site by site, the masks were about 45 kernels a site, 180 of a layer's 410. So the first step of a shape
    records its sites (sizes, dtypes, rates), and every later step of that shape (``start_step(key)``) hashes the
    words of all its sites at once and makes the masks of all sites of one dtype and rate at once, to the same
    bits; :meth:`multipliers` then hands out their slices in order, views that cost no kernel.
    """

    def __init__(self, seeds: Sequence[int], step: int, device: torch.device) -> None:
        self.seeds = torch.tensor(list(seeds), dtype=torch.int64, device=device)
        self.step = torch.tensor(step, dtype=torch.int64, device=device)
        # G as a tensor where it multiplies word indices: a number there becomes, in code that torch.compile
        # writes for a GPU, a literal times a 32-bit index, which Triton refuses (64-bit literal out of range)
        self._golden = torch.tensor(_GOLDEN, dtype=torch.int64, device=device)
        self.site = 0
        self._key: Hashable = None
        self._sites: list[_Site] = []  # the sites drawn so far in this step
        self._plans: dict[Hashable, _SitePlan] = {}
        self._masks: list[torch.Tensor] | None = None  # this step's masks of every group of sites, when planned

    def start_step(self, key: Hashable = None) -> None:
        """A new step, of shape ``key``: if a step of that shape was seen, make all its sites' masks now."""
        self.site, self._key, self._sites = 0, key, []
        plan = self._plans.get(key)
        self._masks = None if plan is None else plan.masks(self._streams(plan.site_ids))

    def advance(self) -> None:
        """The step is over: the counter moves on (on the device); a first step of its shape leaves its plan."""
        self.step += 1
        if self._key is not None and self._key not in self._plans:
            self._plans[self._key] = _SitePlan(self._sites, self.seeds.device)

    def _streams(self, sites: torch.Tensor | int) -> torch.Tensor:
        """Each run's stream of each site, ``[R, len(sites)]`` (``[R, 1]`` for one site given as a number)."""
        return mix64(mix64(self.step * _GOLDEN + sites) + self.seeds[:, None] * _GOLDEN)

    def words(self, site: int, n: int) -> torch.Tensor:
        """The random int16 words of site ``site`` of this step, ``n`` per run: ``[R, n]``."""
        index = torch.arange((n + 3) // 4, dtype=torch.int64, device=self.seeds.device)
        return mix64(self._streams(site) + index * self._golden).view(torch.int16)[:, :n]

    def multipliers(self, n: int, dtype: torch.dtype, p: float) -> torch.Tensor:
        site, drawn = self.site, _Site(n, dtype, p)
        self.site += 1
        if self._masks is None:
            self._sites.append(drawn)
            return mask_multipliers(self.words(site, n), p, dtype)
        plan = self._plans[self._key]
        if plan.sites[site:site + 1] != [drawn]:
            raise ValueError(f"dropout site {site} of a step of shape {self._key} draws {drawn}, where the first "
                             f"such step drew {plan.sites[site] if site < len(plan.sites) else 'none'}")
        group, start = plan.where[site]
        return self._masks[group][:, start:start + n]


class _Site(NamedTuple):
    """A dropout site of a step: its entries per run, the dtype of what it masks, its rate."""

    n: int
    dtype: torch.dtype
    p: float


class _SitePlan:
    """The dropout sites of a step of one shape, grouped by dtype and rate: where each site's words lie in the
    step's ``[R, W]`` words (a group's sites side by side), and for every word its site and its index in the site
    (on the device, made once)."""

    def __init__(self, sites: Sequence[_Site], device: torch.device) -> None:
        self.sites = list(sites)
        self.groups = list(dict.fromkeys((site.dtype, site.p) for site in self.sites))
        self.bounds: list[tuple[int, int]] = []  # each group's words, [first, stop)
        self.where: dict[int, tuple[int, int]] = {}  # site -> (its group, its first int16 entry in the group)
        order, word = [], 0  # the sites as laid out, the next word
        for g, group in enumerate(self.groups):
            first = word
            for i, site in enumerate(self.sites):
                if (site.dtype, site.p) == group:
                    self.where[i] = (g, 4 * (word - first))
                    order.append(i)
                    word += (site.n + 3) // 4
            self.bounds.append((first, word))
        counts = torch.tensor([(self.sites[i].n + 3) // 4 for i in order], dtype=torch.int64)
        site_of_word = torch.repeat_interleave(torch.tensor(order, dtype=torch.int64), counts)
        starts = torch.cumsum(counts, 0) - counts
        index = torch.arange(word) - torch.repeat_interleave(starts, counts)
        self.site_ids = torch.arange(len(self.sites), dtype=torch.int64, device=device)
        self.site_of_word = site_of_word.to(device)
        self.index = index.to(device) * _GOLDEN

    def masks(self, streams: torch.Tensor) -> list[torch.Tensor]:
        """Every group's masks at once, from each run's site streams ``[R, S]``: ``[R, 4 w]`` for a group of ``w``
        words, in its dtype."""
        words = mix64(streams.index_select(1, self.site_of_word) + self.index).view(torch.int16)
        return [mask_multipliers(words[:, 4 * first:4 * stop], p, dtype)
                for (dtype, p), (first, stop) in zip(self.groups, self.bounds, strict=True)]


def mask_source(device: torch.device, seeds: Sequence[int], step: int = 0,
                generators: Sequence[torch.Generator] | None = None) -> MaskSource:
    """The masks of a stack of runs with these ``seeds`` on ``device``: on the CPU from ``generators`` (each run's
    stream; fresh ones if None), elsewhere from the counter hash at training step ``step``."""
    if device.type == "cpu":
        return GeneratorMasks(generators if generators is not None else [torch.Generator() for _ in seeds], device)
    return CounterMasks(seeds, step, device)


LAYER_LINEARS = ("self_attn.in_proj", "self_attn.out_proj", "linear1", "linear2")
"""The linear maps of a layer (:class:`~joma_lib.lm.model.PostLNLayer`), each with a weight and a bias."""


class StackedLM:
    """``R`` runs of :class:`~joma_lib.lm.model.TransformerLM` as one model (see the module docstring).

    ``params`` maps each parameter name of ``TransformerLM`` to a leaf tensor ``[R, ...]``; ``masks`` is the
    :class:`MaskSource` of the training steps (evaluation draws none). ``batched_read_out`` says how a training
    step reads out and scores the runs: all at once, in batched products (the default off the CPU, where each run's
    read-out and loss would be some thirty small kernels of their own), or run by run (on a CPU, where one run's
    logits are formed in blocks that stay in cache).
    """

    def __init__(self, params: Mapping[str, torch.Tensor], n_layers: int, dropout: float, masks: MaskSource
                 ) -> None:
        self.params = dict(params)
        self.n_layers = n_layers
        self.dropout = dropout
        self.masks = masks
        self.n_runs, self.vocab_size, self.d = self.params["embedding.weight"].shape
        device = self.params["embedding.weight"].device
        self.pe = sinusoidal_positions(5000, self.d).to(device)
        self.batched_read_out = device.type != "cpu"

    @classmethod
    def from_models(cls, models: Sequence[TransformerLM], masks: MaskSource, device: torch.device) -> StackedLM:
        """The stack of ``models`` (same shapes), each parameter copied to ``device`` as one leaf ``[R, ...]``."""
        states = [dict(m.named_parameters()) for m in models]
        params = {name: torch.stack([s[name].detach() for s in states]).to(device).requires_grad_()
                  for name in states[0]}
        drop = models[0].drop.p
        return cls(params, models[0].n_layers, drop, masks)

    def run_state(self, r: int) -> dict[str, torch.Tensor]:
        """Run ``r``'s parameters as a ``TransformerLM`` state dict (on the CPU)."""
        return {name: p[r].detach().cpu().clone() for name, p in self.params.items()}

    def _drop(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        """Dropout of ``x [R, ...]``, each run's slice with its own mask (drawn in its unstacked run's order)."""
        if not training or self.dropout == 0:
            return x
        return x * self.masks.multipliers(x[0].numel(), x.dtype, self.dropout).view(x.shape)

    def hidden(self, tokens: torch.Tensor, training: bool, return_attention: bool = False
               ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The last layer's output ``[R, B*T, d]`` for tokens ``[B, T]`` (the same batch for every run) and,
        when ``return_attention``, one ``[R, B, T, T]`` map per layer."""
        p, R = self.params, self.n_runs
        B, T = tokens.shape
        rows = tokens.reshape(-1) + self.vocab_size * torch.arange(R, device=tokens.device)[:, None]  # [R, B*T]
        # index_select, not F.embedding: its backward (index_add_) reads nothing back to the host, so it can be
        # captured in a CUDA graph (the CUDA embedding backward counts its segments on the host)
        x = p["embedding.weight"].reshape(-1, self.d).index_select(0, rows.reshape(-1)).view(R, B * T, self.d)
        x = x * math.sqrt(self.d)
        x = self._drop((x.view(R, B, T, self.d) + self.pe[:T]).view(R, B * T, self.d), training)
        maps = []
        mask = causal_mask(T, tokens.device)  # one for every layer
        written_out = (training and self.dropout > 0) or return_attention  # the attention as written, not SDPA's
        for i in range(self.n_layers):
            q, k, v = (t.reshape(R * B, T, self.d) for t in affine(
                x, p[f"layers.{i}.self_attn.in_proj.weight"], p[f"layers.{i}.self_attn.in_proj.bias"]).chunk(3, -1))
            if written_out:
                scores = q @ k.transpose(-2, -1) / math.sqrt(self.d) + mask
                attn = scores.softmax(dim=-1)
                if return_attention:
                    maps.append(attn.view(R, B, T, T))
                a = self._drop(attn.view(R, B, T, T), training).view(R * B, T, T) @ v
            else:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            a = affine(a.reshape(R, B * T, self.d), p[f"layers.{i}.self_attn.out_proj.weight"],
                        p[f"layers.{i}.self_attn.out_proj.bias"])
            z = layer_norm(x + self._drop(a, training), p[f"layers.{i}.norm1.weight"], p[f"layers.{i}.norm1.bias"])
            f = self._drop(F.relu(affine(z, p[f"layers.{i}.linear1.weight"], p[f"layers.{i}.linear1.bias"])),
                           training)
            f = self._drop(affine(f, p[f"layers.{i}.linear2.weight"], p[f"layers.{i}.linear2.bias"]), training)
            x = layer_norm(z + f, p[f"layers.{i}.norm2.weight"], p[f"layers.{i}.norm2.bias"])
        return x, maps

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Read-out ``[R, N, V]`` of hidden states ``[R, N, d]``."""
        return affine(h, self.params["decoder.weight"], self.params["decoder.bias"])

    def compile_losses(self) -> None:
        """Route :meth:`losses` through ``torch.compile`` (one graph a step: nothing in it reads a tensor back)."""
        trace_mask_constants_as_constant()
        self.losses = torch.compile(self.losses, dynamic=False)  # type: ignore[method-assign]

    def losses(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Each run's token-mean next-token cross-entropy (nats), ``[R]``, with dropout (a training step): the
        read-out fused with the loss as in the unstacked model (:func:`~joma_lib.lm.model.read_out_loss`), for all
        runs at once or run by run (``batched_read_out``): the same arithmetic, though a batched product may sum in
        another order than one run's.

        Their sum is the loss to differentiate: the runs share no parameter, so the gradient of the sum with
        respect to run ``r``'s parameters is the gradient of run ``r``'s own loss.
        """
        y = targets.reshape(-1)
        h = self.hidden(tokens, training=True)[0]
        weight, bias = self.params["decoder.weight"], self.params["decoder.bias"]
        if self.batched_read_out:
            return read_out_loss(h, weight, bias, y)
        # unbind, not indexing: the backward of R slices h[r] is R zero-filled [R, ...] gradients summed (the
        # decoder's is [R, V, d]: ~12% of a CPU step), that of unbind one stack of the R slices' gradients
        runs = zip(h.unbind(), weight.unbind(), bias.unbind(), strict=True)
        return torch.stack([read_out_loss(h_r, weight_r, bias_r, y) for h_r, weight_r, bias_r in runs])

    def _param_dtype(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` in the parameters' dtype (the loss of bf16 logits is taken in fp32)."""
        return x.to(self.params["decoder.weight"].dtype)

    def linear_names(self) -> list[str]:
        """The names of every layer's linear maps' weights and biases: the parameters whose products bf16 autocast
        runs in bf16 (the layer norms, the embedding and the read-out keep theirs in float32)."""
        return [f"layers.{i}.{linear}.{kind}" for i in range(self.n_layers) for linear in LAYER_LINEARS
                for kind in ("weight", "bias")]

    def lower_mlp_weights(self) -> list[torch.Tensor]:
        """``W_1`` of every layer, ``[R, d_ff, d]`` each (the matrices of the stable-rank curve)."""
        return [self.params[f"layers.{i}.linear1.weight"] for i in range(self.n_layers)]


@torch.no_grad()
def stable_ranks(model: StackedLM) -> torch.Tensor:
    """``||W_1||_F^2 / ||W_1||_2^2`` of every run and layer, ``[R, L]`` (float64, on the CPU)."""
    out = []
    for w in model.lower_mlp_weights():
        s = torch.linalg.svdvals(w.detach().double())
        out.append(stable_rank_of_singular_values(s))
    return torch.stack(out, dim=1).cpu()


@torch.no_grad()
def evaluate_stack(model: StackedLM, streams: torch.Tensor, seq_len: int, max_chunks: int | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each run's validation loss ``[R]`` and per-layer attention entropy ``[R, L]`` (float64, CPU), over the
    first ``max_chunks`` chunks, as :func:`~joma_lib.lm.metrics.evaluate` computes them for one run.

    The chunks are independent sequences (no state passes from one to the next), so chunks of equal length are
    evaluated several at a time (as many as keep ``[R, tokens, V]`` under :data:`EVAL_ELEMENTS`); only the
    order of the sums differs from one chunk at a time.
    """
    total = n_chunks(streams, seq_len)
    count = total if max_chunks is None else min(total, max_chunks)
    device = model.params["embedding.weight"].device
    per_chunk = model.n_runs * streams.shape[0] * seq_len * model.vocab_size
    group = max(1, EVAL_ELEMENTS.get(device.type, EVAL_ELEMENTS["cpu"]) // per_chunk)
    loss_sum = torch.zeros(model.n_runs, dtype=torch.float64, device=device)
    entropy_sum = torch.zeros(model.n_runs, model.n_layers, dtype=torch.float64, device=device)
    tokens = 0
    full = min(count, (streams.shape[1] - 1) // seq_len)  # chunks of length seq_len; a last, shorter one after
    spans = [(s, min(s + group, full)) for s in range(0, full, group)] + [(i, i + 1) for i in range(full, count)]
    for first, stop in spans:
        start, end = first * seq_len, min(stop * seq_len, streams.shape[1] - 1)
        T = min(seq_len, end - start)
        x = streams[:, start:end].to(device).reshape(streams.shape[0], -1, T).transpose(0, 1).reshape(-1, T)
        y = streams[:, start + 1:end + 1].to(device).reshape(streams.shape[0], -1, T).transpose(0, 1).reshape(-1, T)
        h, maps = model.hidden(x, training=False, return_attention=True)
        logits = model._param_dtype(model.logits(h))
        loss_sum += F.cross_entropy(logits.reshape(-1, model.vocab_size), y.reshape(-1).repeat(model.n_runs),
                                    reduction="none").view(model.n_runs, -1).double().sum(dim=1)
        tokens += y.numel()
        entropy_sum += torch.stack([-(a * torch.log(a + ENTROPY_EPS)).sum(dim=-1).double().sum(dim=(1, 2))
                                    for a in maps], dim=1)
    return (loss_sum / tokens).cpu(), (entropy_sum / tokens).cpu()
