"""The hierarchical binary latent tree (HBLT) of paper Sec. 5 and Theorem 5 (a reconstruction).

The paper's slides draw the model only as a schematic: an observed class label ``y0`` at the root,
unobserved binary latent variables below it, and the observed tokens as binary leaves,
``y_l = 1`` meaning that token ``l`` appears in the sequence (the label's ``D`` values are ours). Theorem 5 then states
``P[l | m] ~ 1 - H/L`` with ``H`` the height of the common latent ancestor (CLA) of the
tokens ``l`` and ``m`` and ``L`` the height of the hierarchy. The exact conditional
tables and the exact statement are not available to us (``paper.md`` Q4); this module
implements the most likely reading, the polarity parameterisation of Tian et al.'s
earlier latent-tree work:

* a complete tree of height ``L`` (``tree_height``) and branching ``B``: the root ``y0`` at
  height ``L``, ``B**(L-h)`` binary latents at height ``h = 1..L-1``, ``B**L`` leaves at
  height 0;
* every edge is the same binary channel with polarity ``rho``:
  ``P[child=1 | parent=1] - P[child=1 | parent=0] = rho``. By default it is symmetric,
  ``P[child = parent] = (1 + rho)/2``; ``off_rate = P[child=1 | parent=0]`` makes it
  asymmetric (``off_rate=0`` is an "inheritance" model where a child can only be on
  when its parent is);
* ``y0`` is uniform on ``{0..D-1}`` and acts on root child ``a`` like a parent that is on
  when bit ``a mod n_bits`` of ``y0`` is set (off otherwise), ``n_bits = floor(log2 D)``. For ``D = 2`` the
  root is a fair binary latent; for ``D = 2**B`` the root's children are independent
  fair bits.

With the symmetric channel and fair marginals the co-occurrence is exactly
``(1 + rho**(2H))/2`` (:func:`cooccurrence_closed_form`), which equals ``1 - H/L`` up to
``H(2H-1)/(2L^2)`` when ``rho = 1 - 1/L`` (:func:`approximation_error_bound`): the
paper's form is the ``H << L`` regime of this model.

The Fig. 5 simulation (:func:`association_dynamics`) drives the JoMA nonlinear dynamics
``dv/dt = (mu - v) o exp(v^2/2)`` (paper, Theorem 4) with targets
``mu_l = scale * P[l | m]`` taken from the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import floor, log2

import numpy as np
from scipy.integrate import quad
from scipy.special import softmax

from joma_lib.theory.dynamics import integrate_nonlinear
from joma_lib.base.validation import as_finite_array, check_float, check_int, check_times

MAX_ENUMERATION_NODES = 18
"""Exact enumeration sums over ``D * 2**N`` configurations of the ``N`` binary nodes: keep it small."""


@dataclass(frozen=True)
class HBLT:
    """A complete hierarchical binary latent tree (see the module docstring for the model).

    Attributes:
        tree_height: height ``L >= 1`` of the root; leaves sit at height 0.
        branching: children per node, ``B >= 2``.
        n_labels: number ``D >= 2`` of values of the root label ``y0``.
        rho: polarity of every edge, ``P[on | parent on] - P[on | parent off]``, in ``(0, 1]``.
        off_rate: ``P[child on | parent off]``; ``None`` means the symmetric channel ``(1 - rho)/2``.
            Needs ``off_rate + rho <= 1``.
    """

    tree_height: int
    branching: int = 2
    n_labels: int = 2
    rho: float = 0.9
    off_rate: float | None = None

    def __post_init__(self) -> None:
        check_int("tree_height", self.tree_height, 1, 30)
        check_int("branching", self.branching, 2, 64)
        check_int("n_labels", self.n_labels, 2, 2**16)
        check_float("rho", self.rho, 0.0, 1.0, low_open=True)
        if self.off_rate is not None:
            check_float("off_rate", self.off_rate, 0.0, 1.0 - self.rho)

    @property
    def p_off(self) -> float:
        """``P[child = 1 | parent = 0]``."""
        return (1.0 - self.rho) / 2 if self.off_rate is None else float(self.off_rate)

    @property
    def p_on(self) -> float:
        """``P[child = 1 | parent = 1] = p_off + rho``."""
        return self.p_off + self.rho

    @property
    def n_leaves(self) -> int:
        """Number of tokens ``B**L``."""
        return self.branching**self.tree_height

    def channel(self) -> np.ndarray:
        """The edge channel ``R[parent, child] = P[child | parent]`` (2 x 2, rows sum to 1)."""
        return np.array([[1 - self.p_off, self.p_off], [1 - self.p_on, self.p_on]])

    def label_code(self) -> np.ndarray:
        """``C[a, d] = 1`` when label ``d`` acts on root child ``a`` like a parent that is on.

        That is bit ``a mod n_bits`` of ``d``, ``n_bits = floor(log2 D)``.
        """
        n_bits = max(1, floor(log2(self.n_labels)))
        a = np.arange(self.branching)[:, None] % n_bits
        d = np.arange(self.n_labels)[None, :]
        return ((d >> a) & 1).astype(float)

    def leaf_index(self, name: str, value: object) -> int:
        """Validate a leaf (token) index."""
        return check_int(name, value, 0, self.n_leaves - 1)


def cla_height(tree: HBLT, l: int, m: int) -> int:
    """Height ``H`` of the common latent ancestor of leaves ``l`` and ``m`` (0 if ``l == m``, ``L`` for the root)."""
    l, m = tree.leaf_index("l", l), tree.leaf_index("m", m)
    h = 0
    while l != m:
        l, m, h = l // tree.branching, m // tree.branching, h + 1
    return h


def cla_height_matrix(tree: HBLT) -> np.ndarray:
    """``H[l, m]`` for every pair of leaves."""
    if tree.n_leaves > 4096:
        raise ValueError(f"cla_height_matrix needs at most 4096 leaves, the tree has {tree.n_leaves}")
    idx = np.arange(tree.n_leaves)
    H = np.zeros((tree.n_leaves, tree.n_leaves), dtype=int)
    for h in range(1, tree.tree_height + 1):
        block = idx // tree.branching**h
        prev = idx // tree.branching ** (h - 1)
        H[(block[:, None] == block[None, :]) & (prev[:, None] != prev[None, :])] = h
    return H


def _on_given_label(tree: HBLT, height: int) -> np.ndarray:
    """``q[a, d] = P[node at `height` in root subtree a is on | y0 = d]``, by passing messages down the path."""
    R = tree.channel()
    parent_on = tree.label_code()  # the root acts on its children as a parent that is on or off
    down = np.linalg.matrix_power(R, tree.tree_height - 1 - height)
    q = parent_on[:, :, None] * R[1] + (1 - parent_on[:, :, None]) * R[0]  # children of the root: (a, d, state)
    return (q @ down)[:, :, 1]


def cooccurrence_exact(tree: HBLT, l: int, m: int) -> float:
    """Exact ``P[y_l = 1 | y_m = 1]`` (Theorem 5) by message passing through the common ancestor.

    With ``gamma`` the CLA at height ``H < L``, the leaves are independent given ``y_gamma``, so
    ``P[l, m] = sum_{y_gamma} P[y_gamma] P[l | y_gamma] P[m | y_gamma]`` with ``P[leaf | y_gamma] = (R^H)[y_gamma, 1]``.
    When the CLA is the root, the sum runs over the label ``y0`` instead.
    """
    l, m = tree.leaf_index("l", l), tree.leaf_index("m", m)
    H = cla_height(tree, l, m)
    if H == 0:
        return 1.0
    subtree = tree.branching ** (tree.tree_height - 1)
    if H == tree.tree_height:
        q = _on_given_label(tree, 0)
        q_l, q_m = q[l // subtree], q[m // subtree]
        return float(np.mean(q_l * q_m) / np.mean(q_m))
    p_gamma = float(np.mean(_on_given_label(tree, H)[l // subtree]))
    prior = np.array([1 - p_gamma, p_gamma])
    to_leaf = np.linalg.matrix_power(tree.channel(), H)[:, 1]
    return float(prior @ to_leaf**2 / (prior @ to_leaf))


def cooccurrence_matrix(tree: HBLT) -> np.ndarray:
    """``P[l, m] = P[y_l = 1 | y_m = 1]`` for every pair of leaves (diagonal 1).

    The value depends only on the CLA height and the root subtrees of ``l`` and ``m``, so
    :func:`cooccurrence_exact` runs once per distinct triple.
    """
    H = cla_height_matrix(tree)
    n = tree.n_leaves
    subtree = np.arange(n) // tree.branching ** (tree.tree_height - 1)
    keys = np.stack([H, np.broadcast_to(subtree[:, None], H.shape), np.broadcast_to(subtree, H.shape)], axis=-1)
    _, first, inverse = np.unique(keys.reshape(-1, 3), axis=0, return_index=True, return_inverse=True)
    values = np.array([cooccurrence_exact(tree, int(i // n), int(i % n)) for i in first])
    return values[inverse.ravel()].reshape(n, n)


def cooccurrence_enumerate(tree: HBLT, l: int, m: int) -> float:
    """``P[y_l = 1 | y_m = 1]`` by summing the joint distribution over every configuration.

    Independent of the message passing in :func:`cooccurrence_exact`; only for trees with
    at most ``MAX_ENUMERATION_NODES`` binary nodes (``B + B^2 + ... + B^L``).
    """
    l, m = tree.leaf_index("l", l), tree.leaf_index("m", m)
    B, L = tree.branching, tree.tree_height
    sizes = [B**k for k in range(1, L + 1)]  # level k = 1..L below the root; level L holds the leaves
    n_nodes = sum(sizes)
    if n_nodes > MAX_ENUMERATION_NODES:
        raise ValueError(f"enumeration needs at most {MAX_ENUMERATION_NODES} binary nodes, the tree has {n_nodes}")
    states = ((np.arange(2**n_nodes)[:, None] >> np.arange(n_nodes)) & 1).astype(bool)
    R = tree.channel()
    offsets = np.cumsum([0] + sizes)
    joint = np.zeros(len(states))
    for d in range(tree.n_labels):
        prob = np.full(len(states), 1.0 / tree.n_labels)
        parent = np.broadcast_to(tree.label_code()[:, d].astype(bool), (len(states), B))
        for k, size in enumerate(sizes):
            level = states[:, offsets[k]:offsets[k] + size]
            p_on = R[parent.astype(int), 1]
            prob = prob * np.prod(np.where(level, p_on, 1 - p_on), axis=1)
            if k + 1 < len(sizes):
                parent = np.repeat(level, B, axis=1)
        joint += prob
    leaves = states[:, offsets[-2]:]
    both = joint[leaves[:, l] & leaves[:, m]].sum()
    return float(both / joint[leaves[:, m]].sum())


def cooccurrence_closed_form(rho: float, H: int, marginal: float = 0.5) -> float:
    """Closed form of ``P[l | m]`` for the symmetric channel, CLA at height ``H`` with ``P[y_gamma = 1] = marginal``.

    In spins ``s = 2y - 1`` the channel gives ``E[s_leaf | s_gamma] = rho^H s_gamma``; with ``e = 2 marginal - 1``,
    ``P[l | m] = (1 + 2 rho^H e + rho^(2H)) / (2 (1 + rho^H e))``, i.e. ``(1 + rho^(2H))/2`` for fair latents.
    """
    rho = check_float("rho", rho, 0.0, 1.0, low_open=True)
    H = check_int("H", H, 0)
    m = check_float("marginal", marginal, 0.0, 1.0, low_open=True)
    r = rho**H
    # the same ratio with 1 + 2 r e + r^2 = (1 - r)^2 + 4 r m and 1 + r e = (1 - r) + 2 r m: no 0/0 at rho = 1, m -> 0
    return ((1 - r) ** 2 + 4 * r * m) / (2 * ((1 - r) + 2 * r * m))


def _check_heights(H: object, L: int) -> np.ndarray:
    """Heights ``H`` (an integer or an array of integers in ``[0, L]``) as float64; ValueError naming ``H`` else."""
    try:
        heights = np.asarray(H)
        valid = heights.dtype.kind in "iu" and not np.any(heights < 0) and not np.any(heights > L)
    except ValueError:  # a ragged nesting of lists
        valid = False
    if not valid:
        raise ValueError(f"H must be an integer or an array of integers in [0, L] = [0, {L}], got {H!r}")
    return heights.astype(np.float64)


def cooccurrence_approx(H: int | np.ndarray, L: int) -> np.ndarray:
    """The paper's approximation ``P[l | m] ~ 1 - H/L`` (Theorem 5), for integer heights ``H`` in ``[0, L]``."""
    L = check_int("L", L, 1)
    H = _check_heights(H, L)
    return 1.0 - H / L


def approximation_error_bound(H: int | np.ndarray, L: int) -> np.ndarray:
    """Bound on ``(1 + rho^(2H))/2 - (1 - H/L)`` for ``rho = 1 - 1/L`` and integer ``H`` in ``[0, L]``: it lies in
    ``[0, H(2H-1)/(2L^2)]``.

    Proof: ``1 - n x <= (1 - x)^n <= 1 - n x + n(n-1) x^2 / 2`` for ``x in [0, 1]``; take ``n = 2H``, ``x = 1/L``.
    The bound is ``<= (H/L)^2``, small against ``H/L`` only when ``H << L``: the regime the paper claims.
    """
    L = check_int("L", L, 1)
    H = _check_heights(H, L)
    return H * (2 * H - 1) / (2 * L * L)


@dataclass(frozen=True)
class HBLTSample:
    """Samples of the tree: the root label of each sequence and which tokens appear in it."""

    labels: np.ndarray  # (n,) int, values of y0
    leaves: np.ndarray  # (n, n_leaves) bool, leaves[i, l] = token l appears in sequence i

    def bags(self) -> list[np.ndarray]:
        """Each sequence as its bag of tokens (sorted token indices)."""
        return [np.flatnonzero(row) for row in self.leaves]


def sample_hblt(tree: HBLT, n: int, seed: int = 0) -> HBLTSample:
    """Draw ``n`` sequences top-down: ``y0`` uniform, then every node through the edge channel."""
    n = check_int("n", n, 1, 10**7)
    if n * tree.n_leaves > 5 * 10**8:
        raise ValueError(f"n * n_leaves must be <= 5e8 (memory), got {n} * {tree.n_leaves}")
    rng = np.random.default_rng(check_int("seed", seed, 0))
    labels = rng.integers(tree.n_labels, size=n)
    parent = tree.label_code()[:, labels].T.astype(bool)  # (n, B): the root's effect on its children
    for _ in range(tree.tree_height):
        p_on = np.where(parent, tree.p_on, tree.p_off)
        level = rng.random(p_on.shape) < p_on
        parent = np.repeat(level, tree.branching, axis=1)
    return HBLTSample(labels=labels, leaves=level)


def cooccurrence_monte_carlo(leaves: np.ndarray, l: int, m: int) -> tuple[float, float]:
    """Monte-Carlo ``P[y_l = 1 | y_m = 1]`` from sampled leaves, with its binomial standard error."""
    leaves = np.asarray(leaves, dtype=bool)
    if leaves.ndim != 2:
        raise ValueError(f"leaves must be a 2-D array (samples x tokens), got shape {leaves.shape}")
    l = check_int("l", l, 0, leaves.shape[1] - 1)
    m = check_int("m", m, 0, leaves.shape[1] - 1)
    with_m = leaves[:, m]
    n_m = int(with_m.sum())
    if n_m == 0:
        raise ValueError(f"token m={m} never appears in the sample; draw more samples")
    p = float(leaves[with_m, l].mean())
    return p, float(np.sqrt(max(p * (1 - p), 1.0 / n_m) / n_m))


# --- Fig. 5: association dynamics driven by the tree ------------------------------------------


def association_targets(tree: HBLT, m: int, scale: float = 3.0) -> np.ndarray:
    """Targets ``mu_l = scale * P[l | m]`` of the nonlinear dynamics for query ``m`` (entry ``m`` set to 0).

    Reconstruction (book/fig5.md states it as its assumption): the mean of all contexts of query ``m``, whose
    ``l``-th entry is ``P[l | m]``, scaled. Theorem 3 rests a linear node with weight decay ``lambda`` at
    ``Delta / lambda``, ``Delta_l = E[g | l, m] P[l | m]``: these targets are that point when the discriminancy
    ``E[g | l, m]`` is the same for every token (``scale = E[g | l, m] / lambda``); a nonlinear node rests near the
    centre of the cluster it fires for instead.
    """
    m = tree.leaf_index("m", m)
    scale = check_float("scale", scale, 0.0, 10.0, low_open=True)
    mu = scale * np.array([cooccurrence_exact(tree, l, m) for l in range(tree.n_leaves)])
    mu[m] = 0.0
    return mu


def _check_targets(mu: np.ndarray) -> np.ndarray:
    mu = as_finite_array("mu", mu)
    if mu.ndim != 1 or not np.all(np.isfinite(mu)) or np.any(mu < 0) or np.any(mu > 10):
        raise ValueError(f"mu must be a 1-D array of finite targets in [0, 10], got {mu!r}")
    return mu


def association_dynamics(mu: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``v(t)`` solving ``dv/dt = (mu - v) o exp(v^2/2)``, ``v(0) = 0`` (paper, Theorem 4, exp attention).

    Integrated by :func:`joma_lib.theory.dynamics.integrate_nonlinear` in Theorem 4's convergence rate
    ``omega = ln(1/delta)``, ``delta = 1 - v/mu``. Components with ``mu = 0`` (the query itself) stay
    at 0. Returns an array ``(len(times), len(mu))``.
    """
    mu = _check_targets(mu)
    times = check_times("times", times)
    v = np.zeros((times.size, mu.size))
    active = mu > 0
    if active.any():
        v[:, active] = integrate_nonlinear(mu[active], times).v
    return v


def association_time(mu: float, fraction: float = 0.9) -> float:
    """Time for ``v`` to reach ``fraction * mu`` under ``dv/dt = (mu - v) exp(v^2/2)`` from 0.

    Separating variables: ``t = int_0^{fraction} exp(-mu^2 w^2 / 2) / (1 - w) dw`` (``v = mu w``),
    which decreases in ``mu``: tokens with a higher co-occurrence are associated first (Theorem 4).
    """
    mu = check_float("mu", mu, 0.0, 10.0, low_open=True)
    fraction = check_float("fraction", fraction, 0.0, 1.0, low_open=True, high_open=True)
    value, _ = quad(lambda w: np.exp(-mu * mu * w * w / 2) / (1 - w), 0.0, fraction, epsabs=1e-13, epsrel=1e-12)
    return float(value)


def attention_from_association(mu: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Attention of the query over tokens, ``b_l ∝ P[l | m] exp(v_l^2 / 2)`` (Theorem 1, exp attention, zero init).

    ``mu`` is proportional to ``P[l | m]`` (the expected presence of token ``l``); entries with
    ``mu = 0`` (the query itself) get no attention. ``v`` may be one state or a trajectory
    (last axis = tokens); rows are normalised to sum to 1.
    """
    mu = _check_targets(mu)
    if not np.any(mu > 0):
        raise ValueError(f"mu must have at least one entry > 0 (a token to attend to), got {mu!r}")
    v = as_finite_array("v", v, min_ndim=1)
    if v.shape[-1] != mu.size:
        raise ValueError(f"v must end with an axis of {mu.size} tokens, got shape {v.shape}")
    logits = np.where(mu > 0, np.log(np.where(mu > 0, mu, 1.0)) + v**2 / 2, -np.inf)
    return softmax(logits, axis=-1)
