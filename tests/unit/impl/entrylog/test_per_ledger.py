"""impl/entrylog/per_ledger.py: an active entry log per ledger (entryLogPerLedgerEnabled).

Ports of BookKeeper's tests with their expected outcomes (DefaultEntryLogTest:
testEntryLoggerAddEntryWhenLedgerDirsAreFull, testEntryLogManagerExpiryRemoval,
testExpiryRemovalByAccessingOnAnotherThread, testCacheMaximumSizeEvictionPolicy,
testAppendLedgersMapOnCacheRemoval, testEntryLogManagerForEntryLogPerLedger,
testFlushIntervalInBytes, testLongLedgerIdsWithEntryLogPerLedger, testSwappingEntryLogManager*;
CreateNewLogTest: testEntryLogPerLedgerCreationWithPreAllocation (without preallocation),
testEntryLogCreationWithFilledDirs, testLedgerDirsUniformityDuringCreation), each naming the Java
test and where bkref differs on purpose. Then our own: rotation at logSizeLimit per ledger,
leastUnflushedLogId over several active logs, reads from active, rotated and flushed logs, a
restart, switching managers on the same directories, ENOSPC, a Hypothesis schedule with the
clock moving, and a Bookie end to end (checkpoint, crash, replay, GC, a forced compaction).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import ServerConfig, load_config
from impl.entrylog.compactor import TransactionalCompactor
from impl.entrylog.ledger_dirs import DirState
from impl.entrylog.logger import EntryLogger, EntryLoggerSettings, settings_from_config
from impl.entrylog.manager import (
    EVICTED_AT_MOST_ACTIVE,
    EVICTED_ON_EXPIRY,
    MOVED_OFF_FULL_DIR,
    LogChannel,
    LogState,
    SingleEntryLogManager,
)
from impl.entrylog.per_ledger import PerLedgerEntryLogManager
from impl.entrylog.reader import extract_metadata, scan
from impl.format.entry_log import LOGFILE_HEADER_SIZE
from impl.format.names import log_file_name
from impl.fs.api import FileSystem
from models.fs.simdisk import SimDisk
from spec.crash import KeepAll, LoseUnsynced
from spec.errors import ConfigError, FsNoSpace, NoLedger, NoWritableLedgerDir
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id
from tests.unit.impl.bookie.test_bookie import KEY, make_config, open_bookie
from tests.unit.impl.entrylog.test_logger import add, armed, payload, read, sim_disk

HEADER = LOGFILE_HEADER_SIZE
#: ``payload(l, e)``: 16 id bytes + 10 body bytes, and 4 bytes of size before it.
RECORD = 30
MS = 1_000


def pl_settings(**overrides: int | bool) -> EntryLoggerSettings:
    base: dict[str, int | bool] = {
        "write_buffer_bytes": 64,
        "preallocation_enabled": False,
        "per_ledger": True,
    }
    base.update(overrides)
    return EntryLoggerSettings(**base)  # type: ignore[arg-type]


def new_logger(
    fs: FileSystem, dirs: list[str], clock: ManualClock | None = None, **overrides: int | bool
) -> EntryLogger:
    return EntryLogger(
        fs, dirs, pl_settings(**overrides), random.Random(0), clock=clock or ManualClock()
    )


def manager_of(logger: EntryLogger) -> PerLedgerEntryLogManager:
    manager = logger.manager
    assert isinstance(manager, PerLedgerEntryLogManager)
    return manager


def log_of(logger: EntryLogger, ledger_id: int) -> LogChannel:
    log = manager_of(logger).log_for_ledger(ledger_id)
    assert log is not None, f"ledger {ledger_id} has no current log"
    return log


def dir_of(logger: EntryLogger, ledger_id: int) -> str:
    return log_of(logger, ledger_id).directory


def current_id(logger: EntryLogger) -> int | None:
    """``current_log_id`` read through a call, so the type checker does not narrow it."""
    return logger.current_log_id


def requested(logger: EntryLogger) -> bool:
    return logger.manager.rotate_requested


def rotated_ids(logger: EntryLogger) -> list[int]:
    return [log.log_id for log in logger.manager.rotated()]


def states(logger: EntryLogger) -> dict[int, LogState]:
    return {d.log_id: d.state for d in logger.state().logs}


def sealed_map(fs: FileSystem, logger: EntryLogger, log_id: int) -> dict[int, int]:
    """The ledgers map log ``log_id`` was sealed with (it must be sealed)."""
    path = logger.find_log(EntryLogId(log_id))
    assert path is not None
    result = extract_metadata(fs.open(path, read_only=True), EntryLogId(log_id))
    assert result.source == "map", result
    return dict(result.metadata.ledgers)


# --- settings and wiring ----------------------------------------------------------------------


def test_the_logger_builds_the_manager_the_settings_name() -> None:
    disk, dirs = sim_disk(1)
    assert isinstance(new_logger(disk, dirs).manager, PerLedgerEntryLogManager)
    single = EntryLogger(disk, dirs, EntryLoggerSettings(), random.Random(0))
    assert isinstance(single.manager, SingleEntryLogManager)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"entrylog_map_access_expiry_s": -1}, "entrylogMapAccessExpiryTimeInSeconds"),
        ({"maximum_active_entry_logs": 0}, "maximumNumberOfActiveEntryLogs"),
    ],
)
def test_bad_per_ledger_settings_name_the_key(overrides: dict[str, int], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        EntryLoggerSettings(**overrides)  # type: ignore[arg-type]


def test_settings_from_config_read_the_per_ledger_keys() -> None:
    config = load_config(
        "entryLogPerLedgerEnabled=true\nentrylogMapAccessExpiryTimeInSeconds=7\n"
        "maximumNumberOfActiveEntryLogs=3\n",
        "test.conf",
        [],
    )
    got = settings_from_config(config)
    assert (got.per_ledger, got.entrylog_map_access_expiry_s, got.maximum_active_entry_logs) == (
        True,
        7,
        3,
    )
    defaults = settings_from_config(load_config(None, "", []))
    assert (defaults.per_ledger, defaults.entrylog_map_access_expiry_s) == (False, 300)
    assert defaults.maximum_active_entry_logs == 500


# --- a log per ledger -------------------------------------------------------------------------


def test_each_ledger_gets_its_own_log_from_the_shared_counter() -> None:
    # testSwappingEntryLogManager (per-ledger half): ledger i's entries all go to log i.
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs)
    assert current_id(logger) is None
    assert logger.manager.active() is None
    for entry_id in range(3):
        for ledger_id in range(4):
            location = add(logger, ledger_id, entry_id)
            assert location_log_id(location) == ledger_id
            assert current_id(logger) == ledger_id  # the log most recently added to
            logger.check_invariants()
    manager = manager_of(logger)
    assert [log.log_id for log in manager.actives()] == [0, 1, 2, 3]
    for ledger_id in range(4):
        assert dict(log_of(logger, ledger_id).ledgers) == {ledger_id: 3 * RECORD}
    assert states(logger) == dict.fromkeys(range(4), LogState.ACTIVE)
    assert logger.least_unflushed_log_id == 0
    assert disk.read_file(f"{dirs[0]}/lastId") == b"3\n"
    assert manager.ledgers_by_access() == (0, 1, 2, 3)
    add(logger, 1, 3)
    assert manager.ledgers_by_access() == (0, 2, 3, 1)
    assert current_id(logger) == 1


def test_long_ledger_ids_with_entry_log_per_ledger() -> None:
    # testLongLedgerIdsWithEntryLogPerLedger: ledgers near Long.MAX_VALUE, checkpoint, read.
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs)
    ledgers = [2**63 - 1 - i for i in range(5)]
    locations = {(lid, e): add(logger, lid, e) for lid in ledgers for e in range(4)}
    logger.checkpoint()
    for (lid, e), location in locations.items():
        assert read(logger, lid, e, location) == payload(lid, e)
    logger.check_invariants()


def test_ledger_dirs_uniformity_during_creation() -> None:
    # CreateNewLogTest.testLedgerDirsUniformityDuringCreation: a new log goes to the writable
    # directory with the fewest current logs (ties: the first in directory order).
    disk, dirs = sim_disk(3)
    logger = new_logger(disk, dirs)

    def highest_frequency() -> int:
        counts: dict[str, int] = {}
        for log in manager_of(logger).actives():
            counts[log.directory] = counts.get(log.directory, 0) + 1
        return max(counts.values())

    for ledger_id in range(3):
        add(logger, ledger_id, 0)
    assert [dir_of(logger, lid) for lid in range(3)] == dirs
    assert highest_frequency() == 1
    add(logger, 3, 0)
    assert dir_of(logger, 3) == dirs[0]  # the tie goes to the first directory
    assert highest_frequency() == 2
    for ledger_id in (4, 5):
        add(logger, ledger_id, 0)
    assert highest_frequency() == 2
    assert [dir_of(logger, lid) for lid in (4, 5)] == dirs[1:]


def test_per_ledger_creation_skips_existing_files_and_tracks_least_unflushed(
    tmp_path: Path,
) -> None:
    # CreateNewLogTest.testEntryLogPerLedgerCreationWithPreAllocation, without preallocation
    # (bkref's per-ledger mode never preallocates): six ledgers take logs 0..5; a stray 6.log
    # makes ledger 1's next log 7; leastUnflushedLogId waits for log 0.
    fs, dirs = armed(tmp_path, 2)
    logger = new_logger(fs, dirs, log_size_limit_bytes=HEADER + RECORD)  # one entry per log
    for ledger_id in range(6):
        add(logger, ledger_id, 0)
    manager = manager_of(logger)
    assert len(manager.actives()) == 6
    assert rotated_ids(logger) == []
    (Path(dirs[1]) / "6.log").touch()
    assert location_log_id(add(logger, 1, 1)) == 7
    assert len(manager.actives()) == 6
    assert rotated_ids(logger) == [1]
    logger.flush()
    assert rotated_ids(logger) == []
    assert logger.least_unflushed_log_id == 0  # log 0 is still current
    add(logger, 0, 1)  # rotates log 0
    assert rotated_ids(logger) == [0]
    assert logger.least_unflushed_log_id == 0
    logger.flush()
    assert logger.least_unflushed_log_id == 2
    for log_id in (0, 1):
        assert states(logger)[log_id] is LogState.FLUSHED
    logger.check_invariants()


# --- full directories -------------------------------------------------------------------------


def test_entry_logger_add_entry_when_ledger_dirs_are_full(tmp_path: Path) -> None:
    # DefaultEntryLogTest.testEntryLoggerAddEntryWhenLedgerDirsAreFull.
    fs, dirs = armed(tmp_path, 3)
    logger = new_logger(fs, dirs)
    for ledger_id in range(3):
        add(logger, ledger_id, 1)
    dir0, dir1, dir2 = (dir_of(logger, lid) for lid in range(3))
    assert len({dir0, dir1, dir2}) == 3  # three ledgers, three directories
    assert rotated_ids(logger) == []

    def add_all(entry_id: int) -> list[str]:
        for ledger_id in range(3):
            add(logger, ledger_id, entry_id)
        logger.check_invariants()
        return [dir_of(logger, lid) for lid in range(3)]

    # dir0 full: ledger 0's next add moves its log off it; the others stay.
    logger.ledger_dirs.mark_full(dir0)
    assert requested(logger)
    found = add_all(2)
    assert found[0] != dir0 and found[1:] == [dir1, dir2]
    assert len(rotated_ids(logger)) == 1
    assert manager_of(logger).events == {MOVED_OFF_FULL_DIR: 1}
    # dir1 full too: every ledger ends up in dir2.
    logger.ledger_dirs.mark_full(dir1)
    assert add_all(3) == [dir2, dir2, dir2]
    rotated = len(rotated_ids(logger))
    assert 2 <= rotated <= 3
    # Every directory full: no rotation, the ledgers append where they are.
    logger.ledger_dirs.mark_full(dir2)
    assert add_all(4) == [dir2, dir2, dir2]
    assert len(rotated_ids(logger)) == rotated
    # dir1 writable again (the next disk check sees it): every log moves there.
    fs.usage_by_dir = {dir0: 0.99, dir1: 0.0, dir2: 0.99}
    assert logger.check_dirs() == {
        dir0: DirState.FULL,
        dir1: DirState.WRITABLE,
        dir2: DirState.FULL,
    }
    assert add_all(5) == [dir1, dir1, dir1]
    assert len(rotated_ids(logger)) == rotated + 3
    # Every rotated log was sealed with the map of its one ledger.
    logger.checkpoint()
    flushed = [d for d in logger.state().logs if d.state is LogState.FLUSHED]
    assert len(flushed) == rotated + 3
    for description in flushed:
        assert sealed_map(fs, logger, description.log_id) == dict(description.ledgers)
        assert len(description.ledgers) == 1


def test_entry_log_creation_with_filled_dirs(tmp_path: Path) -> None:
    # CreateNewLogTest.testEntryLogCreationWithFilledDirs: with all but the last directory
    # full the new log goes to the last. With every directory full BookKeeper still creates
    # one (minUsableSizeForEntryLogCreation); bkref refuses a new ledger's log with a typed
    # error (not built: ledger_dirs.py), while ledgers that have a log go on appending.
    fs, dirs = armed(tmp_path, 3)
    logger = new_logger(fs, dirs)
    add(logger, 0, 0)
    for directory in dirs[:-1]:
        logger.ledger_dirs.mark_full(directory)
    add(logger, 1, 0)
    assert dir_of(logger, 1) == dirs[-1]
    logger.ledger_dirs.mark_full(dirs[-1])
    with pytest.raises(NoWritableLedgerDir, match="no writable ledger directory"):
        add(logger, 2, 0)
    assert manager_of(logger).log_for_ledger(2) is None
    assert location_log_id(add(logger, 0, 1)) == 0
    assert location_log_id(add(logger, 1, 1)) == 1
    logger.check_invariants()


def test_no_writable_dir_refuses_a_new_ledger_before_evicting_anything() -> None:
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs, maximum_active_entry_logs=1)
    add(logger, 0, 0)
    for directory in dirs:
        logger.ledger_dirs.mark_full(directory)
    with pytest.raises(NoWritableLedgerDir):
        add(logger, 1, 0)
    assert log_of(logger, 0).log_id == 0  # not evicted for a log that could not be made
    assert rotated_ids(logger) == []
    logger.check_invariants()


def test_almost_full_does_not_move_a_log_and_writable_clears_the_request(tmp_path: Path) -> None:
    # Java's per-ledger listener reacts to diskFull and diskWritable only: almost full sets
    # nothing, and a full directory that drops back to almost full (diskJustWritable) keeps
    # the request; one that becomes writable clears it.
    fs, dirs = armed(tmp_path, 2)
    logger = new_logger(fs, dirs)
    add(logger, 1, 0)
    home = dir_of(logger, 1)
    other = next(d for d in dirs if d != home)
    fs.usage_by_dir = {home: 0.93}
    assert logger.check_dirs()[home] is DirState.ALMOST_FULL
    assert not requested(logger)
    assert location_log_id(add(logger, 1, 1)) == 0
    fs.usage_by_dir = {home: 0.99}
    logger.check_dirs()
    assert requested(logger)
    fs.usage_by_dir = {home: 0.93}
    assert logger.check_dirs()[home] is DirState.ALMOST_FULL
    assert requested(logger)  # still: the log moves at its next add
    assert location_log_id(add(logger, 1, 2)) == 1
    assert dir_of(logger, 1) == other  # fewer current logs there than in home
    assert not requested(logger)
    fs.usage_by_dir = {other: 0.99}
    logger.check_dirs()
    assert requested(logger)
    fs.usage_by_dir = {}
    logger.check_dirs()  # writable again before the ledger's next add
    assert not requested(logger)
    assert location_log_id(add(logger, 1, 3)) == 1
    logger.check_invariants()


def test_a_full_disk_gives_a_typed_error_and_loses_nothing() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs)
    written = {(lid, e): add(logger, lid, e) for e in range(3) for lid in (1, 2)}
    space = disk.disk_space("/bk")
    disk.set_capacity("/bk", space.total_bytes - space.free_bytes)
    with pytest.raises(NoWritableLedgerDir) as info:
        for e in range(3, 60):
            for lid in (1, 2):
                written[(lid, e)] = add(logger, lid, e)
    assert isinstance(info.value.__cause__, FsNoSpace)
    assert logger.ledger_dirs.state(dirs[0]) is DirState.FULL
    logger.check_invariants()
    for (lid, e), location in written.items():
        assert read(logger, lid, e, location) == payload(lid, e)
    disk.set_capacity("/bk", None)
    assert logger.check_dirs()[dirs[0]] is DirState.WRITABLE
    logger.checkpoint()
    for (lid, e), location in written.items():
        assert read(logger, lid, e, location) == payload(lid, e)
    logger.check_invariants()


# --- eviction ---------------------------------------------------------------------------------


def test_a_ledger_not_added_to_for_the_expiry_time_is_evicted_at_the_next_add() -> None:
    # testEntryLogManagerExpiryRemoval and testExpiryRemovalByAccessingOnAnotherThread: the
    # log is sealed (map appended) and rotated; an add within the period keeps it.
    disk, dirs = sim_disk(2)
    clock = ManualClock()
    logger = new_logger(disk, dirs, clock, entrylog_map_access_expiry_s=1)
    add(logger, 0, 0)
    clock.advance_ms(600)
    add(logger, 1, 0)
    clock.advance_ms(399)  # ledger 0 idle for 999 ms: kept
    add(logger, 1, 1)
    assert log_of(logger, 0).log_id == 0 and rotated_ids(logger) == []
    clock.advance_ms(1)  # 1000 ms exactly: expired (Guava's now - access >= expiry)
    add(logger, 1, 2)
    manager = manager_of(logger)
    assert manager.log_for_ledger(0) is None
    assert rotated_ids(logger) == [0]
    assert log_of(logger, 1).log_id == 1
    assert states(logger) == {0: LogState.ROTATED, 1: LogState.ACTIVE}
    assert sealed_map(disk, logger, 0) == {0: RECORD}
    # The ledger's next add takes a new id.
    assert location_log_id(add(logger, 0, 1)) == 2
    # Counted as what it was (the coverage probes read it, Bookie.entry_log_events).
    assert manager.events == {EVICTED_ON_EXPIRY: 1}
    logger.check_invariants()


def test_expired_ledgers_are_evicted_at_a_checkpoint_and_flushed_by_it() -> None:
    disk, dirs = sim_disk(2)
    clock = ManualClock()
    logger = new_logger(disk, dirs, clock, entrylog_map_access_expiry_s=300)
    locations = {(lid, 0): add(logger, lid, 0) for lid in (0, 1, 2)}
    clock.advance_ms(299 * MS)
    logger.checkpoint()
    assert len(manager_of(logger).actives()) == 3
    assert logger.least_unflushed_log_id == 0
    add(logger, 2, 1)
    clock.advance_ms(1 * MS)  # ledgers 0 and 1 idle for 300 s, ledger 2 for 1 s
    logger.checkpoint()
    assert states(logger) == {0: LogState.FLUSHED, 1: LogState.FLUSHED, 2: LogState.ACTIVE}
    assert logger.least_unflushed_log_id == 2
    assert sealed_map(disk, logger, 0) == {0: RECORD}
    assert sealed_map(disk, logger, 1) == {1: RECORD}
    for (lid, e), location in locations.items():
        assert read(logger, lid, e, location) == payload(lid, e)
    logger.check_invariants()


def test_an_expiry_of_zero_starts_a_new_log_at_every_add() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs, entrylog_map_access_expiry_s=0)
    ids = [location_log_id(add(logger, 5, e)) for e in range(3)]
    assert ids == [0, 1, 2]
    assert rotated_ids(logger) == [0, 1]
    logger.check_invariants()


def test_the_least_recently_added_to_ledger_is_evicted_past_the_maximum() -> None:
    # testAppendLedgersMapOnCacheRemoval with maximumNumberOfActiveEntryLogs=2: the evicted
    # log is sealed with its map, and (after a checkpoint) its metadata comes from the map.
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs, maximum_active_entry_logs=2)
    for e in range(4):
        add(logger, 0, e, body_bytes=200)
    add(logger, 1, 0)
    add(logger, 0, 4, body_bytes=200)  # ledger 1 is now the least recently added to
    add(logger, 2, 0)
    manager = manager_of(logger)
    assert manager.log_for_ledger(1) is None
    assert [log.log_id for log in manager.actives()] == [0, 2]
    assert rotated_ids(logger) == [1]
    add(logger, 3, 0)  # evicts ledger 0's log, with its five entries
    assert rotated_ids(logger) == [1, 0]
    assert manager.events == {EVICTED_AT_MOST_ACTIVE: 2}
    logger.checkpoint()
    assert sealed_map(disk, logger, 0) == {0: 5 * (200 + 16 + 4)}
    assert sealed_map(disk, logger, 1) == {1: RECORD}
    logger.check_invariants()


def test_cache_maximum_size_eviction_policy() -> None:
    # testCacheMaximumSizeEvictionPolicy: never more than the maximum current logs.
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs, maximum_active_entry_logs=20)
    for ledger_id in range(30):
        add(logger, ledger_id, 0)
        assert len(manager_of(logger).actives()) <= 20
        logger.check_invariants()
    assert len(rotated_ids(logger)) == 10


# --- rotation, checkpoint, leastUnflushedLogId ------------------------------------------------


def test_each_ledger_rotates_at_the_size_limit_on_its_own() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs, log_size_limit_bytes=HEADER + 2 * RECORD)
    a = [add(logger, 1, e) for e in range(2)]
    b = add(logger, 2, 0)
    assert {location_log_id(x) for x in a} == {0} and location_log_id(b) == 1
    assert log_of(logger, 1).channel.position == HEADER + 2 * RECORD  # == the limit: kept
    c = add(logger, 1, 2)
    assert location_log_id(c) == 2
    assert rotated_ids(logger) == [0]
    assert log_of(logger, 2).log_id == 1  # ledger 2's log is untouched
    assert sealed_map(disk, logger, 0) == {1: 2 * RECORD}
    logger.check_invariants()


@pytest.mark.parametrize("bound", [0, 10_000])
def test_a_rotation_from_an_add_forces_the_old_log_when_flush_entrylog_bytes_is_set(
    bound: int,
) -> None:
    # flushAndForceWriteIfRegularFlush(false) before createNewLog, only with a bound.
    disk, dirs = sim_disk(1)
    logger = new_logger(
        disk,
        dirs,
        log_size_limit_bytes=HEADER + 2 * RECORD,
        flush_entrylog_bytes=bound,
        write_buffer_bytes=4096,
    )
    add(logger, 1, 0)
    add(logger, 1, 1)
    assert log_of(logger, 1).channel.durable_position == 0
    add(logger, 1, 2)  # rotates
    (old,) = logger.manager.rotated()
    forced = old.channel.durable_position >= HEADER + 2 * RECORD
    assert forced is (bound > 0)


def test_rotate_seals_every_active_log_without_a_replacement() -> None:
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs)
    assert logger.rotate() is None  # no ledger has a log
    for ledger_id in (4, 2, 9):
        add(logger, ledger_id, 0)
    assert logger.rotate() == 2  # the highest id sealed
    assert manager_of(logger).actives() == ()
    assert current_id(logger) is None
    assert rotated_ids(logger) == [0, 1, 2]
    for log_id, ledger_id in ((0, 4), (1, 2), (2, 9)):
        assert sealed_map(disk, logger, log_id) == {ledger_id: RECORD}
    assert location_log_id(add(logger, 2, 1)) == 3
    logger.check_invariants()


def test_entry_log_manager_for_entry_log_per_ledger() -> None:
    # DefaultEntryLogTest.testEntryLogManagerForEntryLogPerLedger: 20 ledgers, a new log for
    # each (here: an explicit rotate), the flush makes every rotated log flushed and
    # leastUnflushedLogId 20, and the current logs have nothing unpersisted after it.
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs, write_buffer_bytes=65536, flush_entrylog_bytes=10_000_000)
    for entry_id in range(5):
        for ledger_id in range(20):
            add(logger, ledger_id, entry_id)
    for ledger_id in range(20):
        assert log_of(logger, ledger_id).channel.unpersisted_bytes > HEADER
    logger.rotate()
    assert len(rotated_ids(logger)) == 20
    for entry_id in range(5, 10):
        for ledger_id in range(20):
            add(logger, ledger_id, entry_id)
    assert logger.least_unflushed_log_id == 0
    logger.flush()
    assert rotated_ids(logger) == []
    assert logger.least_unflushed_log_id == 20
    for ledger_id in range(20):
        assert log_of(logger, ledger_id).channel.unpersisted_bytes == 0
    logger.check_invariants()


def test_least_unflushed_stays_at_the_smallest_unflushed_of_many_active_logs() -> None:
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs, log_size_limit_bytes=HEADER + 2 * RECORD)
    for ledger_id in range(3):
        add(logger, ledger_id, 0)  # logs 0, 1, 2
    logger.checkpoint()
    assert logger.least_unflushed_log_id == 0  # every log is active
    add(logger, 1, 1)
    add(logger, 1, 2)  # ledger 1 rotates: log 1 sealed, log 3 active
    logger.checkpoint()
    assert states(logger)[1] is LogState.FLUSHED
    assert logger.least_unflushed_log_id == 0  # log 0 is still active
    add(logger, 0, 1)
    add(logger, 0, 2)  # log 0 sealed, log 4 active
    assert logger.least_unflushed_log_id == 0  # rotated, not flushed yet
    logger.checkpoint()
    assert logger.least_unflushed_log_id == 2
    logger.rotate()
    logger.checkpoint()
    assert logger.least_unflushed_log_id == 5
    logger.check_invariants()


def test_flush_interval_in_bytes() -> None:
    # DefaultEntryLogTest.testFlushIntervalInBytes: flushEntrylogBytes forces the ledger's
    # log without a flush; a crash then keeps both entries, read by a single-log logger.
    disk, dirs = sim_disk(2)
    flush_bytes = 5000
    logger = new_logger(disk, dirs, flush_entrylog_bytes=flush_bytes, write_buffer_bytes=65536)
    first_body = 1000 - 16
    loc0 = add(logger, 0, 0, body_bytes=first_body)
    expected = HEADER + 1000 + 4
    assert log_of(logger, 0).channel.unpersisted_bytes == expected
    second_body = flush_bytes - expected - 16
    loc1 = add(logger, 0, 1, body_bytes=second_body)
    assert log_of(logger, 0).channel.unpersisted_bytes == 0
    disk.crash(LoseUnsynced())
    single = EntryLogger(disk, dirs, EntryLoggerSettings(), random.Random(0))
    assert isinstance(single.manager, SingleEntryLogManager)
    assert read(single, 0, 0, loc0) == payload(0, 0, first_body)
    assert read(single, 0, 1, loc1) == payload(0, 1, second_body)


def test_preallocate_does_nothing_in_per_ledger_mode() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs, preallocation_enabled=True)
    assert logger.preallocate() is None
    add(logger, 1, 0)
    assert logger.preallocate() is None
    assert logger.manager.preallocated() is None
    assert logger.log_ids() == [0]


def test_a_compaction_log_comes_from_the_shared_counter() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs)
    add(logger, 1, 0)
    compaction = logger.create_compaction_log()
    assert compaction.log_id == 1
    compaction.channel.close()
    assert location_log_id(add(logger, 2, 0)) == 2


# --- reads, restart, switching managers -------------------------------------------------------


def test_reads_see_active_rotated_and_flushed_logs() -> None:
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs, write_buffer_bytes=4096, log_size_limit_bytes=HEADER + 200)
    written: dict[tuple[int, int], Location] = {}

    def check() -> None:
        for (lid, e), location in written.items():
            assert read(logger, lid, e, location) == payload(lid, e)

    for e in range(4):
        for lid in (1, 2, 3):
            written[(lid, e)] = add(logger, lid, e)
    assert disk.read_file(f"{log_of(logger, 1).path}") == b""  # all in the write buffers
    check()  # from the active logs' buffers
    for e in range(4, 8):
        written[(1, e)] = add(logger, 1, e)  # ledger 1 rotates
    assert rotated_ids(logger)
    check()  # rotated
    logger.checkpoint()
    check()  # flushed, through read handles
    assert {d.state for d in logger.state().logs} == {LogState.FLUSHED, LogState.ACTIVE}


def test_a_restart_reads_everything_back_and_takes_new_ids() -> None:
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs, log_size_limit_bytes=HEADER + 3 * RECORD)
    written = {(lid, e): add(logger, lid, e) for e in range(5) for lid in (1, 2, 3)}
    logger.close()
    highest = max(location_log_id(loc) for loc in written.values())
    reopened = new_logger(disk, dirs)
    for (lid, e), location in written.items():
        assert read(reopened, lid, e, location) == payload(lid, e)
    assert location_log_id(add(reopened, 1, 5)) == highest + 1
    # A crash after a checkpoint keeps every entry too.
    reopened.checkpoint()
    disk.crash(LoseUnsynced())
    again = new_logger(disk, dirs)
    for (lid, e), location in written.items():
        assert read(again, lid, e, location) == payload(lid, e)
    again.check_invariants()


def test_close_forces_the_active_logs_but_writes_no_map() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs)
    add(logger, 1, 0)
    add(logger, 2, 0)
    logger.close()
    reopened = new_logger(disk, dirs)
    for log_id in (0, 1):
        assert reopened.ledgers_map(EntryLogId(log_id)) == (False, None)
        assert reopened.extract_metadata(EntryLogId(log_id)).source == "scan"


@pytest.mark.parametrize(("first", "then"), [(True, False), (False, True)])
def test_swapping_entry_log_manager(first: bool, then: bool) -> None:
    # testSwappingEntryLogManagerFromEntryLogPerLedgerToSingle and ...FromSingleToEntryLogPerLedger.
    disk, dirs = sim_disk(2)
    logger = EntryLogger(
        disk, dirs, pl_settings(per_ledger=first), random.Random(0), clock=ManualClock()
    )
    positions: dict[tuple[int, int], Location] = {}
    for e in range(10):
        for lid in range(10):
            positions[(lid, e)] = add(logger, lid, e)
            assert location_log_id(positions[(lid, e)]) == (lid if first else 0)
    logger.rotate()
    logger.checkpoint()
    later = EntryLogger(
        disk, dirs, pl_settings(per_ledger=then), random.Random(0), clock=ManualClock()
    )
    for (lid, e), location in positions.items():
        assert read(later, lid, e, location) == payload(lid, e)
    # The new manager's logs take ids past the old ones (per-ledger wrote logs 0..9; single
    # wrote log 0 and, at the rotation, log 1), and read back too.
    extra = {lid: add(later, lid, 10) for lid in range(3)}
    new_ids = sorted({location_log_id(loc) for loc in extra.values()})
    assert new_ids == ([10] if first else [2, 3, 4])
    for lid, location in extra.items():
        assert read(later, lid, 10, location) == payload(lid, 10)
    later.check_invariants()


# --- Hypothesis: random schedules with the clock moving ---------------------------------------

_STEP = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 5), st.integers(0, 60)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("checkpoint"), st.just(0), st.just(0)),
    st.tuples(st.just("rotate"), st.just(0), st.just(0)),
    st.tuples(st.just("tick"), st.just(0), st.integers(0, 3000)),
)


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(_STEP, min_size=1, max_size=40),
    limit=st.integers(HEADER, HEADER + 200),
    buffer_bytes=st.sampled_from([16, 100, 4096]),
    bound=st.sampled_from([0, 300]),
    max_active=st.integers(1, 4),
)
def test_random_schedules_keep_every_entry_one_ledger_per_log_and_honest_maps(
    steps: list[tuple[str, int, int]], limit: int, buffer_bytes: int, bound: int, max_active: int
) -> None:
    disk, dirs = sim_disk(2)
    clock = ManualClock()
    overrides: dict[str, int | bool] = {
        "log_size_limit_bytes": limit,
        "write_buffer_bytes": buffer_bytes,
        "flush_entrylog_bytes": bound,
        "entrylog_map_access_expiry_s": 2,
        "maximum_active_entry_logs": max_active,
    }
    logger = new_logger(disk, dirs, clock, **overrides)
    entries: dict[tuple[int, int], tuple[Location, bytes]] = {}
    durable: set[tuple[int, int]] = set()
    next_entry = [0] * 6
    for op, ledger_id, amount in steps:
        if op == "add":
            entry_id = next_entry[ledger_id]
            next_entry[ledger_id] += 1
            data = payload(ledger_id, entry_id, amount)
            entries[(ledger_id, entry_id)] = (logger.add_entry(LedgerId(ledger_id), data), data)
        elif op in ("flush", "checkpoint"):
            getattr(logger, op)()
            durable = set(entries)  # per-ledger: both force every log
        elif op == "rotate":
            logger.rotate()
        else:
            clock.advance_ms(amount)
        logger.check_invariants()
        for (lid, eid), (location, data) in entries.items():
            assert read(logger, lid, eid, location) == data
    # Every log holds one ledger; every sealed log's map equals its scan.
    for description in logger.state().logs:
        assert len(description.ledgers) <= 1, description
        if description.state in (LogState.ROTATED, LogState.FLUSHED):
            src = disk.open(logger.find_log(description.log_id) or "")
            from_map = extract_metadata(src, description.log_id)
            assert from_map.metadata == scan(src, description.log_id).metadata()
            assert dict(from_map.metadata.ledgers) == dict(description.ledgers)
    disk.crash(LoseUnsynced())
    reopened = new_logger(disk, dirs, ManualClock(), **overrides)
    for key in durable:
        location, data = entries[key]
        assert read(reopened, key[0], key[1], location) == data
    reopened.check_invariants()


# --- a Bookie with entryLogPerLedgerEnabled=true -----------------------------------------------

DATA = b"p" * 200


def pl_config(*overrides: str) -> ServerConfig:
    return make_config(
        "entryLogPerLedgerEnabled=true",
        "logSizeLimit=5000",
        "minorCompactionThreshold=0",
        *overrides,
    )


def open_pl(disk: SimDisk, clock: ManualClock, *overrides: str) -> Bookie:
    return open_bookie(disk, pl_config(*overrides), clock=clock)


def fill(bookie: Bookie, ledgers: tuple[int, ...], rounds: int, start: int = 0) -> None:
    for n in range(start, start + rounds):
        for ledger in ledgers:
            bookie.add_entry(LedgerId(ledger), EntryId(n), KEY, DATA)
    bookie.journal_force()


def reads_back(bookie: Bookie, ledger: int, entries: int) -> None:
    for entry in range(entries):
        assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == DATA, (ledger, entry)


def ledger_files(disk: SimDisk) -> set[str]:
    return {
        name
        for d in ("/bk/ledgers0/current", "/bk/ledgers1/current")
        for name in disk.listdir(d)
        if ".log" in name
    }


def test_a_bookie_keeps_one_active_log_per_ledger_and_survives_a_crash() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = open_pl(disk, clock)
    assert isinstance(bookie._entry_logger.manager, PerLedgerEntryLogManager)
    fill(bookie, (1, 2, 3), 4)
    state = bookie.inspect()
    active = [info for info in state.entry_logs if info.state == "active"]
    assert sorted(info.ledgers for info in active) == [(1,), (2,), (3,)]
    assert state.current_log_id == next(i.log_id for i in active if i.ledgers == (3,))
    bookie.checkpoint()
    bookie.check_invariants()
    fill(bookie, (1, 2), 3, start=4)  # journaled, not checkpointed
    disk.crash(LoseUnsynced())
    bookie = open_pl(disk, clock)  # replay re-adds what the checkpoint did not cover
    reads_back(bookie, 1, 7)
    reads_back(bookie, 2, 7)
    reads_back(bookie, 3, 4)
    for info in bookie.inspect().entry_logs:
        assert len(info.ledgers) <= 1, info
    bookie.check_invariants()
    bookie.shutdown()
    bookie = open_pl(disk, clock)
    reads_back(bookie, 1, 7)
    bookie.shutdown()


def test_a_bookie_evicts_an_idle_ledger_on_its_own_clock() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = open_pl(disk, clock, "entrylogMapAccessExpiryTimeInSeconds=60")
    fill(bookie, (1, 2), 2)
    clock.advance_ms(30 * MS)
    fill(bookie, (2,), 1, start=2)
    clock.advance_ms(30 * MS)  # ledger 1 idle for 60 s
    bookie.checkpoint()
    by_ledger = {info.ledgers: info.state for info in bookie.inspect().entry_logs}
    assert by_ledger[(LedgerId(1),)] == "flushed"
    assert by_ledger[(LedgerId(2),)] == "active"
    fill(bookie, (1,), 1, start=2)
    reads_back(bookie, 1, 3)
    bookie.check_invariants()
    bookie.shutdown()


def test_gc_removes_the_flushed_logs_of_a_deleted_ledger() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = open_pl(disk, clock)
    fill(bookie, (1, 2), 40)  # several logs per ledger at logSizeLimit=5000
    logs_of = {info.log_id: info.ledgers for info in bookie.inspect().entry_logs if info.ledgers}
    of_two = {log_id for log_id, ledgers in logs_of.items() if ledgers == (2,)}
    assert len(of_two) >= 2
    bookie.delete_ledger(LedgerId(2))
    bookie.rotate_log()  # seals every active log
    bookie.checkpoint()
    stats = bookie.gc(force=True)
    assert stats.logs_deleted == len(of_two)
    assert stats.logs_compacted == 0  # a log holds one ledger: all live or all dead
    names = ledger_files(disk)
    assert not {log_file_name(log_id) for log_id in of_two} & names
    reads_back(bookie, 1, 40)
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(2), EntryId(0))
    bookie.check_invariants()
    bookie.shutdown()
    bookie = open_pl(disk, clock)
    reads_back(bookie, 1, 40)
    bookie.shutdown()


def test_a_forced_compaction_of_a_per_ledger_log_works() -> None:
    """No GC cycle compacts in per-ledger mode (a log is all live or all dead), but the
    compactor must still work with this manager: the compaction log takes an id from the
    shared counter and the moved entries read back."""
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs)
    written = {(lid, e): add(logger, lid, e) for e in range(5) for lid in (1, 2)}
    logger.rotate()
    logger.checkpoint()
    source = location_log_id(written[(1, 0)])
    compactor = TransactionalCompactor(disk, logger)
    compaction = compactor.copy(source, lambda _ledger: True)
    assert compaction.new_log == 2
    compactor.flush(compaction)
    compactor.link(compaction)
    compactor.remove_source(compaction)
    assert source not in logger.log_ids()
    moved = {(int(m.ledger_id), int(m.entry_id)): m.new for m in compaction.moved}
    assert set(moved) == {(1, e) for e in range(5)}
    for (lid, e), location in moved.items():
        assert location_log_id(location) == 2
        assert read(logger, lid, e, location) == payload(lid, e)
    assert location_log_id(add(logger, 1, 5)) == 3
    logger.check_invariants()


def test_a_bookie_replays_a_crash_inside_per_ledger_logs_whose_writes_reached_the_disk() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = open_pl(disk, clock)
    fill(bookie, (1, 2, 3), 10)
    disk.crash(KeepAll())
    bookie = open_pl(disk, clock)
    for ledger in (1, 2, 3):
        reads_back(bookie, ledger, 10)
    bookie.check_invariants()
    bookie.shutdown()
