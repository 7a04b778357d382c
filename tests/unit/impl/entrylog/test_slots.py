"""impl/entrylog/slots.py: N active entry logs per ledger directory (entryLogSlotsPerLedgerDir).

BookKeeper never built this manager (issue #570 proposed it), so there is no Java test to
port: these follow tests/unit/impl/entrylog/test_per_ledger.py. Round-robin placement over
dirs x N slots, ledgers sharing a slot's log, rotation at logSizeLimit, the map forgetting a
ledger (by expiry, by size) without sealing anything, a full directory's slots retired and
back, every directory full, checkpoint and leastUnflushedLogId, switching managers on the same
directories, a restart, and a Hypothesis schedule with the clock moving.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import load_config
from impl.entrylog.ledger_dirs import DirState
from impl.entrylog.logger import EntryLogger, EntryLoggerSettings, settings_from_config
from impl.entrylog.manager import (
    FORGOTTEN_AT_MOST_MAPPED,
    FORGOTTEN_ON_EXPIRY,
    IDLE_SLOT_SEALED,
    RETIRED_FULL_DIR,
    LogChannel,
    LogState,
)
from impl.entrylog.reader import extract_metadata
from impl.entrylog.slots import SlotsEntryLogManager
from impl.format.entry_log import LOGFILE_HEADER_SIZE
from impl.fs.api import FileSystem
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import ConfigError, FsNoSpace, NoLedger, NoWritableLedgerDir
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id
from tests.unit.impl.bookie.test_bookie import KEY, make_config, open_bookie
from tests.unit.impl.entrylog.test_logger import add, armed, payload, read, sim_disk

HEADER = LOGFILE_HEADER_SIZE
#: ``payload(l, e)``: 16 id bytes + 10 body bytes, and 4 bytes of size before it.
RECORD = 30
MS = 1_000


def slot_settings(**overrides: int | bool) -> EntryLoggerSettings:
    base: dict[str, int | bool] = {
        "write_buffer_bytes": 64,
        "preallocation_enabled": False,
        "slots_per_dir": 2,
    }
    base.update(overrides)
    return EntryLoggerSettings(**base)  # type: ignore[arg-type]


def new_logger(
    fs: FileSystem, dirs: list[str], clock: ManualClock | None = None, **overrides: int | bool
) -> EntryLogger:
    return EntryLogger(
        fs, dirs, slot_settings(**overrides), random.Random(0), clock=clock or ManualClock()
    )


def manager_of(logger: EntryLogger) -> SlotsEntryLogManager:
    manager = logger.manager
    assert isinstance(manager, SlotsEntryLogManager)
    return manager


def log_of(logger: EntryLogger, ledger_id: int) -> LogChannel:
    log = manager_of(logger).log_for_ledger(ledger_id)
    assert log is not None, f"ledger {ledger_id} has no current log"
    return log


def slot_of(logger: EntryLogger, ledger_id: int) -> int | None:
    return manager_of(logger).slot_of(ledger_id)


def requested(logger: EntryLogger) -> bool:
    """Read through a call, so the type checker does not narrow it."""
    return logger.manager.rotate_requested


def states(logger: EntryLogger) -> dict[int, LogState]:
    return {d.log_id: d.state for d in logger.state().logs}


def active_ids(logger: EntryLogger) -> list[int]:
    return [d.log_id for d in logger.state().logs if d.state is LogState.ACTIVE]


def rotated_ids(logger: EntryLogger) -> list[int]:
    return [log.log_id for log in logger.manager.rotated()]


def sealed_map(fs: FileSystem, logger: EntryLogger, log_id: int) -> dict[int, int]:
    path = logger.find_log(EntryLogId(log_id))
    assert path is not None
    result = extract_metadata(fs.open(path, read_only=True), EntryLogId(log_id))
    assert result.source == "map", result
    return dict(result.metadata.ledgers)


# --- settings and wiring ----------------------------------------------------------------------


def test_the_logger_builds_the_slots_manager_from_the_settings() -> None:
    disk, dirs = sim_disk(2)
    manager = manager_of(new_logger(disk, dirs, slots_per_dir=3))
    assert manager.slot_count == 6
    # Consecutive slots are in different directories.
    assert [manager.slot_directory(i) for i in range(4)] == [dirs[0], dirs[1], dirs[0], dirs[1]]


def test_settings_refuse_slots_with_a_log_per_ledger() -> None:
    with pytest.raises(ConfigError, match="entryLogSlotsPerLedgerDir"):
        EntryLoggerSettings(per_ledger=True, slots_per_dir=2)
    with pytest.raises(ConfigError, match="entryLogSlotsPerLedgerDir"):
        EntryLoggerSettings(slots_per_dir=-1)


def test_the_configuration_reads_the_key_and_refuses_it_with_per_ledger() -> None:
    config = load_config(None, "", ["entryLogSlotsPerLedgerDir=3"])
    assert settings_from_config(config).slots_per_dir == 3
    with pytest.raises(ConfigError, match="each chooses an entry-log manager"):
        load_config(None, "", ["entryLogPerLedgerEnabled=true", "entryLogSlotsPerLedgerDir=2"])


# --- placement --------------------------------------------------------------------------------


def test_ledgers_take_slots_round_robin_across_dirs_and_share_their_logs() -> None:
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs)  # 2 dirs x 2 slots
    for lid in range(6):
        add(logger, lid, 0)
        logger.check_invariants()
    assert [slot_of(logger, lid) for lid in range(6)] == [0, 1, 2, 3, 0, 1]
    # Four logs, one per slot, ids in order of first use; ledgers 4 and 5 share 0's and 1's.
    assert active_ids(logger) == [0, 1, 2, 3]
    assert [log_of(logger, lid).log_id for lid in range(6)] == [0, 1, 2, 3, 0, 1]
    assert [log_of(logger, lid).directory for lid in range(4)] == [*dirs, *dirs]
    assert log_of(logger, 0).ledgers == {0: RECORD, 4: RECORD}
    # A mapped ledger stays in its slot.
    add(logger, 2, 1)
    assert log_of(logger, 2).ledgers == {2: 2 * RECORD}
    assert logger.current_log_id == 2


def test_each_slot_rotates_at_the_size_limit_on_its_own() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs, slots_per_dir=2, log_size_limit_bytes=HEADER + 3 * RECORD)
    positions = {(lid, e): add(logger, lid, e) for e in range(2) for lid in (1, 2, 3)}
    # Ledgers 1 and 3 share slot 0 (log 0): its fourth record passes the limit.
    assert slot_of(logger, 1) == slot_of(logger, 3) == 0
    assert rotated_ids(logger) == [0]
    assert sealed_map(disk, logger, 0) == {1: 2 * RECORD, 3: RECORD}
    assert log_of(logger, 3).log_id == 2
    assert log_of(logger, 2).log_id == 1  # slot 1 holds two records: not rotated
    for (lid, e), location in positions.items():
        assert read(logger, lid, e, location) == payload(lid, e)
    logger.check_invariants()


def test_a_rotation_from_an_add_forces_the_old_log_when_flush_entrylog_bytes_is_set() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(
        disk, dirs, slots_per_dir=1, flush_entrylog_bytes=1 << 20, log_size_limit_bytes=HEADER
    )
    first = add(logger, 1, 0)
    add(logger, 1, 1)  # the limit is passed: log 0 is forced, sealed, rotated
    disk.crash(LoseUnsynced())
    again = new_logger(disk, dirs)
    assert read(again, 1, 0, first) == payload(1, 0)


# --- the evicting map -------------------------------------------------------------------------


def test_expiry_forgets_the_mapping_and_seals_only_an_idle_slot_s_log() -> None:
    disk, dirs = sim_disk(1)
    clock = ManualClock()
    logger = new_logger(disk, dirs, clock, slots_per_dir=2, entrylog_map_access_expiry_s=1)
    add(logger, 1, 0)  # slot 0
    add(logger, 2, 0)  # slot 1
    add(logger, 3, 0)  # slot 0, beside ledger 1
    clock.advance_ms(600)
    add(logger, 2, 1)
    add(logger, 3, 1)
    clock.advance_ms(600)
    add(logger, 2, 2)  # ledger 1 took no add for 1.2 s: forgotten
    assert slot_of(logger, 1) is None and slot_of(logger, 3) == 0
    # Slot 0's log is shared with ledger 3, still mapped: not idle, nothing sealed.
    assert rotated_ids(logger) == [] and active_ids(logger) == [0, 1]
    assert manager_of(logger).events == {FORGOTTEN_ON_EXPIRY: 1}
    clock.advance_ms(600)
    add(logger, 2, 3)  # ledger 3 idle for 1.2 s: forgotten, and slot 0 is idle now
    assert slot_of(logger, 3) is None
    assert rotated_ids(logger) == [0] and active_ids(logger) == [1]
    assert manager_of(logger).events == {FORGOTTEN_ON_EXPIRY: 2, IDLE_SLOT_SEALED: 1}
    assert sealed_map(disk, logger, 0) == {1: RECORD, 3: 2 * RECORD}
    # Ledger 1's next add takes the next slot in round robin (slot 1, beside ledger 2).
    add(logger, 1, 1)
    assert slot_of(logger, 1) == 1 and log_of(logger, 1).log_id == 1
    # A checkpoint forgets the expired mappings and seals the idle slots' logs too: with no
    # add for 2 s every log is sealed and flushed, a GC candidate.
    clock.advance_ms(2 * MS)
    logger.checkpoint()
    assert manager_of(logger).mapped_by_access() == ()
    assert active_ids(logger) == [] and rotated_ids(logger) == []
    assert states(logger) == dict.fromkeys((0, 1), LogState.FLUSHED)
    assert manager_of(logger).events[IDLE_SLOT_SEALED] == 2
    logger.check_invariants()


def test_no_idle_slot_is_sealed_while_no_directory_is_writable(tmp_path: Path) -> None:
    fs, dirs = armed(tmp_path, 1)
    clock = ManualClock()
    logger = new_logger(fs, dirs, clock, slots_per_dir=2, entrylog_map_access_expiry_s=1)
    add(logger, 1, 0)
    add(logger, 2, 0)
    logger.ledger_dirs.mark_full(dirs[0])
    clock.advance_ms(2 * MS)
    add(logger, 2, 1)  # ledger 1 forgotten, its slot idle: but it is where adds must go
    assert active_ids(logger) == [0, 1] and rotated_ids(logger) == []
    assert IDLE_SLOT_SEALED not in manager_of(logger).events
    logger.check_invariants()


def test_a_forgotten_ledger_may_hold_records_in_two_active_logs_but_adds_to_one() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs, slots_per_dir=2, maximum_active_entry_logs=1)
    add(logger, 1, 0)  # slot 0, log 0
    add(logger, 2, 0)  # slot 1, log 1: the map holds one ledger, ledger 1 is forgotten
    assert manager_of(logger).mapped_by_access() == (2,)
    assert manager_of(logger).events == {FORGOTTEN_AT_MOST_MAPPED: 1}
    add(logger, 1, 1)  # slot 0 again (round robin), forgetting ledger 2
    add(logger, 2, 1)  # slot 1 again
    add(logger, 3, 0)  # slot 0
    add(logger, 1, 2)  # slot 1: ledger 1 now has records in logs 0 and 1
    assert log_of(logger, 1).log_id == 1
    holding = [d.log_id for d in logger.state().logs if 1 in dict(d.ledgers)]
    assert holding == [0, 1]
    assert rotated_ids(logger) == []
    logger.check_invariants()


# --- full directories -------------------------------------------------------------------------


def test_a_full_directory_s_slots_retire_and_come_back(tmp_path: Path) -> None:
    fs, dirs = armed(tmp_path, 2)
    logger = new_logger(fs, dirs, slots_per_dir=2)
    for lid in range(4):
        add(logger, lid, 0)
    assert [log_of(logger, lid).directory for lid in range(4)] == [*dirs, *dirs]
    # dir0 full: at the next add its slots' logs are sealed and their ledgers move.
    logger.ledger_dirs.mark_full(dirs[0])
    assert requested(logger)
    logger.check_invariants()
    add(logger, 1, 1)
    assert not requested(logger)
    assert sorted(rotated_ids(logger)) == [0, 2]
    assert manager_of(logger).events == {RETIRED_FULL_DIR: 2}
    assert slot_of(logger, 0) is None and slot_of(logger, 2) is None
    logger.check_invariants()
    for lid in (0, 2, 4):
        add(logger, lid, 1)
        assert log_of(logger, lid).directory == dirs[1]
    assert active_ids(logger) == [1, 3]  # only dir1's two slots are active
    for log_id in (0, 2):
        assert sealed_map(fs, logger, log_id) == {log_id: RECORD}
    # dir0 writable again: round robin reaches its slots again.
    fs.usage_by_dir = {dirs[0]: 0.0, dirs[1]: 0.0}
    assert logger.check_dirs() == {dirs[0]: DirState.WRITABLE, dirs[1]: DirState.WRITABLE}
    for lid in (5, 6, 7):
        add(logger, lid, 0)
    assert {log_of(logger, lid).directory for lid in (5, 6, 7)} == set(dirs)
    assert len(active_ids(logger)) == 4
    logger.check_invariants()


def test_every_directory_full_keeps_appending_where_they_are(tmp_path: Path) -> None:
    fs, dirs = armed(tmp_path, 2)
    logger = new_logger(fs, dirs, slots_per_dir=1)
    add(logger, 1, 0)  # slot 0, dir0
    add(logger, 2, 0)  # slot 1, dir1
    logger.ledger_dirs.mark_full(dirs[0])
    logger.ledger_dirs.mark_full(dirs[1])
    logger.check_invariants()
    add(logger, 1, 1)
    add(logger, 2, 1)
    assert [log_of(logger, lid).log_id for lid in (1, 2)] == [0, 1]
    assert rotated_ids(logger) == []
    # A new ledger joins a slot that has a log.
    add(logger, 3, 0)
    assert log_of(logger, 3).log_id in (0, 1)
    logger.check_invariants()
    # No slot with a log after a rotation: a new ledger's add is refused, nothing changed.
    logger.rotate()
    with pytest.raises(NoWritableLedgerDir):
        add(logger, 4, 0)
    assert slot_of(logger, 4) is None
    logger.check_invariants()


def test_a_full_disk_gives_a_typed_error_maps_nothing_and_loses_nothing() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs, slots_per_dir=2)
    written = {(lid, e): add(logger, lid, e) for e in range(3) for lid in (1, 2)}
    space = disk.disk_space("/bk")
    disk.set_capacity("/bk", space.total_bytes - space.free_bytes)
    with pytest.raises(NoWritableLedgerDir) as info:
        for e in range(3, 60):
            for lid in (1, 2, 3):
                written[(lid, e)] = add(logger, lid, e)
    assert isinstance(info.value.__cause__, FsNoSpace)
    assert logger.ledger_dirs.state(dirs[0]) is DirState.FULL
    logger.check_invariants()
    disk.set_capacity("/bk", None)
    assert logger.check_dirs()[dirs[0]] is DirState.WRITABLE
    for lid in (1, 2, 3):  # whichever add was refused maps (or moves) nothing: adds resume
        written[(lid, 60)] = add(logger, lid, 60)
    logger.checkpoint()
    for (lid, e), location in written.items():
        assert read(logger, lid, e, location) == payload(lid, e)
    logger.check_invariants()


# --- durability -------------------------------------------------------------------------------


def test_checkpoint_forces_every_slot_and_least_unflushed_is_the_smallest_unflushed() -> None:
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs, slots_per_dir=1, log_size_limit_bytes=HEADER + 2 * RECORD)
    written = {(lid, e): add(logger, lid, e) for e in range(3) for lid in (1, 2)}
    # Each slot rotated once: logs 0 and 1 sealed, 2 and 3 current.
    assert sorted(rotated_ids(logger)) == [0, 1] and active_ids(logger) == [2, 3]
    assert logger.least_unflushed_log_id == 0
    logger.checkpoint()
    assert rotated_ids(logger) == [] and logger.least_unflushed_log_id == 2
    # Everything survives a crash: the checkpoint forced the current logs too.
    disk.crash(LoseUnsynced())
    again = new_logger(disk, dirs)
    for (lid, e), location in written.items():
        assert read(again, lid, e, location) == payload(lid, e)


def test_rotate_seals_every_slot_and_keeps_the_mappings() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs, slots_per_dir=3)
    for lid in range(3):
        add(logger, lid, 0)
    assert logger.rotate() == 2
    assert active_ids(logger) == [] and logger.current_log_id is None
    assert [slot_of(logger, lid) for lid in range(3)] == [0, 1, 2]
    assert logger.rotate() is None
    add(logger, 1, 1)
    assert log_of(logger, 1).log_id == 3
    assert logger.preallocate() is None
    logger.check_invariants()


def test_a_compaction_log_comes_from_the_shared_counter() -> None:
    disk, dirs = sim_disk(1)
    logger = new_logger(disk, dirs)
    add(logger, 1, 0)
    compaction = logger.create_compaction_log()
    assert compaction.log_id == 1
    add(logger, 2, 0)
    assert log_of(logger, 2).log_id == 2
    compaction.channel.close()


def test_a_restart_after_close_reads_every_entry_back() -> None:
    disk, dirs = sim_disk(2)
    logger = new_logger(disk, dirs, log_size_limit_bytes=HEADER + 3 * RECORD)
    written = {(lid, e): add(logger, lid, e) for e in range(5) for lid in range(7)}
    logger.close()
    highest = max(location_log_id(loc) for loc in written.values())
    reopened = new_logger(disk, dirs)
    for (lid, e), location in written.items():
        assert read(reopened, lid, e, location) == payload(lid, e)
    assert location_log_id(add(reopened, 1, 5)) == highest + 1
    reopened.check_invariants()


def test_switching_slots_to_single_to_per_ledger_reads_every_entry() -> None:
    disk, dirs = sim_disk(2)
    positions: dict[tuple[int, int], Location] = {}
    kinds = [slot_settings(), slot_settings(slots_per_dir=0), slot_settings(slots_per_dir=0)]
    kinds[2] = EntryLoggerSettings(write_buffer_bytes=64, per_ledger=True)
    for round_index, chosen in enumerate([*kinds, slot_settings(slots_per_dir=1)]):
        logger = EntryLogger(disk, dirs, chosen, random.Random(0), clock=ManualClock())
        for (lid, e), location in positions.items():
            assert read(logger, lid, e, location) == payload(lid, e)
        for lid in range(5):
            positions[(lid, round_index)] = add(logger, lid, round_index)
        logger.check_invariants()
        if round_index % 2:
            logger.rotate()
            logger.checkpoint()
        logger.close()
    last = new_logger(disk, dirs)
    for (lid, e), location in positions.items():
        assert read(last, lid, e, location) == payload(lid, e)


# --- Hypothesis: random schedules with the clock moving ---------------------------------------

_STEP = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 6), st.integers(0, 60)),
    st.tuples(st.just("checkpoint"), st.just(0), st.just(0)),
    st.tuples(st.just("rotate"), st.just(0), st.just(0)),
    st.tuples(st.just("tick"), st.just(0), st.integers(0, 3000)),
    st.tuples(st.just("full"), st.integers(0, 1), st.just(0)),
    st.tuples(st.just("writable"), st.just(0), st.just(0)),
)


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(_STEP, min_size=1, max_size=40),
    limit=st.integers(HEADER, HEADER + 200),
    slots=st.integers(1, 3),
    max_mapped=st.integers(1, 4),
)
def test_random_schedules_keep_every_entry_and_honest_maps(
    steps: list[tuple[str, int, int]], limit: int, slots: int, max_mapped: int
) -> None:
    disk, dirs = sim_disk(2)
    clock = ManualClock()
    logger = new_logger(
        disk,
        dirs,
        clock,
        slots_per_dir=slots,
        log_size_limit_bytes=limit,
        entrylog_map_access_expiry_s=1,
        maximum_active_entry_logs=max_mapped,
    )
    written: dict[tuple[int, int], Location] = {}
    next_entry: dict[int, int] = {}
    for kind, a, b in steps:
        if kind == "add":
            entry = next_entry.get(a, 0)
            try:
                written[(a, entry)] = add(logger, a, entry, b)
            except NoWritableLedgerDir:
                continue
            next_entry[a] = entry + 1
        elif kind == "checkpoint":
            logger.checkpoint()
        elif kind == "rotate":
            logger.rotate()
        elif kind == "tick":
            clock.advance_ms(b)
        elif kind == "full":
            logger.ledger_dirs.mark_full(dirs[a])
        else:
            logger.check_dirs()  # the simulated disk is nearly empty: every dir writable
        logger.check_invariants()
        assert len(active_ids(logger)) <= 2 * slots
    for (lid, e), location in written.items():
        body = logger.read_entry(lid, e, location)  # type: ignore[arg-type]
        assert body[:16] == payload(lid, e)[:16]
    logger.rotate()
    logger.checkpoint()
    for description in logger.state().logs:
        assert description.state is LogState.FLUSHED
        if description.ledgers:
            assert sealed_map(disk, logger, description.log_id) == dict(description.ledgers)


# --- a Bookie end to end ----------------------------------------------------------------------

DATA = b"p" * 200


def open_slots(disk: SimDisk, clock: ManualClock, *overrides: str) -> Bookie:
    config = make_config(
        "entryLogSlotsPerLedgerDir=1", "logSizeLimit=5000", "minorCompactionThreshold=0", *overrides
    )
    return open_bookie(disk, config, clock=clock)


def fill(bookie: Bookie, ledgers: tuple[int, ...], rounds: int, start: int = 0) -> None:
    for n in range(start, start + rounds):
        for ledger in ledgers:
            bookie.add_entry(LedgerId(ledger), EntryId(n), KEY, DATA)
    bookie.journal_force()


def reads_back(bookie: Bookie, ledger: int, entries: int) -> None:
    for entry in range(entries):
        assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == DATA, (ledger, entry)


def test_a_bookie_shares_slots_survives_a_crash_and_compacts_a_shared_log() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = open_slots(disk, clock)  # two ledger directories: two slots
    assert isinstance(bookie._entry_logger.manager, SlotsEntryLogManager)
    fill(bookie, (1, 2, 3), 4)
    active = [info for info in bookie.inspect().entry_logs if info.state == "active"]
    assert sorted(info.ledgers for info in active) == [(1, 3), (2,)]
    bookie.checkpoint()
    fill(bookie, (1, 2), 3, start=4)  # journaled, not checkpointed
    disk.crash(LoseUnsynced())
    bookie = open_slots(disk, clock)  # replay re-adds what the checkpoint did not cover
    reads_back(bookie, 1, 7)
    reads_back(bookie, 2, 7)
    reads_back(bookie, 3, 4)
    bookie.check_invariants()
    # Ledger 3 shares its logs with ledger 1: deleting it leaves them partly live, and a
    # forced GC compacts them (a log per ledger never would).
    fill(bookie, (1, 3), 20, start=7)
    bookie.delete_ledger(LedgerId(3))
    bookie.rotate_log()
    bookie.checkpoint()
    stats = bookie.gc(force=True)
    assert stats.logs_compacted > 0, stats
    reads_back(bookie, 1, 27)
    reads_back(bookie, 2, 7)
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(3), EntryId(0))
    bookie.check_invariants()
    bookie.shutdown()
    bookie = open_slots(disk, clock)
    reads_back(bookie, 1, 27)
    bookie.shutdown()
