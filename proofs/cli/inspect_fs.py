"""Reading a bookie's files for ``bkref inspect`` without writing, without hanging.

Spec pages: none of its own (docs/inspect.md, "What it takes"). Why a module apart from
proofs/cli/inspect.py: every part of inspect (inspect_dir.py, inspect_log.py, inspect_files.py,
inspect_journal.py) reads through it. The engine's readers take a FileSystem; inspect hands
them :class:`ReadOnlyFs`, which opens files read-only, refuses every write, turns fsyncs into
no-ops and opens nothing but regular files, so inspect never changes a bookie and never hangs
on a FIFO or a device named like a bookie file.
"""

from __future__ import annotations

import os
import stat

from impl.fs.api import DirLock, DiskSpace, FileHandle, FileSystem, split
from spec.errors import FsError, FsIOError, FsNotFound

#: The most bytes read of a small text file (lastId, instanceId, a cookie).
TEXT_FILE_MAX_BYTES = 64 * 1024


def file_type(mode: int) -> str:
    """What ``lstat`` says a name is, in words."""
    for test, name in (
        (stat.S_ISREG, "file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "char device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return name
    return "other"


def not_regular(path: str) -> str | None:
    """Why ``path`` must not be opened (not a regular file, following a link given as the
    path), or None. A FIFO would block the open; a device could be anything."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"cannot be examined: {exc.strerror or exc}"
    except ValueError as exc:
        return f"not a usable path: {exc}"
    if stat.S_ISREG(mode):
        return None
    return f"a {file_type(mode)}, not a regular file: never opened"


class _ReadOnlyHandle:
    """A FileHandle that reads and refuses to write; fsyncs do nothing (nothing was written)."""

    def __init__(self, inner: FileHandle) -> None:
        self._inner = inner

    @property
    def path(self) -> str:
        return self._inner.path

    def pwrite(self, offset: int, data: bytes) -> None:
        raise FsIOError(self.path, "write (bkref inspect never writes)")

    def append(self, data: bytes) -> int:
        raise FsIOError(self.path, "append (bkref inspect never writes)")

    def pread(self, offset: int, length: int) -> bytes:
        return self._inner.pread(offset, length)

    def size(self) -> int:
        return self._inner.size()

    def truncate(self, length: int) -> None:
        raise FsIOError(self.path, "truncate (bkref inspect never writes)")

    def fsync(self) -> None:
        return None

    def fdatasync(self) -> None:
        return None

    def close(self) -> None:
        self._inner.close()


class ReadOnlyFs:
    """The engine's FileSystem seam for inspect: reads through ``inner``, opens only regular
    files (read-only), refuses every change, and makes fsyncs no-ops, so that the engine's own
    readers (journal replay, the index load, which fsyncs what it found) can describe a bookie
    without touching it. ``only`` hides every name of a directory but the given ones (to
    replay one journal file by itself)."""

    def __init__(self, inner: FileSystem, only: dict[str, set[str]] | None = None) -> None:
        self._inner = inner
        self._only = only or {}

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> FileHandle:
        if create:
            raise FsIOError(path, "create (bkref inspect never writes)")
        if not self.exists(path):
            raise FsNotFound(path)
        reason = not_regular(path)
        if reason is not None:
            raise FsError(path, reason)
        return _ReadOnlyHandle(self._inner.open(path, read_only=True))

    def exists(self, path: str) -> bool:
        head, name = split(path)
        if head in self._only and name not in self._only[head]:
            return False
        return self._inner.exists(path)

    def is_dir(self, path: str) -> bool:
        return self._inner.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        names = self._inner.listdir(path)
        if path in self._only:
            names = [name for name in names if name in self._only[path]]
        return names

    def mkdir(self, path: str) -> None:
        raise FsIOError(path, "mkdir (bkref inspect never writes)")

    def rename(self, src: str, dst: str) -> None:
        raise FsIOError(src, "rename (bkref inspect never writes)")

    def link(self, src: str, dst: str) -> None:
        raise FsIOError(dst, "link (bkref inspect never writes)")

    def unlink(self, path: str) -> None:
        raise FsIOError(path, "unlink (bkref inspect never writes)")

    def fsync_dir(self, path: str) -> None:
        return None

    def disk_space(self, path: str) -> DiskSpace:
        return self._inner.disk_space(path)

    def lock_dir(self, path: str) -> DirLock:
        raise FsIOError(path, "lock (bkref inspect never locks: a running bookie holds it)")


def read_small(fs: FileSystem, path: str, limit: int = TEXT_FILE_MAX_BYTES) -> bytes:
    """The first ``limit`` bytes of a regular file (FsError when it cannot be read)."""
    handle = ReadOnlyFs(fs).open(path, read_only=True)
    try:
        return handle.pread(0, min(limit, handle.size()))
    finally:
        handle.close()
