"""The grids behind the book's kernel-free explorers, each a registered companion figure, and their views.

Every explorer is a :class:`joma_lib.explorable.Explorer` over a grid computed here (and checked
against a committed reference like any figure); the ``*_explorer`` functions turn a grid into one.

* ``c-explorer-grid`` (Fig. 4 dynamics, page ``explore``): :func:`joma_lib.explorable.explorer_grid`.
* ``c-thm1-grid`` (Theorem 1, page ``theorem1``): attention kind x Dirichlet concentration of the bags x
  temperature -> invariant residual and NC(z-hat, z) along SGD on the toy block.
* ``c-hierarchy-grid`` (Theorem 5 / Fig. 5, page ``hierarchy``): tree height x polarity -> co-occurrence
  by height, the order in which the query associates with tokens, and its attention entropy.
* ``c-wikitext-grid`` (Figs. 6 / 8, page ``wikitext``): source (the authors' WikiText-2 runs or our
  re-run) x layers x learning rate -> attention entropy per layer and validation loss.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from joma_lib.attention_kinds import ATTENTIONS
from joma_lib.block import ACTIVATIONS
from joma_lib.dynamics import row_entropy
from joma_lib.explorable import (
    FIG4_SPREAD,
    MODES,
    Control,
    Explorer,
    Panel,
    Trace,
    explorer_grid,
    increasing_values,
)
from joma_lib.figures.registry import INVARIANT_RESIDUAL, SGD, Claim, FigureData, FigureSpec, Tolerance
from joma_lib.figures.sweep_plots import layer_colours
from joma_lib.invariants import toy_check
from joma_lib.latent_tree import (
    HBLT,
    association_dynamics,
    association_time,
    attention_from_association,
    cooccurrence_approx,
    cooccurrence_exact,
)
from joma_lib.lm.authors import ATTRIBUTION, SweepRuns, official_runs, seed_average
from joma_lib.lm.data import OFFLINE_SOURCES
from joma_lib.lm.train import PRESETS
from joma_lib.validation import check_choice, check_float, check_int


# --- Fig. 4 (page explore) -----------------------------------------------------------------------


def plot_grid(data: FigureData) -> Figure:
    """Summary of the grid: how deep the nonlinear entropy dips and how far it comes back, and curves at T = 3.

    Left: ``ln d - min_t H`` (sparsification) and middle: ``H(end) - min_t H`` (bounce back), both for
    the nonlinear update over (spread of mu, T). Right: entropy curves at the temperature closest to 3,
    solid nonlinear, dashed linear, one colour per spread.
    """
    spreads, temps, steps = data["spreads"], data["temperatures"], data["steps"]
    nonlinear = data["entropy"][MODES.index("nonlinear")].astype(np.float64)
    d = data["mu"].shape[1]
    dip = np.log(d) - nonlinear.min(axis=-1)
    bounce = nonlinear[..., -1] - nonlinear.min(axis=-1)
    fig = Figure(figsize=(8.8, 3.4), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, values, title in [(axes[0], dip, "nonlinear: dip  ln d - min H"),
                              (axes[1], bounce, "nonlinear: bounce  H(end) - min H")]:
        _heatmap(fig, ax, values.T, [f"{s:g}" for s in spreads], [f"{t:g}" for t in temps], "nats")
        ax.set_xlabel(r"spread of $\mu$ (max - min)")
        ax.set_ylabel(r"temperature $\tau_v$")
        ax.set_title(title, fontsize=10)
    ax = axes[2]
    k = int(np.argmin(np.abs(temps - 3.0)))
    for i, s in enumerate(spreads):
        ax.plot(steps, nonlinear[i, k], color=f"C{i}", lw=2 if s == FIG4_SPREAD else 1, label=f"{s:g}")
        ax.plot(steps, data["entropy"][MODES.index("linear"), i, k], color=f"C{i}", ls="--", lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("attention entropy")
    ax.set_title(rf"$\tau_v$ = {temps[k]:g}: nonlinear (solid), linear (dashed)", fontsize=10)
    ax.legend(title=r"spread of $\mu$", fontsize=9, title_fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _linear_final_entropy(data: FigureData) -> float:
    return float(data["entropy"][MODES.index("linear"), ..., -1].max())


EXPLORER_CLAIMS = (
    Claim("explore-linear-sparse-everywhere", "Theorem 2",
          "Linear case over the whole grid of target spreads and temperatures: the most salient token takes all "
          "the attention, largest final entropy", _linear_final_entropy, "<", 1e-3,
          kind="paper", threshold_set="after-data",
          threshold_note="the book's 1e-3 bar, set in the commit that made its data (4830e84), so the history cannot show it came first; the value is 0"),
)


def _heatmap(fig: Figure, ax, values: np.ndarray, x_labels: list[str], y_labels: list[str], label: str,
             cmap: str = "magma", vmin: float | None = 0.0) -> None:
    """``values[y, x]`` as an image with one tick per grid value and a colour bar."""
    im = ax.imshow(values, origin="lower", aspect="auto", cmap=cmap, vmin=vmin,
                   extent=(-0.5, len(x_labels) - 0.5, -0.5, len(y_labels) - 0.5))
    ax.set_xticks(range(len(x_labels)), x_labels)
    ax.set_yticks(range(len(y_labels)), y_labels)
    ax.grid(False)
    fig.colorbar(im, ax=ax, shrink=0.85, label=label)


# --- Theorem 1 (page theorem1) -------------------------------------------------------------------

THM1_CONCENTRATIONS = (0.1, 0.3, 1.0, 3.0, 10.0, 100.0, 1000.0)
THM1_TEMPERATURES = (0.5, 1.0, 2.0, 4.0)
THM1_NC_FROM = 100  # NC is summarised from this step on (the logits have moved by then)


def make_thm1_grid(attentions: Sequence[str] = ATTENTIONS, concentrations: Sequence[float] = THM1_CONCENTRATIONS,
                   temperatures: Sequence[float] = THM1_TEMPERATURES, phi: str = "identity", steps: int = 400,
                   record_every: int = 8, seed: int = 0) -> FigureData:
    """Theorem 1 on the toy block (:func:`joma_lib.figures.theorem1.toy_check`, ``lr_z = lr_w = 0.1``) over
    attention kind x Dirichlet concentration of the bags x attention temperature ``T``. The runs use the numpy
    engine (hand-written gradients: torch autograd's runs to ~1e-14, in a tenth of the time).

    Returns ``residual`` and ``nc`` (A, C, T, n) at ``steps`` (n,): the relative invariant residual and
    NC(z-hat, z) between the logits and Theorem 1's prediction.
    """
    attentions = tuple(check_choice("attentions[i]", a, ATTENTIONS) for a in attentions)
    if not attentions:
        raise ValueError("attentions must name at least one attention kind")
    c_values = increasing_values("concentrations", concentrations, 0.0, 1e6)
    t_values = increasing_values("temperatures", temperatures, 0.0, 100.0)
    check_choice("phi", phi, list(ACTIVATIONS))
    if len(attentions) * c_values.size * t_values.size > 200:
        raise ValueError("the grid may hold at most 200 runs (attentions x concentrations x temperatures)")
    steps = check_int("steps", steps, THM1_NC_FROM + 1)
    record_every = check_int("record_every", record_every, 1, steps)
    runs = [[[toy_check(a, phi, seed, concentration=c, steps=steps, record_every=record_every, temperature=t,
                        engine="numpy") for t in t_values] for c in c_values] for a in attentions]

    def stack(key: str) -> np.ndarray:
        return np.array([[[run[key] for run in row] for row in block] for block in runs])

    return {"attentions": np.array(attentions), "concentrations": c_values, "temperatures": t_values,
            "phi": np.asarray(phi), "steps": runs[0][0][0]["steps"], "residual": stack("residual"),
            "nc": stack("nc")}


def _nc_min(data: FigureData) -> np.ndarray:
    """Smallest NC(z-hat, z) from step :data:`THM1_NC_FROM` on, per grid cell."""
    return data["nc"][..., data["steps"] >= THM1_NC_FROM].min(axis=-1)


def plot_thm1_grid(data: FigureData) -> Figure:
    """Final residual (left) and smallest NC(z-hat, z) after step 100 (right) against the bag concentration,
    one colour per attention kind, one line per temperature (darker = higher tau)."""
    conc, temps = data["concentrations"], data["temperatures"]
    fig = Figure(figsize=(8.8, 3.6), layout="constrained")
    ax_r, ax_nc = fig.subplots(1, 2)
    nc_min = _nc_min(data)
    for i, attention in enumerate(data["attentions"]):
        for k, t in enumerate(temps):
            shade = 0.35 + 0.65 * k / max(temps.size - 1, 1)
            label = f"{attention}" if k == temps.size - 1 else None
            ax_r.loglog(conc, data["residual"][i, :, k, -1], "o-", color=f"C{i}", alpha=shade, lw=1, ms=3,
                        label=label)
            ax_nc.semilogx(conc, nc_min[i, :, k], "o-", color=f"C{i}", alpha=shade, lw=1, ms=3, label=label)
    ax_r.set_ylabel(f"invariant residual at step {int(data['steps'][-1])}")
    ax_nc.set_ylabel(rf"min NC$(\hat z, z)$ from step {THM1_NC_FROM}")
    for ax in (ax_r, ax_nc):
        ax.set_xlabel("Dirichlet concentration of the bags")
    ax_r.legend(title=rf"attention ($\tau$ = {temps[0]:g}..{temps[-1]:g})", fontsize=9, title_fontsize=9)
    return fig


def thm1_explorer(data: FigureData) -> Explorer:
    """Explorer of ``c-thm1-grid``: the invariant residual and NC(z-hat, z) over the run."""
    attentions, conc, temps, steps = data["attentions"], data["concentrations"], data["temperatures"], data["steps"]
    shape = (attentions.size, conc.size, temps.size)
    later = steps >= 1  # at step 0 z = z-hat and NC is undefined (z = 0 for exp/softmax)
    nc_min, final = _nc_min(data), data["residual"][..., -1]
    titles = np.empty(shape, dtype=object)
    for index in np.ndindex(shape):
        a, c, k = index
        titles[index] = (f"{attentions[a]} attention, bag concentration {conc[c]:g}, \u03c4 = {temps[k]:g}<br>"
                         f"final residual {final[index]:.1e}, min NC(\u1e91, z) from step {THM1_NC_FROM}: "
                         f"{nc_min[index]:.3f}")
    return Explorer(
        controls=(Control("attention", "attention", tuple(str(a) for a in attentions), kind="buttons"),
                  Control("concentration", "Dirichlet concentration of the bags", tuple(float(c) for c in conc)),
                  Control("temperature", "temperature \u03c4", tuple(float(t) for t in temps))),
        panels=(Panel("SGD step", "relative invariant residual", y_axis={"type": "log", "exponentformat": "power"}),
                Panel("SGD step", "NC(\u1e91, z)", y_axis={"range": [-0.05, 1.05]})),
        traces=(Trace(y=data["residual"][..., later], x=steps[later], name="residual", color="#1f77b4", panel=0),
                Trace(y=data["nc"][..., later], x=steps[later], name="NC(\u1e91, z)", color="#d62728", panel=1)),
        titles=titles,
    )


# --- Theorem 5 / Fig. 5 (page hierarchy) ---------------------------------------------------------

HIERARCHY_DEPTHS = tuple(range(2, 11))
HIERARCHY_RHOS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def make_hierarchy_grid(depths: Sequence[int] = HIERARCHY_DEPTHS, rhos: Sequence[float] = HIERARCHY_RHOS,
                        scale: float = 4.0, fraction: float = 0.9, t_max: float = 1.6,
                        n_times: int = 65) -> FigureData:
    """Theorem 5 and the Fig. 5 dynamics over tree height ``L`` x polarity ``rho`` (binary tree, binary root,
    symmetric channel), for the query ``m = 0`` and one token per height ``H`` of the common ancestor.

    Returns (``D`` depths, ``P`` polarities, ``Hmax = max depth``, ``n`` times), NaN beyond a tree's height:
    ``cooccurrence`` (D, P, Hmax) exact ``P[l | m]``; ``approx`` (D, Hmax) the paper's ``1 - H/L``;
    ``association`` (D, P, Hmax, n) ``v_l(t) / mu_l`` of ``dv/dt = (mu - v) o exp(v^2/2)`` with
    ``mu_l = scale P[l | m]`` (as ``fig5``); ``assoc_time`` (D, P, Hmax) when ``v_l`` reaches
    ``fraction mu_l``; ``entropy`` (D, P, n) of the query's attention over all ``2^L - 1`` other tokens.
    """
    d_values = np.array([check_int(f"depths[{i}]", d, 1, 12) for i, d in enumerate(depths)])
    if d_values.size == 0 or np.any(np.diff(d_values) <= 0):
        raise ValueError(f"depths must be a non-empty, strictly increasing sequence of heights, got {depths!r}")
    r_values = increasing_values("rhos", rhos, 0.0, 1.0)
    times = np.linspace(0.0, check_float("t_max", t_max, 0.0, 100.0, low_open=True),
                        check_int("n_times", n_times, 2, 1000))
    h_max = int(d_values.max())
    shape = (d_values.size, r_values.size)
    cooc, assoc_time = np.full(shape + (h_max,), np.nan), np.full(shape + (h_max,), np.nan)
    association, entropy = np.full(shape + (h_max, times.size), np.nan), np.empty(shape + (times.size,))
    approx = np.full((d_values.size, h_max), np.nan)
    for i, depth in enumerate(d_values):
        heights = np.arange(1, depth + 1)
        approx[i, :depth] = cooccurrence_approx(heights, int(depth))
        counts = 2 ** (heights - 1)  # leaves whose common ancestor with the query is at height H
        for j, rho in enumerate(r_values):
            tree = HBLT(depth=int(depth), rho=float(rho))
            p = np.array([cooccurrence_exact(tree, int(c), 0) for c in counts])
            mu = check_float("scale", scale, 0.0, 10.0, low_open=True) * p
            v = association_dynamics(mu, times)
            cooc[i, j, :depth] = p
            association[i, j, :depth] = (v / mu).T
            assoc_time[i, j, :depth] = [association_time(m, fraction) for m in mu]
            entropy[i, j] = row_entropy(attention_from_association(np.repeat(mu, counts),
                                                                         np.repeat(v, counts, axis=1)))
    return {"depths": d_values, "rhos": r_values, "times": times, "cooccurrence": cooc, "approx": approx,
            "association": association, "assoc_time": assoc_time, "entropy": entropy,
            "scale": np.asarray(scale), "fraction": np.asarray(fraction)}


def plot_hierarchy_grid(data: FigureData) -> Figure:
    """Left: exact co-occurrence against ``H/L`` with the paper's ``1 - H/L``, for ``rho`` closest to
    ``1 - 1/L``; right: how much later the farthest token is associated than the nearest (ratio of times)."""
    depths, rhos = data["depths"], data["rhos"]
    fig = Figure(figsize=(8.8, 3.6), layout="constrained")
    ax_p, ax_t = fig.subplots(1, 2)
    colours = colormaps["viridis"](np.linspace(0, 0.9, depths.size))
    for i, depth in enumerate(depths):
        j = int(np.argmin(np.abs(rhos - (1 - 1 / depth))))
        heights = np.arange(1, depth + 1)
        ax_p.plot(heights / depth, data["cooccurrence"][i, j, :depth], "o-", ms=3, color=colours[i],
                  label=f"L = {depth}, \u03c1 = {rhos[j]:g}")
    ax_p.plot([0, 1], [1, 0], "k--", lw=1, label="1 - H/L (paper)")
    ax_p.set_xlabel("H / L")
    ax_p.set_ylabel("P[l | m]")
    ax_p.legend(fontsize=9, ncol=2)
    last = np.array([[data["assoc_time"][i, j, depth - 1] for j in range(rhos.size)]
                     for i, depth in enumerate(depths)])
    _heatmap(fig, ax_t, (last / data["assoc_time"][:, :, 0]).T, [f"{d}" for d in depths],
             [f"{r:g}" for r in rhos], "time ratio, farthest / nearest", cmap="viridis", vmin=1.0)
    ax_t.set_xlabel("tree height L")
    ax_t.set_ylabel("polarity \u03c1")
    ax_t.set_title(f"time to {float(data['fraction']):.0%} of the target", fontsize=10)
    return fig


def hierarchy_explorer(data: FigureData) -> Explorer:
    """Explorer of ``c-hierarchy-grid``: co-occurrence by height, association over time, attention entropy."""
    depths, rhos, times = data["depths"], data["rhos"], data["times"]
    shape = (depths.size, rhos.size)
    h_max = data["cooccurrence"].shape[-1]
    # heights 1..L of each tree (NaN beyond), so that the axis spans the tree shown
    heights = np.where(np.arange(1, h_max + 1) <= depths[:, None, None], np.arange(1, h_max + 1), np.nan)
    heights = np.broadcast_to(heights, shape + (h_max,))
    colours = [to_hex(c) for c in colormaps["viridis"](np.linspace(0, 0.92, h_max))]
    t90 = data["assoc_time"]
    percent = f"{float(data['fraction']):.0%}"
    names = np.empty(shape + (h_max,), dtype=object)
    titles = np.empty(shape, dtype=object)
    for i, depth in enumerate(depths):
        for j, rho in enumerate(rhos):
            names[i, j] = [f"H = {h}: {percent} at t = {t90[i, j, h - 1]:.2f}" if h <= depth else ""
                           for h in range(1, h_max + 1)]
            tied = " (= 1 \u2212 1/L, the paper's choice)" if np.isclose(rho, 1 - 1 / depth) else ""
            titles[i, j] = (f"tree height L = {depth}, polarity \u03c1 = {rho:g}{tied}<br>nearest token (H = 1) "
                            f"associated at t = {t90[i, j, 0]:.2f}, farthest (H = {depth}) at "
                            f"t = {t90[i, j, depth - 1]:.2f}")
    approx = np.broadcast_to(data["approx"][:, None, :], shape + (h_max,))
    traces = [Trace(y=data["cooccurrence"], x=heights, name="exact P[l | m]", color="#1f77b4", panel=0,
                    style={"mode": "lines+markers"}),
              Trace(y=approx, x=heights, name="1 \u2212 H/L (paper)", color="black", panel=0,
                    style={"line": {"dash": "dash", "width": 1}})]
    traces += [Trace(y=data["association"][:, :, h], x=times, name=names[..., h], color=colours[h], panel=1,
                     style={"showlegend": False, "hovertemplate": "%{fullData.name}<extra></extra>"})
               for h in range(h_max)]
    traces.append(Trace(y=data["entropy"], x=times, name="attention entropy of the query", color="#d62728",
                        panel=2))
    return Explorer(
        controls=(Control("depth", "tree height L", tuple(int(d) for d in depths)),
                  Control("rho", "polarity \u03c1", tuple(float(r) for r in rhos))),
        panels=(Panel("height H of the common ancestor", "co-occurrence P[l | m]", y_axis={"range": [0.0, 1.02]}),
                Panel("time t", "association v<sub>l</sub>/\u03bc<sub>l</sub> (colour: H, yellow = far)",
                      y_axis={"range": [0, 1.02]}),
                Panel("time t", "attention entropy (nats)", y_axis={"rangemode": "tozero"})),
        traces=tuple(traces), titles=titles, digits=3,
    )


# --- Figs. 6 / 8 (page wikitext) -----------------------------------------------------------------

WIKITEXT_SOURCES = ("authors", "rerun")
RERUN_PRESET = "rerun-full"
RERUN_RESULTS = Path(__file__).resolve().parents[1] / "lm" / "results" / f"{RERUN_PRESET}.npz"
"""The committed results of our CPU re-run (written by ``python -m joma_lib.lm.train run --preset rerun-full``)."""


def _cells(runs: SweepRuns, depths: np.ndarray, lrs: np.ndarray, n_checkpoints: int, n_layers: int,
           ) -> dict[str, np.ndarray]:
    """Seed averages of ``runs`` on the grid ``depths x lrs`` (NaN / 0 seeds where a cell was not run)."""
    shape = (depths.size, lrs.size)
    out = {"minibatch": np.full(n_checkpoints, np.nan), "attn_entropy": np.full(shape + (n_checkpoints, n_layers),
                                                                                np.nan),
           "val_loss": np.full(shape + (n_checkpoints,), np.nan), "min_val_loss": np.full(shape, np.nan),
           "n_seeds": np.zeros(shape, dtype=np.int64)}
    present = set(runs.configs())
    for i, depth in enumerate(depths):
        for j, lr in enumerate(lrs):
            if not any(n == depth and np.isclose(r, lr, rtol=1e-6) for n, r in present):
                continue
            avg = seed_average(runs, int(depth), float(lr))
            c = avg.minibatch.size
            if np.isnan(out["minibatch"][0]):
                out["minibatch"][:c] = avg.minibatch
            elif np.any(out["minibatch"][:c] != avg.minibatch):
                raise ValueError("all cells of one source must share the checkpoint steps")
            out["attn_entropy"][i, j, :c, :depth] = avg.attn_entropy
            out["val_loss"][i, j, :c] = avg.val_loss
            out["min_val_loss"][i, j] = avg.min_val_loss
            out["n_seeds"][i, j] = avg.seeds.size
    return out


def make_wikitext_grid(directory: str | None = None, rerun: str = str(RERUN_RESULTS)) -> FigureData:
    """Seed-averaged attention entropy per layer and validation loss over source x layers x learning rate.

    Sources (:data:`WIKITEXT_SOURCES`): the authors' WikiText-2 sweep (``directory``, see
    :func:`joma_lib.lm.authors.official_runs`; CC BY-NC 4.0, the ``source`` array attributes it) and our
    re-run (``rerun``: the committed results of the ``rerun-full`` preset). The grid's axes are the union
    of both sources' depths and learning rates; a cell a source did not run is NaN (``n_seeds`` 0).
    Arrays: ``minibatch`` (S, C) (NaN-padded), ``attn_entropy`` (S, D, R, C, Lmax), ``val_loss`` (S, D, R, C),
    ``min_val_loss`` / ``n_seeds`` (S, D, R), ``depths`` (D), ``lrs`` (R), ``source`` (S) strings.
    """
    with np.load(rerun, allow_pickle=False) as npz:
        ours = SweepRuns.from_arrays({name: npz[name] for name in npz.files})
    sweeps = (official_runs(directory), ours)
    depths = np.array(sorted({n for s in sweeps for n, _ in s.configs()}), dtype=np.int64)
    lrs = np.array(sorted({float(f"{lr:.6g}") for s in sweeps for _, lr in s.configs()}))
    n_checkpoints = max(s.minibatch.shape[1] for s in sweeps)
    cells = [_cells(s, depths, lrs, n_checkpoints, int(depths.max())) for s in sweeps]
    data = {key: np.stack([c[key] for c in cells]) for key in cells[0]}
    return {"depths": depths, "lrs": lrs, **data, "source": np.array([ATTRIBUTION, f"our re-run (preset {RERUN_PRESET}) on "
                                                       f"{OFFLINE_SOURCES[PRESETS[RERUN_PRESET]['data']]}"])}


def plot_wikitext_grid(data: FigureData) -> Figure:
    """Best validation loss (left) and the bounce of the lowest layer's entropy, ``H(end) - min H`` (right),
    over layers x learning rate, in the authors' runs; cells our re-run also trained are outlined."""
    depths, lrs = data["depths"], data["lrs"]
    entropy = data["attn_entropy"][0, :, :, :, 0]
    bounce = entropy[..., -1] - np.nanmin(entropy, axis=-1, initial=np.inf, where=~np.isnan(entropy))
    fig = Figure(figsize=(8.8, 3.6), layout="constrained")
    axes = fig.subplots(1, 2)
    x_labels, y_labels = [f"{lr:.0e}" for lr in lrs], [str(d) for d in depths]
    _heatmap(fig, axes[0], data["min_val_loss"][0], x_labels, y_labels, "nats / token", cmap="viridis_r", vmin=None)
    _heatmap(fig, axes[1], bounce, x_labels, y_labels, "nats", cmap="magma")
    for ax, title in zip(axes, ("lowest validation loss (seed mean)", "layer 0: entropy bounce H(end) - min H")):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("learning rate")
        ax.set_ylabel("layers")
        ax.tick_params(axis="x", labelrotation=45)
        for i, j in zip(*np.nonzero(data["n_seeds"][1])):
            ax.add_patch(_outline(j, i))
    fig.text(0.0, -0.02, textwrap.fill(f"Data: {data['source'][0]}", 110), fontsize=9, color="0.35", ha="left",
             va="top")
    return fig


def _outline(x: float, y: float):
    """A white square around grid cell (x, y) of a heat map."""
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, ec="white", lw=2)


def wikitext_explorer(data: FigureData) -> Explorer:
    """Explorer of ``c-wikitext-grid``: entropy of every layer, and the validation loss, against the minibatch."""
    depths, lrs = data["depths"], data["lrs"]
    n_layers = int(depths.max())
    shape = (len(WIKITEXT_SOURCES), depths.size, lrs.size)
    steps_k = np.broadcast_to((data["minibatch"] / 1000.0)[:, None, None, :], shape + (data["minibatch"].shape[1],))
    colours = np.empty(shape + (n_layers,), dtype=object)
    titles = np.empty(shape, dtype=object)
    labels = ("the authors' runs (WikiText-2)", "our re-run")
    for index in np.ndindex(shape):
        s, i, j = index
        depth = int(depths[i])
        colours[index] = [to_hex(c) for c in layer_colours(depth)] + ["#000000"] * (n_layers - depth)
        setting = f"{depth} layer{'s' if depth > 1 else ''}, lr {lrs[j]:g}"
        if data["n_seeds"][index] == 0:
            trained = ", ".join(f"{int(depths[a])} layers at lr {lrs[b]:g}" for a, b in
                                zip(*np.nonzero(data["n_seeds"][s])))
            titles[index] = f"{labels[s]}: no run with {setting}<br>(trained: {trained})"
        else:
            titles[index] = (f"{labels[s]}, {setting}<br>lowest validation loss {data['min_val_loss'][index]:.3f} "
                             f"(mean of {int(data['n_seeds'][index])} seeds)")
    traces = [Trace(y=data["attn_entropy"][..., layer], x=steps_k, name=f"layer {layer}", color=colours[..., layer],
                    panel=0) for layer in range(n_layers)]
    traces.append(Trace(y=data["val_loss"], x=steps_k, name="validation loss", color="#444444", panel=1,
                        style={"line": {"dash": "dash"}}))
    return Explorer(
        controls=(Control("source", "source", WIKITEXT_SOURCES, kind="buttons", labels=labels),
                  Control("layers", "layers", tuple(int(d) for d in depths)),
                  Control("lr", "learning rate", tuple(float(lr) for lr in lrs),
                          labels=tuple(f"{lr:.0e}" for lr in lrs))),
        panels=(Panel("minibatch (k)", "attention entropy (nats)"),
                Panel("minibatch (k)", "validation loss (nats / token)")),
        traces=tuple(traces), titles=titles, digits=4,
    )


# float64 numpy simulation stored in float32: allow a few float32 ulps plus platform exp differences.
_FLOAT32_TOL = Tolerance(rtol=1e-5, atol=1e-6)

FIGURES = [
    FigureSpec(
        fig_id="c-explorer-grid",
        title="Grid of the kernel-free explorer: linear vs nonlinear dynamics over spread of mu and temperature",
        paper_ref="companion (Fig. 4 and Theorems 2, 4)",
        chapter="book/explore.md",
        make=explorer_grid,
        plot=plot_grid,
        tolerances={"v": _FLOAT32_TOL, "entropy": _FLOAT32_TOL},
        default_tol=Tolerance(rtol=1e-9, atol=1e-12),
        claims=EXPLORER_CLAIMS,
    ),
    FigureSpec(
        fig_id="c-thm1-grid",
        title="Grid of the Theorem 1 explorer: attention kind x bag concentration x temperature",
        paper_ref="companion (Theorem 1)",
        chapter="book/theorem1.md",
        make=make_thm1_grid,
        plot=plot_thm1_grid,
        tolerances={"residual": INVARIANT_RESIDUAL},
        default_tol=SGD,
    ),
    FigureSpec(
        fig_id="c-hierarchy-grid",
        title="Grid of the Theorem 5 / Fig. 5 explorer: tree height x polarity",
        paper_ref="companion (Theorem 5, Fig. 5)",
        chapter="book/hierarchy.md",
        make=make_hierarchy_grid,
        plot=plot_hierarchy_grid,
        default_tol=Tolerance(rtol=1e-6, atol=1e-8),
    ),
    FigureSpec(
        fig_id="c-wikitext-grid",
        title="Grid of the Figs. 6/8 explorer: authors' runs (CC BY-NC 4.0) and our re-run, layers x learning rate",
        paper_ref="companion (Figs. 6, 8)",
        chapter="book/wikitext.md",
        make=make_wikitext_grid,
        plot=plot_wikitext_grid,
        default_tol=Tolerance(rtol=1e-10, atol=1e-12),
    ),
]
