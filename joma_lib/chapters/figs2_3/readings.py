"""The numbers the figs2_3 page reads off its figures, each under the glue name its prose uses.

The page glues them and asserts, in hidden cells, what its prose says about them; the computations live here so
that the page stays short and a test can feed them data with a known answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from joma_lib.chapters.figs2_3.figures import FIG2_NC_FROM, fig2_min_nc
from joma_lib.chapters.figs2_3.grid import smallest_nc
from joma_lib.theory.block_engines import train_sgd_numpy
from joma_lib.theory.invariants import invariant_residual, mean_attention, theorem1_toy, toy_check
from joma_lib.kit.registry import FigureData


def fig2_readings(gaussian: FigureData, random: FigureData) -> dict[str, float]:
    """Fig. 2 (``fig2a``: Gaussian-shaped X, ``fig2b``: random X):

    * ``fig2a-nc-min``, ``fig2b-nc-min``: the smallest NC(z-hat, z) from step 100 on, over the seeds;
    * ``fig2-drift-low``, ``fig2-drift-high``: the smallest and largest drift of the mean attention over all runs;
    * ``fig2a-mean-attn-max``: the largest final |NC| of the mean-attention term alone, Gaussian X;
    * ``fig2b-mean-attn-min``: the smallest final NC of that term, random X.
    """
    drift = np.concatenate([gaussian["b_bar_drift"], random["b_bar_drift"]])
    return {"fig2a-nc-min": fig2_min_nc(gaussian), "fig2b-nc-min": fig2_min_nc(random),
            "fig2-drift-low": float(drift.min()), "fig2-drift-high": float(drift.max()),
            "fig2a-mean-attn-max": float(np.abs(gaussian["nc_mean_attn"][:, -1]).max()),
            "fig2b-mean-attn-min": float(random["nc_mean_attn"][:, -1].min())}


def softmax_nc_by_concentration(concentrations: Sequence[float], seeds: Sequence[int] = (0, 1, 2),
                                record_every: int = 4) -> np.ndarray:
    """Smallest NC(z-hat, z) from step 100 on of softmax attention on the toy block (identity activation, 400 SGD
    steps, :func:`joma_lib.theory.invariants.toy_check`), per Dirichlet concentration of the bags (rows) and seed
    (columns)."""
    def smallest(run: dict[str, np.ndarray]) -> float:
        return float(run["nc"][run["steps"] >= FIG2_NC_FROM].min())

    return np.array([[smallest(toy_check("softmax", "identity", seed, concentration=c, record_every=record_every))
                      for seed in seeds] for c in concentrations])


def softmax_residual_sources(concentrations: Sequence[float], seed: int = 0, steps: int = 400,
                             lr: float = 0.1) -> dict[str, np.ndarray]:
    """Where softmax's invariant residual on the toy block comes from (identity activation, ``tau = 1``, SGD at
    ``lr_z = lr_w = lr``, the numpy engine, the runs of the explorer's grid), one entry per Dirichlet concentration:

    * ``residual``: the final relative residual of Theorem 1's softmax form, ``b-bar`` frozen at ``t = 0`` (the
      theorem as stated; the grid's value);
    * ``b_bar_drift``: ``max_t ||b-bar(t) - b-bar(0)||_inf``, how far the mean attention moves;
    * ``residual_moving``: the same residual when the theorem's rate is summed step by step with the current
      ``b-bar(t)``, ``z(t) - z(0) - sum_steps [1/2 d(sum_k v_k^2) - 1/2 b-bar(t_i) d(sum_k ||v_k||^2)]``: what is
      left once ``b-bar`` is allowed to move, i.e. the failure of the per-node factorisation (and SGD's
      discretisation error, ``O(lr)``).

    Both residuals are scaled by the run's largest ``|z|``, as in
    :func:`joma_lib.theory.invariants.invariant_residual`.
    """
    out: dict[str, list[float]] = {"residual": [], "b_bar_drift": [], "residual_moving": []}
    for c in concentrations:
        spec, X, y, state = theorem1_toy("softmax", "identity", seed, concentration=c)
        traj = train_sgd_numpy(spec, X, y, state, steps, lr_z=lr, lr_w=lr, record_every=1)
        z, V = traj.z[:, 0], traj.V(spec.embeddings()[0])[:, 0]
        b_bar = mean_attention(spec, z, X)
        sum_sq = (V**2).sum(axis=-1)                       # (n, M_C): sum_k v_k^2
        norms = sum_sq.sum(axis=-1)                        # (n,): sum_k ||v_k||^2
        steps_moving = 0.5 * np.diff(sum_sq, axis=0) - 0.5 * b_bar[:-1] * np.diff(norms)[:, None]
        moving = z[-1] - z[0] - steps_moving.sum(axis=0)
        frozen = invariant_residual(z[:, None], V[:, None], "softmax", b_bar=b_bar[0])[-1, 0]
        out["residual"].append(float(frozen))
        out["b_bar_drift"].append(float(np.abs(b_bar - b_bar[0]).max()))
        out["residual_moving"].append(float(np.abs(moving).max() / np.abs(z).max()))
    return {key: np.array(values) for key, values in out.items()}


def grid_readings(grid: FigureData, sparse: float = 0.1, similar: float = 10.0,
                  temperature: float = 1.0) -> dict[str, float]:
    """The explorer's grid (``c-thm1-grid``), final residual and smallest NC(z-hat, z) from step 100 on:

    * ``thm1-grid-exact-max``, ``thm1-grid-exact-nc-min``: the largest residual and the smallest NC of exp and
      linear attention over the whole grid;
    * ``thm1-grid-nc-sparse``: softmax's NC at concentration ``sparse`` and the given ``temperature``;
      ``thm1-grid-nc-similar``: its smallest NC at that temperature over concentrations of ``similar`` or more;
    * ``thm1-grid-nc-worst``: softmax's lowest NC, at concentration ``thm1-grid-worst-concentration`` and
      temperature ``thm1-grid-worst-temperature``;
    * ``thm1-grid-t-low``, ``thm1-grid-t-high``: the grid's lowest and highest temperature;
      ``thm1-grid-nc-sparse-hot``: softmax's NC at concentration ``sparse`` and the highest temperature;
    * ``thm1-grid-nc-t-fall``: the largest fall of softmax's NC from one temperature to the next higher one;
    * ``thm1-grid-softmax-res-min``: softmax's smallest final residual.
    """
    att, conc, temps = list(grid["attentions"]), list(grid["concentrations"]), list(grid["temperatures"])
    exact = [att.index("exp"), att.index("linear")]
    nc_min = smallest_nc(grid)
    soft = nc_min[att.index("softmax")]
    t = temps.index(temperature)
    worst = np.unravel_index(np.argmin(soft), soft.shape)
    return {"thm1-grid-exact-max": float(grid["residual"][exact][..., -1].max()),
            "thm1-grid-exact-nc-min": float(nc_min[exact].min()),
            "thm1-grid-nc-sparse": float(soft[conc.index(sparse), t]),
            "thm1-grid-nc-similar": float(soft[conc.index(similar):, t].min()),
            "thm1-grid-nc-worst": float(soft[worst]),
            "thm1-grid-worst-concentration": float(conc[worst[0]]),
            "thm1-grid-worst-temperature": float(temps[worst[1]]),
            "thm1-grid-t-low": float(min(temps)), "thm1-grid-t-high": float(max(temps)),
            "thm1-grid-nc-sparse-hot": float(soft[conc.index(sparse), temps.index(max(temps))]),
            "thm1-grid-nc-t-fall": float(-np.diff(soft, axis=1).min()) if len(temps) > 1 else 0.0,
            "thm1-grid-softmax-res-min": float(grid["residual"][att.index("softmax"), ..., -1].min())}
