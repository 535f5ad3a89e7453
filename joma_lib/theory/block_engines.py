"""Two more training engines for the block of :mod:`joma_lib.theory.block`, beside its torch SGD/Adam
:func:`joma_lib.theory.block.train`.

* :func:`train_sgd_numpy`: the same SGD in numpy with hand-written gradients (same arguments, same
  :class:`joma_lib.theory.block.Trajectory`, equal to rounding), about ten times faster on the toy block of the
  Theorem 1 widget;
* :func:`gradient_flow`: ``d theta/dt = -eta grad L`` integrated by ``scipy.integrate.solve_ivp`` in float64,
  for checks of Theorem 1 that are exact up to the solver tolerance.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from scipy.integrate import solve_ivp
from scipy.special import expit

from joma_lib.theory.attention_kinds import attention_kind
from joma_lib.theory.block import (
    DTYPE,
    BlockSpec,
    BlockState,
    TorchBlock,
    Trajectory,
    check_bags,
    check_labels,
    check_state,
    diverged_error,
    learning_rates,
    recorded_steps,
    training_length,
)
from joma_lib.base.validation import check_choice, check_float


def _identity_grad(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return u, np.ones_like(u)


def _relu_grad(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``max(u, 0)`` and its derivative ``1[u > 0]`` (0 at ``u = 0``, as torch's)."""
    return np.maximum(u, 0.0), (u > 0).astype(u.dtype)


def _tanh_grad(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.tanh(u)
    return t, 1.0 - t * t


def _silu_grad(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``u sigmoid(u)`` and its derivative ``sigmoid(u) (1 + u (1 - sigmoid(u)))``."""
    sig = expit(u)
    return u * sig, sig * (1.0 + u * (1.0 - sig))


ACTIVATION_GRADS: dict[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "identity": _identity_grad, "relu": _relu_grad, "tanh": _tanh_grad, "silu": _silu_grad,
}
"""``(phi(u), phi'(u))`` in numpy for every activation of :data:`joma_lib.theory.block.ACTIVATIONS` (same names): the
hand-written backward pass of :func:`train_sgd_numpy`."""


def train_sgd_numpy(spec: BlockSpec, X: np.ndarray, y: np.ndarray, state: BlockState, steps: int,
                    lr_z: float = 0.1, lr_w: float = 0.1, lr_top: float | None = None,
                    record_every: int = 1) -> Trajectory:
    """:func:`joma_lib.theory.block.train` with ``optimizer="sgd"``, in numpy with hand-written gradients (same
    arguments, same :class:`Trajectory`, equal to rounding); about ten times faster on the toy block of the Theorem 1
    widget.

    Forward pass of the block (the paper's setting, Theorem 1), per replica, bags ``X`` (M_C, N), ``s = z/tau``::

        b = X * sigma(s)      (normalised kinds: divided by A = sum_l X_l sigma(s_l), per sample)
        f = U_C b + u_q,   u = W^T f,   h = phi(u),   o = W_out^T h   (o = h without a top layer)
        L = mean_n CE(o_n, y_n)

    with the kind's kernel ``sigma`` (its score, :attr:`joma_lib.theory.attention_kinds.AttentionKind.score`) and
    the normaliser ``A`` (1 for kinds that do not normalise). Backward pass (chain rule)::

        dL/do = (softmax(o) - onehot(y)) / N
        dL/dW_out = h (dL/do)^T,     dL/dh = W_out dL/do,    dL/du = dL/dh * phi'(u)
        dL/dW = f (dL/du)^T,         dL/db = U_C^T W dL/du
        dL/da = dL/db                (normalised: (dL/db - sum_l b_l dL/db_l) / A, with a = X sigma(s))
        dL/dz = sigma'(s) / tau * sum_n X * dL/da

    and the SGD update ``theta <- theta - lr dL/dtheta`` (``lr_z`` for ``z``, ``lr_w`` for ``W``, ``lr_top`` for
    ``W_out``). Only kinds with a registered ``score`` are supported (ValueError naming the kind otherwise). For
    normalised kinds (softmax, whose score is ``exp``) ``s`` is first shifted by its largest entry per replica, as the
    torch kernel does: ``sigma`` and ``sigma'`` both scale by ``exp(-max s)``, which cancels in ``b`` and in
    ``dL/dz``, and large logits no longer overflow.
    """
    check_state(spec, state)
    steps, record_every = training_length(state, steps, record_every)
    lr_z, lr_w, lr_top = learning_rates(lr_z, lr_w, lr_top)
    kind = attention_kind(spec.attention)
    if kind.score is None:
        raise ValueError(f"attention={spec.attention!r} has no numpy score (AttentionKind.score): train it with "
                         "joma_lib.theory.block.train")
    score, phi = kind.score, ACTIVATION_GRADS[spec.phi]
    X = check_bags(spec, X, state.n_replicas)
    y = check_labels(spec, y, X.shape[2])
    U_C, u_q = spec.embeddings()
    n = X.shape[2]
    targets = np.zeros((spec.n_classes, n))
    targets[y, np.arange(n)] = 1.0
    W, z = state.W.astype(float), state.z.astype(float)
    W_out = None if state.W_out is None else state.W_out.astype(float)
    record = recorded_steps(steps, record_every)
    times, zs, Ws, losses = [], [], [], []
    with np.errstate(over="ignore", invalid="ignore"):
        for step in range(steps + 1):
            s = z / spec.temperature
            if kind.normalized:  # exp score: sigma(s - m) = e^{-m} sigma(s), and e^{-m} cancels in b and in dL/dz
                s = s - s.max(axis=1, keepdims=True)
            sigma, dsigma = score(s)                                      # (R, M_C)
            b = X * sigma[..., None]                                      # a = X sigma(s), (R, M_C, N)
            A = b.sum(axis=1, keepdims=True) if kind.normalized else None  # the normaliser
            if A is not None:
                b = b / A
            f = U_C @ b + u_q[:, None]                                    # (R, d, N)
            h, dh_du = phi(W.swapaxes(1, 2) @ f)                          # (R, K, N)
            o = h if W_out is None else W_out.swapaxes(1, 2) @ h          # (R, C, N)
            o_max = o.max(axis=1, keepdims=True)
            e = np.exp(o - o_max)
            Z = e.sum(axis=1, keepdims=True)
            loss = (np.log(Z[:, 0]) + o_max[:, 0] - (o * targets).sum(axis=1)).mean(axis=1)  # (R,)
            if not np.all(np.isfinite(loss)):
                raise diverged_error(step, lr_z, lr_w)
            if step in record:
                times.append(step)
                Ws.append(W)  # the updates below make new arrays: no copy needed
                zs.append(z)
                losses.append(loss)
            if step == steps:
                break
            d_o = (e / Z - targets) / n
            d_u = (d_o if W_out is None else W_out @ d_o) * dh_du
            d_b = U_C.T @ (W @ d_u)
            if A is not None:  # from dL/db to dL/da
                d_b = (d_b - (b * d_b).sum(axis=1, keepdims=True)) / A
            d_z = dsigma / spec.temperature * (X * d_b).sum(axis=2)
            if W_out is not None:
                W_out = W_out - lr_top * (h @ d_o.swapaxes(1, 2))
            W = W - lr_w * (f @ d_u.swapaxes(1, 2))
            z = z - lr_z * d_z
    return Trajectory(np.asarray(times, dtype=float), np.stack(zs), np.stack(Ws), np.stack(losses))

FLOW_METHODS = ("dop853", "rk4")


def gradient_flow(spec: BlockSpec, X: np.ndarray, y: np.ndarray, state: BlockState, t_eval: np.ndarray,
                  lr_z: float = 1.0, lr_w: float = 1.0, lr_top: float | None = None, method: str = "dop853",
                  rtol: float = 1e-10, atol: float = 1e-12, dt: float = 0.02) -> Trajectory:
    """Integrate the gradient flow ``dW/dt = -lr_w dL/dW``, ``dz/dt = -lr_z dL/dz`` (and the top layer with
    ``lr_top``) from ``t = 0``, gradients by torch autograd in float64; record at the times ``t_eval``.

    This is the continuous dynamics of the paper's setting, for which Theorem 1 is exact. ``method="dop853"`` is
    scipy's adaptive 8th-order Runge-Kutta (``rtol``, ``atol``), for smooth ``phi``. ReLU makes the vector
    field discontinuous where a pre-activation crosses 0, and the adaptive solver then crawls; use
    ``method="rk4"``, the classical Runge-Kutta scheme with fixed step at most ``dt``.
    """
    check_state(spec, state)
    t_eval = np.asarray(t_eval, dtype=float)
    if t_eval.ndim != 1 or t_eval.size < 1 or t_eval[0] < 0 or np.any(np.diff(t_eval) <= 0) \
            or not np.all(np.isfinite(t_eval)):
        raise ValueError("t_eval must be a non-empty, strictly increasing 1-D array of finite times >= 0")
    check_choice("method", method, FLOW_METHODS)
    check_float("rtol", rtol, 0, low_open=True)
    check_float("atol", atol, 0, low_open=True)
    dt = check_float("dt", dt, 0, low_open=True)
    rates = learning_rates(lr_z, lr_w, lr_top)
    rates = (rates[1], rates[0], rates[2])  # order of the parameter list: W, z, W_out
    block = TorchBlock(spec, X, y, state.n_replicas)
    params = [torch.tensor(p, dtype=DTYPE) for p in (state.W, state.z, state.W_out) if p is not None]

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
