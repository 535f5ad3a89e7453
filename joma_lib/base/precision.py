"""The training precision a run actually uses: ``fp32``, ``bf16``, ``tf32`` (a GPU's TF32 matrix products, fp32
everywhere else), or ``auto`` (the fastest of them here).

* ``bf16`` on the CPU needs bf16 matrix products that run: :func:`joma_lib.base.cpu.bf16_support` probes them in a
  child process (and limits oneDNN's instruction set where its default kernels die). Where none runs, a bf16
  request trains in fp32, with a one-line notice; the run's metadata records the precision used.
* ``auto`` means the precision whose step a short measurement of the run's own shapes shows fastest: fp32 or
  bf16 on a CPU (fp32 without measuring where bf16 would run only on PyTorch's slow reference kernels), fp32, tf32
  or bf16 on a GPU (:func:`candidates`; fp32 on a tie). The measurement
  (:func:`measure_choice`: a few steps of each, alternating) is cached per CPU, torch version, thread count and
  shapes, so a machine always makes the same choice for the same run. ``JOMA_PRECISION=fp32|bf16|tf32``
  overrides what ``auto`` picks (the CI's numerics matrix uses it); an explicit precision is never overridden.
* ``tf32`` on a CPU, which has no TF32 products, trains in fp32 (with a one-line notice).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from joma_lib.base.cpu import bf16_support, cache_file
from joma_lib.base.io import InputUnavailableError, atomic_path, cache_dir
from joma_lib.base.startup import declare_env
from joma_lib.base.validation import check_choice, check_int

#: What a run config may ask for; :data:`PRECISIONS` are what a run can use.
PRECISION_CHOICES = ("auto", "fp32", "bf16", "tf32")
PRECISIONS = ("fp32", "bf16", "tf32")
PRECISION_ENV = "JOMA_PRECISION"
WARMUP_STEPS, TIMED_STEPS = 2, 4
declare_env(PRECISION_ENV, str(list(PRECISIONS)), lambda value: check_choice(PRECISION_ENV, value, PRECISIONS))


class PrecisionUnavailableError(InputUnavailableError):
    """A computation that needs a precision this machine cannot run (bf16 where the probe fails)."""


_used: list[set[str]] = []


@contextlib.contextmanager
def precisions_used() -> Iterator[set[str]]:
    """Collect, in the yielded set, the precision of every run trained inside the block (:func:`record_used`)."""
    found: set[str] = set()
    _used.append(found)
    try:
        yield found
    finally:
        _used.remove(found)


def record_used(precision: str) -> None:
    """Note that a run trained in ``precision`` (for the manifests of the figures being made)."""
    for found in _used:
        found.add(precision)


def require(precision: str, device: torch.device, what: str, at_speed: bool = False) -> None:
    """Raise :class:`PrecisionUnavailableError` naming ``what`` when ``precision`` cannot run on ``device``, or,
    with ``at_speed``, runs only on PyTorch's slow reference kernels there (bf16 on a CPU that is not
    :attr:`~joma_lib.base.cpu.Bf16Support.accelerated`)."""
    if usable(precision, device) != precision:
        why = (f"TF32 products need a CUDA GPU, not a {device.type} device" if precision == "tf32"
               else "no bf16 on this GPU" if device.type == "cuda" else bf16_support().summary())
        raise PrecisionUnavailableError(f"{what} needs {precision}, which cannot run on this machine ({why})")
    if at_speed and precision not in candidates(device):
        raise PrecisionUnavailableError(f"{what} needs {precision} at speed, and on this machine "
                                        f"{bf16_support().summary()}")


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` chose for one set of shapes, and the measured median step times (ms)."""

    precision: str
    fp32_ms: float
    bf16_ms: float
    tf32_ms: float | None = None  # measured on a GPU only


def usable(precision: str, device: torch.device) -> str:
    """``precision`` if it can run on ``device``, else ``"fp32"`` (bf16 on a CPU that fails the probe, or on
    a GPU without bf16)."""
    check_choice("precision", precision, PRECISIONS)
    if precision == "fp32":
        return "fp32"
    if precision == "tf32":
        return "tf32" if device.type == "cuda" else "fp32"
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if bf16_support().usable else "fp32"


def candidates(device: torch.device) -> tuple[str, ...]:
    """The precisions ``auto`` measures on ``device``: fp32 and those that run there (tf32 on a GPU only), bf16 on a
    CPU only where oneDNN runs it (:attr:`~joma_lib.base.cpu.Bf16Support.accelerated`): on PyTorch's reference
    kernels it is never the faster, and measuring it would cost seconds a step."""
    found = dict.fromkeys(usable(p, device) for p in PRECISIONS)
    if device.type == "cpu" and not bf16_support().accelerated:
        found.pop("bf16", None)
    return tuple(found)


@contextlib.contextmanager
def numerics(precision: str, device: torch.device) -> Iterator[None]:
    """Train in ``precision`` inside the block: bf16 autocast (without its weight cache, which a captured CUDA
    graph must not keep), or TF32 matrix products on a GPU; fp32 otherwise."""
    check_choice("precision", precision, PRECISIONS)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16", cache_enabled=False):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32


def measure_choice(step: Callable[[str], None], threads: int,
                   clock: Callable[[], float] = time.perf_counter,
                   among: tuple[str, ...] = ("fp32", "bf16")) -> AutoChoice:
    """Time ``step(precision)`` for each precision of ``among`` with ``clock`` (seconds), alternating
    (``WARMUP_STEPS`` each, then ``TIMED_STEPS`` each), on ``threads`` threads; the fastest median wins (the first
    of ``among``, fp32, on a tie)."""
    check_int("threads", threads, 1)
    times: dict[str, list[float]] = {p: [] for p in among}
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for i in range(WARMUP_STEPS + TIMED_STEPS):
            for precision in among:
                start = clock()
                step(precision)
                if i >= WARMUP_STEPS:
                    times[precision].append(1e3 * (clock() - start))
    finally:
        torch.set_num_threads(before)
    median = {p: float(sorted(t)[len(t) // 2]) for p, t in times.items()}
    best = min(among, key=lambda p: (median[p], among.index(p)))
    return AutoChoice(best, median["fp32"], median.get("bf16", float("nan")), median.get("tf32"))


def _choice_path(shapes: Mapping[str, Any], threads: int) -> Any:
    key = json.dumps({"probe": cache_file().name, "torch": torch.__version__, "threads": threads, **shapes},
                     sort_keys=True)
    return cache_dir() / f"precision-auto-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def cached_choice(shapes: Mapping[str, Any], threads: int) -> AutoChoice | None:
    """The stored ``auto`` choice for these shapes on this machine, if one was measured."""
    try:
        stored = json.loads(_choice_path(shapes, threads).read_text())
        tf32 = stored.get("tf32_ms")
        return AutoChoice(str(stored["precision"]), float(stored["fp32_ms"]), float(stored["bf16_ms"]),
                          None if tf32 is None else float(tf32))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def auto_choice(shapes: Mapping[str, Any], threads: int, step: Callable[[str], None],
                among: tuple[str, ...] = ("fp32", "bf16")) -> AutoChoice:
    """The cached choice for ``shapes``, or a new measurement (:func:`measure_choice`) that is then cached."""
    found = cached_choice(shapes, threads)
    if found is not None:
        return found
    choice = measure_choice(step, threads, among=among)
    try:
        with atomic_path(_choice_path(shapes, threads)) as tmp:
            tmp.write_text(json.dumps({**choice.__dict__, "shapes": dict(shapes), "threads": threads}) + "\n")
    except OSError:
        pass  # a read-only cache means measuring again next time
    return choice


def resolve(requested: str, device: torch.device, shapes: Mapping[str, Any], threads: int,
            step: Callable[[str], None]) -> str:
    """The precision a run asking for ``requested`` uses on ``device`` (see the module docstring).

    ``shapes`` identify the model and batch (the cache key of ``auto``); ``step(precision)`` runs one training
    step of a throw-away model of those shapes, for the measurement.
    """
    check_choice("precision", requested, PRECISION_CHOICES)
    if requested == "auto":
        forced = os.environ.get(PRECISION_ENV)
        if forced:
            return usable(check_choice(PRECISION_ENV, forced, PRECISIONS), device)
        among = candidates(device)
        if len(among) == 1:
            return among[0]
        if device.type == "cuda":
            shapes = {**shapes, "gpu": torch.cuda.get_device_name(device)}
        return auto_choice(shapes, threads, step, among).precision
    used = usable(requested, device)
    if used != requested:
        print(f"joma_lib: precision {requested} cannot run here; this run trains in {used}", file=sys.stderr)
    return used
