"""The figure registry: one :class:`FigureSpec` per figure, keyed by the paper's number.

Every chapter package's figure module (``joma_lib/chapters/<chapter>/figures.py``) defines a module-level list
``FIGURES: list[FigureSpec]``; :func:`registry` discovers them all, so adding a
figure never means editing a central list. Ids follow the paper (``fig2a``,
``fig4``, ``table1``); companion-only figures start with ``c-`` (``c-setting-embeddings``).

A spec couples a deterministic ``make`` (parameters -> dict of numpy arrays; no
plotting) with a ``plot`` (that dict -> matplotlib Figure; no computing). The book
pages and ``python -m joma_lib.figures verify`` call the same ``make`` with the same
``params``, so the page and the check cannot drift apart.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import operator
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure

FigureData = dict[str, np.ndarray]


@dataclass(frozen=True)
class Tolerance:
    """Per-array comparison tolerance: ``|new - ref| <= atol + rtol * |ref|`` elementwise.

    ``gpu_rtol``/``gpu_atol`` replace ``rtol``/``atol`` when ``JOMA_DEVICE`` resolves to
    CUDA (TF32 and non-deterministic reductions make GPU data differ slightly).
    """

    rtol: float = 1e-7
    atol: float = 1e-10
    gpu_rtol: float | None = None
    gpu_atol: float | None = None

    def for_device(self, gpu: bool) -> tuple[float, float]:
        """The ``(rtol, atol)`` pair that applies on a GPU (``gpu=True``) or on the CPU."""
        if gpu:
            return (self.gpu_rtol if self.gpu_rtol is not None else self.rtol,
                    self.gpu_atol if self.gpu_atol is not None else self.atol)
        return self.rtol, self.atol


# The shared tolerances, one name per kind of figure data.
READ_BACK = Tolerance(rtol=1e-12, atol=1e-12)
"""Data read back from a committed file (or configuration arrays): only the last bits may differ."""
SGD = Tolerance(rtol=1e-6, atol=1e-9, gpu_rtol=1e-4, gpu_atol=1e-6)
"""Short, deterministic float64 SGD simulations of the toy models (Theorems 1-4)."""
INVARIANT_RESIDUAL = Tolerance(rtol=1e-5, atol=1e-10, gpu_rtol=1e-3, gpu_atol=1e-7)
"""Theorem 1's invariant residual, ~1e-3 of SGD's discretisation for the exact kinds: compared relatively."""
TRAINED = Tolerance(rtol=0.0, atol=0.03, gpu_atol=0.1)
"""Trained language models, before ``calibrate`` replaces it with a measured tolerance."""


#: ``error``: the figure's computation raised, so its claims could not be evaluated (the ledger goes on); or a claim
#: the book reports as failing measured a non-finite value (:data:`UNMEASURED`)
Verdict = Literal["holds", "fails", "not-run", "error"]
Kind = Literal["paper", "companion", "sanity"]
"""What a claim is: the paper says it (``paper``); our control, extension or reading of data (``companion``);
true by construction, kept only as a guard against broken code (``sanity``)."""
KINDS: tuple[Kind, ...] = ("paper", "companion", "sanity")
ThresholdSet = Literal["before-data", "after-data"]
"""When the threshold was chosen: from the paper, a closed form or a numerical tolerance, or committed before the data
it tests were made (``before-data``); or chosen, or changed, knowing the measured value (``after-data``)."""
THRESHOLD_SETS: tuple[ThresholdSet, ...] = ("before-data", "after-data")
_RELATIONS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
UNMEASURED = ("the measure is not a finite number, so the failure the book reports was not measured (a NaN from a "
              "missing or broken value would pass as that failure)")
"""The reason of an ``error`` verdict on a claim the book says fails, whose measure came out NaN or infinite."""


@dataclass(frozen=True)
class Claim:
    """One claim, checked on the data of the figure that shows it.

    The verdict is ``measure(data) <relation> threshold``. A non-finite measured value fails a claim the book
    says holds; on a claim the book reports as failing it is an ``error`` (:data:`UNMEASURED`), since a NaN from a
    missing or broken value is no measurement of that failure. Every claim says
    what kind it is and when its threshold was set; a threshold chosen or moved after the data were seen says so
    in ``threshold_note``, and the ledger prints it.

    Attributes:
        claim_id: stable id (``thm1-exp-invariant``), cited by the ledger page and the CLI.
        paper_ref: where the paper makes the claim (``"Theorem 1"``, ``"Fig. 6"``, ``"Sec. 5"``).
        statement: one line, in the book's words, of what is claimed and how it is measured here.
        measure: ``measure(data) -> float``, computed from the figure's data only.
        relation: one of ``<``, ``<=``, ``>``, ``>=``.
        threshold: the bound the measured value is compared with.
        book_says: what the page states about the claim. ``verify`` fails when a claim the
            book says ``holds`` fails; a claim the book reports as failing is checked to still fail.
        kind: ``paper``, ``companion`` or ``sanity`` (see :data:`Kind`); keyword-only and required.
        threshold_set: ``before-data`` or ``after-data`` (see :data:`ThresholdSet`); keyword-only and required.
        threshold_note: one line, required for ``after-data``: what was seen, and what changed.
        blind: one line, for a claim that cannot tell the mechanism from its absence (it also holds on an
            untrained network or on a control): what else it holds on. Such a claim is shown but never counted
            as support; empty for a claim that can fail when the mechanism is missing.
    """

    claim_id: str
    paper_ref: str
    statement: str
    measure: Callable[[FigureData], float]
    relation: Literal["<", "<=", ">", ">="]
    threshold: float
    book_says: Literal["holds", "fails"] = "holds"
    kind: Kind = field(kw_only=True)
    threshold_set: ThresholdSet = field(kw_only=True)
    threshold_note: str = field(default="", kw_only=True)
    blind: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        if self.relation not in _RELATIONS:
            raise ValueError(f"claim {self.claim_id!r}: relation must be one of {sorted(_RELATIONS)}, "
                             f"got {self.relation!r}")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.claim_id!r}: kind must be one of {list(KINDS)}, got {self.kind!r}")
        if self.threshold_set not in THRESHOLD_SETS:
            raise ValueError(f"claim {self.claim_id!r}: threshold_set must be one of {list(THRESHOLD_SETS)}, "
                             f"got {self.threshold_set!r}")
        note = self.threshold_note.strip()
        if self.threshold_set == "after-data" and not note:
            raise ValueError(f"claim {self.claim_id!r}: threshold_note must say what was seen and what changed "
                             f"when threshold_set is 'after-data', got {self.threshold_note!r}")
        if "\n" in note:
            raise ValueError(f"claim {self.claim_id!r}: threshold_note must be one line, got {self.threshold_note!r}")
        if "\n" in self.blind:
            raise ValueError(f"claim {self.claim_id!r}: blind must be one line, got {self.blind!r}")

    def evaluate(self, data: FigureData) -> tuple[float, Verdict]:
        """The measured value and the verdict (``holds``/``fails``; ``error`` for a non-finite value of a claim the
        book says fails) on one figure's data."""
        value = float(self.measure(data))
        if not math.isfinite(value) and self.book_says == "fails":
            return value, "error"
        holds = math.isfinite(value) and _RELATIONS[self.relation](value, self.threshold)
        return value, "holds" if holds else "fails"


@dataclass(frozen=True)
class FigureSpec:
    """Everything needed to regenerate, draw, verify and cite one figure.

    Attributes:
        fig_id: stable id, the paper's number (``fig2a``) or ``c-...`` for companion figures.
        title: short human title, shown by ``list`` and used in captions.
        paper_ref: where it sits in the paper (``"Fig. 2 (left)"``) or ``"companion"``.
        chapter: the book page that shows it (``"book/theorem1.md"``).
        make: ``make(**params) -> FigureData``, deterministic for fixed params (seeds included).
        plot: ``plot(data) -> Figure``; pure drawing.
        params: the parameters used for the reference data, CI and the book page.
        full_params: overrides for the paper-scale run (readers; may be slow). Empty if
            ``params`` already is the paper's setting.
        tolerances: per-array tolerances; arrays not listed use ``default_tol``.
        default_tol: tolerance for arrays not named in ``tolerances``.
        claims: the paper's claims this figure's data test (see :class:`Claim`).
        trained: ``make`` trains a model (torch), so its data vary with the CPU's numerics; its
            tolerances are measured by ``python -m joma_lib.figures calibrate`` and stored with the reference.
        calibration_seeds: parameter overrides that change only the seeds; ``calibrate`` runs each to
            measure the seed spread of a trained figure.
        stored_run: ``make`` reads the committed results of a run too long for CI (``joma_lib/lm/results/``,
            ``joma_lib/theory/table1/results/``);
            the ledger marks its claims "[stored run]".
        reference_variant: for a trained figure whose numbers depend on a choice made per machine (the training
            precision that ``auto`` picks), ``reference_variant()`` names the reference that applies here:
            ``""`` the main one (``<fig_id>.npz``), e.g. ``"fp32"`` another (``<fig_id>.fp32.npz``), each with its
            own calibrated tolerances.
    """

    fig_id: str
    title: str
    paper_ref: str
    chapter: str
    make: Callable[..., FigureData]
    plot: Callable[[FigureData], Figure]
    params: Mapping[str, Any] = field(default_factory=dict)
    full_params: Mapping[str, Any] = field(default_factory=dict)
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)
    default_tol: Tolerance = Tolerance()
    claims: tuple[Claim, ...] = ()
    trained: bool = False
    calibration_seeds: tuple[Mapping[str, Any], ...] = ()
    stored_run: bool = False
    reference_variant: Callable[[], str] | None = None

    def tolerance(self, array_name: str) -> Tolerance:
        """The tolerance that applies to one array of this figure's data."""
        return self.tolerances.get(array_name, self.default_tol)


@dataclass(frozen=True)
class OnlineClaim:
    """A claim of the paper whose data only an online source gives (the Hugging Face hub): no figure, no
    stored reference. The ledger evaluates ``claim`` on ``fetch()`` when it can run, and reports ``not-run`` with
    the reason when ``fetch`` raises :class:`~joma_lib.base.io.InputUnavailableError` (offline).

    Attributes:
        claim: the claim, its measure and its threshold (written once, here).
        fetch: ``fetch() -> FigureData``; raises ``InputUnavailableError`` within seconds where it cannot run.
        page: the book page that shows the online path (``"book/fig7.md"``).
        needs: what the fetch needs, for the not-run reason (``"Pythia's training checkpoints from the hub"``).
    """

    claim: Claim
    fetch: Callable[[], FigureData]
    page: str
    needs: str


CHAPTERS_PACKAGE = "joma_lib.chapters"
"""Where the registry looks for figure modules: ``<CHAPTERS_PACKAGE>.<chapter>.figures``, one per chapter package.

The lookup is by name, a plugin search: the kit sits below the chapters and imports none of them."""


def _figure_modules() -> list[Any]:
    package = importlib.import_module(CHAPTERS_PACKAGE)
    chapters = sorted(info.name for info in pkgutil.iter_modules(package.__path__)
                      if info.ispkg and not info.name.startswith("_"))
    return [importlib.import_module(f"{CHAPTERS_PACKAGE}.{name}.figures") for name in chapters
            if importlib.util.find_spec(f"{CHAPTERS_PACKAGE}.{name}.figures") is not None]


@cache
def online_claims() -> dict[str, OnlineClaim]:
    """All online claims, discovered from the ``ONLINE_CLAIMS`` tuples of the figure modules, by claim id."""
    found: dict[str, OnlineClaim] = {}
    for module in _figure_modules():
        for online in getattr(module, "ONLINE_CLAIMS", ()):
            if online.claim.claim_id in found:
                raise RuntimeError(f"online claim id {online.claim.claim_id!r} is defined twice ({module.__name__})")
            found[online.claim.claim_id] = online
    return found


@cache
def registry() -> dict[str, FigureSpec]:
    """All figures, discovered from the ``FIGURES`` lists of the chapters' figure modules."""
    found: dict[str, FigureSpec] = {}
    for module in _figure_modules():
        for spec in getattr(module, "FIGURES", []):
            if spec.fig_id in found:
                raise RuntimeError(f"figure id {spec.fig_id!r} is defined twice ({module.__name__})")
            found[spec.fig_id] = spec
    return found


def get_spec(fig_id: str) -> FigureSpec:
    """The spec of ``fig_id``; a clear :class:`ValueError` listing the known ids otherwise."""
    specs = registry()
    if fig_id not in specs:
        raise ValueError(f"unknown figure id {fig_id!r}; known ids: {', '.join(sorted(specs))}")
    return specs[fig_id]


def get_claim(claim_id: str) -> Claim:
    """The claim ``claim_id``, of whichever figure states it (a page quoting its threshold reads it here); a clear
    :class:`ValueError` listing the known ids otherwise."""
    claims = {claim.claim_id: claim for spec in registry().values() for claim in spec.claims}
    if claim_id not in claims:
        raise ValueError(f"unknown claim id {claim_id!r}; known ids: {', '.join(sorted(claims))}")
    return claims[claim_id]


def figure_ids() -> list[str]:
    """Every registered figure id, sorted."""
    return sorted(registry())
