"""The journal writer (impl/journal/journal.py, spec/format/journal.md): group commit on the
simulated disk with a manual clock, rollover, trimming, failures and crashes, each checked by
replaying what is on disk. Replay itself is tests/unit/impl/journal/test_replay.py."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import impl.format.journal as fmt
from impl.clock import ManualClock
from impl.config.config import load_config
from impl.format.names import journal_file_name
from impl.fs.api import join
from impl.fs.os_backend import OsFileSystem
from impl.journal.journal import (
    Journal,
    JournalSettings,
    journal_settings_from_config,
    journals_to_trim,
)
from impl.journal.last_mark import NO_MARK, LogMark
from impl.journal.replay import replay
from models.fs.simdisk import SimDisk
from proofs.crash.explorer import explore, record_points
from spec.crash import CrashPlan, KeepPrefix, KeepSubset, LoseUnsynced, TornWrite
from spec.errors import BookieError, BookieIOError
from tests.unit import bk_journal_layout as bk
from tests.unit.impl.journal.journal_files import (
    JDIR,
    T0,
    new_disk,
    put_journal,
    record_ids,
    replayed,
)


def _journal(
    disk: SimDisk, *, clock: ManualClock | None = None, **knobs: int | bool
) -> tuple[Journal, ManualClock]:
    clock = clock or ManualClock(wall_ms=T0)
    journal = Journal(disk, JDIR, JournalSettings(**knobs), clock)  # type: ignore[arg-type]
    return journal, clock


def _data(ledger: int, entry: int, body: bytes = b"body") -> bytes:
    return fmt.encode_data_record(bk.entry_payload(ledger, entry, body))


def _on_success(sink: list[int], tag: int) -> Callable[[BookieError | None], None]:
    """A callback that records ``tag`` in ``sink`` when the record is durable."""

    def done(error: BookieError | None) -> None:
        if error is None:
            sink.append(tag)

    return done


class Acks:
    """Collects acknowledgements: (tag, error) in the order the callbacks ran."""

    def __init__(self) -> None:
        self.got: list[tuple[int, BookieError | None]] = []

    def cb(self, tag: int) -> Callable[[BookieError | None], None]:
        return lambda error: self.got.append((tag, error))

    def tags(self) -> list[int]:
        return [tag for tag, error in self.got if error is None]


# --- opening files --------------------------------------------------------------------------


def test_open_new_file_makes_header_and_name_durable() -> None:
    disk = new_disk()
    journal, _ = _journal(disk)
    journal_id = journal.open_new_file()
    journal.check_invariants()
    assert journal_id == T0
    assert journal.durable_mark() == LogMark(T0, 512)
    disk.crash(LoseUnsynced())
    assert disk.durable_snapshot()[join(JDIR, "18bcfe56800.txn")] == bk.header(6)


def test_new_journal_ids_pass_both_the_clock_and_existing_journals() -> None:
    disk = new_disk()
    put_journal(disk, T0 + 100, bk.header(6))
    journal, clock = _journal(disk)
    assert journal.open_new_file() == T0 + 101  # BookKeeper: largest + 1
    clock.advance_ms(1000)
    assert journal.open_new_file() == T0 + 1000  # the clock when it is ahead
    assert journal.open_new_file() == T0 + 1001  # never the same id twice
    assert journal.journal_ids() == [T0 + 100, T0 + 101, T0 + 1000, T0 + 1001]
    journal.check_invariants()


def test_append_before_the_first_file_is_a_bug() -> None:
    journal, _ = _journal(new_disk())
    with pytest.raises(AssertionError, match="before open_new_file"):
        journal.append(_data(1, 0))


# --- group commit ---------------------------------------------------------------------------


def test_nothing_is_acknowledged_before_the_flush_and_everything_after_in_order() -> None:
    disk = new_disk()
    journal, _ = _journal(disk)
    journal.open_new_file()
    acks = Acks()
    for entry in range(5):
        journal.append(_data(1, entry), acks.cb(entry))
    journal.check_invariants()
    assert acks.got == []
    assert disk.durable_snapshot()[join(JDIR, "18bcfe56800.txn")] == bk.header(6)
    assert journal.flush() == 5
    journal.check_invariants()
    assert acks.got == [(entry, None) for entry in range(5)]
    assert journal.durable_mark() == LogMark(T0, 1024)
    disk.crash(LoseUnsynced())
    assert record_ids(replayed(disk)) == [("data", 1, entry) for entry in range(5)]


def test_a_crash_before_the_flush_loses_only_unacknowledged_records() -> None:
    disk = new_disk()
    journal, _ = _journal(disk)
    journal.open_new_file()
    acks = Acks()
    for entry in range(3):
        journal.append(_data(1, entry), acks.cb(entry))
    journal.flush()
    journal.append(_data(1, 3), acks.cb(3))
    journal.append(_data(1, 4), acks.cb(4))
    disk.crash(LoseUnsynced())
    assert acks.tags() == [0, 1, 2]
    assert record_ids(replayed(disk)) == [("data", 1, 0), ("data", 1, 1), ("data", 1, 2)]


def test_empty_flush_writes_nothing() -> None:
    disk = new_disk()
    journal, _ = _journal(disk)
    journal.open_new_file()
    before = disk.operation_count
    assert journal.flush() == 0
    assert disk.operation_count == before
    assert journal.durable_mark() == LogMark(T0, 512)


def test_should_flush_waits_strictly_longer_than_the_group_wait() -> None:
    journal, clock = _journal(new_disk(), max_group_wait_ms=2)
    journal.open_new_file()
    assert not journal.should_flush()  # nothing queued
    assert journal.flush_deadline_ns() is None
    journal.append(_data(1, 0))
    assert journal.flush_deadline_ns() == 2_000_001
    clock.advance_ms(2)
    assert not journal.should_flush()  # Journal.run: elapsed > maxGroupWait
    clock.advance_ms(1)
    assert journal.should_flush()
    journal.flush()
    assert not journal.should_flush()


def test_should_flush_past_the_entry_threshold() -> None:
    journal, _ = _journal(new_disk(), max_group_wait_ms=1000, buffered_entries_threshold=3)
    journal.open_new_file()
    for entry in range(3):
        journal.append(_data(1, entry))
        assert not journal.should_flush()
    journal.append(_data(1, 3))
    assert journal.should_flush()  # toFlush.size() > journalBufferedEntriesThreshold


def test_should_flush_past_the_byte_threshold_lengths_included() -> None:
    record = _data(1, 0, b"x" * 100)
    threshold = 2 * len(record)
    journal, _ = _journal(
        new_disk(), max_group_wait_ms=1000, buffered_writes_threshold_bytes=threshold
    )
    journal.open_new_file()
    journal.append(record)
    journal.append(_data(1, 1, b"x" * 100))
    assert not journal.should_flush()  # exactly at the threshold
    journal.append(_data(1, 2, b""))
    assert journal.should_flush()


@pytest.mark.parametrize(
    "settings_",
    [JournalSettings(flush_when_queue_empty=True), JournalSettings(max_group_wait_ms=0)],
    ids=["flag", "no-wait"],
)
def test_should_flush_when_the_queue_is_empty(settings_: JournalSettings) -> None:
    journal = Journal(new_disk(), JDIR, settings_, ManualClock())
    journal.open_new_file()
    assert not journal.should_flush()
    journal.append(_data(1, 0))
    assert journal.should_flush()


@pytest.mark.parametrize("alignment", [512, 1024, 4096])
def test_each_flush_pads_to_the_alignment_as_the_page_says(alignment: int) -> None:
    disk = new_disk()
    journal, _ = _journal(disk, alignment_bytes=alignment)
    journal.open_new_file()
    expected = bk.JournalBuilder(version=6, alignment=alignment)
    for group in range(4):
        for entry in range(group + 1):
            body = bytes([group]) * (100 * entry + 7)
            journal.append(_data(group, entry, body))
            expected.entry(group, entry, body)
        journal.flush()
        expected.flush()
        journal.check_invariants()
        assert journal.durable_mark().offset % alignment == 0
    assert disk.read_file(join(JDIR, "18bcfe56800.txn")) == expected.file_bytes()


@pytest.mark.parametrize("version", [4, 5])
def test_older_write_versions_follow_the_page(version: int) -> None:
    disk = new_disk()
    journal, _ = _journal(disk, write_version=version)
    journal.open_new_file()
    acks = Acks()
    expected = bk.JournalBuilder(version=version)
    journal.append(fmt.encode_key_record(1, b"pw"), acks.cb(0))
    expected.key(1, b"pw")
    journal.append(fmt.encode_lac_record(1, b"lac"), acks.cb(1))  # dropped below V6
    journal.append(_data(1, 0), acks.cb(2))
    expected.entry(1, 0, b"body")
    journal.flush()
    expected.flush()
    journal.check_invariants()
    assert acks.tags() == [0, 1, 2]
    assert disk.read_file(join(JDIR, "18bcfe56800.txn")) == expected.file_bytes()


def test_rollover_past_the_size_limit_starts_a_new_journal() -> None:
    disk = new_disk()
    journal, _ = _journal(disk, max_size_bytes=2048)
    journal.open_new_file()
    for entry in range(6):
        journal.append(_data(1, entry, b"y" * 500))
        journal.flush()
        journal.check_invariants()
    ids = journal.journal_ids()
    assert len(ids) >= 2
    assert ids == sorted(ids)
    assert journal.current_journal_id == ids[-1]
    sizes = [len(disk.read_file(join(JDIR, journal_file_name(jid)))) for jid in ids]
    assert all(size > 2048 for size in sizes[:-1])  # rolled only once past the limit
    disk.crash(LoseUnsynced())
    assert record_ids(replayed(disk)) == [("data", 1, entry) for entry in range(6)]


# --- trimming -------------------------------------------------------------------------------


def test_trim_keeps_the_newest_backups_before_the_mark() -> None:
    disk = new_disk()
    journal, clock = _journal(disk, max_backups=2)
    made = []
    for _ in range(5):
        clock.advance_ms(10)
        made.append(journal.open_new_file())
    assert journal.trim(LogMark(made[1], 512)) == []  # one journal before the mark < 2
    assert journal.trim(LogMark(made[4], 512)) == made[:2]
    assert journal.journal_ids() == made[2:]
    journal.check_invariants()


def test_trim_rule_of_checkpoint_complete() -> None:
    ids = [10, 20, 30, 40, 50]
    assert journals_to_trim(ids, LogMark(50, 0), 2, 50) == [10, 20]
    assert journals_to_trim(ids, LogMark(50, 0), 4, 50) == []  # exactly 4 before: none
    assert journals_to_trim(ids, LogMark(50, 0), 0, 50) == [10, 20, 30, 40]
    assert journals_to_trim(ids, LogMark(99, 0), 0, 50) == [10, 20, 30, 40]  # never current
    assert journals_to_trim(ids, NO_MARK, 0, 50) == []


# --- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["fsync", "write"])
def test_a_failed_write_or_fsync_fails_every_waiter_and_every_later_append(op: str) -> None:
    disk = new_disk()
    journal, _ = _journal(disk)
    journal.open_new_file()
    acks = Acks()
    journal.append(_data(1, 0), acks.cb(0))
    journal.flush()
    journal.append(_data(1, 1), acks.cb(1))
    journal.append(_data(1, 2), acks.cb(2))
    disk.fail_next(op, JDIR)
    with pytest.raises(BookieIOError, match="journal failed"):
        journal.flush()
    assert [tag for tag, _ in acks.got] == [0, 1, 2]
    assert acks.tags() == [0]
    assert all(isinstance(error, BookieIOError) for _, error in acks.got[1:])
    assert journal.durable_mark() == LogMark(T0, 1024)
    with pytest.raises(BookieIOError, match="Check the disk"):
        journal.append(_data(1, 3), acks.cb(3))
    with pytest.raises(BookieIOError):
        journal.flush()
    assert not journal.should_flush()
    journal.check_invariants()
    journal.close()  # closes without flushing
    disk.crash(LoseUnsynced())
    assert record_ids(replayed(disk)) == [("data", 1, 0)]


def test_a_callback_that_raises_does_not_stop_the_others() -> None:
    journal, _ = _journal(new_disk())
    journal.open_new_file()
    acks = Acks()

    def bad(_error: BookieError | None) -> None:
        raise RuntimeError("callback bug")

    journal.append(_data(1, 0), acks.cb(0))
    journal.append(_data(1, 1), bad)
    journal.append(_data(1, 2), acks.cb(2))
    with pytest.raises(RuntimeError, match="callback bug"):
        journal.flush()
    assert acks.tags() == [0, 2]


def test_close_flushes_what_is_queued_and_refuses_later_appends() -> None:
    disk = new_disk()
    journal, _ = _journal(disk)
    journal.open_new_file()
    acks = Acks()
    journal.append(_data(1, 0), acks.cb(0))
    journal.close()
    assert acks.tags() == [0]
    with pytest.raises(BookieIOError, match="closed"):
        journal.append(_data(1, 1))
    disk.crash(LoseUnsynced())
    assert record_ids(replayed(disk)) == [("data", 1, 0)]


# --- concurrency ----------------------------------------------------------------------------


def test_appends_go_on_while_the_flush_is_in_its_fsync() -> None:
    disk = new_disk()
    journal, _ = _journal(disk)
    journal.open_new_file()
    acks = Acks()
    journal.append(_data(1, 0), acks.cb(0))
    during: list[bool] = []

    def in_the_middle(kind: str) -> None:
        if kind == "fdatasync" and not during:
            journal.append(_data(1, 1), acks.cb(1))  # would deadlock if flush held the lock
            during.append(journal.should_flush())

    disk.on_operation = in_the_middle
    assert journal.flush() == 1
    disk.on_operation = None
    assert during == [False]  # queued for the next group, not this one
    assert acks.tags() == [0]
    assert journal.flush() == 1
    assert acks.tags() == [0, 1]
    journal.check_invariants()


def test_threads_append_while_a_driver_flushes_on_real_files(tmp_path: Path) -> None:
    directory = str(tmp_path / "current")
    (tmp_path / "current").mkdir()
    fs = OsFileSystem()
    journal = Journal(fs, directory, JournalSettings(max_group_wait_ms=0), ManualClock())
    journal.open_new_file()
    acks = Acks()
    lock = threading.Lock()
    stop = threading.Event()

    def driver() -> None:
        while not stop.is_set():
            if journal.wait_for_append(0.01) and journal.should_flush():
                journal.flush()

    def writer(ledger: int) -> None:
        for entry in range(100):
            done = acks.cb(ledger * 1000 + entry)

            def locked(error: BookieError | None, done: Callable[..., None] = done) -> None:
                with lock:
                    done(error)

            journal.append(_data(ledger, entry), locked)

    flusher = threading.Thread(target=driver)
    flusher.start()
    writers = [threading.Thread(target=writer, args=(ledger,)) for ledger in range(4)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    flusher.join()
    journal.close()
    assert sorted(acks.tags()) == sorted(lg * 1000 + e for lg in range(4) for e in range(100))
    records = list(replay(fs, directory, NO_MARK, skip_invalid=False))
    assert len(records) == 400
    for ledger in range(4):  # each writer's records in its own order, each exactly once
        assert [r.entry_id for r in records if r.ledger_id == ledger] == list(range(100))


# --- crashes --------------------------------------------------------------------------------


def _workload(disk: SimDisk, acked: list[int]) -> Callable[[], None]:
    def run() -> None:
        journal, _ = _journal(disk, max_size_bytes=1500)
        journal.open_new_file()
        for group in range(3):
            for entry in range(group * 3, group * 3 + 3):
                journal.append(_data(1, entry, bytes([entry]) * 300), _on_success(acked, entry))
            journal.flush()

    return run


def test_every_crash_point_and_plan_keeps_every_acknowledged_record() -> None:
    disk = new_disk()
    acked: list[int] = []
    points = record_points(disk, lambda: tuple(acked), _workload(disk, acked))
    assert len(points) > 10

    def check(crashed: SimDisk, acknowledged: tuple[int, ...]) -> tuple[int, list[str]]:
        records = replayed(crashed)
        entries = [r.entry_id for r in records]
        problems = []
        if entries != list(range(len(entries))):
            problems.append(f"replay is not a prefix of the appends: {entries}")
        if len(entries) < len(acknowledged):
            problems.append(f"acknowledged {acknowledged}, replayed {entries}")
        for record in records:
            if record.payload != bk.entry_payload(
                1, record.entry_id, bytes([record.entry_id]) * 300
            ):
                problems.append(f"entry {record.entry_id} replays other bytes")
        return len(acknowledged), problems

    report = explore(points, check)
    assert report.crash_states > len(points)
    assert report.failures == []


class _Boom(Exception):
    """The process dies in the middle of a file-system operation sequence."""


plans = st.one_of(
    st.just(LoseUnsynced()),
    st.builds(KeepPrefix, st.integers(0, 4)),
    st.builds(TornWrite, st.integers(0, 3), st.integers(0, 3)),
    st.builds(KeepSubset, st.frozensets(st.integers(0, 5), max_size=4)),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 700)),
        st.tuples(st.just("flush"), st.just(0)),
        st.tuples(st.just("crash_in_flush"), st.integers(0, 3)),
        st.tuples(st.just("crash"), st.just(0)),
    ),
    max_size=25,
)


@given(steps=steps, crash_plans=st.lists(plans, min_size=8, max_size=8))
@settings(max_examples=60, deadline=None)
def test_random_appends_flushes_and_crashes_replay_every_acknowledged_record_once(
    steps: list[tuple[str, int]], crash_plans: list[CrashPlan]
) -> None:
    disk = new_disk()
    clock = ManualClock(wall_ms=T0)
    appended: dict[int, list[int]] = {0: []}  # epoch (ledger) -> entries appended, in order
    acked: dict[int, list[int]] = {0: []}
    epoch, counter = 0, 0
    journal, _ = _journal(disk, clock=clock, max_size_bytes=3000)
    journal.open_new_file()

    def crash_and_restart() -> Journal:
        nonlocal epoch
        disk.on_operation = None
        disk.crash(crash_plans[epoch % len(crash_plans)])
        epoch += 1
        appended[epoch], acked[epoch] = [], []
        restarted, _ = _journal(disk, clock=clock, max_size_bytes=3000)
        restarted.open_new_file()
        return restarted

    for kind, arg in steps:
        if kind == "append":
            counter += 1
            appended[epoch].append(counter)
            journal.append(_data(epoch, counter, b"z" * arg), _on_success(acked[epoch], counter))
        elif kind == "flush":
            journal.flush()
            journal.check_invariants()
        elif kind == "crash":
            journal = crash_and_restart()
        else:
            countdown = [arg]

            def die(_kind: str, countdown: list[int] = countdown) -> None:
                if countdown[0] == 0:
                    raise _Boom
                countdown[0] -= 1

            disk.on_operation = die
            with contextlib.suppress(_Boom):
                journal.flush()
            journal = crash_and_restart()
    journal.flush()
    disk.crash(LoseUnsynced())
    by_epoch: dict[int, list[int]] = {}
    for record in replayed(disk):
        assert record.kind == "data"
        by_epoch.setdefault(record.ledger_id, []).append(record.entry_id)
    assert list(by_epoch) == sorted(by_epoch)  # epochs replay in order
    for number, entries in appended.items():
        got = by_epoch.get(number, [])
        assert got == entries[: len(got)], "a prefix of that epoch's appends, each once"
        assert len(got) >= len(acked[number]), "every acknowledged record"
        assert acked[number] == entries[: len(acked[number])], "acknowledged in append order"


# --- settings -------------------------------------------------------------------------------


def test_settings_come_from_bookkeeper_keys() -> None:
    config = load_config(
        None,
        "test",
        [
            "journalMaxSizeMB=1",
            "journalMaxGroupWaitMSec=7",
            "journalBufferedWritesThreshold=1000",
            "journalBufferedEntriesThreshold=9",
            "journalFlushWhenQueueEmpty=true",
            "journalAlignmentSize=4096",
            "journalFormatVersionToWrite=5",
            "journalMaxBackups=3",
            "skipReplayJournalInvalidRecord=true",
            "journalSyncData=false",
            "nettyMaxFrameSizeBytes=1048576",
        ],
    )
    assert journal_settings_from_config(config) == JournalSettings(
        max_size_bytes=1024 * 1024,
        max_group_wait_ms=7,
        buffered_writes_threshold_bytes=1000,
        buffered_entries_threshold=9,
        flush_when_queue_empty=True,
        alignment_bytes=4096,
        write_version=5,
        max_backups=3,
        skip_invalid_records=True,
        sync_data=False,
        max_record_bytes=1024 * 1024,
    )
    defaults = journal_settings_from_config(load_config(None, "test", []))
    assert defaults == JournalSettings()
    assert not defaults.flushes_when_queue_empty
    assert JournalSettings(max_group_wait_ms=0).flushes_when_queue_empty


@pytest.mark.parametrize(
    "knobs",
    [{"alignment_bytes": 100}, {"write_version": 3}, {"write_version": 7}, {"max_size_bytes": 0}],
)
def test_settings_refuse_values_bookkeeper_refuses(knobs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        JournalSettings(**knobs)  # type: ignore[arg-type]


# --- deferred acknowledgement (the threaded driver's pipelining) ----------------------------


def test_deferred_callbacks_run_after_the_next_write_before_its_fsync() -> None:
    disk = new_disk()
    journal, _ = _journal(disk)
    journal.open_new_file()
    acks = Acks()
    journal.append(_data(1, 0), acks.cb(0))
    journal.flush(defer_callbacks=True)
    # Durable, but held back: nothing is acknowledged yet.
    assert acks.tags() == []
    assert [r.entry_id for r in replayed(_copy_crashed(disk))] == [0]
    journal.append(_data(1, 1), acks.cb(1))
    order: list[str] = []

    def hook(kind: str) -> None:
        order.append(f"{kind}:{acks.tags()}")

    disk.on_operation = hook
    journal.flush(defer_callbacks=True)
    disk.on_operation = None
    # The held group was acknowledged after the next group's write and before its fsync;
    # the new group is held in turn until release_deferred.
    assert order == ["pwrite:[]", "fdatasync:[0]"]
    assert acks.tags() == [0]
    assert journal.release_deferred() == 1
    assert acks.tags() == [0, 1]
    assert all(error is None for _, error in acks.got)


def test_a_failed_write_still_acknowledges_the_durable_deferred_group() -> None:
    disk = new_disk()
    journal, _ = _journal(disk)
    journal.open_new_file()
    acks = Acks()
    journal.append(_data(1, 0), acks.cb(0))
    journal.flush(defer_callbacks=True)
    journal.append(_data(1, 1), acks.cb(1))
    disk.fail_next("write", JDIR)
    with pytest.raises(BookieIOError):
        journal.flush(defer_callbacks=True)
    assert acks.got[0] == (0, None)
    assert acks.got[1][0] == 1
    assert isinstance(acks.got[1][1], BookieIOError)


# --- the group commit's phases as steps -------------------------------------------------------


def _opened() -> tuple[SimDisk, Journal, Acks]:
    """A journal with its first file open, on a new disk, and a collector of its acks."""
    disk = new_disk()
    journal, _ = _journal(disk)
    journal.open_new_file()
    return disk, journal, Acks()


def test_the_phases_commit_the_group_taken_and_only_it() -> None:
    """Records appended after write_group belong to the next group: sync_group makes only the
    group durable, release_deferred acknowledges only it, and the durable mark moves only at
    the sync."""
    disk, journal, acks = _opened()
    start = journal.durable_mark()
    journal.append(_data(1, 0), acks.cb(0))
    journal.append(_data(1, 1), acks.cb(1))
    assert journal.write_group() == 2
    journal.append(_data(1, 2), acks.cb(2))  # during the group's write and fsync
    journal.check_invariants()
    assert journal.durable_mark() == start
    assert journal.write_group() == 0, "one group in flight at a time"
    assert acks.got == []
    assert journal.sync_group() == 2
    assert journal.durable_mark() > start
    assert acks.got == [], "the acks wait for their phase"
    assert [r.entry_id for r in replayed(_copy_crashed(disk))] == [0, 1]
    journal.append(_data(1, 3), acks.cb(3))  # between the fsync and the acks
    assert journal.release_deferred() == 2
    assert acks.tags() == [0, 1]
    assert journal.sync_group() == 0, "nothing written"
    journal.check_invariants()
    assert journal.flush() == 2
    assert acks.tags() == [0, 1, 2, 3]
    assert [r.entry_id for r in replayed(_copy_crashed(disk))] == [0, 1, 2, 3]


def test_flush_syncs_a_group_written_by_the_phases_first() -> None:
    disk, journal, acks = _opened()
    journal.append(_data(1, 0), acks.cb(0))
    journal.write_group()
    journal.append(_data(1, 1), acks.cb(1))
    assert journal.flush() == 2
    assert acks.tags() == [0, 1]
    journal.check_invariants()
    assert [r.entry_id for r in replayed(_copy_crashed(disk))] == [0, 1]


def test_a_crash_between_the_write_and_the_sync_keeps_what_was_acknowledged() -> None:
    disk, journal, acks = _opened()
    journal.append(_data(1, 0), acks.cb(0))
    journal.flush()
    journal.append(_data(1, 1), acks.cb(1))
    journal.write_group()
    disk.crash(LoseUnsynced())
    assert acks.tags() == [0]
    assert [r.entry_id for r in replayed(disk)] == [0]


@pytest.mark.parametrize("phase", ["write", "fsync"])
def test_a_failed_phase_fails_its_group_and_the_queue_and_keeps_the_durable_acks(
    phase: str,
) -> None:
    disk, journal, acks = _opened()
    journal.append(_data(1, 0), acks.cb(0))
    journal.write_group()
    journal.sync_group()  # durable, its ack waits
    journal.append(_data(1, 1), acks.cb(1))
    if phase == "fsync":
        journal.write_group()
    journal.append(_data(1, 2), acks.cb(2))
    disk.fail_next(phase, JDIR)
    with pytest.raises(BookieIOError, match="journal failed"):
        journal.sync_group() if phase == "fsync" else journal.write_group()
    got = dict(acks.got)
    assert sorted(got) == [0, 1, 2] and len(acks.got) == 3
    assert got[0] is None, "the synced group is durable: acknowledged"
    assert isinstance(got[1], BookieIOError) and isinstance(got[2], BookieIOError)
    journal.check_invariants()
    with pytest.raises(BookieIOError):
        journal.write_group()


def test_the_entry_log_record_is_the_journal_data_record() -> None:
    from impl.format.entry_log import encode_entry_record

    for ledger, entry, body in [(1, 0, b""), (7, 42, b"x" * 1000), (2**62, 2**40, b"\0\1")]:
        assert encode_entry_record(ledger, entry, body) == _data(ledger, entry, body)


def _copy_crashed(disk: SimDisk) -> SimDisk:
    """What a power cut now would leave (the disk itself is untouched)."""
    from proofs.crash.explorer import copy_disk

    crashed = copy_disk(disk)
    crashed.crash(LoseUnsynced())
    return crashed
