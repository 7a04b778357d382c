"""OsFileSystem (impl/fs/os_backend.py): real files behind the FileSystem seam.

Checks the error mapping to spec.errors, the read and write edge cases the engine relies on
(short read at end of file, append offsets, zero fill), that directory fsync works, and that
disk_space reports something sane. What the kernel really makes durable is not testable here.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from impl.fs.api import FileSystem
from impl.fs.os_backend import OsFileSystem, _map_error
from spec.errors import (
    FsClosed,
    FsExists,
    FsIOError,
    FsNoSpace,
    FsNotADirectory,
    FsNotFound,
)


@pytest.fixture
def fs(tmp_path: Path) -> OsFileSystem:
    return OsFileSystem(str(tmp_path))


def test_os_file_system_satisfies_the_protocol(fs: OsFileSystem) -> None:
    typed: FileSystem = fs
    assert typed.exists("") and typed.is_dir("")


def test_relative_paths_are_under_the_root_and_absolute_paths_are_not(
    fs: OsFileSystem, tmp_path: Path
) -> None:
    fs.mkdir("d")
    fs.open("d/f", create=True).close()
    assert (tmp_path / "d" / "f").is_file()
    assert fs.exists(str(tmp_path / "d" / "f"))
    assert fs.listdir(str(tmp_path)) == ["d"]


def test_append_returns_the_offset_it_landed_at(fs: OsFileSystem) -> None:
    handle = fs.open("f", create=True)
    assert handle.append(b"abc") == 0
    assert handle.append(b"") == 3
    assert handle.append(b"defg") == 3
    assert handle.size() == 7
    assert handle.pread(0, 7) == b"abcdefg"


def test_pread_is_short_only_at_the_end_of_the_file(fs: OsFileSystem) -> None:
    handle = fs.open("f", create=True)
    handle.append(b"0123456789")
    assert handle.pread(2, 3) == b"234"
    assert handle.pread(8, 10) == b"89"
    assert handle.pread(10, 5) == b""
    assert handle.pread(50, 5) == b""
    assert handle.pread(0, 0) == b""
    with pytest.raises(FsIOError):
        handle.pread(0, -1)


def test_pwrite_past_the_end_fills_with_zeros_and_truncate_cuts_or_extends(
    fs: OsFileSystem,
) -> None:
    handle = fs.open("f", create=True)
    handle.pwrite(4, b"xy")
    assert handle.pread(0, 10) == b"\0\0\0\0xy"
    handle.truncate(2)
    assert handle.pread(0, 10) == b"\0\0"
    handle.truncate(4)
    assert handle.size() == 4
    handle.fsync()
    handle.fdatasync()
    with pytest.raises(FsIOError):
        handle.pwrite(-1, b"x")
    with pytest.raises(FsIOError):
        handle.truncate(-1)


def test_handles_follow_the_file_through_rename_and_unlink(fs: OsFileSystem) -> None:
    handle = fs.open("a", create=True)
    handle.append(b"abc")
    fs.rename("a", "b")
    handle.append(b"def")
    reopened = fs.open("b")
    assert reopened.pread(0, 10) == b"abcdef"
    reopened.close()
    fs.unlink("b")
    assert handle.pread(0, 10) == b"abcdef"
    assert handle.path == "a"


def test_errors_map_to_typed_fs_errors(fs: OsFileSystem) -> None:
    fs.mkdir("d")
    fs.open("d/f", create=True).close()
    with pytest.raises(FsNotFound):
        fs.open("d/missing")
    with pytest.raises(FsExists):
        fs.open("d/f", create=True, exclusive=True)
    with pytest.raises(FsIOError):
        fs.open("d", create=True)
    with pytest.raises(FsNotADirectory):
        fs.open("d/f/x", create=True)
    with pytest.raises(FsNotFound):
        fs.unlink("d/missing")
    with pytest.raises(FsNotFound):
        fs.listdir("missing")
    with pytest.raises(FsNotADirectory):
        fs.listdir("d/f")
    with pytest.raises(FsNotADirectory):
        fs.mkdir("d/f")
    with pytest.raises(FsExists):
        fs.link("d/f", "d/f")
    with pytest.raises(FsNotFound):
        fs.rename("d/missing", "d/g")
    with pytest.raises(FsNotFound):
        fs.disk_space("missing")


def test_a_closed_handle_raises_fs_closed_and_closes_twice(fs: OsFileSystem) -> None:
    handle = fs.open("f", create=True)
    handle.close()
    handle.close()
    for call in (lambda: handle.append(b"x"), lambda: handle.pread(0, 1), handle.size):
        with pytest.raises(FsClosed):
            call()


def test_map_error_covers_each_errno_class() -> None:
    def mapped(code: int) -> type:
        return type(_map_error("p", "write", OSError(code, os.strerror(code))))

    assert mapped(errno.ENOENT) is FsNotFound
    assert mapped(errno.EEXIST) is FsExists
    assert mapped(errno.ENOTDIR) is FsNotADirectory
    assert mapped(errno.ENOSPC) is FsNoSpace
    assert mapped(errno.EDQUOT) is FsNoSpace
    assert mapped(errno.EBADF) is FsClosed
    assert mapped(errno.EIO) is FsIOError
    error = _map_error("p", "fsync", OSError(errno.EIO, "Input/output error"))
    assert isinstance(error, FsIOError) and "fsync" in str(error) and error.path == "p"


def test_fsync_dir_works_on_directories_only(fs: OsFileSystem) -> None:
    fs.mkdir("d/e")
    fs.open("d/f", create=True).close()
    fs.fsync_dir("")
    fs.fsync_dir("d")
    fs.fsync_dir("d/e")
    with pytest.raises(FsNotFound):
        fs.fsync_dir("missing")
    with pytest.raises(FsNotADirectory):
        fs.fsync_dir("d/f")


def test_mkdir_makes_parents_and_accepts_an_existing_directory(fs: OsFileSystem) -> None:
    fs.mkdir("a/b/c")
    fs.mkdir("a/b/c")
    assert fs.is_dir("a/b/c") and fs.listdir("a") == ["b"]
    assert not fs.is_dir("a/missing")


def test_disk_space_is_sane(fs: OsFileSystem) -> None:
    space = fs.disk_space("")
    assert space.total_bytes > 0
    assert 0 <= space.free_bytes <= space.total_bytes
    assert 0.0 <= space.usage <= 1.0
    fs.mkdir("d")
    assert fs.disk_space("d").total_bytes == space.total_bytes


def test_a_read_only_handle_reads_and_refuses_writes(tmp_path: Path) -> None:
    fs = OsFileSystem(str(tmp_path))
    writer = fs.open("f", create=True)
    writer.pwrite(0, b"abc")
    writer.close()
    handle = fs.open("f", read_only=True)
    assert handle.pread(0, 10) == b"abc"
    for attempt in (lambda: handle.pwrite(0, b"x"), lambda: handle.append(b"x")):
        with pytest.raises(FsIOError, match="read-only"):
            attempt()
    with pytest.raises(FsIOError, match="read-only"):
        handle.truncate(0)
    handle.close()
    assert (tmp_path / "f").read_bytes() == b"abc"


def _short_then_enospc(
    monkeypatch: pytest.MonkeyPatch, first_bytes: int, *, restore_fails: bool = False
) -> list[int]:
    """Make os.pwrite write ``first_bytes`` (really) and then fail with ENOSPC, as a kernel
    does when the disk fills in the middle of a write. Returns the list of call sizes. With
    ``restore_fails`` the undo's writes fail too (a copy-on-write file system)."""
    real = os.pwrite
    calls: list[int] = []

    def pwrite(fd: int, data: bytes | memoryview, offset: int) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data)[:first_bytes], offset)
        if len(calls) == 2 or restore_fails:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    return calls


def test_an_append_cut_short_by_enospc_changes_nothing(
    fs: OsFileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = fs.open("f", create=True)
    handle.append(b"old")
    calls = _short_then_enospc(monkeypatch, 4)
    with pytest.raises(FsNoSpace):
        handle.append(b"0123456789")
    assert calls[:2] == [10, 6]  # the kernel really wrote 4 bytes first
    monkeypatch.undo()
    assert handle.size() == 3
    assert handle.pread(0, 100) == b"old"


def test_a_pwrite_past_the_end_cut_short_by_enospc_changes_nothing(
    fs: OsFileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = fs.open("f", create=True)
    handle.append(b"old")
    _short_then_enospc(monkeypatch, 2)
    with pytest.raises(FsNoSpace):
        handle.pwrite(10, b"abcdef")
    monkeypatch.undo()
    assert handle.pread(0, 100) == b"old"


def test_an_overwrite_cut_short_by_enospc_gets_its_old_bytes_back(
    fs: OsFileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = fs.open("f", create=True)
    handle.append(b"0123456789")
    _short_then_enospc(monkeypatch, 5)
    with pytest.raises(FsNoSpace):
        handle.pwrite(7, b"ABCDEFGH")  # 3 bytes in place, 5 past the end
    monkeypatch.undo()
    assert handle.pread(0, 100) == b"0123456789"


def test_an_enospc_before_any_byte_changes_nothing(
    fs: OsFileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = fs.open("f", create=True)
    handle.append(b"0123")
    calls = _short_then_enospc(monkeypatch, 0)
    with pytest.raises(FsNoSpace):
        handle.pwrite(1, b"xy")
    assert calls == [2, 2]  # a zero-byte write, then the error; no undo was needed
    monkeypatch.undo()
    assert handle.pread(0, 100) == b"0123"


def test_a_write_that_cannot_be_undone_is_an_io_error_not_no_space(
    fs: OsFileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = fs.open("f", create=True)
    handle.append(b"0123456789")
    _short_then_enospc(monkeypatch, 2, restore_fails=True)
    with pytest.raises(FsIOError, match="could not be undone") as caught:
        handle.pwrite(0, b"ABCD")
    assert not isinstance(caught.value, FsNoSpace)
