"""The bookie: the composition root of the storage engine (BookieImpl + InterleavedLedgerStorage
+ HandleFactoryImpl/LedgerDescriptorImpl, as explicit steps), and its requests.

Spec pages: spec/format/journal.md (records, lastMark, replay), spec/format/ledger_index.md
(our index), spec/format/entry_log.md (entry logs), spec/adapter.md (the error codes the
typed errors carry). docs/design.md "Data flow" is the order of every operation here.

Why one object: an add is acknowledged only once the journal fsync that covers its record is
done, and a checkpoint may trim the journal only once everything the journal covered is
durable elsewhere (entry logs, index, lastMark). Those two promises span four parts (entry
logger, ledger index, journal, lastMark), so one object owns all four and the order between
them. What is not about that order lives beside it, in modules of impl/bookie/ with no bookie
in them: the Acks (ack.py), where the files are (layout.py), which directories are the
bookie's and the locks that keep them its own (identity.py), recovery and its pure replay
decisions (recovery.py), the checkpoint's order and lastMark (checkpoint.py), and the
abstract state the model compares with (state.py). The bookie keeps the requests and the
composition: it builds the parts, has recovery make them consistent, and says when a
checkpoint may run.

Threads: every operation is thread-safe. One re-entrant lock (``_lock``) guards the entry
logger, the index and the ledger state (fence Acks, pending Acks, the cached state of
state.EntryLogInfos); it is never held during the journal's fsync (the journal's own lock is
released during its fsync too, so adds proceed while a group is being forced). Checkpoints
are serialised by the checkpointer's lock (``Checkpointer.lock``), which also guards lastMark.
The checkpoint holds ``_lock`` while it forces the entry logs and flushes the index, so that
the persisted index only names locations whose bytes are already durable (adds wait
meanwhile, as they wait in BookKeeper, whose entry logger is synchronized too). Garbage
collection steps are serialised by ``_gc_lock``, taken before the other two and never while
holding them; a compaction's copy runs outside ``_lock`` (only its log's allocation and the
liveness of each ledger take it), its index phase under the checkpointer's lock as a
checkpoint (docs/design.md "Concurrency").

The add path is the hot path (tests/bench/bench_bookie.py): its record is encoded once and
used by both the entry log and the journal (the two formats share it byte for byte), the
common case of the ledger checks is one index lookup (``writable_key``), and Acks are tracked
in a list under ``_lock`` that is pruned in amortised batches (ack.PendingAcks), so that
completing an Ack on the journal thread touches no lock of the bookie.

Choices where BookKeeper leaves room, each on purpose (replay's are in recovery.py):

- The first add **or fence** of a ledger journals a key record before its own record.
  BookKeeper journals a key record only on the first add (BookieImpl.addEntryInternal); a
  fence of a ledger it never saw writes no key, and replay then skips that fence record
  (readMasterKey finds no ledger) if the index had not been flushed: a durable fence lost.
- A deleted ledger stays deleted: adds and fences to it get NoLedger. BookKeeper re-creates
  it (unless it was fenced: LedgerFencedAndDeletedException). Ledger ids are never reused by
  BookKeeper's clients, and replay skips the records of deleted ledgers, so re-creating a
  ledger would make its acknowledged adds vanish at the next restart.
- A read can see an entry that is written but not yet acknowledged (as BookKeeper's can).
- The payload limit is on the whole entry (16 id bytes + data) against maxSaneEntrySize.
- Garbage collection (impl/bookie/gc.py decides, the ``gc`` steps below do it) only ever
  touches flushed logs: never the active, a rotated (not yet fsynced) or the preallocated
  log, whose bytes may not be durable. A failed compaction is rolled back and the bookie
  keeps serving, unless its index phase failed (the bookie then fails as after a failed
  checkpoint; the restart finishes the compaction).

Not verified here: multiple journal directories (layout.py refuses them), entry log per
ledger, read-only mode, and the space of duplicate records: a live ledger's records that an
interrupted recovery re-added elsewhere are copied by compaction with the rest of the ledger
(liveness is per ledger, as BookKeeper's EntryLogMetadata counts it).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Mapping

import attrs

from impl.bookie.ack import Ack, PendingAcks
from impl.bookie.checkpoint import Checkpointer
from impl.bookie.gc import (
    IDLE,
    CompactionCancelled,
    GarbageCollector,
    GcPolicy,
    GcStats,
    Kind,
    PhaseResult,
    Throttle,
    suspension,
)
from impl.bookie.held import HeldEntries, read_only_message
from impl.bookie.identity import (
    lock_directories,
    normalise_dir,
    release_locks,
    settle_identity,
)
from impl.bookie.layout import (
    BookieLayout,
    ensure_durable_dir,
    layout_from_config,
    with_index_in,
)
from impl.bookie.recovery import Progress, recover
from impl.bookie.reserve import ensure_reserve, release_reserve, with_reserve
from impl.bookie.state import (
    BookieState,
    EntryLogInfos,
    LedgersMapInfo,
    RecoveryReport,
    bookie_state,
)
from impl.clock import Clock, SystemClock
from impl.config.config import ServerConfig
from impl.entrylog.compactor import (
    Compaction,
    MovedEntry,
    TransactionalCompactor,
    recover_leftovers,
    remove_log_file,
)
from impl.entrylog.compactor import (
    Throttle as CompactorThrottle,
)
from impl.entrylog.ledger_dirs import DirState, RandomSource
from impl.entrylog.logger import EntryLogger, settings_from_config
from impl.entrylog.manager import LogChannel, LogState
from impl.entrylog.reader import extract_metadata
from impl.format.entry_log import (
    LOGFILE_HEADER_SIZE,
    MIN_SANE_ENTRY_SIZE,
    encode_entry_record,
)
from impl.format.journal import encode_fence_record, encode_key_record
from impl.format.names import log_file_name
from impl.fs.api import DirLock, FileSystem, parent
from impl.index.ledger_index import LedgerIndex, TombstoneUncertain
from impl.journal.journal import (
    Journal,
    JournalSettings,
    check_room_for_a_new_journal,
    journal_settings_from_config,
)
from impl.journal.last_mark import LogMark
from impl.limits import LIMITS, Limits
from spec.errors import (
    BadRequest,
    BookieError,
    BookieIOError,
    EntryLogError,
    Fenced,
    FsError,
    FsNoSpace,
    MissingLogFile,
    NoEntry,
    NoLedger,
    NoSpace,
    NoWritableLedgerDir,
    RecoveryError,
    Unauthorized,
)
from spec.ids import INT64_MAX, EntryId, EntryLogId, LedgerId, location_log_id

#: The bookie and the types its methods hand out (importable from here, as before the split).
__all__ = [
    "Ack",
    "Bookie",
    "BookieLayout",
    "BookieState",
    "GcStats",
    "PhaseResult",
    "RecoveryReport",
]


def _no_progress(_line: str) -> None:
    """The default progress sink: say nothing."""


def _write_failed(
    ledger_id: LedgerId, entry_id: EntryId, exc: NoWritableLedgerDir | FsError
) -> BookieError:
    """The typed error for an entry the entry log refused: nothing of it is acknowledged (a
    failed write or flush may also have lost bytes of earlier records: add_entry then stops
    the bookie's writes)."""
    if isinstance(exc, NoWritableLedgerDir):
        return NoSpace(str(exc))
    return BookieIOError(
        f"writing entry {entry_id} of ledger {ledger_id} to the entry log failed: {exc}. "
        "The add was not acknowledged; check the disk and retry."
    )


class _BookieCompactor(TransactionalCompactor):
    """The compactor as the bookie runs it: what touches the entry logger's shared state
    (the id counter and the new log's allocation, the read handles of a removed log) is done
    under the bookie's state lock; the copy itself and its fsyncs are not, so adds go on
    while a log is compacted (and while the throttle waits)."""

    def __init__(
        self,
        fs: FileSystem,
        entry_logger: EntryLogger,
        state_lock: threading.RLock,
        *,
        limits: Limits,
        throttle: CompactorThrottle | None,
    ) -> None:
        super().__init__(fs, entry_logger, limits=limits, throttle=throttle)
        self._state_lock = state_lock

    def _allocate(self) -> LogChannel:
        with self._state_lock:
            return super()._allocate()

    def _remove_source_file(self, c: Compaction) -> None:
        with self._state_lock:
            super()._remove_source_file(c)


# --- the bookie ------------------------------------------------------------------------------


class Bookie:
    """The storage engine. Build it with :meth:`open`; see the module docstring."""

    def __init__(
        self,
        fs: FileSystem,
        config: ServerConfig,
        layout: BookieLayout,
        entry_logger: EntryLogger,
        index: LedgerIndex,
        recovery: RecoveryReport,
        limits: Limits,
        *,
        clock: Clock | None = None,
        say: Progress | None = None,
        held: HeldEntries | None = None,
    ) -> None:
        """Internal: use :meth:`open`, which recovers before the bookie takes requests.
        ``index`` and ``entry_logger`` are consistent with the journal up to
        ``recovery.end_mark``; lastMark is still ``recovery.start_mark``. ``clock`` times
        the garbage collector's intervals and the compaction throttle; ``say`` takes what
        the bookie reports while it runs (the progress stream of ``open``); ``held``: the
        entries replay could not write for lack of room, served from the journal."""
        self._fs = fs
        self._config = config
        self._limits = limits
        self._max_entry_bytes = config.max_sane_entry_size_bytes
        self._master_key_max_bytes = limits.master_key_max_bytes
        self._layout = layout
        self._entry_logger = entry_logger
        self._index = index
        self._journal: Journal | None = None
        self._lock = threading.RLock()
        #: Where the bookie says what happens to it while it runs (the progress stream).
        self._say = say or _no_progress
        #: Entries served from the journal until a checkpoint finds room (impl/bookie/held.py).
        self._held = held if held is not None else HeldEntries(fs, layout.journal_dir, {})
        self._checkpointer = Checkpointer(
            fs,
            layout.ledger_dirs,
            self._lock,
            entry_logger,
            index,
            recovery.start_mark,
            journal_dir=layout.journal_dir,
            say=say or _no_progress,
            held=self._held,
        )
        #: Guards ``_callback_errors`` (appended from the journal thread).
        self._errors_lock = threading.Lock()
        #: Every Ack handed out and maybe not yet done, guarded by ``_lock`` (adds hold it
        #: anyway); completing an Ack touches nothing of the bookie.
        self._pending = PendingAcks(limits=limits)
        self._fence_acks: dict[LedgerId, Ack] = {}
        self._recovery = recovery
        self._log_infos = EntryLogInfos(entry_logger)
        self._failure: BookieError | None = None
        self._callback_errors: list[Exception] = []
        self._on_append: Callable[[], None] | None = None
        # Bound once: the add path uses them for every entry.
        self._sink = self._record_callback_errors
        self._add_record = entry_logger.add_record
        self._track = self._pending.track
        self._closing = False
        self._closed = False
        #: The mark ``checkpoint_flush`` captured, until ``checkpoint_persist`` persists it
        #: (guarded by the checkpointer's lock; a whole checkpoint or a shutdown drops it).
        self._captured: LogMark | None = None
        #: The directory locks (impl/bookie/identity.py), held until shutdown or close.
        self._dir_locks: list[DirLock] = []
        # Garbage collection (gc.py decides, the GC steps below do the file work).
        self._clock: Clock = clock if clock is not None else SystemClock()
        #: Serialises GC steps (the adapter's gc and the driver's GC thread); taken before
        #: the checkpointer's lock and the state lock, never while holding them.
        self._gc_lock = threading.RLock()
        self._gc = GarbageCollector(GcPolicy.from_config(config), self._clock)
        self._gc_last_stats = GcStats("none", 0, 0, 0, 0)
        self._compactor_instance: TransactionalCompactor | None = None
        self._throttle: Throttle | None = None
        #: A compaction copy is running (``cancel_gc`` has something to stop).
        self._copying = False
        #: The compaction in flight between its phase steps (guarded by ``_gc_lock``).
        self._compaction: Compaction | None = None
        self._compaction_source_bytes = 0

    # --- opening ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        config: ServerConfig,
        *,
        clock: Clock,
        rng: RandomSource,
        progress: Progress | None = None,
        limits: Limits = LIMITS,
        write_bookkeeper_dirs: bool = False,
    ) -> Bookie:
        """Create the layout if missing, lock and check the directories' identity (identity.py:
        a DirectoryError if another process holds them, if they are not the ones the stamps
        name, or if they are a BookKeeper bookie's and ``write_bookkeeper_dirs`` is not set),
        recover (recovery.py: compaction cleanup, index,
        journal replay), checkpoint where replay ended, open a new journal file, and return a
        bookie ready for requests. Raises ConfigError or RecoveryError with what to do.
        ``limits`` (impl/limits.py) goes to every part built here: the entry logger, the
        index, its rebuild, journal replay and the pending Acks (the checks pass TEST_LIMITS)."""
        say = progress or _no_progress
        layout = layout_from_config(config)
        for directory in (layout.journal_dir, *layout.ledger_dirs):
            ensure_durable_dir(fs, directory)
        journals = [normalise_dir(d) for d in config.journal_directories]
        ledgers = [normalise_dir(d) for d in config.ledger_directories]
        locks = lock_directories(fs, [*journals, *ledgers])
        try:
            settled = settle_identity(
                fs,
                journals,
                ledgers,
                clock=clock,
                write_bookkeeper_dirs=write_bookkeeper_dirs,
                say=say,
            )
            layout = with_index_in(layout, layout.ledger_dirs[ledgers.index(settled.index_dir)])
            ensure_durable_dir(fs, layout.index_dir)
            for directory in dict.fromkeys([*journals, *ledgers]):
                if not ensure_reserve(fs, directory, limits.dir_reserve_bytes):
                    say(
                        f"{directory}: no room for its reserve ({limits.dir_reserve_bytes} "
                        "bytes the bookie frees when its own data fills the disk); it is "
                        "written at a later start with room"
                    )
            bookie = cls._open_locked(fs, config, layout, clock, rng, say, limits)
        except BaseException:
            release_locks(locks)
            raise
        bookie._dir_locks = locks
        return bookie

    @classmethod
    def _open_locked(
        cls,
        fs: FileSystem,
        config: ServerConfig,
        layout: BookieLayout,
        clock: Clock,
        rng: RandomSource,
        say: Progress,
        limits: Limits,
    ) -> Bookie:
        """``open`` once the directories are locked and their identity settled."""
        check_room_for_a_new_journal(fs, layout.journal_dir)
        settings = settings_from_config(config)
        entry_logger = EntryLogger(
            fs, layout.ledger_dirs, settings, rng, limits=limits, clock=clock
        )
        bookie: Bookie | None = None
        try:
            # The disk check first, so that replay writes into a directory that has room
            # (a full one is where the active log never goes), as the running bookie does.
            entry_logger.check_dirs()
            # Steps 0-3.
            recovered = recover(fs, config, layout, entry_logger, say, limits=limits)
            report = recovered.report
            bookie = cls(
                fs,
                config,
                layout,
                entry_logger,
                recovered.index,
                report,
                limits,
                clock=clock,
                say=say,
                held=recovered.held,
            )
            # Step 5 before step 4: the recovery checkpoint persists the new journal's
            # durable mark (its header's end), not where replay stopped. Everything before it
            # was replayed, and a bkref lastMark is then always the end of a group bkref
            # synced, so replay judges a later group after it as damage at the mark itself
            # too (spec/format/journal.md, rows j4 and j15; issue 26). A crash between the
            # two leaves the old mark and a header-only journal (row j11): replayed again.
            # A journal directory full to the byte frees its reserve for the new journal's
            # header (impl/bookie/reserve.py): the bookie starts and serves reads.
            with_reserve(fs, [layout.journal_dir], functools.partial(bookie._start_journal, clock))
            journal = bookie._journal
            assert journal is not None
            try:
                bookie._recovery_checkpoint(journal.durable_mark())  # step 4
            except (FsNoSpace, NoWritableLedgerDir):
                # No room for lastMark or the index in a full directory: free its reserve
                # (impl/bookie/reserve.py) and try once more, else start read-only.
                try:
                    if not bookie._release_full_reserves(say):
                        raise
                    bookie._recovery_checkpoint(journal.durable_mark())
                except (FsNoSpace, NoWritableLedgerDir) as again:
                    bookie._start_read_only(again, say)
        except BaseException:
            if bookie is not None:
                bookie._abandon()
            else:
                with contextlib.suppress(Exception):
                    entry_logger.close()
            raise
        bookie.check_invariants()
        return bookie

    def _release_full_reserves(self, say: Progress) -> bool:
        """Free the reserve of every ledger directory the disk check finds full (and of
        the index's); True when one was freed."""
        states = self._entry_logger.check_dirs()
        released = False
        for directory in self._layout.ledger_dirs:
            full = states.get(directory) is DirState.FULL
            if (full or directory == parent(self._layout.index_dir)) and release_reserve(
                self._fs, directory
            ):
                say(f"{directory}: full; freed its reserve for lastMark and the index")
                released = True
        return released

    def _start_read_only(self, exc: Exception, say: Progress) -> None:
        """The start's checkpoint found no room (issue 26, item 3): every ledger directory
        is full. Nothing was applied that a later checkpoint cannot apply again, and what
        replay could not write is served from the journal (impl/bookie/held.py), so the
        bookie starts and serves reads; adds find no room and answer no_space (BookKeeper's
        read-only mode). lastMark stays where it was until a checkpoint finds room, which
        the driver retries after each disk check: service resumes by itself."""
        layout = self._layout
        say(
            read_only_message(
                exc,
                held=len(self._held),
                last_mark=str(self._checkpointer.last_mark),
                journal_dirs=[parent(layout.journal_dir)],
                ledger_dirs=[parent(d) for d in layout.ledger_dirs],
            )
        )

    def _recovery_checkpoint(self, end: LogMark) -> None:
        """Recovery step 4, at ``end``: the new journal's durable mark, past every record
        replay read. BookKeeper #2087: replay must advance the mark, or the next restart
        replays (and re-adds) the same records again. No trim here, as in BookieImpl's
        post-replay flush (checkpointComplete with compact=false)."""
        with self._checkpointer.lock:
            self._checkpointer.complete(end, None)

    def _start_journal(self, clock: Clock) -> None:
        """Recovery step 5: a new journal file at every start (Journal.java)."""
        journal = Journal(self._fs, self._layout.journal_dir, self._journal_settings(), clock)
        journal.open_new_file()
        last_mark = self._checkpointer.last_mark
        assert journal.durable_mark() >= last_mark, (journal.durable_mark(), last_mark)
        self._journal = journal

    def _journal_settings(self) -> JournalSettings:
        """The journal's settings: the configuration's, with the journal file size capped at
        ``Limits.journal_file_max_bytes``."""
        settings = journal_settings_from_config(self._config)
        cap = self._limits.journal_file_max_bytes
        if settings.max_size_bytes <= cap:
            return settings
        return attrs.evolve(settings, max_size_bytes=cap)

    def _abandon(self) -> None:
        """Release what an open that failed half-way holds (its errors are swallowed: the
        error that made the open fail is the one to report)."""
        with contextlib.suppress(Exception):
            if self._journal is not None:
                self._journal.close()
        with contextlib.suppress(Exception):
            self._entry_logger.close()
        self._closed = True
        release_locks(self._dir_locks)

    # --- requests ----------------------------------------------------------------------

    def add_entry(
        self, ledger_id: LedgerId, entry_id: EntryId, master_key: bytes, data: bytes
    ) -> Ack:
        """Add an entry (BookieImpl.addEntry). Raises BadRequest, NoLedger (deleted ledger),
        Unauthorized, Fenced, NoSpace or BookieIOError before anything is journaled; the Ack
        completes once the journal fsync covering the entry is done."""
        # The hot path of the bookie (tests/bench/bench_bookie.py): every step is cheap. Checks
        # that touch nothing shared come first, and their messages are built only on failure.
        if not (0 <= ledger_id <= INT64_MAX and 0 <= entry_id <= INT64_MAX):
            self._check_id("ledger", ledger_id)
            self._check_id("entry", entry_id)
        if len(master_key) > self._master_key_max_bytes:
            self._check_master_key(master_key)
        if MIN_SANE_ENTRY_SIZE + len(data) > self._max_entry_bytes:
            raise self._too_large(ledger_id, entry_id, MIN_SANE_ENTRY_SIZE + len(data))
        # One record for both: the entry log's record and the journal's data record are the
        # same bytes (int32 length + ledger id + entry id + data).
        record = encode_entry_record(ledger_id, entry_id, data)
        ack = Ack(self._sink, ledger_id)
        with self._lock:
            journal = self._journal
            if journal is None or self._closing or self._closed or self._failure is not None:
                journal = self._require_ready()  # raises
            index = self._index
            new_key = False
            if index.writable_key(ledger_id) != master_key:  # else keyed, not fenced, ours
                new_key = self._check_writable(ledger_id, master_key, "add to")
            try:
                location = self._add_record(ledger_id, record)
            except (NoWritableLedgerDir, FsError) as exc:
                error = _write_failed(ledger_id, entry_id, exc)
                if isinstance(exc, FsError) and not isinstance(exc, FsNoSpace):
                    # The write or the flush of the active log failed: bytes of earlier,
                    # accepted records may be gone from the file (a failed fsync drops what it
                    # should have made durable), while the counters still count them. No
                    # checkpoint may trust the log from now on (it would persist an index and
                    # a lastMark over lost bytes): the bookie stops taking writes, and the
                    # journal, which holds every record, brings them back at the restart.
                    self._enter_failed(error)
                raise error from exc
            if new_key:
                index.set_master_key(ledger_id, master_key)
            index.put_entry(ledger_id, entry_id, location)
            self._track(ack)
            key_record = encode_key_record(ledger_id, master_key) if new_key else None
            self._journal_append(journal, key_record, record, ack)
        hook = self._on_append
        if hook is not None:
            hook()
        return ack

    def fence(self, ledger_id: LedgerId, master_key: bytes) -> Ack:
        """Fence a ledger (fenceAndLogInJournal): later adds get Fenced at once; the Ack
        completes when the fence record is durable. Fencing an unknown ledger creates it with
        this key. Raises BadRequest, NoLedger (deleted) or Unauthorized."""
        self._check_id("ledger", ledger_id)
        self._check_master_key(master_key)
        with self._lock:
            journal = self._require_ready()
            new_key = self._check_key(ledger_id, master_key, "fence")
            # A fenced ledger takes no more adds: its log is sealed at the next checkpoint,
            # as after a write close (spec/protocol/write_close.md).
            self._entry_logger.write_close(ledger_id)
            if self._index.is_fenced(ledger_id):
                previous = self._fence_acks.get(ledger_id)
                if previous is None or not previous.done or previous.error is None:
                    # Persisted already, recovered from the journal, or being persisted.
                    return previous or Ack.completed()
                # The last attempt failed to reach the journal: log the fence again.
            if new_key:
                self._index.set_master_key(ledger_id, master_key)
            self._index.set_fenced(ledger_id)
            ack = Ack(self._sink)
            self._track(ack)
            self._fence_acks[ledger_id] = ack
            key_record = encode_key_record(ledger_id, master_key) if new_key else None
            self._journal_append(journal, key_record, encode_fence_record(ledger_id), ack)
        self._wake_journal()
        return ack

    def write_close(self, ledger_id: LedgerId, master_key: bytes) -> None:
        """An advisory write close (BP-32, spec/protocol/write_close.md): no more adds to the
        ledger are expected, so a manager with many active logs seals its log at the next
        checkpoint. Nothing is written; adds are still taken. Raises BadRequest, NoLedger
        (unknown or deleted) or Unauthorized (another key). A bookie that is failed, read
        only or shutting down answers the same and remembers nothing."""
        self._check_id("ledger", ledger_id)
        self._check_master_key(master_key)
        with self._lock:
            self._require_open()
            index = self._index
            known = self._key_of(ledger_id)
            if index.is_deleted(ledger_id) or (known is None and not index.has_ledger(ledger_id)):
                raise NoLedger(f"cannot write-close ledger {ledger_id}: it does not exist here")
            if known is not None and known != master_key:
                raise Unauthorized(
                    f"cannot write-close ledger {ledger_id}: the master key differs from the "
                    "key the ledger was created with; use the ledger's own key"
                )
            if not self._closing and self._failure is None and self._journal is not None:
                self._entry_logger.write_close(ledger_id)

    def read_entry(self, ledger_id: LedgerId, entry_id: EntryId) -> bytes:
        """The data of an entry as it was added (without the 16 id bytes). Raises BadRequest,
        NoLedger, NoEntry or BookieIOError. May return an entry not yet acknowledged."""
        self._check_id("ledger", ledger_id)
        self._check_id("entry", entry_id)
        with self._lock:
            self._require_open()
            if self._index.is_deleted(ledger_id) or not self._index.has_ledger(ledger_id):
                raise NoLedger(f"ledger {ledger_id} does not exist on this bookie")
            location = self._index.get_location(ledger_id, entry_id)
            if location is None:
                if self._held.holds(ledger_id, entry_id):
                    return self._held.read(ledger_id, entry_id)[MIN_SANE_ENTRY_SIZE:]
                raise NoEntry(f"ledger {ledger_id} has no entry {entry_id} on this bookie")
            try:
                payload = self._entry_logger.read_entry(ledger_id, entry_id, location)
            except (EntryLogError, FsError) as exc:
                raise BookieIOError(
                    f"entry {entry_id} of ledger {ledger_id} is indexed but cannot be read: "
                    f"{exc}. The entry log may be damaged; other replicas still hold it."
                ) from exc
        assert len(payload) >= MIN_SANE_ENTRY_SIZE, len(payload)
        return payload[MIN_SANE_ENTRY_SIZE:]

    def delete_ledger(self, ledger_id: LedgerId) -> None:
        """Delete a ledger: durable on return (the index's tombstone); its entries become
        unreadable (NoLedger). Space is reclaimed later by garbage collection. Deleting an
        unknown or deleted ledger records the tombstone too (idempotent).

        Adds of the ledger still in flight (their journal fsync not done) complete with
        NoLedger, never ok: an ok promises an entry that stays readable, and it would not
        (issue 10: an add was answered ok after its ledger's delete). Their records may
        reach the journal all the same; replay skips a deleted ledger's records. An add
        already done whose answer is being written (its callbacks run on the journal
        thread) is waited for, so that its answer comes before the delete's."""
        self._check_id("ledger", ledger_id)
        uncertain: BookieError | None = None
        with self._lock:
            self._require_ready()
            deleted_before = self._index.deleted_records
            try:
                self._index.delete_ledger(ledger_id)
            except FsNoSpace as exc:
                # The tombstone's write was refused whole: nothing of it is on the disk.
                raise NoSpace(
                    f"deleting ledger {ledger_id} found no room for its tombstone: {exc}. It "
                    f"is not deleted; free space in {parent(self._layout.index_dir)} (it holds "
                    "the ledger index) and retry."
                ) from exc
            except TombstoneUncertain as exc:
                uncertain = self._tombstone_uncertain(ledger_id, exc)
            except FsError as exc:
                raise BookieIOError(
                    f"deleting ledger {ledger_id} failed: {exc}. It is not deleted; retry."
                ) from exc
            if uncertain is None:
                answering = self._deleted(ledger_id, deleted_before)
        if uncertain is not None:
            if self._failure is not None:  # failed: its requests in flight are answered
                self._fail_pending(self._failure)
            raise uncertain
        for ack in answering:  # done: its callbacks are writing its answer now
            ack.wait(self._limits.drain_timeout_ms / 1000)

    def _deleted(self, ledger_id: LedgerId, deleted_before: int) -> list[Ack]:
        """The ledger's tombstone is durable: forget its fence acks and held entries, and
        refuse its adds in flight. Returns the adds already done, whose answers are being
        written (the delete waits for them). Called under the lock."""
        self._fence_acks.pop(ledger_id, None)
        self._held.drop_ledger(ledger_id)
        assert self._index.is_deleted(ledger_id)
        if self._index.deleted_records != deleted_before:
            self._checkpointer.record_deletes()
        refusal = NoLedger(
            f"ledger {ledger_id} was deleted while this add was in flight: the add is not "
            "acknowledged, and the entry went with the ledger"
        )
        return [ack for ack in self._pending.adds_of(ledger_id) if not ack.refuse(refusal)]

    def _tombstone_uncertain(self, ledger_id: LedgerId, exc: TombstoneUncertain) -> BookieError:
        """The delete failed after its tombstone was written: the ledger may be gone after a
        crash, so none of its adds may be acknowledged from now on, and memory cannot say
        which it is. Fail-stop, under the lock: the bookie refuses writes until the restart
        (whose recovery reads the tombstone or not), and the ledger's adds in flight are
        refused even if their journal fsync comes (an add already answered ok came before
        the delete). The caller answers the rest in flight io_error, outside the lock.
        Returns the delete's error."""
        failure = BookieIOError(
            f"deleting ledger {ledger_id} failed after its tombstone was written: {exc}. It "
            "may or may not be deleted; the bookie refuses writes until it is restarted, "
            "which settles it."
        )
        self._enter_failed(failure)
        for ack in self._pending.adds_of(ledger_id):
            ack.refuse(failure)
        return failure

    # --- request helpers --------------------------------------------------------------

    @staticmethod
    def _check_id(what: str, value: int) -> None:
        if not 0 <= value <= INT64_MAX:
            raise BadRequest(f"{what} id {value} is out of range: ids are 0 .. 2^63-1")

    def _check_master_key(self, master_key: bytes) -> None:
        if len(master_key) > self._master_key_max_bytes:
            raise BadRequest(
                f"the master key is {len(master_key)} bytes, above the maximum "
                f"{self._master_key_max_bytes} (BookKeeper's keys are 20-byte digests)"
            )

    def _key_of(self, ledger_id: LedgerId) -> bytes | None:
        return self._index.master_key(ledger_id)

    def _check_key(self, ledger_id: LedgerId, master_key: bytes, action: str) -> bool:
        """Deleted -> NoLedger, wrong key -> Unauthorized; True when the ledger has no key
        yet (this caller's key will stick)."""
        if self._index.is_deleted(ledger_id):
            raise NoLedger(f"cannot {action} ledger {ledger_id}: it was deleted from this bookie")
        known = self._key_of(ledger_id)
        if known is None:
            return True
        if known != master_key:
            raise Unauthorized(
                f"cannot {action} ledger {ledger_id}: the master key differs from the key "
                "the ledger was created with; use the ledger's own key"
            )
        return False

    def _check_writable(self, ledger_id: LedgerId, master_key: bytes, action: str) -> bool:
        new_key = self._check_key(ledger_id, master_key, action)
        if self._index.is_fenced(ledger_id):
            raise Fenced(
                f"cannot {action} ledger {ledger_id}: it is fenced (being recovered or closed "
                "by another client); no add to it is ever acknowledged again"
            )
        return new_key

    def _too_large(self, ledger_id: LedgerId, entry_id: EntryId, payload_bytes: int) -> BadRequest:
        return BadRequest(
            f"entry {entry_id} of ledger {ledger_id} is {payload_bytes} bytes with its 16 "
            f"id bytes, above the maximum {self._max_entry_bytes} (nettyMaxFrameSizeBytes - "
            "500): send smaller entries or raise nettyMaxFrameSizeBytes"
        )

    def _journal_append(
        self, journal: Journal, key_record: bytes | None, record: bytes, ack: Ack
    ) -> None:
        """Append the ledger's key record (if any, nobody waits for it) and ``record``,
        whose durability completes ``ack``. If the journal refuses (it failed or is
        closed), ``ack`` fails with that error, which is raised."""
        try:
            if key_record is not None:
                journal.append(key_record, None)
            journal.append(record, ack.settle)
        except BookieError as exc:  # the journal failed or is closed: settle never runs
            ack.settle(exc)
            raise

    def _record_callback_errors(self, raised: list[Exception]) -> None:
        with self._errors_lock:
            self._callback_errors.extend(raised)

    def _wake_journal(self) -> None:
        hook = self._on_append
        if hook is not None:
            hook()

    def _require_open(self) -> None:
        if self._closed:
            raise BookieIOError("the bookie is shut down: start it again to serve requests")

    def _require_ready(self) -> Journal:
        """Open, not shutting down, not failed: a write may proceed."""
        self._require_open()
        if self._closing:
            raise BookieIOError("the bookie is shutting down: retry on the restarted bookie")
        if self._failure is not None:
            raise BookieIOError(
                f"the bookie stopped accepting writes after a failure: {self._failure}"
            )
        assert self._journal is not None, "open() starts the journal"
        return self._journal

    # --- background steps -------------------------------------------------------------

    def set_append_hook(self, hook: Callable[[], None] | None) -> None:
        """Called after every journal append (outside the state lock): the driver's journal
        thread waits on it instead of polling."""
        self._on_append = hook

    def should_force(self) -> bool:
        """Whether the group commit is due (Journal.should_flush)."""
        journal = self._journal
        return journal is not None and not self._closed and journal.should_flush()

    def force_deadline_ns(self) -> int | None:
        """When the oldest queued record's group wait runs out (Clock.monotonic_ns), None
        when nothing is queued: the driver sleeps until then."""
        journal = self._journal
        if journal is None or self._closed:
            return None
        return journal.flush_deadline_ns()

    def journal_force(self, *, defer_acks: bool = False) -> int:
        """The group-commit step: write and fsync the queued records, completing their Acks.
        Returns what the journal's flush returns (records made durable). On a failure the
        bookie fails every pending Ack and refuses further writes, then raises.

        ``defer_acks`` (the threaded driver): the group's Acks complete when the next force
        has written its own group, before that force's fsync, or at ``journal_release_acks``
        (Journal.flush's ``defer_callbacks`` says why). They complete only once durable."""
        return self._journal_phase(lambda journal: journal.flush(defer_callbacks=defer_acks))

    def journal_write(self) -> int:
        """The group commit's first phase as a step of its own: take the queued records as a
        group and write them, without syncing (Journal.write_group; the driver runs the
        phases back to back in ``journal_force``, tests interleave other steps between them).
        Returns the records written. Failures as in ``journal_force``."""
        return self._journal_phase(Journal.write_group)

    def journal_sync(self) -> int:
        """The group commit's second phase: sync the group ``journal_write`` wrote; its Acks
        complete at ``journal_release_acks`` (Journal.sync_group). Returns the records made
        durable. Failures as in ``journal_force``."""
        return self._journal_phase(Journal.sync_group)

    def _journal_phase(self, phase: Callable[[Journal], int]) -> int:
        journal = self._journal
        if journal is None or self._closed:
            return 0
        try:
            return phase(journal)
        except Exception as exc:
            self.fail(exc)
            if isinstance(exc, BookieError):
                raise
            raise BookieIOError(
                f"the journal's group commit failed: {exc}. Nothing it held was acknowledged; "
                "the bookie refuses writes until it is restarted."
            ) from exc

    def journal_release_acks(self) -> int:
        """Complete the Acks a ``journal_force(defer_acks=True)`` kept (they are durable);
        returns how many. The driver calls it when no force follows at once."""
        journal = self._journal
        if journal is None:
            return 0
        return journal.release_deferred()

    def checkpoint(self) -> LogMark:
        """Capture the journal's durable mark, then force the entry logs, flush the index,
        persist lastMark and trim old journals in that order (checkpoint.py): the two phases
        below back to back, under the checkpointer's lock throughout. Returns the persisted
        mark."""
        with self._checkpoint_lock():
            self._captured = None  # this checkpoint overtakes a phased one
            mark = self._capture_mark()
            try:
                self._checkpointer.complete(mark, self._journal)
            except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
                raise self._step_failed("the checkpoint", exc) from exc
        return mark

    # The checkpoint's phases as steps of their own: the capture of the mark and the two halves
    # of Checkpointer.complete that ``checkpoint`` runs back to back; tests interleave adds,
    # journal forces and rotations between them, as request and journal threads run while a
    # checkpoint does.

    def checkpoint_flush(self) -> LogMark:
        """The checkpoint's first phase: capture the journal's durable mark, then force the
        entry logs and flush the index (everything before the mark is durable in them now).
        The mark waits for ``checkpoint_persist``. Returns it. Failures as in ``checkpoint``."""
        with self._checkpoint_lock():
            return self._checkpoint_flush_locked()

    def checkpoint_persist(self) -> LogMark | None:
        """The checkpoint's second phase: persist the mark ``checkpoint_flush`` captured as
        lastMark and trim the journals before it. Returns it; None when there is none (no
        first phase since the last persist, or a whole checkpoint overtook it)."""
        with self._checkpoint_lock():
            return self._checkpoint_persist_locked()

    @contextlib.contextmanager
    def _checkpoint_lock(self) -> Iterator[None]:
        """The checkpointer's lock, held by an open bookie that has not failed."""
        self._require_open()
        with self._checkpointer.lock:
            self._require_checkpointable()
            yield

    def _capture_mark(self) -> LogMark:
        """A checkpoint's mark, captured before it flushes anything: every record before the
        mark was applied to the entry logger and the index before it was appended (both
        under the state lock), so flushing them afterwards covers everything the mark will
        claim."""
        journal = self._journal
        assert journal is not None, "open() starts the journal"
        return journal.durable_mark()

    def _checkpoint_flush_locked(self) -> LogMark:
        self._captured = None
        mark = self._capture_mark()
        try:
            self._checkpointer.flush_storage()
        except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
            raise self._step_failed("the checkpoint", exc) from exc
        self._captured = mark
        return mark

    def _checkpoint_persist_locked(self) -> LogMark | None:
        mark, self._captured = self._captured, None
        if mark is None:
            return None
        try:
            self._checkpointer.persist(mark, self._journal)
        except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
            raise self._step_failed("the checkpoint", exc) from exc
        return mark

    def _require_checkpointable(self) -> None:
        """Under the checkpointer's lock: open and not failed. After a failed fsync the page
        cache may hold bytes that never reach the disk: flushing the index or lastMark now
        could make them point at data that is gone (found by the refinement test). Only a
        restart goes on."""
        self._require_open()
        if self._failure is not None:
            raise BookieIOError(
                f"no checkpoint after a failure ({self._failure}); restart the bookie"
            )

    def _step_failed(self, step: str, exc: Exception) -> BookieError:
        """The typed error for a background step the disk failed. Out of space: nothing was
        applied, the step can be retried (NoSpace). Anything else, a failed fsync above all,
        may have lost data the bookie counted on: the bookie fails (refuses writes until a
        restart replays the journal from the last good lastMark), as BookKeeper does."""
        if isinstance(exc, (NoWritableLedgerDir, FsNoSpace)):
            return NoSpace(
                f"{step} found no room: {exc}. Nothing was lost; free space and it succeeds "
                "again (the driver retries it after the next disk check)."
            )
        self.fail(exc)
        return BookieIOError(
            f"{step} failed: {exc}. The bookie refuses writes now; restart it after checking "
            "the disk (recovery replays the journal)."
        )

    def rotate_log(self) -> EntryLogId | None:
        """Seal the active entry log and start a new one (EntryLogger.rotate); returns the
        new log's id. With entryLogPerLedgerEnabled every active log is sealed and each
        ledger's next add starts a new one: returns the highest id sealed (None when no
        ledger had a log); with entryLogSlotsPerLedgerDir > 0 the same, for every slot's
        log. Raises NoSpace when no ledger directory has room for a new log."""
        with self._lock:
            self._require_ready()
            try:
                return self._entry_logger.rotate()
            except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
                raise self._step_failed("rotating the entry log", exc) from exc

    def preallocate(self) -> EntryLogId | None:
        """Create the next entry log ahead of need (entryLogFilePreallocationEnabled). Raises
        NoSpace when no ledger directory has room, and BookieIOError (the bookie fails, as
        for any background step the disk failed) when creating the log failed otherwise."""
        with self._lock:
            self._require_open()
            try:
                return self._entry_logger.preallocate()
            except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
                raise self._step_failed("preallocating an entry log", exc) from exc

    def check_dirs(self) -> None:
        """Measure the ledger directories; a full one makes the next add rotate off it."""
        with self._lock:
            self._require_open()
            self._entry_logger.check_dirs()

    # --- garbage collection and compaction ------------------------------------------------
    #
    # gc.py decides (which logs are dead, the kind, the candidates and their order); these
    # steps do the file work under the bookie's locks. ``gc`` is a whole cycle (the adapter's
    # op and the driver's GC thread); ``gc_begin`` and the three phase steps are the same
    # cycle as explicit steps, so a test or the model can put adds, checkpoints, rotations and
    # crashes between them. Each step is a small method a known-bad variant can override
    # (tests/quality). Locks: ``_gc_lock`` serialises GC steps; phase 1 holds the state lock
    # (it takes an id from the shared counter and reads which ledgers are live); phase 3
    # holds the checkpointer's lock around its index update and flush, as a checkpoint does.

    def gc(self, force: bool = False) -> GcStats:
        """One whole GC cycle (GarbageCollectorThread.runWithFlags): ``gc_begin``, then copy,
        flush and index for each candidate in order. Returns what the cycle did. Raises
        NoSpace or BookieIOError as the steps do (a failed cycle is dropped; the bookie fails
        only when phase 3 failed)."""
        with self._gc_lock:
            self.gc_begin(force)
            while True:
                copied = self.compact_copy()
                if copied.phase == "idle":
                    break
                if copied.new_log is None:
                    continue
                self.compact_flush()
                self.compact_index()
            return self._gc_last_stats

    def gc_begin(self, force: bool = False) -> GcStats:
        """Steps 0 to 4 of a cycle and its candidates (no compaction yet): abort a compaction
        in flight and drop the rest of its cycle, recover leftovers, drop deleted ledgers from
        the metadata, extract the metadata of new flushed logs, delete the logs with nothing
        live, decide the kind. Returns the stats so far with ``candidates`` in order. Raises
        NoSpace or BookieIOError (nothing is half done: the bookie keeps serving)."""
        with self._gc_lock:
            self._require_ready()
            self._abort_compaction()
            self._gc_last_stats = GcStats("none", 0, 0, 0, 0)
            try:
                self._gc_recover()  # step 0
                self._gc.drop_deleted(self._is_live_ledger)  # step 1
                self._gc_extract()  # step 2
                deleted, reclaimed = self._gc_delete_dead()  # step 3
            except (FsError, NoWritableLedgerDir, EntryLogError, RecoveryError) as exc:
                # RecoveryError: a damaged .compacted whose source is gone (step 0 refuses to
                # guess); the bookie serves on, GC waits for an operator (the message says).
                raise self._gc_error("garbage collection", exc) from exc
            kind = self._gc_kind(force)  # step 4
            begun = self._gc.begin(kind, deleted, reclaimed)  # step 5's order
            if kind == "none":
                self._gc_last_stats = begun
            return begun

    def compact_copy(self) -> PhaseResult:
        """Phase 1 of the next candidate of the cycle (when no compaction is in flight):
        copy the records of its live ledgers into a new ``.compacting`` log; when nothing is
        live the source is deleted and no compaction log is left. ``idle`` when a compaction
        is in flight or the cycle has no candidate left (the cycle then ends). Errors roll
        back (NoSpace, BookieIOError; the rest of the cycle is dropped)."""
        with self._gc_lock:
            self._require_ready()
            if self._compaction is not None:
                return IDLE
            source = self._gc.next_source()
            if source is None:
                self._gc_end()
                return IDLE
            size = self._log_size(source)
            try:
                compaction = self._compactor_copy(source)
            except CompactionCancelled:
                self._gc_end()  # rolled back by the compactor
                raise
            except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
                self._forget_if_gone(source)  # nothing live: the unlink may have happened
                self._gc_end()
                raise self._gc_error(f"copying entry log {log_file_name(source)}", exc) from exc
            if compaction.new_log is None:
                self._log_gone(source)
                self._gc.record(deleted=1, reclaimed=size)
                return PhaseResult("copy", source, None, 0)
            self._compaction = compaction
            self._compaction_source_bytes = size
            return PhaseResult("copy", source, compaction.new_log, len(compaction.moved))

    def compact_flush(self) -> PhaseResult:
        """Phase 2 of the compaction in flight: ledgers map, fsync, ``.compacted`` link,
        ``.compacting`` removed. ``idle`` when no compaction waits for it. Errors roll back
        (the compaction files are removed; NoSpace or BookieIOError)."""
        with self._gc_lock:
            self._require_ready()
            compaction = self._compaction
            if compaction is None or compaction.phase != "copied":
                return IDLE
            try:
                self._compactor_flush(compaction)
            except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
                self._abort_compaction()
                name = log_file_name(compaction.source)
                raise self._gc_error(f"flushing the compaction of {name}", exc) from exc
            return PhaseResult(
                "flush", compaction.source, compaction.new_log, len(compaction.moved)
            )

    def compact_index(self) -> PhaseResult:
        """Phase 3 of the compaction in flight: link ``<new>.log``, point the live moved
        entries at it, force the entry logs and flush the index (under the checkpointer's
        lock), then remove the source and ``.compacted``. ``idle`` when no flushed compaction
        waits. A failure fails the bookie (``_step_failed``; out of space excepted): recovery
        finishes the compaction from ``.compacted``."""
        with self._gc_lock:
            self._require_ready()
            compaction = self._compaction
            if compaction is None or compaction.phase != "flushed":
                return IDLE
            self._compaction = None
            source, new_log = compaction.source, compaction.new_log
            assert new_log is not None
            try:
                self._compactor_link(compaction)
                self._log_infos.rescan()
                self._apply_moves_and_flush(compaction.moved)
                self._compactor_remove_source(compaction)
            except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
                self._forget_if_gone(source)
                self._gc_end()
                step = f"the index phase of the compaction of {log_file_name(source)}"
                raise self._step_failed(step, exc) from exc
            self._log_gone(source)
            kept = self._log_size(new_log)
            self._gc.record(
                compacted=1,
                moved=len(compaction.moved),
                reclaimed=self._compaction_source_bytes - kept,
            )
            return PhaseResult("index", source, new_log, len(compaction.moved))

    def cancel_gc(self) -> None:
        """Stop a compaction copy in progress at its next record (it rolls back and its step
        raises CompactionCancelled, a BookieIOError); a shutdown and a stopping driver call
        it, so they do not wait for a throttled copy of a whole log. Thread-safe: it only
        raises a flag."""
        throttle = self._throttle
        if throttle is not None and self._copying:
            throttle.cancel()

    def gc_metadata(self) -> dict[EntryLogId, tuple[int, int]]:
        """The garbage collector's metadata map (entryLogMetaMap) as it stands: per flushed
        log it knows, (total bytes, bytes of live ledgers) as of its last cycle."""
        with self._gc_lock:
            return {log_id: (u.total, u.remaining) for log_id, u in self._gc.meta.items()}

    @property
    def gc_last_times_ms(self) -> tuple[int, int]:
        """(last major, last minor) compaction time on the clock's monotonic milliseconds
        (GarbageCollectorThread's lastMajorCompactionTime, lastMinorCompactionTime)."""
        with self._gc_lock:
            return self._gc.last_major_ms, self._gc.last_minor_ms

    # --- the GC steps, each overridable ------------------------------------------------

    def _is_live_ledger(self, ledger_id: LedgerId) -> bool:
        """A live ledger: not deleted (contract S1; bkref has no ledger manager). Asked per
        record while phase 1 copies, so a delete during the copy is seen."""
        with self._lock:
            return not self._index.is_deleted(ledger_id)

    def _gc_candidate_logs(self) -> list[EntryLogId]:
        """The flushed logs (S1): every ``<hex>.log`` on disk but this run's active,
        rotated and preallocated logs. A compaction's new log counts once linked."""
        with self._lock:
            busy = {
                desc.log_id
                for desc in self._entry_logger.state().logs
                if desc.state is not LogState.FLUSHED
            }
            return [log_id for log_id in self._entry_logger.log_ids() if log_id not in busy]

    def _gc_read_metadata(self, log_id: EntryLogId) -> dict[int, int] | None:
        """A log's bytes per ledger (its ledgers map, else a scan); ``{}`` for a file too
        short to hold a record (the zero-byte preallocated log an earlier run left); None
        when it cannot be read now or its header is damaged (next cycle). The log is
        flushed, so it is read through a handle of its own, outside the state lock: adds go on
        while GC scans."""
        path = self._entry_logger.find_log(log_id)
        if path is None:
            return {}
        try:
            handle = self._fs.open(path, read_only=True)
        except FsError:
            return None
        try:
            if handle.size() < LOGFILE_HEADER_SIZE:
                return {}  # records start after the header: this file holds none
            chunk = self._limits.scan_chunk_bytes
            return dict(extract_metadata(handle, log_id, chunk_bytes=chunk).metadata.ledgers)
        except (EntryLogError, FsError):
            # A damaged header over what may be records, or a read error: never deleted on a
            # guess; skipped (and tried again next cycle).
            return None
        finally:
            with contextlib.suppress(FsError):
                handle.close()

    def _gc_recover(self) -> None:
        """Step 0: finish or undo what interrupted compactions left (S3's recovery)."""
        before = set(self._entry_logger.log_ids())
        recover_leftovers(
            self._fs,
            self._layout.ledger_dirs,
            self._entry_logger,
            self._apply_moves_and_flush,
            limits=self._limits,
        )
        after = set(self._entry_logger.log_ids())
        for gone in before - after:
            self._log_gone(gone)
        if after - before:
            self._log_infos.rescan()

    def _gc_extract(self) -> None:
        """Step 2: the metadata of flushed logs not known yet."""
        self._gc.extract_new(
            self._gc_candidate_logs(), self._gc_read_metadata, self._is_live_ledger
        )

    def _gc_delete_dead(self) -> tuple[int, int]:
        """Step 3: delete every flushed log with nothing live; returns (logs, bytes)."""
        deleted = reclaimed = 0
        for log_id in self._gc.dead_logs():
            reclaimed += self._remove_log(log_id)
            deleted += 1
        return deleted, reclaimed

    def _gc_kind(self, force: bool) -> Kind:
        """Step 4: the kind, from ``force`` and the directories' states (gc.suspension)."""
        states = [state for _, state in self._entry_logger.state().dir_states]
        flags = suspension(states, self._gc.policy.force_gc_when_no_space)
        return self._gc.decide(flags, force)

    def _remove_log(self, log_id: EntryLogId) -> int:
        """Unlink ``<hex>.log`` and make its removal durable (EntryLogger.removeEntryLog);
        returns its size in bytes (0 if it was gone already)."""
        path = self._entry_logger.find_log(log_id)
        size = 0
        if path is not None:
            size = self._log_size(log_id)
            try:
                with self._lock:
                    remove_log_file(self._fs, self._entry_logger, log_id, path)
            except FsError:
                self._forget_if_gone(log_id)  # the unlink happened, the fsync failed
                raise
        self._log_gone(log_id)
        return size

    def _forget_if_gone(self, log_id: EntryLogId) -> None:
        """After a failed step that may have unlinked ``log_id`` before failing (its
        directory's fsync): a log whose file is gone is gone for the bookie too."""
        if self._entry_logger.find_log(log_id) is None:
            self._log_gone(log_id)

    def _log_gone(self, log_id: EntryLogId) -> None:
        """A log left the disk: forget it everywhere the bookie remembers it."""
        self._gc.forget(log_id)
        with self._lock:
            self._entry_logger.forget_log(log_id)
            self._log_infos.removed(log_id)

    def _log_size(self, log_id: EntryLogId) -> int:
        path = self._entry_logger.find_log(log_id)
        if path is None:
            return 0
        try:
            handle = self._fs.open(path, read_only=True)
        except FsError:
            return 0
        try:
            return handle.size()
        finally:
            handle.close()

    def _make_compactor(self) -> TransactionalCompactor:
        throttle = Throttle.from_policy(self._gc.policy, self._clock, self._clock.sleep_ns)
        self._throttle = throttle
        return _BookieCompactor(
            self._fs, self._entry_logger, self._lock, limits=self._limits, throttle=throttle
        )

    @property
    def _compactor(self) -> TransactionalCompactor:
        if self._compactor_instance is None:
            self._compactor_instance = self._make_compactor()
        return self._compactor_instance

    def _compactor_copy(self, source: EntryLogId) -> Compaction:
        compactor = self._compactor
        self._copying = True
        try:
            return compactor.copy(source, self._is_live_ledger)
        finally:
            self._copying = False
            if self._throttle is not None:
                self._throttle.clear()

    def _compactor_flush(self, compaction: Compaction) -> None:
        self._compactor.flush(compaction)

    def _compactor_link(self, compaction: Compaction) -> None:
        self._compactor.link(compaction)

    def _compactor_remove_source(self, compaction: Compaction) -> None:
        self._compactor.remove_source(compaction)

    def _apply_moves_and_flush(self, moved: list[MovedEntry]) -> None:
        """Phase 3's index part (and recovery's): under the checkpointer's lock, point each
        moved entry of a live ledger whose location is still in the source log at its new
        location, then force the entry logs and flush the index as a checkpoint's first
        half does (the persisted index only names durable records)."""
        with self._checkpointer.lock:
            with self._lock:
                self._apply_moves(moved)
            self._checkpointer.flush_storage(checkpoint=False)

    def _apply_moves(self, moved: list[MovedEntry]) -> int:
        """Put the new locations (the caller holds the state lock); returns how many. Only
        for a live ledger the index knows, and only where the index has a location for the
        entry in the source log (compared by log id: recovery's moves carry the source at
        offset 0, and any location in a log about to go must move anyway); an entry added
        again elsewhere since keeps its newer location. A record the index has no location
        for is never indexed from its copy (S3): it is the record of an add that failed or
        was lost in a crash, which this bookie may already have answered as missing, and
        indexing it would bring the entry back (found by the refinement machine)."""
        index = self._index
        applied = 0
        for move in moved:
            if not self._is_live_ledger(move.ledger_id) or not index.has_ledger(move.ledger_id):
                continue
            current = index.get_location(move.ledger_id, move.entry_id)
            if current is not None and location_log_id(current) == location_log_id(move.old):
                index.put_entry(move.ledger_id, move.entry_id, move.new)
                applied += 1
        return applied

    def _abort_compaction(self) -> None:
        """Roll back a compaction whose phase 3 has not run and drop the rest of its cycle
        (a new cycle, a failure, a shutdown). A failed roll-back leaves files the next
        step 0 or start removes."""
        compaction, self._compaction = self._compaction, None
        if compaction is not None and compaction.phase in ("copied", "flushed"):
            with contextlib.suppress(FsError, NoWritableLedgerDir, EntryLogError):
                self._compactor.abort(compaction)
        self._gc_end()

    def _gc_end(self) -> None:
        """End the cycle in flight (if any), keeping its stats for ``gc``."""
        if self._gc.in_cycle:
            self._gc_last_stats = self._gc.end()

    def _gc_error(self, step: str, exc: Exception) -> BookieError:
        """A GC step before phase 3 failed: nothing was half done (what it wrote was rolled
        back or is a leftover the next cycle removes), so the bookie keeps serving."""
        self._gc_end()
        if isinstance(exc, (NoWritableLedgerDir, FsNoSpace)):
            return NoSpace(
                f"{step} found no room: {exc}. Nothing was changed; free space (or add a "
                "ledger directory with `bkref dirs accept`, the bookie stopped) and run gc "
                "again."
            )
        return BookieIOError(
            f"{step} failed: {exc}. Nothing was changed: the source logs and the index are "
            "as before; check the disk and run gc again."
        )

    def fail(self, error: BaseException) -> None:
        """A background step failed: fail every pending Ack with BookieIOError and refuse
        writes from now on (BookKeeper shuts the bookie down when its journal dies)."""
        failure = BookieIOError(
            f"a background step failed: {error}. Writes that were not acknowledged are not "
            "durable; restart the bookie after checking the disk."
        )
        self._enter_failed(failure)
        self._fail_pending(failure)

    def _enter_failed(self, failure: BookieError) -> None:
        """Enter the failed state (the first failure sticks) and say so on the progress
        stream, once: an operator watching standard error learns that the bookie refuses
        writes, why, and what to do (issue 26: it entered that state without a word)."""
        with self._lock:
            first = self._failure is None
            if first:
                self._failure = failure
        if first:
            self._say(
                f"failed: {failure} It refuses writes from now on and serves reads; pending "
                "adds and fences were answered io_error."
            )

    def _fail_pending(self, failure: BookieError) -> None:
        with self._lock:
            pending = self._pending.take_all()
        for ack in pending:
            raised = ack.complete(failure)  # a no-op for the Acks already done
            if raised:
                self._record_callback_errors(raised)

    def shutdown(self) -> None:
        """Clean shutdown: refuse new writes, force the journal, checkpoint, close
        everything; a restart then replays nothing. Idempotent. After a failure it only
        closes (nothing more can be made durable) and raises BookieIOError to say that the
        shutdown was not clean."""
        with self._lock:
            if self._closed or self._closing:
                return
            self._closing = True
        self.cancel_gc()  # a throttled copy in progress stops at its next record
        with self._gc_lock:  # waits for a GC step in progress, then drops its cycle
            self._abort_compaction()
        failed_before = self._failure
        try:
            self._shutdown_steps()
        except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
            raise self._step_failed("the clean shutdown", exc) from exc
        if failed_before is not None:
            # Closed, but not cleanly: nothing was checkpointed, a restart replays the journal.
            raise BookieIOError(
                f"the bookie had failed ({failed_before}): it is closed without a checkpoint; "
                "the restart will replay the journal"
            )

    def _shutdown_steps(self) -> None:
        journal = self._journal
        assert journal is not None, "open() starts the journal"
        try:
            if self._failure is None:
                self.journal_force()
                with self._checkpointer.lock:
                    self._captured = None
                    self._checkpointer.complete(journal.durable_mark(), journal)
        finally:
            try:
                # Not under _lock: close flushes what is still queued, and Ack callbacks run
                # then (a callback may read from the bookie).
                journal.close()
            finally:
                try:
                    with self._lock:
                        self._closed = True
                        self._entry_logger.close()
                finally:
                    release_locks(self._dir_locks)
            self._fail_pending(
                BookieIOError("the bookie shut down before the record was durable; retry")
            )

    # --- observation --------------------------------------------------------------------

    @property
    def config(self) -> ServerConfig:
        return self._config

    @property
    def layout(self) -> BookieLayout:
        return self._layout

    @property
    def limits(self) -> Limits:
        """The bounds this bookie was opened with (impl/limits.py)."""
        return self._limits

    @property
    def recovery(self) -> RecoveryReport:
        """What the last open replayed (a clean restart replays nothing)."""
        return self._recovery

    @property
    def entry_log_events(self) -> Mapping[str, int]:
        """What the entry-log manager let go or moved since this run opened, and why
        (impl/entrylog/manager.py EVENTS): evictions, write closes, full directories."""
        return dict(self._entry_logger.manager.events)

    @property
    def last_mark(self) -> LogMark:
        """The lastMark this bookie last persisted (or read at start)."""
        return self._checkpointer.last_mark

    @property
    def closed(self) -> bool:
        """Shut down (or shutting down): background steps have nothing more to do."""
        return self._closed or self._closing

    @property
    def failure(self) -> BookieError | None:
        """The failure that stopped writes, if any."""
        return self._failure

    @property
    def callback_errors(self) -> tuple[Exception, ...]:
        """What Ack callbacks raised (they must not; kept so it does not vanish)."""
        with self._errors_lock:
            return tuple(self._callback_errors)

    def pending_acks(self) -> int:
        """Acks not yet completed."""
        with self._lock:
            return self._pending.not_done()

    def inspect(self) -> BookieState:
        """The abstract state (state.py)."""
        with self._lock:
            journal = self._journal
            last_mark = self._checkpointer.last_mark
            journal_mark = journal.durable_mark() if journal is not None else last_mark
            logger = self._entry_logger.state()
            entry_logs = self._log_infos.describe(logger.logs)
            compaction = self._compaction
            files = () if compaction is None else compaction.file_names()
            return bookie_state(
                self._index, logger, entry_logs, last_mark, journal_mark, compaction_files=files
            )

    def ledgers_maps(self) -> tuple[LedgersMapInfo, ...]:
        """Each entry log's header and ledgers map as its file holds them (the adapter's
        ``inspect`` reports them: spec/adapter.md). Reads every log's header, and its map
        when sealed; a file that vanished or cannot be read is left out (``inspect`` says
        what the bookie knows of its logs)."""
        with self._lock:
            infos = []
            for info in self._log_infos.describe(self._entry_logger.state().logs):
                try:
                    sealed, found = self._entry_logger.ledgers_map(info.log_id)
                except (MissingLogFile, FsError):
                    continue
                pairs = None if found is None else tuple(sorted(found.items()))
                infos.append(LedgersMapInfo(info.log_id, sealed, pairs))
            return tuple(infos)

    def check_invariants(self) -> None:
        with self._lock:
            self._entry_logger.check_invariants()
            self._index.check_invariants()
            self._checkpointer.check_invariants()
            self._pending.check_invariants()
            self._log_infos.check_invariants()
            last_mark = self._checkpointer.last_mark
            assert last_mark >= self._recovery.start_mark
            if self._captured is not None:
                assert self._captured >= last_mark, (self._captured, last_mark)
            assert self._recovery.end_mark >= self._recovery.start_mark
            if self._journal is not None and not self._closed:
                assert self._journal.durable_mark() >= last_mark
            for ledger_id in self._fence_acks:
                assert self._index.is_fenced(ledger_id), ledger_id
            for ledger_id in self._index.ledgers():
                assert not self._index.is_deleted(LedgerId(ledger_id)), ledger_id
            if self._closed:
                assert self._pending.all_done()
        with self._gc_lock:  # never taken while holding _lock
            self._gc.check_invariants()
            compaction = self._compaction
            if compaction is not None:
                assert compaction.phase in ("copied", "flushed"), compaction.phase
                assert self._gc.in_cycle, "a compaction belongs to a cycle"
