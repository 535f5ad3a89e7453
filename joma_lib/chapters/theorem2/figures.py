"""Figures of the Theorem 2 page: the linear modified MLP and the saliency of tokens."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from joma_lib.theory.dynamics import blowup_time, erf_ratio, integrate_linear, linear_closed_form, linear_limits, SQRT2
from joma_lib.kit.registry import Claim, FigureData, FigureSpec, Tolerance
from joma_lib.theory.saliency import (
    cooccurrence,
    discriminancy,
    monte_carlo_factors,
    monte_carlo_saliency,
    saliency,
    salient_token_dynamics,
    toy_token_model,
)
from joma_lib.base.validation import as_finite_array, check_int

THEOREM2_SALIENCY = (1.0, 0.7, 0.4, -0.3, 0.05)


def make_closed_form(saliencies: tuple[float, ...] = THEOREM2_SALIENCY, n_times: int = 60) -> FigureData:
    """Theorem 2's closed form against numerical integration of ``dv/dt = Delta o exp(v^2/2)``.

    ``limits`` holds ``v_l(t*)``, NaN for the most salient component (it diverges).
    Times ``t/t*`` run over ``[0, 0.9]`` evenly and then geometrically closer to the blow-up,
    up to ``0.999``. ``ratio_sqrt2 = erf(v/sqrt 2)/Delta`` (the conserved form) and
    ``ratio_half = erf(v/2)/Delta`` (the slides' printed form) are evaluated on the ODE solution.
    """
    saliency_arr = as_finite_array("saliencies", saliencies, min_ndim=1)
    n_times = check_int("n_times", n_times, 4, 10_000)
    t_star = blowup_time(saliency_arr)
    frac = np.concatenate([np.linspace(0.0, 0.9, n_times - n_times // 3, endpoint=False),
                           1.0 - np.geomspace(0.1, 1e-3, n_times // 3)])
    t = frac * t_star
    v_ode = integrate_linear(saliency_arr, t)
    limits = linear_limits(saliency_arr)
    return {
        "saliency": saliency_arr,
        "t_star": np.asarray(t_star),
        "t": t,
        "v_closed": linear_closed_form(saliency_arr, t),
        "v_ode": v_ode,
        "limits": np.where(np.isinf(limits), np.nan, limits),  # NaN marks the component that blows up
        "ratio_sqrt2": erf_ratio(v_ode, saliency_arr, SQRT2),
        "ratio_half": erf_ratio(v_ode, saliency_arr, 2.0),
    }


def plot_closed_form(data: FigureData) -> Figure:
    """(a) v(t): closed form (lines), ODE (dots), limits (dashed); (b) erf(v/sqrt2)/Delta; (c) erf(v/2)/Delta."""
    fig = Figure(figsize=(8.8, 3.4), layout="constrained")
    axes = fig.subplots(1, 3)
    x = data["t"] / data["t_star"]
    colors = [f"C{i}" for i in range(data["saliency"].size)]
    ax = axes[0]
    for j, c in enumerate(colors):
        lab = rf"$\Delta_{j}$ = {data['saliency'][j]:g}"
        ax.plot(x, data["v_closed"][:, j], color=c, label=lab)
        ax.plot(x[::3], data["v_ode"][::3, j], "o", color=c, ms=3, mfc="none")
        if np.isfinite(data["limits"][j]):
            ax.axhline(data["limits"][j], color=c, ls="--", lw=0.8)
    ax.set_xlabel(r"$t / t^*$")
    ax.set_ylabel(r"$v_l(t)$")
    ax.set_title("closed form (lines), ODE (circles),\n"
                 "limits $\\sqrt{2}\\,\\mathrm{erf}^{-1}(\\Delta_l/\\Delta_{l^*})$", fontsize=9)
    ax.legend(fontsize=9)
    for ax, key, title in [(axes[1], "ratio_sqrt2", r"$\mathrm{erf}(v_l/\sqrt{2})/\Delta_l$: one curve for all $l$"),
                           (axes[2], "ratio_half", r"$\mathrm{erf}(v_l/2)/\Delta_l$ (slides' form): spreads")]:
        for j, c in enumerate(colors):
            ax.plot(x, data[key][:, j], color=c, lw=1.2)
        ax.plot(x, data["t"] / np.sqrt(np.pi / 2), "k:", lw=1, label=r"$t/\sqrt{\pi/2}$")
        ax.set_xlabel(r"$t / t^*$")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=9)
    return fig


def make_saliency(n_samples: int = 200_000, grad_noise: float = 0.5, seed: int = 0, n_times: int = 150) -> FigureData:
    """Saliency of the toy vocabulary, its Monte-Carlo check, and Theorem 2's dynamics driven by it."""
    model = toy_token_model()
    mc = monte_carlo_saliency(model, n_samples, grad_noise, seed)
    factors = monte_carlo_factors(model, n_samples, grad_noise, seed)
    run = salient_token_dynamics(model, n_times=n_times)
    return {
        "names": np.array(model.names),
        "discriminancy": discriminancy(model),
        "cooccurrence": cooccurrence(model),
        "saliency": saliency(model),
        "mc_indicator": mc.indicator,
        "mc_stderr": mc.stderr,
        "mc_frequency": mc.frequency,
        "mc_discriminancy": factors.discriminancy,
        "mc_cooccurrence": factors.cooccurrence,
        "mc_factorisation_z": factors.factorisation_z(mc),
        "time_left": run.time_left,
        "v": run.v,
        "attention": run.attention,
        "entropy": run.entropy,
    }


def _time_to_blowup_axis(ax) -> None:
    """x axis = the time left ``1 - t/t*`` on a log scale, running towards the blow-up."""
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel(r"time left before blow-up, $1 - t/t^*$")


def plot_saliency(data: FigureData) -> Figure:
    """(a) discriminancy, co-occurrence, saliency per token with MC; (b) v_l; (c) attention and entropy."""
    fig = Figure(figsize=(8.8, 6.4), layout="constrained")
    mosaic = fig.subplot_mosaic([["a", "a"], ["b", "c"]])  # the bar chart spans the top row
    axes = [mosaic["a"], mosaic["b"], mosaic["c"]]
    names = [str(n) for n in data["names"]]
    pos = np.arange(len(names))
    ax = axes[0]
    w = 0.27
    ax.bar(pos - w, data["discriminancy"], w, label=r"discriminancy $E[g\mid l,m]$")
    ax.bar(pos, data["cooccurrence"], w, label=r"co-occurrence $P[l\mid m]$")
    ax.bar(pos + w, data["saliency"], w, label=r"saliency $\Delta_{lm}$ (product)")
    ax.errorbar(pos + w, data["mc_indicator"], yerr=3 * data["mc_stderr"], fmt="k.", ms=4,
                label=r"Monte Carlo $E[g\,x_l]$ ($\pm 3$ s.e.)")
    ax.plot(pos + w, data["mc_frequency"], "rx", ms=5, label=r"same with normalised bag $x_l/\sum x$")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(pos, names, rotation=20, ha="right", fontsize=9)
    ax.set_ylim(top=1.6)
    ax.legend(fontsize=9, loc="upper center", ncol=3)
    ax.set_title("saliency = discriminancy x co-occurrence", fontsize=9)
    time_left = data["time_left"]
    ax = axes[1]
    for j, n in enumerate(names):
        ax.plot(time_left, data["v"][:, j], label=n, color=f"C{j}")
    _time_to_blowup_axis(ax)
    ax.set_ylabel(r"$v_l(t)$ (closed form)")
    ax.set_title("most salient token grows without bound", fontsize=9)
    ax.legend(fontsize=9, ncol=2)
    ax = axes[2]
    top = int(np.argmax(np.abs(data["saliency"])))
    ax.plot(time_left, data["entropy"], "k", label="attention entropy (nats)")
    ax.plot(time_left, data["attention"][:, top], "C0--", label=f"attention on '{names[top]}'")
    _time_to_blowup_axis(ax)
    ax.set_title(r"attention $\propto P[l\mid m]\,e^{v_l^2/2}$ becomes sparse", fontsize=9)
    ax.legend(fontsize=9)
    return fig


def _ratio_spread(data: FigureData) -> float:
    """Worst spread across tokens of ``erf(v_l/sqrt2)/Delta_l``, relative to its mean size, from the first time
    after 0 (where ``v = 0`` and the ratio is 0 for every token); NaN if ``v`` never left 0 (0/0)."""
    ratio = data["ratio_sqrt2"][1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(np.max(np.ptp(ratio, axis=1) / np.abs(ratio).mean(axis=1)))


DIVERGED = 3.0
"""The most salient token "diverges" if it ends past this value: at 0.999 t* the closed form puts it at
sqrt2 erfinv(0.999) = 3.29, while the other tokens' finite limits here are at most sqrt2 erfinv(0.7) = 1.04."""


def _finite_limits_gap(data: FigureData) -> float:
    """Largest gap at 0.999 t* between the other tokens' ``v`` and their limits; infinite unless the most salient
    token (largest ``|Delta|``) is past :data:`DIVERGED`."""
    top = int(np.argmax(np.abs(data["saliency"])))
    others = np.arange(data["saliency"].size) != top
    if not data["v_closed"][-1, top] > DIVERGED:
        return float("inf")
    return float(np.abs(data["v_closed"][-1, others] - data["limits"][others]).max())


def _closed_form_error(data: FigureData) -> float:
    """Max relative gap between the numerically integrated and the closed-form ``v(t)`` up to 0.999 t*."""
    closed = data["v_closed"]
    return float(np.max(np.abs(data["v_ode"] - closed) / np.maximum(np.abs(closed), 1e-12)))


CLOSED_FORM_CLAIMS = (
    Claim("thm2-closed-form", "Theorem 2",
          r"Linear activation: $\mathrm{erf}(v_l/\sqrt2)/\Delta_l = t/\sqrt{\pi/2}$ solves the dynamics; max relative "
          "gap to a "
          "numerical integration (rtol 1e-10) up to 0.999 t*", _closed_form_error, "<", 1e-6,
          kind="paper", threshold_set="before-data"),
    Claim("thm2-conserved-ratio", "Theorem 2",
          r"$\mathrm{erf}(v_l/\sqrt2)/\Delta_l$ is the same for every token $l$ at every time: worst spread across "
          "tokens, relative to the ratio's size (after t = 0, where it is 0)",
          _ratio_spread, "<", 1e-6,
          kind="paper", threshold_set="before-data"),
    Claim("thm2-erf-v2-typo", "Theorem 2 (slides)",
          r"The slides' form: $\mathrm{erf}(v_l/2)/\Delta_l$ is the same for every token; worst spread across tokens "
          "(the book "
          r"finds the argument must be $v/\sqrt2$)", lambda d: float(np.ptp(d["ratio_half"], axis=1).max()), "<", 1e-6,
          book_says="fails",
          kind="companion", threshold_set="before-data"),
    Claim("thm2-finite-limits", "Theorem 2",
          r"Only the most salient token diverges; the others approach "
          r"$\sqrt2\,\mathrm{erfinv}(\Delta_l/\Delta_{l^*})$: "
          "max gap at "
          r"$0.999\,t^*$ (the approach is $O(1 - t/t^*)$), counted only if the most salient token is past "
          f"{DIVERGED:g} there", _finite_limits_gap, "<", 2e-3,
          kind="companion", threshold_set="after-data",
          threshold_note="the 2e-3 bar was committed with the claim in 4830e84, after this figure's data (c380f6d), "
                         "with the value 1.5e-3 in view"),
)



def _salient_share(data: FigureData) -> float:
    """Final attention entropy over the initial one; infinite if the most salient token does not end on top."""
    top = int(np.argmax(np.abs(data["saliency"])))
    if int(np.argmax(data["attention"][-1])) != top:
        return float("inf")
    return float(data["entropy"][-1] / data["entropy"][0])


SALIENCY_CLAIMS = (
    Claim("thm2-saliency-factorisation", "Theorem 2 (saliency)",
          r"Saliency factorises: $\mathbb E[g x_l] = \mathbb E[g\mid l,m]\,\mathbb P[l\mid m]$, all three estimated "
          "from independent samples, "
          "worst |z| over tokens (4.5 standard errors)", lambda d: float(np.abs(d["mc_factorisation_z"]).max()),
          "<", 4.5,
          kind="companion", threshold_set="before-data"),
    Claim("thm2-most-salient-takes-all", "Theorem 2",
          "The most salient token takes the attention: final/initial attention entropy (infinite if another "
          "token ends on top)", _salient_share, "<", 0.1,
          kind="paper", threshold_set="after-data",
          threshold_note="the 0.1 bar and its data first appear together in c380f6d; the value is 0.025"),
)

FIGURES = [
    FigureSpec(
        fig_id="c-thm2-closed-form",
        title="Theorem 2: closed form vs numerical integration, and the erf argument",
        paper_ref="companion (Theorem 2)",
        chapter="book/theorem2.md",
        make=make_closed_form,
        plot=plot_closed_form,
        # closed forms are exact to rounding; the ODE arrays come from a deterministic adaptive
        # solver (rtol 1e-10), so only floating-point reordering across platforms can move them
        default_tol=Tolerance(rtol=1e-9, atol=1e-12),
        claims=CLOSED_FORM_CLAIMS,
    ),
    FigureSpec(
        fig_id="c-thm2-saliency",
        title="Saliency of tokens, and the most salient token taking the attention",
        paper_ref="companion (Theorem 2, saliency)",
        chapter="book/theorem2.md",
        make=make_saliency,
        plot=plot_saliency,
        # seeded numpy sampling and closed forms: reproducible to rounding
        default_tol=Tolerance(rtol=1e-9, atol=1e-12),
        claims=SALIENCY_CLAIMS,
    ),
]
