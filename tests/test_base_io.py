"""Files (joma_lib.base.io): atomic writes, the output-folder check, stale download parts and the user cache."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import numpy as np
import pytest

from joma_lib.base import io as io_module
from joma_lib.base.io import (DamagedFileError, atomic_path, atomic_paths, cache_dir, read_checked, remove_stale_temps,
                              writable_dir, write_checked, write_npz)


def test_atomic_path_lands_only_when_the_block_succeeds(tmp_path: Path):
    target = tmp_path / "sub" / "out.txt"
    with atomic_path(target) as tmp:
        tmp.write_text("new")
        assert not target.exists() and tmp.parent == target.parent  # written beside, moved in at the end
    assert target.read_text() == "new"
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert target.read_text() == "new"  # the old file is untouched
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.txt"]  # and no temporary is left


def test_atomic_paths_land_all_or_none(tmp_path: Path):
    paths = [tmp_path / "a.npz", tmp_path / "b.csv"]
    with pytest.raises(OSError):
        with atomic_paths(paths) as tmps:
            tmps[0].write_text("a")
            raise OSError(28, "No space left on device")
    assert list(tmp_path.iterdir()) == []
    with atomic_paths(paths) as tmps:
        for tmp, text in zip(tmps, "ab"):
            tmp.write_text(text)
    assert [p.read_text() for p in paths] == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz", "b.csv"]


def test_what_the_atomic_writers_land_is_readable_by_all_as_a_plain_write(tmp_path: Path):
    """The temporary files are made private (mkstemp: 0600); what lands has the usual 0644."""
    with atomic_path(tmp_path / "one.txt") as tmp:
        tmp.write_text("1")
    with atomic_paths([tmp_path / "a.txt", tmp_path / "b.txt"]) as tmps:
        for tmp in tmps:
            tmp.write_text("x")
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()} == {
        "one.txt": 0o644, "a.txt": 0o644, "b.txt": 0o644}


class Killed(BaseException):
    """A kill, as far as the writer can tell: nothing after it runs."""


def test_a_checked_write_killed_before_its_file_lands_leaves_the_old_file_readable(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    """The sidecar accepts the old and the new digest while the file is replaced, and no third; once the write is
    done, the new one alone (the previous contents put back are refused)."""
    path = tmp_path / "checkpoint.pt"
    write_checked(path, b"old")
    replace = os.replace

    def killed_as_the_file_lands(src: str, dst: str) -> None:
        if Path(dst) == path:
            raise Killed
        replace(src, dst)

    monkeypatch.setattr(io_module.os, "replace", killed_as_the_file_lands)
    with pytest.raises(Killed):
        write_checked(path, b"new")
    monkeypatch.undo()
    assert read_checked(path) == b"old"
    path.write_bytes(b"neither")
    with pytest.raises(DamagedFileError, match="is damaged"):
        read_checked(path)
    write_checked(path, b"new")
    assert read_checked(path) == b"new"
    path.write_bytes(b"old")
    with pytest.raises(DamagedFileError, match="is damaged"):
        read_checked(path)


def test_write_npz_round_trips(tmp_path: Path):
    data = {"x": np.arange(3.0), "n": np.array([[1, 2]], dtype=np.int32)}
    write_npz(tmp_path / "d.npz", data)
    with np.load(tmp_path / "d.npz") as npz:
        assert sorted(npz.files) == ["n", "x"]
        for name, array in data.items():
            assert npz[name].dtype == array.dtype
            np.testing.assert_array_equal(npz[name], array)


@pytest.mark.parametrize("key", ["allow_pickle", "file"])
def test_write_npz_refuses_a_key_savez_would_swallow(tmp_path: Path, key: str):
    with pytest.raises(ValueError, match=rf"\['{key}'\] are np.savez's own keywords"):
        write_npz(tmp_path / "x.npz", {"a": np.arange(3), key: np.ones(2)})
    assert not list(tmp_path.iterdir())  # nothing written, not even a partial file


def test_writable_dir_creates_the_folder_and_names_the_argument_when_it_cannot(tmp_path: Path):
    assert writable_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert (tmp_path / "new" / "deeper").is_dir()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(ValueError, match="out_dir must be a folder, but .* is a file"):
        writable_dir(a_file, name="out_dir")
    with pytest.raises(ValueError, match="out_dir must name a folder, got an empty string"):
        writable_dir("  ", name="out_dir")


def test_writable_dir_names_the_argument_when_the_folder_cannot_be_written(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch):
    """As root every folder is writable, so the refusal (a read-only disk, say) is injected where the write is tried."""
    def read_only(**_: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(io_module.tempfile, "TemporaryFile", read_only)
    with pytest.raises(ValueError, match=r"out_dir must be a writable folder, but .* is not \(Read-only file system\)"):
        writable_dir(tmp_path, name="out_dir")


def test_only_stale_temporary_files_are_removed(tmp_path: Path):
    stale, fresh, written = (tmp_path / ".data.pt.k2x_9a0q.part", tmp_path / ".data.pt.abcdefgh.part",
                             tmp_path / ".checkpoint.pt.zz9_0aq1.pt")
    kept = [tmp_path / ".lock", tmp_path / "data.pt", tmp_path / ".data.pt.short.part", tmp_path / ".hidden"]
    for path in (stale, fresh, written, *kept):
        path.write_text("partial")
    old = time.time() - 3600
    for path in (stale, written, *kept):
        os.utime(path, (old, old))
    assert sorted(remove_stale_temps(tmp_path, older_than=600.0)) == sorted([stale, written])
    assert fresh.exists() and all(path.exists() for path in kept)
    assert remove_stale_temps(tmp_path) == [fresh]  # no age: every temporary file (a folder no one else writes)


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("JOMA_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("JOMA_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "joma_companion"
