"""impl/bookie/driver.py: the journal thread and the maintenance thread.

Adds from several threads with 64 outstanding all complete; an Ack completes only once its
record is durable (checked on the simulated disk's durable state from inside the callback);
journalMaxGroupWaitMSec=0 forces as soon as a record is queued; the checkpoint timer follows
the injected clock; stop() is clean and leaves nothing pending; a failure in a thread is
recorded, fails the pending Acks with BookieIOError and surfaces in ``failed`` and stop().

The simulated disk is single-threaded, so these tests put it behind one lock (LockedFs); the
real file system needs no such thing.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

from impl.bookie.ack import Ack
from impl.bookie.bookie import Bookie
from impl.bookie.driver import BookieDriver
from impl.clock import ManualClock, SystemClock
from impl.config.config import ServerConfig
from impl.fs.api import DirLock, FileHandle, FileSystem
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk
from spec.errors import BookieIOError, NoSpace
from spec.fs import DiskSpace
from spec.ids import EntryId, LedgerId
from tests.unit.impl.bookie.test_bookie import KEY, body, make_config

T = TypeVar("T")
WAIT_S = 20.0


class LockedHandle:
    """A FileHandle whose every call holds the file system's lock."""

    def __init__(self, inner: FileHandle, lock: threading.RLock) -> None:
        self._inner = inner
        self._lock = lock

    def _do(self, fn: Callable[[], T]) -> T:
        with self._lock:
            return fn()

    @property
    def path(self) -> str:
        return self._inner.path

    def pwrite(self, offset: int, data: bytes) -> None:
        self._do(lambda: self._inner.pwrite(offset, data))

    def append(self, data: bytes) -> int:
        return self._do(lambda: self._inner.append(data))

    def pread(self, offset: int, length: int) -> bytes:
        return self._do(lambda: self._inner.pread(offset, length))

    def size(self) -> int:
        return self._do(self._inner.size)

    def truncate(self, length: int) -> None:
        self._do(lambda: self._inner.truncate(length))

    def fsync(self) -> None:
        self._do(self._inner.fsync)

    def fdatasync(self) -> None:
        self._do(self._inner.fdatasync)

    def close(self) -> None:
        self._do(self._inner.close)


class LockedFs:
    """The simulated disk behind one re-entrant lock, so threads may share it."""

    def __init__(self, disk: SimDisk) -> None:
        self.disk = disk
        self.lock = threading.RLock()

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> FileHandle:
        with self.lock:
            inner = self.disk.open(path, create=create, exclusive=exclusive, read_only=read_only)
            return LockedHandle(inner, self.lock)

    def exists(self, path: str) -> bool:
        with self.lock:
            return self.disk.exists(path)

    def is_dir(self, path: str) -> bool:
        with self.lock:
            return self.disk.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        with self.lock:
            return self.disk.listdir(path)

    def mkdir(self, path: str) -> None:
        with self.lock:
            self.disk.mkdir(path)

    def rename(self, src: str, dst: str) -> None:
        with self.lock:
            self.disk.rename(src, dst)

    def link(self, src: str, dst: str) -> None:
        with self.lock:
            self.disk.link(src, dst)

    def unlink(self, path: str) -> None:
        with self.lock:
            self.disk.unlink(path)

    def fsync_dir(self, path: str) -> None:
        with self.lock:
            self.disk.fsync_dir(path)

    def disk_space(self, path: str) -> DiskSpace:
        with self.lock:
            return self.disk.disk_space(path)

    def lock_dir(self, path: str) -> DirLock:
        with self.lock:
            return self.disk.lock_dir(path)


def start(
    fs: FileSystem, config: ServerConfig, clock: ManualClock | SystemClock | None = None
) -> tuple[Bookie, BookieDriver]:
    clock = clock or SystemClock()
    bookie = Bookie.open(fs, config, clock=clock, rng=random.Random(3))
    driver = BookieDriver(bookie, clock, config)
    driver.start()
    return bookie, driver


def test_adds_from_several_threads_with_64_outstanding_all_complete() -> None:
    fs = LockedFs(SimDisk())
    config = make_config("journalMaxGroupWaitMSec=1", "logSizeLimit=65536")
    bookie, driver = start(fs, config)
    outstanding = threading.BoundedSemaphore(64)
    acks: list[tuple[int, int, Ack]] = []
    acks_lock = threading.Lock()

    def writer(ledger: int) -> None:
        for entry in range(60):
            outstanding.acquire()
            ack = bookie.add_entry(LedgerId(ledger), EntryId(entry), KEY, body(ledger, entry))
            ack.add_done_callback(lambda _: outstanding.release())
            with acks_lock:
                acks.append((ledger, entry, ack))

    threads = [threading.Thread(target=writer, args=(ledger,)) for ledger in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert len(acks) == 240
    for _, _, ack in acks:
        assert ack.wait(WAIT_S), "an add was never acknowledged"
        assert ack.error is None, ack.error
    driver.check_invariants()
    driver.stop()
    assert driver.failed is None
    assert driver.forces >= 1
    assert bookie.pending_acks() == 0
    for ledger, entry, _ in acks:
        assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == body(ledger, entry)
    bookie.shutdown()


def test_an_ack_fires_only_once_its_record_is_durable() -> None:
    fs = LockedFs(SimDisk())
    bookie, driver = start(fs, make_config())
    verdicts: list[bool] = []

    def check(data: bytes) -> Callable[[Ack], None]:
        def on_done(ack: Ack) -> None:
            with fs.lock:
                durable = fs.disk.durable_snapshot().values()
                verdicts.append(ack.error is None and any(data in c for c in durable))

        return on_done

    acks = []
    for entry in range(30):
        data = b"marker-%03d-" % entry + body(9, entry, 30)
        ack = bookie.add_entry(LedgerId(9), EntryId(entry), KEY, data)
        ack.add_done_callback(check(data))
        acks.append(ack)
    for ack in acks:
        assert ack.wait(WAIT_S)
    driver.stop()
    bookie.shutdown()
    assert verdicts == [True] * 30


def test_group_wait_zero_forces_as_soon_as_a_record_is_queued() -> None:
    # A clock that never moves: only "flush when anything is queued" can force the group.
    fs = LockedFs(SimDisk())
    clock = ManualClock()
    bookie, driver = start(fs, make_config("journalMaxGroupWaitMSec=0"), clock)
    for entry in range(5):
        ack = bookie.add_entry(LedgerId(1), EntryId(entry), KEY, b"x")
        assert ack.wait(WAIT_S), "journalMaxGroupWaitMSec=0 must not wait for the clock"
        assert ack.error is None
    driver.stop()
    bookie.shutdown()


def test_the_checkpoint_timer_follows_the_clock() -> None:
    fs = LockedFs(SimDisk())
    clock = ManualClock()
    config = make_config("flushInterval=1000")
    bookie, driver = start(fs, config, clock)
    ack = bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"x")
    assert ack.wait(WAIT_S)
    before = bookie.last_mark
    assert driver.checkpoints == 0
    clock.advance_ms(1000)
    deadline = threading.Event()
    for _ in range(200):
        if driver.checkpoints:
            break
        deadline.wait(0.05)
    assert driver.checkpoints >= 1
    assert bookie.last_mark > before
    driver.stop()
    bookie.shutdown()


def test_stop_is_clean_and_a_restart_replays_nothing(tmp_path: object) -> None:
    root = str(tmp_path)
    config = make_config(journal=f"{root}/journal", ledgers=(f"{root}/ledgers",))
    fs = OsFileSystem()
    bookie, driver = start(fs, config)
    acks = [bookie.add_entry(LedgerId(1), EntryId(e), KEY, body(1, e)) for e in range(50)]
    driver.stop()
    assert all(ack.done and ack.error is None for ack in acks)
    bookie.shutdown()
    again = Bookie.open(fs, config, clock=SystemClock(), rng=random.Random(1))
    assert again.recovery.records_replayed == 0
    assert again.read_entry(LedgerId(1), EntryId(49)) == body(1, 49)
    again.shutdown()


def test_a_failure_in_the_journal_thread_fails_pending_acks_and_surfaces() -> None:
    disk = SimDisk()
    fs = LockedFs(disk)
    bookie, driver = start(fs, make_config())
    first = bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"a")
    assert first.wait(WAIT_S) and first.error is None
    with fs.lock:
        disk.fail_next("fsync", "/bk/journal")
        ack = bookie.add_entry(LedgerId(1), EntryId(1), KEY, b"b")
    assert ack.wait(WAIT_S)
    assert isinstance(ack.error, BookieIOError)
    for _ in range(200):
        if driver.failed is not None:
            break
        threading.Event().wait(0.05)
    assert driver.failed is not None
    with pytest.raises(BookieIOError):
        bookie.add_entry(LedgerId(1), EntryId(2), KEY, b"c")
    with pytest.raises(BookieIOError, match="background thread failed"):
        driver.stop()
    driver.check_invariants()


def test_a_bookie_shut_down_under_a_running_driver_is_not_a_failure() -> None:
    fs = LockedFs(SimDisk())
    clock = ManualClock()
    bookie, driver = start(fs, make_config("flushInterval=1"), clock)
    ack = bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"x")
    bookie.shutdown()
    assert ack.wait(WAIT_S) and ack.error is None
    clock.advance_ms(5)  # the maintenance thread's next checkpoint meets a closed bookie
    threading.Event().wait(0.3)
    driver.stop()
    assert driver.failed is None
    driver.check_invariants()


def _wait_for(condition: Callable[[], bool]) -> bool:
    for _ in range(400):
        if condition():
            return True
        threading.Event().wait(0.02)
    return condition()


@pytest.mark.parametrize("step", ["checkpoint", "preallocate"])
def test_a_full_disk_in_background_work_is_no_space_and_service_resumes(step: str) -> None:
    """Issue 10: a full disk met by the maintenance thread's checkpoint or preallocation
    failed the whole bookie (Bookie.fail): every later add got io_error, even after space
    was freed, until a restart. Now the step is retried on the driver's schedule, the bookie
    keeps serving (reads, fences), adds that need room get no_space, and once space returns
    the adds are acknowledged and the next checkpoint persists lastMark again."""
    disk = SimDisk()
    fs = LockedFs(disk)
    clock = ManualClock()
    # Preallocation alone meets the full disk when the checkpoint is not due yet.
    flush_ms = 1000 if step == "checkpoint" else 100_000
    config = make_config(
        f"flushInterval={flush_ms}",
        "diskCheckInterval=1000",
        f"entryLogFilePreallocationEnabled={'true' if step == 'preallocate' else 'false'}",
    )
    bookie, driver = start(fs, config, clock)
    first = bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"a")
    assert first.wait(WAIT_S) and first.error is None
    with fs.lock:
        if step == "preallocate":
            # The preallocated log is taken by a rotation: the next preallocation needs room.
            bookie.rotate_log()
        for directory in ("/bk/ledgers0", "/bk/ledgers1"):
            disk.set_capacity(directory, 0)
        clock.advance_ms(1000)  # a disk check, a checkpoint and a preallocation are due
    met = _wait_for(lambda: driver.failed is not None or driver.no_space_steps > 0)
    assert met, "the step never met the full disk"
    assert driver.failed is None and bookie.failure is None
    assert bookie.read_entry(LedgerId(1), EntryId(0)) == b"a"  # reads go on
    fence = bookie.fence(LedgerId(9), KEY)  # the journal has room: fences go on
    assert fence.wait(WAIT_S) and fence.error is None
    with pytest.raises(NoSpace):  # adds that need room: no_space, not io_error
        for entry in range(1, 200):
            bookie.add_entry(LedgerId(1), EntryId(entry), KEY, bytes(300))
    before = bookie.last_mark
    with fs.lock:
        for directory in ("/bk/ledgers0", "/bk/ledgers1"):
            disk.set_capacity(directory, None)
        clock.advance_ms(flush_ms)  # space is back: the next disk check and checkpoint see it
    assert _wait_for(lambda: bookie.last_mark > before), "no checkpoint after space returned"
    ack = bookie.add_entry(LedgerId(2), EntryId(0), KEY, b"b")
    assert ack.wait(WAIT_S) and ack.error is None
    assert driver.failed is None and bookie.failure is None
    driver.stop()
    driver.check_invariants()
    bookie.shutdown()


def test_a_failed_fsync_in_the_periodic_checkpoint_still_fails_the_bookie() -> None:
    """fsyncgate: only a full disk is retried; a checkpoint whose fsync failed may have lost
    bytes the bookie counted on, so the driver fails the bookie as before (adds io_error)."""
    disk = SimDisk()
    fs = LockedFs(disk)
    clock = ManualClock()
    bookie, driver = start(fs, make_config("flushInterval=1000"), clock)
    first = bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"a")
    assert first.wait(WAIT_S) and first.error is None
    with fs.lock:
        disk.fail_next("fsync", match=lambda path: path.endswith(".log"))
        clock.advance_ms(1000)
    assert _wait_for(lambda: driver.failed is not None)
    assert driver.no_space_steps == 0
    with pytest.raises(BookieIOError):
        bookie.add_entry(LedgerId(1), EntryId(1), KEY, b"b")
    with pytest.raises(BookieIOError, match="background thread failed"):
        driver.stop()


# --- the GC thread ------------------------------------------------------------------------


def _logs_of(disk: SimDisk) -> set[str]:
    return {
        name
        for directory in ("/bk/ledgers0/current", "/bk/ledgers1/current")
        for name in disk.listdir(directory)
        if ".log" in name
    }


def _three_logs(bookie: Bookie) -> list[str]:
    """Ledger 1 and 2 in one flushed log each, then ledger 1 and 2 together in a third."""
    names = []
    for ledger in (1, 2, 0):
        targets = (1, 2) if ledger == 0 else (ledger,)
        for target in targets:
            for entry in range(3):
                entry_id = EntryId(entry + (3 if ledger == 0 else 0))
                ack = bookie.add_entry(LedgerId(target), entry_id, KEY, body(target, entry))
                assert ack.wait(WAIT_S) and ack.error is None
        names.append(f"{bookie.inspect().current_log_id:x}.log")
        bookie.rotate_log()
    bookie.checkpoint()
    return names


def test_the_gc_thread_runs_a_cycle_every_gc_wait_time_on_the_clock() -> None:
    disk = SimDisk()
    fs = LockedFs(disk)
    clock = ManualClock()
    config = make_config("gcWaitTime=1000", "entryLogFilePreallocationEnabled=false")
    bookie, driver = start(fs, config, clock)
    only_1, only_2, both = _three_logs(bookie)
    bookie.delete_ledger(LedgerId(2))
    threading.Event().wait(0.3)
    assert driver.gc_cycles == 0  # not due before gcWaitTime on the injected clock
    assert only_2 in _logs_of(disk)
    clock.advance_ms(1000)
    assert _wait_for(lambda: driver.gc_cycles >= 1), "no GC cycle after gcWaitTime"
    with fs.lock:
        logs = _logs_of(disk)
    assert only_2 not in logs  # nothing live in it: deleted by the cycle
    assert {only_1, both} <= logs  # not due for compaction (intervals not passed)
    for entry in range(6):
        assert bookie.read_entry(LedgerId(1), EntryId(entry)) == body(1, entry % 3)
    assert driver.failed is None and driver.gc_failures == 0
    driver.stop()
    driver.check_invariants()
    bookie.shutdown()


def test_a_failed_gc_cycle_is_logged_and_retried_and_the_bookie_keeps_serving() -> None:
    disk = SimDisk()
    fs = LockedFs(disk)
    clock = ManualClock()
    # Major compaction due after 1 s, minor disabled: an unforced cycle compacts.
    config = make_config(
        "gcWaitTime=1000",
        "majorCompactionInterval=1",
        "minorCompactionThreshold=0",
        "entryLogFilePreallocationEnabled=false",
    )
    said: list[str] = []
    bookie = Bookie.open(fs, config, clock=clock, rng=random.Random(3))
    driver = BookieDriver(bookie, clock, config, log=said.append)
    driver.start()
    _, _, both = _three_logs(bookie)
    bookie.delete_ledger(LedgerId(2))  # the log holding both is half dead: compacted
    with fs.lock:
        disk.fail_next("write", match=lambda path: path.endswith(".log.compacting"))
        clock.advance_ms(1001)
    assert _wait_for(lambda: driver.gc_failures >= 1), "the failure was not met"
    assert driver.failed is None and bookie.failure is None
    assert len(said) == 1 and "garbage collection failed" in said[0], said
    with fs.lock:
        logs = _logs_of(disk)
    assert both in logs, logs  # rolled back: the source stays
    ack = bookie.add_entry(LedgerId(7), EntryId(0), KEY, b"still serving")
    assert ack.wait(WAIT_S) and ack.error is None
    with fs.lock:
        clock.advance_ms(1001)  # the next cycle: nothing fails now
    assert _wait_for(lambda: driver.gc_cycles >= 1), "the cycle was not retried"
    with fs.lock:
        logs = _logs_of(disk)
    assert both not in logs, logs  # compacted this time
    assert not any(name.endswith(("compacting", "compacted")) for name in logs), logs
    for entry in range(6):
        assert bookie.read_entry(LedgerId(1), EntryId(entry)) == body(1, entry % 3)
    driver.stop()
    bookie.shutdown()


def test_a_failed_index_phase_in_the_gc_thread_fails_the_bookie() -> None:
    disk = SimDisk()
    fs = LockedFs(disk)
    clock = ManualClock()
    config = make_config(
        "gcWaitTime=1000",
        "majorCompactionInterval=1",
        "minorCompactionThreshold=0",
        "entryLogFilePreallocationEnabled=false",
    )
    bookie, driver = start(fs, config, clock)
    _three_logs(bookie)
    bookie.delete_ledger(LedgerId(2))
    with fs.lock:
        # Phase 3 flushes the index: its segment's fsync fails.
        disk.fail_next("fsync", match=lambda path: "bkref-index" in path)
        clock.advance_ms(1001)
    assert _wait_for(lambda: driver.failed is not None), "phase 3's failure did not surface"
    assert bookie.failure is not None
    with pytest.raises(BookieIOError, match="background thread failed"):
        driver.stop()
    with pytest.raises(BookieIOError):
        bookie.shutdown()
