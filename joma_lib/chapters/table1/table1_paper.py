"""Table 1 at the paper's scale: the pre-registered claims on the stored run of the ``full`` configuration.

The run is the authors' configuration as we reconstruct it from their code (d_model 1024, MLP 400, 10,000 Adam
steps of 128 sequences at lr 1e-4, the learning rate of their table script, whose README says 1e-5), every
setting, with the untrained network and the shuffled-label control, and 5 seeds: our choice, since the number of
the authors' seeds is not known. It needs a GPU: ``python -m joma_lib table1 --config full --stack
--device cuda --save`` :data:`~joma_lib.theory.table1.runs.PAPER_RESULTS_FILE`, called by ``benchmarks/gpu_checks.sh``.
Until that file exists the claims (:data:`ONLINE_CLAIMS`) are ``not-run`` in the ledger with the reason
:data:`WAITING`; no figure is registered for it yet, so ``verify`` has nothing to skip. The claims and their
threshold were committed before any run of this configuration existed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from joma_lib.chapters.table1.table1 import pooled_margin, stored_table1
from joma_lib.base.io import InputUnavailableError
from joma_lib.base.precision import PRECISIONS
from joma_lib.kit.registry import Claim, FigureData, OnlineClaim
from joma_lib.theory.table1.runs import CONFIGS, PAPER_RESULTS_FILE, config_record

WAITING = "waiting for a GPU run (benchmarks/gpu_checks.sh)"
"""Why the claims of ``c-table1-paper`` are not run while the stored run is missing."""

PAPER_MARGIN_SD = 2.0
"""Threshold of the ``table1-paper-*`` claims, committed on its own before any run of the paper's configuration:
the trained score must exceed the control's by this many pooled seed standard deviations (ddof=1)."""


def make_table1_paper(path: str = str(PAPER_RESULTS_FILE)) -> FigureData:
    """:func:`~joma_lib.chapters.table1.table1.stored_table1` of the stored ``full`` run, with ``precision`` (its
    training's: fp32, tf32 or bf16, from its manifest); :class:`~joma_lib.base.io.InputUnavailableError`
    (:data:`WAITING`) while the file is missing. A file whose manifest (``.json``) names another configuration is
    a :class:`ValueError`."""
    npz = Path(path)
    if not npz.exists():
        raise InputUnavailableError(WAITING)
    manifest = json.loads(npz.with_suffix(".json").read_text())
    full = [config_record(replace(CONFIGS["full"], precision=precision)) for precision in PRECISIONS]
    if manifest.get("config") not in full:
        raise ValueError(f"{npz} was not made with the full configuration: its manifest says "
                         f"{manifest.get('config')}, expected {full[0]} (in any precision of {list(PRECISIONS)})")
    data = stored_table1(npz, "full")
    data["precision"] = np.array(manifest["config"]["precision"])
    return data


def margin_over(kind: str, level: int) -> Callable[[FigureData], float]:
    """Measure of a claim: the smallest, over settings, of the trained layer-``level`` score of latent level
    ``level`` above the ``kind`` network's (``init`` or ``control``), in pooled seed standard deviations.

    Above the control means above the untrained network too (the smaller of the two margins): training on shuffled
    labels can lower the score below its value at initialisation (it does in our smaller runs), and then a network
    that learned nothing would clear the bar against the control alone."""
    others = ("control", "init") if kind == "control" else (kind,)

    def measure(data: FigureData) -> float:
        trained = data["trained"][:, :, level, level]
        return float(np.min([pooled_margin(trained, data[other][:, :, level, level]) for other in others]))
    return measure


def _configuration(name: str) -> str:
    config = CONFIGS[name]
    return (f"d_model {config.d_model}, MLP {config.d_hidden}, {config.steps:,} steps x {config.batch_size} "
            f"sequences, lr {config.lr:g} as in their table script; {len(config.seeds)} seeds, our choice")


_OTHER = {"init": "the untrained network's (same initial weights)",
          "control": "the shuffled-label control's (same initial weights and inputs) and the untrained network's"}

PAPER_CLAIMS = tuple(
    Claim(f"table1-paper-layer{level}-above-{kind}", "Table 1",
          f"The authors' configuration as we reconstruct it ({_configuration('full')}): in every setting, the "
          f"trained layer-{level} score "
          f"of latent level {level} exceeds {_OTHER[kind]} by at least {PAPER_MARGIN_SD:g} pooled seed standard "
          f"deviations (ddof=1); smallest margin over settings",
          margin_over(kind, level), ">=", PAPER_MARGIN_SD, kind="paper", threshold_set="before-data")
    for level in (0, 1) for kind in ("init", "control"))
"""The paper's Table 1 claim at the paper's scale (the authors' configuration as we reconstruct it), tested against
both controls, for layers/levels 0 and 1."""

ONLINE_CLAIMS = tuple(OnlineClaim(claim, make_table1_paper, "book/table1.md",
                                  "the stored paper-scale Table 1 run, made on a GPU by benchmarks/gpu_checks.sh")
                      for claim in PAPER_CLAIMS)
"""The claims, found by the ledger in the chapter's figure module."""
