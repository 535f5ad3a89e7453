"""Files: atomic writes, downloads with a deadline, and the error for external inputs that cannot be had here.

Atomic writes mean a reader never sees half of a file and an interrupted writer leaves none.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
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


@contextmanager
def atomic_paths(paths: Sequence[Path]) -> Iterator[list[Path]]:
    """Like :func:`atomic_path` for a set of files: yield one temporary path next to each of ``paths``, and move
    them all into place only once the block has written every one of them (all land, or none)."""
    tmps: list[Path] = []
    try:
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
            os.close(fd)
            tmps.append(Path(name))
        yield tmps
        for tmp in tmps:
            os.chmod(tmp, 0o644)
        for tmp, path in zip(tmps, paths):
            os.replace(tmp, path)
    finally:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)


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


NPZ_RESERVED_KEYS = ("file", "allow_pickle")
"""Names ``np.savez`` takes as its own keywords: an array stored under one would be swallowed, not saved."""


def write_npz(path: Path, data: Mapping[str, np.ndarray]) -> None:
    """Save ``data`` as an uncompressed ``.npz``, atomically. A key ``np.savez`` reads as its own keyword
    (:data:`NPZ_RESERVED_KEYS`) is refused, before anything is written."""
    reserved = sorted(set(data) & set(NPZ_RESERVED_KEYS))
    if reserved:
        raise ValueError(f"data keys {reserved} are np.savez's own keywords and would not be saved; "
                         f"rename those arrays (reserved: {', '.join(NPZ_RESERVED_KEYS)})")
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            arrays: dict[str, Any] = dict(data)  # Any: numpy's stub types the keyword arguments as its parameters
            np.savez(fh, **arrays)


class DeadlineExceeded(TimeoutError):
    """A network transfer did not finish (connect, headers and body together) within its deadline."""


def remove_stale_parts(dest: Path, older_than: float) -> None:
    """Delete the ``.part`` files of ``dest`` left by a killed :func:`fetch_url` (untouched for ``older_than`` s)."""
    now = time.time()
    for part in dest.parent.glob(f".{dest.name}.*.part"):
        try:
            if now - part.stat().st_mtime > older_than:
                part.unlink()
        except FileNotFoundError:  # removed meanwhile by another process
            pass


def fetch_url(url: str, dest: Path, timeout: float, deadline: float,
              check: Callable[[Path], None] | None = None) -> Path:
    """Download ``url`` into ``dest`` atomically, within ``deadline`` seconds in all; return ``dest``.

    ``timeout`` bounds the connect and each read; ``deadline`` bounds the whole exchange: connecting, the status
    line and headers, and the body. A watchdog shuts the connection's socket when the deadline passes, so a
    server that trickles header bytes is cut off as surely as one that trickles the body. The body goes into a
    ``.<name>.*.part`` file next to ``dest``, created only once the headers have arrived and removed on any
    failure; ``check(part)`` (e.g. a checksum) runs before the rename. A process killed mid-transfer leaves its
    ``.part`` behind, which a later call removes once it is stale. Raises :class:`DeadlineExceeded` (a
    :class:`TimeoutError`) when the deadline passes, or the ``OSError``/``http.client.HTTPException`` of the
    failing step (``urllib.error.URLError`` is an ``OSError``).
    """
    import http.client
    import socket
    import threading
    import urllib.request

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_parts(dest, older_than=max(deadline + timeout, 600.0))
    stop = time.monotonic() + deadline
    # the sockets themselves, not their connections: urllib drops ``conn.sock`` once the headers are in, while the
    # response goes on reading the body through the same socket
    sockets: list[socket.socket] = []
    expired = threading.Event()
    lock = threading.Lock()

    def cut() -> None:
        """Deadline reached: shut the sockets down, so that a blocked read returns at once."""
        with lock:
            expired.set()
            for sock in sockets:
                try:  # the plain socket under a TLS one too; the TLS object stays with the reading thread
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass

    def factory(cls: type[http.client.HTTPConnection]) -> Callable[..., http.client.HTTPConnection]:
        """Connections that connect within what is left of the deadline and that the watchdog can reach."""
        def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            kwargs["timeout"] = max(min(timeout, stop - time.monotonic()), 1e-3)
            conn = cls(host, **kwargs)
            connect = conn.connect

            def connect_then_register() -> None:
                connect()
                with lock:
                    sockets.append(conn.sock)
                if expired.is_set():  # connected just as the deadline passed, after the watchdog's sweep
                    cut()
            conn.connect = connect_then_register  # type: ignore[method-assign]
            return conn
        return make

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(factory(http.client.HTTPConnection), req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(factory(http.client.HTTPSConnection), req)

    def failure(err: BaseException) -> BaseException:
        if not expired.is_set():
            return err
        return DeadlineExceeded(f"the transfer (connect, headers and body) took longer than the deadline of "
                                f"{deadline:g} s")

    watchdog = threading.Timer(deadline, cut)
    watchdog.daemon = True
    watchdog.start()
    part: Path | None = None
    try:
        try:
            response = urllib.request.build_opener(Http, Https).open(url, timeout=timeout)
        except (OSError, http.client.HTTPException) as err:
            raise failure(err) from err
        with response:
            fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
            part = Path(name)
            with os.fdopen(fd, "wb") as out:
                try:
                    while block := response.read1(1 << 16):
                        out.write(block)
                except (OSError, http.client.HTTPException) as err:
                    raise failure(err) from err
            if expired.is_set():  # the shut socket ended the body early: a truncated file is no download
                raise failure(TimeoutError())
        if check is not None:
            check(part)
        os.chmod(part, 0o644)
        os.replace(part, dest)
    finally:
        watchdog.cancel()
        if part is not None:
            part.unlink(missing_ok=True)
    return dest
