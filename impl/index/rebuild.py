"""Rebuild the ledger index from the entry logs (directories written by BookKeeper itself).

Spec pages: spec/format/ledger_index.md ("Rebuilding from BookKeeper's entry logs") and
spec/format/entry_log.md ("Metadata: the map first, a scan as fallback", "The scan").
BookKeeper's LocationsIndexRebuildOp does the same for DbLedgerStorage: scan every entry log
and put ``(log_id << 32) | (record offset + 4)`` for every entry of an active ledger.

Why: a BookKeeper bookie keeps its locations in ``.idx`` files (or RocksDB) that bkref does
not read. When bkref's own index has no segment, the bookie calls ``rebuild_index`` before it
replays the journal, then checkpoints, which makes the rebuilt index durable.

Order: logs in ascending id, records in file order, every put replacing the previous one, so
a later log wins over an earlier one for the same entry (compaction copies entries forward
into newer logs) and a later record over an earlier one inside a log.

Master keys and fence flags are not in the entry logs. BookKeeper's InterleavedLedgerStorage
keeps them in the header of each ledger's ``.idx`` file (spec/format/bk_index.md), so the
rebuild reads those headers too (impl/index/bk_metadata.py) and gives each ledger not deleted
its key and fence, even a ledger with no entry in any log yet: without them, after lastMark
has passed the journal's key and fence records, a BookKeeper ledger would take any key and
forget its fence. A damaged header stops the rebuild (BkIndexDamaged); a torn one (what a
crash leaves) is reported and skipped, the journal then being the only source. The explicit
LAC in a header is counted, not kept: bkref's index has no place for it. DbLedgerStorage's
RocksDB ledgers index is only noticed here (``bkref import`` reads it).

Not verified here: ids that wrapped past 2**31-1 (ascending id is then not write order), the
content of the entries (reads check the ids at the location), and the positions in the
``.idx`` files (the logs are scanned instead; a ledger in the logs without an ``.idx`` may be
one BookKeeper deleted, and is indexed like any other).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import attrs

from impl.entrylog.ledger_dirs import LedgerDirs
from impl.entrylog.reader import ScannedRecord, extract_metadata, iter_records
from impl.format.entry_log import LOGFILE_HEADER_SIZE
from impl.format.names import INDEX_DIR_NAME, parse_log_file_name
from impl.fs.api import FileSystem, join
from impl.index.ledger_index import LedgerIndex
from impl.limits import LIMITS, Limits
from spec.errors import EntryLogError, FsError
from spec.ids import LOCATION_OFFSET_END, EntryId, EntryLogId, LedgerId, make_location

if TYPE_CHECKING:
    from impl.index.bk_metadata import BkMetadata

Progress = Callable[[str], None]
#: How a log was read: too short for a record, by a scan only, by its map then a scan, or by
#: its map alone (every ledger deleted).
_Source = Literal["empty", "scan", "map", "all deleted"]


@attrs.frozen
class RebuildFailure:
    """A log or directory that could not be read; ``log_id`` is None for a directory."""

    path: str
    log_id: EntryLogId | None
    message: str


@attrs.frozen
class RebuildStats:
    """What a rebuild did. Every log found is counted in exactly one of ``logs_from_map``,
    ``logs_from_scan``, ``logs_empty`` and ``failures`` (those with a log id)."""

    logs: int
    logs_from_map: int
    logs_from_scan: int
    logs_empty: int
    logs_all_deleted: int
    entries_indexed: int
    entries_skipped_deleted: int
    entries_skipped_invalid: int
    torn_tail_bytes: int
    map_mismatches: tuple[EntryLogId, ...]
    duplicate_logs: tuple[str, ...]
    failures: tuple[RebuildFailure, ...]
    #: What BookKeeper's index files gave (spec/format/bk_index.md): keys and fences set,
    #: explicit LACs seen (not kept), torn headers skipped; None when the ledger directories
    #: hold no sub-directory where such files could be (a directory bkref wrote).
    bk_keys: int = 0
    bk_fences: int = 0
    bk_metadata: BkMetadata | None = None

    def summary(self) -> str:
        """One line for the bookie's log."""
        line = (
            f"index rebuild: {self.logs} entry logs ({self.logs_from_map} by ledgers map, "
            f"{self.logs_from_scan} by scan only, {self.logs_empty} empty), "
            f"{self.entries_indexed} entries indexed, "
            f"{self.entries_skipped_deleted} of deleted ledgers skipped"
        )
        if self.failures:
            line += f", {len(self.failures)} unreadable (skipped)"
        if self.bk_metadata is not None and self.bk_metadata.found_anything:
            line += (
                f"; from BookKeeper's index files {self.bk_keys} master keys and "
                f"{self.bk_fences} fence flags"
            )
        return line


@attrs.define
class _Tally:
    logs: int = 0
    from_map: int = 0
    from_scan: int = 0
    empty: int = 0
    all_deleted: int = 0
    indexed: int = 0
    skipped_deleted: int = 0
    skipped_invalid: int = 0
    torn_tail_bytes: int = 0
    mismatches: list[EntryLogId] = attrs.Factory(list)
    duplicates: list[str] = attrs.Factory(list)
    failures: list[RebuildFailure] = attrs.Factory(list)

    def count(self, source: _Source) -> None:
        """Count a log read to the end (a log that failed half-way counts as a failure)."""
        if source == "empty":
            self.empty += 1
        elif source == "scan":
            self.from_scan += 1
        else:
            self.from_map += 1
            if source == "all deleted":
                self.all_deleted += 1

    def stats(self, bk_keys: int, bk_fences: int, bk_metadata: BkMetadata | None) -> RebuildStats:
        return RebuildStats(
            logs=self.logs,
            logs_from_map=self.from_map,
            logs_from_scan=self.from_scan,
            logs_empty=self.empty,
            logs_all_deleted=self.all_deleted,
            entries_indexed=self.indexed,
            entries_skipped_deleted=self.skipped_deleted,
            entries_skipped_invalid=self.skipped_invalid,
            torn_tail_bytes=self.torn_tail_bytes,
            map_mismatches=tuple(self.mismatches),
            duplicate_logs=tuple(self.duplicates),
            failures=tuple(self.failures),
            bk_keys=bk_keys,
            bk_fences=bk_fences,
            bk_metadata=bk_metadata,
        )


def rebuild_index(
    fs: FileSystem,
    ledger_dirs: LedgerDirs | Sequence[str],
    index: LedgerIndex,
    progress: Progress | None = None,
    *,
    limits: Limits = LIMITS,
) -> RebuildStats:
    """Put every entry of every ``<hex>.log`` in ``ledger_dirs`` into ``index``, skipping the
    ledgers ``index`` marks deleted. Logs that are not entry logs, or cannot be opened (gone,
    a directory), are reported (``progress`` and the stats) and skipped; only typed errors are
    caught, so a bug still shows. A read error (FsError) from a log that opened propagates:
    it says nothing about what the log holds, and a skipped log would become, once recovery
    checkpoints the index, a durable index without its entries. ``limits``
    (impl/limits.py): a progress line every ``rebuild_progress_every_logs`` logs (and the
    summary when there are at least that many), logs scanned ``scan_chunk_bytes`` at a time.

    Before the logs, the headers of BookKeeper's ``.idx`` files in the same directories give
    each ledger not deleted its master key and fence flag (``apply_bk_metadata``); raises
    BkIndexDamaged for a damaged header, before anything is put."""
    dirs = ledger_dirs.dirs if isinstance(ledger_dirs, LedgerDirs) else tuple(ledger_dirs)
    bk_metadata: BkMetadata | None = None
    bk_keys = bk_fences = 0
    if may_hold_bk_metadata(fs, dirs):
        from impl.index.bk_metadata import read_bk_metadata

        bk_metadata = read_bk_metadata(fs, dirs)
        bk_keys, bk_fences = apply_bk_metadata(bk_metadata, index, progress)
    tally = _Tally()
    logs = _find_logs(fs, dirs, tally, progress)
    tally.logs = len(logs)
    every = limits.rebuild_progress_every_logs
    for done, (log_id, path) in enumerate(sorted(logs.items()), start=1):
        try:
            source = _rebuild_log(fs, path, log_id, index, tally, limits.scan_chunk_bytes)
        except (EntryLogError, _Unopenable) as exc:
            _fail(tally, progress, RebuildFailure(path, log_id, str(exc)))
        else:
            tally.count(source)
        if progress is not None and done % every == 0:
            progress(
                f"index rebuild: {done}/{len(logs)} entry logs read, "
                f"{tally.indexed} entries indexed"
            )
    stats = tally.stats(bk_keys, bk_fences, bk_metadata)
    _check_stats(stats)
    if progress is not None and (len(logs) >= every or stats.failures):
        progress(stats.summary())
    return stats


def may_hold_bk_metadata(fs: FileSystem, dirs: Sequence[str]) -> bool:
    """Whether a ledger directory holds a sub-directory other than bkref's own index: where
    BookKeeper keeps its ``.idx`` files (``<xx>/<yy>/``) and its RocksDB ``ledgers``
    database. A directory only bkref wrote has none, and then the BookKeeper readers
    (impl/index/bk_metadata.py) are not even loaded."""
    for directory in dirs:
        try:
            names = fs.listdir(directory)
        except FsError:
            continue
        for name in names:
            if name != INDEX_DIR_NAME and fs.is_dir(join(directory, name)):
                return True
    return False


def apply_bk_metadata(
    metadata: BkMetadata, index: LedgerIndex, progress: Progress | None = None
) -> tuple[int, int]:
    """Give each ledger of ``metadata`` that ``index`` does not mark deleted its master key
    (when the index has none yet) and its fence flag; return (keys set, fences set). Says on
    ``progress`` what could not be carried over: torn headers, explicit LACs, DbLedgerStorage
    databases."""
    keys = fences = 0
    for ledger in metadata.ledgers:
        if index.is_deleted(ledger.ledger_id):
            continue
        if index.master_key(ledger.ledger_id) is None:
            index.set_master_key(ledger.ledger_id, ledger.master_key)
            keys += 1
        if ledger.fenced and not index.is_fenced(ledger.ledger_id):
            index.set_fenced(ledger.ledger_id)
            fences += 1
    if progress is not None and metadata.found_anything:
        progress(metadata.summary())
        for path, why in metadata.torn:
            progress(
                f"BookKeeper index file {path}: not carried over ({why}); this ledger's key "
                "and fence come only from the journal"
            )
        for path in metadata.db_ledgers_dirs:
            progress(
                f"DbLedgerStorage ledger metadata {path}: not read when a directory is opened "
                "in place (it needs RocksDB): master keys and fence flags older than lastMark "
                "are not carried over. Use `bkref import` to copy the bookie with them"
            )
    return keys, fences


def _fail(tally: _Tally, progress: Progress | None, failure: RebuildFailure) -> None:
    tally.failures.append(failure)
    if progress is not None:
        progress(f"index rebuild: skipped {failure.path}: {failure.message}")


def _find_logs(
    fs: FileSystem, dirs: Sequence[str], tally: _Tally, progress: Progress | None
) -> dict[EntryLogId, str]:
    """log id -> path; the first directory (configuration order) holding an id wins, as the
    entry logger's reads do (EntryLogger.find_log)."""
    logs: dict[EntryLogId, str] = {}
    for directory in dirs:
        try:
            names = fs.listdir(directory)
        except FsError as exc:
            _fail(tally, progress, RebuildFailure(directory, None, str(exc)))
            continue
        for name in names:
            log_id = parse_log_file_name(name)
            if log_id is None:
                continue
            if log_id in logs:
                tally.duplicates.append(join(directory, name))
            else:
                logs[log_id] = join(directory, name)
    return logs


class _Unopenable(Exception):
    """A log name that does not open as a file: skipped, unlike a read error."""


def _rebuild_log(
    fs: FileSystem,
    path: str,
    log_id: EntryLogId,
    index: LedgerIndex,
    tally: _Tally,
    chunk_bytes: int,
) -> _Source:
    """Index one log: ledgers from its map when usable, entries from a scan."""
    try:
        handle = fs.open(path, read_only=True)
    except FsError as exc:
        raise _Unopenable(str(exc)) from exc
    try:
        size_bytes = handle.size()
        if size_bytes <= LOGFILE_HEADER_SIZE:
            return "empty"  # No room for a record: created, never (durably) written.
        if size_bytes > LOCATION_OFFSET_END:
            raise EntryLogError(
                log_id, f"{size_bytes} bytes: offsets past 4 GiB do not fit in a location"
            )
        found = extract_metadata(handle, log_id, chunk_bytes=chunk_bytes)
        if found.scan is not None:
            tally.torn_tail_bytes += found.scan.torn_tail_bytes
            _put_records(found.scan.records, log_id, index, tally)
            return "scan"
        map_ledgers = set(found.metadata.ledgers)
        if all(index.is_deleted(LedgerId(ledger_id)) for ledger_id in map_ledgers):
            return "all deleted"
        records = iter_records(handle, log_id, chunk_bytes=chunk_bytes)
        scanned = _put_records(records, log_id, index, tally)
        if scanned != map_ledgers:
            tally.mismatches.append(log_id)
        return "map"
    finally:
        handle.close()


def _put_records(
    records: Iterable[ScannedRecord], log_id: EntryLogId, index: LedgerIndex, tally: _Tally
) -> set[int]:
    """Put each record of a ledger not deleted; return every ledger id seen."""
    seen: set[int] = set()
    for record in records:
        seen.add(record.ledger_id)
        assert record.ledger_id >= 0, record
        assert record.offset + record.size <= LOCATION_OFFSET_END, record
        if record.entry_id < 0:
            tally.skipped_invalid += 1
            continue
        ledger_id = LedgerId(record.ledger_id)
        if index.is_deleted(ledger_id):
            tally.skipped_deleted += 1
            continue
        index.put_entry(ledger_id, EntryId(record.entry_id), make_location(log_id, record.offset))
        tally.indexed += 1
    return seen


def _check_stats(stats: RebuildStats) -> None:
    log_failures = sum(1 for failure in stats.failures if failure.log_id is not None)
    counted = stats.logs_from_map + stats.logs_from_scan + stats.logs_empty + log_failures
    assert counted == stats.logs, stats
    assert stats.logs_all_deleted <= stats.logs_from_map, stats
    assert len(stats.map_mismatches) <= stats.logs_from_map, stats
