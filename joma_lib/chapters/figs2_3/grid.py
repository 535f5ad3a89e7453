"""The grid behind the kernel-free explorer of the figs2_3 page (``c-thm1-grid``): Theorem 1 on the toy block over
attention kind x bag concentration x attention temperature."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from joma_lib.theory.attention_kinds import ATTENTIONS
from joma_lib.theory.block import ACTIVATIONS
from joma_lib.theory.invariants import toy_check
from joma_lib.kit.explorer import increasing_values
from joma_lib.kit.registry import FigureData
from joma_lib.base.validation import check_choice, check_int


THEOREM1_CONCENTRATIONS = (0.1, 0.3, 1.0, 3.0, 10.0, 100.0, 1000.0)
THEOREM1_TEMPERATURES = (0.5, 1.0, 2.0, 4.0)
THEOREM1_NC_FROM = 100  # NC is summarised from this step on (the logits have moved by then)


def make_theorem1_grid(attentions: Sequence[str] = ATTENTIONS,
                       concentrations: Sequence[float] = THEOREM1_CONCENTRATIONS,
                       temperatures: Sequence[float] = THEOREM1_TEMPERATURES, phi: str = "identity",
                       steps: int = 400, record_every: int = 8, seed: int = 0) -> FigureData:
    """Theorem 1 on the toy block (:func:`joma_lib.theory.invariants.toy_check`, ``lr_z = lr_w = 0.1``) over
    attention kind x Dirichlet concentration of the bags x attention temperature ``tau``. The runs use the numpy
    engine (hand-written gradients: torch autograd's runs to ~1e-14, in a tenth of the time).

    Returns ``residual`` and ``nc`` (attentions, concentrations, temperatures, n) at ``steps`` (n,): the relative
    invariant residual and NC(z-hat, z) between the logits and Theorem 1's prediction.
    """
    attentions = tuple(check_choice("attentions[i]", a, ATTENTIONS) for a in attentions)
    if not attentions:
        raise ValueError("attentions must name at least one attention kind")
    c_values = increasing_values("concentrations", concentrations, 0.0, 1e6)
    t_values = increasing_values("temperatures", temperatures, 0.0, 100.0)
    check_choice("phi", phi, list(ACTIVATIONS))
    if len(attentions) * c_values.size * t_values.size > 200:
        raise ValueError("the grid may hold at most 200 runs (attentions x concentrations x temperatures)")
    steps = check_int("steps", steps, THEOREM1_NC_FROM + 1)
    record_every = check_int("record_every", record_every, 1, steps)
    runs = [[[toy_check(a, phi, seed, concentration=c, steps=steps, record_every=record_every, temperature=t,
                        engine="numpy") for t in t_values] for c in c_values] for a in attentions]

    def stack(key: str) -> np.ndarray:
        return np.array([[[run[key] for run in row] for row in block] for block in runs])

    return {"attentions": np.array(attentions), "concentrations": c_values, "temperatures": t_values,
            "phi": np.asarray(phi), "steps": runs[0][0][0]["steps"], "residual": stack("residual"),
            "nc": stack("nc")}


def smallest_nc(data: FigureData) -> np.ndarray:
    """Smallest NC(z-hat, z) from step :data:`THEOREM1_NC_FROM` on, per grid cell."""
    if not isinstance(data, Mapping) or not {"nc", "steps"} <= set(data):
        raise ValueError(f"data must be the grid figure's data, with the arrays 'nc' and 'steps', got "
                         f"{sorted(data) if isinstance(data, Mapping) else type(data).__name__}")
    return data["nc"][..., data["steps"] >= THEOREM1_NC_FROM].min(axis=-1)


def plot_theorem1_grid(data: FigureData) -> Figure:
    """Final residual (left) and smallest NC(z-hat, z) after step 100 (right) against the bag concentration,
    one colour per attention kind, one line per temperature (darker = higher tau)."""
    conc, temps = data["concentrations"], data["temperatures"]
    fig = Figure(figsize=(8.8, 3.6), layout="constrained")
    ax_r, ax_nc = fig.subplots(1, 2)
    nc_min = smallest_nc(data)
    for i, attention in enumerate(data["attentions"]):
        for k, t in enumerate(temps):
            shade = 0.35 + 0.65 * k / max(temps.size - 1, 1)
            label = f"{attention}" if k == temps.size - 1 else None
            ax_r.loglog(conc, data["residual"][i, :, k, -1], "o-", color=f"C{i}", alpha=shade, lw=1, ms=3,
                        label=label)
            ax_nc.semilogx(conc, nc_min[i, :, k], "o-", color=f"C{i}", alpha=shade, lw=1, ms=3, label=label)
    ax_r.set_ylabel(f"invariant residual at step {int(data['steps'][-1])}")
    ax_nc.set_ylabel(rf"min NC$(\hat z, z)$ from step {THEOREM1_NC_FROM}")
    for ax in (ax_r, ax_nc):
        ax.set_xlabel("Dirichlet concentration of the bags")
    ax_r.legend(title=rf"attention ($\tau$ = {temps[0]:g}..{temps[-1]:g})", fontsize=9, title_fontsize=9)
    return fig
