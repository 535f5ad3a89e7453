"""Files: atomic writes, and the error for external inputs that cannot be had here.

Atomic writes mean a reader never sees half of a file and an interrupted writer leaves none.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np


class InputUnavailableError(RuntimeError):
    """An external input (third-party data to locate or download) cannot be found or fetched here.

    Figure code raises it so that the harness can say "input unavailable" instead of failing, and
    the book can fall back to the committed reference data with a visible note.
    """


class InputCorruptError(RuntimeError):
    """An external input was found but fails its check (e.g. a truncated download with the wrong sha256).

    Unlike :class:`InputUnavailableError` this is an error to repair, so ``verify`` reports it as one; the book
    still falls back to the committed reference data, with a note that names the damaged file.
    """


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it into place only if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cache_dir() -> Path:
    """The user cache: ``$JOMA_CACHE`` or ``~/.cache/joma_companion`` (downloads, probe verdicts)."""
    return Path(os.environ.get("JOMA_CACHE") or Path.home() / ".cache" / "joma_companion")


def writable_dir(path: str | os.PathLike[str], name: str = "out") -> Path:
    """Create the folder ``path`` if needed and prove it writable; return it.

    Called before any long computation that will save into ``path``, so that a file in the way, a folder that
    cannot be created or written, or an empty name fails at once with a :class:`ValueError` naming ``name``.
    """
    if not str(path).strip():
        raise ValueError(f"{name} must name a folder, got an empty string")
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{name} must be a folder, but {folder} is a file")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ValueError(f"{name} must be a writable folder, but {folder} is not ({err.strerror or err})") from None
    return folder


def write_npz(path: Path, data: Mapping[str, np.ndarray]) -> None:
    """Save ``data`` as an uncompressed ``.npz``, atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            # Any: numpy's stub would match a key named "allow_pickle" against that bool parameter
            arrays: dict[str, Any] = dict(data)
            np.savez(fh, **arrays)
