"""The FileSystem protocol (docs/design.md, "The IO seam and the crash model").

Every durable byte the engine writes goes through this protocol. Two implementations:
impl.fs.os_backend.OsFileSystem (real files) and models.fs.simdisk.SimDisk (deterministic,
in memory, crashable). They raise the same typed errors from spec.errors.

Durability contract, which the simulated disk enforces and the OS gives at best:
- data written through a handle is durable only after ``fsync``/``fdatasync`` of that file;
- a name created, renamed, linked or unlinked in a directory is durable only after
  ``fsync_dir`` of that directory (for a rename, of both directories);
- a failed ``fsync`` (FsIOError) loses the file's unsynced data: reads may show it again
  (btrfs) or keep showing it although it will never reach the disk (ext4, XFS); either way a
  later successful fsync does not bring it back;
- a write that raises FsNoSpace changed nothing (the OS backend undoes a partial write); one
  that raises FsIOError may have written part of its data.

Paths are ``/``-separated strings. Handles follow the file (inode), not the name: after a
rename or an unlink an open handle still reads and writes the same file.
"""

from __future__ import annotations

from typing import Protocol

from spec.fs import DiskSpace as DiskSpace  # re-exported: the protocol returns it


class FileHandle(Protocol):
    """An open file. Offsets are absolute; there is no implicit file position."""

    @property
    def path(self) -> str:
        """The name the file was opened by (kept for messages; the file may be renamed)."""
        ...

    def pwrite(self, offset: int, data: bytes) -> None:
        """Write all of ``data`` at ``offset``, extending the file with zeros if needed."""
        ...

    def append(self, data: bytes) -> int:
        """Write ``data`` at the current end of the file; return the offset it landed at."""
        ...

    def pread(self, offset: int, length: int) -> bytes:
        """Read up to ``length`` bytes at ``offset``; shorter only at the end of the file."""
        ...

    def size(self) -> int:
        """The current size of the file in bytes (written, not necessarily durable)."""
        ...

    def truncate(self, length: int) -> None:
        """Cut or extend (with zeros) the file to ``length`` bytes."""
        ...

    def fsync(self) -> None:
        """Make the file's data and size durable."""
        ...

    def fdatasync(self) -> None:
        """Make the file's data durable (treated as fsync by the simulated disk)."""
        ...

    def close(self) -> None:
        """Release the handle. Closing does not make anything durable."""
        ...


class DirLock(Protocol):
    """An exclusive lock on a directory, held until ``release`` or until the process dies
    (a crash drops it: nothing of it is on the disk)."""

    def release(self) -> None:
        """Give the lock up. Idempotent; a no-op after a crash already dropped it."""
        ...


class FileSystem(Protocol):
    """Directory and file operations, with the durability contract in the module docstring."""

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> FileHandle:
        """Open a file for reading and writing. ``create`` makes it if missing; ``exclusive``
        with ``create`` fails with FsExists if the name is taken. Raises FsNotFound.
        ``read_only`` (not with ``create``) opens for reading only, so files the process may
        not write (an operator inspecting a bookie it does not own) can still be read; a
        write through such a handle raises FsIOError and changes nothing. A name that is not
        a regular file (a FIFO, a socket, a device) raises FsNotAFile at once, never blocks
        (only the OS backend has such files)."""
        ...

    def exists(self, path: str) -> bool:
        """Whether a file or directory of that name exists now."""
        ...

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is an existing directory."""
        ...

    def listdir(self, path: str) -> list[str]:
        """The names in a directory, sorted. Raises FsNotFound or FsNotADirectory."""
        ...

    def mkdir(self, path: str) -> None:
        """Create a directory and any missing parents; no error if it exists. Each new name
        is durable only after an fsync of its parent directory."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Atomically rename ``src`` to ``dst``, replacing ``dst`` if it exists."""
        ...

    def link(self, src: str, dst: str) -> None:
        """Hard-link ``dst`` to the file ``src``. Raises FsExists if ``dst`` exists."""
        ...

    def unlink(self, path: str) -> None:
        """Remove a file name. Raises FsNotFound."""
        ...

    def fsync_dir(self, path: str) -> None:
        """Make the directory's entries durable (names created, renamed, linked, unlinked)."""
        ...

    def disk_space(self, path: str) -> DiskSpace:
        """Free and total bytes for the directory ``path``."""
        ...

    def lock_dir(self, path: str) -> DirLock:
        """Take the exclusive lock of the existing directory ``path``, without waiting.
        Raises FsLocked when another holder has it (another process, or another lock taken
        in this process: two bookies of one process exclude each other too), FsNotFound or
        FsNotADirectory. The lock writes nothing to the disk and is not durable: it lasts
        while the holder lives and a crash drops it (impl/bookie/identity.py says why a
        directory lock and not a lock file)."""
        ...


def split(path: str) -> tuple[str, str]:
    """Split ``a/b/c`` into (``a/b``, ``c``). Pure string work, no normalisation of ``..``."""
    head, _, tail = path.rstrip("/").rpartition("/")
    if not head and path.startswith("/"):
        head = "/"
    return head, tail


def parent(path: str) -> str:
    """The directory part of ``path``."""
    return split(path)[0]


def join(*parts: str) -> str:
    """Join path parts with ``/``."""
    out = ""
    for part in parts:
        if not out:
            out = part
        elif out.endswith("/"):
            out = out + part.lstrip("/")
        else:
            out = out + "/" + part.lstrip("/")
    return out
