"""Files: atomic and checksummed writes, downloads with a deadline, and the error for external inputs that cannot be
had here.

Atomic writes mean a reader never sees half of a file and an interrupted writer leaves none behind for long: the
temporary file a killed writer leaves (``.<name>.XXXXXXXX<suffix>`` beside its target) is removed by
:func:`remove_stale_temps`, which the owners of a folder call when they next open it. A checksummed file
(:func:`write_checked`, :func:`save_torch_checked`) has its sha256 in ``<name>.sha256`` beside it, and is read only
through :func:`read_checked`, so a file damaged after it was written is refused instead of being used.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from joma_lib.base.startup import declare_env
from joma_lib.base.validation import check_float


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


CACHE_ENV = "JOMA_CACHE"


def cache_dir() -> Path:
    """The user cache: ``$JOMA_CACHE`` or ``~/.cache/joma_companion`` (downloads, probe verdicts)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "joma_companion")


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


declare_env(CACHE_ENV, "a writable folder (created if missing)", lambda value: writable_dir(value, CACHE_ENV))


NPZ_RESERVED_KEYS = ("file", "allow_pickle")
"""Names ``np.savez`` takes as its own keywords: an array stored under one would be swallowed, not saved."""


def write_npz(path: Path, data: Mapping[str, np.ndarray], checked: bool = False) -> None:
    """Save ``data`` as an uncompressed ``.npz``, atomically (``checked``: with its sha256 sidecar,
    :func:`write_checked`). A key ``np.savez`` reads as its own keyword (:data:`NPZ_RESERVED_KEYS`) is refused,
    before anything is written."""
    reserved = sorted(set(data) & set(NPZ_RESERVED_KEYS))
    if reserved:
        raise ValueError(f"data keys {reserved} are np.savez's own keywords and would not be saved; "
                         f"rename those arrays (reserved: {', '.join(NPZ_RESERVED_KEYS)})")
    buffer = io.BytesIO()
    arrays: dict[str, Any] = dict(data)  # Any: numpy's stub types the keyword arguments as its parameters
    np.savez(buffer, **arrays)
    if checked:
        write_checked(path, buffer.getbuffer())
        return
    with atomic_path(path) as tmp:
        _write_bytes(tmp, buffer.getbuffer(), path)


CHECKSUM_SUFFIX = ".sha256"
"""The sidecar of a checksummed file: ``<name>.sha256`` beside it, in ``sha256sum``'s format."""


class DamagedFileError(ValueError):
    """A checksummed file does not match its ``.sha256`` sidecar (or has none): it was damaged after it was
    written, and is not to be used. The message names the file; the caller adds the way out."""


def checksum_path(path: Path) -> Path:
    """The sidecar ``<path>.sha256`` of a checksummed file."""
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def _write_bytes(tmp: Path, data: bytes | memoryview, dest: Path) -> None:
    """Write ``data`` into the temporary file ``tmp`` of ``dest``. A write that fails (a full disk, a quota, an I/O
    error) raises an ``OSError`` that names ``dest``, the free space of its disk, and the way out."""
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
    except OSError as err:
        try:
            free = f"{shutil.disk_usage(dest.parent).free / 2**20:.1f} MiB free"
        except OSError:
            free = "free space unknown"
        raise OSError(err.errno, f"{err.strerror or err} while writing {dest} (the disk that holds {dest.parent}: "
                                 f"{free}); nothing was replaced: make room and run the same command again") from None


def _digests(sidecar: Path) -> set[str]:
    """The sha256 digests a sidecar accepts (one per line, ``sha256sum`` format)."""
    return {line.split()[0] for line in sidecar.read_text().splitlines() if line.strip()}


def _write_sidecar(path: Path, digests: Sequence[str]) -> None:
    with atomic_path(checksum_path(path)) as tmp:
        _write_bytes(tmp, "".join(f"{d}  {path.name}\n" for d in digests).encode(), checksum_path(path))


def write_checked(path: Path, data: bytes | memoryview) -> None:
    """Write ``data`` to ``path`` atomically, with its sha256 in the sidecar ``<path>.sha256``.

    While the file is replaced, the sidecar accepts the old and the new digest (it is rewritten with the new one
    alone afterwards), so a kill at any point leaves a file that matches its sidecar: the old or the new one,
    never half of either.
    """
    path = Path(path)
    digest = hashlib.sha256(data).hexdigest()
    try:
        old = sorted(_digests(checksum_path(path)) - {digest}) if path.exists() else []
    except OSError:
        old = []
    _write_sidecar(path, [digest, *old])
    with atomic_path(path) as tmp:
        _write_bytes(tmp, data, path)
    if old:
        _write_sidecar(path, [digest])


def read_checked(path: Path) -> bytes:
    """The bytes of ``path``, once they match its sidecar ``<path>.sha256``; :class:`DamagedFileError` (naming the
    file) when they do not, or when the sidecar is missing."""
    path = Path(path)
    data = path.read_bytes()
    sidecar = checksum_path(path)
    try:
        digests = _digests(sidecar)
    except FileNotFoundError:
        raise DamagedFileError(f"{path} has no checksum file {sidecar.name} beside it (it was not written by this "
                               "version, or the checksum was deleted), so it cannot be trusted") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual not in digests:
        raise DamagedFileError(f"{path} is damaged: its sha256 {actual[:12]}... is not the {min(digests)[:12]}... "
                               f"recorded in {sidecar.name} when it was written")
    return data


def save_torch_checked(path: Path, obj: object) -> None:
    """``torch.save(obj)`` into ``path`` atomically and checksummed (:func:`write_checked`). The object is
    serialised in memory first, so a full disk is an ``OSError`` naming the file, not a failure inside torch."""
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_checked(path, buffer.getbuffer())


def load_torch_checked(path: Path, map_location: Any = None) -> Any:
    """``torch.load`` (``weights_only``) of a file written by :func:`save_torch_checked`, after its checksum
    (:func:`read_checked`: :class:`DamagedFileError` when it does not match). torch itself does not check the
    CRCs of its archive, so a damaged tensor would otherwise load as different numbers."""
    import torch

    return torch.load(io.BytesIO(read_checked(path)), map_location=map_location, weights_only=True)


#: the temporary files of :func:`atomic_path`/:func:`atomic_paths` (``.<name>.<8 random characters><suffix>``) and
#: :func:`fetch_url` (``.<name>.<8 random characters>.part``), as ``tempfile.mkstemp`` names them
_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}(\.[^.]+)?$")


def remove_stale_temps(folder: Path, older_than: float = 0.0) -> list[Path]:
    """Delete the temporary files a killed writer left in ``folder`` (untouched for ``older_than`` s); return them.

    Call it where no other process can be writing into ``folder`` (``older_than=0``: a run's folder under its
    lock), or with an age no write lasts (a folder several processes share).
    """
    now, removed = time.time(), []
    for path in Path(folder).glob(".*"):
        try:
            if _TEMP_NAME.match(path.name) and path.is_file() and now - path.stat().st_mtime >= older_than:
                path.unlink()
                removed.append(path)
        except FileNotFoundError:  # removed meanwhile by another process
            pass
    return removed


class DeadlineExceeded(TimeoutError):
    """A network transfer did not finish (connect, headers and body together) within its deadline."""


def fetch_url(url: str, dest: Path, timeout: float, deadline: float,
              check: Callable[[Path], None] | None = None) -> Path:
    """Download ``url`` into ``dest`` atomically, within ``deadline`` seconds in all; return ``dest``.

    ``timeout`` bounds the connect and each read; ``deadline`` bounds the whole exchange: connecting, the status
    line and headers, and the body. A watchdog shuts the connection's socket when the deadline passes, so a
    server that trickles header bytes is cut off as surely as one that trickles the body. The body goes into a
    ``.<name>.*.part`` file next to ``dest``, created only once the headers have arrived and removed on any
    failure; ``check(part)`` (e.g. a checksum) runs before the rename. A process killed mid-transfer leaves its
    ``.part`` behind, which a later call removes once it is stale (:func:`remove_stale_temps`). Raises
    :class:`DeadlineExceeded` (a :class:`TimeoutError`) when the deadline passes, or the
    ``OSError``/``http.client.HTTPException`` of the failing step (``urllib.error.URLError`` is an ``OSError``).
    """
    import http.client
    import socket
    import threading
    import urllib.parse
    import urllib.request

    if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"url must be an http:// or https:// address, got {url!r}")
    timeout = check_float("timeout", timeout, 0, low_open=True)
    deadline = check_float("deadline", deadline, 0, low_open=True)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(dest.parent, older_than=max(deadline + timeout, 600.0))
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
