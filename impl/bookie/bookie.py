"""The bookie: the composition root of the storage engine (BookieImpl + InterleavedLedgerStorage
+ SyncThread + HandleFactoryImpl/LedgerDescriptorImpl, as explicit steps).

Spec pages: spec/format/journal.md (records, lastMark, replay), spec/format/ledger_index.md
(our index), spec/format/entry_log.md (entry logs), spec/adapter.md (the error codes the
typed errors carry). docs/design.md "Data flow" is the order of every operation here.

Why one object: an add is acknowledged only once the journal fsync that covers its record is
done, and a checkpoint may trim the journal only once everything the journal covered is
durable elsewhere (entry logs, index, lastMark). Those two promises span four parts (entry
logger, ledger index, journal, lastMark), so one object owns all four and the order between
them.

Layout (BookKeeper's own, so bkref opens BookKeeper's directories and the other way round):

- ``<journal dir>/current/<hex id>.txn``: journal files (impl/journal/journal.py);
- ``<ledger dir>/current/<hex id>.log``, ``lastId``: entry logs (impl/entrylog/logger.py);
- ``<ledger dir>/current/lastMark``: the checkpointed journal mark, in every ledger dir;
- ``<first ledger dir>/current/bkref-index/``: our ledger index (spec/format/ledger_index.md).
  BookKeeper keeps its own index files in ``<ledger dir>/current/<xx>/<yy>/`` sub-directories;
  we neither read nor write those. Where our index has never been persisted but entry logs
  exist (a directory written by BookKeeper), the index is rebuilt from the logs.

Only the first journal directory is supported: BookKeeper runs one journal per directory
with ``lastMark.<index>`` files; with more than one ``journalDirectories`` entry the bookie
refuses to start with a ConfigError saying so.

Threads: every operation is thread-safe. One re-entrant lock (``_lock``) guards the entry
logger, the index and the ledger state; it is never held during the journal's fsync (the
journal's own lock is released during its fsync too, so adds proceed while a group is being
forced). Checkpoints are serialised by ``_checkpoint_lock``. The checkpoint holds ``_lock``
while it forces the entry logs and flushes the index, so that the persisted index only names
locations whose bytes are already durable (adds wait meanwhile, as they wait in BookKeeper,
whose entry logger is synchronized too).

The add path is the hot path (tests/bench/bench_bookie.py): its record is encoded once and
used by both the entry log and the journal (the two formats share it byte for byte), the
common case of the ledger checks is one index lookup (``writable_key``), and Acks are tracked
in a list under ``_lock`` that is pruned in amortised batches, so that completing an Ack on
the journal thread touches no lock of the bookie.

Choices where BookKeeper leaves room, each on purpose:

- The first add **or fence** of a ledger journals a key record before its own record.
  BookKeeper journals a key record only on the first add (BookieImpl.addEntryInternal); a
  fence of a ledger it never saw writes no key, and replay then skips that fence record
  (readMasterKey finds no ledger) if the index had not been flushed: a durable fence lost.
- A deleted ledger stays deleted: adds and fences to it get NoLedger. BookKeeper re-creates
  it (unless it was fenced: LedgerFencedAndDeletedException). Ledger ids are never reused by
  BookKeeper's clients, and replay skips the records of deleted ledgers, so re-creating a
  ledger would make its acknowledged adds vanish at the next restart.
- Replay re-adds a data record of a ledger whose key it does not know if the index knows
  the ledger: in a directory written by BookKeeper the keys live in BookKeeper's index files,
  which we do not read, and the ledger is known from the rebuild of the entry logs. Such a
  ledger takes the key of its next caller. A data record of a ledger neither keyed nor
  indexed is skipped, as BookKeeper skips it (readMasterKey: NoLedgerException), so a record
  made of zeros cannot create ledger 0. A fence record is applied even to an unknown ledger
  (created fenced, without a key), where BookKeeper skips it: property 2 comes first.
- Replay skips a data record whose entry the index already has and that reads back with the
  same bytes (BookKeeper re-adds every record); otherwise it appends it again.
- Explicit-LAC records are replayed as no-ops: bkref has no explicit LAC yet.
- A read can see an entry that is written but not yet acknowledged (as BookKeeper's can).
- The payload limit is on the whole entry (16 id bytes + data) against maxSaneEntrySize.

Not verified here: multiple journal directories, entry log per ledger, compaction (its
leftovers cleanup is a named no-op hook, :meth:`Bookie._cleanup_compaction_leftovers`),
garbage collection (deleted ledgers' bytes stay in the logs), read-only mode.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable

import attrs

from impl.clock import Clock
from impl.config.config import ServerConfig
from impl.entrylog.ledger_dirs import RandomSource
from impl.entrylog.logger import EntryLogger, settings_from_config
from impl.entrylog.manager import LogState
from impl.format.entry_log import MIN_SANE_ENTRY_SIZE, encode_entry_record
from impl.format.journal import (
    JournalRecord,
    encode_fence_record,
    encode_key_record,
)
from impl.format.ledger_index import MASTER_KEY_MAX_BYTES
from impl.format.names import CURRENT_DIR, INDEX_DIR_NAME, journal_file_name
from impl.fs.api import FileSystem, join, parent
from impl.index.ledger_index import LedgerIndex
from impl.index.rebuild import PROGRESS_EVERY_LOGS, rebuild_index
from impl.journal.journal import Journal, journal_settings_from_config
from impl.journal.last_mark import NO_MARK, LogMark, read_last_mark, write_last_mark
from impl.journal.replay import replay
from spec.errors import (
    BadRequest,
    BookieError,
    BookieIOError,
    ConfigError,
    EntryLogError,
    Fenced,
    FsError,
    FsNoSpace,
    NoEntry,
    NoLedger,
    NoSpace,
    NoWritableLedgerDir,
    RecoveryError,
    Unauthorized,
)
from spec.ids import INT64_MAX, EntryId, EntryLogId, LedgerId

#: The mark before any checkpoint (BookKeeper's ``new LogMark()``).
ZERO_MARK = NO_MARK
#: The list of pending Acks is pruned of completed ones when it reaches this length (or
#: twice what the last pruning kept): amortised O(1) per add, no lock per completion.
PENDING_PRUNE_MIN = 1024

Progress = Callable[[str], None]


def _no_progress(_line: str) -> None:
    """The default progress sink: say nothing."""


# --- layout -------------------------------------------------------------------------------


@attrs.frozen
class BookieLayout:
    """Where everything lives: the ``current`` directories and our index directory."""

    journal_dir: str
    ledger_dirs: tuple[str, ...]
    index_dir: str


def layout_from_config(config: ServerConfig) -> BookieLayout:
    """BookKeeper's layout from journalDirectories and ledgerDirectories. Pure. Raises
    ConfigError for several journal directories (see the module docstring)."""
    journals = config.journal_directories
    if len(journals) != 1:
        raise ConfigError(
            f"journalDirectories={','.join(journals)} lists {len(journals)} directories: "
            "bkref runs one journal and supports exactly one journal directory (BookKeeper's "
            "lastMark.<index> files for several journals are not implemented). Keep one."
        )
    ledgers = tuple(join(d, CURRENT_DIR) for d in config.ledger_directories)
    assert ledgers, "ServerConfig guarantees at least one ledger directory"
    return BookieLayout(
        journal_dir=join(journals[0], CURRENT_DIR),
        ledger_dirs=ledgers,
        index_dir=join(ledgers[0], INDEX_DIR_NAME),
    )


def ensure_durable_dir(fs: FileSystem, path: str) -> bool:
    """Create ``path`` and its missing parents, and fsync the parent of every directory made,
    so the layout survives a crash. Returns whether anything was created."""
    missing: list[str] = []
    probe = path
    while probe and not fs.is_dir(probe):
        missing.append(probe)
        up = parent(probe)
        if up == probe:
            break
        probe = up
    if not missing:
        return False
    fs.mkdir(path)
    for created in missing:
        fs.fsync_dir(parent(created) or ".")  # "" is the parent of a relative one-part path
    assert fs.is_dir(path), path
    return True


# --- acknowledgements ---------------------------------------------------------------------


AckCallback = Callable[["Ack"], None]


class Ack:
    """A thread-safe completion: ``done`` once the operation is durable (``error`` None) or
    has failed (``error`` a BookieError). Completing twice keeps the first outcome.

    Cheap on the hot path (one per add): a plain lock and flags; the Event a waiter sleeps
    on is made only when someone waits before completion.
    """

    __slots__ = ("_callbacks", "_done", "_error", "_event", "_lock", "_sink")

    def __init__(self, sink: Callable[[list[Exception]], None] | None = None) -> None:
        """``sink`` receives what callbacks raised when the journal completes the Ack
        (``settle``); the bookie keeps it in ``callback_errors``."""
        self._lock = threading.Lock()
        self._done = False
        self._error: BookieError | None = None
        self._callbacks: list[AckCallback] | None = None
        self._event: threading.Event | None = None
        self._sink = sink

    @classmethod
    def completed(cls, error: BookieError | None = None) -> Ack:
        """An Ack that is already done."""
        ack = cls()
        ack.complete(error)
        return ack

    @property
    def done(self) -> bool:
        return self._done

    @property
    def error(self) -> BookieError | None:
        """The failure, or None (also while not done)."""
        return self._error

    def wait(self, timeout: float | None = None) -> bool:
        """Block until done or ``timeout`` seconds pass; return whether it is done."""
        with self._lock:
            if self._done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def add_done_callback(self, fn: AckCallback) -> None:
        """Call ``fn(ack)`` when done: at once if already done, else from the completing
        thread. ``fn`` must not raise (what it raises is returned by ``complete``)."""
        with self._lock:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = [fn]
                else:
                    self._callbacks.append(fn)
                return
        fn(self)

    def complete(self, error: BookieError | None) -> list[Exception]:
        """Finish the Ack (first call wins) and run the callbacks. Returns what callbacks
        raised, so the completing thread can record it instead of dying."""
        callbacks = self._finish(error)
        failures: list[Exception] = []
        if callbacks is not None:
            for fn in callbacks:
                try:
                    fn(self)
                except Exception as exc:  # a caller's bug must not kill the journal thread
                    failures.append(exc)
        return failures

    def settle(self, error: BookieError | None) -> None:
        """``complete`` as the journal's OnDurable (one call per acknowledged add, so kept
        minimal): what callbacks raise goes to the sink, not to the journal thread."""
        callbacks = self._finish(error)
        if callbacks is None:
            return
        for fn in callbacks:
            try:
                fn(self)
            except Exception as exc:  # a caller's bug must not kill the journal thread
                if self._sink is not None:
                    self._sink([exc])

    def _finish(self, error: BookieError | None) -> list[AckCallback] | None:
        """Record the outcome (first call wins) and wake waiters; the callbacks to run."""
        with self._lock:
            if self._done:
                return None
            self._error = error
            self._done = True
            callbacks = self._callbacks
            self._callbacks = None
            event = self._event
        if event is not None:
            event.set()
        return callbacks


def sync_previous_run(fs: FileSystem, layout: BookieLayout) -> int:
    """Recovery step 0: fsync every file and directory of the bookie before trusting any.

    The previous process may have written bytes it never fsynced (it was killed, or a failed
    fsync made it stop), and a new process reads them back from the page cache exactly like
    durable bytes. Recovery relies on what it reads: replay skips a record whose entry the
    index already has and that reads back the same, and then moves lastMark past it. If those
    bytes were not durable, a power loss after recovery would lose an acknowledged entry that
    the journal no longer covers. PostgreSQL's crash recovery fsyncs its whole data directory
    for the same reason (SyncDataDirectory). Found by the refinement test (a restart after a
    failed shutdown, then a crash). Returns the number of files synced."""
    synced = 0
    for directory in (layout.journal_dir, *layout.ledger_dirs, layout.index_dir):
        if not fs.is_dir(directory):
            continue
        for name in sorted(fs.listdir(directory)):
            path = join(directory, name)
            if fs.is_dir(path):
                continue
            handle = fs.open(path, create=False, read_only=True)
            try:
                handle.fsync()
            finally:
                handle.close()
            synced += 1
        fs.fsync_dir(directory)
    return synced


# --- the abstract state --------------------------------------------------------------------


@attrs.frozen
class EntryLogInfo:
    """One entry log: its state (preallocated, active, rotated, flushed), its ledgers, and per
    ledger the bytes of its records there (size prefixes included, as EntryLogMetadata)."""

    log_id: EntryLogId
    state: str
    ledgers: tuple[LedgerId, ...]
    ledger_bytes: tuple[tuple[LedgerId, int], ...]


@attrs.frozen
class LedgerInfo:
    """One live ledger: its last entry (None before the first add) and whether fenced."""

    ledger_id: LedgerId
    last_entry: EntryId | None
    fenced: bool


@attrs.frozen
class BookieState:
    """The abstraction function: what the model compares the bookie with.

    ``last_mark`` is the persisted lastMark (what a restart replays from); ``journal_mark`` the
    journal's durable mark (everything before it is on disk). In single-log mode every ledger's
    current log is ``current_log_id``. ``compaction_files`` is empty until compaction lands.
    """

    entry_logs: tuple[EntryLogInfo, ...]
    least_unflushed_log_id: int
    last_mark: LogMark
    journal_mark: LogMark
    current_log_id: EntryLogId | None
    ledgers: tuple[LedgerInfo, ...]
    fenced_ledgers: tuple[LedgerId, ...]
    deleted_ledgers: tuple[LedgerId, ...]
    compaction_files: tuple[str, ...]


@attrs.frozen
class RecoveryReport:
    """What the last open did: the mark it replayed from and to, and per kind of record what
    replay did with it. A clean restart reports zero records replayed."""

    index_rebuilt: bool = False
    entries_rebuilt: int = 0
    start_mark: LogMark = ZERO_MARK
    end_mark: LogMark = ZERO_MARK
    records_replayed: int = 0
    keys_set: int = 0
    fences_set: int = 0
    entries_re_added: int = 0
    entries_present: int = 0
    skipped_deleted: int = 0
    skipped_unknown: int = 0
    ignored: int = 0


def _log_info(
    log_id: EntryLogId, state: str, sizes: tuple[tuple[LedgerId, int], ...]
) -> EntryLogInfo:
    return EntryLogInfo(log_id, state, tuple(lid for lid, _ in sizes), sizes)


# --- replay decisions (pure) ---------------------------------------------------------------


class ReplayAction(enum.Enum):
    """What replay does with one journal record."""

    SET_KEY = "set the ledger's key"
    KEEP_KEY = "key already known (the first key sticks)"
    FENCE = "fence the ledger"
    RE_ADD = "append the entry again and index it"
    PRESENT = "the entry is indexed and reads back the same: nothing to do"
    SKIP_DELETED = "the ledger was deleted: skip"
    SKIP_UNKNOWN = "an entry of a ledger with no key and no index entry: skip (as BookKeeper)"
    SKIP_BAD_ID = "a negative ledger id (junk that parsed as a record): skip"
    IGNORE_LAC = "explicit LAC: not kept by bkref"


def replay_action(
    kind: str,
    ledger_id: int,
    deleted: bool,
    known: bool,
    known_key: bytes | None,
    entry_present: bool,
) -> ReplayAction:
    """The decision for one record, from the ledger's state (BookieImpl.readJournal's
    scanner, with the choices listed in the module docstring). ``known``: the index has the
    ledger (a key, a fence or an entry); ``entry_present``: the index has the entry and it
    reads back with the record's bytes."""
    assert kind in ("data", "key", "fence", "lac"), kind
    assert known or known_key is None
    assert known or not entry_present
    if ledger_id < 0:
        return ReplayAction.SKIP_BAD_ID
    if deleted:
        return ReplayAction.SKIP_DELETED
    if kind == "key":
        return ReplayAction.SET_KEY if known_key is None else ReplayAction.KEEP_KEY
    if kind == "fence":
        return ReplayAction.FENCE
    if kind == "lac":
        return ReplayAction.IGNORE_LAC
    if not known:
        return ReplayAction.SKIP_UNKNOWN
    return ReplayAction.PRESENT if entry_present else ReplayAction.RE_ADD


def _write_failed(
    ledger_id: LedgerId, entry_id: EntryId, exc: NoWritableLedgerDir | FsError
) -> BookieError:
    """The typed error for an entry the entry log refused (nothing of it was written)."""
    if isinstance(exc, NoWritableLedgerDir):
        return NoSpace(str(exc))
    return BookieIOError(
        f"writing entry {entry_id} of ledger {ledger_id} to the entry log failed: {exc}. "
        "The add was not acknowledged; check the disk and retry."
    )


def _where(record: JournalRecord) -> str:
    """Where a record lies, for messages."""
    return f"journal {journal_file_name(record.journal_id)} offset {record.offset}"


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
        last_mark: LogMark,
    ) -> None:
        """Internal: use :meth:`open`, which recovers before the bookie takes requests."""
        self._fs = fs
        self._config = config
        self._max_entry_bytes = config.max_sane_entry_size_bytes
        self._layout = layout
        self._entry_logger = entry_logger
        self._index = index
        self._journal: Journal | None = None
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        #: Guards ``_callback_errors`` (appended from the journal thread).
        self._errors_lock = threading.Lock()
        #: Every Ack handed out and maybe not yet done, guarded by ``_lock`` (adds hold it
        #: anyway); completed ones are pruned lazily (PENDING_PRUNE_MIN), so completing an
        #: Ack touches nothing of the bookie.
        self._pending: list[Ack] = []
        self._pending_prune_at = PENDING_PRUNE_MIN
        self._fence_acks: dict[LedgerId, Ack] = {}
        self._last_mark = last_mark
        self._recovery = RecoveryReport(start_mark=last_mark, end_mark=last_mark)
        self._old_log_ledgers: dict[EntryLogId, tuple[tuple[LedgerId, int], ...]] = {}
        self._old_infos: dict[EntryLogId, EntryLogInfo] | None = None
        self._flushed_infos: dict[EntryLogId, EntryLogInfo] = {}
        self._replay_counts: dict[ReplayAction, int] = {}
        self._unknown_noted: set[LedgerId] = set()
        self._failure: BookieError | None = None
        self._callback_errors: list[Exception] = []
        self._on_append: Callable[[], None] | None = None
        # Bound once: the add path uses them for every entry.
        self._sink = self._record_callback_errors
        self._add_record = entry_logger.add_record
        self._closing = False
        self._closed = False

    # --- opening and recovery ----------------------------------------------------------

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        config: ServerConfig,
        *,
        clock: Clock,
        rng: RandomSource,
        progress: Progress | None = None,
    ) -> Bookie:
        """Create the layout if missing, recover (compaction cleanup, index, journal replay,
        checkpoint), open a new journal file, and return a bookie ready for requests. Raises
        ConfigError or RecoveryError with what to do."""
        say = progress or _no_progress
        layout = layout_from_config(config)
        for directory in (layout.journal_dir, *layout.ledger_dirs, layout.index_dir):
            ensure_durable_dir(fs, directory)
        entry_logger = EntryLogger(fs, layout.ledger_dirs, settings_from_config(config), rng)
        bookie: Bookie | None = None
        try:
            bookie = cls._recover(fs, config, layout, entry_logger, say)
            bookie._start_journal(clock)
        except BaseException:
            if bookie is not None:
                bookie._abandon()
            else:
                with contextlib.suppress(Exception):
                    entry_logger.close()
            raise
        bookie.check_invariants()
        return bookie

    @classmethod
    def _recover(
        cls,
        fs: FileSystem,
        config: ServerConfig,
        layout: BookieLayout,
        entry_logger: EntryLogger,
        say: Progress,
    ) -> Bookie:
        """Steps 1-4 of recovery; the journal is opened by the caller (step 5)."""
        sync_previous_run(fs, layout)  # (0)
        cls._cleanup_compaction_leftovers(fs, layout)  # (1)
        index = LedgerIndex.load(fs, layout.index_dir)  # (2)
        rebuilt: int | None = None
        if not index.persisted and entry_logger.log_ids():
            say(f"ledger index not found in {layout.index_dir}: rebuilding it from entry logs")
            stats = rebuild_index(fs, list(layout.ledger_dirs), index, say)
            if stats.logs < PROGRESS_EVERY_LOGS and not stats.failures:
                say(stats.summary())  # rebuild_index prints it itself on large directories
            rebuilt = stats.entries_indexed
        mark = read_last_mark(fs, list(layout.ledger_dirs))  # (3)
        bookie = cls(fs, config, layout, entry_logger, index, mark)
        try:
            end = bookie._replay(mark, say)
            bookie._recovery = attrs.evolve(
                bookie._recovery,
                index_rebuilt=rebuilt is not None,
                entries_rebuilt=rebuilt or 0,
                end_mark=end,
            )
            # (4) BookKeeper #2087: replay must advance the mark, or the next restart replays
            # (and re-adds) the same records again. No trim here, as in BookieImpl's
            # post-replay flush (checkpointComplete with compact=false).
            bookie._checkpoint_to(end, recovering=True)
        except BaseException:
            bookie._abandon()
            raise
        return bookie

    @staticmethod
    def _cleanup_compaction_leftovers(fs: FileSystem, layout: BookieLayout) -> None:
        """Recovery step 1, a hook for the compaction issue: remove ``.compacting`` files and
        finish or undo interrupted compactions. Nothing to do while bkref does not compact."""
        del fs, layout

    def _replay(self, mark: LogMark, say: Progress) -> LogMark:
        """Replay the journal from ``mark``; return where replay ended (the end of the last
        journal scanned), which the recovery checkpoint persists."""
        records = replay(
            self._fs,
            self._layout.journal_dir,
            mark,
            skip_invalid=self._config.skip_replay_journal_invalid_record,
            max_record_bytes=self._config.netty_max_frame_size_bytes,
            progress=say,
        )
        for record in records:
            self._apply_record(record, say)
        end = records.end_mark
        assert end >= mark, (end, mark)
        counts = self._replay_counts
        self._recovery = attrs.evolve(
            self._recovery,
            records_replayed=sum(counts.values()),
            keys_set=counts.get(ReplayAction.SET_KEY, 0),
            fences_set=counts.get(ReplayAction.FENCE, 0),
            entries_re_added=counts.get(ReplayAction.RE_ADD, 0),
            entries_present=counts.get(ReplayAction.PRESENT, 0),
            skipped_deleted=counts.get(ReplayAction.SKIP_DELETED, 0),
            skipped_unknown=counts.get(ReplayAction.SKIP_UNKNOWN, 0)
            + counts.get(ReplayAction.SKIP_BAD_ID, 0),
            ignored=counts.get(ReplayAction.KEEP_KEY, 0) + counts.get(ReplayAction.IGNORE_LAC, 0),
        )
        if self._recovery.records_replayed:
            say(f"replayed {self._recovery.records_replayed} journal records up to {end}")
        return end

    def _apply_record(self, record: JournalRecord, say: Progress) -> None:
        ledger_id = LedgerId(record.ledger_id)
        index = self._index
        if (
            record.kind == "data"
            and index.has_ledger(ledger_id)
            and index.get_location(ledger_id, EntryId(record.entry_id)) is None
        ):
            # replay_action's common case, inlined for replay speed: a known ledger (so not
            # deleted and a valid id) and an entry the index does not have -> RE_ADD.
            self._replay_add(record)
            self._replay_counts[ReplayAction.RE_ADD] = (
                self._replay_counts.get(ReplayAction.RE_ADD, 0) + 1
            )
            return
        present = record.kind == "data" and self._entry_reads_back(record)
        action = replay_action(
            record.kind,
            ledger_id,
            self._index.is_deleted(ledger_id),
            self._index.has_ledger(ledger_id),
            self._key_of(ledger_id),
            present,
        )
        if action is ReplayAction.RE_ADD:
            self._replay_add(record)
        elif action is ReplayAction.SET_KEY:
            self._replay_key(record)
        elif action is ReplayAction.FENCE:
            self._index.set_fenced(ledger_id)
        elif action is ReplayAction.KEEP_KEY and self._key_of(ledger_id) != record.payload:
            say(f"{_where(record)}: a second, different key for ledger {ledger_id} is ignored")
        elif action is ReplayAction.SKIP_BAD_ID:
            say(f"{_where(record)}: skipped a {record.kind} record of ledger id {ledger_id}")
        elif action is ReplayAction.SKIP_UNKNOWN and ledger_id not in self._unknown_noted:
            self._unknown_noted.add(ledger_id)
            say(
                f"{_where(record)}: skipping the entries of ledger {ledger_id}: no key record "
                "and not in the index (BookKeeper skips them too, as a deleted ledger's)"
            )
        self._replay_counts[action] = self._replay_counts.get(action, 0) + 1

    def _replay_key(self, record: JournalRecord) -> None:
        if len(record.payload) > MASTER_KEY_MAX_BYTES:
            raise RecoveryError(
                f"{_where(record)}: the key record of ledger {record.ledger_id} holds a key of "
                f"{len(record.payload)} bytes, more than any bookie accepts "
                f"({MASTER_KEY_MAX_BYTES}): the journal is damaged. Restore it from a copy."
            )
        self._index.set_master_key(LedgerId(record.ledger_id), record.payload)

    def _entry_reads_back(self, record: JournalRecord) -> bool:
        """The index has the record's entry and its bytes in the entry log are the record's."""
        ledger_id, entry_id = LedgerId(record.ledger_id), EntryId(record.entry_id)
        location = self._index.get_location(ledger_id, entry_id)
        if location is None:
            return False
        try:
            stored = self._entry_logger.read_entry(ledger_id, entry_id, location)
        except EntryLogError:
            return False
        return stored == record.payload

    def _replay_add(self, record: JournalRecord) -> None:
        ledger_id, entry_id = LedgerId(record.ledger_id), EntryId(record.entry_id)
        try:
            location = self._entry_logger.add_entry(ledger_id, record.payload)
        except NoWritableLedgerDir as exc:
            raise RecoveryError(
                f"cannot replay entry {entry_id} of ledger {ledger_id} from journal "
                f"{journal_file_name(record.journal_id)}: {exc}"
            ) from exc
        except FsError as exc:
            raise RecoveryError(
                f"cannot replay entry {entry_id} of ledger {ledger_id} from journal "
                f"{journal_file_name(record.journal_id)}: {exc}. Check the disk, then start "
                "again: replay is idempotent."
            ) from exc
        self._index.put_entry(ledger_id, entry_id, location)

    def _start_journal(self, clock: Clock) -> None:
        """Recovery step 5: a new journal file at every start (Journal.java)."""
        settings = journal_settings_from_config(self._config)
        journal = Journal(self._fs, self._layout.journal_dir, settings, clock)
        journal.open_new_file()
        assert journal.durable_mark() >= self._last_mark, (journal.durable_mark(), self._last_mark)
        self._journal = journal

    def _abandon(self) -> None:
        """Release what an open that failed half-way holds (its errors are swallowed: the
        error that made the open fail is the one to report)."""
        with contextlib.suppress(Exception):
            if self._journal is not None:
                self._journal.close()
        with contextlib.suppress(Exception):
            self._entry_logger.close()
        self._closed = True

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
        if len(master_key) > MASTER_KEY_MAX_BYTES:
            self._check_master_key(master_key)
        if MIN_SANE_ENTRY_SIZE + len(data) > self._max_entry_bytes:
            raise self._too_large(ledger_id, entry_id, MIN_SANE_ENTRY_SIZE + len(data))
        # One record for both: the entry log's record and the journal's data record are the
        # same bytes (int32 length + ledger id + entry id + data).
        record = encode_entry_record(ledger_id, entry_id, data)
        ack = Ack(self._sink)
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
                raise _write_failed(ledger_id, entry_id, exc) from exc
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
        unknown or deleted ledger records the tombstone too (idempotent)."""
        self._check_id("ledger", ledger_id)
        with self._lock:
            self._require_ready()
            try:
                self._index.delete_ledger(ledger_id)
            except FsError as exc:
                raise BookieIOError(
                    f"deleting ledger {ledger_id} failed: {exc}. It is not deleted; retry."
                ) from exc
            self._fence_acks.pop(ledger_id, None)
            assert self._index.is_deleted(ledger_id)

    # --- request helpers --------------------------------------------------------------

    @staticmethod
    def _check_id(what: str, value: int) -> None:
        if not 0 <= value <= INT64_MAX:
            raise BadRequest(f"{what} id {value} is out of range: ids are 0 .. 2^63-1")

    @staticmethod
    def _check_master_key(master_key: bytes) -> None:
        if len(master_key) > MASTER_KEY_MAX_BYTES:
            raise BadRequest(
                f"the master key is {len(master_key)} bytes, above the maximum "
                f"{MASTER_KEY_MAX_BYTES} (BookKeeper's keys are 20-byte digests)"
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

    def _track(self, ack: Ack) -> None:
        """Remember an Ack until it is done (under ``_lock``), so that ``fail`` and
        ``shutdown`` can fail it; completed Acks are dropped in amortised batches."""
        pending = self._pending
        pending.append(ack)
        if len(pending) >= self._pending_prune_at:
            kept = [other for other in pending if not other.done]
            self._pending = kept
            self._pending_prune_at = max(PENDING_PRUNE_MIN, 2 * len(kept))

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
        journal = self._journal
        if journal is None or self._closed:
            return 0
        try:
            return journal.flush(defer_callbacks=defer_acks)
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
        """Capture the journal's durable mark, force the entry logs, flush the index, persist
        lastMark, trim old journals (SyncThread.checkpoint + Journal.checkpointComplete).
        Returns the persisted mark."""
        journal = self._journal
        self._require_open()
        assert journal is not None, "open() starts the journal"
        with self._checkpoint_lock:
            self._require_open()
            if self._failure is not None:
                # After a failed fsync the page cache may hold bytes that never reach the
                # disk: flushing the index or lastMark now could make them point at data
                # that is gone (found by the refinement test). Only a restart goes on.
                raise BookieIOError(
                    f"no checkpoint after a failure ({self._failure}); restart the bookie"
                )
            # Capture first: every record before the mark was applied to the entry logger
            # and the index before it was appended (both under the state lock), so flushing
            # them afterwards covers everything the mark will claim.
            mark = journal.durable_mark()
            try:
                self._checkpoint_to(mark, recovering=False)
            except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
                raise self._step_failed("the checkpoint", exc) from exc
        return mark

    def _step_failed(self, step: str, exc: Exception) -> BookieError:
        """The typed error for a background step the disk failed. Out of space: nothing was
        applied, the step can be retried (NoSpace). Anything else, a failed fsync above all,
        may have lost data the bookie counted on: the bookie fails (refuses writes until a
        restart replays the journal from the last good lastMark), as BookKeeper does."""
        if isinstance(exc, (NoWritableLedgerDir, FsNoSpace)):
            return NoSpace(f"{step} found no room: {exc}. Free space; nothing was lost.")
        self.fail(exc)
        return BookieIOError(
            f"{step} failed: {exc}. The bookie refuses writes now; restart it after checking "
            "the disk (recovery replays the journal)."
        )

    def _checkpoint_to(self, mark: LogMark, *, recovering: bool) -> None:
        """The checkpoint's steps after the capture. ``recovering``: the post-replay
        checkpoint, which always writes lastMark (a ledger directory may lack the file) and
        trims nothing (the journal is not open yet)."""
        assert mark >= self._last_mark, f"lastMark would move back: {self._last_mark} -> {mark}"
        with self._lock:
            # Entry logs first: the index must never name bytes that are not durable. flush
            # forces the active log and the rotated ones (SyncThread.flush in single-log mode).
            self._entry_logger.flush()
            # Then the index: crash-consistent on its own (spec/format/ledger_index.md); it
            # now holds every key, fence and location of the records before the mark.
            self._index.flush()
        # Only now may the journal before the mark be forgotten: persist the mark in every
        # ledger directory (the largest wins at start, so it never moves back) ...
        if recovering or mark != self._last_mark:
            write_last_mark(self._fs, list(self._layout.ledger_dirs), mark)
        self._last_mark = mark
        # ... and delete the journals wholly before it, keeping journalMaxBackups.
        if not recovering:
            assert self._journal is not None
            self._journal.trim(mark)

    def rotate_log(self) -> EntryLogId:
        """Seal the active entry log and start a new one (EntryLogger.rotate); returns the
        new log's id. Raises NoSpace when no ledger directory has room for a new log."""
        with self._lock:
            self._require_ready()
            try:
                return self._entry_logger.rotate()
            except (FsError, NoWritableLedgerDir, EntryLogError) as exc:
                raise self._step_failed("rotating the entry log", exc) from exc

    def preallocate(self) -> EntryLogId | None:
        """Create the next entry log ahead of need (entryLogFilePreallocationEnabled)."""
        with self._lock:
            self._require_open()
            return self._entry_logger.preallocate()

    def check_dirs(self) -> None:
        """Measure the ledger directories; a full one makes the next add rotate off it."""
        with self._lock:
            self._require_open()
            self._entry_logger.check_dirs()

    def fail(self, error: BaseException) -> None:
        """A background step failed: fail every pending Ack with BookieIOError and refuse
        writes from now on (BookKeeper shuts the bookie down when its journal dies)."""
        failure = BookieIOError(
            f"a background step failed: {error}. Writes that were not acknowledged are not "
            "durable; restart the bookie after checking the disk."
        )
        with self._lock:
            if self._failure is None:
                self._failure = failure
        self._fail_pending(failure)

    def _fail_pending(self, failure: BookieError) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            self._pending_prune_at = PENDING_PRUNE_MIN
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
                with self._checkpoint_lock:
                    self._checkpoint_to(journal.durable_mark(), recovering=False)
        finally:
            try:
                # Not under _lock: close flushes what is still queued, and Ack callbacks run
                # then (a callback may read from the bookie).
                journal.close()
            finally:
                with self._lock:
                    self._closed = True
                    self._entry_logger.close()
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
    def recovery(self) -> RecoveryReport:
        """What the last open replayed (a clean restart replays nothing)."""
        return self._recovery

    @property
    def last_mark(self) -> LogMark:
        """The lastMark this bookie last persisted (or read at start)."""
        return self._last_mark

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
            return sum(1 for ack in self._pending if not ack.done)

    def inspect(self) -> BookieState:
        """The abstract state (see BookieState)."""
        with self._lock:
            journal = self._journal
            journal_mark = journal.durable_mark() if journal is not None else self._last_mark
            logger = self._entry_logger.state()
            ledgers = tuple(self._ledger_info(LedgerId(lid)) for lid in self._index.ledgers())
            return BookieState(
                entry_logs=self._entry_log_infos(),
                least_unflushed_log_id=logger.least_unflushed_log_id,
                last_mark=self._last_mark,
                journal_mark=journal_mark,
                current_log_id=logger.current_log_id,
                ledgers=ledgers,
                fenced_ledgers=tuple(info.ledger_id for info in ledgers if info.fenced),
                deleted_ledgers=tuple(sorted(self._index.deleted_ledgers())),
                compaction_files=(),
            )

    def _ledger_info(self, ledger_id: LedgerId) -> LedgerInfo:
        last = self._index.last_entry(ledger_id)
        return LedgerInfo(ledger_id, last, self._index.is_fenced(ledger_id))

    def _entry_log_infos(self) -> tuple[EntryLogInfo, ...]:
        """Logs of this run as the manager describes them; logs of earlier runs (on disk,
        no longer written) as flushed, with their ledgers from the map or a scan. Both the
        earlier runs' logs and this run's flushed ones never change: their infos are cached
        (the refinement harness inspects after every step)."""
        descs = self._entry_logger.state().logs
        if self._old_infos is None:
            run_ids = {desc.log_id for desc in descs}
            self._old_infos = {
                log_id: _log_info(log_id, "flushed", self._old_ledgers(log_id))
                for log_id in self._entry_logger.log_ids()
                if log_id not in run_ids
            }
        infos = dict(self._old_infos)
        for desc in descs:
            info = self._flushed_infos.get(desc.log_id)
            if info is None:
                sizes = tuple((LedgerId(lid), size) for lid, size in desc.ledgers)
                info = _log_info(desc.log_id, desc.state.value, sizes)
                if desc.state is LogState.FLUSHED:
                    self._flushed_infos[desc.log_id] = info
            infos[desc.log_id] = info
        return tuple(infos[log_id] for log_id in sorted(infos))

    def _old_ledgers(self, log_id: EntryLogId) -> tuple[tuple[LedgerId, int], ...]:
        cached = self._old_log_ledgers.get(log_id)
        if cached is None:
            try:
                metadata = self._entry_logger.extract_metadata(log_id).metadata
                cached = tuple(
                    (LedgerId(lid), size) for lid, size in sorted(metadata.ledgers.items())
                )
            except EntryLogError:
                cached = ()  # an empty preallocated file of an earlier run holds nothing
            self._old_log_ledgers[log_id] = cached
        return cached

    def check_invariants(self) -> None:
        with self._lock:
            self._entry_logger.check_invariants()
            self._index.check_invariants()
            assert self._last_mark >= self._recovery.start_mark
            assert self._recovery.end_mark >= self._recovery.start_mark
            if self._journal is not None and not self._closed:
                assert self._journal.durable_mark() >= self._last_mark
            for ledger_id in self._fence_acks:
                assert self._index.is_fenced(ledger_id), ledger_id
            for ledger_id in self._index.ledgers():
                assert not self._index.is_deleted(LedgerId(ledger_id)), ledger_id
            assert len(self._pending) < self._pending_prune_at
            if self._closed:
                assert all(ack.done for ack in self._pending)
