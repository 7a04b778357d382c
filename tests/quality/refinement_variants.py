"""Known-bad variants of the bookie that the refinement test must catch.

tests/quality/test_refinement_catches.py runs the unchanged refinement machine
(tests/refinement/machine.py over proofs/harness/refinement.py) against each of them. A variant is
either a subclass of Bookie (its inherited ``open`` is a classmethod building ``cls``, so
``opener=Variant.open`` runs it) or a monkeypatch that the test applies with pytest's
``monkeypatch`` fixture (``apply_*``). Each differs from the implementation in exactly the
way its name says; they live here, never in impl/. A variant that slips through is a defect
of the model or of the machine's rules, to be fixed there, not here.

Variants reused from the other checkers are imported, not copied: tests/quality/
bookie_variants.py (the bookie crash check) and tests/quality/variants.py (crash-check).

Not verified here: that each variant loses data in *every* run; the test only requires that
the derandomized profile finds one run where the model, a property or an invariant fails.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

import impl.bookie.bookie as bookie_module
import impl.bookie.recovery as recovery_module
import impl.entrylog.manager as manager_module
import impl.journal.last_mark as last_mark_module
from impl.bookie.ack import Ack, PendingAcks
from impl.bookie.bookie import Bookie
from impl.bookie.bookie import _BookieCompactor as BookieCompactor
from impl.bookie.checkpoint import Checkpointer
from impl.clock import Clock
from impl.entrylog.buffered_channel import BufferedChannel
from impl.entrylog.compactor import DONE as COMPACTION_DONE
from impl.entrylog.compactor import (
    Compaction,
    LeftoverRecovery,
    LeftoverReport,
    MovedEntry,
    TransactionalCompactor,
)
from impl.entrylog.ids import LogIdAllocator, RecentEntryLogsStatus
from impl.entrylog.ledger_dirs import DirState
from impl.entrylog.manager import LogState, SingleEntryLogManager
from impl.entrylog.per_ledger import PerLedgerEntryLogManager
from impl.format.entry_log import (
    LEDGERS_MAP_MAX_BATCH_SIZE,
    LOGFILE_HEADER_SIZE,
    encode_ledgers_map,
)
from impl.format.journal import encode_key_record
from impl.format.names import LAST_MARK_FILE_NAME, log_file_name
from impl.fs.api import FileSystem, join
from impl.index.ledger_index import TombstoneUncertain
from impl.journal.journal import Journal, OnDurable
from impl.journal.last_mark import IndexCoverage, LogMark, encode_last_mark
from impl.limits import LIMITS, Limits
from spec.errors import BookieError, BookieIOError, FsError, NoSpace
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id
from tests.quality import bookie_variants, variants
from tests.unit.fs_wrappers import ForwardingFs

#: bkref's own writer of one lastMark file, before any variant replaces it.
_WRITE_ONE = last_mark_module._write_one


class _BookieWithItsJournal(Bookie):
    """A bookie whose journal is a variant's subclass of Journal (``JOURNAL``), opened as
    Bookie._start_journal opens bkref's."""

    JOURNAL: type[Journal] = Journal

    def _start_journal(self, clock: Clock) -> None:
        journal = self.JOURNAL(self._fs, self._layout.journal_dir, self._journal_settings(), clock)
        journal.open_new_file()
        self._journal = journal


# --- 1. acknowledging before the journal fsync ------------------------------------------------


class _JournalAckingBeforeFsync(Journal):
    """A journal that completes a group's callbacks once the group is written, before the
    fsync that makes it durable (what BookKeeper does on purpose with journalSyncData=false:
    "the journal entries are written in the OS page cache but not flushed to disk")."""

    def _sync(self, written_bytes: int, callbacks: list[OnDurable | None]) -> None:
        for callback in callbacks:
            if callback is not None:
                callback(None)  # the Acks are done: the flush's own call later is a no-op
        super()._sync(written_bytes, callbacks)


class AckBeforeJournalFsyncBookie(_BookieWithItsJournal):
    """Acknowledges adds and fences after the journal's write, before its fsync.

    How it loses data: a crash (or a failed fsync) between the write and the fsync drops the
    group's records from the page cache; the client already has its ack, and neither the
    journal nor the (unsynced) entry log holds the entry after recovery. Breaks property 1
    (durability) and, for a fence, property 2. Only a crash or a failed fsync inside that
    window shows it: the ack comes at the step where a correct bookie acknowledges too."""

    JOURNAL = _JournalAckingBeforeFsync


def apply_ack_at_append(monkeypatch: pytest.MonkeyPatch) -> None:
    """Journal.append acknowledging each record as soon as it is queued, before any write
    or fsync (tests/quality/bookie_variants.journal_acking_at_once: the bug the kill -9 test
    caught in an early bkref bookie). The add answers ok at once; a crash before the next
    force loses an acknowledged entry (property 1)."""
    monkeypatch.setattr(Journal, "append", bookie_variants.journal_acking_at_once(Journal.append))


# --- 2. persisting lastMark before the rotated logs are fsynced ------------------------------


class _CheckpointerPersistingLastMarkFirst(Checkpointer):
    complete = bookie_variants.checkpoint_persisting_last_mark_first


class LastMarkBeforeLogsBookie(Bookie):
    """The checkpoint persists lastMark first, then fsyncs the entry logs and flushes the
    index (tests/quality/bookie_variants.checkpoint_persisting_last_mark_first).

    How it loses data: a crash after the new lastMark is durable and before the rotated (and
    active) logs are fsynced leaves acknowledged entries only in the page cache, which the
    crash drops; recovery replays the journal from the new mark, past their records, so
    nothing brings them back (property 1). The recovery checkpoint runs the same order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checkpointer = _CheckpointerPersistingLastMarkFirst(
            self._fs,
            self._layout.ledger_dirs,
            self._lock,
            self._entry_logger,
            self._index,
            self._checkpointer.last_mark,
        )


def apply_rotated_logs_marked_flushed_unsynced(monkeypatch: pytest.MonkeyPatch) -> None:
    """flushRotatedLogs that writes the rotated logs to the OS but never fsyncs them, and
    still marks them flushed (tests/quality/variants.checkpoint_without_fsync); the active log
    is fsynced as before, then lastMark is persisted. A crash after the checkpoint drops the
    rotated logs' tails while lastMark says the journal before it is no longer needed
    (property 1)."""
    monkeypatch.setattr(SingleEntryLogManager, "checkpoint", variants.checkpoint_without_fsync)


# --- 3. not journaling the fence --------------------------------------------------------------


class FenceAckedAtOnceBookie(Bookie):
    """Fence sets the ledger's fenced flag in the index and acknowledges at once, with no
    fence record in the journal (the key record of a ledger new to the bookie is journaled,
    as Bookie.fence does). Before journal format V4 ("Adding fencing key", JournalChannel)
    BookKeeper had no fence record: the fence lived in the ledger index only, durable at the
    next index flush.

    How it breaks property 2: a crash before the next checkpoint loses the in-memory flag;
    after recovery an add to the ledger is acknowledged again although a fence was."""

    def fence(self, ledger_id: LedgerId, master_key: bytes) -> Ack:
        self._fence_in_memory(ledger_id, master_key)
        return Ack.completed()

    def _fence_in_memory(self, ledger_id: LedgerId, master_key: bytes) -> None:
        """Bookie.fence without the fence record: the checks, the key (journaled as Bookie
        journals it, for a ledger this bookie does not know yet) and the fenced flag."""
        self._check_id("ledger", ledger_id)
        self._check_master_key(master_key)
        with self._lock:
            journal = self._require_ready()
            if self._check_key(ledger_id, master_key, "fence"):
                self._index.set_master_key(ledger_id, master_key)
                journal.append(encode_key_record(ledger_id, master_key), None)
            self._index.set_fenced(ledger_id)


class FenceAckedAtNextForceBookie(FenceAckedAtOnceBookie):
    """The sneakier form: the fence's Ack waits for the next group commit, as a journaled
    fence's would, but no fence record is in the group. From the outside the timing looks
    right; only durability tells.

    How it breaks property 2: after the acknowledged fence, a crash before the next index
    flush loses the fence (the journal holds no record to replay), and an add to the ledger
    is acknowledged after recovery."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unjournaled: list[Ack] = []

    def fence(self, ledger_id: LedgerId, master_key: bytes) -> Ack:
        self._fence_in_memory(ledger_id, master_key)
        ack = Ack(self._sink)
        with self._lock:
            self._track(ack)
            self._unjournaled.append(ack)
        return ack

    def journal_force(self, *, defer_acks: bool = False) -> int:
        forced = super().journal_force(defer_acks=defer_acks)
        waiting, self._unjournaled = self._unjournaled, []
        for ack in waiting:
            ack.settle(None)  # a no-op for an Ack that a failure completed already
        return forced


# --- 4. lastMark moving backwards (BookKeeper #4740) ------------------------------------------


def write_last_mark_in_place(fs: FileSystem, ledger_dirs: tuple[str, ...], mark: LogMark) -> None:
    """BookKeeper's LastLogMark.rollLog: overwrite ``lastMark`` in every ledger directory
    with ``mark``, with no check against the mark already there."""
    for directory in ledger_dirs:
        handle = fs.open(join(directory, LAST_MARK_FILE_NAME), create=True)
        try:
            handle.truncate(0)
            handle.pwrite(0, encode_last_mark(mark))
            handle.fsync()
        finally:
            handle.close()


class StaleCheckpointOverwritesLastMarkBookie(Bookie):
    """A checkpoint captured before a newer one completes after it and writes its older mark
    over the newer lastMark (BookKeeper #4740, fixing #4105).

    In BookKeeper, SyncThread.flush captures a checkpoint (the outer one), then flushes the
    ledger storage, which (SingleDirectoryDbLedgerStorage) captures, persists and trims with
    its own, newer checkpoint (the inner one); then the outer one completes and rolls lastMark
    back, with no monotonic guard. Rendered in our single-threaded steps: the outer checkpoint
    is the one captured when the bookie starts, before replay (it holds the mark read from
    disk); it completes at the first checkpoint of the run, after that checkpoint and the
    post-replay one persisted newer marks (and may have trimmed the journals the old mark
    points into). The bookie reports the mark it persisted last: lastMark moves backwards
    from the mark recovery left when replay advanced it, and otherwise stays behind the
    journal's durable mark the checkpoint covered. Breaks property 6 (lastMark never moves
    backwards; after a checkpoint nothing needs replay); in BookKeeper the next start then
    fails with "Recovery log ... is missing", or replays records checkpointed already."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The outer checkpoint's mark, captured before replay, not yet completed.
        self._outer_mark: LogMark | None = self.last_mark

    def checkpoint(self) -> LogMark:
        inner = super().checkpoint()
        outer, self._outer_mark = self._outer_mark, None
        if outer is None:
            return inner
        with self._checkpointer.lock:
            write_last_mark_in_place(self._fs, self._layout.ledger_dirs, outer)
            self._checkpointer._last_mark = outer
        return outer


# --- 5. replay not advancing the mark (BookKeeper #2087) --------------------------------------


class ReplayNotAdvancingMarkBookie(Bookie):
    """The post-replay checkpoint persists the mark replay started from, not where it ended
    (BookKeeper #2087: replay did not update lastLogMark, so the checkpoint after it wrote
    the old mark again; fixed by #2090 and #2105).

    What it breaks: property 6 (after recovery nothing durable needs replay). The next
    restart replays (and re-applies) the same records again, and with journals trimmed by
    then from a later mark, a lastMark this old points at journals that may be gone."""

    def _recovery_checkpoint(self, end: LogMark) -> None:
        super()._recovery_checkpoint(self.last_mark)


# --- 6. leastUnflushedLogId popping past an unflushed log ------------------------------------


def flushed_popping_past_unflushed(self: RecentEntryLogsStatus, log_id: int) -> None:
    """RecentEntryLogsStatus.flushed with the loop's test after the pop: it drops the leading
    flushed ids and then the first unflushed one too, so leastUnflushedLogId moves past a log
    that is not flushed (after a checkpoint, past the active log)."""
    pending = self._flushed
    if log_id in pending:
        pending[log_id] = True
    while pending:
        first = min(pending)
        was_flushed = pending.pop(first)
        self._least_unflushed_log_id = first + 1
        if not was_flushed:
            break


def apply_least_unflushed_past_unflushed(monkeypatch: pytest.MonkeyPatch) -> None:
    """leastUnflushedLogId moves past a log that is not flushed. What it breaks: every log
    below leastUnflushedLogId counts as flushed (isFlushedLogId), and BookKeeper's garbage
    collector and compactor only touch such logs, trusting their bytes are durable and the
    log is no longer written: they would scan, compact and delete the active log under the
    writer. Caught by the entry-log sub-model, which tracks leastUnflushedLogId exactly."""
    monkeypatch.setattr(RecentEntryLogsStatus, "flushed", flushed_popping_past_unflushed)


# --- bugs the refinement test found in bkref's own bookie ------------------------------------


def apply_recovery_trusting_unsynced_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recovery without its first step, the fsync of every file of the previous run.

    The bug the refinement test found in bkref (fixed in impl/bookie/layout.py,
    ``sync_previous_run``, which impl/bookie/recovery.py runs first): after a process restart
    (a failed shutdown, a kill), the page cache still holds bytes the previous process never
    fsynced. Replay skips a record whose entry the index has and that reads back the same,
    then moves lastMark past it; a power loss afterwards loses an acknowledged entry that the
    journal no longer covers."""
    monkeypatch.setattr(recovery_module, "sync_previous_run", lambda fs, layout: 0)


class CheckpointAfterFailureBookie(Bookie):
    """A bookie that still checkpoints after a failure.

    The second bug the refinement test found in bkref (fixed in ``Bookie.checkpoint``): after
    a failed fsync the unsynced bytes of that file are gone, but the entry log's channel
    does not know it; a later checkpoint flushes an index that points at them and moves
    lastMark past their journal records, so the entries read back as io_error (or not at
    all) after a restart."""

    def checkpoint(self) -> LogMark:
        failure, self._failure = self._failure, None
        try:
            return super().checkpoint()
        finally:
            if self._failure is None:
                self._failure = failure


# --- 12. reads that miss the entry log's write buffer -----------------------------------------


def _pread_missing_the_buffer(self: BufferedChannel, offset: int, length: int) -> bytes:
    """BufferedChannel.pread reading the file only: bytes still in the write buffer (not yet
    written to the file) are not seen, as if the read path forgot the buffer."""
    end = min(offset + length, self._flushed_position)
    if offset >= end:
        return b""
    return self._handle.pread(offset, end - offset)


def apply_reads_missing_the_write_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads of the active entry log miss its write buffer. How it goes wrong: an add is
    accepted (written to the buffer and indexed), and a read right after it finds the record
    cut short (no_entry, or io_error) until the buffer is written out, which may be much
    later. Within one run the bookie answers reads of entries it has accepted (and even
    acknowledged: the journal's fsync does not write the entry log's buffer) as missing. The
    model used to let a read of a pending entry fail, so only a read of an acknowledged one
    could show it; under the in-process profile a pending entry must read back."""
    monkeypatch.setattr(BufferedChannel, "pread", _pread_missing_the_buffer)


# --- 13. acknowledging part of a group before its fsync ---------------------------------------


class _JournalAckingPartOfAGroupEarly(Journal):
    """A journal that completes the callbacks of the first half of each group (rounded up)
    once the group is written, before the fsync; the rest after it, correctly."""

    def _sync(self, written_bytes: int, callbacks: list[OnDurable | None]) -> None:
        early = callbacks[: (len(callbacks) + 1) // 2]
        for callback in early:
            if callback is not None:
                callback(None)
        super()._sync(written_bytes, callbacks)


class AckPartOfAGroupBeforeFsyncBookie(_BookieWithItsJournal):
    """Acknowledges some of a group's adds and fences after the journal's write, before its
    fsync (a group commit whose completion loop runs ahead of the fsync for part of the
    batch). How it loses data: as AckBeforeJournalFsyncBookie, but only for the entries
    acknowledged early, so a check that looked at whole groups, or only at the last ack of a
    group, would miss it."""

    JOURNAL = _JournalAckingPartOfAGroupEarly


# --- 7. bytes below the counters (caught by the disk check, proofs/harness/disk_check.py) ---


def flush_echoing_the_buffer(self: BufferedChannel) -> None:
    """BufferedChannel.flush that writes the buffer twice: once past the logical end (an
    echo, as a retried write that landed at the wrong offset), then where it belongs. The
    positions and the counters are right, so every read and the bookie's own state agree with
    the model; only the file holds records nobody wrote, until a later write overwrites them
    (or forever, when nothing follows: a scan of that log after a crash counts them)."""
    if self._buffer:
        self._handle.pwrite(self._flushed_position + len(self._buffer), bytes(self._buffer))
    _ORIGINAL_FLUSH(self)


_ORIGINAL_FLUSH = BufferedChannel.flush


def apply_flush_echoing_the_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entry-log flushes write every buffered record twice (flush_echoing_the_buffer)."""
    monkeypatch.setattr(BufferedChannel, "flush", flush_echoing_the_buffer)


def seal_without_pointing_the_header_at_the_map(self: SingleEntryLogManager, log: Any) -> None:
    """EntryLogManager._seal that appends and flushes the ledgers map but never writes the
    header's map offset and count (step 4 of "The ledgers map", spec/format/entry_log.md).
    The bookie's counters, its reads and, after a restart, a scan (the fallback for a log
    without a map) all agree: only the file shows that the rotated log is not sealed, so
    BookKeeper would scan every such log where it should read the map."""
    if log.sealed:
        return
    if log.map_offset is None:
        log.channel.flush()
        log.map_offset = log.channel.position
        map_bytes = encode_ledgers_map(sorted(log.ledgers.items()), self._map_batch_max)
        if map_bytes:
            log.channel.write(map_bytes)
    log.channel.flush()
    log.sealed = True


def apply_seal_without_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rotated logs never get their header pointed at their ledgers map."""
    monkeypatch.setattr(SingleEntryLogManager, "_seal", seal_without_pointing_the_header_at_the_map)


# --- 14. carrying on after the active log's write or flush failed (found in bkref) ------------


class CarryOnAfterAddFlushFailureBookie(Bookie):
    """The bookie as it was before the disk check found it: when the active entry log's
    write or flush failed inside an add (flushEntrylogBytes, a full write buffer), the add was
    refused with io_error and the bookie carried on. A failed fsync had dropped the log's
    unsynced bytes while the counters still counted them, so the next rotation sealed a log
    whose ledgers map names records the file lacks, and a clean shutdown checkpointed an
    index and a lastMark over the lost bytes: acknowledged entries gone after the restart."""

    def add_entry(
        self, ledger_id: LedgerId, entry_id: EntryId, master_key: bytes, data: bytes
    ) -> Ack:
        before = self._failure
        try:
            return super().add_entry(ledger_id, entry_id, master_key, data)
        except BookieIOError:
            self._failure = before  # forget the failure this add recorded
            raise


# --- 15. races with the group commit and the checkpoint (the phases as steps) -----------------


class _JournalAckingWhatArrivedDuringItsFsync(Journal):
    """A journal whose sync hands out, beside its group's callbacks, those of the records
    appended while it was syncing (as if everything appended before its fsync returned were
    covered by it). Their records stay queued for the next group: the callbacks are
    replaced by None there, so the queue keeps one per record."""

    def _sync(self, written_bytes: int, callbacks: list[OnDurable | None]) -> None:
        super()._sync(written_bytes, callbacks)
        with self._lock:
            late, self._callbacks = self._callbacks, [None] * len(self._callbacks)
        callbacks.extend(late)


class AckAppendsDuringTheFsyncBookie(_BookieWithItsJournal):
    """Acknowledges, with a group, the adds and fences appended while the group was being
    fsynced. The journal thread syncs with its locks free, so request threads append then;
    a group commit that takes "what is queued now" at the end of its fsync (rather than what
    it took before its write) acknowledges records no fsync covered. How it loses data: a
    crash before the next group's fsync drops them, and their client has the ack (property 1).
    Invisible to a harness that runs the group commit as one step: only with the phases as
    steps does an add land between the write and the sync."""

    JOURNAL = _JournalAckingWhatArrivedDuringItsFsync


class CheckpointCapturingItsMarkLateBookie(Bookie):
    """A checkpoint that reads the journal's durable mark when it persists lastMark, after it
    flushed the entry logs and the index, instead of before that flush. How it loses data:
    records made durable in the journal between the flush and the persist are covered by the
    mark, but their entries were added after the flush (unsynced in the entry log, absent
    from the flushed index); a crash then replays from past them, and acknowledged entries are
    gone (property 1). A checkpoint run as one step never shows it (nothing runs between its
    flush and its persist); the maintenance thread's does, while the journal thread forces."""

    def _checkpoint_persist_locked(self) -> LogMark | None:
        if self._captured is not None:
            self._captured = self._capture_mark()
        return super()._checkpoint_persist_locked()


# --- 16. faults: a full directory, and a read error, taken for more than they are -------------


class RefusingAddsWhenOneLedgerDirIsFullBookie(Bookie):
    """A bookie that refuses adds with no_space as soon as one ledger directory is full,
    though another has room (BookKeeper #3329 is this class: writes stop while space is
    left). How it shows: the active log's directory fills up while the other has room, and
    an add is refused; the model requires it taken, in a new log elsewhere."""

    def add_entry(
        self, ledger_id: LedgerId, entry_id: EntryId, master_key: bytes, data: bytes
    ) -> Ack:
        states = [state for _, state in self._entry_logger.state().dir_states]
        if DirState.FULL in states:
            raise NoSpace("a ledger directory is full (this variant gives up at the first)")
        return super().add_entry(ledger_id, entry_id, master_key, data)


class FailingOnAReadErrorBookie(Bookie):
    """A bookie that takes a read error of one entry log for a dead disk: it fails itself,
    so every add and fence in flight gets io_error and later writes are refused until a
    restart. A read error breaks nothing durable; the model excuses the failed read only, so
    the failed acks diverge (an armed read fault relaxes nothing else)."""

    def read_entry(self, ledger_id: LedgerId, entry_id: EntryId) -> bytes:
        try:
            return super().read_entry(ledger_id, entry_id)
        except BookieIOError as exc:
            self.fail(exc)
            raise


# --- 17. a lastMark that is not durable when the checkpoint says it is -------------------------


class _NoDirectoryFsync(ForwardingFs):
    """A file system whose directory fsyncs do nothing."""

    def fsync_dir(self, path: str) -> None:
        pass


def _write_mark_without_the_directory_fsync(
    fs: FileSystem,
    directory: str,
    file_name: str,
    mark: LogMark,
    coverage: IndexCoverage | None = None,
) -> None:
    """impl.journal.last_mark._write_one with its directory fsync skipped: the new lastMark
    is written to a temporary file, fsynced and renamed over the old one, and the rename is
    never made durable."""
    _WRITE_ONE(_NoDirectoryFsync(fs), directory, file_name, mark, coverage)


def apply_last_mark_rename_not_durable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint whose lastMark is not durable when it returns: the bookie reports the new
    mark and may trim the journals before it, while a power cut would leave the old mark, so
    recovery replays from a journal that may be gone (acknowledged entries lost, or a start
    that fails). Caught at the checkpoint itself by the durable lastMark in the state."""
    monkeypatch.setattr(last_mark_module, "_write_one", _write_mark_without_the_directory_fsync)


# --- 18. a ledgers map that is wrong while the records are right ------------------------------


def encode_map_counting_the_boundary_twice(
    ledgers: Iterable[tuple[int, int]], batch_max: int = LEDGERS_MAP_MAX_BATCH_SIZE
) -> bytes:
    """encode_ledgers_map whose batches step by one less than their size (a stride confused
    with a window): the last ledger of every full batch is written again at the head of the
    next, so a reader, which adds up a ledger's pairs, counts its bytes twice. The map
    reads whole and agrees with the header's count; only its sizes are wrong."""
    pairs = list(ledgers)
    out = bytearray()
    step = max(1, batch_max - 1)
    for start in range(0, len(pairs), step):
        out += encode_ledgers_map(pairs[start : start + batch_max], batch_max)
        if start + batch_max >= len(pairs):
            break
    return bytes(out)


def apply_map_counting_the_boundary_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sealed logs get a ledgers map that counts the ledger at each batch boundary twice
    (encode_map_counting_the_boundary_twice). Every read, the bookie's counters and a scan
    are right; BookKeeper's garbage collector trusts the map, and would keep or compact a
    log by sizes it does not hold."""
    monkeypatch.setattr(
        manager_module, "encode_ledgers_map", encode_map_counting_the_boundary_twice
    )


# --- 19. a full disk in background work taken for more than it is (issue 10) -------------------


class FailingForGoodOnABackgroundNoSpaceBookie(Bookie):
    """The behaviour issue 10 reported: a checkpoint or a preallocation that finds no room
    fails the whole bookie (Bookie.fail, as the driver did), so every later add gets io_error,
    even after space returns, until a restart. A full disk broke nothing: the model allows
    no_space while there is no room and requires service once room is back."""

    def _step_failed(self, step: str, exc: Exception) -> BookieError:
        error = super()._step_failed(step, exc)
        if isinstance(error, NoSpace):
            self.fail(exc)
            return BookieIOError(f"{step} failed: {exc} (this variant fails for good)")
        return error


class ServingOnAfterAnUncertainTombstoneBookie(Bookie):
    """The delete as it was until the README's main job, on seeds 2 and 3, found it: when
    the tombstone's write was issued and a later step of it failed (its fsync, the
    read-back), the delete answered io_error and the bookie served on, acknowledging adds of
    a ledger whose tombstone survived the next crash and took those adds with it."""

    def _tombstone_uncertain(self, ledger_id: LedgerId, exc: TombstoneUncertain) -> BookieError:
        return BookieIOError(f"deleting ledger {ledger_id} failed: {exc}. It is not deleted")


class ServingOnAfterAFailedBackgroundFsyncBookie(Bookie):
    """The opposite mistake: a background step whose fsync failed is taken for a full disk
    (NoSpace, the bookie serves on), so later checkpoints persist an index and a lastMark
    over bytes the failed fsync dropped (fsyncgate)."""

    def _step_failed(self, step: str, exc: Exception) -> BookieError:
        return NoSpace(f"{step} failed: {exc} (this variant serves on)")


def apply_adds_answered_ok_after_their_ledgers_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    """The behaviour issue 10 reported: a delete leaves the adds of its ledger in flight
    alone, so they are answered ok after the delete was, for entries that are gone."""
    monkeypatch.setattr(PendingAcks, "adds_of", lambda _self, _ledger_id: [])


# --- 20. garbage collection and compaction (issue 11) ------------------------------------------


class SourceRemovedBeforeIndexFlushBookie(Bookie):
    """BookKeeper #1534: phase 3 removes the compaction's source right after linking the new
    log, before the index naming the new locations is flushed. A crash in between leaves a
    durable index that names a removed log for live entries (bkref's recovery would then
    finish from ``.compacted``; BookKeeper's of that time lost them)."""

    def _compactor_link(self, compaction: Compaction) -> None:
        super()._compactor_link(compaction)
        self._compactor._remove_source_file(compaction)

    def _compactor_remove_source(self, compaction: Compaction) -> None:
        self._compactor._remove_compacted(compaction)
        compaction.phase = COMPACTION_DONE


class _LeftoverRecoveryNamingInDecimal(LeftoverRecovery):
    """Recovery links the finished compaction's log as ``<decimal id>.log`` (BookKeeper #4804:
    the same as hex below 10, another log's name from 10 on)."""

    def new_log_name(self, new_id: EntryLogId) -> str:
        return f"{int(new_id)}.log"


class _LeftoverRecoveryKeepingCompacting(LeftoverRecovery):
    """Recovery leaves every ``.compacting`` where it is: each interrupted compaction leaves a
    file behind for good, and repeated ones grow the disk (what BP-6 was written for)."""

    def remove_compacting(self, directory: str) -> None:
        return None


def _recover_leftovers_with(
    recovery: type[LeftoverRecovery],
) -> Callable[..., LeftoverReport]:
    def recover(
        fs: FileSystem,
        ledger_dirs: Sequence[str],
        entry_logger: Any,
        apply_moves: Callable[[list[MovedEntry]], None],
        *,
        limits: Limits = LIMITS,
    ) -> LeftoverReport:
        return recovery(fs, ledger_dirs, entry_logger, apply_moves, limits=limits).run()

    return recover


def _apply_leftover_recovery(
    monkeypatch: pytest.MonkeyPatch, recovery: type[LeftoverRecovery]
) -> None:
    """Recovery at start and at step 0 of every GC cycle run ``recovery``."""
    recover = _recover_leftovers_with(recovery)
    monkeypatch.setattr(recovery_module, "recover_leftovers", recover)
    monkeypatch.setattr(bookie_module, "recover_leftovers", recover)


def apply_recovered_log_named_in_decimal(monkeypatch: pytest.MonkeyPatch) -> None:
    _apply_leftover_recovery(monkeypatch, _LeftoverRecoveryNamingInDecimal)


def apply_compacting_left_after_recovery(monkeypatch: pytest.MonkeyPatch) -> None:
    _apply_leftover_recovery(monkeypatch, _LeftoverRecoveryKeepingCompacting)


class _CompactorNotSyncingItsLog(BookieCompactor):
    """Phase 2 writes the ledgers map and links ``.compacted`` without the fsync of the
    compaction log: phase 3 then points the index at records that are not durable."""

    def _sync_compaction_log(self, c: Compaction) -> None:
        log = c.log
        assert log is not None
        log.channel.flush()
        c.log = None
        with contextlib.suppress(FsError):
            log.channel.close()


class IndexBeforeCompactionLogSyncedBookie(Bookie):
    """Updates (and flushes) the index before the compaction log is fsynced."""

    def _make_compactor(self) -> TransactionalCompactor:
        return _CompactorNotSyncingItsLog(
            self._fs, self._entry_logger, self._lock, limits=self._limits, throttle=None
        )


class CompactingTheCurrentLogBookie(Bookie):
    """Takes every log on disk as a GC candidate, the active, rotated and preallocated ones
    too: a log still being written (or not yet durable) is deleted or compacted."""

    def _gc_candidate_logs(self) -> list[EntryLogId]:
        with self._lock:
            return list(self._entry_logger.log_ids())


class DeletedLedgerCountedLiveBookie(Bookie):
    """Counts every ledger as live, deleted ones too: dead logs are never deleted and
    compactions copy the records of deleted ledgers."""

    def _is_live_ledger(self, ledger_id: LedgerId) -> bool:
        return True


class IndexingRecordsTheIndexNeverHadBookie(Bookie):
    """Phase 3 also indexes a copied record for which the index had no location (the rule
    before the refinement machine found it): a record whose add was never journaled, which
    the bookie already answered as missing, comes back readable after its log is
    compacted."""

    def _apply_moves(self, moved: list[MovedEntry]) -> int:
        index = self._index
        applied = 0
        for move in moved:
            if not self._is_live_ledger(move.ledger_id) or not index.has_ledger(move.ledger_id):
                continue
            current = index.get_location(move.ledger_id, move.entry_id)
            if current is None or location_log_id(current) == location_log_id(move.old):
                index.put_entry(move.ledger_id, move.entry_id, move.new)
                applied += 1
        return applied


class RemembersALogItUnlinkedBookie(Bookie):
    """When a GC step unlinked a log and only the fsync of its directory failed, the bookie
    goes on listing the log (the bug the refinement machine found in ``_remove_log``)."""

    def _forget_if_gone(self, log_id: EntryLogId) -> None:
        del log_id


# --- the layout rules (models/entrylog/layout.py): each variant breaks one ------------------
#
# They lose no acknowledged data: what catches them is the layout judged by rules alone
# (tests/quality/test_layout_rules_catch.py runs them with the model's layout judged by
# rules, not predicted), each by the rule its name says.


def _limit_shifted(shift: int) -> Callable[..., None]:
    init = SingleEntryLogManager.__init__

    def shifted_init(self: SingleEntryLogManager, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._log_size_limit_bytes += shift

    return shifted_init


def apply_rotation_counting_the_header_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rotation test compares the log's size with logSizeLimit less the header, which its
    position already counts: logs are sealed 1024 bytes early (R-LOG-ROTATION)."""
    monkeypatch.setattr(SingleEntryLogManager, "__init__", _limit_shifted(-LOGFILE_HEADER_SIZE))


def apply_rotation_forgetting_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rotation test leaves the header out of the log's size: logs grow 1024 bytes past
    logSizeLimit before they are sealed (R-LOG-ROTATION)."""
    monkeypatch.setattr(SingleEntryLogManager, "__init__", _limit_shifted(LOGFILE_HEADER_SIZE))


def _checkpoint_keeping_the_last_rotated(self: SingleEntryLogManager) -> None:
    """flushRotatedLogs that fsyncs every rotated log but leaves the last one on the rotated
    list, unmarked (it is fsynced again at the next checkpoint)."""
    channels = list(self._rotated)
    keep = channels[-1:] if channels else []
    for log in channels:
        self._guard(log, "syncing", functools.partial(log.channel.flush_and_force, True))
    self._rotated = keep
    for log in channels[:-1]:
        self._flushed[log.log_id] = log.describe(LogState.FLUSHED)
        self._status.flushed(log.log_id)
        log.channel.close()


def apply_checkpoint_leaving_a_rotated_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint that returns with a rotated log still rotated: it was fsynced, so nothing
    is lost, but it is not flushed and GC never takes it (R-LOG-FLUSH)."""
    monkeypatch.setattr(SingleEntryLogManager, "checkpoint", _checkpoint_keeping_the_last_rotated)


def _next_id_filling_holes(
    self: LogIdAllocator, file_name: Callable[[int], str] = log_file_name
) -> EntryLogId:
    if file_name is log_file_name:
        return _NEXT_ID(self, file_name)
    names = {name for d in self._dirs for name in self._fs.listdir(d)}
    candidate = 0
    while any(name.startswith(f"{candidate:x}.log") for name in names):
        candidate += 1
    self._last_id = max(self._last_id, candidate)
    return EntryLogId(candidate)


def apply_compaction_ids_filling_holes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The allocator hands a compaction the smallest id no file names: once GC removed a
    log, its id comes back within the run for a compaction's new log, while the index may
    still name it for a ledger that was deleted (R-LOG-IDS)."""
    monkeypatch.setattr(LogIdAllocator, "next_id", _next_id_filling_holes)


def _checkpoint_dropping_empty_rotated(self: SingleEntryLogManager) -> None:
    empty = [log for log in self._rotated if not log.ledgers]
    self._rotated = [log for log in self._rotated if log.ledgers]
    for log in empty:
        log.channel.close()
        self._fs.unlink(log.path)
        self._status.flushed(log.log_id)
    _CHECKPOINT(self)


def apply_empty_rotated_logs_unlinked_at_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint that unlinks the rotated logs holding no record (an explicit rotation of
    an empty log) instead of flushing them: a sealed log vanishes without a GC
    (R-LOG-SEALED)."""
    monkeypatch.setattr(SingleEntryLogManager, "checkpoint", _checkpoint_dropping_empty_rotated)


def _add_record_counting_the_prefix_twice(
    self: SingleEntryLogManager, ledger_id: LedgerId, record: bytes
) -> Location:
    location = _ADD_RECORD(self, ledger_id, record)
    active = self._active
    assert active is not None and active.log_id == location_log_id(location)
    active.ledgers[ledger_id] += 4
    return location


def apply_record_bytes_counting_the_prefix_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """EntryLogMetadata counts each record's size prefix twice: the bytes a log holds per
    ledger (what GC's usage is computed from) grow faster than its records (R-LOG-BYTES)."""
    monkeypatch.setattr(SingleEntryLogManager, "add_record", _add_record_counting_the_prefix_twice)


_CHECKPOINT = SingleEntryLogManager.checkpoint
_NEXT_ID = LogIdAllocator.next_id
_ADD_RECORD = SingleEntryLogManager.add_record


# --- an entry log per ledger (impl/entrylog/per_ledger.py): the manager's own rules ---------


def _evict_without_the_map(self: PerLedgerEntryLogManager, current: Any) -> None:
    del self._current[current.ledger_id]
    del self._by_log[current.log.log_id]
    current.log.map_offset = current.log.channel.position
    current.log.sealed = True
    self._rotated.append(current.log)


def apply_eviction_without_the_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """onCacheEntryRemoval that moves the evicted ledger's log to the rotated list without
    appending its ledgers map (the log takes no more records, but its header points at no
    map): GC must scan it, and a map-trusting reader finds none (R-LOG-MAP)."""
    monkeypatch.setattr(PerLedgerEntryLogManager, "_evict", _evict_without_the_map)


def _evict_expired_without_the_map(self: PerLedgerEntryLogManager, now: int) -> None:
    """expireAfterAccess's removal written apart from the maximum size's: it rotates the
    idle ledger's log without appending its map (the size path, ``_evict``, is right)."""
    while self._current:
        oldest = next(iter(self._current.values()))
        if now - oldest.last_access_ns < self._expiry_ns:
            return
        _evict_without_the_map(self, oldest)


def apply_expiry_without_the_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger's log let go on access expiry without its ledgers map, while an eviction at
    maximumNumberOfActiveEntryLogs appends it (R-LOG-MAP). With the default expiry (300 s)
    only a clock that moves reaches it: the advance_clock rule (a machine whose clock never
    moved passed it)."""
    monkeypatch.setattr(PerLedgerEntryLogManager, "_evict_expired", _evict_expired_without_the_map)


_PER_LEDGER_LOG_FOR_ADD = PerLedgerEntryLogManager._log_for_add
_PER_LEDGER_DESCRIBE = PerLedgerEntryLogManager.describe


def _log_for_add_leaking_the_old(
    self: PerLedgerEntryLogManager, ledger_id: int, current: Any, now: int
) -> Any:
    """A rotation at logSizeLimit that starts the ledger's new log and leaves the old one
    where it was: still open, never sealed, still counted as the ledger's."""
    if current is None:
        return _PER_LEDGER_LOG_FOR_ADD(self, ledger_id, current, now)
    old = current.log
    new = self._allocate(self._dir_for_new_log())
    del self._by_log[old.log_id]
    current.log = new
    self._by_log[new.log_id] = current
    leaked: list[Any] = self.__dict__.setdefault("_leaked", [])
    leaked.append(old)
    return current


def _describe_with_the_leaked(self: PerLedgerEntryLogManager) -> list[Any]:
    leaked = [log.describe(LogState.ACTIVE) for log in self.__dict__.get("_leaked", [])]
    return sorted(_PER_LEDGER_DESCRIBE(self) + leaked, key=lambda d: d.log_id)


def apply_two_active_logs_for_one_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger's rotation at logSizeLimit that opens its new log but never seals the old
    one, which stays active beside it: two active logs for one ledger, the old one never
    flushed nor collected (R-LOG-ACTIVE)."""
    monkeypatch.setattr(PerLedgerEntryLogManager, "_log_for_add", _log_for_add_leaking_the_old)
    monkeypatch.setattr(PerLedgerEntryLogManager, "describe", _describe_with_the_leaked)


def _gc_candidates_below_least_unflushed(self: Bookie) -> list[EntryLogId]:
    with self._lock:
        least = self._entry_logger.state().least_unflushed_log_id
        return [i for i in self._entry_logger.log_ids() if i < least]


def apply_gc_below_least_unflushed(monkeypatch: pytest.MonkeyPatch) -> None:
    """BookKeeper #2728 (fixed by PR #2779): GC takes as its logs every id below
    leastUnflushedLogId, assuming each is flushed and every log above it is not. With an
    entry log per ledger a long-lived ledger's active log holds leastUnflushedLogId down, so
    the flushed logs of deleted ledgers above it are never collected (until the disk is
    full). bkref takes every flushed log (Bookie._gc_candidate_logs). Caught by R-GC: a GC
    cycle must delete exactly the flushed logs with no live ledger. A monkeypatch, not a
    Bookie subclass: with a single log it is rarely wrong (what the campaign's budgets
    measure), so it is checked on the per-ledger scenario that shows it."""
    monkeypatch.setattr(Bookie, "_gc_candidate_logs", _gc_candidates_below_least_unflushed)


# --- write close (spec/protocol/write_close.md) ------------------------------------------------


def _write_close_ignored(self: PerLedgerEntryLogManager, ledger_id: int) -> None:
    """Answered, remembered nowhere: the ledger's log stays active until it fills up or
    expires, never a GC candidate while the ledger lives on."""
    self._require_open()


def apply_write_close_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log per ledger whose write close is answered ok and then forgotten: the checkpoint
    after it leaves the ledger's log active, so it is never flushed for GC to take. Loses
    nothing, so only the forward-progress rule can see it (R-WRITE-CLOSE)."""
    monkeypatch.setattr(PerLedgerEntryLogManager, "write_close", _write_close_ignored)


def _write_close_flushed_at_once(self: PerLedgerEntryLogManager, ledger_id: int) -> None:
    """Seal the ledger's log at the request and count it flushed there, before any fsync."""
    self._require_open()
    current = self._current.get(ledger_id)
    if current is None:
        return
    log = current.log
    self._seal(log)
    log.channel.flush()  # written for readers, not fsynced
    del self._current[ledger_id]
    del self._by_log[log.log_id]
    self._flushed[log.log_id] = log.describe(LogState.FLUSHED)
    self._status.flushed(log.log_id)


def apply_early_write_close(monkeypatch: pytest.MonkeyPatch) -> None:
    """A write close that seals the ledger's log at once and counts it flushed without its
    fsync (spec/protocol/write_close.md, "Order with the data"): leastUnflushedLogId moves
    past bytes a power cut may still lose, and the next checkpoint persists a lastMark past
    them. The model refuses the log flushed with no checkpoint between (R-LOG-FLUSH)."""
    monkeypatch.setattr(PerLedgerEntryLogManager, "write_close", _write_close_flushed_at_once)
