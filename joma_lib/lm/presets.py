"""Named sweeps (:data:`PRESETS`): the paper's, and the CPU re-runs of the companion that its figures train.

``preset_configs`` turns a preset into its runs' configs; :func:`train_preset` trains them repeatably on the CPU;
:func:`preset_precision` and :func:`preset_auto_choice` say in which precision they train on this machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from joma_lib.base.device import resolve_device
from joma_lib.lm.config import RunConfig, sweep_configs
from joma_lib.base.precision import AutoChoice, cached_choice
from joma_lib.lm.step import run_shapes
from joma_lib.lm.sweep import sweep_precision, train_on_cpu
from joma_lib.base.validation import check_choice

PRESETS: dict[str, dict[str, Any]] = {
    # the paper's Fig. 6 sweep (WikiText-2, 20 epochs, lr 1e-4, 3 seeds); a GPU job
    "paper": dict(data="wikitext2", layers=[1, 2, 5, 10], lr=[1e-4], seeds=[1, 2, 3], steps=58_000,
                  eval_interval=1000),
    # the paper's Fig. 8 sweep (5 layers, seven learning rates)
    "paper-lr": dict(data="wikitext2", layers=[5], lr=[1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2], seeds=[1, 2, 3],
                     steps=58_000, eval_interval=1000),
    # the CPU reproduction of the companion (figure c-rerun-full), in the faster precision of the machine (the
    # committed results were trained in bf16); about 7 minutes on 2 cores with --jobs 2 in bf16, longer in fp32
    "rerun-full": dict(data="wikivital", layers=[1, 2], lr=[1e-3], seeds=[1, 2], steps=4000, eval_interval=100,
                       eval_chunks=20, max_vocab=4000, precision="auto"),
    # its shortened version, rerun by CI (figure c-rerun-quick, one reference per precision); 1-2 CPU-minutes. The
    # claim rerun-bf16-matches-fp32 (figure c-rerun-precision) checks that bf16 keeps its entropy curve in fp32's
    # seed band
    "rerun-quick": dict(data="wikivital", layers=[1, 2], lr=[1e-3], seeds=[1], steps=600, eval_interval=50,
                        eval_chunks=10, max_vocab=2000, precision="auto"),
    # Fig. 7 stand-in (figure c-fig7-standin): a small Pythia-architecture model on Wikipedia leads, measured on
    # Pythia's checkpoint schedule, at Pythia-70M's peak lr; one optimiser throughout, as Pythia
    "fig7-standin": dict(data="wikivital", arch="gptneox", layers=[4], d=64, n_heads=2, d_ff=256, dropout=0.0,
                         lr=[1e-3], seeds=[3, 4], steps=3000, eval_interval=1000, log_checkpoints=True,
                         eval_chunks=10, max_vocab=4000, adam_reset="never"),
    # its shortened version, rerun by CI (figure c-fig7-quick)
    "fig7-quick": dict(data="wikivital", arch="gptneox", layers=[2], d=64, n_heads=2, d_ff=256, dropout=0.0,
                       lr=[1e-3], seeds=[1], steps=2000, eval_interval=500, log_checkpoints=True,
                       eval_chunks=5, max_vocab=2000, adam_reset="never"),
}


#: the presets of the paper's Figs. 6 and 8, trained together at paper scale (they share Fig. 6's 5-layer runs)
PAPER_SWEEP = ("paper", "paper-lr")
#: runs to a stack in the GPU benchmarks of the paper sweep's step (benchmarks/bench_lm_stack.py,
#: profile_lm_stack.py): 7 runs of the 5-layer model (one seed's learning rates of Fig. 8), the 3 seeds of every
#: other depth. A lent GPU trains the sweep in stacks sized to the loan instead (lm run --finish-within:
#: :mod:`joma_lib.lm.stack_plan`)
PAPER_GPU_STACK = 7


def paper_sweep_configs() -> list[RunConfig]:
    """The distinct runs of :data:`PAPER_SWEEP` (30: 4 depths x 3 seeds at lr 1e-4, and 7 learning rates x 3
    seeds at 5 layers, 3 runs in both), each named once, as ``lm run --preset paper paper-lr`` trains them."""
    configs: dict[str, RunConfig] = {}
    for preset in PAPER_SWEEP:
        for cfg in preset_configs(preset):
            configs.setdefault(cfg.name, cfg)
    return list(configs.values())


def preset_configs(preset: str, seeds: Sequence[int] | None = None, **overrides: Any) -> list[RunConfig]:
    """One config per run of a preset of :data:`PRESETS`.

    ``seeds`` replace the preset's; ``overrides`` change :class:`~joma_lib.lm.config.RunConfig` fields (e.g.
    ``steps``).
    """
    check_choice("preset", preset, tuple(PRESETS))
    settings = dict(PRESETS[preset])
    layers, lrs, preset_seeds = settings.pop("layers"), settings.pop("lr"), settings.pop("seeds")
    base = replace(RunConfig(**settings), **overrides)
    return sweep_configs(base, layers, lrs, list(seeds or preset_seeds))


def preset_precision(preset: str, device: str = "cpu") -> str:
    """The precision a preset's runs train in here, on one thread (as :func:`train_preset` trains them)."""
    return sweep_precision(preset_configs(preset), resolve_device(device), threads=1)[0].precision


def preset_auto_choice(preset: str) -> AutoChoice | None:
    """``auto``'s measurement for a preset on this CPU (one thread; made now if not cached): the choice and both
    step times. None when nothing was measured (no ``auto`` in the preset, ``JOMA_PRECISION`` set, no bf16 or bf16
    only on PyTorch's reference kernels: :func:`~joma_lib.base.precision.candidates`)."""
    configs = [c for c in preset_configs(preset) if c.precision == "auto"]
    if not configs:
        return None
    preset_precision(preset)
    return cached_choice(run_shapes(max(configs, key=lambda c: c.n_layers), torch.device("cpu")), 1)


def train_preset(preset: str, seeds: Sequence[int] | None = None, **overrides: Any) -> dict[str, np.ndarray]:
    """Train a preset of :data:`PRESETS` with :func:`~joma_lib.lm.sweep.train_on_cpu`; return the collected runs.

    ``seeds`` replace the preset's (``calibrate`` measures the seed spread with them); ``overrides`` change
    :class:`~joma_lib.lm.config.RunConfig` fields (e.g. ``steps``).
    """
    return train_on_cpu(preset_configs(preset, seeds, **overrides))
