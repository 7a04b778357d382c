"""Typed errors a user or a caller can meet.

Every error says what happened and what to do. The file-system errors are part of the
FileSystem seam: the OS backend (impl/fs) and the simulated disk (models/fs/simdisk.py) raise the
same classes, so the engine handles both the same way.
"""

from __future__ import annotations


class BkrefError(Exception):
    """Base of every error bkref raises on purpose."""


# --- the FileSystem seam --------------------------------------------------------------


class FsError(BkrefError):
    """A file-system operation failed. ``path`` names the file or directory."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class FsNotFound(FsError):
    """The file or directory does not exist."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "no such file or directory")


class FsExists(FsError):
    """An exclusive create met an existing name."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "already exists")


class FsNotADirectory(FsError):
    """A directory operation was given something that is not a directory."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "not a directory")


class FsNotAFile(FsError):
    """An open met something that is not a regular file (a FIFO, a socket, a device) under a
    name the bookie gives its files. Refused without blocking: opening or reading a FIFO
    waits for a writer that never comes. Only the OS backend raises it: the simulated disk
    has no special files."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(
            path,
            f"is a {kind}, not a regular file: a bookie's files are regular files; move it "
            "out of the directory",
        )
        self.kind = kind


class FsNoSpace(FsError):
    """The write does not fit (ENOSPC). Nothing of the write was applied."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "no space left on device")


class FsIOError(FsError):
    """The device failed the operation (EIO). After a failed fsync the unsynced data of the
    file is gone: the caller must treat everything it wrote since the last good fsync as lost.
    """

    def __init__(self, path: str, op: str) -> None:
        super().__init__(path, f"input/output error during {op}")
        self.op = op


class FsClosed(FsError):
    """The handle was closed, or invalidated by a crash."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "file handle is closed")


class FsLocked(FsError):
    """Another holder (another process, or another bookie of this process) has the
    directory's exclusive lock (FileSystem.lock_dir)."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "locked by another process")


# --- configuration ----------------------------------------------------------------------


class ConfigError(BkrefError):
    """A configuration key or value is wrong. The message names the key and the fix."""


# --- entry logs (spec/format/entry_log.md) -----------------------------------------------


class EntryLogError(BkrefError):
    """Base for entry-log read errors (DefaultEntryLogger.EntryLookupException)."""

    def __init__(self, log_id: int, message: str) -> None:
        super().__init__(f"entry log {log_id:x}.log: {message}")
        self.log_id = log_id


class MissingLogFile(EntryLogError):
    """No file ``<hex id>.log`` in any ledger directory."""

    def __init__(self, log_id: int) -> None:
        super().__init__(log_id, "file is missing from every ledger directory")


class ShortRead(EntryLogError):
    """The file ends before the record at ``offset`` does (a torn or truncated tail)."""

    def __init__(self, log_id: int, offset: int, wanted: int, got: int) -> None:
        super().__init__(log_id, f"short read at offset {offset}: wanted {wanted} bytes, got {got}")
        self.offset = offset


class BadEntryLength(EntryLogError):
    """A record's int32 size is below 16 (ledger id + entry id) at ``offset``."""

    def __init__(self, log_id: int, offset: int, size: int) -> None:
        super().__init__(log_id, f"invalid entry length {size} at offset {offset}")
        self.offset = offset
        self.size = size


class WrongEntry(EntryLogError):
    """The record at the location belongs to another (ledger, entry)."""

    def __init__(
        self, log_id: int, offset: int, expected: tuple[int, int], found: tuple[int, int]
    ) -> None:
        super().__init__(
            log_id,
            f"at offset {offset} found ledger {found[0]} entry {found[1]}, "
            f"expected ledger {expected[0]} entry {expected[1]}",
        )
        self.offset = offset
        self.expected = expected
        self.found = found


class BadLedgersMap(EntryLogError):
    """The ledgers map cannot be used; the caller falls back to a scan."""


class NotAnEntryLog(EntryLogError):
    """The file is not an entry log (too short for a header, or a foreign magic)."""


class BkIndexError(BkrefError):
    """BookKeeper's ledger metadata (spec/format/bk_index.md) cannot be read: ``path`` is the
    file (an ``.idx`` header, or a DbLedgerStorage ``ledgers`` value), ``offset`` where the
    problem is, ``problem`` what is wrong."""

    def __init__(self, path: str, offset: int, problem: str) -> None:
        super().__init__(f"{path} offset {offset}: {problem}")
        self.path = path
        self.offset = offset
        self.problem = problem


class BkIndexTorn(BkIndexError):
    """The header is short or all zeros: what a crash can leave of a header BookKeeper had
    not yet forced. The ledger's key and fence must come from elsewhere (the journal)."""


class BkIndexDamaged(BkIndexError):
    """The bytes are no index header BookKeeper writes and no crash leaves: damage, or a
    foreign file. Restore the file from a backup."""


class NoWritableLedgerDir(BkrefError):
    """Every ledger directory is full: an add cannot be written. Free disk space or add a
    ledger directory; nothing already written is lost."""


# --- bookie operations (spec/adapter.md error codes) -------------------------------------


class BookieError(BkrefError):
    """An operation of the bookie failed in a way the client is told about. ``code`` is the
    adapter protocol's error code (spec/adapter.md)."""

    code = "io_error"


class Fenced(BookieError):
    """The ledger is fenced: no add to it is ever acknowledged again."""

    code = "fenced"


class Unauthorized(BookieError):
    """The master key differs from the one the ledger was first written with."""

    code = "unauthorized"


class NoLedger(BookieError):
    """The bookie has no such ledger (never written, or deleted)."""

    code = "no_ledger"


class NoEntry(BookieError):
    """The ledger exists but holds no such entry."""

    code = "no_entry"


class NoSpace(BookieError):
    """No ledger directory has room for the write. Nothing already acknowledged is lost."""

    code = "no_space"


class BookieIOError(BookieError):
    """The disk failed the operation (a failed write or fsync). The operation was not
    acknowledged; see the message for what to do."""

    code = "io_error"


class BadRequest(BookieError):
    """The request is malformed: a missing or mistyped field, a negative id, an oversized
    payload. Nothing was done."""

    code = "bad_request"


class Unsupported(BookieError):
    """The operation is not supported by this bookie (yet)."""

    code = "unsupported"


class RecoveryError(BkrefError):
    """The bookie cannot start: its directories are inconsistent (e.g. the journal named by
    lastMark is missing). The message says which file and what to do."""


class DamagedFile(RecoveryError):
    """A recovery input holds a state no crash can leave (spec/format/journal.md,
    entry_log.md, ledger_index.md: "Damage"): recovery stops before it writes anything that
    would make the damage permanent. ``path`` is the file, ``offset`` the byte where the
    damage was found (None when the file as a whole is wrong: missing, or the wrong size),
    ``problem`` what is wrong and ``advice`` what the operator can do, which never resurrects
    a delete, drops a fence or loses an acknowledged entry without saying so."""

    def __init__(self, path: str, offset: int | None, problem: str, advice: str) -> None:
        where = path if offset is None else f"{path} at offset {offset}"
        super().__init__(
            f"damaged file {where}: {problem}. No crash leaves this state, so bkref does not "
            f"start and changed nothing. What to do: {advice}"
        )
        self.path = path
        self.offset = offset
        self.problem = problem
        self.advice = advice


#: The end of every DamagedFile advice where no repair on the bookie itself is safe.
REPLICA_ADVICE = (
    "If no intact copy exists, no repair on this bookie keeps every acknowledged entry, fence, "
    "master key and delete: take the bookie out of service, clear its journal and ledger "
    "directories, and let BookKeeper's autorecovery re-replicate its ledgers from the other "
    "bookies of their ensembles"
)


class DirectoryError(BkrefError):
    """The bookie's directories are not the ones it was started with, are in use by another
    process, or are BookKeeper's and were not opened for writing (spec/format/identity.md).
    Nothing was changed; the message says what differs and the command that accepts it."""


class TraceError(BkrefError):
    """A trace (spec/trace.md) cannot be read: ``name`` is the trace, ``line`` the 1-based
    line number (None when the problem is the trace as a whole, e.g. an empty one). The
    message says what is wrong and what to do."""

    def __init__(self, name: str, line: int | None, problem: str) -> None:
        where = name if line is None else f"{name} line {line}"
        super().__init__(f"{where}: {problem}")
        self.name = name
        self.line = line
        self.problem = problem
