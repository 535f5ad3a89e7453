"""The page kit: every figure of the paper (and of the companion), regenerable and checkable, and what a page
needs to show them, with no paper content of its own.

``registry()`` lists the figures; ``compute``/``draw``/``show`` make them; ``verify`` compares them with
committed reference data; ``check_claims``/``ledger`` evaluate their claims; ``glue`` hands values to the page's
prose; ``with_static_view`` gives a live widget its figure on the static page. Command line:
``python -m joma_lib.figures list | make [ids] | verify [ids] | update [ids]``.

A page imports from here and from its own chapter package (``joma_lib.chapters.<page>``) only. Also here: the
drawing that several chapters share (:mod:`.sweeps`, the WikiText sweeps' entropy panels) and the machine report
(:mod:`.doctor`, ``python -m joma_lib doctor``).

May import: :mod:`joma_lib.lm`, :mod:`joma_lib.theory`, :mod:`joma_lib.base`; never a chapter (the registry finds
the chapters' ``figures.py`` by name, :data:`.registry.CHAPTERS_PACKAGE`).
"""

from joma_lib.kit.benchmarks import load_results, table1_steps
from joma_lib.kit.claims import book_ledger, check_claims, evaluate_figure, ledger, surprises
from joma_lib.kit.fallback import with_static_view
from joma_lib.kit.glue import and_list, glue
from joma_lib.kit.harness import (
    REFERENCE_DIR,
    MissingReferenceError,
    calibrated_tolerances,
    compare,
    compute,
    draw,
    load_reference,
    save_outputs,
    show,
    update_reference,
    verify,
)
from joma_lib.kit.ledger_views import headline, html_table, story_markdown, story_rows, story_verdict
from joma_lib.kit.parity import parity_coverage, parity_table
from joma_lib.kit.registry import Claim, FigureSpec, Tolerance, get_claim, get_spec, registry
from joma_lib.kit.sweeps import paper_runs_waiting
from joma_lib.kit.tables import table
from joma_lib.lm import authors as _authors  # noqa: F401 - declares JOMA_OFFICIAL_DIR, which the figures read
from joma_lib.base.startup import check_environment

__all__ = [
    "REFERENCE_DIR", "Claim", "FigureSpec", "MissingReferenceError", "Tolerance", "and_list", "book_ledger",
    "calibrated_tolerances", "check_claims", "compare", "compute", "draw", "evaluate_figure", "get_claim", "get_spec",
    "glue", "headline", "html_table", "ledger", "load_reference", "load_results", "paper_runs_waiting",
    "parity_coverage", "parity_table", "registry", "save_outputs", "show", "story_markdown", "story_rows",
    "story_verdict", "surprises", "table", "table1_steps", "update_reference", "verify", "with_static_view",
]

check_environment()  # a page's first import: a bad environment variable fails here, before any figure is made
