"""Shared test setup: offline by default, a headless matplotlib backend, and bf16 probed before any test runs.

The probe (:func:`joma_lib.base.cpu.bf16_support`) must run before the first bf16 operation of the process: where
oneDNN's default bf16 kernels die (AMX advertised but unusable), it limits oneDNN's instruction set, which
oneDNN reads only on its first use. Tests that exercise bf16 itself are skipped, with the probe's verdict as
the reason, on a CPU where no bf16 path runs: mark them ``@pytest.mark.bf16``.

Tests that check properties of a registered figure's data take them from the ``figure_data`` fixture: the data a
book build kept in the figure store (``JOMA_FIGURE_STORE``, set by CI), computed only when they are not there, so
that a CI run computes each figure once; their comparison with the reference is ``verify --from``'s.

Tests of the figure harness and its faults draw a toy figure (``toy_spec``: a sine, cheap to make and to plot).

The tests of the book's build need its tools (jupytext, nbformat, sphinx): on a machine without them (a GPU
machine, which runs the suite under ``JOMA_DEVICE=cuda``) their modules are not collected, and the header says
so; in CI, which installs the tools, they always are.
"""

import contextlib
import importlib.util
import json
import os
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# The figure store is read through the figure_data fixture only: no test's show() reads or fills it. The pytest
# process hands it to its xdist workers (which inherit its environment) under a name the library does not read.
TESTS_STORE_ENV = "JOMA_TESTS_FIGURE_STORE"
FIGURE_STORE = os.environ.pop("JOMA_FIGURE_STORE", "") or os.environ.get(TESTS_STORE_ENV, "")
os.environ[TESTS_STORE_ENV] = FIGURE_STORE

from joma_lib.base.cpu import bf16_support  # noqa: E402 - after the environment above

BF16 = bf16_support()

from matplotlib.figure import Figure  # noqa: E402 - after MPLBACKEND

if TYPE_CHECKING:
    from joma_lib.kit.explorer import Explorer
    from joma_lib.kit.registry import FigureSpec
    from joma_lib.lm.authors import SweepRuns


#: the test modules of the book's build, each with the tool it imports
BOOK_BUILD_TESTS = {"test_page_template.py": "jupytext", "test_publishing.py": "nbformat",
                    "test_site_ext.py": "sphinx", "test_site_reader.py": "sphinx"}
MISSING_BOOK_TOOLS = {} if os.environ.get("CI") else {
    name: tool for name, tool in BOOK_BUILD_TESTS.items() if importlib.util.find_spec(tool) is None}
collect_ignore = sorted(MISSING_BOOK_TOOLS)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Name the book-build test modules left out for want of their tool."""
    if not MISSING_BOOK_TOOLS:
        return None
    return "not collected (the book's build tools are missing): " + ", ".join(
        f"{name} ({tool})" for name, tool in sorted(MISSING_BOOK_TOOLS.items()))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked ``bf16`` where the probe found no bf16 path, saying why."""
    if BF16.usable:
        return
    skip = pytest.mark.skip(reason=f"this CPU cannot run bf16: {BF16.summary()}")
    for item in items:
        if "bf16" in item.keywords:
            item.add_marker(skip)


@contextlib.contextmanager
def _time_limit(seconds: int, error: BaseException) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise error

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="session")
def time_limit() -> Callable[[int, BaseException], contextlib.AbstractContextManager[None]]:
    """``with time_limit(seconds, error):`` raises ``error`` once the block has run ``seconds`` (SIGALRM: the test's own
    thread, between Python operations), so that a test fails instead of hanging."""
    return _time_limit


@pytest.fixture(scope="session")
def stack_tolerance() -> float:
    """How far a run trained in a stack may lie from the same run trained alone, on the CPU (absolute, every
    measurement): about 10x the rounding effect measured before it was set (tests/test_lm_stack.py's docstring)."""
    return 2e-5


@pytest.fixture(scope="session")
def book_build_tests() -> dict[str, str]:
    """The test modules of the book's build, each with the tool it imports (not collected where it is missing)."""
    return dict(BOOK_BUILD_TESTS)


@pytest.fixture(scope="session")
def kept_figure_data() -> Callable[[str], dict[str, np.ndarray] | None]:
    """``kept_figure_data(fig_id)``: the data a book build kept in the figure store for this setting, else None."""
    from joma_lib.kit.harness import load_stored

    store = Path(FIGURE_STORE) if FIGURE_STORE else None
    return lambda fig_id: load_stored(fig_id, store) if store is not None else None


@pytest.fixture(scope="session")
def figure_data(kept_figure_data) -> Callable[[str], dict[str, np.ndarray]]:
    """``figure_data(fig_id)``: the figure's data with its registered params, from the figure store when kept there."""
    from joma_lib.kit.harness import compute

    def data(fig_id: str) -> dict[str, np.ndarray]:
        kept = kept_figure_data(fig_id)
        return kept if kept is not None else compute(fig_id)

    return data


@pytest.fixture(scope="module")
def figures_by_id(request, figure_data) -> dict[str, dict[str, np.ndarray]]:
    """The data of the figures the test module names in its ``IDS``, by id (``figure_data``, once per module)."""
    return {fig_id: figure_data(fig_id) for fig_id in request.module.IDS}


@pytest.fixture
def theorem1_holds() -> Callable[[str], dict[str, np.ndarray]]:
    """``theorem1_holds(attention)``: check Theorem 1 for a registered attention kind (CONTRIBUTING.md, "Add an
    attention kind") and return the flow: along the gradient flow the logits move, the invariant's residual
    vanishes and the logits Theorem 1 predicts from ``V`` are the flow's."""
    from joma_lib.theory.invariants import flow_check, predicted_logits

    def check(attention: str) -> dict[str, np.ndarray]:
        flow = flow_check(attention, "tanh", t_end=5.0, n_points=6)
        assert np.abs(flow["z"]).max() > 0.05, "the logits move"
        assert flow["residual"].max() <= 1e-7, f"Theorem 1's residual for {attention}: {flow['residual'].max():.2e}"
        z_hat = predicted_logits(flow["V"], flow["z"][0], flow["V"][0], attention)
        np.testing.assert_allclose(z_hat, flow["z"], atol=1e-7)
        return flow

    return check


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test at the first attempt to open a network connection: an offline path must not try one (so it
    cannot hang or retry, whatever the machine's load)."""
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        pytest.fail(f"a network connection was attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


class LocalServer:
    """A real HTTP server on 127.0.0.1. It serves ``files`` (path -> bytes; 404 otherwise) and records each
    requested path in ``hits``; three paths misbehave: ``/stall`` never sends its body, ``/trickle`` sends a byte
    every 0.2 s forever, ``/slow-headers`` sends the status line and then one header byte every 0.5 s forever.
    Handler threads end when the server is closed."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.files: dict[str, bytes] = {}
        self.hits: list[str] = []
        self.closed = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.hits.append(self.path)
                if self.path == "/slow-headers":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    self.wfile.flush()
                    while not server.closed.wait(0.5):
                        self.wfile.write(b"X")
                        self.wfile.flush()
                    return
                if self.path in ("/stall", "/trickle"):
                    self.send_response(200)
                    self.send_header("Content-Length", str(10**6))
                    self.end_headers()
                    self.wfile.flush()
                    while not server.closed.wait(0.2):
                        if self.path == "/trickle":
                            self.wfile.write(b"x")
                            self.wfile.flush()
                    return
                body = server.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.closed.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def local_http():
    """A :class:`LocalServer`, shut down after the test."""
    srv = LocalServer()
    yield srv
    srv.close()


@pytest.fixture
def refused_url() -> str:
    """The url of a local port where nothing listens: connecting is refused at once, as on a machine offline."""
    srv = LocalServer()
    srv.close()
    return srv.url


def _make_toy(scale: float = 1.0, n: int = 5) -> dict[str, np.ndarray]:
    x = np.linspace(0.0, 1.0, n)
    return {"x": x, "y": scale * np.sin(x)}


def _plot_toy(data: dict[str, np.ndarray]) -> Figure:
    fig = Figure()
    fig.subplots().plot(data["x"], data["y"])
    return fig


@pytest.fixture
def toy_spec() -> "FigureSpec":
    """A toy figure ``c-toy``: ``make(scale, n)`` gives ``y = scale * sin(x)`` on n points; a tolerance for ``y``."""
    from joma_lib.kit.registry import FigureSpec, Tolerance

    return FigureSpec(fig_id="c-toy", title="toy", paper_ref="companion", chapter="book/none.md",
                      make=_make_toy, plot=_plot_toy, params={"scale": 1.0}, full_params={"scale": 2.0, "n": 7},
                      tolerances={"y": Tolerance(rtol=1e-6, atol=1e-9)})


@pytest.fixture
def drawn_like_reference() -> Callable[[str, dict[str, np.ndarray]], None]:
    """``drawn_like_reference(fig_id, data)``: asserts the data match the reference and draw at least two panels."""
    from joma_lib.kit import compare, draw, get_spec, load_reference

    def check(fig_id: str, data: dict[str, np.ndarray]) -> None:
        result = compare(get_spec(fig_id), data, load_reference(fig_id))
        assert result.passed, result
        fig = draw(fig_id, data)
        assert isinstance(fig, Figure) and len(fig.axes) >= 2
    return check


@pytest.fixture
def payload() -> Callable[[str], dict[str, Any]]:
    """``payload(html)``: the grid JSON that ``Explorer.html`` embeds for the page's script."""
    def read(html: str) -> dict[str, Any]:
        match = re.search(r"var G = (\{.*?\});\n", html)
        assert match, "grid payload not found in the HTML fragment"
        return json.loads(match.group(1))
    return read


@pytest.fixture
def cell_data() -> Callable[[dict[str, Any], tuple[int, ...]], list[list[float]]]:
    """``cell_data(payload, index)``: what the page's script plots at grid cell ``index`` (its flat indexing)."""
    def traces(p: dict[str, Any], index: tuple[int, ...]) -> list[list[float]]:
        cell = 0
        for i, n in zip(index, p["shape"]):
            cell = cell * n + i
        return [t["y"][cell * t["n"]:(cell + 1) * t["n"]] for t in p["traces"]]
    return traces


# CI exports JOMA_OFFICIAL_DIR; otherwise ../shared/joma_official relative to the repository root.
OFFICIAL_DIR = Path(os.environ.get("JOMA_OFFICIAL_DIR") or
                    Path(__file__).resolve().parents[1].parent / "shared" / "joma_official")


@pytest.fixture(scope="session")
def official_dir() -> Path:
    """The folder of the authors' sweep files; the test is skipped, with the reason, where they are absent."""
    from joma_lib.lm.authors import OFFICIAL_FILES

    if not all((OFFICIAL_DIR / name).is_file() for name in OFFICIAL_FILES):
        pytest.skip(f"the authors' sweep files are not in {OFFICIAL_DIR}")
    return OFFICIAL_DIR


@pytest.fixture
def toy_runs() -> Callable[[], "SweepRuns"]:
    """``toy_runs()``: a small run table (two seeds of a 1-layer and one of a 2-layer model, 4 checkpoints), the
    shape our re-run writes."""
    from joma_lib.lm.authors import SweepRuns

    def make() -> SweepRuns:
        entropy = np.full((3, 4, 2), np.nan)
        entropy[0, :, 0] = [2.0, 1.0, 1.5, 1.8]
        entropy[1, :, 0] = [2.0, 1.2, 1.3, 1.6]
        entropy[2, :, :] = [[2.0, 2.1], [1.5, 1.9], [1.4, 2.0], [1.6, 2.0]]
        return SweepRuns(nlayers=[1, 1, 2], lr=[1e-3, 1e-3, 1e-3], seed=[0, 1, 0],
                         minibatch=[[0, 10, 20, 30]] * 3, val_loss=[[5, 4, 3.5, 3.6], [5, 4, 3.7, 3.4], [5, 4, 3, 3.1]],
                         attn_entropy=entropy)
    return make


@pytest.fixture
def toy_explorer() -> Callable[[], "Explorer"]:
    """``toy_explorer()``: a 2 x 3 explorer of two traces over 4 points, the second hidden (NaN) under button "b"."""
    from joma_lib.kit.explorer import Axes, Control, Explorer, Trace

    def make() -> Explorer:
        y = np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4)
        hidden = y.copy()
        hidden[1] = np.nan  # hidden in every cell of the second button
        return Explorer(controls=(Control("kind", "kind", ("a", "b"), kind="buttons"),
                                  Control("k", "k", (1.0, 2.0, 3.0))),
                        panels=(Axes("x", "y"),),
                        traces=(Trace(y=y, x=np.arange(4.0), name=np.array([["n0", "n1", "n2"], ["n3", "n4", "n5"]])),
                                Trace(y=hidden, x=np.arange(4.0), color="red")),
                        titles=np.array([[f"{a}{k}" for k in range(3)] for a in "ab"]))
    return make


@pytest.fixture(scope="session")
def tiny_run():
    """A language-model run (:class:`~joma_lib.lm.config.RunConfig`) that trains in seconds: 2 layers of width 16,
    12 steps on PTB with checkpoints every 4."""
    from joma_lib.lm.config import RunConfig

    return RunConfig(data="ptb", n_layers=2, lr=3e-3, seed=5, steps=12, eval_interval=4, eval_chunks=2, seq_len=10,
                     batch_size=4, eval_batch_size=3, max_vocab=200, d=16, d_ff=16)


@pytest.fixture(scope="session")
def tiny_run_data(tiny_run):
    """The corpus :func:`tiny_run` trains on: 1% of PTB's training split, 200 words."""
    from joma_lib.lm.data import load_lm_data

    return load_lm_data("ptb", tiny_run.batch_size, tiny_run.eval_batch_size, tiny_run.max_vocab,
                        max_train_fraction=0.01)
