"""``python -m joma_lib doctor``: what this machine gives the companion, in a dozen lines.

The torch build, the CPU and the flags that decide its bf16 kernels, the bf16 probe's verdict
(:mod:`joma_lib.base.cpu`), the precision ``auto`` picks for the CPU re-run with both measured step times
(:mod:`joma_lib.base.precision`), the GPU, the thread count, where the authors' published runs were found, and
whether the Hugging Face Hub can be reached. It only reports: it always exits 0.
"""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Callable

import torch

from joma_lib.base.cpu import bf16_support, cache_file, cpu_identity, onednn_isa_limit
from joma_lib.lm.authors import OFFICIAL_FILES, search_dirs
from joma_lib.lm.presets import preset_auto_choice
from joma_lib.base.startup import env_flag

AUTO_PRESET = "rerun-quick"
HUB_HOST, HUB_TIMEOUT_S = "huggingface.co", 3.0


def _authors_files() -> str:
    for folder in search_dirs():
        found = [name for name in OFFICIAL_FILES if (folder / name).is_file()]
        if found:
            return f"{len(found)} of {len(OFFICIAL_FILES)} in {folder}"
    return f"not found (searched {', '.join(str(d) for d in search_dirs())}); online they are downloaded on first use"


def _hub() -> str:
    if env_flag("HF_HUB_OFFLINE"):
        return "not asked (HF_HUB_OFFLINE is set)"
    try:
        with socket.create_connection((HUB_HOST, 443), timeout=HUB_TIMEOUT_S):
            return f"reachable ({HUB_HOST}:443)"
    except OSError as err:
        return f"not reachable ({HUB_HOST}: {err.strerror or type(err).__name__}); offline stand-ins are used"


def _auto() -> str:
    choice = preset_auto_choice(AUTO_PRESET)
    forced = os.environ.get("JOMA_PRECISION")
    if choice is None:
        return f"{forced or 'fp32'} ({'JOMA_PRECISION is set' if forced else 'bf16 cannot run here'})"
    return (f"{choice.precision} for preset {AUTO_PRESET} (one step: fp32 {choice.fp32_ms:.0f} ms, "
            f"bf16 {choice.bf16_ms:.0f} ms, one thread)")


def _gpu() -> str:
    if not torch.cuda.is_available():
        return "none visible to torch"
    return f"{torch.cuda.get_device_name(0)} (bf16: {'yes' if torch.cuda.is_bf16_supported() else 'no'})"


def report(refresh: bool = False) -> list[str]:
    """The doctor's lines: ``name: value`` (``refresh``: probe bf16 again instead of reading the cached verdict)."""
    ident = cpu_identity()
    rows: list[tuple[str, Callable[[], str]]] = [
        ("python", lambda: f"{platform.python_version()} on {platform.system()} {platform.machine()}"),
        ("torch", lambda: f"{torch.__version__} (CUDA build: {torch.version.cuda or 'no'}, "
                          f"oneDNN: {'yes' if torch.backends.mkldnn.is_available() else 'no'})"),
        ("cpu", lambda: f"{ident.model}; flags: {' '.join(ident.flags) or 'none of the ones that matter'}"),
        ("bf16 probe", lambda: bf16_support(refresh=refresh).summary()),
        ("probe cache", lambda: str(cache_file())),
        ("oneDNN ceiling", onednn_isa_limit),
        ("precision auto", _auto),
        ("gpu", _gpu),
        ("threads", lambda: f"torch {torch.get_num_threads()}, cores {os.cpu_count()}"),
        ("authors' files", _authors_files),
        ("hugging face hub", _hub),
    ]
    lines = []
    for name, value in rows:
        try:
            text = value()
        except Exception as err:  # noqa: BLE001 - the doctor reports every fault as a line, never a traceback
            text = f"could not tell ({type(err).__name__}: {' '.join(str(err).split())})"
        lines.append(f"{name + ':':<18}{text}")
    return lines


def main(refresh: bool = False) -> int:
    """Print :func:`report`; exit 0."""
    print("\n".join(report(refresh)))
    return 0
