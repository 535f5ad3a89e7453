"""Theorem 1 of JoMA: the attention logits are a function of the MLP weights.

With orthonormal embeddings and ``v_k = U_C^T w_k``, gradient flow with learning rates ``eta_z`` (logits)
and ``eta_w`` (MLP) keeps ``G(z) - Q(V)`` constant in time, where (``r = eta_z / eta_w``, temperature ``tau``)

* linear attention:  ``G(z) = z^2``, ``Q(V) = r sum_k v_k^2``              (``tau`` cancels);
* exp attention:     ``G(z) = z``,   ``Q(V) = r/(2 tau) sum_k v_k^2``;
* softmax attention: ``G(z) = z``,   ``Q(V) = r/(2 tau) sum_k (v_k^2 - ||v_k||^2 b-bar)``, which needs the mean
  attention ``b-bar`` to stay constant and to factor out of the gradient (paper Theorem 1, softmax case).

``G`` and the coefficient of each kind are registered in :mod:`joma_lib.theory.attention_kinds`.
Squares act elementwise. The constant ``c = G(z(0)) - Q(V(0))`` is zero under zero initialisation.
Figure 2 of the paper checks the softmax case with the normalised correlation :func:`normalized_correlation`;
:func:`toy_check` (SGD) and :func:`flow_check` (gradient flow) check the theorem along a run of the toy block
:func:`theorem1_toy`; :func:`mean_attention` is the ``b-bar`` of the softmax case.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from joma_lib.theory.attention_kinds import AttentionKind, attention_kind
from joma_lib.theory.bags import dirichlet_bags
from joma_lib.theory.block import DTYPE, BlockSpec, BlockState, attention, check_bags, init_state, train
from joma_lib.theory.block_engines import gradient_flow, train_sgd_numpy
from joma_lib.base.validation import as_finite_array, check_broadcast, check_choice, check_float, check_int


def _check_common(attention: str, temperature: float, lr_ratio: float) -> tuple[AttentionKind, float, float]:
    return (attention_kind(attention), check_float("temperature (tau)", temperature, 0, low_open=True),
            check_float("lr_ratio (eta_z / eta_w)", lr_ratio, 0, low_open=True))


def _check_V(V: np.ndarray) -> np.ndarray:
    V = as_finite_array("V", V)
    if V.ndim < 2:
        raise ValueError(f"V must have shape (..., M_C, K), got {V.shape}")
    return V


def softmax_terms(V: np.ndarray, b_bar: np.ndarray, temperature: float = 1.0,
                  lr_ratio: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The two terms of the softmax prediction, each of shape (..., M_C):
    ``r/(2 tau) sum_k v_k^2`` (sum of squares) and ``-r/(2 tau) b-bar sum_k ||v_k||^2`` (mean attention)."""
    V = _check_V(V)
    kind, temperature, lr_ratio = _check_common("softmax", temperature, lr_ratio)
    b_bar = check_broadcast("b_bar (mean attention)", as_finite_array("b_bar", b_bar), V.shape[:-1], "V.shape[:-1]")
    scale = lr_ratio * kind.coefficient(temperature)
    with np.errstate(over="ignore", invalid="ignore"):
        sum_sq = (V**2).sum(axis=-1)
        given = {"V": V, "temperature": temperature, "lr_ratio": lr_ratio}
        return (_finite(scale * sum_sq, given),
                _finite(-scale * b_bar * sum_sq.sum(axis=-1, keepdims=True), {**given, "b_bar": b_bar}))


def mlp_potential(V: np.ndarray, attention: str, temperature: float = 1.0, lr_ratio: float = 1.0,
                  b_bar: np.ndarray | None = None) -> np.ndarray:
    """``Q(V)`` of Theorem 1, shape (..., M_C), from ``V`` (..., M_C, K) whose columns are ``v_k``.

    ``lr_ratio = eta_z / eta_w`` scales the whole right-hand side; ``b_bar`` (broadcastable to (..., M_C))
    is needed for normalised kinds (softmax) only. ``Q = r coef(tau) sum_k v_k^2``, minus ``r coef(tau) b-bar
    sum_k ||v_k||^2`` for normalised kinds, with the kind's coefficient ``coef(tau)``
    (:mod:`joma_lib.theory.attention_kinds`).
    """
    V = _check_V(V)
    kind, temperature, lr_ratio = _check_common(attention, temperature, lr_ratio)
    scale = lr_ratio * kind.coefficient(temperature)
    given = {"V": V, "temperature": temperature, "lr_ratio": lr_ratio}
    with np.errstate(over="ignore"):
        sum_sq = (V**2).sum(axis=-1)
    if not kind.normalized:
        with np.errstate(over="ignore"):
            return _finite(scale * sum_sq, given)
    if b_bar is None:
        raise ValueError(f"b_bar (the mean attention) is required for attention={attention!r}, got None")
    b_bar = check_broadcast("b_bar (mean attention)", as_finite_array("b_bar", b_bar), V.shape[:-1], "V.shape[:-1]")
    with np.errstate(over="ignore", invalid="ignore"):
        return _finite(scale * sum_sq - scale * b_bar * sum_sq.sum(axis=-1, keepdims=True), {**given, "b_bar": b_bar})


def attention_potential(z: np.ndarray, attention: str) -> np.ndarray:
    """``G(z)`` of the kind: ``z^2`` for linear attention, ``z`` for exp and softmax."""
    kind = attention_kind(attention)
    z = as_finite_array("z", z)
    with np.errstate(over="ignore"):
        return _finite(kind.potential(z), {"z": z})


def _finite(value: np.ndarray, given: dict[str, Any]) -> np.ndarray:
    """``value`` if every entry is finite; otherwise a ValueError naming the arguments ``given`` (name -> value) that
    overflowed it, with their sizes (the largest magnitude of an array)."""
    if not np.all(np.isfinite(value)):
        sizes = ", ".join(f"max |{name}| = {np.max(np.abs(x), initial=0.0):g}" if np.ndim(x) else f"{name} = {x:g}"
                          for name, x in given.items())
        raise ValueError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} too large: the result overflows "
                         f"float64, got {sizes}")
    return value


def mean_attention(spec: BlockSpec, z: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``b-bar = E_x[b]`` (R, M_C) for logits ``z`` (R, M_C): the mean attention of Theorem 1 (softmax)."""
    z = as_finite_array("z", z)
    if z.ndim != 2 or z.shape[1] != spec.n_context:
        raise ValueError(f"z must have shape (R, M_C) with M_C={spec.n_context}, got {z.shape}")
    X = check_bags(spec, X, z.shape[0])
    b = attention(torch.tensor(z, dtype=DTYPE), torch.tensor(X, dtype=DTYPE), spec.attention, spec.temperature)
    return b.mean(dim=2).numpy()


MIN_LOGIT_MOVE = 0.5
"""In every run that a claim of Theorem 1 rests on, some logit must move by at least 0.5 from its start
(:func:`logit_move`): a residual is only small, and a prediction of the logits only good, for a reason when the logits
moved (a run that stays where it started has a zero residual, and its logits correlate perfectly with themselves).
Measured from the start, not from 0: linear attention starts at ``z = 1``."""


def logit_move(z: np.ndarray) -> float:
    """The largest move of any logit from its start along a run, ``max_t |z(t) - z(0)|`` (``z``: time first).

    A small invariant residual says something only where this is not small: a run whose logits stay where they
    started has a residual of zero.
    """
    z = np.asarray(z, dtype=float)
    if z.ndim < 1 or z.shape[0] < 1:
        raise ValueError(f"z must have a time axis first with at least one point, got shape {z.shape}")
    return float(np.abs(z - z[0]).max())


def reference_mean_attention(spec: BlockSpec, z0: np.ndarray, X: np.ndarray) -> np.ndarray | None:
    """``b-bar`` at the start (R, M_C) for normalised kinds (Theorem 1's softmax case), None for the others."""
    return mean_attention(spec, z0, X) if attention_kind(spec.attention).normalized else None


def invariant_constant(z: np.ndarray, V: np.ndarray, attention: str, temperature: float = 1.0,
                       lr_ratio: float = 1.0, b_bar: np.ndarray | None = None) -> np.ndarray:
    """``G(z) - Q(V)``, shape (..., M_C): the quantity Theorem 1 says is the constant ``c``.

    ``z`` (..., M_C) and ``V`` (..., M_C, K) must agree: ``V.shape[:-1]`` equal to ``z.shape``.
    """
    G, Q = attention_potential(z, attention), mlp_potential(V, attention, temperature, lr_ratio, b_bar)
    if G.shape != Q.shape:
        raise ValueError(f"V must have shape z.shape + (K,), got z of shape {np.shape(z)} and V of shape "
                         f"{np.shape(V)}")
    return G - Q


def invariant_residual(z: np.ndarray, V: np.ndarray, attention: str, temperature: float = 1.0,
                       lr_ratio: float = 1.0, b_bar: np.ndarray | None = None) -> np.ndarray:
    """Relative drift of Theorem 1's constant along a trajectory.

    ``z`` (n, R, M_C) and ``V`` (n, R, M_C, K) are ``n`` recorded times of ``R`` replicas. Returns (n, R):
    ``max_l |G(z_l(t)) - Q_l(V(t)) - c_l| / max_{s,l} |G(z_l(s))|`` with ``c`` taken at ``t = 0``.
    It is 0 for the exact gradient flow and ``O(lr)`` for SGD (exp and linear attention).
    """
    z = np.asarray(z, dtype=float)
    if z.ndim != 3:
        raise ValueError(f"z must have shape (n_times, R, M_C), got {z.shape}")
    c = invariant_constant(z, V, attention, temperature, lr_ratio, b_bar)
    scale = np.abs(attention_potential(z, attention)).max(axis=(0, 2))
    return np.abs(c - c[0]).max(axis=2) / np.maximum(scale, np.finfo(float).tiny)


def predicted_logits(V: np.ndarray, z0: np.ndarray, V0: np.ndarray, attention: str, temperature: float = 1.0,
                     lr_ratio: float = 1.0, b_bar: np.ndarray | None = None) -> np.ndarray:
    """Theorem 1's prediction ``z-hat(t) = G^{-1}(Q(V(t)) + c)`` with ``c = G(z0) - Q(V0)``.

    For linear attention ``G^{-1}`` is the root with the sign of ``z0`` (valid while no logit crosses 0).
    """
    c = invariant_constant(z0, V0, attention, temperature, lr_ratio, b_bar)
    G_hat = mlp_potential(V, attention, temperature, lr_ratio, b_bar) + c
    return attention_kind(attention).inverse_potential(G_hat, np.asarray(z0, dtype=float))


def normalized_correlation(a: np.ndarray, b: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """NC of paper Fig. 2: the Pearson correlation of ``a`` and ``b`` along the last axis,
    ``<a - mean a, b - mean b> / ((||a - mean a|| + eps)(||b - mean b|| + eps))``."""
    a, b = as_finite_array("a", a), as_finite_array("b", b)
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise ValueError(f"a and b must broadcast together, got shapes {a.shape} and {b.shape}") from None
    if a.ndim < 1 or a.shape[-1] < 2:
        raise ValueError(f"a and b need at least 2 entries along the last axis, got shape {a.shape}")
    eps = check_float("eps", eps, 0)
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    return (a * b).sum(axis=-1) / ((np.linalg.norm(a, axis=-1) + eps) * (np.linalg.norm(b, axis=-1) + eps))


def theorem1_toy(attention: str = "exp", phi: str = "identity", seed: int = 0, n_samples: int = 64,
                  concentration: float = 1.0, temperature: float = 1.0,
                  ) -> tuple[BlockSpec, np.ndarray, np.ndarray, BlockState]:
    """A small block for Theorem 1 checks: ``M_C = 8``, ``K = 6``, 4 classes, ``d = 12``, trainable top layer,
    a random rotation of the coordinate embeddings, Dirichlet bags (:func:`joma_lib.theory.bags.dirichlet_bags`).

    ``W`` and ``W_out`` start at scale 0.3 so that the logits move by ``O(1)`` within a few hundred SGD steps of
    learning rate 0.1 (the residual check is then not vacuous). ``z(0) = 0`` except for linear attention,
    where ``z(0) = 1``: at ``z = 0`` its output ``b`` starts at zero, and its invariant fixes ``z`` only up to
    sign, which :func:`predicted_logits` takes from ``z(0)`` (undefined at 0).
    Returns ``(spec, X, y, state)`` with one replica.
    """
    spec = BlockSpec(n_context=8, d=12, n_hidden=6, n_classes=4, attention=attention, phi=phi,
                     temperature=temperature, top_layer=True, embedding_seed=3)
    X, y = dirichlet_bags(8, 4, n_samples, concentration=concentration, signal=4.0, seed=seed)
    state = init_state(spec, [seed + 1000], w_scale=0.3, w_out_scale=0.3, z_scale=0.0,
                       z_offset=attention_kind(attention).z_start)
    return spec, X, y, state


TOY_ENGINES = ("torch", "numpy")


def _toy_invariant(spec: BlockSpec, X: np.ndarray, z: np.ndarray, V: np.ndarray, lr_ratio: float
                   ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """What Theorem 1's invariant reads along a toy run (its kind, temperature and, for softmax, ``b-bar`` = the
    mean attention at ``t = 0``), and the run's ``residual`` (scaled by ``lr_ratio``) and ``residual_unscaled``."""
    kw: dict[str, Any] = {"attention": spec.attention, "temperature": spec.temperature,
                          "b_bar": reference_mean_attention(spec, z[0], X)}
    return kw, {"residual": invariant_residual(z, V, lr_ratio=lr_ratio, **kw)[:, 0],
                "residual_unscaled": invariant_residual(z, V, lr_ratio=1.0, **kw)[:, 0]}


def toy_check(attention: str = "exp", phi: str = "identity", seed: int = 0, concentration: float = 1.0,
              steps: int = 400, lr_w: float = 0.1, lr_ratio: float = 1.0, record_every: int = 1,
              temperature: float = 1.0, engine: str = "torch") -> dict[str, np.ndarray]:
    """Train the toy block (:func:`theorem1_toy`) with SGD, ``lr_z = lr_ratio * lr_w``, and
    compare its logits with Theorem 1 (``b-bar`` = mean attention at ``t = 0`` for softmax); ``temperature``
    is the attention's ``tau``. ``engine="torch"`` trains with :func:`joma_lib.theory.block.train` (autograd, the
    reference), ``"numpy"`` with :func:`joma_lib.theory.block_engines.train_sgd_numpy` (hand-written gradients, the same
    run up to rounding, faster; kinds with a numpy score only).

    Returns ``steps``; ``z`` and ``z_hat`` (n, M_C); ``nc`` = NC(z-hat, z) (n,); ``residual`` (the invariant
    scaled by ``eta_z / eta_w``) and ``residual_unscaled`` (ratio ignored), see
    :func:`invariant_residual`.
    """
    lr_ratio = check_float("lr_ratio", lr_ratio, 0, low_open=True)
    lr_w = check_float("lr_w", lr_w, 0, low_open=True)
    run = train if check_choice("engine", engine, TOY_ENGINES) == "torch" else train_sgd_numpy
    spec, X, y, state = theorem1_toy(attention, phi, check_int("seed", seed, 0), concentration=concentration,
                                      temperature=temperature)
    traj = run(spec, X, y, state, steps, lr_z=lr_ratio * lr_w, lr_w=lr_w, record_every=record_every)
    V = traj.V(spec.embeddings()[0])
    kw, residuals = _toy_invariant(spec, X, traj.z, V, lr_ratio)
    z_hat = predicted_logits(V, traj.z[0], V[0], lr_ratio=lr_ratio, **kw)[:, 0]
    return {"steps": traj.times, "z": traj.z[:, 0], "z_hat": z_hat, "nc": normalized_correlation(z_hat, traj.z[:, 0]),
            **residuals}


def flow_check(attention: str = "exp", phi: str = "identity", lr_ratio: float = 1.0, t_end: float = 20.0,
               n_points: int = 21) -> dict[str, np.ndarray]:
    """Gradient flow of the toy block (``eta_w = 1``, ``eta_z = lr_ratio``) and Theorem 1 along it.

    Smooth ``phi`` use DOP853 at ``rtol = 1e-10``; ReLU uses RK4 with ``dt = 0.02`` (its vector field jumps
    where a pre-activation crosses 0, which an adaptive solver resolves only at great cost). Returns
    ``times``, ``z`` (n, M_C), ``V`` (n, M_C, K), ``residual`` (scaled by ``lr_ratio``) and
    ``residual_unscaled`` (n,).
    For softmax ``b-bar`` is the mean attention at ``t = 0``, as in :func:`toy_check`.
    """
    lr_ratio = check_float("lr_ratio", lr_ratio, 0, low_open=True)
    times = np.linspace(0, check_float("t_end", t_end, 0, low_open=True), check_int("n_points", n_points, 2))
    spec, X, y, state = theorem1_toy(attention, phi)
    traj = gradient_flow(spec, X, y, state, times, lr_z=lr_ratio, lr_w=1.0, method="rk4" if phi == "relu" else "dop853")
    V = traj.V(spec.embeddings()[0])
    return {"times": traj.times, "z": traj.z[:, 0], "V": V[:, 0], **_toy_invariant(spec, X, traj.z, V, lr_ratio)[1]}
