"""impl/entrylog/compactor.py: the three phases, their rollback, and recovery of leftovers.

On the simulated disk with a real entry logger and a real ledger index. The crash tests take
an image of the disk before every file-system operation of each phase (SimDisk's
``on_operation`` hook, as proofs/crash/bookie_check.py does), crash each image under several
plans, recover (``recover_leftovers`` with the index update the bookie's recovery does) and
check spec/protocol/compaction.md's promise: every live entry reads back at the location the
index ends with, no ``.compacting`` or ``.compacted`` is left, and the source is gone exactly
when the new log is there (the compaction finished).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import attrs
import pytest

from impl.entrylog.compactor import (
    ABORTED,
    COPIED,
    DONE,
    FLUSHED,
    Compaction,
    MovedEntry,
    TransactionalCompactor,
    malformed_compaction_log,
    recover_leftovers,
)
from impl.entrylog.logger import EntryLogger
from impl.entrylog.reader import map_as_written, scan
from impl.format.names import (
    INDEX_DIR_NAME,
    compacted_file_name,
    compacting_file_name,
    log_file_name,
    parse_compacted_file_name,
    parse_compacting_file_name,
    parse_log_file_name,
)
from impl.fs.api import join
from impl.index.ledger_index import LedgerIndex
from models.fs.simdisk import SimDisk
from proofs.crash.explorer import plans_at
from spec.crash import CrashPlan, KeepAll, KeepPrefix, LoseUnsynced
from spec.errors import DamagedFile, FsIOError, MissingLogFile, NoWritableLedgerDir
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id
from tests.unit.impl.entrylog.test_logger import payload, settings_for, sim_disk

LEDGERS = (1, 2, 3)
DELETED = 2
ENTRIES = 6


@attrs.define
class World:
    """A bookie's storage in miniature: entry logger and index over the simulated disk."""

    disk: SimDisk
    dirs: list[str]
    logger: EntryLogger
    index: LedgerIndex
    source: EntryLogId
    payloads: dict[tuple[int, int], bytes]

    @property
    def index_dir(self) -> str:
        return join(self.dirs[0], INDEX_DIR_NAME)

    def is_live(self, ledger_id: LedgerId) -> bool:
        return not self.index.is_deleted(ledger_id)

    def live_entries(self) -> dict[tuple[int, int], bytes]:
        return {k: v for k, v in self.payloads.items() if k[0] != DELETED}


def make_world(*, dirs: int = 2, extra_logs: int = 0, **settings: int | bool) -> World:
    """Ledgers 1, 2 and 3 interleaved in one log (the source), sealed, checkpointed and
    indexed; ledger 2 deleted. ``extra_logs`` empty rotations first push the ids up."""
    disk, paths = sim_disk(dirs)
    logger = EntryLogger(disk, paths, settings_for(**settings), random.Random(7))
    for _ in range(extra_logs):
        logger.rotate()
    index = LedgerIndex.load(disk, join(paths[0], INDEX_DIR_NAME))
    payloads: dict[tuple[int, int], bytes] = {}
    source: EntryLogId | None = None
    for entry in range(ENTRIES):
        for ledger in LEDGERS:
            data = payload(ledger, entry, 20 + entry)
            location = logger.add_entry(LedgerId(ledger), data)
            index.put_entry(LedgerId(ledger), EntryId(entry), location)
            payloads[(ledger, entry)] = data
            source = location_log_id(location)
    assert source is not None
    logger.rotate()
    logger.flush()
    index.flush()
    index.delete_ledger(LedgerId(DELETED))
    return World(disk, paths, logger, index, source, payloads)


def put_moves(index: LedgerIndex, moves: list[MovedEntry]) -> None:
    """Phase 3's index update (the bookie's): live ledgers, where the index still names
    the old location's log."""
    for move in moves:
        if index.is_deleted(move.ledger_id):
            continue
        now = index.get_location(move.ledger_id, move.entry_id)
        if now is not None and location_log_id(now) == location_log_id(move.old):
            index.put_entry(move.ledger_id, move.entry_id, move.new)


def run_phase3(world: World, compactor: TransactionalCompactor, c: Compaction) -> None:
    compactor.link(c)
    put_moves(world.index, c.moved)
    world.logger.flush()
    world.index.flush()
    compactor.remove_source(c)


def compact(world: World, compactor: TransactionalCompactor | None = None) -> Compaction:
    compactor = compactor or TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, world.is_live)
    if c.phase == DONE:
        return c
    compactor.flush(c)
    run_phase3(world, compactor, c)
    return c


def names(world: World) -> list[str]:
    return sorted(n for d in world.dirs for n in world.disk.listdir(d))


def leftovers(world: World) -> list[str]:
    return [
        n
        for n in names(world)
        if parse_compacting_file_name(n) is not None or parse_compacted_file_name(n) is not None
    ]


def read_back(world: World) -> None:
    """Every live entry reads back with its bytes at the index's location."""
    for (ledger, entry), data in world.live_entries().items():
        location = world.index.get_location(LedgerId(ledger), EntryId(entry))
        assert location is not None, (ledger, entry)
        got = world.logger.read_entry(LedgerId(ledger), EntryId(entry), location)
        assert got == data, (ledger, entry)


# --- the phases ----------------------------------------------------------------------------


def test_a_compaction_moves_exactly_the_live_entries_and_removes_the_source() -> None:
    world = make_world()
    source_name = log_file_name(world.source)
    assert source_name in names(world)
    c = compact(world)
    assert c.phase == DONE and c.new_log is not None
    assert {(m.ledger_id, m.entry_id) for m in c.moved} == set(world.live_entries())
    assert all(location_log_id(m.old) == world.source for m in c.moved)
    assert all(location_log_id(m.new) == c.new_log for m in c.moved)
    assert c.bytes_moved == sum(len(v) + 4 for v in world.live_entries().values())
    assert source_name not in names(world)
    assert log_file_name(c.new_log) in names(world)
    assert leftovers(world) == []
    read_back(world)
    # Every index location now names the new log.
    for ledger, entry in world.live_entries():
        location = world.index.get_location(LedgerId(ledger), EntryId(entry))
        assert location is not None and location_log_id(location) == c.new_log


def test_the_compaction_log_is_sealed_with_a_map_equal_to_its_records() -> None:
    world = make_world()
    c = compact(world)
    assert c.new_log is not None
    handle = world.disk.open(join(c.directory, log_file_name(c.new_log)), read_only=True)
    sealed, written = map_as_written(handle)
    result = scan(handle, c.new_log)
    assert sealed and written == result.ledgers() == c.ledgers
    assert set(written) == {1, 3}
    assert result.torn_tail_bytes == 0


def test_phase_files_are_named_in_lower_case_hex_from_the_shared_counter() -> None:
    # 20 empty rotations first: the source and the compaction log get ids >= 10, where a
    # decimal name (BookKeeper #4804) would differ from the hex one.
    world = make_world(extra_logs=20)
    assert world.source >= 10
    compactor = TransactionalCompactor(world.disk, world.logger)
    last = int(world.disk.open(join(world.dirs[0], "lastId"), read_only=True).pread(0, 20), 16)
    c = compactor.copy(world.source, world.is_live)
    assert c.new_log == last + 1 and c.new_log >= 10
    assert compacting_file_name(c.new_log) in names(world)
    assert f"{c.new_log:x}.log.compacting" in names(world)
    # lastId is published like any log's.
    for directory in world.dirs:
        text = world.disk.open(join(directory, "lastId"), read_only=True).pread(0, 20)
        assert int(text, 16) == c.new_log
    compactor.flush(c)
    assert names(world).count(compacted_file_name(c.new_log, world.source)) == 1
    assert f"{c.new_log:x}.log.{world.source:x}.compacted" in names(world)
    run_phase3(world, compactor, c)
    assert f"{c.new_log:x}.log" in names(world)
    assert f"{c.new_log}.log" not in names(world)
    # The next log of the entry logger does not reuse the compaction log's id.
    next_log = world.logger.rotate()
    assert next_log is not None and next_log > c.new_log


def test_nothing_live_deletes_the_source_and_leaves_no_compaction_log() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, lambda _ledger: False)
    assert c.phase == DONE and c.new_log is None and not c.moved
    assert log_file_name(world.source) not in names(world)
    assert leftovers(world) == []
    world.disk.crash(LoseUnsynced())
    assert log_file_name(world.source) not in names(world)


def where(c: Compaction) -> tuple[str, bool]:
    """The phase and whether phase 3 began (a call, so that the checker does not narrow)."""
    return c.phase, c.linked


def test_phases_step_in_order() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, world.is_live)
    assert where(c) == (COPIED, False)
    assert leftovers(world) == [compacting_file_name(c.new_log or 0)]
    compactor.flush(c)
    assert where(c) == (FLUSHED, False)
    assert leftovers(world) == [compacted_file_name(c.new_log or 0, world.source)]
    compactor.link(c)
    assert where(c) == (FLUSHED, True)
    with pytest.raises(AssertionError):
        compactor.abort(c)  # phase 3 is never rolled back


def test_a_missing_source_is_refused() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    with pytest.raises(MissingLogFile):
        compactor.copy(EntryLogId(999), world.is_live)
    assert leftovers(world) == []


def test_the_throttle_is_asked_once_per_record_copied_with_its_bytes() -> None:
    world = make_world()
    calls: list[tuple[int, int]] = []

    class Recorder:
        def acquire(self, records: int, bytes_: int) -> None:
            calls.append((records, bytes_))

    compactor = TransactionalCompactor(world.disk, world.logger, throttle=Recorder())
    c = compactor.copy(world.source, world.is_live)
    assert len(calls) == len(c.moved) == len(world.live_entries())
    assert all(records == 1 for records, _ in calls)
    assert sum(b for _, b in calls) == c.bytes_moved


# --- where the compaction log goes ---------------------------------------------------------


def test_a_compaction_log_is_allocated_even_when_every_directory_is_marked_full() -> None:
    world = make_world()
    for directory in world.dirs:
        world.logger.ledger_dirs.mark_full(directory)
    with pytest.raises(NoWritableLedgerDir):
        world.logger.rotate()  # a normal log cannot be made
    c = compact(world)
    assert c.phase == DONE and c.new_log is not None
    read_back(world)


def test_the_compaction_log_goes_to_a_directory_with_room_for_a_whole_log() -> None:
    world = make_world(log_size_limit_bytes=4096)
    world.disk.set_capacity("/bk/l0", 100)  # below what it holds: no room at all
    compactor = TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, world.is_live)
    assert c.directory == world.dirs[1]
    compactor.abort(c)
    world.disk.set_capacity("/bk/l1", 1000)  # room, but less than logSizeLimit
    before = names(world)
    with pytest.raises(NoWritableLedgerDir, match="room for a compaction log"):
        compactor.copy(world.source, world.is_live)
    assert names(world) == before


# --- abort ---------------------------------------------------------------------------------


def test_a_failed_write_in_phase_1_rolls_back() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    world.disk.fail_next("write", "/bk", match=lambda p: p.endswith(".compacting"))
    with pytest.raises(FsIOError):
        compactor.copy(world.source, world.is_live)
    assert leftovers(world) == []
    assert log_file_name(world.source) in names(world)
    read_back(world)


def test_a_failed_fsync_in_phase_2_rolls_back() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, world.is_live)
    world.disk.fail_next("fsync", "/bk", match=lambda p: p.endswith(".compacting"))
    with pytest.raises(FsIOError):
        compactor.flush(c)
    assert c.phase == ABORTED
    assert leftovers(world) == []
    assert log_file_name(world.source) in names(world)
    read_back(world)


def test_a_failed_directory_fsync_after_the_link_rolls_back_the_compacted_name() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, world.is_live)
    world.disk.fail_next("fsync_dir", c.directory)
    world.disk.fail_next("fsync_dir", c.directory)  # the header fsync passes; the link's fails
    with pytest.raises(FsIOError):
        compactor.flush(c)
    assert c.phase == ABORTED
    assert leftovers(world) == []
    read_back(world)


def test_no_space_while_copying_rolls_back_with_a_typed_error() -> None:
    world = make_world()

    class FillTheDisk:
        """The disk fills up under the copy, at its third record."""

        calls = 0

        def acquire(self, records: int, bytes_: int) -> None:
            self.calls += 1
            if self.calls == 3:
                for directory in world.dirs:
                    world.disk.set_capacity(directory, 0)

    compactor = TransactionalCompactor(world.disk, world.logger, throttle=FillTheDisk())
    with pytest.raises(NoWritableLedgerDir, match="rolled back"):
        compactor.copy(world.source, world.is_live)
    assert leftovers(world) == []
    assert log_file_name(world.source) in names(world)
    read_back(world)


# --- recovery of leftovers -----------------------------------------------------------------


def recover(world: World) -> None:
    """A restart: new entry logger and index over the disk, then the leftovers."""
    world.logger = EntryLogger(world.disk, world.dirs, settings_for(), random.Random(8))
    world.index = LedgerIndex.load(world.disk, world.index_dir)

    def apply(moves: list[MovedEntry]) -> None:
        put_moves(world.index, moves)
        world.index.flush()

    recover_leftovers(world.disk, world.dirs, world.logger, apply)


def test_recovery_removes_a_compacting_file_and_keeps_the_source() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    compactor.copy(world.source, world.is_live)
    world.disk.crash(KeepAll())
    recover(world)
    assert leftovers(world) == []
    assert log_file_name(world.source) in names(world)
    read_back(world)


def test_recovery_finishes_a_compacted_file() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, world.is_live)
    compactor.flush(c)
    world.disk.crash(LoseUnsynced())
    recover(world)
    assert leftovers(world) == []
    assert log_file_name(world.source) not in names(world)
    assert log_file_name(c.new_log or 0) in names(world)
    read_back(world)


def test_a_malformed_compacted_file_is_removed_while_its_source_is_there() -> None:
    world = make_world()
    bad = join(world.dirs[1], compacted_file_name(40, world.source))
    handle = world.disk.open(bad, create=True)
    handle.pwrite(0, b"not an entry log")
    handle.fsync()
    assert malformed_compaction_log(world.disk, bad, EntryLogId(40)) is not None
    recover(world)
    assert leftovers(world) == []
    assert log_file_name(world.source) in names(world)
    assert log_file_name(40) not in names(world)
    read_back(world)


def test_a_malformed_compacted_file_whose_source_is_gone_is_refused() -> None:
    world = make_world()
    bad = join(world.dirs[1], compacted_file_name(40, 30))
    handle = world.disk.open(bad, create=True)
    handle.pwrite(0, b"x" * 2000)
    handle.fsync()
    with pytest.raises(DamagedFile, match="exist nowhere else"):
        recover(world)
    assert bad.rsplit("/", 1)[1] in names(world)  # left for the operator


# --- a crash at every file-system operation of every phase --------------------------------

PLANS: tuple[CrashPlan, ...] = (LoseUnsynced(), KeepAll(), KeepPrefix(1), KeepPrefix(3))


def images_of(world: World, step: Callable[[], object]) -> list[SimDisk]:
    """A copy of the disk before each file-system operation of ``step``, and after it."""
    images: list[SimDisk] = []
    world.disk.on_operation = lambda _kind: images.append(world.disk.copy())
    try:
        step()
    finally:
        world.disk.on_operation = None
    images.append(world.disk.copy())
    return images


def phase_images(phase: str, extra_logs: int = 0) -> tuple[World, list[SimDisk], EntryLogId]:
    world = make_world(extra_logs=extra_logs)
    compactor = TransactionalCompactor(world.disk, world.logger)
    c: list[Compaction] = []

    def copy() -> None:
        c.append(compactor.copy(world.source, world.is_live))

    if phase == "copy":
        images = images_of(world, copy)
    else:
        copy()
        if phase == "flush":
            images = images_of(world, lambda: compactor.flush(c[0]))
        else:
            compactor.flush(c[0])
            images = images_of(world, lambda: run_phase3(world, compactor, c[0]))
    assert c and c[0].new_log is not None
    return world, images, c[0].new_log


def crashed_states(
    images: list[SimDisk], *, explorer_plans: bool = False
) -> Iterator[tuple[int, CrashPlan, SimDisk]]:
    """Each image crashed under PLANS, or under the crash explorer's whole family for its
    pending operations (proofs/crash/plans.py: prefixes, torn writes, all-but-one)."""
    for point, image in enumerate(images):
        plans = plans_at(image) if explorer_plans else iter(PLANS)
        for plan in plans:
            disk = image.copy()
            disk.crash(plan)
            yield point, plan, disk


def check_recovered(world: World, new_log: EntryLogId, where: str) -> bool:
    """The promise after recovery; returns whether the compaction finished."""
    assert leftovers(world) == [], where
    listed = names(world)
    has_source = log_file_name(world.source) in listed
    has_new = log_file_name(new_log) in listed
    assert has_source != has_new, (where, listed)
    read_back(world)
    for ledger, entry in world.live_entries():
        location = world.index.get_location(LedgerId(ledger), EntryId(entry))
        assert location is not None
        assert location_log_id(location) == (new_log if has_new else world.source), where
    for entry in range(ENTRIES):
        assert world.index.get_location(LedgerId(DELETED), EntryId(entry)) is None, where
    return has_new


@pytest.mark.parametrize("extra_logs", [0, 20])
@pytest.mark.parametrize("phase", ["copy", "flush", "index"])
def test_a_crash_at_every_operation_of_a_phase_recovers_to_one_side(
    phase: str, extra_logs: int
) -> None:
    """With 20 logs made first, the ids are >= 10: a recovered log named in decimal
    (BookKeeper #4804) is then another name, and the source would be gone with no new log."""
    world, images, new_log = phase_images(phase, extra_logs)
    assert (new_log >= 10) == (extra_logs > 0)
    assert len(images) >= 4, len(images)
    outcomes: set[bool] = set()
    plans = 0
    # The explorer's whole family of plans at each point for the low ids; four plans for the
    # ids >= 10 (the naming check needs no more).
    for point, plan, disk in crashed_states(images, explorer_plans=extra_logs == 0):
        plans += 1
        world.disk = disk
        where = f"{phase} phase, before operation {point}, {plan.describe()}"
        recover(world)
        outcomes.add(check_recovered(world, new_log, where))
        # Recovery is idempotent: a second start finds nothing to do and the same state.
        recover(world)
        check_recovered(world, new_log, where + ", second recovery")
    assert plans >= len(images) * (len(PLANS) if extra_logs else 2), plans
    # Phase 1 never finishes a compaction, phase 3 always does; phase 2 sees both sides.
    expected = {"copy": {False}, "flush": {False, True}, "index": {True}}[phase]
    assert outcomes == expected, outcomes


def test_a_crash_at_every_operation_of_recovery_recovers_again() -> None:
    world, images, new_log = phase_images("flush")
    crashed = images[-1].copy()  # phase 2 returned: a .compacted to finish
    crashed.crash(LoseUnsynced())
    world.disk = crashed
    assert [n for n in leftovers(world) if n.endswith(".compacted")]
    recovery_images = images_of(world, lambda: recover(world))
    assert len(recovery_images) >= 6, len(recovery_images)
    for point, plan, disk in crashed_states(recovery_images, explorer_plans=True):
        world.disk = disk
        recover(world)
        assert check_recovered(world, new_log, f"recovery, before operation {point}, {plan}")


def test_files_left_after_a_crash_are_only_the_logs_and_fixed_files() -> None:
    """Repeated interrupted compactions do not grow the disk: after recovery only ``.log``
    files and lastId remain, whatever phase the crash cut."""
    for phase in ("copy", "flush", "index"):
        world, images, new_log = phase_images(phase)
        before = set(names(make_world())) - {INDEX_DIR_NAME}
        after = (before - {log_file_name(world.source)}) | {log_file_name(new_log)}
        assert all(parse_log_file_name(n) is not None or n == "lastId" for n in before)
        for _point, _plan, disk in crashed_states(images):
            world.disk = disk
            recover(world)
            assert set(names(world)) - {INDEX_DIR_NAME} in (before, after), names(world)


def test_moves_name_the_source_at_recovery() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, world.is_live)
    compactor.flush(c)
    world.disk.crash(LoseUnsynced())
    world.logger = EntryLogger(world.disk, world.dirs, settings_for(), random.Random(8))
    seen: list[MovedEntry] = []
    recover_leftovers(world.disk, world.dirs, world.logger, seen.extend)
    assert {(m.ledger_id, m.entry_id) for m in seen} == set(world.live_entries())
    assert all(m.old == Location(world.source << 32) for m in seen)


def test_recovery_keeps_a_source_when_apply_moves_says_it_is_still_needed() -> None:
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, world.is_live)
    compactor.flush(c)
    world.disk.crash(LoseUnsynced())
    world.logger = EntryLogger(world.disk, world.dirs, settings_for(), random.Random(8))

    def still_needed(moves: list[MovedEntry]) -> bool:
        assert moves
        return True

    report = recover_leftovers(world.disk, world.dirs, world.logger, still_needed)
    assert report.kept_sources == (world.source,)
    assert report.finished == ((c.new_log, world.source),)
    assert leftovers(world) == []
    assert log_file_name(world.source) in names(world)
    assert log_file_name(c.new_log or 0) in names(world)
