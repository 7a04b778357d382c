"""lastMark: how far the journal is covered by durable ledger storage (Journal.LastLogMark).

Spec page: spec/format/journal.md, "The lastMark file". Sixteen bytes, int64 journal id and
int64 offset, in a file ``lastMark`` in every ledger directory (``<ledger dir>/current``).
At start the largest mark over all directories wins; replay starts there.

Why the write differs from BookKeeper's: BookKeeper truncates and rewrites ``lastMark`` in
place, so a crash between the truncate and the write leaves an empty file, which reads as
"no mark" in that directory. bkref writes ``lastMark.tmp``, fsyncs it, renames it over
``lastMark`` and fsyncs the directory: after a crash each directory holds the old mark or the
new one, never less (the page argues it). BookKeeper reads the result unchanged.

What bkref adds after the 16 bytes (BookKeeper reads only those): the *index coverage*, the
newest ledger-index segment and the number of deleted-ledgers records that were durable when
the mark was written, with a CRC (spec/format/journal.md, "The lastMark file"). A checkpoint
writes lastMark only after the index flush returned, and the file through a rename, so no
crash leaves an index older than what its lastMark records: a missing newest segment or a
shortened deleted-ledgers file is damage, and recovery refuses it (impl/bookie/recovery.py).
A file of any other size than 0, 16 or 40 bytes, or with a bad CRC or a negative field, is
damage too (``read_dir_mark`` marks it; BookKeeper would read it as "no mark").

Not verified: that a directory holding a larger mark than the caller's (written by another
process) is not overwritten by a smaller one; ``write_last_mark`` asserts against what it
reads, which is a check of the caller, not a lock.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import attrs

from impl.format.journal import LAST_MARK_SIZE
from impl.format.names import (
    COVERAGE_FILE_NAME,
    LAST_MARK_FILE_NAME,
    journal_file_name,
    tmp_file_name,
)
from impl.fs.api import FileSystem, join
from spec.errors import DamagedFile, FsError, FsNotFound
from spec.ids import INT64_MAX

_MARK = struct.Struct(">qq")
#: The index coverage after the mark: magic, newest segment seq, deleted records, then a CRC.
_COVERAGE = struct.Struct(">4sQQ")
COVERAGE_MAGIC = b"BKIC"
#: 16 bytes of mark + 4 magic + 8 seq + 8 deleted records + 4 CRC32 of the 36 bytes before it.
LAST_MARK_WITH_COVERAGE_SIZE = LAST_MARK_SIZE + _COVERAGE.size + 4
#: Read this much of a lastMark file: enough to see that a file is longer than it may be.
_READ_BYTES = LAST_MARK_WITH_COVERAGE_SIZE + 1


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
class IndexCoverage:
    """What the ledger index held, durably, when a lastMark was written: its newest segment
    (0: none) and the number of records of its deleted-ledgers file."""

    segment_seq: int = attrs.field(validator=_non_negative)
    deleted_records: int = attrs.field(validator=_non_negative)


@attrs.frozen
class DirMark:
    """What one directory's lastMark file says: a mark, or None and why not. ``damaged``: the
    file holds what no crash leaves (the reason says what); recovery refuses it."""

    directory: str
    mark: LogMark | None
    reason: str = ""
    coverage: IndexCoverage | None = None
    damaged: bool = False


def encode_last_mark(mark: LogMark, coverage: IndexCoverage | None = None) -> bytes:
    """The 16 bytes of a lastMark file, and bkref's index coverage after them if given."""
    data = _MARK.pack(mark.journal_id, mark.offset)
    assert len(data) == LAST_MARK_SIZE
    if coverage is None:
        return data
    data += _COVERAGE.pack(COVERAGE_MAGIC, coverage.segment_seq, coverage.deleted_records)
    data += struct.pack(">I", zlib.crc32(data))
    assert len(data) == LAST_MARK_WITH_COVERAGE_SIZE
    return data


def decode_last_mark_file(data: bytes) -> tuple[LogMark, IndexCoverage | None]:
    """The mark and the index coverage of a whole lastMark file as bkref writes it (16 or 40
    bytes). Raises ValueError, with the offset of the problem, for anything else."""
    if len(data) not in (LAST_MARK_SIZE, LAST_MARK_WITH_COVERAGE_SIZE):
        raise ValueError(
            f"{len(data)} bytes; a lastMark holds {LAST_MARK_SIZE} (BookKeeper) or "
            f"{LAST_MARK_WITH_COVERAGE_SIZE} (bkref: the mark and the index coverage)"
        )
    mark = decode_last_mark(data)
    if len(data) == LAST_MARK_SIZE:
        return mark, None
    magic, seq, deleted = _COVERAGE.unpack_from(data, LAST_MARK_SIZE)
    (crc,) = struct.unpack_from(">I", data, LAST_MARK_WITH_COVERAGE_SIZE - 4)
    if magic != COVERAGE_MAGIC or crc != zlib.crc32(data[: LAST_MARK_WITH_COVERAGE_SIZE - 4]):
        raise ValueError(
            f"the index coverage at offset {LAST_MARK_SIZE} fails its magic or CRC check"
        )
    if seq > INT64_MAX or deleted > INT64_MAX:
        raise ValueError(f"index coverage out of range: segment {seq}, {deleted} deletes")
    return mark, IndexCoverage(seq, deleted)


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
    """The lastMark of one directory. A missing, empty or unreadable file gives no mark and a
    reason (BookKeeper logs it and treats the directory as holding (0, 0); BookKeeper's
    truncate-then-write leaves an empty file after a crash). A file of another size, or with
    a negative field or a bad coverage CRC, gives no mark and ``damaged``: no crash of bkref or
    BookKeeper leaves it."""
    path = join(directory, file_name)
    try:
        handle = fs.open(path, read_only=True)
    except FsNotFound:
        return DirMark(directory, None, f"{path} does not exist (normal on a first start)")
    except FsError as exc:
        return DirMark(directory, None, f"{path} cannot be opened: {exc}")
    try:
        data = handle.pread(0, _READ_BYTES)
    except FsError as exc:
        return DirMark(directory, None, f"{path} cannot be read: {exc}")
    finally:
        handle.close()
    if not data:
        return DirMark(directory, None, f"{path} is empty (a BookKeeper crash leaves that)")
    try:
        mark, coverage = decode_last_mark_file(data)
    except ValueError as exc:
        return DirMark(directory, None, f"{path} is not a lastMark: {exc}", damaged=True)
    return DirMark(directory, mark, coverage=coverage)


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


@attrs.frozen
class CheckedMark:
    """Recovery's reading of lastMark: the largest mark, the file that holds it (None: no
    mark), and the largest index coverage recorded (None: no file carries one)."""

    mark: LogMark
    path: str | None
    coverage: IndexCoverage | None
    #: Every lastMark file read and its mark, the largest's included.
    marks: tuple[tuple[str, LogMark], ...] = ()


def checked_last_mark(
    fs: FileSystem, ledger_dirs: Sequence[str], file_name: str = LAST_MARK_FILE_NAME
) -> CheckedMark:
    """Recovery's read: the largest lastMark over ``ledger_dirs`` and the largest index
    coverage recorded in any of them (each was written after what it records was durable, so
    each is a lower bound). Raises DamagedFile for a damaged file, before anything is
    written."""
    marks = read_last_marks(fs, ledger_dirs, file_name)
    for dir_mark in marks:
        if dir_mark.damaged:
            raise DamagedFile(
                join(dir_mark.directory, file_name),
                None,
                dir_mark.reason,
                "if another ledger directory holds an intact lastMark, or this one is "
                "beyond repair, delete this file: recovery then replays from the largest "
                "intact mark (or from the oldest journal present), which re-applies records "
                "the storage already holds and loses nothing; the check of the index against "
                "the mark is then skipped until the next checkpoint writes it again",
            )
    seqs = [m.coverage.segment_seq for m in marks if m.coverage is not None]
    deletes = [m.coverage.deleted_records for m in marks if m.coverage is not None]
    coverage = IndexCoverage(max(seqs), max(deletes)) if seqs else None
    mark = largest_mark(marks)
    holders = [join(m.directory, file_name) for m in marks if m.mark == mark]
    every = tuple((join(m.directory, file_name), m.mark) for m in marks if m.mark is not None)
    return CheckedMark(mark, holders[0] if holders else None, coverage, every)


def write_last_mark(
    fs: FileSystem,
    ledger_dirs: Sequence[str],
    mark: LogMark,
    file_name: str = LAST_MARK_FILE_NAME,
    *,
    coverage: IndexCoverage | None = None,
) -> None:
    """Persist ``mark`` (and the index ``coverage``, when given) in every directory of
    ``ledger_dirs``; durable on return. ``coverage`` must already be durable.

    Asserts that the mark does not move backwards against any mark already there
    (BookKeeper issue #4740). FsError propagates: the caller must not trim journals then.
    """
    assert ledger_dirs, "write_last_mark needs at least one ledger directory"
    previous = read_last_mark(fs, ledger_dirs, file_name)
    assert mark >= previous, f"lastMark would move backwards from {previous} to {mark}"
    for directory in ledger_dirs:
        _write_one(fs, directory, file_name, mark, coverage)


def _write_one(
    fs: FileSystem, directory: str, file_name: str, mark: LogMark, coverage: IndexCoverage | None
) -> None:
    """tmp, fsync, rename, fsync the directory; then read back and compare."""
    path = join(directory, file_name)
    tmp = join(directory, tmp_file_name(file_name))
    if fs.exists(tmp):
        fs.unlink(tmp)  # a leftover of a crash; nobody reads it
    handle = fs.open(tmp, create=True, exclusive=True)
    try:
        handle.pwrite(0, encode_last_mark(mark, coverage))
        handle.fsync()
    finally:
        handle.close()
    fs.rename(tmp, path)
    fs.fsync_dir(directory)
    written = read_dir_mark(fs, directory, file_name)
    assert written.mark == mark and written.coverage == coverage, (written, mark, coverage)


def read_coverage_record(fs: FileSystem, journal_dir: str) -> DirMark:
    """The coverage record of a journal directory's ``current/`` (``journal_dir``): what the
    ledger directories held at least when the bookie last wrote it (spec/format/journal.md,
    "The coverage record"). Read like a lastMark file: missing or empty is no record."""
    return read_dir_mark(fs, journal_dir, COVERAGE_FILE_NAME)


def write_coverage_record(
    fs: FileSystem, journal_dir: str, mark: LogMark, coverage: IndexCoverage
) -> None:
    """Persist the coverage record in ``journal_dir`` as a lastMark file is written (a
    ``.tmp``, fsync, rename, directory fsync). ``mark`` must be persisted as lastMark in every
    ledger directory, and ``coverage`` durable in the index, before: the record is a lower
    bound a start checks the ledger directories against. FsError propagates."""
    _write_one(fs, journal_dir, COVERAGE_FILE_NAME, mark, coverage)
