"""impl/bookie/bookie.py: the composition root on the simulated disk.

The layout made durable by open, add/read/fence/delete semantics and their error order, the
Ack (only after the journal fsync that covers the record: checked against the disk's durable
state), restart semantics (a clean shutdown replays nothing; a crash loses no acknowledged
add; replay advances the mark, BookKeeper #2087; lastMark never moves back, #4740), the
checkpoint's order of effects on disk, failures of the journal, and inspect(). Hypothesis
drives random workloads crashed under every kind of crash plan. The parts on their own are
test_ack.py, test_layout.py, test_recovery.py, test_checkpoint.py and test_state.py.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.bookie.ack import Ack
from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import ServerConfig, load_config
from impl.fs.api import FileHandle, FileSystem, join
from impl.journal.last_mark import LogMark
from impl.limits import LIMITS, Limits
from models.fs.simdisk import SimDisk
from spec.crash import CrashPlan, KeepPrefix, KeepSubset, LoseUnsynced, TornWrite
from spec.errors import (
    BadRequest,
    BookieIOError,
    Fenced,
    NoEntry,
    NoLedger,
    NoSpace,
    Unauthorized,
)
from spec.ids import EntryId, LedgerId
from tests.unit.fs_wrappers import ForwardingFs, ForwardingHandle

JOURNAL = "/bk/journal"
LEDGERS = ("/bk/ledgers0", "/bk/ledgers1")
KEY = b"master-key"
OTHER_KEY = b"other-key"

# --- helpers (also used by the other test_bookie_* modules) ---------------------------------------


def make_config(
    *overrides: str, journal: str = JOURNAL, ledgers: tuple[str, ...] = LEDGERS
) -> ServerConfig:
    """Small limits so a few entries rotate logs; group wait 0 so a force covers everything."""
    base = [
        f"journalDirectories={journal}",
        f"ledgerDirectories={','.join(ledgers)}",
        "logSizeLimit=4096",
        "writeBufferSizeBytes=512",
        "journalMaxGroupWaitMSec=0",
        "journalMaxBackups=0",
    ]
    return load_config(None, "", [*base, *overrides])


def open_bookie(
    fs: FileSystem,
    config: ServerConfig | None = None,
    *,
    clock: ManualClock | None = None,
    progress: Callable[[str], None] | None = None,
    limits: Limits = LIMITS,
    write_bookkeeper_dirs: bool = False,
) -> Bookie:
    bookie = Bookie.open(
        fs,
        config or make_config(),
        clock=clock or ManualClock(),
        rng=random.Random(7),
        progress=progress,
        limits=limits,
        write_bookkeeper_dirs=write_bookkeeper_dirs,
    )
    bookie.check_invariants()
    return bookie


def body(ledger_id: int, entry_id: int, size: int = 40) -> bytes:
    return bytes((ledger_id * 37 + entry_id * 11 + i) % 256 for i in range(size))


def add_and_ack(bookie: Bookie, ledger_id: int, entry_id: int, data: bytes) -> Ack:
    ack = bookie.add_entry(LedgerId(ledger_id), EntryId(entry_id), KEY, data)
    bookie.journal_force()
    assert ack.wait(5), "forced but not acknowledged"
    assert ack.error is None, ack.error
    return ack


def restart(disk: SimDisk, plan: CrashPlan | None = None, **kwargs: Any) -> Bookie:
    """Crash the disk under ``plan`` (LoseUnsynced by default) and open a new bookie on what
    survived."""
    disk.crash(plan or LoseUnsynced())
    return open_bookie(disk, **kwargs)


def journal_files(disk: SimDisk) -> list[str]:
    return [n for n in disk.listdir(join(JOURNAL, "current")) if n.endswith(".txn")]


# --- layout ---------------------------------------------------------------------------------------


def test_open_makes_the_layout_durable() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    del bookie
    disk.crash(LoseUnsynced())
    for directory in (JOURNAL, *LEDGERS):
        assert disk.is_dir(join(directory, "current")), directory
    assert disk.is_dir("/bk/ledgers0/current/bkref-index")


def test_journal_files_live_under_current_and_a_new_one_at_every_start() -> None:
    disk = SimDisk()
    clock = ManualClock()
    open_bookie(disk, clock=clock).shutdown()
    first = journal_files(disk)
    clock.advance_ms(10)
    open_bookie(disk, clock=clock).shutdown()
    assert len(first) == 1
    assert len(set(journal_files(disk)) | set(first)) == 2


# --- add and read ---------------------------------------------------------------------------------


def test_add_then_read_returns_the_data() -> None:
    bookie = open_bookie(SimDisk())
    add_and_ack(bookie, 1, 0, b"hello")
    add_and_ack(bookie, 1, 1, b"")
    assert bookie.read_entry(LedgerId(1), EntryId(0)) == b"hello"
    assert bookie.read_entry(LedgerId(1), EntryId(1)) == b""
    bookie.check_invariants()


def test_a_read_sees_an_entry_written_but_not_yet_acknowledged() -> None:
    bookie = open_bookie(SimDisk())
    ack = bookie.add_entry(LedgerId(3), EntryId(0), KEY, b"early")
    assert not ack.wait(0)
    assert bookie.read_entry(LedgerId(3), EntryId(0)) == b"early"


def test_read_errors_name_the_missing_thing() -> None:
    bookie = open_bookie(SimDisk())
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(9), EntryId(0))
    add_and_ack(bookie, 9, 0, b"x")
    with pytest.raises(NoEntry):
        bookie.read_entry(LedgerId(9), EntryId(1))
    with pytest.raises(BadRequest):
        bookie.read_entry(LedgerId(-1), EntryId(0))


def test_bad_requests_are_refused_before_anything_is_written() -> None:
    disk = SimDisk()
    config = make_config("nettyMaxFrameSizeBytes=600")  # maxSaneEntrySize = 100
    bookie = open_bookie(disk, config)
    before = disk.operation_count
    with pytest.raises(BadRequest, match="id -1"):
        bookie.add_entry(LedgerId(-1), EntryId(0), KEY, b"")
    with pytest.raises(BadRequest, match="entry id -2"):
        bookie.add_entry(LedgerId(1), EntryId(-2), KEY, b"")
    with pytest.raises(BadRequest, match="above the maximum 100"):
        bookie.add_entry(LedgerId(1), EntryId(0), KEY, bytes(85))
    assert disk.operation_count == before
    ack = bookie.add_entry(LedgerId(1), EntryId(0), KEY, bytes(84))  # 100 bytes with the ids
    bookie.journal_force()
    assert ack.done and ack.error is None


def test_ack_completes_only_after_the_fsync_that_covers_the_record() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    data = b"durable-marker-" + bytes(range(30))
    seen: list[bool] = []

    def on_ack(_: Ack) -> None:
        seen.append(any(data in content for content in disk.durable_snapshot().values()))

    ack = bookie.add_entry(LedgerId(4), EntryId(0), KEY, data)
    ack.add_done_callback(on_ack)
    assert not ack.wait(0)
    assert not any(data in content for content in disk.durable_snapshot().values())
    assert bookie.journal_force() >= 1
    assert ack.done and ack.error is None
    assert seen == [True]


# --- master key -----------------------------------------------------------------------------------


def test_the_first_key_sticks_and_a_wrong_key_is_unauthorized_also_after_restart() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 5, 0, b"a")
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(5), EntryId(1), OTHER_KEY, b"b")
    with pytest.raises(Unauthorized):
        bookie.fence(LedgerId(5), OTHER_KEY)
    bookie = restart(disk)  # crash: the key comes back from the journal
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(5), EntryId(1), OTHER_KEY, b"b")
    bookie.checkpoint()
    bookie.shutdown()
    bookie = open_bookie(disk)  # clean: the key comes back from the index
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(5), EntryId(1), OTHER_KEY, b"b")
    add_and_ack(bookie, 5, 1, b"b")


def test_a_refused_add_changes_nothing() -> None:
    bookie = open_bookie(SimDisk())
    add_and_ack(bookie, 5, 0, b"a")
    state = bookie.inspect()
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(5), EntryId(1), OTHER_KEY, b"b")
    assert bookie.inspect() == state
    with pytest.raises(NoEntry):
        bookie.read_entry(LedgerId(5), EntryId(1))


# --- fencing --------------------------------------------------------------------------------------


def test_fence_refuses_later_adds_at_once_and_acks_after_the_fence_record_is_durable() -> None:
    bookie = open_bookie(SimDisk())
    add_and_ack(bookie, 6, 0, b"a")
    ack = bookie.fence(LedgerId(6), KEY)
    assert not ack.wait(0)
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(6), EntryId(1), KEY, b"b")
    bookie.journal_force()
    assert ack.done and ack.error is None
    assert bookie.read_entry(LedgerId(6), EntryId(0)) == b"a"
    again = bookie.fence(LedgerId(6), KEY)
    assert again.done and again.error is None


def test_a_second_fence_while_the_first_is_in_flight_waits_for_the_same_record() -> None:
    bookie = open_bookie(SimDisk())
    first = bookie.fence(LedgerId(6), KEY)
    second = bookie.fence(LedgerId(6), KEY)
    assert second is first
    bookie.journal_force()
    assert second.done and second.error is None


def test_fencing_an_unknown_ledger_creates_it_with_that_key() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    ack = bookie.fence(LedgerId(8), KEY)
    bookie.journal_force()
    assert ack.error is None
    with pytest.raises(NoEntry):
        bookie.read_entry(LedgerId(8), EntryId(0))
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(8), EntryId(0), OTHER_KEY, b"x")
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(8), EntryId(0), KEY, b"x")
    bookie = restart(disk)  # no checkpoint: key and fence come back from the journal
    assert LedgerId(8) in bookie.inspect().fenced_ledgers
    with pytest.raises(Unauthorized):
        bookie.fence(LedgerId(8), OTHER_KEY)


def test_an_acknowledged_fence_survives_crashes_and_restarts() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 2, 0, b"a")
    ack = bookie.fence(LedgerId(2), KEY)
    bookie.journal_force()
    assert ack.error is None
    for _ in range(3):
        bookie = restart(disk)
        with pytest.raises(Fenced):
            bookie.add_entry(LedgerId(2), EntryId(1), KEY, b"b")
        bookie.checkpoint()
    bookie.shutdown()
    bookie = open_bookie(disk)
    assert bookie.inspect().fenced_ledgers == (LedgerId(2),)


# --- delete ---------------------------------------------------------------------------------------


def test_delete_is_durable_on_return_and_the_ledger_stays_deleted() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 7, 0, b"a")
    add_and_ack(bookie, 8, 0, b"keep")
    bookie.delete_ledger(LedgerId(7))
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(7), EntryId(0))
    with pytest.raises(NoLedger):
        bookie.add_entry(LedgerId(7), EntryId(1), KEY, b"b")
    with pytest.raises(NoLedger):
        bookie.fence(LedgerId(7), KEY)
    bookie = restart(disk)  # the journal still holds ledger 7's records: replay skips them
    assert bookie.recovery.skipped_deleted >= 2  # its key and its data record
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(7), EntryId(0))
    assert bookie.read_entry(LedgerId(8), EntryId(0)) == b"keep"
    assert LedgerId(7) in bookie.inspect().deleted_ledgers
    assert LedgerId(7) not in [info.ledger_id for info in bookie.inspect().ledgers]


def test_deleting_an_unknown_ledger_is_idempotent() -> None:
    bookie = open_bookie(SimDisk())
    bookie.delete_ledger(LedgerId(70))
    bookie.delete_ledger(LedgerId(70))
    with pytest.raises(NoLedger):
        bookie.add_entry(LedgerId(70), EntryId(0), KEY, b"a")


# --- restart semantics ----------------------------------------------------------------------------


def test_a_clean_shutdown_leaves_nothing_to_replay() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(20):
        bookie.add_entry(LedgerId(1 + entry % 3), EntryId(entry // 3), KEY, body(1, entry))
    bookie.fence(LedgerId(3), KEY)
    bookie.shutdown()
    assert bookie.pending_acks() == 0
    bookie = open_bookie(disk)
    assert bookie.recovery.records_replayed == 0
    assert bookie.recovery.start_mark == bookie.recovery.end_mark
    for entry in range(20):
        data = bookie.read_entry(LedgerId(1 + entry % 3), EntryId(entry // 3))
        assert data == body(1, entry)
    # A crash right after the clean restart needs no replay either.
    bookie = restart(disk)
    assert bookie.recovery.records_replayed == 0


def test_replay_advances_the_mark_and_a_second_restart_replays_nothing() -> None:
    # BookKeeper #2087: lastLogMark not advanced by replay.
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(5):
        add_and_ack(bookie, 1, entry, body(1, entry))
    before = bookie.last_mark
    bookie = restart(disk)
    assert bookie.recovery.records_replayed == 6  # the key record and five entries
    assert bookie.recovery.entries_re_added + bookie.recovery.entries_present == 5
    assert bookie.last_mark > before
    bookie = restart(disk)
    assert bookie.recovery.records_replayed == 0
    for entry in range(5):
        assert bookie.read_entry(LedgerId(1), EntryId(entry)) == body(1, entry)


def test_replay_is_idempotent_for_entries_already_in_the_logs() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(5):
        add_and_ack(bookie, 1, entry, body(1, entry))
    # Entry logs and index durable, lastMark not written: replay finds every entry present.
    bookie._entry_logger.flush()  # the crash state, on purpose
    bookie._index.flush()
    bookie = restart(disk)
    assert bookie.recovery.entries_present == 5
    assert bookie.recovery.entries_re_added == 0


def test_last_mark_never_moves_back_across_restarts() -> None:
    disk = SimDisk()
    clock = ManualClock()
    marks: list[LogMark] = []
    bookie = open_bookie(disk, clock=clock)
    for round_number in range(6):
        for entry in range(3):
            add_and_ack(bookie, round_number, entry, body(round_number, entry))
        if round_number % 2 == 0:
            marks.append(bookie.checkpoint())
        marks.append(bookie.last_mark)
        clock.advance_ms(1)
        bookie = restart(disk, clock=clock)
        marks.append(bookie.last_mark)
    assert marks == sorted(marks)
    assert marks[-1] > marks[0]


# --- the phases as steps ---------------------------------------------------------------------


def test_a_phased_checkpoint_persists_the_mark_it_captured_before_its_flush() -> None:
    """Adds forced between the checkpoint's flush and its persist are after the mark it
    persists: a crash then replays them (their entries were not flushed)."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 1, 0, body(1, 0))
    captured = bookie.checkpoint_flush()
    assert bookie.last_mark < captured
    add_and_ack(bookie, 1, 1, body(1, 1))  # forced after the flush
    assert bookie.journal_release_acks() == 0
    bookie.check_invariants()
    assert bookie.checkpoint_persist() == captured
    assert bookie.last_mark == captured
    assert bookie.inspect().journal_mark > captured
    assert bookie.checkpoint_persist() is None, "one persist per flush"
    bookie = restart(disk)
    assert bookie.recovery.records_replayed == 1
    assert bookie.read_entry(LedgerId(1), EntryId(1)) == body(1, 1)


def test_a_whole_checkpoint_overtakes_a_phased_one() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 1, 0, body(1, 0))
    bookie.checkpoint_flush()
    add_and_ack(bookie, 1, 1, body(1, 1))
    whole = bookie.checkpoint()
    assert bookie.checkpoint_persist() is None
    assert bookie.last_mark == whole


def is_done(ack: Ack) -> bool:
    """Whether ``ack`` has completed, asked as a call: an ``assert not ack.done`` would make
    mypy take ``ack.done`` as false for the rest of the test, though a later phase sets it."""
    return ack.done


def test_the_group_commit_phases_acknowledge_only_their_group() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    first = bookie.add_entry(LedgerId(1), EntryId(0), KEY, body(1, 0))
    assert bookie.journal_write() == 2  # the key record and the entry
    second = bookie.add_entry(LedgerId(1), EntryId(1), KEY, body(1, 1))
    fence = bookie.fence(LedgerId(2), KEY)
    assert bookie.journal_sync() == 2
    assert not is_done(first), "acks come at their own phase"
    assert bookie.journal_release_acks() == 2
    assert first.done and first.error is None
    assert not is_done(second) and not is_done(fence)
    bookie.check_invariants()
    bookie.journal_force()
    assert second.done and fence.done


def test_journals_roll_over_at_the_limits_cap_and_replay_crosses_them() -> None:
    """Limits.journal_file_max_bytes caps journalMaxSizeMB (MiB: no test run would roll a
    journal over): every group here fills a sector, so each rolls over; replay reads every
    file from lastMark, and a checkpoint trims those before it but the newest backup."""
    disk = SimDisk()
    limits = attrs.evolve(LIMITS, journal_file_max_bytes=1024)
    config = make_config("journalMaxBackups=1")
    bookie = open_bookie(disk, config, limits=limits)
    for entry in range(6):
        add_and_ack(bookie, 1, entry, body(1, entry, size=400))
    assert len(journal_files(disk)) >= 4
    bookie = restart(disk, config=config, limits=limits)
    assert bookie.recovery.records_replayed == 7  # the key record and six entries
    for entry in range(6):
        assert bookie.read_entry(LedgerId(1), EntryId(entry)) == body(1, entry, size=400)
    add_and_ack(bookie, 1, 6, body(1, 6, size=400))
    mark = bookie.checkpoint()
    ids = sorted(int(name.removesuffix(".txn"), 16) for name in journal_files(disk))
    assert len([journal_id for journal_id in ids if journal_id < mark.journal_id]) == 1
    bookie.check_invariants()


def test_checkpoint_trims_old_journals() -> None:
    disk = SimDisk()
    clock = ManualClock()
    bookie = open_bookie(disk, clock=clock)
    for number in range(3):
        add_and_ack(bookie, 1, number, b"x")
        clock.advance_ms(1)
        bookie.shutdown()
        bookie = open_bookie(disk, clock=clock)
    bookie.checkpoint()
    assert len(journal_files(disk)) == 1  # journalMaxBackups=0 keeps only the marked one


# --- the checkpoint's order -----------------------------------------------------------------------


class RecordingHandle(ForwardingHandle):
    """A FileHandle that reports writes and fsyncs to its file system's log."""

    def __init__(self, inner: FileHandle, log: list[tuple[str, str]]) -> None:
        super().__init__(inner)
        self._log = log

    def pwrite(self, offset: int, data: bytes) -> None:
        self._log.append(("write", self.inner.path))
        self.inner.pwrite(offset, data)

    def append(self, data: bytes) -> int:
        self._log.append(("write", self.inner.path))
        return self.inner.append(data)

    def fsync(self) -> None:
        self._log.append(("fsync", self.inner.path))
        self.inner.fsync()

    def fdatasync(self) -> None:
        self._log.append(("fsync", self.inner.path))
        self.inner.fdatasync()


class RecordingFs(ForwardingFs):
    """A FileSystem that logs (operation, path) of writes, fsyncs, renames and unlinks."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.log: list[tuple[str, str]] = []

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> FileHandle:
        inner = self.inner.open(path, create=create, exclusive=exclusive, read_only=read_only)
        return RecordingHandle(inner, self.log)

    def rename(self, src: str, dst: str) -> None:
        self.log.append(("rename", dst))
        self.inner.rename(src, dst)

    def link(self, src: str, dst: str) -> None:
        self.log.append(("link", dst))
        self.inner.link(src, dst)

    def unlink(self, path: str) -> None:
        self.log.append(("unlink", path))
        self.inner.unlink(path)

    def fsync_dir(self, path: str) -> None:
        self.log.append(("fsync_dir", path))
        self.inner.fsync_dir(path)


def _first(log: list[tuple[str, str]], pred: Callable[[str, str], bool]) -> int:
    return next(i for i, (op, path) in enumerate(log) if pred(op, path))


def _last(log: list[tuple[str, str]], pred: Callable[[str, str], bool]) -> int:
    return max(i for i, (op, path) in enumerate(log) if pred(op, path))


def test_checkpoint_order_entry_logs_then_index_then_last_mark_then_trim() -> None:
    disk = SimDisk()
    clock = ManualClock()
    fs = RecordingFs(disk)
    open_bookie(fs, clock=clock).shutdown()  # an old journal for the trim to delete
    clock.advance_ms(5)
    bookie = open_bookie(fs, clock=clock)
    for entry in range(30):  # several logs: rotated ones and an active one
        add_and_ack(bookie, 1 + entry % 2, entry // 2, body(1, entry, 200))
    fs.log.clear()
    bookie.checkpoint()
    log = fs.log

    def is_log(op: str, path: str) -> bool:
        return op == "fsync" and path.endswith(".log")

    def is_index(op: str, path: str) -> bool:
        return "bkref-index" in path

    def is_mark(op: str, path: str) -> bool:
        return op in ("fsync", "rename") and "lastMark" in path

    def is_trim(op: str, path: str) -> bool:
        return op == "unlink" and path.endswith(".txn")

    assert _last(log, is_log) < _first(log, is_index)
    assert _last(log, is_index) < _first(log, is_mark)
    assert _last(log, is_mark) < _first(log, is_trim)
    marks = {path for op, path in log if is_mark(op, path)}
    assert any(path.startswith("/bk/ledgers0/") for path in marks)
    assert any(path.startswith("/bk/ledgers1/") for path in marks)


def test_last_mark_is_written_to_every_ledger_dir_as_sixteen_bytes_and_the_coverage() -> None:
    """BookKeeper's 16 bytes first (it reads only those), then bkref's index coverage."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 1, 0, b"x")
    bookie.delete_ledger(LedgerId(7))
    mark = bookie.checkpoint()
    for ledger_dir in LEDGERS:
        raw = disk.read_file(join(ledger_dir, "current", "lastMark"))
        assert struct.unpack_from(">qq", raw) == (mark.journal_id, mark.offset)
        assert raw[16:20] == b"BKIC"
        seq, deletes = struct.unpack_from(">QQ", raw, 20)
        assert seq >= 1 and deletes == 1


# --- crashes --------------------------------------------------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 3), st.integers(0, 300)),
        st.tuples(st.just("fence"), st.integers(1, 3), st.just(0)),
        st.tuples(st.just("force"), st.just(0), st.just(0)),
        st.tuples(st.just("checkpoint"), st.just(0), st.just(0)),
        st.tuples(st.just("delete"), st.integers(1, 3), st.just(0)),
    ),
    max_size=40,
)
PLANS = st.one_of(
    st.just(LoseUnsynced()),
    st.builds(KeepPrefix, st.integers(0, 60)),
    st.builds(TornWrite, st.integers(0, 60), st.integers(0, 3)),
    st.builds(KeepSubset, st.frozensets(st.integers(0, 60), max_size=20)),
)


@attrs.define
class Outcome:
    """What a workload saw acknowledged, as the client knows it."""

    acked: dict[tuple[int, int], bytes] = attrs.Factory(dict)
    fenced: set[int] = attrs.Factory(set)
    deleted: set[int] = attrs.Factory(set)
    #: A delete that had not returned when the bookie died: deleted or not, either may
    #: survive (its tombstone is durable before its coverage record is written).
    deleting: set[int] = attrs.Factory(set)


def _record_add(seen: Outcome, ledger: int, entry: int, data: bytes) -> Callable[[Ack], None]:
    def on_done(ack: Ack) -> None:
        if ack.error is None:
            seen.acked[(ledger, entry)] = data

    return on_done


def _record_fence(seen: Outcome, ledger: int) -> Callable[[Ack], None]:
    def on_done(ack: Ack) -> None:
        if ack.error is None:
            seen.fenced.add(ledger)

    return on_done


def run_workload(bookie: Bookie, ops: list[tuple[str, int, int]], seen: Outcome) -> None:
    """Run ``ops``, recording in ``seen`` what was acknowledged (also when it raises)."""
    next_entry: dict[int, int] = {}
    for kind, ledger, size in ops:
        if kind == "add" and ledger not in seen.deleted:
            entry = next_entry.get(ledger, 0)
            data = body(ledger, entry, size)
            try:
                ack = bookie.add_entry(LedgerId(ledger), EntryId(entry), KEY, data)
            except Fenced:
                assert LedgerId(ledger) in bookie.inspect().fenced_ledgers
                continue
            next_entry[ledger] = entry + 1
            ack.add_done_callback(_record_add(seen, ledger, entry, data))
        elif kind == "fence" and ledger not in seen.deleted:
            ack = bookie.fence(LedgerId(ledger), KEY)
            ack.add_done_callback(_record_fence(seen, ledger))
        elif kind == "force":
            bookie.journal_force()
        elif kind == "checkpoint":
            bookie.checkpoint()
        elif kind == "delete":
            seen.deleting.add(ledger)
            bookie.delete_ledger(LedgerId(ledger))
            seen.deleting.discard(ledger)
            seen.deleted.add(ledger)
        bookie.check_invariants()


def check_recovered(bookie: Bookie, seen: Outcome) -> None:
    """spec/properties.md properties 1, 2, 4 and 3 (a wrong key never adds) after recovery."""
    bookie.check_invariants()
    gone = set(bookie.inspect().deleted_ledgers)
    assert seen.deleted <= gone, (seen.deleted, gone)
    assert gone <= seen.deleted | seen.deleting, (gone, seen.deleted, seen.deleting)
    for (ledger, entry), data in seen.acked.items():
        if ledger in gone:
            with pytest.raises(NoLedger):
                bookie.read_entry(LedgerId(ledger), EntryId(entry))
        else:
            assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == data
    for ledger in seen.fenced - gone:
        with pytest.raises(Fenced):
            bookie.add_entry(LedgerId(ledger), EntryId(10_000), KEY, b"late")
    for ledger in {ledger for ledger, _ in seen.acked} - gone:
        with pytest.raises(Unauthorized):
            bookie.add_entry(LedgerId(ledger), EntryId(10_001), OTHER_KEY, b"thief")


def check_crash(ops: list[tuple[str, int, int]], plan: CrashPlan) -> None:
    """Run ``ops``, crash under ``plan``, recover and check; then crash again at once."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    seen = Outcome()
    run_workload(bookie, ops, seen)
    bookie = restart(disk, plan)
    check_recovered(bookie, seen)
    # Recovery itself is crash-safe: crash again at once and check again.
    bookie = restart(disk, plan)
    check_recovered(bookie, seen)


@settings(max_examples=40, deadline=None)
@given(ops=OPS, plan=PLANS)
def test_nothing_acknowledged_is_lost_under_any_crash_plan(
    ops: list[tuple[str, int, int]], plan: CrashPlan
) -> None:
    check_crash(ops, plan)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(ops=OPS, plan=PLANS)
def test_nothing_acknowledged_is_lost_under_any_crash_plan_deep(
    ops: list[tuple[str, int, int]], plan: CrashPlan
) -> None:
    check_crash(ops, plan)


class CrashNow(Exception):
    """Raised by the disk hook to stop the workload at one operation."""


def _crash_at(disk: SimDisk, at: int) -> None:
    start = disk.operation_count

    def hook(_kind: str) -> None:
        if disk.operation_count - start >= at:
            raise CrashNow

    disk.on_operation = hook


#: A scripted workload: adds across three ledgers (rotating logs), a fence, a checkpoint in
#: the middle, a deletion, forces; every step is a point the crash test stops at.
SCRIPT: list[tuple[str, int, int]] = [
    *[("add", 1 + n % 3, 60 + n * 37 % 300) for n in range(8)],
    ("force", 0, 0),
    ("fence", 3, 0),
    *[("add", 1 + n % 3, 60 + n * 37 % 300) for n in range(8, 14)],
    ("force", 0, 0),
    ("checkpoint", 0, 0),
    ("delete", 2, 0),
    *[("add", 1 + n % 3, 60 + n * 37 % 300) for n in range(14, 24)],
    ("force", 0, 0),
    ("checkpoint", 0, 0),
    ("add", 1, 100),
    ("force", 0, 0),
]


def _script_operations() -> int:
    disk = SimDisk()
    bookie = open_bookie(disk)
    start = disk.operation_count
    run_workload(bookie, SCRIPT, Outcome())
    return disk.operation_count - start


SCRIPT_OPERATIONS = _script_operations()
CRASH_PLANS: list[CrashPlan] = [
    LoseUnsynced(),
    KeepPrefix(2),
    TornWrite(1, 1),
    KeepSubset(frozenset({0, 2, 3, 5})),
]


@pytest.mark.parametrize("plan", CRASH_PLANS, ids=lambda plan: type(plan).__name__)
@pytest.mark.parametrize("at", range(SCRIPT_OPERATIONS + 1))
def test_a_crash_at_every_operation_loses_nothing_acknowledged(at: int, plan: CrashPlan) -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    seen = Outcome()
    _crash_at(disk, at)
    try:
        run_workload(bookie, SCRIPT, seen)
        assert at == SCRIPT_OPERATIONS, "the workload ran past its crash point"
    except CrashNow:
        pass
    except BookieIOError as exc:  # the journal reports the crash of its fsync this way
        assert isinstance(exc.__cause__, CrashNow), exc
    disk.on_operation = None
    bookie = restart(disk, plan)
    check_recovered(bookie, seen)


def test_the_crash_script_reaches_every_kind_of_step() -> None:
    seen = Outcome()
    disk = SimDisk()
    bookie = open_bookie(disk)
    run_workload(bookie, SCRIPT, seen)
    state = bookie.inspect()
    assert SCRIPT_OPERATIONS > 40
    assert seen.fenced == {3}
    assert seen.deleted == {2}
    assert len([info for info in state.entry_logs if info.ledgers]) >= 2  # logs rotated
    assert len(seen.acked) >= 14


# --- failures -------------------------------------------------------------------------------------


def test_a_failed_journal_fsync_fails_pending_acks_and_later_writes() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    ack = bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"a")
    disk.fail_next("fsync", JOURNAL)
    with pytest.raises(Exception):  # noqa: B017 - the journal's own error type propagates
        bookie.journal_force()
    assert ack.done
    assert isinstance(ack.error, BookieIOError)
    assert bookie.pending_acks() == 0
    with pytest.raises(BookieIOError, match="stopped accepting writes"):
        bookie.add_entry(LedgerId(1), EntryId(1), KEY, b"b")


def test_the_bookie_says_when_it_enters_its_failed_state() -> None:
    """Issue 26: after a background I/O error the bookie refused writes without a word on
    its progress stream (the adapter's standard error). It says it once, with what to do."""
    disk = SimDisk()
    lines: list[str] = []
    bookie = open_bookie(disk, progress=lines.append)
    add_and_ack(bookie, 1, 0, b"a")
    lines.clear()
    disk.fail_next("fsync", LEDGERS[0])
    with pytest.raises(BookieIOError):
        bookie.checkpoint()
    failed = [line for line in lines if line.startswith("failed: ")]
    assert len(failed) == 1, lines
    assert "refuses writes" in failed[0] and "restart the bookie" in failed[0], failed
    bookie.fail(RuntimeError("a second one"))
    assert len([line for line in lines if line.startswith("failed: ")]) == 1


def test_a_preallocation_the_disk_fails_is_a_typed_error() -> None:
    """The refinement machine found it: a failed fsync while preallocating an entry log
    escaped Bookie.preallocate as a raw FsIOError (the maintenance thread's step); it is a
    BookieIOError now, and the bookie refuses writes as after any failed background step.
    No room for the log is NoSpace, and nothing fails."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 1, 0, b"a")
    for ledger_dir in LEDGERS:
        disk.set_capacity(ledger_dir, 0)
    bookie.check_dirs()
    with pytest.raises(NoSpace):
        bookie.preallocate()
    for ledger_dir in LEDGERS:
        disk.set_capacity(ledger_dir, None)
    bookie.check_dirs()
    add_and_ack(bookie, 1, 1, b"b")  # no room was no failure
    disk.fail_next("fsync", match=lambda path: path.endswith(".log"))
    disk.fail_next("fsync_dir")
    with pytest.raises(BookieIOError, match="preallocating an entry log failed"):
        bookie.preallocate()
    with pytest.raises(BookieIOError):
        bookie.add_entry(LedgerId(1), EntryId(2), KEY, b"c")


def test_no_space_for_the_entry_log_is_no_space() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 1, 0, b"a")
    for ledger_dir in LEDGERS:
        disk.set_capacity(ledger_dir, 0)
    with pytest.raises(NoSpace):
        for entry in range(1, 200):
            bookie.add_entry(LedgerId(1), EntryId(entry), KEY, bytes(300))
    for ledger_dir in LEDGERS:
        disk.set_capacity(ledger_dir, None)
    assert bookie.read_entry(LedgerId(1), EntryId(0)) == b"a"


def test_operations_after_shutdown_say_so() -> None:
    bookie = open_bookie(SimDisk())
    bookie.shutdown()
    bookie.shutdown()
    with pytest.raises(BookieIOError, match="shut down"):
        bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"a")
    with pytest.raises(BookieIOError, match="shut down"):
        bookie.read_entry(LedgerId(1), EntryId(0))


# --- inspect --------------------------------------------------------------------------------------


def test_ledgers_maps_show_each_sealed_log_s_map_and_none_on_the_active_log() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(30):
        add_and_ack(bookie, 1 + entry % 2, entry // 2, body(1, entry, 200))
    state = bookie.inspect()
    maps = {info.log_id: info for info in bookie.ledgers_maps()}
    assert set(maps) == {info.log_id for info in state.entry_logs}
    for info in state.entry_logs:
        found = maps[info.log_id]
        if info.state == "active":
            assert (found.sealed, found.ledger_bytes) == (False, None)
        else:  # a sealed log: its map is its records
            assert (found.sealed, found.ledger_bytes) == (True, info.ledger_bytes)
    assert any(found.sealed for found in maps.values())
    bookie.shutdown()


def test_inspect_describes_logs_ledgers_marks_and_fences() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(30):
        add_and_ack(bookie, 1 + entry % 2, entry // 2, body(1, entry, 200))
    bookie.fence(LedgerId(2), KEY)
    bookie.journal_force()
    state = bookie.inspect()
    states = {info.state for info in state.entry_logs}
    assert "active" in states
    assert "rotated" in states
    assert state.current_log_id == max(
        info.log_id for info in state.entry_logs if info.state == "active"
    )
    assert {info.ledger_id: info.last_entry for info in state.ledgers} == {1: 14, 2: 14}
    assert state.fenced_ledgers == (LedgerId(2),)
    assert state.journal_mark >= state.last_mark
    assert state.compaction_files == ()
    mark = bookie.checkpoint()
    state = bookie.inspect()
    assert state.last_mark == mark
    assert {info.state for info in state.entry_logs} <= {"active", "flushed", "preallocated"}
    assert state.least_unflushed_log_id == state.current_log_id
    all_ledgers = {lid for info in state.entry_logs for lid in info.ledgers}
    assert all_ledgers == {1, 2}
    bookie.shutdown()
    restarted = open_bookie(disk).inspect()
    assert {info.log_id for info in restarted.entry_logs} >= {
        info.log_id for info in state.entry_logs if info.ledgers
    }
    assert {lid for info in restarted.entry_logs for lid in info.ledgers} == {1, 2}
