"""impl/bookie/gc.py and the Bookie's GC steps on the simulated disk: our own cases (the
ports of BookKeeper's tests are test_gc_bk_ports.py).

What is checked: the leftovers bkref itself used to leave for ever (the zero-byte
preallocated log of every earlier run, the logs an interrupted recovery rewrote) are
reclaimed; the active, rotated and preallocated logs are never candidates; a delete between
the steps of a compaction is honoured (not copied, not put back into the index); failed
compactions leave no file behind however often they fail (BP-6's reason to exist); the
suspension flags from the directories' states; the throttle and MaxTimeMillis on the injected
clock; a new cycle and a shutdown roll back a compaction in flight.
"""

from __future__ import annotations

import pytest

from impl.bookie.bookie import Bookie
from impl.bookie.gc import (
    GarbageCollector,
    GcPolicy,
    LogUsage,
    Suspension,
    Throttle,
    suspension,
)
from impl.clock import ManualClock
from impl.config.config import ServerConfig
from impl.entrylog.ledger_dirs import DirState
from models.fs.simdisk import SimDisk
from spec.crash import KeepAll, LoseUnsynced
from spec.errors import BookieIOError, NoEntry, NoLedger, NoSpace
from spec.ids import EntryId, EntryLogId, LedgerId
from tests.unit.impl.bookie.test_bookie import KEY, CrashNow, _crash_at, make_config, open_bookie

LEDGER_DIRS = ("/bk/ledgers0/current", "/bk/ledgers1/current")
DATA = b"z" * 200


def config(*overrides: str) -> ServerConfig:
    """Logs of about 20 records; major compaction below 0.8, minor off; no preallocation."""
    return make_config(
        "logSizeLimit=5000",
        "minorCompactionThreshold=0",
        "entryLogFilePreallocationEnabled=false",
        *overrides,
    )


def files(disk: SimDisk) -> set[str]:
    """Every entry log and compaction file in the ledger directories."""
    return {name for d in LEDGER_DIRS for name in disk.listdir(d) if ".log" in name}


def sizes(disk: SimDisk) -> dict[str, int]:
    out = {}
    for directory in LEDGER_DIRS:
        for name in disk.listdir(directory):
            if ".log" in name:
                handle = disk.open(f"{directory}/{name}", read_only=True)
                out[name] = handle.size()
                handle.close()
    return out


def fill(bookie: Bookie, ledgers: tuple[int, ...], rounds: int, start: int = 0) -> None:
    """``rounds`` entries of each ledger, interleaved, then a force."""
    for n in range(start, start + rounds):
        for ledger in ledgers:
            bookie.add_entry(LedgerId(ledger), EntryId(n), KEY, DATA)
    bookie.journal_force()


def flushed_logs(bookie: Bookie) -> list[EntryLogId]:
    return [info.log_id for info in bookie.inspect().entry_logs if info.state == "flushed"]


def reads_back(bookie: Bookie, ledger: int, entries: int) -> None:
    for entry in range(entries):
        assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == DATA, (ledger, entry)


# --- leftovers of earlier runs -------------------------------------------------------------


def test_zero_byte_preallocated_logs_of_earlier_runs_are_reclaimed() -> None:
    disk, clock = SimDisk(), ManualClock()
    # With the default write buffer the header never leaves it: zero-byte files.
    cfg = config("entryLogFilePreallocationEnabled=true", "writeBufferSizeBytes=65536")
    bookie = open_bookie(disk, cfg, clock=clock)
    fill(bookie, (1,), 3)
    leftovers: set[str] = set()
    for _ in range(3):  # three runs, each leaving its preallocated log behind
        pre = bookie.preallocate()
        assert pre is not None
        leftovers.add(f"{pre:x}.log")
        bookie.shutdown()
        bookie = open_bookie(disk, cfg, clock=clock)
    assert all(sizes(disk)[name] == 0 for name in leftovers), sizes(disk)
    current = bookie.preallocate()  # this run's own preallocated log
    assert current is not None
    stats = bookie.gc()
    assert stats.logs_deleted >= len(leftovers)
    assert not leftovers & files(disk)
    assert f"{current:x}.log" in files(disk)  # the current run's is never touched
    reads_back(bookie, 1, 3)
    bookie.check_invariants()
    bookie.shutdown()
    bookie = open_bookie(disk, cfg, clock=clock)
    reads_back(bookie, 1, 3)


@pytest.mark.parametrize("at", [3, 9, 15, 25, 40])
def test_logs_rewritten_by_an_interrupted_recovery_are_reclaimed(at: int) -> None:
    """A crash after the journal force and before any checkpoint: recovery re-adds every
    entry into a new log (the old log's records are not in the index). A crash inside that
    recovery makes the next one re-add again. Before GC nothing reclaimed those logs; now,
    once the ledger is deleted, every one of them goes (the live ledger's logs stay)."""
    disk, clock = SimDisk(), ManualClock()
    cfg = config()
    bookie = open_bookie(disk, cfg, clock=clock)
    fill(bookie, (1, 2), 15)  # logs of ledgers 1 and 2, in the page cache only
    disk.crash(KeepAll())  # a kill -9 whose writes reach the disk
    _crash_at(disk, at)
    try:
        Bookie.open(disk, cfg, clock=clock, rng=__import__("random").Random(7))
    except CrashNow:
        pass
    except Exception as exc:  # the crash may surface wrapped by the step it hit
        assert isinstance(exc.__cause__, CrashNow) or "CrashNow" in repr(exc), exc
    disk.on_operation = None
    disk.crash(KeepAll())
    bookie = open_bookie(disk, cfg, clock=clock)
    reads_back(bookie, 1, 15)
    reads_back(bookie, 2, 15)
    before_bytes = sum(sizes(disk).values())
    bookie.delete_ledger(LedgerId(2))
    bookie.rotate_log()
    bookie.checkpoint()
    stats = bookie.gc(force=True)
    assert stats.logs_deleted + stats.logs_compacted >= 1, stats
    reads_back(bookie, 1, 15)
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(2), EntryId(0))
    # No log holds ledger 2 any more, and every log left holds ledger 1 or is the active one.
    state = bookie.inspect()
    for info in state.entry_logs:
        assert LedgerId(2) not in info.ledgers, info
        assert info.state == "active" or LedgerId(1) in info.ledgers, info
    assert sum(sizes(disk).values()) < before_bytes
    bookie.shutdown()
    bookie = open_bookie(disk, cfg, clock=clock)
    reads_back(bookie, 1, 15)


# --- what is never a candidate --------------------------------------------------------------


def test_the_active_rotated_and_preallocated_logs_are_never_touched() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = open_bookie(disk, config("entryLogFilePreallocationEnabled=true"), clock=clock)
    fill(bookie, (1,), 20)
    rotated = bookie.inspect().current_log_id
    bookie.rotate_log()  # rotated, not flushed: no checkpoint yet
    fill(bookie, (1,), 5, start=20)
    active = bookie.inspect().current_log_id
    preallocated = bookie.preallocate()
    bookie.delete_ledger(LedgerId(1))  # everything in them is dead now
    stats = bookie.gc(force=True)
    assert (stats.logs_deleted, stats.logs_compacted) == (0, 0)
    names = files(disk)
    for log_id in (rotated, active, preallocated):
        assert log_id is not None and f"{log_id:x}.log" in names
    assert bookie.gc_metadata() == {}
    states = {info.log_id: info.state for info in bookie.inspect().entry_logs}
    assert states[EntryLogId(rotated)] == "rotated"  # type: ignore[arg-type]
    bookie.checkpoint()  # now the rotated and the active logs' bytes are durable
    stats = bookie.gc(force=True)
    assert stats.logs_deleted >= 1  # the rotated logs, now flushed; the active one stays
    assert f"{rotated:x}.log" not in files(disk)
    assert f"{active:x}.log" in files(disk) and f"{preallocated:x}.log" in files(disk)
    bookie.check_invariants()


def test_gc_candidates_are_overridable_and_a_current_log_can_be_offered() -> None:
    """The step a quality variant overrides ("compacting a current log"): the candidates
    come from ``_gc_candidate_logs``; offering the active log makes GC compact it."""

    class CompactsCurrent(Bookie):
        def _gc_candidate_logs(self) -> list[EntryLogId]:
            return self._entry_logger.log_ids()

    disk, clock = SimDisk(), ManualClock()
    bookie = CompactsCurrent.open(disk, config(), clock=clock, rng=__import__("random").Random(7))
    fill(bookie, (1, 2), 3)
    active = bookie.inspect().current_log_id
    bookie.delete_ledger(LedgerId(2))
    begun = bookie.gc_begin(force=True)
    assert active in begun.candidates  # the known-bad variant would copy it


# --- deletes between the steps -------------------------------------------------------------


def _three_ledger_log(disk: SimDisk, clock: ManualClock) -> Bookie:
    bookie = open_bookie(disk, config(), clock=clock)
    fill(bookie, (1, 2, 3), 6)
    bookie.rotate_log()
    bookie.checkpoint()
    bookie.delete_ledger(LedgerId(3))
    return bookie


def test_a_ledger_deleted_between_gc_begin_and_compact_copy_is_not_copied() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    begun = bookie.gc_begin(force=True)
    assert begun.compaction == "major" and len(begun.candidates) == 1
    bookie.delete_ledger(LedgerId(2))
    copied = bookie.compact_copy()
    assert copied.phase == "copy" and copied.entries_moved == 6  # ledger 1's only
    bookie.compact_flush()
    done = bookie.compact_index()
    assert done.phase == "index" and done.new_log == copied.new_log
    state = bookie.inspect()
    new = next(info for info in state.entry_logs if info.log_id == copied.new_log)
    assert new.ledgers == (LedgerId(1),)
    reads_back(bookie, 1, 6)
    assert bookie.compact_copy().phase == "idle"


def test_a_source_whose_ledgers_all_went_before_the_copy_is_deleted_by_the_copy() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    (source,) = bookie.gc_begin(force=True).candidates
    bookie.delete_ledger(LedgerId(1))
    bookie.delete_ledger(LedgerId(2))
    copied = bookie.compact_copy()
    assert (copied.phase, copied.source_log, copied.new_log) == ("copy", source, None)
    assert f"{source:x}.log" not in files(disk)
    assert not any("compact" in name for name in files(disk))
    assert bookie.compact_flush().phase == "idle"
    assert bookie.compact_copy().phase == "idle"
    stats = bookie.gc()
    assert stats.compaction == "none"


def test_a_ledger_deleted_between_copy_and_index_is_not_put_back_into_the_index() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    bookie.gc_begin(force=True)
    copied = bookie.compact_copy()
    assert copied.entries_moved == 12  # ledgers 1 and 2
    bookie.delete_ledger(LedgerId(2))
    bookie.compact_flush()
    bookie.compact_index()
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(2), EntryId(0))
    assert LedgerId(2) not in [info.ledger_id for info in bookie.inspect().ledgers]
    reads_back(bookie, 1, 6)
    bookie.check_invariants()
    for clean in (False, True):  # a crash losing everything unsynced, then a clean restart
        if clean:
            bookie.shutdown()
        else:
            disk.crash(LoseUnsynced())
        bookie = open_bookie(disk, config(), clock=clock)
        with pytest.raises(NoLedger):
            bookie.read_entry(LedgerId(2), EntryId(0))
        reads_back(bookie, 1, 6)
    # The next cycle drops ledger 2 from the compaction log's metadata.
    bookie.gc()
    assert all(total > remaining for total, remaining in bookie.gc_metadata().values())


# --- failures do not grow the disk ---------------------------------------------------------


FAULTS = [
    ("write", lambda path: path.endswith(".log.compacting")),
    ("fsync", lambda path: path.endswith(".log.compacting")),
    ("read", lambda path: path.endswith("/0.log")),  # the source
    ("fsync_dir", lambda path: True),
]


@pytest.mark.parametrize("fault", range(len(FAULTS)), ids=[f[0] for f in FAULTS])
def test_many_failed_compactions_leave_no_files_behind(fault: int) -> None:
    """BP-6's reason to exist: every failed compaction must leave the disk as it found it
    (BookKeeper's non-transactional compactor left partial copies in new logs)."""
    op, match = FAULTS[fault]
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    bookie.gc_begin(force=True)  # learn the metadata first: only the compaction may fail
    before = sizes(disk)
    failures = 0
    for attempt in range(12):
        disk.fail_next(op, match=match)
        with pytest.raises((BookieIOError, NoSpace)):
            bookie.gc(force=True)
        failures += 1
        disk.clear_failures()
        assert bookie.failure is None, bookie.failure
        now = sizes(disk)  # no new file, the source untouched (the active log takes adds)
        assert set(now) == set(before) and now["0.log"] == before["0.log"], (attempt, now)
        ack = bookie.add_entry(LedgerId(9), EntryId(attempt), KEY, b"on")  # still serving
        bookie.journal_force()
        assert ack.done and ack.error is None
    assert failures == 12
    stats = bookie.gc(force=True)  # no fault: the compaction goes through
    assert stats.logs_compacted == 1, stats
    assert "0.log" not in files(disk)
    reads_back(bookie, 1, 6)
    reads_back(bookie, 2, 6)


def test_no_room_for_a_compaction_log_is_no_space_and_nothing_changes() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    before = sizes(disk)
    for directory in ("/bk/ledgers0", "/bk/ledgers1"):
        disk.set_capacity(directory, sum(before.values()) // 2 + 1)
    with pytest.raises(NoSpace, match="no room") as caught:
        bookie.gc(force=True)
    # Its remedy (issue 26: every remedy a message prints works): free space, gc again.
    assert "free space" in str(caught.value) and "run gc again" in str(caught.value)
    assert sizes(disk) == before and bookie.failure is None
    for directory in ("/bk/ledgers0", "/bk/ledgers1"):
        disk.set_capacity(directory, None)
    assert bookie.gc(force=True).logs_compacted == 1


def test_a_failed_index_phase_fails_the_bookie_and_the_restart_finishes_it() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    (source,) = bookie.gc_begin(force=True).candidates
    copied = bookie.compact_copy()
    bookie.compact_flush()
    disk.fail_next("fsync", match=lambda path: "bkref-index" in path)
    with pytest.raises(BookieIOError, match="index phase"):
        bookie.compact_index()
    assert bookie.failure is not None
    with pytest.raises(BookieIOError):
        bookie.shutdown()
    disk.crash(LoseUnsynced())
    bookie = open_bookie(disk, config(), clock=clock)
    reads_back(bookie, 1, 6)
    reads_back(bookie, 2, 6)
    names = files(disk)
    assert f"{source:x}.log" not in names and f"{copied.new_log:x}.log" in names, names
    assert not any("compact" in name for name in names), names


# --- aborts -------------------------------------------------------------------------------


def test_a_new_cycle_rolls_back_the_compaction_in_flight() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    before = files(disk)
    bookie.gc_begin(force=True)
    copied = bookie.compact_copy()
    assert f"{copied.new_log:x}.log.compacting" in files(disk)
    again = bookie.gc_begin(force=True)
    assert files(disk) == before
    assert bookie.compact_flush().phase == "idle"  # the old compaction is gone
    assert again.candidates == (copied.source_log,)
    assert bookie.gc(force=True).logs_compacted == 1


@pytest.mark.parametrize("after", ["copy", "flush"])
def test_a_clean_shutdown_rolls_back_the_compaction_in_flight(after: str) -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    before = files(disk)
    bookie.gc_begin(force=True)
    bookie.compact_copy()
    if after == "flush":
        bookie.compact_flush()
    bookie.shutdown()
    assert files(disk) == before
    bookie = open_bookie(disk, config(), clock=clock)
    assert files(disk) == before
    reads_back(bookie, 1, 6)


# --- suspension, throttle, MaxTimeMillis ---------------------------------------------------


def test_suspension_from_the_directories_states() -> None:
    """InterleavedLedgerStorage's listener: almost full suspends major, full both; with
    isForceGCAllowWhenNoSpace either forces GC instead."""
    w, a, f = DirState.WRITABLE, DirState.ALMOST_FULL, DirState.FULL
    assert suspension([w, w], False) == Suspension()
    assert suspension([w, a], False) == Suspension(suspend_major=True)
    assert suspension([a, f], False) == Suspension(suspend_major=True, suspend_minor=True)
    assert suspension([w, w], True) == Suspension()
    assert suspension([w, a], True) == Suspension(force=True)
    assert suspension([f], True) == Suspension(force=True)


@pytest.mark.parametrize(
    ("usage", "force_when_no_space", "kind"),
    [
        (0.0, False, "major"),
        (0.92, False, "minor"),  # almost full: major suspended
        (0.97, False, "none"),  # full: both suspended
        (0.97, True, "major"),  # forced instead
    ],
)
def test_a_bookie_on_short_disks_suspends_or_forces(
    usage: float, force_when_no_space: bool, kind: str
) -> None:
    disk, clock = SimDisk(), ManualClock()
    cfg = config(
        "minorCompactionThreshold=0.2",
        "majorCompactionThreshold=0.8",
        f"isForceGCAllowWhenNoSpace={str(force_when_no_space).lower()}",
    )
    bookie = open_bookie(disk, cfg, clock=clock)
    if usage:
        for directory in ("/bk/ledgers0", "/bk/ledgers1"):
            disk.set_capacity(directory, 10**9)
            space = disk.disk_space(directory)
            used = space.total_bytes - space.free_bytes
            disk.set_capacity(directory, max(1, int(used / usage)))
    bookie.check_dirs()
    # Unforced with intervals not passed: only isForceGCAllowWhenNoSpace makes it compact.
    unforced = bookie.gc().compaction
    assert unforced == ("major" if force_when_no_space and usage else "none")
    assert bookie.gc(force=True).compaction == kind


def test_the_throttle_paces_by_entries_and_by_bytes_on_the_clock() -> None:
    clock = ManualClock()
    by_entries = Throttle(5, by_bytes=False, clock=clock, sleep_ns=clock.sleep_ns)
    start = clock.monotonic_ns()
    for _ in range(11):
        by_entries.acquire(1, 4096)
    assert clock.monotonic_ns() - start == 2_000_000_000  # 10 waits of 1/5 s
    by_bytes = Throttle(1000, by_bytes=True, clock=clock, sleep_ns=clock.sleep_ns)
    start = clock.monotonic_ns()
    for _ in range(3):
        by_bytes.acquire(1, 500)
    assert clock.monotonic_ns() - start == 1_000_000_000  # 1500 bytes at 1000 B/s, 1st free
    clock.advance_ms(10_000)  # idle time stores at most one second of permits
    start = clock.monotonic_ns()
    for _ in range(3):
        by_bytes.acquire(1, 500)
    assert clock.monotonic_ns() - start == 0
    by_bytes.acquire(1, 500)
    assert clock.monotonic_ns() - start == 500_000_000


def test_a_compaction_is_throttled_on_the_bookie_clock() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = open_bookie(disk, config("compactionRateByEntries=4"), clock=clock)
    fill(bookie, (1, 2, 3), 6)
    bookie.rotate_log()
    bookie.checkpoint()
    bookie.delete_ledger(LedgerId(3))
    start = clock.monotonic_ns()
    assert bookie.gc(force=True).entries_moved == 12
    assert clock.monotonic_ns() - start >= 11 * 250_000_000  # 12 records at 4 per second


def test_max_time_millis_stops_a_run_between_compactions() -> None:
    clock = ManualClock()
    gc = GarbageCollector(GcPolicy.create(major_max_time_ms=1000), clock)
    for log_id in range(5):
        gc.meta[EntryLogId(log_id)] = _usage({1: 10, 2: 90 + log_id})
    gc.drop_deleted(lambda ledger: ledger == 1)
    begun = gc.begin("major", 0, 0)
    assert begun.candidates == (4, 3, 2, 1, 0)  # lowest usage first
    assert gc.next_source() == 4
    clock.advance_ms(999)
    assert gc.next_source() == 3
    clock.advance_ms(1)
    assert gc.next_source() is None  # MaxTimeMillis ran out
    gc.end()
    assert gc.last_major_ms == gc.last_minor_ms == 1000


def _usage(ledgers: dict[int, int]) -> LogUsage:
    return LogUsage(ledgers)


def test_a_log_with_a_damaged_header_is_never_deleted_on_a_guess() -> None:
    """A file too short for a record is empty for sure and goes; one long enough to hold
    records whose header is not an entry log's may hold data the index names: GC leaves it
    (and a zero-byte file beside it still goes)."""
    disk, clock = SimDisk(), ManualClock()
    bookie = open_bookie(disk, config(), clock=clock)
    fill(bookie, (1,), 3)
    bookie.checkpoint()
    bookie.shutdown()
    for name, data in (("99.log", b"\xff" * 3000), ("98.log", b"")):
        handle = disk.open(f"{LEDGER_DIRS[0]}/{name}", create=True)
        handle.append(data)
        handle.fsync()
        handle.close()
    disk.fsync_dir(LEDGER_DIRS[0])
    bookie = open_bookie(disk, config(), clock=clock)
    stats = bookie.gc(force=True)
    assert "99.log" in files(disk) and "98.log" not in files(disk)
    assert stats.logs_deleted == 1
    reads_back(bookie, 1, 3)


def test_a_source_unlinked_before_a_failed_directory_fsync_is_gone_for_the_bookie() -> None:
    """Phase 1 found nothing live and unlinked the source; the directory's fsync failed. The
    error is answered, and the bookie's state no longer lists a log whose file is gone."""
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    (source,) = bookie.gc_begin(force=True).candidates
    bookie.delete_ledger(LedgerId(1))
    bookie.delete_ledger(LedgerId(2))
    name = f"{source:x}.log"
    # Fail the first directory fsync after the source's unlink.
    disk.fail_next("fsync_dir", match=lambda path: name not in files(disk))
    with pytest.raises(BookieIOError):
        bookie.compact_copy()
    assert disk.take_fired(), "the fault never fired"
    assert name not in files(disk)
    assert source not in [info.log_id for info in bookie.inspect().entry_logs]
    bookie.check_invariants()
    assert bookie.failure is None
    bookie.gc(force=True)
    assert f"{source:x}.log" not in files(disk)
    assert source not in [info.log_id for info in bookie.inspect().entry_logs]


class _CancellingClock(ManualClock):
    """A clock whose first throttle wait cancels the copy, as a shutdown from another
    thread would while the copy waits for its rate."""

    def __init__(self) -> None:
        super().__init__()
        self.bookie: Bookie | None = None
        self.cancels = 0

    def sleep_ns(self, ns: int) -> None:
        if self.bookie is not None and not self.cancels:
            self.cancels += 1
            self.bookie.cancel_gc()
        super().sleep_ns(ns)


def test_a_cancelled_copy_rolls_back_and_the_next_cycle_compacts() -> None:
    disk, clock = SimDisk(), _CancellingClock()
    bookie = open_bookie(disk, config("compactionRateByEntries=2"), clock=clock)
    fill(bookie, (1, 2, 3), 6)
    bookie.rotate_log()
    bookie.checkpoint()
    bookie.delete_ledger(LedgerId(3))
    before = files(disk)
    clock.bookie = bookie
    with pytest.raises(BookieIOError, match="cancelled"):
        bookie.gc(force=True)
    assert clock.cancels == 1
    assert files(disk) == before and bookie.failure is None
    bookie.cancel_gc()  # no copy running: nothing to stop, the next copy is not hit
    assert bookie.gc(force=True).logs_compacted == 1
    reads_back(bookie, 1, 6)


def test_a_record_the_index_never_had_is_not_indexed_by_its_compaction() -> None:
    """An add whose record reached an entry log but never the journal (the process died
    before the group commit) is not acknowledged: after the restart the index has no location
    for it and a read answers no_entry. Compacting its log must not put it into the index
    (found by the refinement machine: phase 3 once indexed entries the index had no location
    for, and a read that had been told no_entry then found the bytes)."""
    disk, clock = SimDisk(), ManualClock()
    bookie = open_bookie(disk, config(), clock=clock)
    fill(bookie, (1, 2), 6)
    bookie.checkpoint()  # the index is persisted without entry 1:6
    bookie.add_entry(LedgerId(1), EntryId(6), KEY, DATA)  # never forced
    bookie.rotate_log()  # the record reaches the file with the map, unsynced
    disk.crash(KeepAll())
    bookie = open_bookie(disk, config(), clock=clock)
    with pytest.raises(NoEntry):
        bookie.read_entry(LedgerId(1), EntryId(6))
    bookie.delete_ledger(LedgerId(2))
    stats = bookie.gc(force=True)
    assert stats.logs_compacted == 1 and stats.entries_moved == 7  # 1:6 is copied, not indexed
    with pytest.raises(NoEntry):
        bookie.read_entry(LedgerId(1), EntryId(6))
    reads_back(bookie, 1, 6)
    bookie.check_invariants()


def test_the_state_names_the_compaction_files_of_the_compaction_in_flight() -> None:
    disk, clock = SimDisk(), ManualClock()
    bookie = _three_ledger_log(disk, clock)
    assert bookie.inspect().compaction_files == ()
    (source,) = bookie.gc_begin(force=True).candidates
    new = bookie.compact_copy().new_log
    assert new is not None
    assert bookie.inspect().compaction_files == (f"{new:x}.log.compacting",)
    bookie.compact_flush()
    assert bookie.inspect().compaction_files == (f"{new:x}.log.{source:x}.compacted",)
    assert {f"{new:x}.log.{source:x}.compacted"} <= files(disk)
    bookie.compact_index()
    assert bookie.inspect().compaction_files == ()
    assert not any("compact" in name for name in files(disk))
