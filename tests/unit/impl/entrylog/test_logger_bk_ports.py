"""Ports of BookKeeper's tests of the entry log writer, run through bkref's EntryLogger.

Sources: DefaultEntryLogTest, CreateNewLogTest and storage/directentrylogger/TestEntryLogIds.
Each test names the Java test it ports and says where bkref differs on purpose (explicit
preallocation, a typed error instead of the minUsableSizeForEntryLogCreation fallback).
Entries are BookKeeper's ``generateEntry(ledger, entry)``: ledger id, entry id, then the
bytes of ``"ledger-<L>-<E>"``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from impl.entrylog.ids import LogIdAllocator, write_last_id
from impl.entrylog.logger import EntryLogger, EntryLoggerSettings
from impl.format.entry_log import HEADER_VERSION_POSITION, LEDGERS_MAP_OFFSET_POSITION
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import NoWritableLedgerDir
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id
from tests.unit.impl.entrylog.test_logger import active_log, sim_disk


def generate_entry(ledger_id: int, entry_id: int) -> bytes:
    body = f"ledger-{ledger_id}-{entry_id}".encode()
    return ledger_id.to_bytes(8, "big", signed=True) + entry_id.to_bytes(8, "big") + body


def make_entry(ledger_id: int, entry_id: int, size_bytes: int) -> bytes:
    """EntryLogTestUtils.makeEntry: ids then filler up to ``size_bytes``."""
    head = ledger_id.to_bytes(8, "big") + entry_id.to_bytes(8, "big")
    return head + bytes(i % 251 for i in range(size_bytes - 16))


def add(logger: EntryLogger, ledger_id: int, entry_id: int) -> Location:
    return logger.add_entry(LedgerId(ledger_id), generate_entry(ledger_id, entry_id))


def read(logger: EntryLogger, ledger_id: int, entry_id: int, location: Location) -> bytes:
    return logger.read_entry(LedgerId(ledger_id), EntryId(entry_id), location)


def os_dirs(tmp_path: Path, count: int) -> list[str]:
    out = []
    for index in range(count):
        directory = tmp_path / f"bk{index}" / "current"
        directory.mkdir(parents=True)
        out.append(str(directory))
    return out


DEFAULTS = EntryLoggerSettings(preallocation_enabled=False)


def new_logger(dirs: list[str], settings: EntryLoggerSettings = DEFAULTS) -> EntryLogger:
    return EntryLogger(OsFileSystem(), dirs, settings, random.Random(0))


# --- DefaultEntryLogTest ----------------------------------------------------------------------


def _four_entries(logger: EntryLogger) -> None:
    for ledger_id, entry_id in [(1, 1), (3, 1), (2, 1), (1, 2)]:
        add(logger, ledger_id, entry_id)


def test_recover_from_ledgers_map(tmp_path: Path) -> None:
    # testRecoverFromLedgersMap: the map written at rotation gives {1: 60, 2: 30, 3: 30}.
    logger = new_logger(os_dirs(tmp_path, 1))
    _four_entries(logger)
    logger.rotate()
    logger.checkpoint()
    result = logger.extract_metadata(EntryLogId(0))
    assert result.source == "map"
    assert dict(result.metadata.ledgers) == {1: 60, 2: 30, 3: 30}
    assert 4 not in result.metadata.ledgers
    assert result.metadata.total_bytes == 120


def _rewrite_header(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(data)


def test_ledgers_map_is_empty_falls_back_to_scan(tmp_path: Path) -> None:
    # testLedgersMapIsEmpty: a header with a map offset but a count of 0 is not trusted.
    dirs = os_dirs(tmp_path, 1)
    logger = new_logger(dirs)
    _four_entries(logger)
    logger.rotate()
    logger.close()
    _rewrite_header(
        Path(dirs[0]) / "0.log", LEDGERS_MAP_OFFSET_POSITION, (40).to_bytes(8) + bytes(4)
    )
    result = new_logger(dirs).extract_metadata(EntryLogId(0))
    assert result.source == "scan"
    assert result.fallback_reason is not None
    assert dict(result.metadata.ledgers) == {1: 60, 2: 30, 3: 30}
    assert result.metadata.total_bytes == 120


def test_recover_from_ledgers_map_on_v0_entry_log(tmp_path: Path) -> None:
    # testRecoverFromLedgersMapOnV0EntryLog: version 0 and no map info: scan.
    dirs = os_dirs(tmp_path, 1)
    logger = new_logger(dirs)
    _four_entries(logger)
    logger.rotate()
    logger.close()
    _rewrite_header(Path(dirs[0]) / "0.log", HEADER_VERSION_POSITION, bytes(4 + 8))
    result = new_logger(dirs).extract_metadata(EntryLogId(0))
    assert result.source == "scan"
    assert dict(result.metadata.ledgers) == {1: 60, 2: 30, 3: 30}


def test_corrupt_entry_log(tmp_path: Path) -> None:
    # testCorruptEntryLog: the last entry torn by truncation is not counted.
    dirs = os_dirs(tmp_path, 1)
    logger = new_logger(dirs)
    add(logger, 1, 1)
    add(logger, 3, 1)
    add(logger, 2, 1)
    logger.flush()
    logger.close()
    path = Path(dirs[0]) / "0.log"
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size - 10)
    result = new_logger(dirs).extract_metadata(EntryLogId(0))
    assert result.source == "scan"
    assert dict(result.metadata.ledgers) == {1: 30, 3: 30}
    assert result.metadata.total_bytes == 60
    assert result.scan is not None
    assert result.scan.torn_tail_bytes == 30 - 10


def test_missing_log_id(tmp_path: Path) -> None:
    # testMissingLogId: deleting lastId between restarts loses no log; all entries readable.
    dirs = os_dirs(tmp_path, 1)
    num_logs, num_entries = 3, 10
    positions: dict[tuple[int, int], Location] = {}

    def one_run(ledger_id: int) -> None:
        logger = new_logger(dirs)
        for entry_id in range(num_entries):
            positions[(ledger_id, entry_id)] = add(logger, ledger_id, entry_id)
        logger.flush()
        logger.close()

    for ledger_id in range(num_logs):
        one_run(ledger_id)
    (Path(dirs[0]) / "lastId").unlink()
    for ledger_id in range(num_logs, 2 * num_logs):
        one_run(ledger_id)
    reader = new_logger(dirs)
    assert reader.log_ids() == list(range(2 * num_logs))
    for (ledger_id, entry_id), location in positions.items():
        assert location_log_id(location) == ledger_id
        data = read(reader, ledger_id, entry_id, location)
        assert data == generate_entry(ledger_id, entry_id)
        assert data[16:] == f"ledger-{ledger_id}-{entry_id}".encode()


def test_defer_create_new_log(tmp_path: Path) -> None:
    # testDeferCreateNewLog: no log exists until the first add.
    logger = new_logger(os_dirs(tmp_path, 1))
    assert logger.state().current_log_id is None
    add(logger, 1, 1)
    assert logger.current_log_id == 0


def test_defer_create_new_log_without_enough_disk_space(tmp_path: Path) -> None:
    # testDeferCreateNewLogWithoutEnoughDiskSpaces: the add fails and no log is created.
    logger = new_logger(os_dirs(tmp_path, 1))
    logger.ledger_dirs.mark_full(logger.ledger_dirs.dirs[0])
    with pytest.raises(NoWritableLedgerDir):
        add(logger, 1, 1)
    assert logger.current_log_id is None


def test_add_entry_failure_on_disk_full(tmp_path: Path) -> None:
    # testAddEntryFailureOnDiskFull: the active log's dir is marked full; the next add goes to
    # a new log in the other dir and every entry stays readable.
    logger = new_logger(os_dirs(tmp_path, 2))
    one = add(logger, 1, 1)
    two = add(logger, 2, 1)
    full_dir = active_log(logger).directory
    logger.ledger_dirs.mark_full(full_dir)
    three = add(logger, 3, 1)
    assert location_log_id(three) == location_log_id(one) + 1
    assert active_log(logger).directory != full_dir
    assert read(logger, 1, 1, one) == generate_entry(1, 1)
    assert read(logger, 2, 1, two) == generate_entry(2, 1)
    assert read(logger, 3, 1, three) == generate_entry(3, 1)


def test_pre_allocate_log(tmp_path: Path) -> None:
    # testPreAllocateLog, with preallocation as an explicit step.
    dirs = os_dirs(tmp_path, 1)
    logger = new_logger(dirs, EntryLoggerSettings(preallocation_enabled=True))
    logger.rotate()
    assert logger.preallocate() == 1
    add(logger, 1, 1)
    assert logger.manager.preallocated() is not None
    logger.close()
    disabled = new_logger(dirs, EntryLoggerSettings(preallocation_enabled=False))
    assert disabled.preallocate() is None
    add(disabled, 2, 1)
    assert disabled.manager.preallocated() is None


def test_get_entry_logs_set(tmp_path: Path) -> None:
    # testGetEntryLogsSet (without the preallocated extra log BookKeeper makes on its own).
    logger = new_logger(os_dirs(tmp_path, 1))
    assert logger.log_ids() == []
    logger.rotate()
    logger.checkpoint()
    assert logger.log_ids() == [0]
    logger.rotate()
    logger.checkpoint()
    assert logger.log_ids() == [0, 1]
    logger.rotate()
    assert logger.log_ids() == [0, 1, 2]


def test_flush_interval_in_bytes() -> None:
    # testFlushIntervalInBytes: the header and the first entry stay unpersisted; the entry that
    # reaches flushEntrylogBytes forces the log, so both survive a crash with no flush call.
    flush_interval = 5000
    disk, dirs = sim_disk(2)
    config = EntryLoggerSettings(flush_entrylog_bytes=flush_interval, preallocation_enabled=False)
    logger = EntryLogger(disk, dirs, config, random.Random(0))
    first_size = 1000
    first = logger.add_entry(LedgerId(0), make_entry(0, 0, first_size))
    expected_unpersisted = 1024 + first_size + 4
    assert active_log(logger).channel.unpersisted_bytes == expected_unpersisted
    second_size = flush_interval - expected_unpersisted - 4
    second = logger.add_entry(LedgerId(0), make_entry(0, 1, second_size))
    assert active_log(logger).channel.unpersisted_bytes == 0
    disk.crash(LoseUnsynced())
    reopened = EntryLogger(disk, dirs, config, random.Random(0))
    assert reopened.read_entry(LedgerId(0), EntryId(0), first) == make_entry(0, 0, first_size)
    assert reopened.read_entry(LedgerId(0), EntryId(1), second) == make_entry(0, 1, second_size)


def test_entry_loggers_recent_entry_logs_status_through_the_writer(tmp_path: Path) -> None:
    # testEntryLoggersRecentEntryLogsStatus, driven by rotations and checkpoints.
    logger = new_logger(os_dirs(tmp_path, 2))
    assert logger.least_unflushed_log_id == 0
    add(logger, 1, 0)
    assert logger.least_unflushed_log_id == 0
    logger.rotate()
    logger.checkpoint()
    assert logger.least_unflushed_log_id == 1
    logger.rotate()
    logger.rotate()
    assert logger.least_unflushed_log_id == 1
    logger.checkpoint()
    assert logger.least_unflushed_log_id == 3


# --- CreateNewLogTest -----------------------------------------------------------------------


def test_create_new_log_checks_every_dir(tmp_path: Path) -> None:
    # testCreateNewLog (BOOKKEEPER-465): 1.log exists in one of many dirs; the new log's id
    # must not collide with it.
    dirs = os_dirs(tmp_path, 20)
    (Path(dirs[random.Random(5).randrange(20)]) / "1.log").write_bytes(b"")
    logger = new_logger(dirs)
    logger.rotate()
    assert logger.current_log_id is not None
    assert logger.current_log_id > 1


def test_create_new_log_with_no_writable_ledger_dirs(tmp_path: Path) -> None:
    # testCreateNewLogWithNoWritableLedgerDirs. Deviation: BookKeeper still creates the log
    # where minUsableSizeForEntryLogCreation bytes are free; bkref refuses with a typed error.
    dirs = os_dirs(tmp_path, 5)
    logger = new_logger(dirs)
    for directory in dirs:
        logger.ledger_dirs.mark_full(directory)
    with pytest.raises(NoWritableLedgerDir) as info:
        logger.rotate()
    assert all(d in str(info.value) for d in dirs)
    assert logger.log_ids() == []


def test_entry_log_creation_with_filled_dirs(tmp_path: Path) -> None:
    # testEntryLogCreationWithFilledDirs (single-log manager): the only non-full dir gets it.
    dirs = os_dirs(tmp_path, 10)
    logger = new_logger(dirs)
    logger.rotate()
    for directory in dirs[:-1]:
        logger.ledger_dirs.mark_full(directory)
    logger.rotate()
    assert active_log(logger).directory == dirs[-1]


def test_create_new_log_with_gaps(tmp_path: Path) -> None:
    # testCreateNewLogWithGaps: ids skip files that already exist.
    dirs = os_dirs(tmp_path, 4)
    logger = new_logger(dirs)
    assert logger.rotate() == 0
    (Path(dirs[1]) / "1.log").write_bytes(b"")
    assert logger.rotate() == 2
    (Path(dirs[3]) / "3.log").write_bytes(b"")
    assert logger.rotate() == 4


def test_last_id_compatible_between_restarts(tmp_path: Path) -> None:
    # testLastIdCompatibleBetweenDefaultAndDirectEntryLogger: a stale lastId of 3 in half,
    # then all, of the dirs does not move the last id below 9.
    fs = OsFileSystem()
    dirs = os_dirs(tmp_path, 6)
    logger = new_logger(dirs)
    for _ in range(10):
        logger.rotate()
    assert logger.current_log_id == 9
    logger.close()
    for directory in dirs[:3]:
        write_last_id(fs, directory, 3)
    assert LogIdAllocator(fs, dirs).last_id == 9
    for directory in dirs:
        write_last_id(fs, directory, 3)
    assert LogIdAllocator(fs, dirs).last_id == 9
    assert new_logger(dirs).rotate() == 10


# --- TestEntryLogIds through the writer ---------------------------------------------------------


def _two_big_entries(dirs: list[str]) -> tuple[int, int]:
    """newLegacyEntryLogger(1024, ...): every add past the first rotates."""
    logger = new_logger(dirs, EntryLoggerSettings(log_size_limit_bytes=1024))
    first = location_log_id(logger.add_entry(LedgerId(1), make_entry(1, 1, 2048)))
    second = location_log_id(logger.add_entry(LedgerId(1), make_entry(1, 2, 2048)))
    logger.close()
    return first, second


def test_no_stomping(tmp_path: Path) -> None:
    # testNoStomping: the writer, then the id allocator, then the writer: ids only grow.
    fs = OsFileSystem()
    dirs = os_dirs(tmp_path, 1)
    first, second = _two_big_entries(dirs)
    assert second > first
    allocator = LogIdAllocator(fs, dirs)
    third = allocator.next_id()
    assert third > second
    (Path(dirs[0]) / f"{third:x}.log").write_bytes(b"")
    fourth = allocator.next_id()
    assert fourth > third
    (Path(dirs[0]) / f"{fourth:x}.log").write_bytes(b"")
    fifth, sixth = _two_big_entries(dirs)
    assert fourth < fifth < sixth


def test_multi_directory(tmp_path: Path) -> None:
    # testMultiDirectory: ids only grow across three directories and restarts.
    fs = OsFileSystem()
    dirs = os_dirs(tmp_path, 3)
    logger = new_logger(dirs, EntryLoggerSettings(log_size_limit_bytes=1024))
    ids = [
        location_log_id(logger.add_entry(LedgerId(1), make_entry(1, e, 2048))) for e in (1, 2, 3)
    ]
    logger.close()
    assert ids == sorted(set(ids))
    fourth = LogIdAllocator(fs, dirs).next_id()
    assert fourth > ids[-1]
    (Path(dirs[1]) / f"{fourth:x}.log").write_bytes(b"")
    fifth, _ = _two_big_entries(dirs)
    assert fifth > fourth


def test_wrap_around_through_the_writer() -> None:
    # testWrapAround: an existing log MAX-1 and no lastId: the writer's first log is 0.
    disk = SimDisk()
    disk.mkdir("/bk/current")
    disk.open(f"/bk/current/{2**31 - 2:x}.log", create=True).close()
    logger = EntryLogger(disk, ["/bk/current"], DEFAULTS, random.Random(0))
    assert location_log_id(add(logger, 1, 1)) == 0
