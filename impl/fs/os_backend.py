"""The OS backend of the FileSystem seam: real files through ``os``.

This module and the explicit seams are the only places in impl/ allowed to use ``os`` and
``open`` (tests/unit/test_layering.py keeps it so). Errors are mapped to spec.errors so the
engine handles the OS and the simulated disk alike.

A write that meets ENOSPC (or EDQUOT) raises FsNoSpace only once the file is as it was
before the write, as the seam promises (spec.errors.FsNoSpace: nothing of the write was
applied); the kernel may have written part of it first (a short write, then ENOSPC). The part
past the old end is cut off again; for the part that overwrote bytes in place, those bytes
were read before the write and are written back (overwriting needs no new blocks on ext4 or
XFS; on a copy-on-write file system it may, and then the restore can fail too). If the
restore fails, the write raises FsIOError instead: the file may hold part of it. The engine
treats FsIOError from a write as "state unknown" (the journal fails, an entry log's write
is not accepted), so the weaker answer is always safe.

Not verified here: what the kernel and the device really make durable. The simulated disk
(models/fs/simdisk.py) is the strict model the engine is checked against.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable
from typing import TypeVar

from impl.fs.api import DiskSpace
from spec.errors import (
    FsClosed,
    FsError,
    FsExists,
    FsIOError,
    FsLocked,
    FsNoSpace,
    FsNotADirectory,
    FsNotAFile,
    FsNotFound,
)

T = TypeVar("T")


def _file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    kinds = (
        (stat.S_ISFIFO, "FIFO (named pipe)"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "directory"),
    )
    return next((word for test, word in kinds if test(mode)), "special file")


def _mapped(path: str, op: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except OSError as exc:
        raise _map_error(path, op, exc) from exc


def _map_error(path: str, op: str, exc: OSError) -> FsError:
    code = exc.errno
    if code == errno.ENXIO and op == "open":  # a socket, or a device with nothing behind it
        return FsNotAFile(path, "socket or device")
    if code == errno.ENOENT:
        return FsNotFound(path)
    if code == errno.EEXIST:
        return FsExists(path)
    if code == errno.ENOTDIR:
        return FsNotADirectory(path)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return FsNoSpace(path)
    if code == errno.EBADF:
        return FsClosed(path)
    return FsIOError(path, f"{op} ({exc.strerror})")


def _bind_pwrite(fd: int, view: memoryview, offset: int) -> Callable[[], int]:
    """One pwrite call with its arguments bound now (not when a loop variable changes)."""
    return lambda: os.pwrite(fd, view, offset)


def _bind_pread(fd: int, length: int, offset: int) -> Callable[[], bytes]:
    """One pread call with its arguments bound now."""
    return lambda: os.pread(fd, length, offset)


class OsFileHandle:
    """A file descriptor opened read-write."""

    def __init__(self, path: str, fd: int, *, read_only: bool = False) -> None:
        self._path = path
        self._fd: int | None = fd
        self._read_only = read_only

    @property
    def path(self) -> str:
        return self._path

    def _live_fd(self) -> int:
        if self._fd is None:
            raise FsClosed(self._path)
        return self._fd

    def _writable_fd(self, op: str) -> int:
        fd = self._live_fd()
        if self._read_only:
            raise FsIOError(self._path, f"{op} (the file was opened read-only)")
        return fd

    def pwrite(self, offset: int, data: bytes) -> None:
        fd = self._writable_fd("write")
        if data:
            self._write_all(fd, offset, data, self.size())

    def append(self, data: bytes) -> int:
        fd = self._writable_fd("write")
        offset = self.size()
        if data:
            self._write_all(fd, offset, data, offset)
        return offset

    def _write_all(self, fd: int, offset: int, data: bytes, old_size: int) -> None:
        """Write all of ``data`` at ``offset``; on ENOSPC put the file back as it was (module
        docstring). ``old_size`` is the file's size before the write."""
        overwritten = b""
        if offset < old_size:
            overwritten = self.pread(offset, min(len(data), old_size - offset))
        view = memoryview(data)
        at = offset
        try:
            while view:
                written = _mapped(self._path, "write", _bind_pwrite(fd, view, at))
                view = view[written:]
                at += written
        except FsNoSpace:
            if at > offset:
                self._restore(fd, offset, overwritten[: at - offset], old_size)
            raise

    def _restore(self, fd: int, offset: int, overwritten: bytes, old_size: int) -> None:
        """Cut what the write added past ``old_size`` and write back the bytes it replaced."""
        try:
            os.ftruncate(fd, old_size)
            view = memoryview(overwritten)
            while view:
                written = os.pwrite(fd, view, offset)
                view = view[written:]
                offset += written
        except OSError as exc:
            raise FsIOError(
                self._path,
                f"write (no space left, and part of the write could not be undone: {exc.strerror})",
            ) from exc

    def pread(self, offset: int, length: int) -> bytes:
        fd = self._live_fd()
        if length < 0:
            raise FsIOError(self._path, "read (negative length)")
        chunks: list[bytes] = []
        while length > 0:
            chunk = _mapped(self._path, "read", _bind_pread(fd, length, offset))
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            length -= len(chunk)
        return b"".join(chunks)

    def size(self) -> int:
        fd = self._live_fd()
        return _mapped(self._path, "stat", lambda: os.fstat(fd).st_size)

    def truncate(self, length: int) -> None:
        fd = self._writable_fd("truncate")
        _mapped(self._path, "truncate", lambda: os.ftruncate(fd, length))

    def fsync(self) -> None:
        fd = self._live_fd()
        _mapped(self._path, "fsync", lambda: os.fsync(fd))

    def fdatasync(self) -> None:
        fd = self._live_fd()
        _mapped(self._path, "fdatasync", lambda: os.fdatasync(fd))

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            _mapped(self._path, "close", lambda: os.close(fd))


class OsFileSystem:
    """Real files. ``root`` is prefixed to relative paths (absolute paths are used as is)."""

    def __init__(self, root: str = "") -> None:
        self._root = root

    def _real(self, path: str) -> str:
        if self._root and not path.startswith("/"):
            return os.path.join(self._root, path)
        return path

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> OsFileHandle:
        assert not (read_only and create), "a read-only open cannot create"
        mode = os.O_RDONLY if read_only else os.O_RDWR
        flags = mode | getattr(os, "O_CLOEXEC", 0)
        if create:
            flags |= os.O_CREAT
            if exclusive:
                flags |= os.O_EXCL
        real = self._real(path)
        if os.path.isdir(real):
            raise FsIOError(path, "open (is a directory)")
        # O_NONBLOCK: opening a FIFO for reading blocks until a writer comes (and reading it
        # later would too); with it the open returns at once and fstat tells what it is.
        fd = _mapped(path, "open", lambda: os.open(real, flags | os.O_NONBLOCK, 0o644))
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise FsNotAFile(path, _file_kind(mode))
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return OsFileHandle(path, fd, read_only=read_only)

    def exists(self, path: str) -> bool:
        return os.path.lexists(self._real(path))

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self._real(path))

    def listdir(self, path: str) -> list[str]:
        return sorted(_mapped(path, "listdir", lambda: os.listdir(self._real(path))))

    def mkdir(self, path: str) -> None:
        real = self._real(path)
        if os.path.exists(real) and not os.path.isdir(real):
            raise FsNotADirectory(path)
        _mapped(path, "mkdir", lambda: os.makedirs(real, exist_ok=True))

    def rename(self, src: str, dst: str) -> None:
        _mapped(src, "rename", lambda: os.rename(self._real(src), self._real(dst)))

    def link(self, src: str, dst: str) -> None:
        _mapped(dst, "link", lambda: os.link(self._real(src), self._real(dst)))

    def unlink(self, path: str) -> None:
        _mapped(path, "unlink", lambda: os.unlink(self._real(path)))

    def fsync_dir(self, path: str) -> None:
        real = self._real(path)
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
        fd = _mapped(path, "open directory", lambda: os.open(real, flags))
        try:
            _mapped(path, "fsync directory", lambda: os.fsync(fd))
        finally:
            os.close(fd)

    def disk_space(self, path: str) -> DiskSpace:
        st = _mapped(path, "statvfs", lambda: os.statvfs(self._real(path)))
        return DiskSpace(
            free_bytes=st.f_bavail * st.f_frsize, total_bytes=st.f_blocks * st.f_frsize
        )

    def lock_dir(self, path: str) -> OsDirLock:
        """``flock(LOCK_EX | LOCK_NB)`` on the directory itself, opened read-only: nothing is
        created in it, so a BookKeeper directory stays untouched, and nothing is left behind
        by a crash (the kernel drops a dead process's flocks). flock locks belong to the open
        file description, so a second lock in the same process conflicts as well."""
        real = self._real(path)
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = _mapped(path, "open directory", lambda: os.open(real, flags))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise FsLocked(path) from exc
        except OSError as exc:
            os.close(fd)
            raise _map_error(path, "lock directory", exc) from exc
        return OsDirLock(fd)


class OsDirLock:
    """A held flock: the open directory descriptor (closing it releases the lock)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
