"""Redraw time of the kernel-free explorers in a real browser (target: a median under 150 ms).

Opens every page of a built book in headless Chromium (Playwright), finds each explorer (a plotly graph
with sliders), steps its last slider through its stops ``--repeats`` times as the slider's own events
would, and reads the redraw time that the explorer's script records (``data-redraw-ms``). Prints the
median and the largest redraw per explorer and stores them in ``joma_lib/kit/benchmark_results/explorers.json``
(the Performance page). Needs the built book and Playwright (``bash .ci/browser_setup.sh``)::

    python benchmarks/bench_explorers.py [--html _build/html] [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from joma_lib.kit.benchmarks import save_results

CHROMIUM = os.environ.get("JOMA_CHROMIUM", "/usr/bin/chromium")  # "bundled": Playwright's own browser
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]

_EXPLORERS_JS = """() => Array.from(document.querySelectorAll('.plotly-graph-div'))
    .filter(gd => gd.layout && gd.layout.sliders && gd.layout.sliders.length).map(gd => gd.id)"""

_REDRAWS_JS = """([id, n]) => {
    const gd = document.getElementById(id), slider = gd.layout.sliders[gd.layout.sliders.length - 1];
    const out = [];
    for (let i = 0; i < n; i++) {
        slider.active = (slider.active + 1) % slider.steps.length;
        gd.emit('plotly_sliderchange', {slider: slider});
        out.push(parseFloat(gd.getAttribute('data-redraw-ms')));
    }
    return out;
}"""


def measure(html: Path, repeats: int) -> dict[str, dict[str, Any]]:
    """``{page#explorer: {median_ms, max_ms, redraws}}`` for every explorer of the book under ``html``."""
    from playwright.sync_api import sync_playwright

    rows: dict[str, dict[str, Any]] = {}
    with sync_playwright() as pw:
        where = {} if CHROMIUM == "bundled" else {"executable_path": CHROMIUM}
        browser = pw.chromium.launch(**where, args=FLAGS, headless=True)
        try:
            for page in sorted(html.glob("book/*.html")):
                tab = browser.new_page(viewport={"width": 1280, "height": 1000})
                tab.goto(page.as_uri(), wait_until="load")
                tab.wait_for_timeout(300)
                for div_id in tab.evaluate(_EXPLORERS_JS):
                    tab.evaluate(_REDRAWS_JS, [div_id, 2])  # warm-up
                    times = tab.evaluate(_REDRAWS_JS, [div_id, repeats])
                    rows[f"{page.stem}#{div_id}"] = {"median_ms": statistics.median(times), "max_ms": max(times),
                                                     "redraws": len(times)}
                tab.close()
        finally:
            browser.close()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--html", type=Path, default=Path("_build/html"), help="the built book (default _build/html)")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--no-write", action="store_true", help="print only; do not update joma_lib/kit/benchmark_results/")
    args = p.parse_args()
    if not (args.html / "book").is_dir():
        sys.exit(f"--html: no built book at {args.html} (run `make book` first)")
    if args.repeats < 1:
        sys.exit(f"--repeats must be at least 1, got {args.repeats}")
    rows = measure(args.html, args.repeats)
    if not rows:
        sys.exit(f"no explorer found in {args.html}/book/*.html")
    print(f"{'page#explorer':<36} {'median [ms]':>11} {'max [ms]':>9}")
    for name, row in rows.items():
        print(f"{name:<36} {row['median_ms']:>11.1f} {row['max_ms']:>9.1f}")
    if not args.no_write:
        save_results("explorers", {"settings": {"repeats": args.repeats, "browser": CHROMIUM}, "rows": rows})


if __name__ == "__main__":
    main()
