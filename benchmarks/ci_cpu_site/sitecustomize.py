"""Loaded by every Python process that has this folder on ``PYTHONPATH`` (``benchmarks/ci_cpu.py run`` puts it there):
where ``JOMA_CPU_LOG`` names a folder, the process writes at exit one JSON file there with its own CPU seconds (not
its children's), its wall seconds, its command line, and the test (``PYTEST_CURRENT_TEST``) and pytest-xdist worker
it ran under, if any. A process ended by a signal or by ``os._exit`` writes nothing. On the path first, this module
takes the place of any other ``sitecustomize`` (the venvs of CI have none)."""

import atexit
import json
import os
import resource
import sys
import time

_LOG = os.environ.get("JOMA_CPU_LOG")
_START = time.time()


def _write(log: str) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {"pid": os.getpid(), "cpu": usage.ru_utime + usage.ru_stime, "wall": time.time() - _START,
              "argv": " ".join([sys.executable, *sys.argv])[:300],
              "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
    try:
        with open(os.path.join(log, f"{os.getpid()}.json"), "w") as f:
            json.dump(record, f)
    except OSError:
        pass  # a log folder gone or full: the process's own work is what counts


if _LOG:
    atexit.register(_write, _LOG)
