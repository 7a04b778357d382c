"""Ports of BookKeeper's TestTransactionalEntryLogCompactor
(bookkeeper-server/src/test/java/org/apache/bookkeeper/bookie/storage/directentrylogger/), on
the simulated disk with bkref's entry logger and compactor.

BookKeeper's tests drive ``TransactionalEntryLogCompactor.compact(meta)``, which runs the three
phases and answers false when one fails; :func:`compact` below is that driver over bkref's
phase methods (copy, flush, link, the index update, remove_source). Their MockLedgerStorage
records the updated locations and may fail its index flush: :class:`MockLedgerStorage`. Their
proxies that make the compaction log fail are subclasses of the compactor that fail the same
step. Where bkref differs on purpose the docstring says so.
"""

from __future__ import annotations

import random

from impl.entrylog.compactor import (
    Compaction,
    MovedEntry,
    TransactionalCompactor,
    recover_leftovers,
)
from impl.entrylog.logger import EntryLogger
from impl.entrylog.reader import extract_metadata
from impl.format.entry_log import encode_payload
from impl.format.names import parse_compacted_file_name, parse_compacting_file_name
from impl.fs.api import join
from models.fs.simdisk import SimDisk
from spec.errors import FsError, FsIOError
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id
from tests.unit.impl.entrylog.test_logger import settings_for, sim_disk

DEAD_LEDGER = 1
LIVE_LEDGER = 2
ENTRY_BYTES = 1000


def make_entry(ledger_id: int, entry_id: int, size: int, fill: int) -> bytes:
    """BookKeeper's makeEntry: ledger id, entry id, then ``fill`` up to ``size`` bytes."""
    return encode_payload(ledger_id, entry_id, bytes([fill & 0xFF]) * (size - 16))


class MockLedgerStorage:
    """The updated locations, and an index flush that may fail."""

    def __init__(self, *, fail_flush: bool = False) -> None:
        self.updated: list[MovedEntry] = []
        self.fail_flush = fail_flush

    def apply(self, moves: list[MovedEntry]) -> None:
        self.updated.extend(moves)
        if self.fail_flush:
            raise FsIOError("/index", "fail on flush")


def new_logger(disk: SimDisk, dirs: list[str]) -> EntryLogger:
    return EntryLogger(disk, dirs, settings_for(write_buffer_bytes=4096), random.Random(3))


def write_log_data(disk: SimDisk, dirs: list[str], count: int = 1) -> EntryLogId:
    """writeLogData (count 1: dead entry 1, live entry 2) and writeLogData1000 (count 1000:
    entry i of each ledger, interleaved), in one log, by a logger closed afterwards."""
    logger = new_logger(disk, dirs)
    if count == 1:
        pairs = [(DEAD_LEDGER, 1, 0xDE), (LIVE_LEDGER, 2, 0xFA)]
    else:
        pairs = []
        for i in range(count):
            pairs += [(DEAD_LEDGER, i, 0xDE + i), (LIVE_LEDGER, i, 0xFA + i)]
    logs = set()
    for ledger, entry, fill in pairs:
        location = logger.add_entry(LedgerId(ledger), make_entry(ledger, entry, 1000, fill))
        logs.add(location_log_id(location))
    logger.close()
    assert len(logs) == 1
    return logs.pop()


def is_live(ledger_id: LedgerId) -> bool:
    return ledger_id != DEAD_LEDGER


def compact(
    compactor: TransactionalCompactor, source: EntryLogId, storage: MockLedgerStorage
) -> bool:
    """TransactionalEntryLogCompactor.compact: the three phases, false when one fails."""
    c: Compaction | None = None
    try:
        c = compactor.copy(source, is_live)
        if c.new_log is None:
            return False
        compactor.flush(c)
        compactor.link(c)
        storage.apply(c.moved)
        compactor.remove_source(c)
    except FsError:
        return False
    return True


def files(disk: SimDisk, directory: str) -> tuple[list[str], list[str]]:
    names = disk.listdir(directory)
    compacting = [n for n in names if parse_compacting_file_name(n) is not None]
    compacted = [n for n in names if parse_compacted_file_name(n) is not None]
    return compacting, compacted


def setup(count: int = 1) -> tuple[SimDisk, str, EntryLogger, EntryLogId]:
    disk, dirs = sim_disk(1)
    log_id = write_log_data(disk, dirs, count)
    logger = new_logger(disk, dirs)
    meta = logger.extract_metadata(log_id).metadata
    assert set(meta.ledgers) == {DEAD_LEDGER, LIVE_LEDGER}
    assert meta.total_bytes == (ENTRY_BYTES + 4) * 2 * count
    assert meta.remaining_bytes(lambda _ledger: True) == meta.total_bytes
    return disk, dirs[0], logger, log_id


def check_compacted(
    logger: EntryLogger, log_id: EntryLogId, storage: MockLedgerStorage, count: int = 1
) -> EntryLogId:
    """The updated locations and the compacted log, as the Java tests check them."""
    assert len(storage.updated) == count
    compacted_id = location_log_id(storage.updated[0].new)
    assert compacted_id != log_id
    for i, loc in enumerate(storage.updated):
        entry = 2 if count == 1 else i
        assert (loc.ledger_id, loc.entry_id) == (LIVE_LEDGER, entry)
        assert location_log_id(loc.new) == compacted_id
        got = logger.read_entry(loc.ledger_id, loc.entry_id, loc.new)
        fill = 0xFA if count == 1 else 0xFA + i
        assert got == make_entry(LIVE_LEDGER, entry, ENTRY_BYTES, fill)
    meta = logger.extract_metadata(compacted_id).metadata
    assert set(meta.ledgers) == {LIVE_LEDGER}
    assert meta.total_bytes == (ENTRY_BYTES + 4) * count
    return compacted_id


# --- the ports -------------------------------------------------------------------------------


def test_happy_case() -> None:
    """Port of testHappyCase: one live and one dead entry; the compaction moves exactly one
    location, and the compacted log holds only the live ledger."""
    disk, directory, logger, log_id = setup()
    storage = MockLedgerStorage()
    assert compact(TransactionalCompactor(disk, logger), log_id, storage)
    check_compacted(logger, log_id, storage)
    assert files(disk, directory) == ([], [])
    assert logger.find_log(log_id) is None


def test_happy_case_1000() -> None:
    """Port of testHappyCase1000: 1000 entries of each ledger; 1000 locations move, in
    order, each readable with its bytes."""
    disk, directory, logger, log_id = setup(1000)
    storage = MockLedgerStorage()
    assert compact(TransactionalCompactor(disk, logger), log_id, storage)
    check_compacted(logger, log_id, storage, 1000)
    assert files(disk, directory) == ([], [])


class FailAddCompactor(TransactionalCompactor):
    """newDirectEntryLoggerFailAdd: adding to the compaction log fails."""

    def _append(
        self, c: Compaction, ledger_id: int, entry_id: int, old_offset: int, record: bytes
    ) -> None:
        raise FsIOError(c.compacting_path, "Don't allow adds")


class FailAddNoAbortCompactor(FailAddCompactor):
    """newDirectEntryLoggerFailAddNoAbort: and the rollback does nothing."""

    def abort(self, c: Compaction) -> None:
        c.phase = "aborted"


def test_scan_fail() -> None:
    """Port of testScanFail: a failure while copying leaves nothing: no updated location,
    no compaction file, the source in place."""
    disk, directory, logger, log_id = setup()
    storage = MockLedgerStorage()
    assert not compact(FailAddCompactor(disk, logger), log_id, storage)
    assert storage.updated == []
    assert files(disk, directory) == ([], [])
    assert logger.find_log(log_id) is not None


def test_scan_fail_no_abort_and_continue() -> None:
    """Port of testScanFailNoAbortAndContinue: a copy that failed without rolling back
    leaves one ``.compacting``; after a restart recovery removes it, and a new compaction of
    the same log succeeds."""
    disk, directory, logger, log_id = setup()
    storage = MockLedgerStorage()
    assert not compact(FailAddNoAbortCompactor(disk, logger), log_id, storage)
    assert storage.updated == []
    compacting, compacted = files(disk, directory)
    assert len(compacting) == 1 and compacted == []

    logger = new_logger(disk, [directory])
    recover_leftovers(disk, [directory], logger, storage.apply)
    assert files(disk, directory) == ([], [])
    assert compact(TransactionalCompactor(disk, logger), log_id, storage)
    check_compacted(logger, log_id, storage)


class FailFlushCompactor(TransactionalCompactor):
    """newDirectEntryLoggerFailFlush: flushing the compaction log fails."""

    def _sync_compaction_log(self, c: Compaction) -> None:
        raise FsIOError(c.compacting_path, "No flushing")


def test_flush_fail() -> None:
    """Port of testFlushFail: a failure in phase 2 leaves nothing."""
    disk, directory, logger, log_id = setup()
    storage = MockLedgerStorage()
    assert not compact(FailFlushCompactor(disk, logger), log_id, storage)
    assert storage.updated == []
    assert files(disk, directory) == ([], [])
    assert logger.find_log(log_id) is not None


class FailMarkCompactedNoAbortCompactor(TransactionalCompactor):
    """newDirectEntryLoggerFailMarkCompactedNoAbort: markCompacted (the ``.compacted`` link
    and the removal of ``.compacting``) succeeds, then fails; the rollback does nothing."""

    def _remove_compacting(self, c: Compaction) -> None:
        super()._remove_compacting(c)
        raise FsIOError(c.compacted_path, "No compact")

    def abort(self, c: Compaction) -> None:
        c.phase = "aborted"


def test_mark_compact_fail_no_abort() -> None:
    """Port of testMarkCompactFailNoAbort: a failure after the ``.compacted`` link (not
    rolled back) leaves one ``.compacted`` beside the source, and recovery at the next start
    finishes it: the source is removed and the live entry moves to the compacted log.

    bkref's own phase 2 rolls back such a failure (``abort`` removes ``.compacted``); this
    port keeps BookKeeper's no-rollback proxy to show that recovery finishes it."""
    disk, directory, logger, log_id = setup()
    storage = MockLedgerStorage()
    assert not compact(FailMarkCompactedNoAbortCompactor(disk, logger), log_id, storage)
    assert storage.updated == []
    compacting, compacted = files(disk, directory)
    assert compacting == [] and len(compacted) == 1

    logger = new_logger(disk, [directory])
    assert logger.find_log(log_id) is not None
    report = recover_leftovers(disk, [directory], logger, storage.apply)
    assert files(disk, directory) == ([], [])
    assert [src for _new, src in report.finished] == [log_id]  # removeEntryLog(logId)
    assert logger.find_log(log_id) is None
    check_compacted(logger, log_id, storage)
    assert storage.updated[0].old == Location(log_id << 32)


def test_index_fail() -> None:
    """Port of testIndexFail: the index flush of phase 3 fails after the location was
    updated; ``.compacted`` stays (no ``.compacting``) beside the source, and recovery at the
    next start finishes the compaction and removes the source.

    bkref also leaves ``<new>.log``, linked before the index update (BookKeeper links it in
    the same phase, before its update too)."""
    disk, directory, logger, log_id = setup()
    failing = MockLedgerStorage(fail_flush=True)
    assert not compact(TransactionalCompactor(disk, logger), log_id, failing)
    assert len(failing.updated) == 1
    compacting, compacted = files(disk, directory)
    assert compacting == [] and len(compacted) == 1

    storage = MockLedgerStorage()
    logger = new_logger(disk, [directory])
    assert logger.find_log(log_id) is not None
    report = recover_leftovers(disk, [directory], logger, storage.apply)
    assert files(disk, directory) == ([], [])
    assert [src for _new, src in report.finished] == [log_id]
    assert logger.find_log(log_id) is None
    check_compacted(logger, log_id, storage)


def test_metadata_written() -> None:
    """Port of testMetadataWritten: the compacted log carries a ledgers map (its metadata
    comes from the map, not a scan) with only the live ledger."""
    disk, directory, logger, log_id = setup(1000)
    storage = MockLedgerStorage()
    assert compact(TransactionalCompactor(disk, logger), log_id, storage)
    compacted_id = location_log_id(storage.updated[0].new)
    handle = disk.open(join(directory, f"{compacted_id:x}.log"), read_only=True)
    result = extract_metadata(handle, compacted_id)
    assert result.source == "map"
    assert dict(result.metadata.ledgers) == {LIVE_LEDGER: (ENTRY_BYTES + 4) * 1000}


def test_the_recovered_index_update_names_the_source() -> None:
    """Not a port: at recovery the moves name the source log (offset 0), so an index update
    can tell a location in the source from one a later add wrote."""
    disk, directory, logger, log_id = setup()
    compactor = FailMarkCompactedNoAbortCompactor(disk, logger)
    assert not compact(compactor, log_id, MockLedgerStorage())
    storage = MockLedgerStorage()
    recover_leftovers(disk, [directory], new_logger(disk, [directory]), storage.apply)
    assert {location_log_id(m.old) for m in storage.updated} == {log_id}
    assert {m.entry_id for m in storage.updated} == {EntryId(2)}
