"""lastMark: how far the journal is covered by durable ledger storage (Journal.LastLogMark).

Spec page: spec/format/journal.md, "The lastMark file". Sixteen bytes, int64 journal id and
int64 offset, in a file ``lastMark`` in every ledger directory (``<ledger dir>/current``).
At start the largest mark over all directories wins; replay starts there.

Why the write differs from BookKeeper's: BookKeeper truncates and rewrites ``lastMark`` in
place, so a crash between the truncate and the write leaves an empty file, which reads as
"no mark" in that directory. bkref writes ``lastMark.tmp``, fsyncs it, renames it over
``lastMark`` and fsyncs the directory: after a crash each directory holds the old mark or the
new one, never less (the page argues it). BookKeeper reads the result unchanged.

Not verified: that a directory holding a larger mark than the caller's (written by another
process) is not overwritten by a smaller one; ``write_last_mark`` asserts against what it
reads, which is a check of the caller, not a lock.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import attrs

from impl.format.journal import LAST_MARK_SIZE
from impl.format.names import LAST_MARK_FILE_NAME, journal_file_name, tmp_file_name
from impl.fs.api import FileSystem, join
from spec.errors import FsError, FsNotFound
from spec.ids import INT64_MAX

_MARK = struct.Struct(">qq")


def _non_negative(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not 0 <= value <= INT64_MAX:
        raise ValueError(f"{attribute.name} must be in [0, 2**63), got {value}")


@attrs.frozen
class LogMark:
    """A position in the journal stream: journal id, then offset in that journal.

    Ordered as LogMark.compare orders it (id first). ``LogMark(0, 0)`` means "nothing":
    replay then reads every journal from its first record. (The order is written out rather
    than attrs' ``order=True``, which builds two tuples through generic code per comparison:
    the bookie's invariants compare marks after every step of the checks.)
    """

    journal_id: int = attrs.field(validator=_non_negative)
    offset: int = attrs.field(validator=_non_negative)

    def __lt__(self, other: LogMark) -> bool:
        if other.__class__ is not LogMark:
            return NotImplemented
        return (self.journal_id, self.offset) < (other.journal_id, other.offset)

    def __le__(self, other: LogMark) -> bool:
        if other.__class__ is not LogMark:
            return NotImplemented
        return (self.journal_id, self.offset) <= (other.journal_id, other.offset)

    def __gt__(self, other: LogMark) -> bool:
        if other.__class__ is not LogMark:
            return NotImplemented
        return (self.journal_id, self.offset) > (other.journal_id, other.offset)

    def __ge__(self, other: LogMark) -> bool:
        if other.__class__ is not LogMark:
            return NotImplemented
        return (self.journal_id, self.offset) >= (other.journal_id, other.offset)

    def __str__(self) -> str:
        return f"(journal {journal_file_name(self.journal_id)}, offset {self.offset})"


NO_MARK = LogMark(0, 0)


@attrs.frozen
class DirMark:
    """What one directory's lastMark file says: a mark, or None and why not."""

    directory: str
    mark: LogMark | None
    reason: str = ""


def encode_last_mark(mark: LogMark) -> bytes:
    """The 16 bytes of a lastMark file."""
    data = _MARK.pack(mark.journal_id, mark.offset)
    assert len(data) == LAST_MARK_SIZE
    return data


def decode_last_mark(data: bytes) -> LogMark:
    """The mark in the first 16 bytes of a lastMark file (later bytes are ignored, as
    BookKeeper reads only 16). Raises ValueError for a short file or a negative field."""
    if len(data) < LAST_MARK_SIZE:
        raise ValueError(f"{len(data)} bytes, a lastMark holds {LAST_MARK_SIZE}")
    journal_id, offset = _MARK.unpack_from(data, 0)
    if journal_id < 0 or offset < 0:
        raise ValueError(f"negative field: journal id {journal_id}, offset {offset}")
    return LogMark(journal_id, offset)


def read_dir_mark(fs: FileSystem, directory: str, file_name: str = LAST_MARK_FILE_NAME) -> DirMark:
    """The lastMark of one directory. A missing, short or garbage file gives no mark and a
    reason (BookKeeper logs it and treats the directory as holding (0, 0))."""
    path = join(directory, file_name)
    try:
        handle = fs.open(path, read_only=True)
    except FsNotFound:
        return DirMark(directory, None, f"{path} does not exist (normal on a first start)")
    except FsError as exc:
        return DirMark(directory, None, f"{path} cannot be opened: {exc}")
    try:
        data = handle.pread(0, LAST_MARK_SIZE)
    except FsError as exc:
        return DirMark(directory, None, f"{path} cannot be read: {exc}")
    finally:
        handle.close()
    try:
        return DirMark(directory, decode_last_mark(data))
    except ValueError as exc:
        return DirMark(directory, None, f"{path} is not a lastMark: {exc}")


def read_last_marks(
    fs: FileSystem, ledger_dirs: Sequence[str], file_name: str = LAST_MARK_FILE_NAME
) -> list[DirMark]:
    """What every ledger directory's lastMark says, in the order given."""
    return [read_dir_mark(fs, directory, file_name) for directory in ledger_dirs]


def largest_mark(marks: Sequence[DirMark]) -> LogMark:
    """The largest mark found, or NO_MARK (Journal.LastLogMark.readLog)."""
    found = [dir_mark.mark for dir_mark in marks if dir_mark.mark is not None]
    return max(found, default=NO_MARK)


def read_last_mark(
    fs: FileSystem, ledger_dirs: Sequence[str], file_name: str = LAST_MARK_FILE_NAME
) -> LogMark:
    """The largest lastMark over ``ledger_dirs``; NO_MARK when none is readable."""
    return largest_mark(read_last_marks(fs, ledger_dirs, file_name))


def write_last_mark(
    fs: FileSystem, ledger_dirs: Sequence[str], mark: LogMark, file_name: str = LAST_MARK_FILE_NAME
) -> None:
    """Persist ``mark`` in every directory of ``ledger_dirs``; durable on return.

    Asserts that the mark does not move backwards against any mark already there
    (BookKeeper issue #4740). FsError propagates: the caller must not trim journals then.
    """
    assert ledger_dirs, "write_last_mark needs at least one ledger directory"
    previous = read_last_mark(fs, ledger_dirs, file_name)
    assert mark >= previous, f"lastMark would move backwards from {previous} to {mark}"
    for directory in ledger_dirs:
        _write_one(fs, directory, file_name, mark)


def _write_one(fs: FileSystem, directory: str, file_name: str, mark: LogMark) -> None:
    """tmp, fsync, rename, fsync the directory; then read back and compare."""
    path = join(directory, file_name)
    tmp = join(directory, tmp_file_name(file_name))
    if fs.exists(tmp):
        fs.unlink(tmp)  # a leftover of a crash; nobody reads it
    handle = fs.open(tmp, create=True, exclusive=True)
    try:
        handle.pwrite(0, encode_last_mark(mark))
        handle.fsync()
    finally:
        handle.close()
    fs.rename(tmp, path)
    fs.fsync_dir(directory)
    written = read_dir_mark(fs, directory, file_name)
    assert written.mark == mark, (written, mark)
