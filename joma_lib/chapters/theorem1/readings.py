"""The numbers the Theorem 1 page reads off its checks, each under the glue name its prose uses.

The page glues them and asserts, in hidden cells, what its prose says about them; the computations live here so
that the page stays short and a test can feed them data with a known answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from joma_lib.theory.block import train
from joma_lib.theory.invariants import theorem1_toy
from joma_lib.kit.registry import FigureData

FlowRow = tuple[str, str, float, float, float, float]
"""One gradient-flow check of the page: attention, activation, ``eta_z / eta_w``, largest movement
``max |z(t) - z(0)|`` of a logit, largest residual with the ratio, largest residual with the ratio ignored."""


def flow_readings(rows: Sequence[FlowRow]) -> dict[str, float]:
    """The gradient-flow table: ``thm1-flow-zmin`` (the smallest movement ``max |z(t) - z(0)|`` of a run: every run
    moves its logits at least that far), ``thm1-flow-smooth`` and
    ``thm1-flow-relu`` (the largest residual with a smooth activation and with ReLU), ``thm1-flow-unscaled`` (the
    smallest residual with the ratio ignored, over the runs at unequal rates)."""
    # numpy's reductions: Python's min and max skip a NaN that does not come first, and the prose would read past it
    return {"thm1-flow-zmin": float(np.min([row[3] for row in rows])),
            "thm1-flow-smooth": float(np.max([row[4] for row in rows if row[1] != "relu"])),
            "thm1-flow-relu": float(np.max([row[4] for row in rows if row[1] == "relu"])),
            "thm1-flow-unscaled": float(np.min([row[5] for row in rows if row[2] != 1]))}


def residual_readings(data: FigureData) -> dict[str, float]:
    """``c-invariant-residual`` (residual: attention x phi x learning rate x time):

    * ``thm1-sgd-exact-max``: the largest residual of linear and exp attention;
    * ``thm1-sgd-exact-zmove``: the smallest move of the logits in their runs, ``max |z(t) - z(0)|`` (the logits must
      move);
    * ``thm1-sgd-halving``: the worst ``|r(lr) / r(lr / 2) - 2|`` of their final residuals;
    * ``thm1-sgd-softmax-min``: softmax's smallest final residual.
    """
    kinds = list(data["attentions"])
    exact = [kinds.index("linear"), kinds.index("exp")]
    r = data["residual"][exact]
    return {"thm1-sgd-exact-max": float(r.max()), "thm1-sgd-exact-zmove": float(data["max_z_move"][exact].min()),
            "thm1-sgd-halving": float(np.abs(r[:, :, 0, -1] / r[:, :, 1, -1] - 2).max()),
            "thm1-sgd-softmax-min": float(data["residual"][kinds.index("softmax"), :, :, -1].min())}


def linear_step(lr: float = 0.1) -> dict[str, np.ndarray]:
    """One SGD step of the library (:func:`joma_lib.theory.block.train`, torch autograd) on the toy block with linear
    attention and tanh, from its initial state (``z = 1``; the other weights are those of the exp toy): the change
    ``dz`` of the logits (M_C,), the changes ``dv`` of the projected MLP weights (M_C, K) and the change ``drift``
    of the linear invariant ``z^2 - sum_k v_k^2`` (M_C,)."""
    spec, X, y, state = theorem1_toy("linear", "tanh")
    U_C = spec.embeddings()[0]
    step = train(spec, X, y, state, 1, lr_z=lr, lr_w=lr)
    z, V = step.z[:, 0], step.V(U_C)[:, 0]
    return {"dz": z[1] - z[0], "dv": V[1] - V[0],
            "drift": (z[1] ** 2 - z[0] ** 2) - (V[1] ** 2 - V[0] ** 2).sum(axis=1)}
