"""The Transformer block that JoMA analyses (paper Sec. 3; Theorem 1).

One query token and a bag of contextual tokens ``x`` (shape ``M_C``) go through

* attention with free logits ``z`` (the Scan&Snap reparameterisation) and temperature ``T``:
  linear ``b = x * z/T``, exp ``b = x * exp(z/T)``, softmax ``b = x * exp(z/T) / sum(x * exp(z/T))``;
* a residual connection ``f = U_C b + u_q`` with fixed orthonormal embeddings ``[U_C, u_q]``;
* ``K`` hidden nodes ``h = phi(W^T f)`` (the lower MLP layer);
* an optional trainable top layer ``A`` (``logits = A^T h``; without it ``logits = h``) and cross-entropy.

Parameters carry a leading *replica* axis ``R``: replicas are independent copies (different seeds, or
different inputs) trained side by side. The loss is the sum over replicas of each replica's mean
cross-entropy, so each replica's gradient is exactly its own.

Two ways to train: :func:`train` (SGD or Adam steps through torch autograd, the paper's protocol) and
:func:`gradient_flow` (``d theta/dt = -eta grad L`` integrated by ``scipy.integrate.solve_ivp`` in float64),
for checks of Theorem 1 that are exact up to the solver tolerance. Logits ``z`` use the learning rate
``lr_z``; the MLP ``W`` and the top layer use ``lr_w`` (the top layer's rate never enters Theorem 1).
Everything runs on the CPU in float64: the problems are tiny, and exact checks need double precision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.integrate import solve_ivp
from scipy.special import expit

from joma_lib.attention_kinds import attention_kind
from joma_lib.embeddings import orthonormal_embeddings
from joma_lib.validation import as_finite_array, check_choice, check_float, check_int

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": lambda u: u,
    "relu": torch.relu,
    "tanh": torch.tanh,
    "silu": torch.nn.functional.silu,
}


def _identity_grad(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return u, np.ones_like(u)


def _relu_grad(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``max(u, 0)`` and its derivative ``1[u > 0]`` (0 at ``u = 0``, as torch's)."""
    return np.maximum(u, 0.0), (u > 0).astype(u.dtype)


def _tanh_grad(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.tanh(u)
    return t, 1.0 - t * t


def _silu_grad(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``u sigma(u)`` and its derivative ``sigma(u) (1 + u (1 - sigma(u)))``."""
    sig = expit(u)
    return u * sig, sig * (1.0 + u * (1.0 - sig))


ACTIVATION_GRADS: dict[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "identity": _identity_grad, "relu": _relu_grad, "tanh": _tanh_grad, "silu": _silu_grad,
}
"""``(phi(u), phi'(u))`` in numpy for every activation of :data:`ACTIVATIONS` (same names): the hand-written
backward pass of :func:`train_sgd_numpy`."""

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
        attention: a registered kind (:data:`joma_lib.attention_kinds.ATTENTION_KINDS`): linear, exp, softmax.
        phi: activation of the hidden nodes, one of :data:`ACTIVATIONS`.
        temperature: ``T > 0``; attention reads ``z / T``.
        top_layer: trainable top layer ``A`` (``K x n_classes``); if False, ``logits = h`` and ``K = n_classes``.
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
        check_float("temperature (T)", self.temperature, 0, low_open=True)
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
    """Parameters of ``R`` replicas: ``W`` (R, d, K), ``z`` (R, M_C), ``A`` (R, K, n_classes) or None."""

    W: np.ndarray
    z: np.ndarray
    A: np.ndarray | None

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
               a_scale: float = 0.1, z_offset: float = 0.0) -> BlockState:
    """Gaussian initial parameters, one replica per seed: ``W ~ w_scale N(0,1)``, ``z ~ z_offset + z_scale N(0,1)``,
    ``A ~ a_scale N(0,1)``. (The paper's Fig. 2 uses ``w_scale = z_scale = 0.01`` and no top layer.)"""
    if len(seeds) < 1:
        raise ValueError("seeds must hold at least one seed")
    w_scale = check_float("w_scale", w_scale, 0)
    z_scale = check_float("z_scale", z_scale, 0)
    a_scale = check_float("a_scale", a_scale, 0)
    z_offset = check_float("z_offset", z_offset)
    Ws, zs, As = [], [], []
    for seed in seeds:
        rng = np.random.default_rng(check_int("seed", seed, 0))
        Ws.append(w_scale * rng.standard_normal((spec.d, spec.n_hidden)))
        zs.append(z_offset + z_scale * rng.standard_normal(spec.n_context))
        As.append(a_scale * rng.standard_normal((spec.n_hidden, spec.n_classes)))
    return BlockState(np.stack(Ws), np.stack(zs), np.stack(As) if spec.top_layer else None)


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
    registered ``kind`` (linear: ``b = x * z/T``; exp: ``b = x * exp(z/T)``; softmax: exp normalised over tokens).
    """
    return attention_kind(kind).kernel((z / temperature)[..., None], X)


def mean_attention(spec: BlockSpec, z: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``b-bar = E_x[b]`` (R, M_C) for logits ``z`` (R, M_C): the mean attention of Theorem 1 (softmax)."""
    z = as_finite_array("z", z)
    if z.ndim != 2 or z.shape[1] != spec.n_context:
        raise ValueError(f"z must have shape (R, M_C) with M_C={spec.n_context}, got {z.shape}")
    X = check_bags(spec, X, z.shape[0])
    b = attention(torch.tensor(z, dtype=DTYPE), torch.tensor(X, dtype=DTYPE), spec.attention, spec.temperature)
    return b.mean(dim=2).numpy()


class _Block:
    """Torch forward pass of ``R`` replicas on fixed inputs (internal to :func:`train`/:func:`gradient_flow`)."""

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

    def losses(self, W: torch.Tensor, z: torch.Tensor, A: torch.Tensor | None) -> torch.Tensor:
        """Each replica's mean cross-entropy, shape (R,)."""
        b = attention(z, self.X, self.spec.attention, self.spec.temperature)
        f = torch.einsum("dm,rmn->rdn", self.U_C, b) + self.u_q[:, None]      # f = U_C b + u_q
        h = self.phi(torch.einsum("rdk,rdn->rnk", W, f))                        # h = phi(W^T f)
        logits = h if A is None else torch.einsum("rnk,rkc->rnc", h, A)          # top layer
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.y, reduction="none")
        return ce.reshape(-1, self.n).mean(dim=1)


def _tensors(state: BlockState) -> list[torch.Tensor]:
    out = [torch.tensor(state.W, dtype=DTYPE, requires_grad=True), torch.tensor(state.z, dtype=DTYPE,
                                                                                 requires_grad=True)]
    if state.A is not None:
        out.append(torch.tensor(state.A, dtype=DTYPE, requires_grad=True))
    return out


def _check_state(spec: BlockSpec, state: BlockState) -> None:
    R = state.n_replicas
    shapes = {"W": (state.W.shape, (R, spec.d, spec.n_hidden)), "z": (state.z.shape, (R, spec.n_context))}
    if spec.top_layer:
        if state.A is None:
            raise ValueError("state.A is missing but spec.top_layer is True")
        shapes["A"] = (state.A.shape, (R, spec.n_hidden, spec.n_classes))
    elif state.A is not None:
        raise ValueError("state.A is given but spec.top_layer is False")
    for name, (got, want) in shapes.items():
        if got != want:
            raise ValueError(f"state.{name} must have shape {want}, got {got}")
        as_finite_array(f"state.{name}", getattr(state, name))


def _learning_rates(lr_z: float, lr_w: float, lr_top: float | None) -> tuple[float, float, float]:
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
    _check_state(spec, state)
    steps = check_int("steps", steps, 1)
    record_every = check_int("record_every", record_every, 1)
    lr_z, lr_w, lr_top = _learning_rates(lr_z, lr_w, lr_top)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    block = _Block(spec, X, y, state.n_replicas)
    params = _tensors(state)
    groups = [{"params": [params[0]], "lr": lr_w}, {"params": [params[1]], "lr": lr_z}]
    if len(params) == 3:
        groups.append({"params": [params[2]], "lr": lr_top})
    opt = torch.optim.SGD(groups) if optimizer == "sgd" else torch.optim.Adam(groups)
    record = _recorded_steps(steps, record_every)
    times, zs, Ws, losses = [], [], [], []
    for step in range(steps + 1):
        opt.zero_grad()
        loss = block.losses(params[0], params[1], params[2] if len(params) == 3 else None)
        if not bool(torch.isfinite(loss).all()):
            raise _diverged(step, lr_z, lr_w)
        if step in record:
            times.append(step)
            Ws.append(params[0].detach().numpy().copy())
            zs.append(params[1].detach().numpy().copy())
            losses.append(loss.detach().numpy().copy())
        if step < steps:
            loss.sum().backward()
            opt.step()
    return Trajectory(np.asarray(times, dtype=float), np.stack(zs), np.stack(Ws), np.stack(losses))


def _recorded_steps(steps: int, record_every: int) -> set[int]:
    """The steps a training run records: ``0, record_every, ...`` and always ``steps``."""
    return set(range(0, steps, record_every)) | {steps}


def _diverged(step: int, lr_z: float, lr_w: float) -> ValueError:
    return ValueError(f"training diverged at step {step} (the loss is no longer finite): reduce lr_z ({lr_z:g}) "
                      f"and lr_w ({lr_w:g})")


def train_sgd_numpy(spec: BlockSpec, X: np.ndarray, y: np.ndarray, state: BlockState, steps: int,
                    lr_z: float = 0.1, lr_w: float = 0.1, lr_top: float | None = None,
                    record_every: int = 1) -> Trajectory:
    """:func:`train` with ``optimizer="sgd"``, in numpy with hand-written gradients (same arguments, same
    :class:`Trajectory`, equal to rounding); about ten times faster on the toy block of the Theorem 1 widget.

    Forward pass of the block (paper Sec. 3), per replica, bags ``X`` (M_C, N), ``s = z/T``::

        b = X * g(s)          (normalised kinds: divided by S = sum_l X_l g(s_l), per sample)
        f = U_C b + u_q,   u = W^T f,   h = phi(u),   o = A^T h   (o = h without a top layer)
        L = mean_n CE(o_n, y_n)

    with the kind's score ``g`` (:attr:`joma_lib.attention_kinds.AttentionKind.score`). Backward pass (chain rule)::

        dL/do = (softmax(o) - onehot(y)) / N
        dL/dA = h (dL/do)^T,         dL/dh = A dL/do,        dL/du = dL/dh * phi'(u)
        dL/dW = f (dL/du)^T,         dL/db = U_C^T W dL/du
        dL/da = dL/db                (normalised: (dL/db - sum_l b_l dL/db_l) / S, with a = X g(s))
        dL/dz = g'(s) / T * sum_n X * dL/da

    and the SGD update ``theta <- theta - lr dL/dtheta`` (``lr_z`` for ``z``, ``lr_w`` for ``W``, ``lr_top`` for
    ``A``). Only kinds with a registered ``score`` are supported (ValueError naming the kind otherwise).
    """
    _check_state(spec, state)
    steps = check_int("steps", steps, 1)
    record_every = check_int("record_every", record_every, 1)
    lr_z, lr_w, lr_top = _learning_rates(lr_z, lr_w, lr_top)
    kind = attention_kind(spec.attention)
    if kind.score is None:
        raise ValueError(f"attention={spec.attention!r} has no numpy score (AttentionKind.score): train it with "
                         "joma_lib.block.train")
    score, phi = kind.score, ACTIVATION_GRADS[spec.phi]
    X = check_bags(spec, X, state.n_replicas)
    y = check_labels(spec, y, X.shape[2])
    U_C, u_q = spec.embeddings()
    n = X.shape[2]
    targets = np.zeros((spec.n_classes, n))
    targets[y, np.arange(n)] = 1.0
    W, z = state.W.astype(float), state.z.astype(float)
    A = None if state.A is None else state.A.astype(float)
    record = _recorded_steps(steps, record_every)
    times, zs, Ws, losses = [], [], [], []
    with np.errstate(over="ignore", invalid="ignore"):
        for step in range(steps + 1):
            g, dg = score(z / spec.temperature)                           # (R, M_C)
            b = X * g[..., None]                                          # a = X g(s), (R, M_C, N)
            S = b.sum(axis=1, keepdims=True) if kind.normalized else None
            if S is not None:
                b = b / S
            f = U_C @ b + u_q[:, None]                                    # (R, d, N)
            h, dh_du = phi(W.swapaxes(1, 2) @ f)                          # (R, K, N)
            o = h if A is None else A.swapaxes(1, 2) @ h                  # (R, C, N)
            o_max = o.max(axis=1, keepdims=True)
            e = np.exp(o - o_max)
            Z = e.sum(axis=1, keepdims=True)
            loss = (np.log(Z[:, 0]) + o_max[:, 0] - (o * targets).sum(axis=1)).mean(axis=1)  # (R,)
            if not np.all(np.isfinite(loss)):
                raise _diverged(step, lr_z, lr_w)
            if step in record:
                times.append(step)
                Ws.append(W)  # the updates below make new arrays: no copy needed
                zs.append(z)
                losses.append(loss)
            if step == steps:
                break
            d_o = (e / Z - targets) / n
            d_u = (d_o if A is None else A @ d_o) * dh_du
            d_b = U_C.T @ (W @ d_u)
            if S is not None:  # from dL/db to dL/da
                d_b = (d_b - (b * d_b).sum(axis=1, keepdims=True)) / S
            d_z = dg / spec.temperature * (X * d_b).sum(axis=2)
            if A is not None:
                A = A - lr_top * (h @ d_o.swapaxes(1, 2))
            W = W - lr_w * (f @ d_u.swapaxes(1, 2))
            z = z - lr_z * d_z
    return Trajectory(np.asarray(times, dtype=float), np.stack(zs), np.stack(Ws), np.stack(losses))


FLOW_METHODS = ("dop853", "rk4")


def gradient_flow(spec: BlockSpec, X: np.ndarray, y: np.ndarray, state: BlockState, t_eval: np.ndarray,
                  lr_z: float = 1.0, lr_w: float = 1.0, lr_top: float | None = None, method: str = "dop853",
                  rtol: float = 1e-10, atol: float = 1e-12, dt: float = 0.02) -> Trajectory:
    """Integrate the gradient flow ``dW/dt = -lr_w dL/dW``, ``dz/dt = -lr_z dL/dz`` (and the top layer with
    ``lr_top``) from ``t = 0``, gradients by torch autograd in float64; record at the times ``t_eval``.

    This is the continuous dynamics of paper Sec. 3 for which Theorem 1 is exact. ``method="dop853"`` is
    scipy's adaptive 8th-order Runge-Kutta (``rtol``, ``atol``), for smooth ``phi``. ReLU makes the vector
    field discontinuous where a pre-activation crosses 0, and the adaptive solver then crawls; use
    ``method="rk4"``, the classical Runge-Kutta scheme with fixed step at most ``dt``.
    """
    _check_state(spec, state)
    t_eval = np.asarray(t_eval, dtype=float)
    if t_eval.ndim != 1 or t_eval.size < 1 or t_eval[0] < 0 or np.any(np.diff(t_eval) <= 0) \
            or not np.all(np.isfinite(t_eval)):
        raise ValueError("t_eval must be a non-empty, strictly increasing 1-D array of finite times >= 0")
    check_choice("method", method, FLOW_METHODS)
    check_float("rtol", rtol, 0, low_open=True)
    check_float("atol", atol, 0, low_open=True)
    dt = check_float("dt", dt, 0, low_open=True)
    rates = _learning_rates(lr_z, lr_w, lr_top)
    rates = (rates[1], rates[0], rates[2])  # order of the parameter list: W, z, A
    block = _Block(spec, X, y, state.n_replicas)
    params = [torch.tensor(p, dtype=DTYPE) for p in (state.W, state.z, state.A) if p is not None]

    def velocity(ps: list[torch.Tensor]) -> list[torch.Tensor]:
        ps = [p.detach().requires_grad_(True) for p in ps]
        grads = torch.autograd.grad(block.losses(*ps, *([None] * (3 - len(ps)))).sum(), ps)
        return [-lr * g for lr, g in zip(rates, grads)]

    if method == "dop853":
        shapes = [p.shape for p in params]
        sizes = [p.numel() for p in params]

        def unflatten(theta: np.ndarray) -> list[torch.Tensor]:
            return [torch.tensor(q.reshape(s), dtype=DTYPE) for q, s in zip(np.split(theta, np.cumsum(sizes)[:-1]),
                                                                              shapes)]

        sol = solve_ivp(lambda _, theta: torch.cat([g.ravel() for g in velocity(unflatten(theta))]).numpy(),
                        (0.0, float(t_eval[-1])), torch.cat([p.ravel() for p in params]).numpy(),
                        method="DOP853", t_eval=t_eval, rtol=rtol, atol=atol)
        if not sol.success:
            raise RuntimeError(f"gradient flow integration failed: {sol.message}")
        path = [unflatten(theta) for theta in sol.y.T]
    else:
        path, t = [], 0.0
        for t_next in t_eval:
            n = int(np.ceil((t_next - t) / dt - 1e-9))
            h = (t_next - t) / n if n else 0.0
            for _ in range(n):
                k1 = velocity(params)
                k2 = velocity([p + h / 2 * k for p, k in zip(params, k1)])
                k3 = velocity([p + h / 2 * k for p, k in zip(params, k2)])
                k4 = velocity([p + h * k for p, k in zip(params, k3)])
                params = [p + h / 6 * (a + 2 * b + 2 * c + e) for p, a, b, c, e in zip(params, k1, k2, k3, k4)]
            path.append([p.detach() for p in params])
            t = float(t_next)
    with torch.no_grad():
        losses = [block.losses(*ps, *([None] * (3 - len(ps)))).numpy() for ps in path]
    return Trajectory(t_eval.copy(), np.stack([ps[1].numpy() for ps in path]), np.stack([ps[0].numpy() for ps in path]),
                      np.stack(losses))


def gaussian_or_random_bags(variant: str, n_distinct: int = 10, n_common: int = 10, n_classes: int = 20,
                            width: float = 30.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Inputs of the paper's Figs. 2-3: one sample per class, ``x = X[:, y]``; returns ``(X, y)``.

    ``X`` (M_C x n_classes, M_C = n_distinct + n_common) starts uniform in ``[0, 1/2)``. In the ``"gaussian"``
    variant the distinct rows become a bump that moves with the class,
    ``X[l, c] = exp(-(l - c n_distinct / n_classes)^2 / width)`` for ``l < n_distinct``. Columns are then
    normalised to sum to 1 (token frequencies).
    """
    check_choice("variant", variant, ("gaussian", "random"))
    n_distinct = check_int("n_distinct", n_distinct, 0)
    n_common = check_int("n_common", n_common, 0)
    if n_distinct + n_common < 1:
        raise ValueError("n_distinct + n_common (M_C) must be >= 1")
    n_classes = check_int("n_classes", n_classes, 2)
    width = check_float("width", width, 0, low_open=True)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    X = rng.random((n_distinct + n_common, n_classes)) / 2
    if variant == "gaussian":
        centres = np.arange(n_classes) * n_distinct / n_classes
        X[:n_distinct] = np.exp(-(np.arange(n_distinct)[:, None] - centres[None, :]) ** 2 / width)
    return X / X.sum(axis=0, keepdims=True), np.arange(n_classes)


def dirichlet_bags(n_context: int, n_classes: int, n_samples: int, concentration: float = 1.0,
                   signal: float = 4.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Heterogeneous inputs: ``n_samples`` bags, each its own draw ``x ~ Dirichlet(concentration * p_y)``.

    Class ``c`` prefers token ``c mod M_C``: ``p_c`` is uniform plus ``signal`` on that token, normalised.
    Small ``concentration`` gives sparse, very different bags within a class. Returns ``(X, y)``
    with ``X`` (M_C, N) and balanced labels ``y`` (N,).
    """
    n_context = check_int("n_context", n_context, 1)
    n_classes = check_int("n_classes", n_classes, 2)
    n_samples = check_int("n_samples", n_samples, 1)
    concentration = check_float("concentration", concentration, 0, low_open=True)
    signal = check_float("signal", signal, 0)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    y = np.arange(n_samples) % n_classes
    profiles = np.ones((n_classes, n_context))
    profiles[np.arange(n_classes), np.arange(n_classes) % n_context] += signal
    profiles /= profiles.sum(axis=1, keepdims=True)
    X = np.stack([rng.dirichlet(concentration * n_context * profiles[c]) for c in y], axis=1)
    return X, y


def theorem1_toy(attention: str = "exp", phi: str = "identity", seed: int = 0, n_samples: int = 64,
                  concentration: float = 1.0, temperature: float = 1.0,
                  ) -> tuple[BlockSpec, np.ndarray, np.ndarray, BlockState]:
    """A small block for Theorem 1 checks: ``M_C = 8``, ``K = 6``, 4 classes, ``d = 12``, trainable top layer,
    a random rotation of the coordinate embeddings, Dirichlet bags (:func:`dirichlet_bags`).

    ``W`` and ``A`` start at scale 0.3 so that the logits move by ``O(1)`` within a few hundred SGD steps of
    learning rate 0.1 (the residual check is then not vacuous). ``z(0) = 0`` except for linear attention,
    where ``z(0) = 1`` (with ``z = 0`` linear attention outputs ``b = 0`` and the logits never move).
    Returns ``(spec, X, y, state)`` with one replica.
    """
    spec = BlockSpec(n_context=8, d=12, n_hidden=6, n_classes=4, attention=attention, phi=phi,
                     temperature=temperature, top_layer=True, embedding_seed=3)
    X, y = dirichlet_bags(8, 4, n_samples, concentration=concentration, signal=4.0, seed=seed)
    state = init_state(spec, [seed + 1000], w_scale=0.3, a_scale=0.3, z_scale=0.0,
                       z_offset=attention_kind(attention).z_start)
    return spec, X, y, state
