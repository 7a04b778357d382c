"""impl/entrylog/logger.py and impl/entrylog/manager.py: the write path end to end.

Lazy creation, locations, rotation at the exact size boundary, sealing (map + header),
checkpoint and leastUnflushedLogId, preallocation, disk listeners, ENOSPC (typed error,
nothing lost, usable again once space returns), resumable sealing, and crash durability on the
simulated disk. Hypothesis drives random schedules with a tiny logSizeLimit and checks the
invariants after every step, the bytes of every entry, and that each sealed log's map equals
its scan.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.entrylog.ledger_dirs import DirState
from impl.entrylog.logger import EntryLogger, EntryLoggerSettings
from impl.entrylog.manager import LogChannel, LogState
from impl.entrylog.reader import extract_metadata, scan
from impl.format.entry_log import (
    LEDGERS_MAP_OFFSET_POSITION,
    LOGFILE_HEADER_SIZE,
    decode_header,
    encode_payload,
)
from impl.fs.api import DiskSpace, FileSystem
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk
from spec.crash import CrashPlan, KeepPrefix, KeepSubset, LoseUnsynced, TornWrite
from spec.errors import ConfigError, FsNoSpace, MissingLogFile, NoWritableLedgerDir
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id
from tests.unit.fs_wrappers import ForwardingFs
from tests.unit.impl.entrylog.test_buffered_channel import FaultyHandle

HEADER = LOGFILE_HEADER_SIZE


# --- helpers ----------------------------------------------------------------------------------


def sim_disk(count: int = 2) -> tuple[SimDisk, list[str]]:
    """A simulated disk with ``count`` durable ledger dirs ``/bk/l<i>/current``."""
    disk = SimDisk()
    dirs = [f"/bk/l{i}/current" for i in range(count)]
    for directory in dirs:
        disk.mkdir(directory)
    for path in ["/", "/bk", *[f"/bk/l{i}" for i in range(count)]]:
        disk.fsync_dir(path)
    return disk, dirs


def payload(ledger_id: int, entry_id: int, body_bytes: int = 10) -> bytes:
    body = bytes((ledger_id * 31 + entry_id + i) % 256 for i in range(body_bytes))
    return encode_payload(ledger_id, entry_id, body)


def settings_for(**overrides: int | bool) -> EntryLoggerSettings:
    base: dict[str, int | bool] = {"write_buffer_bytes": 64, "preallocation_enabled": False}
    base.update(overrides)
    return EntryLoggerSettings(**base)  # type: ignore[arg-type]


def add(logger: EntryLogger, ledger_id: int, entry_id: int, body_bytes: int = 10) -> Location:
    return logger.add_entry(LedgerId(ledger_id), payload(ledger_id, entry_id, body_bytes))


def active_log(logger: EntryLogger) -> LogChannel:
    log = logger.manager.active()
    assert log is not None
    return log


def read(logger: EntryLogger, ledger_id: int, entry_id: int, location: Location) -> bytes:
    return logger.read_entry(LedgerId(ledger_id), EntryId(entry_id), location)


class ArmedFs(ForwardingFs):
    """Real files, a settable disk usage per directory, and handles that can be armed to fail
    (FaultyHandle). Delegates everything else to OsFileSystem."""

    def __init__(self) -> None:
        super().__init__(OsFileSystem())
        self.usage_by_dir: dict[str, float] = {}
        self.handles: dict[str, FaultyHandle] = {}

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> FaultyHandle:
        inner = self.inner.open(path, create=create, exclusive=exclusive, read_only=read_only)
        handle = FaultyHandle(inner)
        self.handles[path] = handle
        return handle

    def disk_space(self, path: str) -> DiskSpace:
        usage = self.usage_by_dir.get(path, 0.0)
        return DiskSpace(free_bytes=round(1000 * (1 - usage)), total_bytes=1000)


def armed(tmp_path: Path, count: int = 2) -> tuple[ArmedFs, list[str]]:
    fs = ArmedFs()
    dirs = []
    for index in range(count):
        directory = tmp_path / f"l{index}" / "current"
        directory.mkdir(parents=True)
        dirs.append(str(directory))
    return fs, dirs


def _fs_check(fs: FileSystem) -> FileSystem:
    return fs  # mypy: both test file systems satisfy the protocol


_fs_check(ArmedFs())
_fs_check(SimDisk())


# --- settings -------------------------------------------------------------------------------


def test_settings_defaults_are_bookkeepers() -> None:
    defaults = EntryLoggerSettings()
    assert defaults.log_size_limit_bytes == 1073741824
    assert defaults.flush_entrylog_bytes == 0
    assert defaults.write_buffer_bytes == 65536
    assert defaults.preallocation_enabled is True
    assert defaults.disk_usage_threshold == 0.95
    assert defaults.disk_usage_warn_threshold == 0.90


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"log_size_limit_bytes": -1}, "logSizeLimit"),
        ({"log_size_limit_bytes": 2**30 + 1}, "logSizeLimit"),
        ({"write_buffer_bytes": 0}, "writeBufferSizeBytes"),
    ],
)
def test_bad_settings_name_the_key(overrides: dict[str, int], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        EntryLoggerSettings(**overrides)  # type: ignore[arg-type]


def test_negative_flush_entrylog_bytes_disables_forced_flushes() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(flush_entrylog_bytes=-5), random.Random(0))
    add(logger, 1, 0, body_bytes=5000)
    assert active_log(logger).channel.durable_position == 0
    assert active_log(logger).channel.unpersisted_bytes == 0  # not tracked without a bound


def test_missing_ledger_dir_is_a_config_error() -> None:
    disk, _ = sim_disk(1)
    with pytest.raises(ConfigError, match="/nope"):
        EntryLogger(disk, ["/nope"], settings_for(), random.Random(0))


# --- adding and reading -----------------------------------------------------------------------


def test_first_add_creates_the_first_log_lazily() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    assert logger.state().current_log_id is None
    assert logger.log_ids() == []
    location = add(logger, 1, 0)
    assert logger.current_log_id == 0
    assert location == (0 << 32) | (HEADER + 4)
    assert logger.log_ids() == [0]
    assert disk.read_file(f"{dirs[0]}/lastId") == b"0\n"
    logger.check_invariants()


def test_entries_read_back_from_the_buffer_and_from_the_file() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(write_buffer_bytes=4096), random.Random(0))
    locations = [add(logger, 7, e, body_bytes=e * 3) for e in range(20)]
    assert disk.read_file(f"{dirs[0]}/0.log") == b""  # still all in the write buffer
    for entry_id, location in enumerate(locations):
        assert read(logger, 7, entry_id, location) == payload(7, entry_id, entry_id * 3)
    logger.flush()
    assert len(disk.read_file(f"{dirs[0]}/0.log")) == active_log(logger).channel.position
    for entry_id, location in enumerate(locations):
        assert read(logger, 7, entry_id, location) == payload(7, entry_id, entry_id * 3)


def test_payload_offsets_follow_the_record_layout() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    first = add(logger, 1, 0, body_bytes=10)
    second = add(logger, 1, 1, body_bytes=10)
    assert second - first == 4 + 26  # the first payload (26 bytes), then the next size field


def test_missing_log_file_is_typed() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    with pytest.raises(MissingLogFile):
        read(logger, 1, 0, Location((5 << 32) | (HEADER + 4)))


# --- rotation -------------------------------------------------------------------------------


def test_rotation_happens_exactly_past_the_size_limit() -> None:
    # Records of 4 + 26 bytes: a limit of HEADER + 2 * 30 holds exactly two (== does not
    # rotate); the third needs HEADER + 90 > limit and rotates.
    disk, dirs = sim_disk(1)
    logger = EntryLogger(
        disk, dirs, settings_for(log_size_limit_bytes=HEADER + 60), random.Random(0)
    )
    a = add(logger, 1, 0)
    b = add(logger, 1, 1)
    assert location_log_id(a) == location_log_id(b) == 0
    assert active_log(logger).channel.position == HEADER + 60
    c = add(logger, 1, 2)
    assert location_log_id(c) == 1
    assert [log.log_id for log in logger.manager.rotated()] == [0]
    logger.check_invariants()


def test_one_byte_under_the_limit_rotates() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(
        disk, dirs, settings_for(log_size_limit_bytes=HEADER + 59), random.Random(0)
    )
    assert location_log_id(add(logger, 1, 0)) == 0
    assert location_log_id(add(logger, 1, 1)) == 1


def test_rotation_seals_the_old_log_with_map_and_header() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    add(logger, 3, 0)
    add(logger, 1, 0)
    add(logger, 3, 1, body_bytes=20)
    end_of_entries = active_log(logger).channel.position
    assert logger.rotate() == 1
    data = disk.read_file(f"{dirs[0]}/0.log")
    header = decode_header(data[:20])
    assert header.magic == b"BKLO"
    assert header.version == 1
    assert header.ledgers_map_offset == end_of_entries
    assert header.ledgers_count == 2
    result = logger.extract_metadata(EntryLogId(0))
    assert result.source == "map"
    assert dict(result.metadata.ledgers) == {1: 30, 3: 30 + 40}
    logger.check_invariants()


def test_rotating_an_empty_log_writes_no_map_record_but_points_the_header() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    logger.rotate()
    logger.rotate()
    data = disk.read_file(f"{dirs[0]}/0.log")
    assert len(data) == HEADER
    header = decode_header(data[:20])
    assert (header.ledgers_map_offset, header.ledgers_count) == (HEADER, 0)
    assert logger.extract_metadata(EntryLogId(0)).source == "scan"  # count 0: never trusted


def test_checkpoint_flushes_rotated_logs_and_moves_least_unflushed() -> None:
    disk, dirs = sim_disk(2)
    logger = EntryLogger(
        disk, dirs, settings_for(log_size_limit_bytes=HEADER + 30), random.Random(1)
    )
    locations = [add(logger, 1, e) for e in range(4)]  # one entry per log: logs 0..3
    assert logger.current_log_id == 3
    assert logger.least_unflushed_log_id == 0
    rotated = logger.manager.rotated()
    assert [log.log_id for log in rotated] == [0, 1, 2]
    logger.checkpoint()
    logger.check_invariants()
    assert logger.least_unflushed_log_id == 3
    assert all(log.channel.closed for log in rotated)
    states = {d.log_id: d.state for d in logger.state().logs}
    assert states == {
        0: LogState.FLUSHED,
        1: LogState.FLUSHED,
        2: LogState.FLUSHED,
        3: LogState.ACTIVE,
    }
    for entry_id, location in enumerate(locations):
        assert read(logger, 1, entry_id, location) == payload(1, entry_id)


def test_close_flushes_but_writes_no_map() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    location = add(logger, 2, 5)
    logger.close()
    logger.close()  # idempotent
    data = disk.durable_snapshot()[f"{dirs[0]}/0.log"]
    assert decode_header(data[:20]).ledgers_map_offset == 0
    reopened = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    assert read(reopened, 2, 5, location) == payload(2, 5)
    assert reopened.extract_metadata(EntryLogId(0)).source == "scan"
    with pytest.raises(AssertionError):
        add(logger, 2, 6)


# --- durability on the simulated disk -----------------------------------------------------------


def test_log_name_survives_a_crash_after_flush_thanks_to_the_dir_fsync() -> None:
    # The deviation from BookKeeper: without the directory fsync after creating 0.log the
    # strict disk would forget the name, and the fsynced entry with it.
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    location = add(logger, 4, 0)
    logger.flush()
    disk.crash(LoseUnsynced())
    reopened = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    assert read(reopened, 4, 0, location) == payload(4, 0)


def test_checkpointed_logs_survive_a_crash_and_unflushed_ones_may_not() -> None:
    disk, dirs = sim_disk(2)
    logger = EntryLogger(
        disk, dirs, settings_for(log_size_limit_bytes=HEADER + 100), random.Random(2)
    )
    locations = {(1, e): add(logger, 1, e, body_bytes=20) for e in range(9)}
    logger.checkpoint()
    flushed = {d.log_id for d in logger.state().logs if d.state is LogState.FLUSHED}
    assert flushed
    disk.crash(LoseUnsynced())
    reopened = EntryLogger(disk, dirs, settings_for(), random.Random(2))
    for (ledger_id, entry_id), location in locations.items():
        if location_log_id(location) in flushed:
            assert read(reopened, ledger_id, entry_id, location) == payload(ledger_id, entry_id, 20)
    # Nothing was forced in the active log: its header never reached the disk durably.
    active_id = max(location_log_id(loc) for loc in locations.values())
    assert active_id not in flushed
    assert disk.read_file(f"{logger.find_log(EntryLogId(active_id))}") == b""


def test_flush_entrylog_bytes_forces_without_an_explicit_flush() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(
        disk,
        dirs,
        settings_for(flush_entrylog_bytes=2000, write_buffer_bytes=8192),
        random.Random(0),
    )
    first = add(logger, 1, 0, body_bytes=500)  # 1024 + 520 unpersisted
    assert active_log(logger).channel.unpersisted_bytes == HEADER + 520
    second = add(logger, 1, 1, body_bytes=500)  # reaches 2000: flushed and forced
    assert active_log(logger).channel.unpersisted_bytes == 0
    disk.crash(LoseUnsynced())
    reopened = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    assert read(reopened, 1, 0, first) == payload(1, 0, 500)
    assert read(reopened, 1, 1, second) == payload(1, 1, 500)


# --- preallocation ---------------------------------------------------------------------------


def test_preallocated_log_is_taken_by_the_next_rotation() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(preallocation_enabled=True), random.Random(0))
    add(logger, 1, 0)
    assert logger.preallocate() == 1
    assert logger.preallocate() == 1  # one at a time
    assert disk.exists(f"{dirs[0]}/1.log")
    states = {d.log_id: d.state for d in logger.state().logs}
    assert states == {0: LogState.ACTIVE, 1: LogState.PREALLOCATED}
    logger.check_invariants()
    assert logger.rotate() == 1
    assert logger.manager.preallocated() is None
    assert location_log_id(add(logger, 1, 1)) == 1
    logger.check_invariants()


def test_preallocation_disabled_does_nothing() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(preallocation_enabled=False), random.Random(0))
    assert logger.preallocate() is None
    assert logger.log_ids() == []


def test_preallocated_log_in_a_full_dir_is_discarded(tmp_path: Path) -> None:
    fs, dirs = armed(tmp_path, 2)

    class First:
        def randrange(self, stop: int, /) -> int:
            return 0

    logger = EntryLogger(fs, dirs, settings_for(preallocation_enabled=True), First())
    add(logger, 1, 0)  # log 0 in dirs[0]
    assert logger.preallocate() == 1  # in dirs[0] too
    logger.ledger_dirs.mark_full(dirs[0])
    new_id = logger.rotate()
    assert new_id == 2
    assert active_log(logger).directory == dirs[1]
    assert not (Path(dirs[0]) / "1.log").exists()
    logger.checkpoint()
    assert logger.least_unflushed_log_id == 2  # the discarded 1 does not hold it back
    logger.check_invariants()


# --- disks filling up -----------------------------------------------------------------------


def test_almost_full_dir_of_the_active_log_makes_the_next_add_rotate(tmp_path: Path) -> None:
    fs, dirs = armed(tmp_path, 2)
    logger = EntryLogger(fs, dirs, settings_for(), random.Random(3))
    add(logger, 1, 0)
    active_dir = active_log(logger).directory
    other = next(d for d in dirs if d != active_dir)
    fs.usage_by_dir = {active_dir: 0.93}
    assert logger.check_dirs()[active_dir] is DirState.ALMOST_FULL
    requested_before = logger.manager.rotate_requested
    assert requested_before
    fs.usage_by_dir[active_dir] = 0.99  # now full: the new log must go elsewhere
    logger.check_dirs()
    location = add(logger, 1, 1)
    assert location_log_id(location) == 1
    assert active_log(logger).directory == other
    requested_after = logger.manager.rotate_requested
    assert not requested_after
    logger.check_invariants()


def test_a_full_disk_gives_a_typed_error_and_loses_nothing() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(write_buffer_bytes=64), random.Random(0))
    written = {e: add(logger, 1, e) for e in range(5)}
    space = disk.disk_space("/bk")
    disk.set_capacity("/bk", space.total_bytes - space.free_bytes)  # not one byte more
    with pytest.raises(NoWritableLedgerDir) as info:
        for e in range(5, 50):
            written[e] = add(logger, 1, e)
    assert isinstance(info.value.__cause__, FsNoSpace)
    assert dirs[0] in str(info.value)
    failed_entry = len(written)
    logger.check_invariants()
    assert logger.ledger_dirs.state(dirs[0]) is DirState.FULL
    for entry_id, location in written.items():
        assert read(logger, 1, entry_id, location) == payload(1, entry_id)
    # Still full: the next add is refused before anything changes.
    with pytest.raises(NoWritableLedgerDir):
        add(logger, 1, failed_entry)
    # Space returns; the disk check sees it; the next add rotates to a new log.
    disk.set_capacity("/bk", None)
    assert logger.check_dirs()[dirs[0]] is DirState.WRITABLE
    location = add(logger, 1, failed_entry)
    assert location_log_id(location) == 1
    logger.checkpoint()
    logger.check_invariants()
    sealed = extract_metadata(disk.open(f"{dirs[0]}/0.log"), EntryLogId(0))
    assert sealed.source == "map"
    assert dict(sealed.metadata.ledgers) == {1: 30 * (failed_entry)}
    for entry_id, loc in written.items():
        assert read(logger, 1, entry_id, loc) == payload(1, entry_id)


def test_all_dirs_full_refuses_the_first_log() -> None:
    # DefaultEntryLogTest.testDeferCreateNewLogWithoutEnoughDiskSpaces.
    disk, dirs = sim_disk(2)
    logger = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    for directory in dirs:
        logger.ledger_dirs.mark_full(directory)
    with pytest.raises(NoWritableLedgerDir, match="no writable ledger directory"):
        add(logger, 1, 0)
    assert logger.current_log_id is None
    assert logger.log_ids() == []


def test_a_seal_interrupted_by_enospc_resumes_without_a_second_map(tmp_path: Path) -> None:
    fs, dirs = armed(tmp_path, 1)
    logger = EntryLogger(fs, dirs, settings_for(write_buffer_bytes=4096), random.Random(0))
    add(logger, 1, 0)
    add(logger, 2, 0)
    handle = fs.handles[f"{dirs[0]}/0.log"]
    # The rotation's first pwrite flushes the entries; the second (the map) fails.
    handle.arm("pwrite", FsNoSpace(handle.path), skip=1)
    with pytest.raises(NoWritableLedgerDir):
        logger.rotate()
    active = logger.manager.active()
    assert active is not None
    assert active.log_id == 0
    assert active.map_offset is not None
    assert not active.sealed
    logger.check_invariants()
    logger.check_dirs()  # space is back (the stub reports 0% used)
    location = add(logger, 3, 0)  # must not land after the map of log 0
    assert location_log_id(location) == 1
    result = scan(fs.open(f"{dirs[0]}/0.log"), EntryLogId(0))
    assert result.map_records == 1
    meta = logger.extract_metadata(EntryLogId(0))
    assert meta.source == "map"
    assert dict(meta.metadata.ledgers) == {1: 30, 2: 30}
    logger.check_invariants()


def test_a_failed_checkpoint_keeps_the_unflushed_logs_rotated(tmp_path: Path) -> None:
    fs, dirs = armed(tmp_path, 1)
    logger = EntryLogger(fs, dirs, settings_for(log_size_limit_bytes=HEADER + 30), random.Random(0))
    for e in range(4):
        add(logger, 1, e)  # logs 0, 1, 2 rotated; 3 active
    fs.handles[f"{dirs[0]}/1.log"].arm("fsync", FsNoSpace("1.log"))
    with pytest.raises(NoWritableLedgerDir):
        logger.checkpoint()
    assert [log.log_id for log in logger.manager.rotated()] == [1, 2]
    assert logger.least_unflushed_log_id == 1
    logger.check_invariants()
    logger.check_dirs()
    logger.checkpoint()
    assert logger.least_unflushed_log_id == 3
    assert logger.manager.rotated() == ()


def test_header_offset_is_written_in_place_after_the_map() -> None:
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    add(logger, 1, 0)
    logger.rotate()
    data = disk.read_file(f"{dirs[0]}/0.log")
    offset = int.from_bytes(data[LEDGERS_MAP_OFFSET_POSITION : LEDGERS_MAP_OFFSET_POSITION + 8])
    assert offset == HEADER + 30
    assert len(data) == offset + 4 + 8 + 8 + 4 + 16  # one map record with one ledger


# --- Hypothesis: random schedules on the simulated disk ------------------------------------------

_STEP = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 3), st.integers(0, 60)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("checkpoint"), st.just(0), st.just(0)),
    st.tuples(st.just("rotate"), st.just(0), st.just(0)),
    st.tuples(st.just("preallocate"), st.just(0), st.just(0)),
)


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(_STEP, min_size=1, max_size=30),
    limit=st.integers(HEADER, HEADER + 200),
    buffer_bytes=st.sampled_from([16, 100, 4096]),
    bound=st.sampled_from([0, 300]),
    seed=st.integers(0, 3),
)
def test_random_schedules_keep_every_entry_and_every_map_honest(
    steps: list[tuple[str, int, int]], limit: int, buffer_bytes: int, bound: int, seed: int
) -> None:
    disk, dirs = sim_disk(2)
    config = settings_for(
        log_size_limit_bytes=limit,
        write_buffer_bytes=buffer_bytes,
        flush_entrylog_bytes=bound,
        preallocation_enabled=True,
    )
    logger = EntryLogger(disk, dirs, config, random.Random(seed))
    entries: dict[tuple[int, int], tuple[Location, bytes]] = {}
    durable: set[tuple[int, int]] = set()
    next_entry = [0, 0, 0, 0]
    for op, ledger_id, body_bytes in steps:
        if op == "add":
            entry_id = next_entry[ledger_id]
            next_entry[ledger_id] += 1
            data = payload(ledger_id, entry_id, body_bytes)
            entries[(ledger_id, entry_id)] = (logger.add_entry(LedgerId(ledger_id), data), data)
        elif op == "flush":
            logger.flush()
            durable = set(entries)
        elif op == "checkpoint":
            logger.checkpoint()
            flushed = {d.log_id for d in logger.state().logs if d.state is LogState.FLUSHED}
            durable |= {k for k, (loc, _) in entries.items() if location_log_id(loc) in flushed}
        elif op == "rotate":
            logger.rotate()
        else:
            logger.preallocate()
        logger.check_invariants()
        for (lid, eid), (location, data) in entries.items():
            assert read(logger, lid, eid, location) == data
    # Every sealed log's map equals what a scan of it finds (spec/properties.md property 7).
    for description in logger.state().logs:
        if description.state in (LogState.ROTATED, LogState.FLUSHED):
            src = disk.open(logger.find_log(description.log_id) or "")
            from_map = extract_metadata(src, description.log_id)
            assert from_map.metadata == scan(src, description.log_id).metadata()
            assert dict(from_map.metadata.ledgers) == dict(description.ledgers)
            assert from_map.source == ("map" if description.ledgers else "scan")
    # After a crash that loses everything unsynced, every entry made durable reads back.
    disk.crash(LoseUnsynced())
    reopened = EntryLogger(disk, dirs, config, random.Random(seed))
    for key in durable:
        location, data = entries[key]
        assert read(reopened, key[0], key[1], location) == data
    reopened.check_invariants()


_PLANS = st.one_of(
    st.just(LoseUnsynced()),
    st.builds(KeepPrefix, st.integers(0, 40)),
    st.builds(TornWrite, st.integers(0, 40), st.integers(0, 3)),
    st.builds(KeepSubset, st.frozensets(st.integers(0, 40), max_size=20)),
)


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(_STEP, min_size=1, max_size=25),
    plan=_PLANS,
    seed=st.integers(0, 3),
)
def test_any_crash_keeps_synced_entries_and_new_logs_never_stomp_them(
    steps: list[tuple[str, int, int]], plan: CrashPlan, seed: int
) -> None:
    disk, dirs = sim_disk(2)
    config = settings_for(log_size_limit_bytes=HEADER + 120, preallocation_enabled=True)
    logger = EntryLogger(disk, dirs, config, random.Random(seed))
    entries: dict[tuple[int, int], tuple[Location, bytes]] = {}
    durable: set[tuple[int, int]] = set()
    for index, (op, ledger_id, body_bytes) in enumerate(steps):
        if op == "add":
            data = payload(ledger_id, index, body_bytes)
            entries[(ledger_id, index)] = (logger.add_entry(LedgerId(ledger_id), data), data)
        elif op in ("flush", "checkpoint"):
            logger.flush()  # forces the active log too: everything so far is durable
            durable = set(entries)
        elif op == "rotate":
            logger.rotate()
        else:
            logger.preallocate()
    disk.crash(plan)
    reopened = EntryLogger(disk, dirs, config, random.Random(seed))
    for key in durable:
        location, data = entries[key]
        assert read(reopened, key[0], key[1], location) == data
    # New logs after recovery never reuse the id of a log holding a durable entry.
    for entry_id in range(6):
        add(reopened, 9, 1000 + entry_id, body_bytes=50)
        reopened.check_invariants()
    reopened.flush()
    for key in durable:
        location, data = entries[key]
        assert read(reopened, key[0], key[1], location) == data


def test_settings_from_config_follow_bk_server_conf_keys() -> None:
    from impl.config.config import load_config
    from impl.entrylog.logger import settings_from_config

    config = load_config(
        "logSizeLimit=4096\nflushEntrylogBytes=100\nwriteBufferSizeBytes=1024\n"
        "entryLogFilePreallocationEnabled=false\ndiskUsageThreshold=0.8\n"
        "diskUsageWarnThreshold=0.7\n",
        "test.conf",
        [],
    )
    assert settings_from_config(config) == EntryLoggerSettings(
        log_size_limit_bytes=4096,
        flush_entrylog_bytes=100,
        write_buffer_bytes=1024,
        preallocation_enabled=False,
        disk_usage_threshold=0.8,
        disk_usage_warn_threshold=0.7,
    )
