"""Where a CI run's CPU time goes, by kind of process.

`.ci/run` keeps both cores of its machine busy from setup to the end (sampled: ~95% busy), so its wall time is about
its CPU work over two, and a shorter CI needs less work, not more overlap. This says which work::

    python benchmarks/ci_cpu.py run              # bash .ci/run in a fresh clone of HEAD, then the table
    python benchmarks/ci_cpu.py table LOG_DIR    # the table of a run made earlier

Every Python process of the run loads ``benchmarks/ci_cpu_site/sitecustomize.py`` (on ``PYTHONPATH``), which writes
its own CPU seconds into ``LOG_DIR`` at exit. Programs not in Python (Chromium, node, uv, Slurm, the shell) and
processes ended by a signal write nothing: together they are the difference between the logged total and the
cores times the wall time, which the table prints as well.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(__file__).resolve().parent / "ci_cpu_site"

#: kinds of process, the first whose pattern matches wins (a record: its command line, test and xdist worker)
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("make test: its workers", re.compile(r"^worker:\S+ test: argv:\S+ -c$")),
    ("make test: processes its tests start", re.compile(r"^worker:\S+ test:.+")),
    ("trained figures under other numerics (phase 1's test)", re.compile(r"^worker: test:\S+.* verify c-")),
    ("book pages (kernels)", re.compile(r"/\.venv/.*ipykernel_launcher")),
    ("rehearsal pages (kernels, reader's venv)", re.compile(r"ipykernel_launcher")),
    ("trained figures verified beside the book and in the numerics matrix",
     re.compile(r"figures/__main__\.py verify c-")),
)


def kind_of(record: dict[str, Any]) -> str:
    """The kind of a logged process (:data:`KINDS`), else ``other``."""
    key = f"worker:{record['worker']} test:{record['test']} argv:{record['argv']}"
    return next((kind for kind, pattern in KINDS if pattern.search(key)), "other")


def short(argv: str) -> str:
    """A logged command line with each absolute path cut to its last two parts (the clone's and the venvs' folders
    say nothing)."""
    return " ".join(str(Path(*Path(word).parts[-2:])) if word.startswith("/") else word for word in argv.split())


def read_log(log: Path) -> list[dict[str, Any]]:
    """The records of every process logged in ``log``."""
    return [json.loads(path.read_text()) for path in sorted(log.glob("*.json"))]


def table(records: Iterable[dict[str, Any]], wall: float | None = None, cores: int = 2, top: int = 15) -> str:
    """CPU seconds by kind, the largest processes, and the tests whose subprocesses cost most."""
    records = list(records)
    by_kind: dict[str, list[float]] = defaultdict(list)
    by_test: dict[str, float] = defaultdict(float)
    for r in records:
        by_kind[kind_of(r)].append(r["cpu"])
        if r["test"]:
            by_test[r["test"].rsplit(" (", 1)[0]] += r["cpu"]
    total = sum(r["cpu"] for r in records)
    lines = [f"{'CPU s':>8}  {'procs':>5}  kind"]
    for kind, cpu in sorted(by_kind.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"{sum(cpu):8.1f}  {len(cpu):5d}  {kind}")
    lines.append(f"{total:8.1f}  {len(records):5d}  logged in all")
    if wall is not None:
        lines.append(f"{cores * wall - total:8.1f}         not logged, of {cores} cores x {wall:.0f} s wall (programs "
                     "not in Python, killed processes, the OS, idle)")
    lines += ["", f"largest {top} processes:"]
    lines += [f"{r['cpu']:8.1f}  {short(r['argv'])[:110]}" for r in sorted(records, key=lambda r: -r["cpu"])[:top]]
    lines += ["", f"tests whose processes cost most ({top}; a worker's own work is not split by test):"]
    lines += [f"{cpu:8.1f}  {test}" for test, cpu in sorted(by_test.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(lines)


def run(clone: Path, log: Path) -> float:
    """``bash .ci/run`` in a fresh clone of this repository's HEAD at ``clone``, every Python process logging into
    ``log``; returns its wall seconds."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {**os.environ, "JOMA_CPU_LOG": str(log), "CI": "true",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(SITE), os.environ.get("PYTHONPATH", "")]))}
    start = time.time()
    done = subprocess.run(["bash", ".ci/run"], cwd=clone, env=env, check=False)
    wall = time.time() - start
    if done.returncode:
        print(f"note: .ci/run exited {done.returncode}; the table counts what ran", file=sys.stderr)
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="bash .ci/run in a fresh clone of HEAD, then the table")
    run_p.add_argument("--clone", type=Path, help="where to clone (default: a new temporary folder)")
    table_p = sub.add_parser("table", help="the table of a run's log folder")
    table_p.add_argument("log", type=Path)
    args = parser.parse_args(argv)
    if args.command == "table":
        if not args.log.is_dir():
            parser.error(f"LOG_DIR must be a folder of logged processes, got {args.log}")
        print(table(read_log(args.log)))
        return 0
    if args.clone is not None and args.clone.exists():
        parser.error(f"--clone must be a path that does not exist yet, got {args.clone}")
    work = Path(tempfile.mkdtemp(prefix="ci_cpu-"))
    clone, log = args.clone or work / "clone", work / "log"
    log.mkdir()
    wall = run(clone, log)
    print(f"\nlog: {log}\n" + table(read_log(log), wall=wall, cores=os.cpu_count() or 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
