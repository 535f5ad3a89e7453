"""The re-run at the paper's scale (Figs. 6 and 8), pre-registered: its claims were committed before its data.

The run: the paper's model and training (d 200, FFN 200, one head, dropout 0.2, Adam at constant lr with the
authors' reset every epoch, clip 0.5, batches 20 x 35, 58,000 steps, the whole validation split every 1,000
steps), for Fig. 6 at 1/2/5/10 layers and lr 1e-4 and for Fig. 8 at 5 layers and 7 learning rates, 3 seeds each
(30 distinct runs: Fig. 6's 5-layer runs are Fig. 8's lr-1e-4 runs). It trains on WikiText-2 where the Hugging
Face hub answers, otherwise on the labelled offline stand-in (Wikipedia leads, vocabulary cut to 33,278 words,
the size of WikiText-2's vocabulary in its standard word-level release): ``bash benchmarks/gpu_checks.sh``
runs ``python -m joma_lib.lm run --preset paper paper-lr --stack --max-vocab 33278 --device cuda`` and
collects the results into :data:`PAPER_RESULTS`. The GPU machines have no network, so the runs stored so far trained
on the stand-in, in bf16; every claim names the corpus, vocabulary and precision of the stored runs, read from the
json beside them (:func:`trained_setting`, :data:`CONFIGURATION`).

Until that file exists the claims below are ``not-run`` in the ledger, with the reason: how many of the sweep's
runs have finished so far (:data:`~joma_lib.kit.sweeps.PAPER_SO_FAR`, :func:`paper_runs_in`). The first five are
the paper's statements made measurable (kind ``paper``); the last is a reading of the authors' data that the paper
does not state (kind ``companion``, like ``fig8-high-lr-collapse`` on the authors' own runs). Every bar is read off
the authors' own runs (``wikitext.md``), none off ours:

* every layer of the 1-, 2- and 5-layer models dips and recovers (the smallest dip or rebound in the authors' runs
  is 0.14 nats: bar 0.1);
* in the 10-layer model, layers 3-9 recover by more than 0.2 nats (authors: at least 0.23);
* the best validation loss falls with depth (the panel titles of Fig. 6);
* over the learning rates of Fig. 8 the best validation loss is U-shaped: its minimum lies inside the range and
  both ends are worse by more than 0.1 nats (authors: 1.24 and 1.59);
* at the learning rate with the best validation loss every layer dips and recovers by more than 0.1 nats (the
  paper's reading of Fig. 8: the patterns the theory predicts come with the lowest validation loss);
* at lr >= 1e-3 layer 0's final entropy is below 0.05 nats (authors: at most 0.01; seen in their data, not
  claimed by the paper).

A run without the mechanism fails them: a curve that only falls has no rebound, one that stays at its start has no
dip, an untrained model has a flat validation loss over depth and learning rate. So does a sweep with a hole in it:
the claims are judged only when every run of the sweep is in, whole (:func:`incomplete_runs`), and a missing or NaN
value makes a measure NaN, which fails (numpy's reductions keep a NaN where Python's ``min`` and ``max`` may drop it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np

from joma_lib.kit.sweeps import PAPER_SO_FAR, RESULTS_DIR, paper_runs_waiting
from joma_lib.base.io import InputUnavailableError
from joma_lib.kit.registry import Claim, FigureData, OnlineClaim
from joma_lib.lm.data import OFFLINE_STANDIN
from joma_lib.lm.presets import paper_sweep_configs

PAPER_RESULTS = RESULTS_DIR / "rerun-paper.npz"
FIG6_DEPTHS = (1, 2, 5, 10)
FIG8_LRS = (1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2)
DIP_NATS, DEEP_REBOUND_NATS, U_NATS, COLLAPSED_NATS = 0.1, 0.2, 0.1, 0.05
#: how the claims name each corpus the runs may have trained on (:data:`~joma_lib.lm.data.CORPORA`)
CORPUS_NAMES = {"wikitext2": "WikiText-2", "wikitext103": "WikiText-103",
                "wikivital": "the Wikipedia-leads stand-in", "ptb": "the Penn Treebank stand-in"}


def trained_setting(paths: tuple[str | Path, ...] = (PAPER_RESULTS, PAPER_SO_FAR)) -> tuple[bool, str]:
    """Whether the stored paper-scale runs trained on another corpus than the sweep asks for (a stand-in), and
    their corpus, vocabulary and precision ("the Wikipedia-leads stand-in, vocabulary capped at 33,278 words,
    bf16"), read from the json beside the first of ``paths`` that has one: the whole sweep's results, else the runs
    so far. Without either: not a stand-in as far as is known, and the corpus the sweep asks for, or offline its
    stand-in."""
    wanted = paper_sweep_configs()[0].data
    for path in map(Path, paths):
        meta_path = path.with_suffix(".json")
        if not meta_path.exists():
            continue
        meta = json.loads(meta_path.read_text())
        configs, trained = meta.get("configs", []), meta.get("trained", [])
        if not configs:
            continue
        corpora = sorted({c["data"] for c in configs})
        vocabularies = sorted({c.get("max_vocab") or 0 for c in configs})
        precisions = sorted({t["precision_used"] for t in trained if "precision_used" in t}
                            or {c["precision"] for c in configs})
        corpus = " and ".join(CORPUS_NAMES.get(name, name) for name in corpora)
        vocabulary = " / ".join(f"vocabulary capped at {v:,} words" if v else "its whole vocabulary"
                                for v in vocabularies)
        return corpora != [wanted], f"{corpus}, {vocabulary}, {' / '.join(precisions)}"
    return False, f"{CORPUS_NAMES[wanted]} or, offline, {CORPUS_NAMES[OFFLINE_STANDIN]}"


def _configuration() -> tuple[str, str]:
    """How every claim names its runs: "Re-run at the paper's scale", "on a stand-in corpus" when the stored runs
    trained on one (:func:`trained_setting`), and the setting in full: the corpus, vocabulary and precision of the
    stored runs, then the paper's model and schedule (:func:`~joma_lib.lm.presets.paper_sweep_configs`)."""
    sweep = paper_sweep_configs()
    cfg = sweep[0]
    standin, trained = trained_setting()
    reset = "Adam reset every epoch" if cfg.adam_reset == "epoch" else "one Adam throughout"
    return (f"Re-run at the paper's scale{' on a stand-in corpus' if standin else ''}",
            f"on {trained}; the paper's model and schedule: d {cfg.d} / FFN {cfg.d_ff}, {cfg.steps:,} steps of "
            f"{cfg.batch_size} x {cfg.seq_len} tokens, {reset}, {len({c.seed for c in sweep})} seeds")


RERUN, CONFIGURATION = _configuration()


def paper_runs_in(finished: str | Path = PAPER_SO_FAR) -> tuple[int, int]:
    """How many of the paper sweep's distinct runs are among the ``finished`` ones
    (:func:`~joma_lib.kit.sweeps.paper_runs_waiting`), and how many the sweep has."""
    total = len(paper_sweep_configs())
    return total - sum(paper_runs_waiting(finished).values()), total


def incomplete_runs(data: FigureData) -> list[str]:
    """The names of the paper sweep's runs (:func:`~joma_lib.lm.presets.paper_sweep_configs`) that ``data`` (as
    :func:`joma_lib.lm.runs.collect` writes it) does not hold whole: absent, present more than once, or without
    every checkpoint (0, 1,000, ..., 58,000) and a finite validation loss and attention entropy of each of its
    layers at each of them."""
    incomplete = []
    for cfg in paper_sweep_configs():
        rows = np.flatnonzero((data["nlayers"] == cfg.n_layers) & (data["seed"] == cfg.seed)
                              & np.isclose(data["lr"], cfg.lr, rtol=1e-6, atol=0.0))
        checkpoints = np.arange(0, cfg.steps + 1, cfg.eval_interval)
        whole = len(rows) == 1 and all((
            np.array_equal(data["minibatch"][rows[0]], checkpoints),
            np.isfinite(data["val_loss"][rows[0]]).all(),
            np.isfinite(data["attn_entropy"][rows[0]][:, :cfg.n_layers]).all()))
        if not whole:
            incomplete.append(cfg.name)
    return incomplete


def fetch_paper_rerun() -> FigureData:
    """The collected runs of the paper-scale re-run (:func:`joma_lib.lm.runs.collect` arrays), or
    :class:`~joma_lib.base.io.InputUnavailableError` while they have not all been made, saying how many are in
    (:func:`paper_runs_in`), or while the file lacks some of them whole (:func:`incomplete_runs`)."""
    done, total = paper_runs_in()
    if not PAPER_RESULTS.exists():
        raise InputUnavailableError(
            f"{done} of the paper sweep's {total} runs have finished ({PAPER_SO_FAR.name}); the claims are judged "
            f"when all {total} are in ({PAPER_RESULTS.name})")
    with np.load(PAPER_RESULTS) as npz:
        data = {k: npz[k] for k in npz.files}
    missing = incomplete_runs(data)
    if missing:
        raise InputUnavailableError(
            f"{PAPER_RESULTS.name} holds {total - len(missing)} of the paper sweep's {total} runs whole (missing or "
            f"cut short: {', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}); the claims are judged when "
            f"all {total} are in")
    return data


def seed_mean(data: FigureData, depth: int, lr: float) -> tuple[np.ndarray, np.ndarray]:
    """The seed-averaged attention entropy ``[C, depth]`` and validation loss ``[C]`` of one (depth, lr)."""
    runs = (data["nlayers"] == depth) & np.isclose(data["lr"], lr, rtol=1e-6, atol=0.0)
    if not runs.any():
        return np.full((1, depth), np.nan), np.full(1, np.nan)
    return data["attn_entropy"][runs][:, :, :depth].mean(axis=0), data["val_loss"][runs].mean(axis=0)


def dip_and_rebound(curve: np.ndarray) -> float:
    """The smaller of the dip ``curve[0] - min`` and the rebound ``curve[-1] - min``; 0 when the minimum is at
    either end (no dip, or no rebound); NaN when a value is missing."""
    if not np.isfinite(curve).all():
        return float("nan")
    k = int(np.argmin(curve))
    return float(min(curve[0] - curve[k], curve[-1] - curve[k]))  # one of the two is 0 with k at an end


def rebound(curve: np.ndarray) -> float:
    """``curve[-1] - min``, 0 when the minimum is at either end; NaN when a value is missing."""
    if not np.isfinite(curve).all():
        return float("nan")
    k = int(np.argmin(curve))
    return float(curve[-1] - curve[k]) if k > 0 else 0.0  # with k last, curve[-1] - curve[k] is 0


def so_far_rows(data: FigureData) -> list[dict[str, object]]:
    """Per (depth, lr) of the runs in ``data``: how many seeds, each layer's :func:`dip_and_rebound` of the
    seed-averaged entropy (nats), the best seed-averaged validation loss and the step where it is reached
    (``best_step``, the first such checkpoint), and the seed-averaged validation loss at the last checkpoint
    (``final_val_loss``): the measures of the claims below, read on the runs finished so far, and whether the runs
    over-fit (a final loss above the best)."""
    rows = []
    for depth, lr in sorted({(int(n), float(r)) for n, r in zip(data["nlayers"], data["lr"], strict=True)}):
        entropy, loss = seed_mean(data, depth, lr)
        runs = (data["nlayers"] == depth) & np.isclose(data["lr"], lr, rtol=1e-6, atol=0.0)
        best = int(np.nanargmin(loss))
        rows.append({"layers": depth, "lr": lr, "seeds": int(runs.sum()),
                     "dip_and_rebound": [dip_and_rebound(entropy[:, j]) for j in range(depth)],
                     "best_val_loss": float(loss[best]),
                     "best_step": int(data["minibatch"][np.flatnonzero(runs)[0]][best]),
                     "final_val_loss": float(loss[-1])})
    return rows


def shallow_dip_and_rebound(data: FigureData) -> float:
    """The smallest :func:`dip_and_rebound` over every layer of the 1-, 2- and 5-layer models at lr 1e-4."""
    return float(np.min([dip_and_rebound(entropy[:, j]) for depth in (1, 2, 5)
                         for entropy in [seed_mean(data, depth, 1e-4)[0]] for j in range(depth)]))


def deep_upper_rebound(data: FigureData) -> float:
    """The smallest :func:`rebound` of layers 3-9 of the 10-layer model at lr 1e-4."""
    entropy = seed_mean(data, 10, 1e-4)[0]
    return float(np.min([rebound(entropy[:, j]) for j in range(3, 10)]))


def best_loss_by_depth(data: FigureData) -> np.ndarray:
    """The best (over checkpoints) seed-averaged validation loss at each depth of Fig. 6, lr 1e-4."""
    return np.array([np.min(seed_mean(data, depth, 1e-4)[1]) for depth in FIG6_DEPTHS])


def best_loss_by_lr(data: FigureData) -> np.ndarray:
    """The best seed-averaged validation loss of the 5-layer model at each learning rate of Fig. 8."""
    return np.array([np.min(seed_mean(data, 5, lr)[1]) for lr in FIG8_LRS])


def lr_u_depth(data: FigureData) -> float:
    """How much worse both ends of Fig. 8's learning rates are than the best one; 0 if the best is at an end, NaN
    if a learning rate's loss is missing."""
    losses = best_loss_by_lr(data)
    if not np.isfinite(losses).all():
        return float("nan")
    k = int(np.argmin(losses))
    return float(np.min(losses[[0, -1]]) - losses[k]) if 0 < k < len(losses) - 1 else 0.0


def best_lr_offset(data: FigureData) -> float:
    """``|log10(best lr) - log10(1e-4)|``: how many decades the learning rate with Fig. 8's best validation loss
    lies from 1e-4, Fig. 6's rate; NaN if a learning rate's loss is missing."""
    losses = best_loss_by_lr(data)
    if not np.isfinite(losses).all():
        return float("nan")
    return float(abs(np.log10(FIG8_LRS[int(np.argmin(losses))]) + 4.0))


def best_lr_dip_and_rebound(data: FigureData) -> float:
    """The smallest :func:`dip_and_rebound` of the 5-layer model's layers at its best learning rate; NaN if a
    learning rate's loss is missing (the best one is then unknown)."""
    losses = best_loss_by_lr(data)
    if not np.isfinite(losses).all():
        return float("nan")
    entropy = seed_mean(data, 5, FIG8_LRS[int(np.argmin(losses))])[0]
    return float(np.min([dip_and_rebound(entropy[:, j]) for j in range(5)]))


def high_lr_layer0_final(data: FigureData) -> float:
    """The largest final layer-0 entropy of the 5-layer model at lr 1e-3 and 1e-2."""
    return float(np.max([seed_mean(data, 5, lr)[0][-1, 0] for lr in (1e-3, 1e-2)]))


def _claim(claim_id: str, ref: str, statement: str, measure: Callable[[FigureData], float],
           relation: Literal["<", ">"], threshold: float, kind: Literal["paper", "companion"] = "paper") -> Claim:
    return Claim(claim_id, ref, f"{statement} ({CONFIGURATION})", measure, relation, threshold, kind=kind,
                 threshold_set="before-data")


PAPER_CLAIMS = (
    _claim("fig6-paper-rerun-every-layer-dips-and-recovers", "Fig. 6",
           f"{RERUN}: every layer of the 1-, 2- and 5-layer models (lr 1e-4) dips and recovers, "
           f"each by more than {DIP_NATS} nats (our reading of the authors' runs, as on the WikiText page)",
           shallow_dip_and_rebound, ">", DIP_NATS, kind="companion"),
    _claim("fig6-paper-rerun-deep-upper-layers-recover", "Fig. 6",
           f"{RERUN}: layers 3-9 of the 10-layer model recover by more than {DEEP_REBOUND_NATS} "
           "nats", deep_upper_rebound, ">", DEEP_REBOUND_NATS),
    _claim("fig6-paper-rerun-depth-lowers-loss", "Fig. 6",
           f"{RERUN}: the best validation loss falls with depth (1, 2, 5, 10 layers): the largest "
           "step from one depth to the next is negative", lambda d: float(np.diff(best_loss_by_depth(d)).max()),
           "<", 0.0),
    _claim("fig8-paper-rerun-lr-u-shape", "Fig. 8",
           f"{RERUN}: the best validation loss over Fig. 8's seven learning rates has its minimum "
           f"inside the range, both ends worse by more than {U_NATS} nats (our reading of the authors' runs)",
           lr_u_depth, ">", U_NATS, kind="companion"),
    _claim("fig8-paper-rerun-best-lr-is-fig6-rate", "Fig. 8",
           f"{RERUN}: the best validation loss over Fig. 8's seven learning rates is at lr 1e-4, the rate of Fig. 6 "
           "(the panel the authors' plotting script sets in bold): |log10(best lr) + 4|", best_lr_offset, "<", 0.01),
    _claim("fig8-paper-rerun-best-lr-dips-and-recovers", "Fig. 8",
           f"{RERUN}: at the learning rate with the best validation loss, every layer of the "
           f"5-layer model dips and recovers by more than {DIP_NATS} nats (the paper's Fig. 8 point, known to us only "
           "second-hand)", best_lr_dip_and_rebound, ">", DIP_NATS, kind="companion"),
    _claim("fig8-paper-rerun-high-lr-collapse", "Fig. 8",
           f"{RERUN}: at lr 1e-3 and 1e-2 layer 0's attention ends below {COLLAPSED_NATS} nats "
           "of entropy (one token per query), as in the authors' runs (seen in their data, not claimed by the paper)",
           high_lr_layer0_final, "<", COLLAPSED_NATS, kind="companion"),
)

ONLINE_CLAIMS = tuple(OnlineClaim(claim, fetch_paper_rerun, "book/rerun.md",
                                  "the paper-scale re-run, made on a GPU by benchmarks/gpu_checks.sh")
                      for claim in PAPER_CLAIMS)
