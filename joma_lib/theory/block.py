"""The Transformer block that JoMA analyses (the paper's setting; Theorem 1).

One query token and a bag of contextual tokens ``x`` (shape ``M_C``) go through

* attention with free logits ``z`` (the Scan&Snap reparameterisation) and temperature ``tau``:
  linear ``b = x * z/tau``, exp ``b = x * exp(z/tau)``, softmax ``b = x * exp(z/tau) / sum(x * exp(z/tau))``;
* a residual connection ``f = U_C b + u_q`` with fixed orthonormal embeddings ``[U_C, u_q]``;
* ``K`` hidden nodes ``h = phi(W^T f)`` (the lower MLP layer);
* an optional trainable top layer ``W_out`` (``logits = W_out^T h``; without it ``logits = h``) and cross-entropy.

Parameters carry a leading *replica* axis ``R``: replicas are independent copies (different seeds, or
different inputs) trained side by side. The loss is the sum over replicas of each replica's mean
cross-entropy, so each replica's gradient is exactly its own.

This module holds the block (:class:`BlockSpec`, :class:`BlockState`, the torch forward pass
:class:`TorchBlock`), the validation of its inputs, and its reference training engine :func:`train` (SGD or Adam
steps through torch autograd, the paper's protocol). The other two engines, the hand-written numpy SGD and the
gradient flow, are in :mod:`joma_lib.theory.block_engines`; the inputs (bags of tokens) in :mod:`joma_lib.theory.bags`;
Theorem 1's toy block and its checks in :mod:`joma_lib.theory.invariants`. Logits ``z`` use the learning rate
``lr_z``; the MLP ``W`` and the top layer use ``lr_w`` (the top layer's rate never enters Theorem 1).
Everything runs on the CPU in float64: the problems are tiny, and exact checks need double precision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from joma_lib.theory.attention_kinds import attention_kind
from joma_lib.theory.embeddings import orthonormal_embeddings
from joma_lib.base.validation import as_finite_array, check_array_size, check_choice, check_float, check_int, check_work

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": lambda u: u,
    "relu": torch.relu,
    "tanh": torch.tanh,
    "silu": torch.nn.functional.silu,
}

OPTIMIZERS = ("sgd", "adam")
DTYPE = torch.float64


@dataclass(frozen=True)
class BlockSpec:
    """Shape and kind of the analysed block.

    Attributes:
        n_context: ``M_C``, the number of contextual tokens.
        d: embedding dimension (at least ``M_C + 1``, so that ``[U_C, u_q]`` can be orthonormal).
        n_hidden: ``K``, the number of hidden nodes of the lower MLP layer.
        n_classes: number of output classes of the cross-entropy loss.
        attention: a registered kind (:data:`joma_lib.theory.attention_kinds.ATTENTION_KINDS`): linear, exp, softmax.
        phi: activation of the hidden nodes, one of :data:`ACTIVATIONS`.
        temperature: ``tau > 0``; attention reads ``z / tau``.
        top_layer: trainable top layer ``W_out`` (``K x n_classes``); if False, ``logits = h`` and ``K = n_classes``.
        embedding_seed: ``None`` for coordinate embeddings ``[I; 0]``, an int for a random rotation of them.
    """

    n_context: int
    d: int
    n_hidden: int
    n_classes: int
    attention: str = "exp"
    phi: str = "identity"
    temperature: float = 1.0
    top_layer: bool = True
    embedding_seed: int | None = None

    def __post_init__(self) -> None:
        check_int("n_context (M_C)", self.n_context, 1)
        check_int("d", self.d, self.n_context + 1)
        check_int("n_hidden (K)", self.n_hidden, 1)
        check_int("n_classes", self.n_classes, 2)
        attention_kind(self.attention)
        check_choice("phi", self.phi, list(ACTIVATIONS))
        check_float("temperature (tau)", self.temperature, 0, low_open=True)
        if not isinstance(self.top_layer, bool):
            raise ValueError(f"top_layer must be True or False, got {self.top_layer!r}")
        if not self.top_layer and self.n_hidden != self.n_classes:
            raise ValueError(f"without a top layer n_hidden (K) must equal n_classes, got K={self.n_hidden}, "
                             f"n_classes={self.n_classes}")
        if self.embedding_seed is not None:
            check_int("embedding_seed", self.embedding_seed, 0)

    def embeddings(self) -> tuple[np.ndarray, np.ndarray]:
        """``(U_C, u_q)``: ``d x M_C`` and ``d``, orthonormal together (the paper's embedding assumption)."""
        E = orthonormal_embeddings(self.d, self.n_context + 1, seed=self.embedding_seed)
        return E[:, : self.n_context], E[:, self.n_context]


@dataclass(frozen=True)
class BlockState:
    """Parameters of ``R`` replicas: ``W`` (R, d, K), ``z`` (R, M_C), ``W_out`` (R, K, n_classes) or None."""

    W: np.ndarray
    z: np.ndarray
    W_out: np.ndarray | None

    @property
    def n_replicas(self) -> int:
        """Number of replicas ``R``."""
        return self.z.shape[0]


@dataclass(frozen=True)
class Trajectory:
    """Recorded training run: ``times`` (n,) in steps (SGD/Adam) or flow time; ``z`` (n, R, M_C);
    ``W`` (n, R, d, K); ``loss`` (n, R), each replica's mean cross-entropy."""

    times: np.ndarray
    z: np.ndarray
    W: np.ndarray
    loss: np.ndarray

    def V(self, U_C: np.ndarray) -> np.ndarray:
        """``V(t) = U_C^T W(t)``, shape (n, R, M_C, K); column ``k`` is ``v_k``."""
        return np.einsum("dm,nrdk->nrmk", U_C, self.W)


def init_state(spec: BlockSpec, seeds: Sequence[int], w_scale: float = 0.01, z_scale: float = 0.01,
               w_out_scale: float = 0.1, z_offset: float = 0.0) -> BlockState:
    """Gaussian initial parameters, one replica per seed: ``W ~ w_scale N(0,1)``, ``z ~ z_offset + z_scale N(0,1)``,
    ``W_out ~ w_out_scale N(0,1)``. (The paper's Fig. 2 uses ``w_scale = z_scale = 0.01`` and no top layer.)"""
    if len(seeds) < 1:
        raise ValueError("seeds must hold at least one seed")
    w_scale = check_float("w_scale", w_scale, 0)
    z_scale = check_float("z_scale", z_scale, 0)
    w_out_scale = check_float("w_out_scale", w_out_scale, 0)
    z_offset = check_float("z_offset", z_offset)
    Ws, zs, W_outs = [], [], []
    for seed in seeds:
        rng = np.random.default_rng(check_int("seed", seed, 0))
        Ws.append(w_scale * rng.standard_normal((spec.d, spec.n_hidden)))
        zs.append(z_offset + z_scale * rng.standard_normal(spec.n_context))
        W_outs.append(w_out_scale * rng.standard_normal((spec.n_hidden, spec.n_classes)))
    return BlockState(np.stack(Ws), np.stack(zs), np.stack(W_outs) if spec.top_layer else None)


def check_bags(spec: BlockSpec, X: np.ndarray, n_replicas: int) -> np.ndarray:
    """Validate the bags ``X`` ((M_C, N) shared, or (R, M_C, N) per replica); return them as (R, M_C, N)."""
    X = as_finite_array("X", X)
    if X.ndim == 2:
        X = np.broadcast_to(X, (n_replicas, *X.shape))
    if X.ndim != 3 or X.shape[:2] != (n_replicas, spec.n_context) or X.shape[2] < 1:
        raise ValueError(f"X must have shape (M_C, N) or (R, M_C, N) with M_C={spec.n_context}, R={n_replicas}, "
                         f"N >= 1; got {np.shape(X)}")
    if np.any(X < 0):
        raise ValueError(f"X (token frequencies) must be >= 0, got a smallest entry of {float(X.min()):g}")
    if attention_kind(spec.attention).normalized and np.any(X.sum(axis=1) <= 0):
        empty = np.argwhere(X.sum(axis=1) <= 0).tolist()
        raise ValueError(f"X: every bag needs at least one token with x_l > 0 for {spec.attention} attention, got "
                         f"{len(empty)} empty bag(s) at (replica, sample) {empty[:3]}")
    return X


def check_labels(spec: BlockSpec, y: np.ndarray, n_samples: int) -> np.ndarray:
    """Validate class labels ``y`` (N,) in ``[0, n_classes)``; return them as int64."""
    y = np.asarray(y)
    if y.shape != (n_samples,) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must be an integer array of shape (N,) = ({n_samples},), got {y.dtype} {y.shape}")
    if np.any(y < 0) or np.any(y >= spec.n_classes):
        raise ValueError(f"y (labels) must lie in [0, {spec.n_classes - 1}]")
    return y.astype(np.int64)


def attention(z: torch.Tensor, X: torch.Tensor, kind: str, temperature: float) -> torch.Tensor:
    """Attention ``b`` (R, M_C, N) from logits ``z`` (R, M_C) and bags ``X`` (R, M_C, N): the kernel of the
    registered ``kind`` (linear: ``b = x * z/tau``; exp: ``b = x * exp(z/tau)``; softmax: exp normalised over tokens).
    """
    return attention_kind(kind).kernel((z / temperature)[..., None], X)


class TorchBlock:
    """Torch forward pass of ``R`` replicas on fixed inputs (used by :func:`train` and the engines of
    :mod:`joma_lib.theory.block_engines`)."""

    def __init__(self, spec: BlockSpec, X: np.ndarray, y: np.ndarray, n_replicas: int) -> None:
        X = check_bags(spec, X, n_replicas)
        y = check_labels(spec, y, X.shape[2])
        U_C, u_q = spec.embeddings()
        self.spec = spec
        self.X = torch.tensor(X, dtype=DTYPE)
        self.y = torch.as_tensor(y).repeat(n_replicas)
        self.U_C = torch.as_tensor(U_C, dtype=DTYPE)
        self.u_q = torch.as_tensor(u_q, dtype=DTYPE)
        self.phi = ACTIVATIONS[spec.phi]
        self.n = X.shape[2]

    def losses(self, W: torch.Tensor, z: torch.Tensor, W_out: torch.Tensor | None) -> torch.Tensor:
        """Each replica's mean cross-entropy, shape (R,)."""
        b = attention(z, self.X, self.spec.attention, self.spec.temperature)
        f = torch.einsum("dm,rmn->rdn", self.U_C, b) + self.u_q[:, None]      # f = U_C b + u_q
        h = self.phi(torch.einsum("rdk,rdn->rnk", W, f))                        # h = phi(W^T f)
        logits = h if W_out is None else torch.einsum("rnk,rkc->rnc", h, W_out)  # top layer
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.y, reduction="none")
        return ce.reshape(-1, self.n).mean(dim=1)


def _tensors(state: BlockState) -> list[torch.Tensor]:
    out = [torch.tensor(state.W, dtype=DTYPE, requires_grad=True), torch.tensor(state.z, dtype=DTYPE,
                                                                                 requires_grad=True)]
    if state.W_out is not None:
        out.append(torch.tensor(state.W_out, dtype=DTYPE, requires_grad=True))
    return out


def check_state(spec: BlockSpec, state: BlockState) -> None:
    """Validate ``state`` against ``spec``: shapes of ``W``, ``z`` and ``W_out`` (present iff the top layer is),
    finite."""
    R = state.n_replicas
    shapes = {"W": (state.W.shape, (R, spec.d, spec.n_hidden)), "z": (state.z.shape, (R, spec.n_context))}
    if spec.top_layer:
        if state.W_out is None:
            raise ValueError("state.W_out is missing but spec.top_layer is True")
        shapes["W_out"] = (state.W_out.shape, (R, spec.n_hidden, spec.n_classes))
    elif state.W_out is not None:
        raise ValueError("state.W_out is given but spec.top_layer is False")
    for name, (got, want) in shapes.items():
        if got != want:
            raise ValueError(f"state.{name} must have shape {want}, got {got}")
        as_finite_array(f"state.{name}", getattr(state, name))


def learning_rates(lr_z: float, lr_w: float, lr_top: float | None) -> tuple[float, float, float]:
    """Validated ``(lr_z, lr_w, lr_top)``, each > 0; the top layer's rate defaults to ``lr_w``."""
    lr_z = check_float("lr_z", lr_z, 0, low_open=True)
    lr_w = check_float("lr_w", lr_w, 0, low_open=True)
    lr_top = lr_w if lr_top is None else check_float("lr_top", lr_top, 0, low_open=True)
    return lr_z, lr_w, lr_top


def train(spec: BlockSpec, X: np.ndarray, y: np.ndarray, state: BlockState, steps: int, lr_z: float = 0.1,
          lr_w: float = 0.1, lr_top: float | None = None, optimizer: str = "sgd",
          record_every: int = 1) -> Trajectory:
    """Full-batch SGD or Adam on the cross-entropy (the paper's protocol), recording every ``record_every`` steps.

    ``times`` are step counts ``0, record_every, ...`` and always include ``steps``; the state at step ``s``
    is the one *before* update ``s + 1``.
    """
    check_state(spec, state)
    steps, record_every = training_length(state, steps, record_every)
    lr_z, lr_w, lr_top = learning_rates(lr_z, lr_w, lr_top)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    block = TorchBlock(spec, X, y, state.n_replicas)
    params = _tensors(state)
    groups = [{"params": [params[0]], "lr": lr_w}, {"params": [params[1]], "lr": lr_z}]
    if len(params) == 3:
        groups.append({"params": [params[2]], "lr": lr_top})
    opt = torch.optim.SGD(groups) if optimizer == "sgd" else torch.optim.Adam(groups)
    record = recorded_steps(steps, record_every)
    times, zs, Ws, losses = [], [], [], []
    for step in range(steps + 1):
        opt.zero_grad()
        loss = block.losses(params[0], params[1], params[2] if len(params) == 3 else None)
        if not bool(torch.isfinite(loss).all()):
            raise diverged_error(step, lr_z, lr_w)
        if step in record:
            times.append(step)
            Ws.append(params[0].detach().numpy().copy())
            zs.append(params[1].detach().numpy().copy())
            losses.append(loss.detach().numpy().copy())
        if step < steps:
            loss.sum().backward()
            opt.step()
    return Trajectory(np.asarray(times, dtype=float), np.stack(zs), np.stack(Ws), np.stack(losses))


MAX_STEPS = 10**7
"""The longest training run of a block (about an hour on a CPU): more is refused, naming ``steps``."""


def training_length(state: BlockState, steps: object, record_every: object) -> tuple[int, int]:
    """Validated ``(steps, record_every)`` of a training run of ``state``: a trajectory that would not fit in memory,
    or a run that would not end in a session, is refused up front, naming them."""
    steps = check_int("steps", steps, 1, MAX_STEPS)
    record_every = check_int("record_every", record_every, 1)
    got = f"steps={steps}, record_every={record_every}, {state.z.size + state.W.size} parameters"
    check_array_size("the recorded trajectory", (steps // record_every + 2) * (state.z.size + state.W.size), got)
    check_work(steps * state.W.size, got)
    return steps, record_every


@dataclass(frozen=True)
class RecordedSteps:
    """The steps a training run records: ``0, record_every, ...`` and always ``steps`` (``step in`` it)."""

    steps: int
    record_every: int

    def __contains__(self, step: int) -> bool:
        return step == self.steps or (0 <= step < self.steps and step % self.record_every == 0)


def recorded_steps(steps: int, record_every: int) -> RecordedSteps:
    """The steps a training run records (:class:`RecordedSteps`), without listing them."""
    return RecordedSteps(steps, record_every)


def diverged_error(step: int, lr_z: float, lr_w: float) -> ValueError:
    """The error a training engine raises when the loss stops being finite at ``step``."""
    return ValueError(f"training diverged at step {step} (the loss is no longer finite): reduce lr_z ({lr_z:g}) "
                      f"and lr_w ({lr_w:g})")
