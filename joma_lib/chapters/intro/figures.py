"""Figure of the introduction: JoMA's story in three panels, each from the page that derives it.

(a) linear MLP: the attention entropy only falls (Theorem 2); (b) nonlinear MLP: it dips, then recovers
(Theorem 4, the paper's Fig. 4 update); (c) in a latent hierarchy the tokens nearest to the query are associated
first (Theorem 5 with Theorem 4's dynamics, the setting of Fig. 5).
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from joma_lib.theory.softmax_dynamics import fig4_mu, simulate_softmax_attention
from joma_lib.kit.registry import FigureData, FigureSpec, Tolerance
from joma_lib.theory.latent_tree import (
    HBLT,
    association_dynamics,
    association_targets,
    association_time,
    cla_height_matrix,
)
from joma_lib.base.validation import check_float, check_int


def make_summary(n_steps: int = 5000, record_every: int = 10, tree_height: int = 4, scale: float = 4.0,
                 t_max: float = 2.0, n_times: int = 201) -> FigureData:
    """Data of the three panels.

    ``steps`` and ``entropy_linear``/``entropy_nonlinear``: attention entropy of the Fig. 4 loop
    (``softmax(v^2/3)``, targets ``fig4_mu()``) without and with the pull ``-v``
    (:func:`~joma_lib.theory.softmax_dynamics.simulate_softmax_attention`); ``times``, ``association``
    (n_times, L): ``v_l/mu_l`` of one token at each common-ancestor height ``H = 1..L`` with the query, and
    ``assoc_time`` (L,) the time at which it reaches 90 % (Fig. 5's tree of height ``L = tree_height``: binary,
    ``rho = 1 - 1/L``, ``mu_l = scale P[l|m]``).
    """
    n_steps = check_int("n_steps", n_steps, 10, 100_000)
    record_every = check_int("record_every", record_every, 1, n_steps)
    tree_height = check_int("tree_height", tree_height, 2, 8)
    scale = check_float("scale", scale, 0.0, 10.0, low_open=True)
    times = np.linspace(0.0, check_float("t_max", t_max, 0.0, 1e3, low_open=True),
                        check_int("n_times", n_times, 10, 10_000))
    mu4 = fig4_mu()
    out: FigureData = {}
    for name, nonlinear in (("linear", False), ("nonlinear", True)):
        run = simulate_softmax_attention(mu4, n_steps=n_steps, nonlinear=nonlinear, record_every=record_every)
        out["steps"] = run.steps
        out[f"entropy_{name}"] = run.entropy
    tree = HBLT(tree_height=tree_height, branching=2, rho=1 - 1 / tree_height)
    mu = association_targets(tree, 0, scale)
    v = association_dynamics(mu, times)
    heights = cla_height_matrix(tree)[0]
    first = [int(np.flatnonzero(heights == h)[0]) for h in range(1, tree_height + 1)]
    out["times"] = times
    out["association"] = np.stack([v[:, l] / mu[l] for l in first], axis=1)
    out["assoc_time"] = np.array([association_time(mu[l], 0.9) for l in first])
    return out


def plot_summary(data: FigureData) -> Figure:
    """Three panels side by side: entropy (linear), entropy (nonlinear), association by ancestor height."""
    fig = Figure(figsize=(8.8, 3.2), layout="constrained")
    lin, nonlin, tree = fig.subplots(1, 3)
    for ax, key, title in ((lin, "entropy_linear", "(a) linear MLP: attention collapses"),
                           (nonlin, "entropy_nonlinear", "(b) nonlinear MLP: sparse, then dense")):
        ax.plot(data["steps"], data[key], "k")
        ax.axhline(np.log(10), color="0.6", ls="--", lw=0.8, label=r"uniform ($\ln 10$)")
        ax.set_ylim(-0.1, 2.5)
        ax.set_xlabel("training step")
        ax.set_title(title, fontsize=9)
    lin.set_ylabel("attention entropy (nats)")
    lin.legend(fontsize=9, loc="upper right")
    tree_height = data["association"].shape[1]
    colours = [f"C{h}" for h in range(tree_height)]
    for h in range(tree_height):
        tree.plot(data["times"], data["association"][:, h], color=colours[h],
                  label=f"H = {h + 1}")
        tree.axvline(data["assoc_time"][h], color=colours[h], ls=":", lw=0.8)
    tree.set_xlabel("time $t$")
    tree.set_ylabel(r"association $v_l/\mu_l$")
    tree.set_title("(c) hierarchy: near tokens first", fontsize=9)
    tree.legend(fontsize=9, loc="lower right")
    return fig


FIGURES = [
    FigureSpec(
        fig_id="c-summary",
        title="JoMA's story in three panels: collapse, sparse then dense, near tokens first",
        paper_ref="companion (Theorems 2, 4, 5)",
        chapter="book/intro.md",
        make=make_summary,
        plot=plot_summary,
        # deterministic numpy loops and a quadrature-based integrator, as the figures of the pages it summarises;
        # no claims of its own: each panel's claim is checked on its page's figure (fig4-variants, fig5)
        default_tol=Tolerance(rtol=1e-7, atol=1e-10),
    ),
]
