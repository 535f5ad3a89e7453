"""The kernel-free explorer in a real browser: headless Debian Chromium, driven by Playwright.

Needs the built book (``JOMA_BOOK_HTML``, default ``_build/html``; CI builds it first), the
``chromium`` Debian package and the ``playwright`` Python package (``.ci/browser_setup.sh``
installs both; Playwright never downloads a browser here). Serves the HTML on 127.0.0.1, moves
the explorer's temperature slider and clicks its "linear" button, and checks that the plotted
curves become those of the precomputed grid at the new setting, and that the page asked no host
other than the local server for anything.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest

from joma_lib.explorable import MODES
from joma_lib.figures import load_reference

pytestmark = pytest.mark.browser

# Debian's Chromium by default; JOMA_CHROMIUM=bundled uses the browser that `playwright install chromium`
# downloaded (GitHub's Ubuntu runners, which have no Debian chromium package).
CHROMIUM = os.environ.get("JOMA_CHROMIUM", "/usr/bin/chromium")
# As root, on a machine without network: no sandbox, no GPU, and none of Chromium's own background traffic.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# sphinx-thebe and the book theme both declare this constant on every page of a JB 1 book; not ours.
KNOWN_THEME_ERRORS = ("Identifier 'THEBE_JS_URL' has already been declared",)

GRAPH = "document.querySelector('.plotly-graph-div')"


@pytest.fixture(scope="module")
def page_path() -> tuple[Path, str]:
    """(served root, path of the explorer page under it); skips when the book or the browser is missing.

    With ``JOMA_BOOK_HTML`` set (CI), a page without the explorer fails the test; with the default
    ``_build/html`` it only skips, since a local build may simply predate the page.
    """
    explicit = "JOMA_BOOK_HTML" in os.environ
    root = Path(os.environ.get("JOMA_BOOK_HTML", "_build/html")).resolve()
    for rel in ("book/explore.html", "explore.html"):  # full book / single-page build
        if (root / rel).is_file():
            break
    else:
        pytest.skip(f"no built explorer page under {root} (build the book first, then set JOMA_BOOK_HTML)")
    if 'id="joma-explorer"' not in (root / rel).read_text(encoding="utf-8"):
        message = f"{root / rel} has no explorer (id joma-explorer)"
        if explicit:
            pytest.fail(message)
        pytest.skip(f"{message}: the build in {root} is older than the page; rebuild the book")
    if CHROMIUM != "bundled" and not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (run .ci/browser_setup.sh)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (run .ci/browser_setup.sh)")
    return root, rel


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def base_url(page_path) -> Iterator[str]:
    """A static file server on 127.0.0.1, started and stopped by its pid."""
    root, _ = page_path
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"http.server on port {port} did not start (exit code {server.poll()})")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        where = {} if CHROMIUM == "bundled" else {"executable_path": CHROMIUM}
        chromium = pw.chromium.launch(**where, args=CHROMIUM_FLAGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def _state(page) -> dict:
    """What the explorer shows now: control positions, title, and the plotted y data."""
    return page.evaluate(f"""() => {{
        const gd = {GRAPH};
        return {{sliders: gd.layout.sliders.map(s => s.active), mode: gd.layout.updatemenus[0].active,
                 n_temperatures: gd.layout.sliders[1].steps.length, title: gd.layout.title.text,
                 ys: gd.data.map(t => Array.from(t.y)), visible: gd.data.map(t => t.visible)}};
    }}""")


def _expected(state: dict, reference: dict) -> tuple[np.ndarray, np.ndarray]:
    """Entropy curve and components v_j(t) of the grid cell the controls point at."""
    (s, k), m = state["sliders"], state["mode"]
    return reference["entropy"][m, s, k].astype(float), reference["v"][m, s, k].astype(float).T


def _assert_plots_cell(state: dict, reference: dict) -> None:
    entropy, v = _expected(state, reference)
    d = v.shape[0]
    np.testing.assert_allclose(state["ys"][d], entropy, rtol=1e-3, atol=1e-30)  # 4 significant digits
    np.testing.assert_allclose(np.array(state["ys"][:d]), v, rtol=1e-3, atol=1e-30)


def test_explorer_slider_and_button_change_the_plotted_data(page_path, base_url, browser):
    _, rel = page_path
    reference = load_reference("c-explorer-grid")
    requests: list[str] = []
    errors: list[str] = []
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    try:
        page = context.new_page()
        page.on("request", lambda request: requests.append(request.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        # Answer nothing from outside: a request that leaves 127.0.0.1 fails fast and is reported below.
        context.route(lambda url: urlparse(url).hostname not in LOCAL_HOSTS, lambda route: route.abort())
        page.goto(f"{base_url}/{rel}", wait_until="load")
        page.wait_for_function(f"{GRAPH} !== null && {GRAPH}.data !== undefined", timeout=30_000)
        page.locator(".plotly-graph-div").scroll_into_view_if_needed()

        assert page.evaluate("document.getElementById('joma-explorer-fallback')") is None  # plot drawn
        before = _state(page)
        assert before["mode"] == MODES.index("nonlinear") and before["sliders"][1] < before["n_temperatures"] - 1
        _assert_plots_cell(before, reference)  # the page opens on the paper's Figure 4 setting

        # Move the temperature slider to its last stop by clicking the right end of its rail.
        rail = page.locator(".slider-rail-touch-rect").nth(1).bounding_box()
        page.mouse.click(rail["x"] + 0.99 * rail["width"], rail["y"] + rail["height"] / 2)
        page.wait_for_function(f"{GRAPH}.layout.title.text !== {before['title']!r}", timeout=10_000)
        after_slider = _state(page)
        assert after_slider["sliders"] == [before["sliders"][0], before["n_temperatures"] - 1]
        assert after_slider["ys"] != before["ys"], "moving the slider did not change the plotted data"
        _assert_plots_cell(after_slider, reference)

        # Click "linear (Theorem 2)": the curves switch to the linear update and the fixed-point line hides.
        page.get_by_text("linear (Theorem 2)", exact=True).click()
        page.wait_for_function(f"{GRAPH}.layout.updatemenus[0].active === {MODES.index('linear')}", timeout=10_000)
        page.wait_for_function(f"{GRAPH}.layout.title.text !== {after_slider['title']!r}", timeout=10_000)
        after_button = _state(page)
        assert after_button["ys"] != after_slider["ys"]
        _assert_plots_cell(after_button, reference)
        assert after_button["visible"][-1] is False
        assert after_button["ys"][-2][-1] < 1e-3  # linear: the entropy ends near zero (winner takes all)
    finally:
        context.close()

    outside = sorted({url for url in requests if urlparse(url).scheme in ("http", "https", "ws", "wss")
                      and urlparse(url).hostname not in LOCAL_HOSTS})
    assert not outside, f"the page requested non-local resources: {outside}"
    ours = [e for e in errors if not any(known in e for known in KNOWN_THEME_ERRORS)]
    assert not ours, f"JavaScript errors on the page: {ours}"


def test_built_page_has_no_remote_scripts(page_path):
    """The HTML itself: every <script src> is relative (served from the book), and plotly.js is vendored."""
    root, rel = page_path
    html = (root / rel).read_text(encoding="utf-8")
    sources = re.findall(r"<script[^>]*\bsrc=\"([^\"]+)\"", html)
    remote = [s for s in sources if re.match(r"(https?:)?//", s)]
    assert not remote, f"scripts loaded from other hosts: {remote}"
    plotly = [s for s in sources if re.search(r"plotly-[\d.]+\.min\.js$", s)]
    assert plotly, "the page does not load the vendored plotly.js (is joma_lib.sphinx_plotly enabled?)"
    assert (root / rel).parent.joinpath(plotly[0]).resolve().is_file()

