"""Room kept free in every bookie directory, for the writes that get a full disk back into
service.

Spec page: spec/format/identity.md ("A full disk"). Issue 26, item 3: a ledger directory
that the bookie's own entry logs filled to the byte (adds faster than the disk check) could
not be helped. `bkref dirs accept` must write a new identity stamp into every directory
(``bkref-identity.tmp`` first), and a start must write lastMark and the index into it, and
neither had one byte. So every journal and ledger directory keeps ``bkref-reserve``
(``Limits.dir_reserve_bytes`` of zeros, written and fsynced, never sparse): a write of the
bookie's own small files that finds no room frees it and tries once more
(:func:`with_reserve`). A start writes it again once the directory has room.

Why a file of zeros rather than a margin in the disk check: the entry logs fill a disk
between two disk checks (diskCheckInterval), so a margin is crossed as the threshold is; a
file the bookie alone may delete is room nobody else can take.

Not verified here: a file system that allocates blocks lazily on write (a zero-filled file
then holds blocks, which is what is wanted; a compressing file system may hold fewer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from impl.format.names import CURRENT_DIR, RESERVE_FILE_NAME
from impl.fs.api import FileSystem, join
from spec.errors import BookieError, FsError, FsNoSpace

T = TypeVar("T")

#: Bytes written per call while the reserve is laid down.
_CHUNK_BYTES = 64 * 1024


def reserve_path(directory: str) -> str:
    """Where a configured directory keeps its reserve (in its ``current/``)."""
    return join(directory, CURRENT_DIR, RESERVE_FILE_NAME)


def ensure_reserve(fs: FileSystem, directory: str, size: int) -> bool:
    """Lay down the reserve of a configured directory when it is missing or short, written
    and fsynced. False when the directory has no room for it now (nothing is left half
    written that matters: a short reserve is completed at a later start). Raises FsError
    other than FsNoSpace."""
    path = reserve_path(directory)
    created = not fs.exists(path)
    try:
        handle = fs.open(path, create=True)
        try:
            have = handle.size()
            if have >= size:
                return True
            while have < size:
                chunk = min(_CHUNK_BYTES, size - have)
                handle.pwrite(have, bytes(chunk))
                have += chunk
            handle.fsync()
        finally:
            handle.close()
        if created:
            fs.fsync_dir(join(directory, CURRENT_DIR))
    except FsNoSpace:
        return False
    return True


def release_reserve(fs: FileSystem, current_dir: str) -> bool:
    """Free the reserve of a directory's ``current/`` (``current_dir``): True when there was
    one to free."""
    path = join(current_dir, RESERVE_FILE_NAME)
    if not fs.exists(path):
        return False
    fs.unlink(path)
    fs.fsync_dir(current_dir)
    return True


def no_room(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised for, a write that found no room (FsNoSpace)."""
    return isinstance(exc, FsNoSpace) or isinstance(exc.__cause__, FsNoSpace)


def with_reserve(fs: FileSystem, current_dirs: list[str], action: Callable[[], T]) -> T:
    """``action()``; when it finds no room (``no_room``: the journal wraps FsNoSpace in a
    BookieIOError), free the reserves of ``current_dirs`` (the ``current/`` directories it
    writes in) and run it once more. No room again, or any other error, propagates."""
    try:
        return action()
    except (FsError, BookieError) as exc:
        if not no_room(exc):
            raise
        released = False
        for current in current_dirs:
            try:
                released = release_reserve(fs, current) or released
            except FsError:
                continue
        if not released:
            raise
    return action()
