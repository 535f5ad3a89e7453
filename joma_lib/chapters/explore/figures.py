"""The "Explore" page: the grid behind the kernel-free Fig. 4 explorer (companion figure ``c-explorer-grid``).

Fig. 4's three knobs:

* the **nonlinearity**: Theorem 4's nonlinear update ``v <- v + eta (mu - v) o b`` or the linear
  contrast of Theorem 2, ``v <- v + eta Delta o b`` with ``Delta = mu`` (the saliency vector);
* the **spread** of ``mu``: Fig. 4's sorted draw is mapped affinely so that [1, 4] becomes [1, 1 + spread]
  (:func:`joma_lib.theory.softmax_dynamics.saliency_profile`), so ``spread = 3`` is exactly the paper's setting
  and a small spread makes all tokens nearly equally salient; the targets themselves span about
  ``0.81 * spread`` (max - min), since the draw does not fill [1, 4];
* the attention **temperature** ``tau_v`` of ``b = softmax(v^2 / tau_v)`` (the effective temperature on ``v^2``).
"""


from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from joma_lib.theory.softmax_dynamics import row_entropy
from joma_lib.kit.explorer import increasing_values
from joma_lib.kit.style import heatmap
from joma_lib.kit.registry import Claim, FigureData, FigureSpec, Tolerance
from joma_lib.theory.softmax_dynamics import saliency_profile, simulate_softmax_attention, softmax_attention
from joma_lib.kit.explorer import MAX_GRID_POINTS, sample_steps


MODES = ("linear", "nonlinear")
FIG4_SPREAD = 3.0  # Fig. 4 draws mu uniformly from [1, 1 + 3]
DEFAULT_SPREADS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
DEFAULT_TEMPERATURES = (1.0, 2.0, 3.0, 4.0, 6.0)






def make_explorer_grid(spreads: Sequence[float] = DEFAULT_SPREADS,
                  temperatures: Sequence[float] = DEFAULT_TEMPERATURES,
                  n_steps: int = 5000, eta: float = 0.02, v0: float = 0.05,
                  n_samples: int = 80, profile: str = "fig4", seed: int = 0) -> dict[str, np.ndarray]:
    """Simulate Fig. 4's discrete dynamics on the grid ``MODES x spreads x temperatures`` (``temperatures``: the
    values of ``tau_v``).

    The targets (saliencies in the linear case) of a spread ``spread`` are
    ``saliency_profile(profile, low=1, high=1 + spread, seed=seed)``; with the default ``"fig4"``
    profile and ``spread = 3`` they are the paper's ``mu``, so grid point ``("nonlinear", 3, 3)`` is
    Fig. 4. Each mode is one batched call of
    :func:`~joma_lib.theory.softmax_dynamics.simulate_softmax_attention` over all (spread, tau_v) pairs.

    Returns (``n_spread = len(spreads)``, ``n_tau = len(temperatures)``, ``n_t`` sampled steps, ``d`` tokens):
        ``spreads (n_spread,)``, ``tau_v (n_tau,)``, ``steps (n_t,)`` from :func:`sample_steps`,
        ``mu (n_spread, d)``; ``v (2, n_spread, n_tau, n_t, d)`` and ``entropy (2, n_spread, n_tau, n_t)`` in
        float32, first axis in the order of :data:`MODES`; ``entropy_limit (n_spread, n_tau)`` =
        H(softmax(mu^2/tau_v)), the attention entropy at the nonlinear fixed point ``v = mu``.
    """
    s_values = increasing_values("spreads", spreads, 0.0, 20.0)
    t_values = increasing_values("temperatures", temperatures, 0.0, 100.0)
    n_points = len(MODES) * s_values.size * t_values.size
    if n_points > MAX_GRID_POINTS:
        raise ValueError(f"the grid has {n_points} points (2 x spreads x temperatures); "
                         f"at most {MAX_GRID_POINTS} keep the page small")
    steps = sample_steps(n_steps, n_samples)
    mus = np.stack([saliency_profile(profile, low=1.0, high=1.0 + spread, seed=seed) for spread in s_values])
    mu_grid = np.broadcast_to(mus[:, None, :], (s_values.size, t_values.size, mus.shape[1]))
    t_grid = np.broadcast_to(t_values, mu_grid.shape[:-1])
    v, entropy = [], []
    for mode in MODES:
        run = simulate_softmax_attention(mu_grid, v0=v0, eta=eta, n_steps=n_steps, temperature=t_grid,
                                         nonlinear=mode == "nonlinear")
        v.append(np.moveaxis(run.v[steps], 0, 2))  # (n_spread, n_tau, n_t, d)
        entropy.append(np.moveaxis(run.entropy[steps], 0, 2))
    limit = row_entropy(softmax_attention(mu_grid, t_grid))
    return {"spreads": s_values, "tau_v": t_values, "steps": steps, "mu": mus,
            "v": np.stack(v).astype(np.float32), "entropy": np.stack(entropy).astype(np.float32),
            "entropy_limit": np.asarray(limit)}


def plot_grid(data: FigureData) -> Figure:
    """Summary of the grid: how deep the nonlinear entropy dips and how far it comes back, and curves at tau_v = 3.

    Left: ``ln d - min_t H`` with ``d`` the number of tokens (sparsification) and middle: ``H(end) - min_t H``
    (bounce back), both for the nonlinear update over (spread of mu, tau_v). Right: entropy curves at the temperature
    closest to 3, solid nonlinear, dashed linear, one colour per spread.
    """
    spreads, temps, steps = data["spreads"], data["tau_v"], data["steps"]
    nonlinear = data["entropy"][MODES.index("nonlinear")].astype(np.float64)
    d = data["mu"].shape[1]
    dip = np.log(d) - nonlinear.min(axis=-1)
    bounce = nonlinear[..., -1] - nonlinear.min(axis=-1)
    fig = Figure(figsize=(8.8, 3.4), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, values, title in [(axes[0], dip, f"nonlinear: dip  ln {d} - min H"),
                              (axes[1], bounce, "nonlinear: bounce  H(end) - min H")]:
        heatmap(fig, ax, values.T, [f"{spread:g}" for spread in spreads], [f"{t:g}" for t in temps], "nats")
        ax.set_xlabel(r"spread of $\mu$")
        ax.set_ylabel(r"temperature $\tau_v$")
        ax.set_title(title, fontsize=10)
    ax = axes[2]
    t3 = int(np.argmin(np.abs(temps - 3.0)))
    for i, spread in enumerate(spreads):
        ax.plot(steps, nonlinear[i, t3], color=f"C{i}", lw=2 if spread == FIG4_SPREAD else 1, label=f"{spread:g}")
        ax.plot(steps, data["entropy"][MODES.index("linear"), i, t3], color=f"C{i}", ls="--", lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("attention entropy")
    ax.set_title(rf"$\tau_v$ = {temps[t3]:g}: nonlinear (solid), linear (dashed)", fontsize=10)
    ax.legend(title=r"spread of $\mu$", fontsize=9, title_fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _linear_final_entropy(data: FigureData) -> float:
    """Largest final entropy of the linear runs over the grid; infinite unless in every run the token with the
    largest mu ends with the largest ``v`` (the one the attention ``softmax(v^2/tau_v)`` favours)."""
    linear = MODES.index("linear")
    winners = data["v"][linear, :, :, -1, :].argmax(axis=-1)  # (spread, tau_v)
    if np.any(winners != data["mu"].argmax(axis=-1)[:, None]):
        return float("inf")
    return float(data["entropy"][linear, ..., -1].max())


EXPLORER_CLAIMS = (
    Claim("explore-linear-sparse-everywhere", "Theorem 2",
          "Linear case over the whole grid of target spreads and temperatures: the most salient token takes all "
          "the attention, largest final entropy (counted only if the token with the largest mu ends on top in "
          "every run)", _linear_final_entropy, "<", 1e-3,
          kind="paper", threshold_set="after-data",
          threshold_note="the book's 1e-3 bar and its data first appear together in 702aadd; the value is 0"),
)


# float64 numpy simulation stored in float32: allow a few float32 ulps plus platform exp differences.
_FLOAT32_TOL = Tolerance(rtol=1e-5, atol=1e-6)

FIGURES = [
    FigureSpec(
        fig_id="c-explorer-grid",
        title="Grid of the kernel-free explorer: linear vs nonlinear dynamics over spread of mu and temperature",
        paper_ref="companion (Fig. 4 and Theorems 2, 4)",
        chapter="book/explore.md",
        make=make_explorer_grid,
        plot=plot_grid,
        tolerances={"v": _FLOAT32_TOL, "entropy": _FLOAT32_TOL},
        default_tol=Tolerance(rtol=1e-9, atol=1e-12),
        claims=EXPLORER_CLAIMS,
    ),
]
