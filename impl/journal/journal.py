"""The journal: group commit of records to ``<hex id>.txn`` files.

Spec page: spec/format/journal.md (format, group commit, crash states). Codec:
impl/format/journal.py. Replay: impl/journal/replay.py. lastMark: impl/journal/last_mark.py.

Why it is shaped like this: an add is acknowledged only once the fsync covering its record
has returned, and fsyncs are shared by every record queued before them (group commit). So
``append`` only queues (any thread), ``should_flush`` says whether BookKeeper's journal
thread would force the group now, and ``flush`` writes the whole queue, pads it to the
alignment, syncs, and only then calls the callbacks in append order. ``flush`` holds the
queue lock only to take the queue: appends go on while it is in its fsync, and the next
flush takes them all. Background work is explicit: a driver thread (or a test) calls
``should_flush``/``flush``; nothing here starts a thread or reads the real time. A threaded
driver may defer a group's callbacks to the next flush (``flush(defer_callbacks=True)``,
``release_deferred``): they then run after that flush's write and before its fsync, still
only once their own records are durable.

``append`` is every add's hot path, so it does the least it can: two cheap checks of the
record, one lock, a clock reading only when the queue was empty (only the oldest record's
age matters to the group wait), and a notification only when a thread waits for one.

Where this differs from BookKeeper's Journal (the page lists each with its reason):
- journal ids are ``max(clock ms, largest id + 1)``, BookKeeper uses ``largest id + 1``
  (or the clock + 1 when there is none); both only grow;
- no preallocation: the file ends at the last flush (a reader meets end of file, not zeros);
- the directory is fsynced after a new journal is created (BookKeeper never does);
- the byte and entry thresholds flush as soon as they are passed, not when the next record
  arrives; a timed-out group is flushed whole;
- every acknowledgement waits for an fsync: journalSyncData=false makes bkref use fsync
  instead of fdatasync, it never acknowledges before the sync as BookKeeper then does;
- after a failed write or fsync the journal refuses every later append (BookKeeper's
  journal thread exits and the bookie shuts down).

Not verified here: what the device makes durable (the simulated disk is the model); the
meaning of the records (the bookie applies them).
"""

from __future__ import annotations

import contextlib
import struct
import threading
from collections.abc import Callable
from typing import Final

import attrs

from impl.clock import Clock
from impl.config.config import ServerConfig
from impl.format.journal import (
    CURRENT_VERSION,
    DEFAULT_MAX_RECORD_BYTES,
    HEADER_SIZE,
    METAENTRY_ID_LEDGER_EXPLICITLAC,
    MIN_PAYLOAD_SIZE,
    MIN_WRITE_VERSION,
    RECORD_SIZE_PREFIX,
    SECTOR_SIZE,
    V5,
    V6,
    encode_header,
    encode_padding,
    header_size,
    record_entry_id,
)
from impl.format.names import journal_file_name, parse_journal_file_name
from impl.fs.api import FileHandle, FileSystem, join
from impl.journal.last_mark import NO_MARK, LogMark
from spec.errors import BookieError, BookieIOError, FsError, FsExists, RecoveryError
from spec.ids import INT64_MAX

#: Called once per appended record: None when it is durable, the error when it never will be.
OnDurable = Callable[[BookieError | None], None]

NS_PER_MS: Final = 1_000_000

_LEN = struct.Struct(">i")


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value}")


def _non_negative(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


def _alignment(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < SECTOR_SIZE or value % SECTOR_SIZE:
        raise ValueError(f"{attribute.name} must be a multiple of {SECTOR_SIZE}, got {value}")


def _write_version(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not MIN_WRITE_VERSION <= value <= CURRENT_VERSION:
        raise ValueError(
            f"{attribute.name} must be in [{MIN_WRITE_VERSION}, {CURRENT_VERSION}], got {value}"
        )


@attrs.frozen(kw_only=True)
class JournalSettings:
    """The journal's knobs, under BookKeeper's meaning (journal_settings_from_config)."""

    max_size_bytes: int = attrs.field(default=2048 * 1024 * 1024, validator=_positive)
    max_group_wait_ms: int = attrs.field(default=2, validator=_non_negative)
    buffered_writes_threshold_bytes: int = attrs.field(default=512 * 1024, validator=_non_negative)
    #: <= 0: no entry threshold.
    buffered_entries_threshold: int = 0
    flush_when_queue_empty: bool = False
    alignment_bytes: int = attrs.field(default=SECTOR_SIZE, validator=_alignment)
    write_version: int = attrs.field(default=CURRENT_VERSION, validator=_write_version)
    max_backups: int = attrs.field(default=5, validator=_non_negative)
    skip_invalid_records: bool = False
    sync_data: bool = True
    #: Replay refuses a longer record as junk (nettyMaxFrameSizeBytes).
    max_record_bytes: int = attrs.field(default=DEFAULT_MAX_RECORD_BYTES, validator=_positive)

    @property
    def flushes_when_queue_empty(self) -> bool:
        """Journal's constructor: without a group wait there is nothing to wait for."""
        return self.max_group_wait_ms <= 0 or self.flush_when_queue_empty


def journal_settings_from_config(config: ServerConfig) -> JournalSettings:
    """The journal settings of a server configuration (BookKeeper key names)."""
    return JournalSettings(
        max_size_bytes=config.journal_max_size_bytes,
        max_group_wait_ms=config.journal_max_group_wait_ms,
        buffered_writes_threshold_bytes=config.journal_buffered_writes_threshold_bytes,
        buffered_entries_threshold=config.journal_buffered_entries_threshold,
        flush_when_queue_empty=config.journal_flush_when_queue_empty,
        alignment_bytes=config.journal_alignment_size_bytes,
        write_version=config.journal_format_version_to_write,
        max_backups=config.journal_max_backups,
        skip_invalid_records=config.skip_replay_journal_invalid_record,
        sync_data=config.journal_sync_data,
        max_record_bytes=config.netty_max_frame_size_bytes,
    )


def list_journal_files(fs: FileSystem, journal_dir: str) -> dict[int, str]:
    """id -> file name of every ``<hex>.txn`` in the directory, in id order. Of two names
    for one id (``ab.txn``, ``AB.txn``) the first in name order is kept."""
    found: dict[int, str] = {}
    for name in fs.listdir(journal_dir):
        journal_id = parse_journal_file_name(name)
        if journal_id is not None and journal_id not in found:
            found[journal_id] = name
    return dict(sorted(found.items()))


def list_journal_ids(fs: FileSystem, journal_dir: str) -> list[int]:
    """The ids of the journals in the directory, ascending (Journal.listJournalIds)."""
    return list(list_journal_files(fs, journal_dir))


def next_journal_id(existing_ids: list[int], wall_ms: int, current_id: int) -> int:
    """A new journal's id: after every existing one and the current one, the clock's
    milliseconds when those are smaller."""
    largest = max([current_id, *existing_ids])
    return max(wall_ms, largest + 1)


def check_room_for_a_new_journal(fs: FileSystem, journal_dir: str) -> None:
    """Refuse a start whose next journal id would not fit in a Java long: a journal named
    ``7fffffffffffffff.txn`` leaves no id after it (next_journal_id would overflow). Checked
    before recovery writes anything. Raises RecoveryError naming the file."""
    ids = list_journal_ids(fs, journal_dir)
    if ids and ids[-1] >= INT64_MAX:
        path = join(journal_dir, journal_file_name(ids[-1]))
        raise RecoveryError(
            f"{path}: journal id {ids[-1]:x} is the largest a journal can have, so no newer "
            "journal can be created after it and the bookie cannot start. Journal ids are the "
            "clock's milliseconds, so no bookie wrote this name: find out where the file came "
            "from before moving it out of the directory (a journal that holds entries not yet "
            "checkpointed must not be removed)"
        )


def journals_to_trim(ids: list[int], mark: LogMark, max_backups: int, current_id: int) -> list[int]:
    """Journal.checkpointComplete: of the journals entirely before the mark, all but the
    newest ``max_backups``. Never the journal being written."""
    before = sorted(journal_id for journal_id in ids if journal_id < mark.journal_id)
    if len(before) < max_backups:
        return []
    return [jid for jid in before[: len(before) - max_backups] if jid != current_id]


class Journal:
    """Writes records to journal files in ``journal_dir`` (a ``current`` directory) with group
    commit. Thread-safe: ``append`` from any thread, ``flush`` from one driver at a time."""

    def __init__(
        self, fs: FileSystem, journal_dir: str, settings: JournalSettings, clock: Clock
    ) -> None:
        assert fs.is_dir(journal_dir), f"journal directory {journal_dir} does not exist"
        self._fs = fs
        self._dir = journal_dir
        self._settings = settings
        self._clock = clock
        self._lock = threading.Lock()  # queue, error, closed, durable mark
        self._appended = threading.Condition(self._lock)
        #: Threads blocked in wait_for_append: append notifies only when there are some.
        self._append_waiters = 0
        self._flush_lock = threading.Lock()  # handle, id, position; one flusher at a time
        # The queue, as two parallel lists (records in append order and their callbacks), so
        # flush joins the records without building a list per group.
        self._records: list[bytes] = []
        self._callbacks: list[OnDurable | None] = []
        self._queued_bytes = 0
        #: Clock.monotonic_ns() when the oldest queued record was appended (None: empty).
        #: Only the oldest record's age matters to the group wait, so the clock is read
        #: once per group, not once per record.
        self._oldest_ns: int | None = None
        #: Callbacks of the last group flushed with ``defer_callbacks`` (or synced by
        #: ``sync_group``): durable, not yet called (guarded by the flush lock).
        self._deferred: list[OnDurable | None] = []
        #: A group ``write_group`` wrote and ``sync_group`` has not synced yet: its callbacks
        #: and the bytes written (guarded by the flush lock; never set by ``flush`` alone).
        self._written: tuple[list[OnDurable | None], int] | None = None
        #: Journal.run drops explicit-LAC records below V6 (and acknowledges them).
        self._drops_lac = settings.write_version < V6
        self._error: BookieIOError | None = None
        self._closed = False
        self._handle: FileHandle | None = None
        self._journal_id = 0
        self._position = 0
        self._durable = NO_MARK

    # --- files ---------------------------------------------------------------------------

    def open_new_file(self) -> int:
        """Start a new journal file (at every start, and at rollover): header written and
        fsynced, directory fsynced. Returns its id."""
        with self._flush_lock:
            self._raise_if_unusable()
            return self._open_new_file_locked()

    def _open_new_file_locked(self) -> int:
        ids = list_journal_ids(self._fs, self._dir)
        new_id = next_journal_id(ids, self._clock.wall_ms(), self._journal_id)
        if new_id > INT64_MAX:  # refused at start (check_room_for_a_new_journal); the clock
            raise self._fail(  # or the current id could still get there at a rollover
                f"no journal id is left after {max([self._journal_id, *ids]):x} in {self._dir}",
                ValueError(new_id),
            )
        path = join(self._dir, journal_file_name(new_id))
        header = encode_header(self._settings.write_version)
        try:
            handle = self._fs.open(path, create=True, exclusive=True)
        except FsExists as exc:
            raise self._fail(
                f"{path} appeared while bkref was creating it: is another bookie running on "
                f"{self._dir}? Stop it before starting this one",
                exc,
            ) from exc
        except FsError as exc:
            raise self._fail(f"cannot create {path}: {exc}", exc) from exc
        try:
            handle.pwrite(0, header)
            handle.fsync()
            self._fs.fsync_dir(self._dir)
        except FsError as exc:
            handle.close()
            raise self._fail(f"cannot write the header of {path}: {exc}", exc) from exc
        self._close_handle()
        self._handle, self._journal_id, self._position = handle, new_id, len(header)
        with self._lock:
            assert LogMark(new_id, len(header)) > self._durable
            self._durable = LogMark(new_id, len(header))
        return new_id

    def _close_handle(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            with contextlib.suppress(FsError):  # all of it was synced: a failed close loses nothing
                handle.close()

    # --- group commit ------------------------------------------------------------------------

    def append(self, record: bytes, on_durable: OnDurable | None = None) -> None:
        """Queue an encoded record (journal_format.encode_*); ``on_durable`` is called after
        the fsync that covers it. Raises BookieIOError when the journal has failed or is
        closed (then ``on_durable`` is never called).

        The hot path of every add: two cheap assertions on the record, one lock, no clock
        read unless the queue was empty, no notification unless a thread waits."""
        size = len(record)
        assert size >= RECORD_SIZE_PREFIX + MIN_PAYLOAD_SIZE, size
        assert _LEN.unpack_from(record, 0)[0] == size - RECORD_SIZE_PREFIX
        if self._drops_lac and record_entry_id(record) == METAENTRY_ID_LEDGER_EXPLICITLAC:
            record, size = b"", 0  # Journal.run drops explicit-LAC records below V6, and acks
        with self._lock:
            if self._error is not None or self._closed:
                self._raise_if_unusable_locked()
            assert self._journal_id != 0, "append before open_new_file"
            if self._oldest_ns is None:
                self._oldest_ns = self._clock.monotonic_ns()
            self._records.append(record)
            self._callbacks.append(on_durable)
            self._queued_bytes += size
            if self._append_waiters:
                self._appended.notify_all()

    def should_flush(self) -> bool:
        """Whether BookKeeper's journal thread would force the queued group now: the oldest
        record waited more than max_group_wait_ms, more than the byte or entry threshold is
        queued, or flushing whenever the queue is empty (also when there is no group wait)."""
        with self._lock:
            oldest_ns = self._oldest_ns
            if oldest_ns is None:
                return False
            settings = self._settings
            if settings.flushes_when_queue_empty:
                return True
            waited_ns = self._clock.monotonic_ns() - oldest_ns
            if waited_ns > settings.max_group_wait_ms * NS_PER_MS:
                return True
            entries = settings.buffered_entries_threshold
            if entries > 0 and len(self._records) > entries:
                return True
            return self._queued_bytes > settings.buffered_writes_threshold_bytes

    def flush_deadline_ns(self) -> int | None:
        """The monotonic time at which the oldest queued record's wait runs out (None when
        nothing is queued), for a driver that sleeps until then."""
        with self._lock:
            if self._oldest_ns is None:
                return None
            return self._oldest_ns + self._settings.max_group_wait_ms * NS_PER_MS + 1

    def wait_for_append(self, timeout_s: float) -> bool:
        """Block until something is queued or ``timeout_s`` passes; True if something is."""
        with self._appended:
            if not self._records and not self._closed:
                self._append_waiters += 1
                try:
                    self._appended.wait(timeout_s)
                finally:
                    self._append_waiters -= 1
            return bool(self._records)

    def _take_queue(self) -> tuple[list[bytes], list[OnDurable | None], int]:
        """Empty the queue (under the lock): its records, callbacks and bytes."""
        taken = (self._records, self._callbacks, self._queued_bytes)
        self._records, self._callbacks, self._queued_bytes = [], [], 0
        self._oldest_ns = None
        return taken

    def flush(self, *, defer_callbacks: bool = False) -> int:
        """Write every queued record and the padding, sync, advance the durable mark, call
        the callbacks in append order with None, and roll over past max_size_bytes.
        Returns how many records became durable. On a write or sync failure every queued
        callback gets BookieIOError, which is also raised, and the journal stays failed; a
        failed rollover raises BookieIOError after the group was acknowledged (it is durable).
        Callbacks run on the flushing thread under the flush lock: they may append, not flush.
        The queue lock is held only to take the queue: appends go on during the fsync.

        ``flush`` is the group commit's phases back to back (below), so a test that runs
        them one step at a time runs this code: a group ``write_group`` wrote and no
        ``sync_group`` synced yet is synced first; then the queue is taken and written
        (phase one), the callbacks of the groups synced before are called (phase three of
        those), the new group is synced (phase two) and its callbacks are called (phase three).

        ``defer_callbacks`` is for the threaded driver (impl/bookie/driver.py): this group's
        callbacks are kept instead of called, and the next flush calls them once it has
        written its own group, just before its fsync; ``release_deferred`` calls them when
        no flush follows. Either way they run only after the fsync that covered their
        records. Why: the threads those callbacks wake (clients with free slots) then run
        during the next fsync, which releases the GIL, instead of taking the GIL from the
        flushing thread between its write and its fsync and holding up the fsync (CPython
        hands the GIL back only when they block or after the switch interval)."""
        with self._flush_lock:
            earlier = self._sync_written_locked()
            taken = self._write_group_locked()
            raised = self._release_deferred_locked()  # durable since the last fsync
            if not taken:
                _raise_first(raised)
                return earlier
            self._sync_written_locked()
            if not defer_callbacks:
                raised_now = self._release_deferred_locked()
                raised = raised if raised is not None else raised_now
            _raise_first(raised)
            return earlier + taken

    # The group commit's phases as steps of their own. The journal thread runs them back to
    # back inside ``flush``; the refinement machine (tests/refinement/machine.py) runs them
    # one step at a time and interleaves adds, fences, reads, deletes and checkpoints between
    # them, as the driver's request threads do while the journal thread writes and syncs
    # (its locks are free then, on purpose). Phase one takes the queue and writes it
    # (``write_group``), phase two syncs it (``sync_group``), phase three hands out its
    # acks (``release_deferred``, as the driver's deferred acks do).

    def write_group(self) -> int:
        """Take the queued records as a group and write them with their padding, without
        syncing: records appended from now on belong to the next group. Returns how many
        records the group holds; 0 when nothing is queued, or when a group written before
        still waits for its sync (one group is in flight at a time, as under ``flush``).
        On a failure the group and the queue fail with BookieIOError, which is raised (the
        groups synced before are durable: their callbacks get None)."""
        with self._flush_lock:
            if self._written is not None:
                return 0
            return self._write_group_locked()

    def _write_group_locked(self) -> int:
        assert self._written is None, "a group is written while another waits for its sync"
        with self._lock:
            records, callbacks, size_bytes = self._take_queue()
            error = self._error
        if error is not None:
            deferred, self._deferred = self._deferred, []
            _raise_first(_call_all(deferred, None), _call_all(callbacks, error))
            raise error
        if not records:
            return 0
        try:
            written_bytes = self._write(records, size_bytes, self._deferred, callbacks)
        except BaseException:
            self._deferred = []  # _write called them (durable) before failing the group
            raise
        self._written = (callbacks, written_bytes)
        return len(callbacks)

    def sync_group(self) -> int:
        """Sync the group ``write_group`` wrote and advance the durable mark; its callbacks
        are then durable and wait for ``release_deferred``. Rolls over past max_size_bytes.
        Returns how many records became durable (0: no group was written). On a failure the
        group and the queue fail with BookieIOError, which is raised."""
        with self._flush_lock:
            return self._sync_written_locked()

    def _sync_written_locked(self) -> int:
        written, self._written = self._written, None
        if written is None:
            return 0
        callbacks, written_bytes = written
        try:
            self._sync(written_bytes, callbacks)
            self._deferred.extend(callbacks)
            if self._position > self._settings.max_size_bytes:
                self._open_new_file_locked()
        except BaseException:
            # The groups synced before (this one too, when the rollover failed) are durable.
            _raise_first(self._release_deferred_locked())
            raise
        return len(callbacks)

    def release_deferred(self) -> int:
        """Call the callbacks of the groups synced and not yet acknowledged (kept by
        ``flush(defer_callbacks=True)`` or by ``sync_group``: their records are durable)
        and return how many there were."""
        with self._flush_lock:
            count = len(self._deferred)
            _raise_first(self._release_deferred_locked())
        return count

    def _release_deferred_locked(self) -> Exception | None:
        """Call the durable callbacks kept so far; what the first that raised raised."""
        deferred, self._deferred = self._deferred, []
        return _call_all(deferred, None)

    def _write(
        self,
        records: list[bytes],
        size_bytes: int,
        deferred: list[OnDurable | None],
        callbacks: list[OnDurable | None],
    ) -> int:
        """Write the group (``records``, taken from the queue; the padding is appended to
        that list) at the position, without syncing; return the bytes written. On a failure
        ``deferred`` (durable) get None, the group and the queue the error, which is raised."""
        handle = self._handle
        assert handle is not None, "flush before open_new_file"
        assert len(records) == len(callbacks), (len(records), len(callbacks))
        if self._settings.write_version >= V5:
            # The padding joins the records: one copy of the group, one pwrite.
            records.append(
                encode_padding(self._position + size_bytes, self._settings.alignment_bytes)
            )
        data = b"".join(records)
        assert len(data) >= size_bytes, (len(data), size_bytes)
        if data:
            try:
                handle.pwrite(self._position, data)
            except FsError as exc:
                raise self._fail_group(handle, exc, deferred, callbacks) from exc
        return len(data)

    def _sync(self, written_bytes: int, callbacks: list[OnDurable | None]) -> None:
        """Sync what ``_write`` wrote and advance the position and the durable mark. On a
        failure the group and the queue get the error, which is raised."""
        handle = self._handle
        assert handle is not None, "flush before open_new_file"
        try:
            if self._settings.sync_data:
                handle.fdatasync()
            else:
                handle.fsync()
        except FsError as exc:
            raise self._fail_group(handle, exc, [], callbacks) from exc
        self._position += written_bytes
        with self._lock:
            self._durable = LogMark(self._journal_id, self._position)

    def _fail_group(
        self,
        handle: FileHandle,
        exc: FsError,
        durable: list[OnDurable | None],
        failed: list[OnDurable | None],
    ) -> BookieIOError:
        """The journal failed writing or syncing a group: fail it and refuse what follows.
        ``durable`` callbacks get None, ``failed`` ones and the whole queue the error, which
        is returned for the caller to raise (a callback's exception is raised instead)."""
        error = self._fail(f"cannot write or sync journal {handle.path}: {exc}", exc)
        with self._lock:
            rest = self._take_queue()[1]
        _raise_first(_call_all(durable, None), _call_all(failed + rest, error))
        return error

    def _fail(self, what: str, exc: Exception) -> BookieIOError:
        error = BookieIOError(
            f"journal failed: {what}. After a failed write or fsync the unsynced part of the "
            "journal may be lost, so nothing more is acknowledged. Check the disk holding "
            f"{self._dir}, then restart the bookie: replay recovers every acknowledged add"
        )
        error.__cause__ = exc
        with self._lock:
            if self._error is None:
                self._error = error
        return error

    def _raise_if_unusable(self) -> None:
        with self._lock:
            self._raise_if_unusable_locked()

    def _raise_if_unusable_locked(self) -> None:
        if self._error is not None:
            raise BookieIOError(str(self._error))
        if self._closed:
            raise BookieIOError(
                "the journal is closed (the bookie is shutting down); retry on the restarted bookie"
            )

    # --- marks, trimming, closing -----------------------------------------------------------

    def durable_mark(self) -> LogMark:
        """Everything before this mark is durable in the journal (NO_MARK before the first
        file). A checkpoint captures it before flushing the ledger storage."""
        with self._lock:
            return self._durable

    @property
    def current_journal_id(self) -> int:
        """The id of the journal being written (0 before the first file)."""
        return self._journal_id

    def journal_ids(self) -> list[int]:
        """The ids of the journal files in the directory, ascending."""
        return list_journal_ids(self._fs, self._dir)

    def trim(self, mark: LogMark) -> list[int]:
        """Delete the journals entirely before ``mark`` except the newest max_backups of
        them (Journal.checkpointComplete); returns the ids deleted. Call only after the
        lastMark holding ``mark`` is durable. The deletions are not fsynced: a deleted
        journal that comes back after a crash lies before the mark and is never replayed."""
        with self._flush_lock:
            ids = list_journal_files(self._fs, self._dir)
            victims = journals_to_trim(
                list(ids), mark, self._settings.max_backups, self._journal_id
            )
            deleted = []
            for journal_id in victims:
                try:
                    self._fs.unlink(join(self._dir, ids[journal_id]))
                except FsError:
                    continue  # BookKeeper logs "Could not delete old journal file"
                deleted.append(journal_id)
            return deleted

    def close(self) -> None:
        """Flush what is queued (unless the journal failed) and close the file. Later
        appends raise BookieIOError."""
        with self._lock:
            self._closed = True
            failed = self._error is not None
            self._appended.notify_all()
        try:
            if not failed:
                self.flush()
        finally:
            try:
                self.release_deferred()  # durable: a failed journal still acknowledges them
            finally:
                with self._flush_lock:
                    self._close_handle()

    def check_invariants(self) -> None:
        """Assert every internal relation (tests call this after each step)."""
        with self._flush_lock, self._lock:
            assert len(self._records) == len(self._callbacks)
            assert self._queued_bytes == sum(len(record) for record in self._records)
            assert (self._oldest_ns is None) == (not self._records), self._oldest_ns
            assert self._append_waiters >= 0
            if self._error is not None:
                assert not self._records
            if self._deferred:
                assert self._durable != NO_MARK, "callbacks of a group before any file"
            if self._durable == NO_MARK:
                assert self._handle is None and self._journal_id == 0 and not self._records
                return
            assert self._journal_id != 0
            assert self._durable.journal_id == self._journal_id, (self._durable, self._journal_id)
            assert self._durable.offset == self._position, (self._durable, self._position)
            assert self._position >= header_size(self._settings.write_version)
            if self._settings.write_version >= V5:
                aligned = self._position % self._settings.alignment_bytes == 0
                assert self._position == HEADER_SIZE or aligned, self._position
            in_flight = 0 if self._written is None else self._written[1]
            if self._written is not None:
                assert self._error is None, "a failed group is not kept for its sync"
            if self._error is None and self._handle is not None:
                # A failed write may leave bytes past the position; only a healthy file ends
                # there (or at the end of the group written and not synced yet).
                end = self._position + in_flight
                assert self._handle.size() == end, (self._handle.size(), end)
                assert self._position <= max(self._settings.max_size_bytes, HEADER_SIZE)


def _call_all(callbacks: list[OnDurable | None], error: BookieError | None) -> Exception | None:
    """Call every callback in order; a callback that raises does not stop the others. The
    first such exception is returned, for the caller to raise once its own work is done."""
    first: Exception | None = None
    for callback in callbacks:
        if callback is None:
            continue
        try:
            callback(error)
        except Exception as exc:  # returned, and raised by the caller
            if first is None:
                first = exc
    return first


def _raise_first(*raised: Exception | None) -> None:
    """Raise the first exception a callback raised, if any."""
    for exc in raised:
        if exc is not None:
            raise exc
