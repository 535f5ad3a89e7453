"""Choice of the torch device, shared by every experiment.

``JOMA_DEVICE`` (``auto``, ``cpu`` or ``cuda``) sets the default; ``auto`` takes a
GPU when one is visible. The figure checks read the same variable to pick their
GPU tolerances.
"""

from __future__ import annotations

import os

import torch

from joma_lib.validation import check_choice

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(device: str | None = None) -> torch.device:
    """Turn ``auto|cpu|cuda`` (default: ``$JOMA_DEVICE`` or ``auto``) into a :class:`torch.device`."""
    name = device if device is not None else os.environ.get("JOMA_DEVICE", "auto")
    check_choice("device", name, DEVICE_CHOICES)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but torch sees no CUDA GPU; use device='cpu' or 'auto'")
    return torch.device(name)


def on_gpu() -> bool:
    """True when the default device (``$JOMA_DEVICE``) resolves to a GPU."""
    return resolve_device().type == "cuda"
