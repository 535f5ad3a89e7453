"""Choice of the torch device, and of torch's CPU thread count, shared by every experiment.

``JOMA_DEVICE`` (``auto``, ``cpu`` or ``cuda``) sets the default; ``auto`` takes a
GPU when one is visible. The figure checks read the same variable to pick their
GPU tolerances. :func:`pinned_threads` fixes the CPU thread count for a block (CPU
reductions, and so the numbers, depend on it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from joma_lib.base.startup import declare_env
from joma_lib.base.validation import check_choice, check_int

DEVICE_CHOICES = ("auto", "cpu", "cuda")
DEVICE_ENV = "JOMA_DEVICE"
declare_env(DEVICE_ENV, str(list(DEVICE_CHOICES)), lambda value: check_choice(DEVICE_ENV, value, DEVICE_CHOICES))


def resolve_device(device: str | None = None) -> torch.device:
    """Turn ``auto|cpu|cuda`` (default: ``$JOMA_DEVICE`` or ``auto``) into a :class:`torch.device`."""
    if device is None:
        name = check_choice(DEVICE_ENV, os.environ.get(DEVICE_ENV) or "auto", DEVICE_CHOICES)
    else:
        name = check_choice("device", device, DEVICE_CHOICES)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but torch sees no CUDA GPU; use device='cpu' or 'auto'")
    return torch.device(name)


def on_gpu() -> bool:
    """True when the default device (``$JOMA_DEVICE``) resolves to a GPU."""
    return resolve_device().type == "cuda"


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (a GPU runs it asynchronously; a CPU has nothing queued): what a timing
    of GPU work must do before it reads the clock."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextmanager
def pinned_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(threads)``, restoring the caller's count after.

    ``None`` keeps torch's count (and still restores it after). A count that is not an integer in
    ``[1, 1024]`` raises a ValueError naming ``threads``, before anything is changed.
    """
    if threads is not None:
        threads = check_int("threads", threads, 1, 1024)
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
