"""When was each threshold set? The git history says, where it can; the ledger's label must agree.

A claim's threshold is first committed with the claim (its id's first appearance in ``joma_lib/``); its data are
first committed with the figure's reference data (or the stored run it reads). A claim committed with or after
its data cannot show from the history that its bar came first, so ``before-data`` needs a reason a reader can
check (the paper, a closed form, a numerical tolerance): those claims are listed in :data:`ALLOWED` with it.

Needs the repository's history (CI runs on a full clone); skipped, saying so, where there is none (an installed
wheel, a shallow clone).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from joma_lib.kit.claims import claim_ids_on_figures
from joma_lib.kit.registry import Claim, get_spec

ROOT = Path(__file__).resolve().parents[1]

STORED_RUN_FILES = {"c-rerun-adam-reset": "rerun-noreset", "c-rerun-full": "rerun-full",
                    "c-fig7-standin": "fig7-standin", "c-table1-wide": "table1-wide"}
"""Figures read from a stored run: their data first appear with the run's results (``joma_lib/lm/results/``)."""

ALLOWED: dict[str, str] = {
    # claim id -> why its bar is before the data although the history cannot show it
    "thm1-exp-invariant": "Theorem 1's invariant is exact: the bar is a numerical tolerance of the SGD discretisation",
    "thm1-linear-invariant": "Theorem 1's invariant is exact: the bar is a numerical tolerance of the SGD "
                             "discretisation",
    "thm1-any-lr-ratio": "the same tolerance as thm1-exp-invariant, for any ratio of the learning rates",
    "thm1-softmax-invariant-heterogeneous": "the exact kinds' tolerance, applied unchanged to softmax",
    "thm2-closed-form": "Theorem 2's closed form against an ODE solver: a numerical tolerance",
    "thm2-conserved-ratio": "Theorem 2's conserved ratio: a numerical tolerance",
    "thm2-erf-v2-typo": "the same numerical tolerance as thm2-closed-form, applied to the slides' variant",
    "thm2-linear-entropy-monotone": "monotone to rounding: a numerical tolerance",
    "thm2-saliency-factorisation": "a z-score bar of 4.5 standard errors, a sampling tolerance",
    "thm3-closed-form-mc": "a z-score bar of 4.5 standard errors, a sampling tolerance",
    "thm3-decay-mixed-rest-stable": "a sign (eigenvalues < 0) committed in 8c1b787; the eigenvalues it reads were "
                                    "added to c-thm3-portrait's older data file afterwards, in df83992",
    "thm3-decay-finite-rest": "a numerical tolerance for a rest point",
    "thm3-linear-single-direction": "a numerical tolerance (a linear update does not depend on v)",
    "thm4-rate-ratio": "Theorem 4's ratio against the closed form: a numerical tolerance",
    "fig4-salient-first": "an order (at most 0): no bar to choose",
    "thm5-cooccurrence": "a closed form against exact message passing: a numerical tolerance",
    "thm5-monte-carlo": "a 3-standard-error sampling bar",
    "thm5-decreasing-in-height": "a sign (strictly decreasing): no bar to choose",
    "thm5-one-minus-h-over-l": "a proven bound: a numerical tolerance",
    "fig5-order": "an order (strictly increasing): no bar to choose",
    "fig6-authors-losses": "the paper's reported losses: a rounding tolerance",
    "fig6-deeper-lower-loss": "a sign (deeper is lower): no bar to choose",
    "fig8-authors-losses": "the authors' files against themselves: a rounding tolerance",
    "fig8-lr-optimum": "an index (the best learning rate): no bar to choose",
    "fig6-rerun-deeper-lower-loss": "a sign (deeper is lower): no bar to choose",
    "setting-orthonormal-embeddings": "built orthonormal: a numerical tolerance",
    "setting-random-near-orthogonal": "concentration of measure: a bar of 1 on a scaled overlap",
    "table1-layer0-above-layer1": "a sign (layer 0 above layer 1): no bar to choose",
}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def history() -> list[str]:
    """The commits touching ``joma_lib/``, oldest first; skips the module where there is no history."""
    try:
        if _git("rev-parse", "--is-shallow-repository").strip() == "true":
            pytest.skip("a shallow clone: the threshold history needs the full git history")
        commits = _git("log", "--reverse", "--format=%H", "--", "joma_lib").split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git repository here (an installed package): the threshold history needs one")
    if not commits:
        pytest.skip("no history of joma_lib/ in this repository")
    return commits


SOURCE_FORMS = {"thm1-exp-invariant": "thm1-{attention}-invariant",
                "thm1-linear-invariant": "thm1-{attention}-invariant",
                "thm1-softmax-nc-gaussian": "thm1-softmax-nc-{variant}",
                "thm1-softmax-nc-random": "thm1-softmax-nc-{variant}",
                "fig2-sum-sq-term-gaussian": "fig2-sum-sq-term-{variant}",
                "fig2-sum-sq-term-random": "fig2-sum-sq-term-{variant}",
                "fig6-rerun-bounce": "fig6-rerun-bounce{suffix}",
                "fig6-rerun-bounce-quick": "fig6-rerun-bounce{suffix}",
                "fig7-rerun-srank-drop": "fig7-rerun-srank-drop{suffix}",
                "fig7-rerun-srank-drop-quick": "fig7-rerun-srank-drop{suffix}"}
"""Ids that the source builds with an f-string: found by the f-string's text as well."""


def first_claim_commits(ids: list[str]) -> dict[str, str]:
    """Claim id -> the first commit that adds a line of ``joma_lib/**.py`` naming it (pending entries, which
    carry no bar, do not count)."""
    patterns = {}
    for claim_id in ids:
        forms = [claim_id] + ([SOURCE_FORMS[claim_id]] if claim_id in SOURCE_FORMS else [])
        patterns[claim_id] = re.compile("|".join(f"(?<![\\w-]){re.escape(form)}(?![\\w-])" for form in forms))
    found: dict[str, str] = {}
    commit = ""
    log = _git("log", "--reverse", "--no-renames", "--format=@@%H", "-p", "-U0", "--", "joma_lib/*.py")
    for line in log.splitlines():
        if line.startswith("@@") and not line.startswith("@@ "):
            commit = line[2:]
        elif line.startswith("+") and not line.startswith("+++") and "PendingClaim(" not in line:
            for claim_id, pattern in patterns.items():
                if claim_id not in found and pattern.search(line):
                    found[claim_id] = commit
    return found


def first_data_commits() -> dict[str, str]:
    """File stem -> the first commit that adds ``<stem>.npz`` anywhere under ``joma_lib/``."""
    found: dict[str, str] = {}
    commit = ""
    for line in _git("log", "--reverse", "--no-renames", "--diff-filter=A", "--format=@@%H", "--name-only",
                     "--", "joma_lib").splitlines():
        if line.startswith("@@"):
            commit = line[2:]
        elif line.endswith(".npz"):
            found.setdefault(Path(line).name.removesuffix(".npz"), commit)
    return found


def history_labels(order: list[str]) -> dict[str, tuple[str, str, str]]:
    """Claim id -> (what the history says, the claim's first commit, its data's first commit). A claim whose data
    are not committed yet (pre-registered) is before-data; a claim not committed yet is after its committed data."""
    figures = claim_ids_on_figures()
    claim_commits, data_commits = first_claim_commits(sorted(figures)), first_data_commits()
    index = {commit: k for k, commit in enumerate(order)}
    labels = {}
    for claim_id, fig_id in figures.items():
        stems = [fig_id] + ([STORED_RUN_FILES[fig_id]] if fig_id in STORED_RUN_FILES else [])
        data = min((data_commits[s] for s in stems if s in data_commits), key=index.__getitem__, default="")
        claim = claim_commits.get(claim_id, "")
        if not data:  # pre-registered: no data committed yet, so the bar came first
            labels[claim_id] = ("before-data", claim, claim)
        elif not claim:  # not committed yet: it comes after every commit, its data's included
            labels[claim_id] = ("after-data", data, data)
        else:
            labels[claim_id] = ("before-data" if index[claim] < index[data] else "after-data", claim, data)
    return labels


@pytest.fixture(scope="module")
def labels(history: list[str]) -> dict[str, tuple[str, str, str]]:
    return history_labels(history)


def _claim(claim_id: str) -> Claim:
    return next(c for c in get_spec(claim_ids_on_figures()[claim_id]).claims if c.claim_id == claim_id)


def test_every_before_data_label_agrees_with_the_history_or_says_why_not(labels):
    wrong = [f"{claim_id}: claim first in {claim[:7]}, data first in {data[:7]}, labelled before-data"
             for claim_id, (said, claim, data) in sorted(labels.items())
             if _claim(claim_id).threshold_set == "before-data" and said == "after-data" and claim_id not in ALLOWED]
    assert wrong == []


def test_the_allow_list_holds_only_claims_that_need_it(labels):
    unneeded = [claim_id for claim_id in ALLOWED if claim_id not in labels or labels[claim_id][0] == "before-data"
                or _claim(claim_id).threshold_set == "after-data"]
    assert unneeded == []


def test_after_data_notes_name_commits_where_the_history_puts_them(history, labels):
    """A commit a note names lies between the data's first commit and the claim's (where bar and data met)."""
    index = {commit: k for k, commit in enumerate(history)}
    wrong = []
    for claim_id, (_, claim, data) in sorted(labels.items()):
        for named in re.findall(r"\b[0-9a-f]{7,40}\b", _claim(claim_id).threshold_note):
            full = [commit for commit in history if commit.startswith(named)]
            if len(full) != 1 or not min(index[data], index[claim]) <= index[full[0]] <= max(index[data], index[claim]):
                wrong.append(f"{claim_id}: note names {named}; data first in {data[:7]}, claim first in {claim[:7]}")
    assert wrong == []


def test_the_scan_sees_a_claim_committed_after_its_data(history):
    """The derivation on a case the history fixes: fig6-bounce-without-adam-reset's bar, claim and data all first
    appear in one commit, so the history says after-data (a label before-data would be caught)."""
    said, claim, data = history_labels(history)["fig6-bounce-without-adam-reset"]
    assert said == "after-data" and claim == data
