"""Entry log ids: which id the next log gets, and which logs are flushed.

Spec page: spec/format/entry_log.md ("File names"). BookKeeper sources:
EntryLoggerAllocator.allocateNewLog/setLastLogId, DefaultEntryLogger (its constructor,
readLastLogId, RecentEntryLogsStatus), LedgerDirUtil (findLargestGap and the file-name
patterns) and EntryLogIdsImpl.

Pure parts first (the ids a directory's names take, the gap rule, the ``lastId`` codec, the
starting id, RecentEntryLogsStatus), then the parts that touch the FileSystem seam (read/write
``lastId``, LogIdAllocator). The names themselves are made and parsed in impl/format/names.py.

Where the last id comes from at start. BookKeeper has two rules: DefaultEntryLogger takes
``lastId`` and, when it is unreadable, the largest ``*.log`` id; EntryLogIdsImpl (the direct
entry logger) takes the start of the largest gap of unused ids. We use, per ledger directory,
``max(lastId if readable else -1, gap_start - 1)`` where the gap is over the ids of ``*.log``
and ``*.log.*.compacted`` names of that directory (``.compacting`` names are not considered:
recovery deletes them), and the maximum over all directories. So when ``lastId`` is missing
the gap rule decides, which is what makes an existing log ``MAX-1`` lead to ``0``
(TestEntryLogIds.testWrapAround), where DefaultEntryLogger would pick ``MAX``.

Why ``lastId`` is written in place and never fsynced (as BookKeeper does), and why that is
safe: ``lastId`` is only a hint. What keeps logs from being overwritten does not depend on it:
(1) the allocator skips every id whose file exists in any ledger directory, and the log file
is created exclusively; (2) the log file's name is made durable (our directory fsync) before
any entry is written to it, so after a crash every log that holds an entry still has its name.
A lost, stale or torn ``lastId`` is read as missing or as a smaller id, and the gap rule over
the surviving names gives an id past the largest contiguous run of existing logs. The price
is only that an id of a log deleted earlier may be reused, which BookKeeper accepts anyway
(ids wrap at 2**31-1).

Differences from Java kept on purpose, all in corner cases: names whose hex value is above
2**31-1 are ignored (Java's ``parseUnsignedInt`` turns them negative or throws); a ``lastId``
of ``0`` is a valid value (Java's ``id > 0`` test treats it as unreadable, which the gap rule
makes harmless either way); a ``lastId`` above 2**31-1, or with a sign, is garbage.

Not verified here: concurrent allocators in two processes (BookKeeper relies on the directory
lock of the bookie).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Sequence

from impl.format.entry_log import MAX_LOG_ID
from impl.format.names import (
    LAST_ID_FILE_NAME,
    log_file_name,
    parse_compacted_file_name,
    parse_log_file_name,
)
from impl.fs.api import FileHandle, FileSystem, join
from impl.limits import LIMITS, Limits
from spec.errors import FsError, FsNotFound
from spec.ids import EntryLogId

_HEX = re.compile(r"[0-9a-fA-F]+")


# --- pure: the ids a directory's names take ---------------------------------------------------


def log_ids_in_names(names: Iterable[str]) -> list[EntryLogId]:
    """Ids that count as taken for the gap rule: ``*.log`` and the new id of ``*.compacted``
    (logIdsInDirectory + compactedLogIdsInDirectory). Sorted, duplicates kept."""
    ids: list[EntryLogId] = []
    for name in names:
        log_id = parse_log_file_name(name)
        if log_id is not None:
            ids.append(log_id)
            continue
        compacted = parse_compacted_file_name(name)
        if compacted is not None:
            ids.append(compacted[0])
    return sorted(ids)


# --- pure: the gap rule and the starting id ---------------------------------------------------


def find_largest_gap(ids: Iterable[int]) -> tuple[int, int]:
    """The largest run of unused ids as (start, end), end exclusive; exactly
    LedgerDirUtil.findLargestGap: the gap before the first id counts, the gap after the last
    id ends at 2**31-1, and the first of equally large gaps wins."""
    ordered = sorted(ids)
    if not ordered:
        return 0, MAX_LOG_ID
    assert all(0 <= i <= MAX_LOG_ID for i in ordered), ordered
    best_start, best_end = 0, ordered[0]
    best_size = best_end - best_start
    for index, log_id in enumerate(ordered):
        gap_start = log_id + 1
        gap_end = ordered[index + 1] if index + 1 < len(ordered) else MAX_LOG_ID
        if gap_end - gap_start > best_size:
            best_start, best_end, best_size = gap_start, gap_end, gap_end - gap_start
    assert 0 <= best_start <= best_end <= MAX_LOG_ID
    return best_start, best_end


def last_id_for_dir(last_id_file: int | None, names: Iterable[str]) -> int:
    """The last used id one directory implies: ``max(lastId or -1, gap_start - 1)``."""
    ids = log_ids_in_names(names)
    from_gap = find_largest_gap(ids)[0] - 1 if ids else -1
    from_file = -1 if last_id_file is None else last_id_file
    return max(from_file, from_gap)


def next_log_id(last_id: int) -> EntryLogId:
    """The id after ``last_id``, wrapping to 0 past 2**31-1 (allocateNewLog)."""
    assert -1 <= last_id <= MAX_LOG_ID, last_id
    if last_id >= MAX_LOG_ID:
        return EntryLogId(0)
    return EntryLogId(last_id + 1)


# --- pure: the lastId codec -------------------------------------------------------------------


def encode_last_id(log_id: int) -> bytes:
    """``<lower-case hex>\\n`` (Long.toHexString + newline)."""
    assert 0 <= log_id <= MAX_LOG_ID, log_id
    return f"{log_id:x}\n".encode("ascii")


def decode_last_id(data: bytes, max_bytes: int = LIMITS.last_id_file_max_bytes) -> int | None:
    """The id in a ``lastId`` file's bytes, or None when it is empty, torn to nothing, or
    garbage (longer than ``max_bytes`` included: Limits.last_id_file_max_bytes). Like Java's
    ``readLine`` + ``parseLong(.., 16)``, only the first line counts and the newline is
    optional."""
    if len(data) > max_bytes:
        return None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return None
    first_line = text.split("\n", 1)[0].removesuffix("\r")
    if _HEX.fullmatch(first_line) is None:
        return None
    value = int(first_line, 16)
    if value > MAX_LOG_ID:
        return None
    return value


# --- pure: which logs are flushed -------------------------------------------------------------


class RecentEntryLogsStatus:
    """DefaultEntryLogger.RecentEntryLogsStatus: logs created in this run, each marked
    flushed once rotated and fsynced; the leading flushed ids are dropped and
    ``least_unflushed_log_id`` moves past them. Checkpoints use it to know which logs are
    durable.

    Not verified: the id wrap. After an id wraps to 0 Java lets ``least_unflushed_log_id``
    move backwards (0 + 1 < the old value); we keep that behaviour and do not assert
    monotonicity across a wrap.
    """

    def __init__(self, least_unflushed_log_id: int) -> None:
        assert 0 <= least_unflushed_log_id <= MAX_LOG_ID + 1, least_unflushed_log_id
        self._flushed: dict[int, bool] = {}
        self._least_unflushed_log_id = least_unflushed_log_id

    @property
    def least_unflushed_log_id(self) -> int:
        return self._least_unflushed_log_id

    def created(self, log_id: int) -> None:
        """createdEntryLog: a new log, not flushed."""
        assert 0 <= log_id <= MAX_LOG_ID, log_id
        self._flushed[log_id] = False

    def flushed(self, log_id: int) -> None:
        """flushRotatedEntryLog: mark a known log flushed (unknown ids are ignored, as Java's
        ``replace``) and drop the leading flushed ids."""
        if log_id in self._flushed:
            self._flushed[log_id] = True
        while self._flushed:
            first = min(self._flushed)
            if not self._flushed[first]:
                break
            del self._flushed[first]
            self._least_unflushed_log_id = first + 1

    def is_flushed(self, log_id: int) -> bool:
        """isFlushedLogId: marked flushed, or below the least unflushed id."""
        return self._flushed.get(log_id, False) or log_id < self._least_unflushed_log_id

    def pending(self) -> dict[int, bool]:
        """A copy of the tracked ids and whether each is flushed, in id order."""
        return dict(sorted(self._flushed.items()))

    def check_invariants(self) -> None:
        assert 0 <= self._least_unflushed_log_id <= MAX_LOG_ID + 1
        for log_id in self._flushed:
            assert 0 <= log_id <= MAX_LOG_ID, log_id
        if self._flushed:
            # The leading id is never flushed: flushed() drops leading flushed ids at once.
            assert self._flushed[min(self._flushed)] is False


# --- the FileSystem parts ---------------------------------------------------------------------


def read_last_id(
    fs: FileSystem, directory: str, max_bytes: int = LIMITS.last_id_file_max_bytes
) -> int | None:
    """The id in ``<directory>/lastId``, or None when missing, unreadable or garbage (a file
    longer than ``max_bytes`` is, and only ``max_bytes + 1`` of it are read)."""
    path = join(directory, LAST_ID_FILE_NAME)
    try:
        handle = fs.open(path, read_only=True)
    except FsError:
        return None
    try:
        data = handle.pread(0, max_bytes + 1)
    except FsError:
        return None
    finally:
        _close_quietly(handle)
    return decode_last_id(data, max_bytes)


def write_last_id(fs: FileSystem, directory: str, log_id: int) -> None:
    """Write ``lastId`` in place, truncating first, with no fsync of the file or the
    directory (EntryLoggerAllocator.setLastLogId; see the module docstring for why it is
    safe). Raises FsError."""
    data = encode_last_id(log_id)
    handle = fs.open(join(directory, LAST_ID_FILE_NAME), create=True)
    try:
        handle.truncate(0)
        handle.pwrite(0, data)
    finally:
        handle.close()


def _close_quietly(handle: FileHandle) -> None:
    with contextlib.suppress(FsError):
        handle.close()


class LogIdAllocator:
    """Hands out entry log ids (EntryLoggerAllocator's ``preallocatedLogId`` counter).

    At start the last id is computed from every ledger directory (module docstring). Each
    :meth:`next_id` advances past the last id, wrapping at 2**31-1, and skips every id whose
    file (``<hex>.log``, or the name asked for) exists in any ledger directory.
    :meth:`publish` writes ``lastId`` to every directory once the log file exists.
    ``limits.last_id_file_max_bytes``: a longer ``lastId`` is garbage.
    """

    def __init__(self, fs: FileSystem, dirs: Sequence[str], *, limits: Limits = LIMITS) -> None:
        assert dirs, "at least one ledger directory"
        self._fs = fs
        self._dirs = tuple(dirs)
        self._last_id_max_bytes = limits.last_id_file_max_bytes
        self._last_id = max(self._last_id_of(d) for d in self._dirs)
        self._allocated = 0

    @property
    def last_id(self) -> int:
        """The last id handed out (or found at start); -1 when there was none."""
        return self._last_id

    def next_id(self, file_name: Callable[[int], str] = log_file_name) -> EntryLogId:
        """The next free id for a file named ``file_name(id)`` (impl/format/names.py: a log,
        or a compaction log). Raises FsError from ``exists``."""
        candidate = next_log_id(self._last_id)
        for _ in range(MAX_LOG_ID + 1):
            name = file_name(candidate)
            if not any(self._fs.exists(join(d, name)) for d in self._dirs):
                self._last_id = candidate
                self._allocated += 1
                return candidate
            candidate = next_log_id(candidate)
        raise AssertionError("every entry log id is taken")

    def publish(self, log_id: int) -> list[str]:
        """Write ``lastId`` = ``log_id`` to every ledger directory. A failure is swallowed, as
        BookKeeper does (the gap rule covers a stale ``lastId``); the directories that could
        not be updated are returned."""
        failed: list[str] = []
        for directory in self._dirs:
            try:
                write_last_id(self._fs, directory, log_id)
            except FsError:
                failed.append(directory)
        return failed

    def _last_id_of(self, directory: str) -> int:
        try:
            names = self._fs.listdir(directory)
        except FsNotFound:
            names = []
        last = read_last_id(self._fs, directory, self._last_id_max_bytes)
        return last_id_for_dir(last, names)

    def check_invariants(self) -> None:
        assert self._dirs
        assert -1 <= self._last_id <= MAX_LOG_ID, self._last_id
        assert self._allocated >= 0
