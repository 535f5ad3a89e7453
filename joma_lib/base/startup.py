"""What every entry point does first and last: the environment variables the project reads, checked once at start-up,
and the one line of an interrupted command.

Each module that reads an environment variable declares it here with :func:`declare_env` (its name, the values it
takes, and a check that raises a ValueError naming the variable); :func:`check_environment` runs every declared
check, so that a typo in a variable fails at start-up, before any work, instead of deep inside a computation or
not at all. The command lines call it first (through :func:`command`), and so does ``import joma_lib.kit``, the
entry point of the pages. :func:`command` also turns Ctrl-C into one line and exit code 130, the shell's code
for an interrupt, distinct from a failure.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

INTERRUPTED_EXIT = 130
"""Exit code of a command stopped by Ctrl-C (128 + SIGINT), as the shell reports it."""


@dataclass(frozen=True)
class EnvVar:
    """An environment variable the project reads: its ``allowed`` values in words, and ``check(value)``, which
    raises a ValueError (naming the variable) for a value that is set but not allowed."""

    name: str
    allowed: str
    check: Callable[[str], object]


ENV_VARS: dict[str, EnvVar] = {}
"""Every declared variable, by name (filled by the modules that read them, when they are imported)."""


def declare_env(name: str, allowed: str, check: Callable[[str], object]) -> None:
    """Declare that the project reads ``name`` (see :class:`EnvVar`)."""
    ENV_VARS[name] = EnvVar(name, allowed, check)


def check_environment() -> None:
    """Check every declared variable that is set (to anything but an empty string): the first bad one raises a
    ValueError that names it and its allowed values (once)."""
    for var in ENV_VARS.values():
        value = os.environ.get(var.name, "")
        if not value:
            continue
        try:
            var.check(value)
        except ValueError as err:
            message = str(err)
            if var.name not in message:
                message = f"{var.name}: {message}"
            if var.allowed not in message:
                message += f" (allowed: {var.allowed})"
            raise ValueError(f"environment variable {message}") from None


def _thread_counts(name: str, value: str) -> list[int]:
    """A thread count: a positive integer, or a comma-separated list of them (one per nesting level)."""
    parts = value.split(",")
    if not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise ValueError(f"{name} must be a positive integer (or a comma-separated list of them), got {value!r}")
    return [int(p) for p in parts]


FLAG_VALUES = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
"""The values of a yes/no variable (any case)."""


def env_flag(name: str) -> bool:
    """The yes/no variable ``name`` (:data:`FLAG_VALUES`; unset or empty: no); another value is a ValueError."""
    value = os.environ.get(name, "").strip().lower()
    if value and value not in FLAG_VALUES:
        raise ValueError(f"{name} must be one of {sorted(FLAG_VALUES)}, got {os.environ[name]!r}")
    return FLAG_VALUES.get(value, False)


for _flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
    declare_env(_flag, "1/true/yes/on or 0/false/no/off", functools.partial(lambda name, _: env_flag(name), _flag))
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # read by the OpenMP and MKL under torch, and set for children
    declare_env(_threads, "a positive integer, or a comma-separated list of them",
                functools.partial(_thread_counts, _threads))


def command(body: Callable[[], int], interrupted: str = "nothing half-written was kept") -> int:
    """Run a command line's ``body`` after :func:`check_environment`; return its exit code.

    A bad environment variable (checked before any work), bad settings, a damaged file, a full disk or a device
    fault (``ValueError``, ``OSError``, ``RuntimeError``) are one ``error:`` line and exit code 2. Ctrl-C is one
    ``interrupted:`` line (the interrupt's own message, then ``interrupted``: what was kept) and exit code
    :data:`INTERRUPTED_EXIT`, never a traceback.
    """
    try:
        check_environment()
        return body()
    except (ValueError, OSError, RuntimeError) as err:
        print("error: " + " ".join(str(err).split()), file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        where = f"{' '.join(str(err).split())}; " if str(err) else ""
        print(f"interrupted: {where}{interrupted}; run the same command again", file=sys.stderr)
        return INTERRUPTED_EXIT


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[list[int]]:
    """Inside the block a first Ctrl-C (SIGINT) is not raised but recorded in the list the block receives, so that
    a long computation stops at a point where its state is whole and saves it first; a second Ctrl-C raises at
    once. Outside the main thread, where no signal handler can be set, nothing is deferred."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def handler(signum: int, frame: object) -> None:
        if caught:
            raise KeyboardInterrupt
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)
