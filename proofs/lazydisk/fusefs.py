"""The lazy disk's file system: FUSE requests served by a simulated disk.

Spec pages: spec/crash.py (the crash plans), docs/conformance.md "Lazy disk"; the disk's
rules are models/fs/simdisk.py's docstring.

Why it is shaped so: the conformance kit (proofs/conform) must give an external bookie,
written in any language, the same power-loss semantics the crash explorer gives bkref's
engine in process. So the bookie's data directory is a FUSE mount whose every request is one
call on a ``SimDisk``: what the bookie did not fsync stays *pending* there, and at a power
loss ``SimDisk.crash(plan)`` keeps of it exactly what the drawn plan says, as LazyFS does for
real file systems. One request is one SimDisk operation (one pending entry at most), so a
plan's indices mean the same thing for a bookie on the mount as for a program calling the
disk directly (tests/unit/proofs/lazydisk/test_differential.py holds the two equal):

- ``open`` with O_TRUNC of an existing file is one ``truncate(0)`` (libfuse 3 asks the kernel
  for atomic O_TRUNC, so no separate setattr comes); a create is one ``create``;
- ``write`` is one ``pwrite`` (an O_APPEND write arrives with its offset already at the end);
  the kernel cuts a write(2) larger than ``MAX_WRITE`` bytes (less a page when the buffer is
  not page aligned) into several requests, which become several pending writes in order:
  a real disk may tear such a write at those points too;
- ``truncate``/``ftruncate`` is one truncate, and so is a ``fallocate`` that extends the
  file; ``fsync``/``fdatasync`` one fsync/fdatasync, ``fsync`` of a directory one
  ``fsync_dir``, ``mkdir`` one mkdir (the kernel has checked the parent exists),
  ``rename``, ``link`` and ``unlink`` one each.

Every other request (getattr, lookup, readdir, read, statfs, flush, release, chmod, chown,
utimens) changes nothing pending. Timestamps and modes are not modelled: getattr reports fixed
ones and chmod/chown/utimens succeed doing nothing. flock and POSIX record locks are not
implemented here on purpose: the kernel then keeps them itself, per mount, which is what a
bookie's directory lock (impl/bookie/directories.py) needs.

Refused: ``rmdir`` (EPERM: the simulated disk has no rmdir, and no bookie we drive removes a
directory; adding it would need a pending operation kind the crash explorer knows), symlinks
and special files (ENOSYS from libfuse), fallocate modes other than 0 and KEEP_SIZE
(EOPNOTSUPP), renameat2 flags (EINVAL), shared mmap (ENODEV from the kernel: files are
direct_io; private mmap works). ``fstat`` of a file unlinked while open fails with ESTALE
(libfuse's path-based API has no path for it and the kernel sends no handle with fstat);
reads, writes, fsync and close of it work.

Kernel caches: every file is opened ``direct_io`` (reads and writes go to this process, not
the page cache) and attribute, entry and negative timeouts are 0, because libfuse's high-level
API gives each name of a hard-linked file its own kernel inode: a cache kept per name would go
stale when the file changes through its other name. A power loss also remounts
(proofs/lazydisk/mount.py), so nothing cached before it survives.

Differences from LazyFS: LazyFS keeps a page cache in front of a real file system and drops
its unsynced pages; here the whole file system is simulated, with the directory-entry
durability rules of SimDisk (a new name needs an fsync of its directory), which are stricter
than ext4's in one respect the SimDisk docstring names.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import mfusepy

from models.fs.simdisk import SimDisk, SimHandle, SimStat
from spec.errors import (
    FsClosed,
    FsError,
    FsExists,
    FsIOError,
    FsLocked,
    FsNoSpace,
    FsNotADirectory,
    FsNotFound,
)

log = logging.getLogger(__name__)

#: The largest write request the kernel sends (libfuse derives max_pages from it; the kernel
#: caps it at 256 pages): a write(2) up to this size less a page is one pending write.
MAX_WRITE: Final = 1 << 20
#: What statfs reports: the simulated disk's own total (1 TiB), in 4 KiB blocks.
BLOCK_BYTES: Final = 4096
#: fallocate's FALLOC_FL_KEEP_SIZE (linux/falloc.h).
FALLOC_KEEP_SIZE: Final = 1
#: Inode numbers: SimDisk's root is inode 0, which some programs take for "no inode".
INODE_BASE: Final = 1

_T = TypeVar("_T")
#: How long an fsync waits at a barrier nobody takes down (a runner that died) before it fails.
BARRIER_TIMEOUT_S = 10.0


class FsyncBarrier:
    """Where fsyncs wait while a runner places a power loss in the middle of one (the moment
    a bookie has written a group and asked for it to be made durable: torn records live
    there). ``release(fail=True)`` fails the fsyncs waiting (their process was killed);
    ``release(fail=False)`` lets them go on."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.fail = False

    def release(self, *, fail: bool) -> None:
        self.fail = fail
        self.opened.set()


#: An FsIOError's ``op`` names the reason in parentheses; these are the OS's errno for them.
_IO_REASONS: Final = (
    ("is a directory", errno.EISDIR),
    ("not empty", errno.ENOTEMPTY),
    ("into itself", errno.EINVAL),
    ("not permitted", errno.EPERM),
    ("invalid argument", errno.EINVAL),
    ("busy", errno.EBUSY),
    ("read-only", errno.EBADF),
)


def errno_of(error: FsError) -> int:
    """The errno a POSIX file system gives for what the simulated disk raised."""
    if isinstance(error, FsNotFound):
        return errno.ENOENT
    if isinstance(error, FsExists):
        return errno.EEXIST
    if isinstance(error, FsNotADirectory):
        return errno.ENOTDIR
    if isinstance(error, FsNoSpace):
        return errno.ENOSPC
    if isinstance(error, FsClosed):
        return errno.EBADF
    if isinstance(error, FsLocked):
        return errno.EWOULDBLOCK
    if isinstance(error, FsIOError):
        for reason, code in _IO_REASONS:
            if reason in error.op:
                return code
    return errno.EIO


class LazyDiskOperations(mfusepy.Operations):  # type: ignore[misc]
    """The mfusepy operations over one SimDisk, serialised by one lock.

    The mutex (not named ``lock``: mfusepy takes every attribute named as a FUSE operation
    for one) makes each request atomic against the others and against ``LazyDisk``'s crash
    and kill (which take it too): libfuse may run requests on several threads. Handles live
    in ``_files`` (an fh number per open file) and ``_dirs`` (per open directory: fsyncdir
    arrives with the directory's current path).
    """

    use_ns = True
    #: libfuse's ``nullpath_ok`` stays off: requests on open files and directories carry
    #: their current path when there is one (fsyncdir and readdir need it), and no path for
    #: a file unlinked while open; every file operation here works by handle anyway.
    flag_nopath = False
    flag_nullpath_ok = False

    def __init__(self, disk: SimDisk) -> None:
        self.disk = disk
        self.mutex = threading.Lock()
        #: The fsync barrier (LazyDisk.hold_fsyncs): while up, an fsync waits at it before
        #: it is carried out, and ``fsync_waiting`` says one came.
        self.fsync_barrier: FsyncBarrier | None = None
        self.fsync_waiting = threading.Event()
        #: Set by an unmount that found the mount busy: the next request ends the loop.
        self.exit_requested = False
        self._files: dict[int, SimHandle] = {}
        self._dirs: dict[int, str] = {}
        self._next_fh = 1
        self._started_ns = time.time_ns()
        #: fsync, fdatasync and fsyncdir requests served (failed ones included).
        self.fsyncs = 0
        #: Every request served, by name (a cheap trace for tests and benchmarks).
        self.requests: dict[str, int] = {}

    # --- plumbing ----------------------------------------------------------------------------

    def _call(self, name: str, action: Callable[[], _T]) -> _T:
        if self.exit_requested:
            mfusepy.fuse_exit()
            raise mfusepy.FuseOSError(errno.ENOTCONN)
        with self.mutex:
            self.requests[name] = self.requests.get(name, 0) + 1
            try:
                return action()
            except FsError as error:
                raise mfusepy.FuseOSError(errno_of(error)) from error

    def _new_fh(self) -> int:
        fh = self._next_fh
        self._next_fh += 1
        return fh

    def _handle(self, fh: int | None) -> SimHandle:
        handle = None if fh is None else self._files.get(fh)
        if handle is None:
            raise mfusepy.FuseOSError(errno.EBADF)
        return handle

    def open_files(self) -> int:
        """Open file handles (the caller holds ``mutex``)."""
        return len(self._files)

    def forget_handles(self) -> None:
        """Drop every open file and directory (the caller holds ``mutex``): after a crash or
        a process kill the disk's handles are invalid; late releases find nothing."""
        self._files.clear()
        self._dirs.clear()

    def _attrs(self, info: SimStat) -> dict[str, Any]:
        mode = (stat.S_IFDIR | 0o755) if info.is_dir else (stat.S_IFREG | 0o644)
        return {
            "st_mode": mode,
            "st_ino": info.inode + INODE_BASE,
            "st_nlink": info.links,
            "st_size": info.size,
            "st_blocks": (info.size + 511) // 512,
            "st_blksize": BLOCK_BYTES,
            "st_uid": os.getuid(),
            "st_gid": os.getgid(),
            "st_atime": self._started_ns,
            "st_mtime": self._started_ns,
            "st_ctime": self._started_ns,
        }

    # --- configuration -------------------------------------------------------------------------

    def init_with_config(self, conn: Any, config: Any) -> None:
        """Direct IO, no attribute or entry caching, unlinked files kept by inode (module
        docstring, "Kernel caches"); writes up to MAX_WRITE in one request."""
        # mfusepy copies the flags into config.nullpath_ok before this runs; nothing to undo.
        if conn is not None:
            conn.max_write = MAX_WRITE
        if config is not None:
            config.direct_io = 1
            config.kernel_cache = 0
            config.auto_cache = 0
            config.hard_remove = 1
            config.use_ino = 1
            config.readdir_ino = 1
            config.entry_timeout = 0.0
            config.attr_timeout = 0.0
            config.negative_timeout = 0.0

    # --- names ---------------------------------------------------------------------------------

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        def action() -> dict[str, Any]:
            handle = None if fh is None else self._files.get(fh)
            if handle is not None:
                return self._attrs(handle.stat())
            if path is None:
                raise mfusepy.FuseOSError(errno.EBADF)
            return self._attrs(self.disk.stat(path))

        return self._call("getattr", action)

    def readdir(self, path: str | None, fh: int) -> list[tuple[str, dict[str, int], int]]:
        """Each entry with its inode number: with ``use_ino`` a zero one would reach the
        program, and glibc's readdir skips entries whose d_ino is 0."""

        def action() -> list[tuple[str, dict[str, int], int]]:
            where = path if path is not None else self._dirs.get(fh)
            if where is None:
                raise mfusepy.FuseOSError(errno.EBADF)
            here = self.disk.stat(where)
            parent = self.disk.stat(where.rsplit("/", 1)[0] or "/")
            out = [(".", self._dirent(here), 0), ("..", self._dirent(parent), 0)]
            for name in self.disk.listdir(where):
                out.append((name, self._dirent(self.disk.stat(f"{where}/{name}")), 0))
            return out

        return self._call("readdir", action)

    def _dirent(self, info: SimStat) -> dict[str, int]:
        mode = stat.S_IFDIR if info.is_dir else stat.S_IFREG
        return {"st_ino": info.inode + INODE_BASE, "st_mode": mode}

    def mkdir(self, path: str, mode: int) -> int:
        def action() -> int:
            if self.disk.exists(path):
                raise mfusepy.FuseOSError(errno.EEXIST)
            self.disk.mkdir(path)
            return 0

        return self._call("mkdir", action)

    def rmdir(self, path: str) -> int:
        log.warning(
            "lazy disk: rmdir %s refused with EPERM: the simulated disk has no rmdir "
            "(docs/conformance.md, Lazy disk)",
            path,
        )
        raise mfusepy.FuseOSError(errno.EPERM)

    def unlink(self, path: str) -> int:
        self._call("unlink", lambda: self.disk.unlink(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        self._call("rename", lambda: self.disk.rename(old, new))
        return 0

    def link(self, target: str, source: str) -> int:
        """mfusepy's order: ``target`` is the new name, ``source`` the existing file."""
        self._call("link", lambda: self.disk.link(source, target))
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        def action() -> dict[str, int]:
            space = self.disk.disk_space("/")
            return {
                "f_bsize": BLOCK_BYTES,
                "f_frsize": BLOCK_BYTES,
                "f_blocks": space.total_bytes // BLOCK_BYTES,
                "f_bfree": space.free_bytes // BLOCK_BYTES,
                "f_bavail": space.free_bytes // BLOCK_BYTES,
                "f_files": 1 << 32,
                "f_ffree": 1 << 31,
                "f_favail": 1 << 31,
                "f_namemax": 255,
            }

        return self._call("statfs", action)

    def chmod(self, path: str | None, mode: int) -> int:
        return 0

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        return 0

    def utimens(self, path: str | None, times: Any = None) -> int:
        return 0

    # --- files ---------------------------------------------------------------------------------

    def create(self, path: str, mode: int, flags: int = os.O_RDWR) -> int:
        """O_CREAT of a name the kernel found missing: one create. O_EXCL is passed on (a
        race with another creator is then EEXIST); O_TRUNC of a file that did exist is one
        truncate, as in ``open``."""

        def action() -> int:
            existed = self.disk.exists(path)
            handle = self.disk.open(path, create=True, exclusive=bool(flags & os.O_EXCL))
            if existed and flags & os.O_TRUNC:
                handle.truncate(0)
            fh = self._new_fh()
            self._files[fh] = handle
            return fh

        return self._call("create", action)

    def open(self, path: str, flags: int) -> int:
        def action() -> int:
            read_only = flags & os.O_ACCMODE == os.O_RDONLY
            handle = self.disk.open(path, read_only=read_only and not flags & os.O_TRUNC)
            if flags & os.O_TRUNC:
                try:
                    handle.truncate(0)
                except FsError:
                    handle.close()
                    raise
            fh = self._new_fh()
            self._files[fh] = handle
            return fh

        return self._call("open", action)

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        return self._call("read", lambda: self._handle(fh).pread(offset, size))

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        def action() -> int:
            self._handle(fh).pwrite(offset, data)
            return len(data)

        return self._call("write", action)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        """ftruncate (a handle) or truncate(2) of a name: one truncate either way."""

        def action() -> None:
            handle = None if fh is None else self._files.get(fh)
            if handle is not None:
                handle.truncate(length)
                return
            if path is None:
                raise mfusepy.FuseOSError(errno.EBADF)
            temporary = self.disk.open(path)
            try:
                temporary.truncate(length)
            finally:
                temporary.close()

        self._call("truncate", action)
        return 0

    def _barrier(self) -> None:
        """Wait at the fsync barrier, if one is up (outside the mutex: the runner reads the
        pending writes meanwhile). A barrier taken down by a power loss fails the fsync: the
        process that asked is dead by then."""
        barrier = self.fsync_barrier
        if barrier is None:
            return
        self.fsync_waiting.set()
        if not barrier.opened.wait(BARRIER_TIMEOUT_S) or barrier.fail:
            raise mfusepy.FuseOSError(errno.EIO)

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        self._barrier()

        def action() -> None:
            self.fsyncs += 1
            handle = self._handle(fh)
            if datasync:
                handle.fdatasync()
            else:
                handle.fsync()

        self._call("fsync", action)
        return 0

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        """Mode 0 past the end of the file is one truncate up to ``offset + size`` (the disk
        models no holes: new bytes read as zeros either way), else nothing; KEEP_SIZE only
        reserves space, which the disk does not model: nothing. Other modes (punching holes,
        zeroing ranges) are refused with EOPNOTSUPP. Without this, glibc's posix_fallocate
        falls back to writing a byte per 4 KiB block: thousands of pending writes."""

        def action() -> None:
            handle = self._handle(fh)
            if mode == FALLOC_KEEP_SIZE:
                return
            if mode != 0:
                raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
            if offset + size > handle.size():
                handle.truncate(offset + size)

        self._call("fallocate", action)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0

    def release(self, path: str | None, fh: int) -> int:
        def action() -> None:
            handle = self._files.pop(fh, None)
            if handle is not None:
                handle.close()

        self._call("release", action)
        return 0

    # --- directories ---------------------------------------------------------------------------

    def opendir(self, path: str) -> int:
        def action() -> int:
            if not self.disk.stat(path).is_dir:
                raise mfusepy.FuseOSError(errno.ENOTDIR)
            fh = self._new_fh()
            self._dirs[fh] = path
            return fh

        return self._call("opendir", action)

    def releasedir(self, path: str | None, fh: int) -> int:
        def action() -> None:
            self._dirs.pop(fh, None)

        self._call("releasedir", action)
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        """One fsync_dir of the directory's current path (libfuse follows renames)."""
        self._barrier()

        def action() -> None:
            self.fsyncs += 1
            where = path if path is not None else self._dirs.get(fh)
            if where is None:
                raise mfusepy.FuseOSError(errno.EBADF)
            self.disk.fsync_dir(where)

        self._call("fsyncdir", action)
        return 0


class LazyDiskFUSE(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy's FUSE with two requests passed on more faithfully: a rename with renameat2
    flags (RENAME_NOREPLACE, RENAME_EXCHANGE) is refused with EINVAL (mfusepy would drop the
    flags and replace silently), and ftruncate keeps its file handle (mfusepy drops it, and
    with ``nullpath_ok`` the request has no path either)."""

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        fh = fip.contents.fh if fip else None
        name = None if path is None else path.decode(self.encoding, self.errors)
        return int(self.operations.truncate(name, length, fh))

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        if flags:
            return -errno.EINVAL
        return int(self.rename_fuse_2(old, new))
