"""Execute the book's notebooks several at a time, before Sphinx reads them (``JOMA_BOOK_JOBS``, default 1: off).

With ``execute_notebooks: cache`` (``_config.yml``), myst-nb executes each page's notebook while Sphinx reads the
page, one after another, and keeps the executed notebook in the build's jupyter-cache. On the
``env-before-read-docs`` event this extension builds, for every page about to be read, the notebook exactly as
myst-nb will (the page's text with the install cell of :mod:`install_cell`, read by myst-nb's reader with the
build's configuration), executes those that the cache does not hold yet ``JOMA_BOOK_JOBS`` at a time (each in its
own kernel, with the page's folder as working directory, as myst-nb does), and stores each one that succeeds in
that cache, as myst-nb would. Sphinx then reads every page from the cache. A notebook that fails here is not
stored: the build executes it again and reports the error as it always does (``make book-strict`` fails on it).
What myst-nb would change in a notebook after reading it (kernel-name aliases, a page's own ``mystnb`` settings) is
not applied here; the book uses neither, and a notebook that came out different would not match the cache, so
the build would simply execute it again.

The page that evaluates the claims ledger (``claims``) and the one that reads it (``conclusion``) go last, so
that the figures they draw are mostly kept in the figure store (``JOMA_FIGURE_STORE``) by then.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from install_cell import with_install_cell

if TYPE_CHECKING:
    from myst_nb.sphinx_ import SphinxEnvType  # Sphinx's environment with myst-nb's configuration
    from nbformat import NotebookNode
    from sphinx.application import Sphinx

JOBS_ENV = "JOMA_BOOK_JOBS"
LAST = ("claims", "conclusion")


def jobs() -> int:
    """``JOMA_BOOK_JOBS`` as a count of notebooks executed at once (1 when unset or empty)."""
    from sphinx.errors import ConfigError

    value = os.environ.get(JOBS_ENV, "").strip() or "1"
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"{JOBS_ENV} must be a whole number >= 1 (notebooks executed at once), got {value!r}")
    return int(value)


def page_order(docnames: list[str]) -> list[str]:
    """The pages in the order they are executed: alphabetical, the ledger's pages (``LAST``) at the end."""
    def rank(name: str) -> tuple[int, str]:
        page = Path(name).name
        return (LAST.index(page) + 1 if page in LAST else 0), name

    return sorted(docnames, key=rank)


def _notebook(env: SphinxEnvType, docname: str) -> NotebookNode | None:
    """The page's notebook as myst-nb builds it from the page (None for a page that is not a notebook)."""
    from myst_nb.core.read import create_nb_reader

    path = env.doc2path(docname)
    text = with_install_cell(Path(path).read_text(encoding="utf-8"))
    reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, text)
    return None if reader is None else reader.read(text)


def _execute(notebook: NotebookNode, cwd: Path, timeout: int | None) -> tuple[str | None, float]:
    """Execute ``notebook`` in place in its own kernel; the error (None on success) and the seconds taken."""
    from jupyter_cache.executors.utils import single_nb_execution

    result = single_nb_execution(notebook, cwd=str(cwd), timeout=timeout, allow_errors=False)
    return (None if result.err is None else f"{type(result.err).__name__}: {result.err}"), result.time


def _execute_ahead(app: Sphinx, env: SphinxEnvType, docnames: list[str]) -> None:
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    count, config = jobs(), env.mystnb_config
    if count < 2 or config.execution_mode != "cache":
        return
    cache = get_cache(config.execution_cache_path)
    pending: list[tuple[str, Any]] = []
    for docname in page_order(list(docnames)):
        notebook = _notebook(env, docname)
        if notebook is None:
            continue
        try:
            cache.match_cache_notebook(notebook)
        except KeyError:
            pending.append((docname, notebook))
    if not pending:
        return
    start = time.monotonic()
    logger.info(f"[execute-ahead] executing {len(pending)} notebook(s), {count} at a time")
    with ThreadPoolExecutor(max_workers=count) as pool:
        runs = [(docname, notebook,
                 pool.submit(_execute, notebook, Path(env.doc2path(docname)).parent, config.execution_timeout))
                for docname, notebook in pending]
        for docname, notebook, run in runs:
            error, seconds = run.result()
            if error is not None:
                logger.info(f"[execute-ahead] {docname} failed ({error}); the build executes it again")
                continue
            cache.cache_notebook_bundle(CacheBundleIn(notebook, str(env.doc2path(docname)),
                                                      data={"execution_seconds": seconds}),
                                        check_validity=False, overwrite=True)
            logger.info(f"[execute-ahead] {docname}: executed in {seconds:.1f} s")
    logger.info(f"[execute-ahead] done in {time.monotonic() - start:.0f} s")


def setup(app: Sphinx) -> dict[str, Any]:
    """Sphinx entry point."""
    jobs()  # a bad JOMA_BOOK_JOBS is refused before anything runs
    app.connect("env-before-read-docs", _execute_ahead)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
