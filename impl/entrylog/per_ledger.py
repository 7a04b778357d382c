"""The entry-log manager with an active log per ledger (entryLogPerLedgerEnabled=true).

Spec page: spec/format/entry_log.md ("The ledgers map", "Rules every entry-log manager
keeps"). BookKeeper sources: EntryLogManagerForEntryLogPerLedger, EntryLogManagerBase
(addEntry, createNewLog) and the Guava cache behind its ``ledgerIdEntryLogMap``
(CacheBuilder.expireAfterAccess, maximumSize).

Each ledger has at most one current (active) log, holding that ledger's records only. The
first add of a ledger creates its log, with the next id of the shared counter (registered in
RecentEntryLogsStatus like any log), in the writable ledger directory that holds the fewest
current logs (getDirForNextEntryLog; ties go to the first in configuration order, where Java
takes hash order); no writable directory raises NoWritableLedgerDir. Before an add the
ledger's log is sealed (its ledgers map appended and the header pointed at it, exactly as the
single manager seals: impl/entrylog/manager.py) and replaced by a new one when
``position + record size > logSizeLimit``, or when the disk listener reported its directory
full while some directory is writable (a log whose directory filled up moves to a writable
one at its ledger's next add; when every directory is full the ledgers go on appending where
they are, as Java does: "Bookie must have turned to readonly mode"). With flushEntrylogBytes >
0 such a rotation first forces the old log (flushAndForceWriteIfRegularFlush).

Eviction (the Guava cache). The clock is injected (impl/clock.py, its monotonic reading). A
ledger whose log took no add for ``entrylogMapAccessExpiryTimeInSeconds`` is evicted at the
next add of any ledger, or at the next checkpoint: its log is sealed and joins the rotated
list, and the ledger gets a new log only at its next add (onCacheEntryRemoval). Expiry is
Guava's ``now - last access >= expiry``, so with 0 every add finds its ledger's log expired
and starts a new one. When a new ledger's log would make more than
``maximumNumberOfActiveEntryLogs`` current logs, the least recently added-to ledger's log is
evicted first, the same way. Only adds count as accesses (Java: every look-up of the ledger
in the cache, which are its adds, createNewLog and getCurrentLogForLedger; bkref has only the
adds: reads and flushes use the log-id map, as Java's replicaOfCurrentLogChannels).

``rotate`` seals every current log with no replacement (each ledger's next add starts a new
one) and returns the highest id sealed, None when no ledger had a log. ``checkpoint`` and
``flush`` are one step, as in Java (its per-ledger ``checkpoint`` is ``flush``): evict the
expired ledgers, seal the logs of the ledgers write-closed since the last one (BP-32, which
BookKeeper never built: spec/protocol/write_close.md), force every current log (data and
metadata), then fsync, close and mark flushed the rotated ones; leastUnflushedLogId then
stays at the smallest log that is current or rotated. ``close`` forces everything and
releases the handles; it evicts nothing and writes no ledgers map.

``current_log_id``: the id of the current log most recently added to (the abstract state's
``current_log_id`` in this mode; None before the first add and once no ledger has a log).
Each ledger's own current log is :meth:`PerLedgerEntryLogManager.log_for_ledger`.

Deviations from BookKeeper, besides the single manager's (fsync of the directory after
creating a log, the directory chosen before the old log is sealed, resumable sealing, the
ENOSPC mapping: impl/entrylog/manager.py), each on purpose:

- No preallocation: ``preallocate`` does nothing and returns None, whatever
  entryLogFilePreallocationEnabled says (Java preallocates one log ahead in this mode too).
- An eviction that cannot seal its log (no space for the map) fails the add or checkpoint
  that triggered it with NoWritableLedgerDir, nothing of that add written; the log stays its
  ledger's current log (taking no entry once its map is accepted) and the eviction is tried
  again at the next add or checkpoint. Java logs the error and moves the log, unsealed, to
  the rotated list.
- Expired ledgers are evicted at every add and checkpoint, deterministically; Guava evicts
  "on occasional cache accesses" and the checkpoint does not look at the cache.
- Only a full directory moves a log away (Java's diskFull); almost full does nothing in this
  mode (Java's diskAlmostFull and diskJustWritable are no-ops here), and a directory that
  becomes writable again clears the request of the logs in it (diskWritable).
- Compaction logs are allocated as in single mode (impl/entrylog/compactor.py copies
  transactionally); Java's per-ledger manager refuses createNewLogForCompaction and requires
  the in-place compactor.

Not verified here: concurrency (bkref calls the manager under the bookie's state lock;
Java's per-ledger locks are not needed) and the per-ledger statistics counters.
"""

from __future__ import annotations

import collections
import functools

from impl.clock import Clock
from impl.entrylog.buffered_channel import BufferedChannel
from impl.entrylog.ids import LogIdAllocator, RecentEntryLogsStatus
from impl.entrylog.ledger_dirs import DirState, LedgerDirs
from impl.entrylog.manager import (
    _RECORD_HEAD,
    EVICTED_AT_MOST_ACTIVE,
    EVICTED_ON_EXPIRY,
    MOVED_OFF_FULL_DIR,
    NS_PER_S,
    SEALED_WRITE_CLOSED,
    EntryLogManagerBase,
    LogChannel,
    LogDescription,
    LogState,
    no_space_message,
)
from impl.format.entry_log import (
    LEDGERS_MAP_MAX_BATCH_SIZE,
    MIN_SANE_ENTRY_SIZE,
    RECORD_SIZE_PREFIX,
    decode_ids,
)
from impl.fs.api import FileSystem
from spec.errors import FsNoSpace, NoWritableLedgerDir
from spec.ids import LOCATION_OFFSET_END, EntryLogId, LedgerId, Location


class CurrentLog:
    """One ledger's entry in the cache (EntryLogAndLockTuple + BufferedLogChannelWithDirInfo):
    its current log, when an add last touched it, and whether the disk listener reported the
    log's directory full since the log was created."""

    __slots__ = ("dir_full", "last_access_ns", "ledger_id", "log")

    def __init__(self, ledger_id: int, log: LogChannel, last_access_ns: int) -> None:
        self.ledger_id = ledger_id
        self.log = log
        self.last_access_ns = last_access_ns
        self.dir_full = False


class PerLedgerEntryLogManager(EntryLogManagerBase):
    """EntryLogManagerForEntryLogPerLedger with its allocator, as explicit steps.

    ``clock`` times the cache's expiry (its monotonic reading); ``expiry_s`` is
    entrylogMapAccessExpiryTimeInSeconds and ``max_active`` maximumNumberOfActiveEntryLogs.
    """

    def __init__(
        self,
        fs: FileSystem,
        ledger_dirs: LedgerDirs,
        allocator: LogIdAllocator,
        status: RecentEntryLogsStatus,
        clock: Clock,
        *,
        log_size_limit_bytes: int,
        write_buffer_bytes: int,
        flush_entrylog_bytes: int,
        expiry_s: int,
        max_active: int,
        map_batch_max: int = LEDGERS_MAP_MAX_BATCH_SIZE,
    ) -> None:
        assert expiry_s >= 0, expiry_s
        assert max_active >= 1, max_active
        self._clock = clock
        self._expiry_ns = expiry_s * NS_PER_S
        self._max_active = max_active
        #: Ledger id -> its current log, least recently added-to first (the cache's order).
        self._current: collections.OrderedDict[int, CurrentLog] = collections.OrderedDict()
        #: Log id -> the same entries (replicaOfCurrentLogChannels): reads and flushes use it.
        self._by_log: dict[int, CurrentLog] = {}
        #: The ledgers write-closed since the last checkpoint (spec/protocol/write_close.md):
        #: their logs are sealed at the next one.
        self._write_closed: set[int] = set()
        super().__init__(
            fs,
            ledger_dirs,
            allocator,
            status,
            log_size_limit_bytes=log_size_limit_bytes,
            write_buffer_bytes=write_buffer_bytes,
            flush_entrylog_bytes=flush_entrylog_bytes,
            map_batch_max=map_batch_max,
        )

    # --- observation -------------------------------------------------------------------

    @property
    def current_log_id(self) -> EntryLogId | None:
        """The id of the current log most recently added to: what the abstract state shows
        as ``current_log_id`` in per-ledger mode. None before the first add, and when no
        ledger has a current log (after ``rotate`` or once every ledger was evicted)."""
        if not self._current:
            return None
        return next(reversed(self._current.values())).log.log_id

    @property
    def rotate_requested(self) -> bool:
        """The disk listener reported the directory of some current log full: that ledger's
        next add moves it to a writable directory (if there is one)."""
        return any(current.dir_full for current in self._current.values())

    def active(self) -> LogChannel | None:
        """The log of ``current_log_id``."""
        if not self._current:
            return None
        return next(reversed(self._current.values())).log

    def actives(self) -> tuple[LogChannel, ...]:
        """Every current log, by id (getCopyOfCurrentLogs)."""
        return tuple(sorted((c.log for c in self._current.values()), key=lambda log: log.log_id))

    def log_for_ledger(self, ledger_id: int) -> LogChannel | None:
        """The ledger's current log (getCurrentLogForLedger), without touching its access
        time."""
        current = self._current.get(ledger_id)
        return None if current is None else current.log

    @property
    def write_closed(self) -> frozenset[int]:
        """The ledgers write-closed since the last checkpoint that sealed their logs."""
        return frozenset(self._write_closed)

    def ledgers_by_access(self) -> tuple[int, ...]:
        """The ledgers with a current log, least recently added-to first."""
        return tuple(self._current)

    def preallocated(self) -> LogChannel | None:
        """Never any: this manager does not preallocate."""
        return None

    def channel_for(self, log_id: int) -> BufferedChannel | None:
        """The channel of a current log (getCurrentLogIfPresent): reads of a current log must
        see its write buffer. None for any other log."""
        current = self._by_log.get(log_id)
        return None if current is None else current.log.channel

    def describe(self) -> list[LogDescription]:
        """Every log of this run, by id: flushed, rotated, and each ledger's current log."""
        out = list(self._flushed.values())
        out += [log.describe(LogState.ROTATED) for log in self._rotated]
        out += [current.log.describe(LogState.ACTIVE) for current in self._current.values()]
        return sorted(out, key=lambda d: d.log_id)

    # --- adding ------------------------------------------------------------------------

    def add_record(self, ledger_id: LedgerId, record: bytes) -> Location:
        """Append one encoded record (``encode_record``: int32 size + a payload beginning
        with ``ledger_id`` and the entry id) to the ledger's current log and return its
        location. Expired ledgers are evicted first; the ledger's log is created or rotated
        when needed (module docstring). Raises NoWritableLedgerDir when the record cannot be
        written for lack of space (nothing of it is then written)."""
        assert not self._closed, "the entry log manager is closed"
        record_bytes = len(record)
        assert record_bytes >= RECORD_SIZE_PREFIX + MIN_SANE_ENTRY_SIZE, record_bytes
        size, found = _RECORD_HEAD.unpack_from(record, 0)
        assert size == record_bytes - RECORD_SIZE_PREFIX, (size, record_bytes)
        assert found == ledger_id, f"record of ledger {found} added to ledger {ledger_id}"
        assert ledger_id >= 0, f"ledger id {ledger_id} is reserved"
        now = self._clock.monotonic_ns()
        self._evict_expired(now)
        current = self._current.get(ledger_id)
        if (
            current is None
            or current.log.map_offset is not None
            or current.log.channel.position + record_bytes > self._log_size_limit_bytes
            or (current.dir_full and self._ledger_dirs.writable_dirs())
        ):
            current = self._log_for_add(ledger_id, current, now)
        log = current.log
        channel = log.channel
        offset = channel.position + RECORD_SIZE_PREFIX
        try:
            channel.write_record(record)
        except FsNoSpace as exc:
            entry_id = decode_ids(record[RECORD_SIZE_PREFIX:])[1]
            action = f"writing entry {entry_id} of ledger {ledger_id}"
            self._ledger_dirs.mark_full(log.directory)
            raise NoWritableLedgerDir(no_space_message(log.directory, log.path, action)) from exc
        log.register(ledger_id, record_bytes)
        assert channel.position == offset + size, (channel.position, offset, size)
        assert offset < LOCATION_OFFSET_END, offset
        current.last_access_ns = now
        self._current.move_to_end(ledger_id)
        return Location((log.log_id << 32) | offset)

    def _log_for_add(self, ledger_id: int, current: CurrentLog | None, now: int) -> CurrentLog:
        """getCurrentLogForLedgerForAddEntry: the ledger's first log, or its next one."""
        if current is None:
            # Refuse before evicting anything: a new log needs a writable directory.
            self._dir_for_new_log()
            while len(self._current) >= self._max_active:
                self._evict(next(iter(self._current.values())))  # the cache's maximumSize
                self.events[EVICTED_AT_MOST_ACTIVE] += 1
            log = self._allocate(self._dir_for_new_log())
            current = CurrentLog(ledger_id, log, now)
            self._current[ledger_id] = current
            self._by_log[log.log_id] = current
            return current
        directory = self._dir_for_new_log()  # before the seal: no directory, nothing changes
        old = current.log
        if self._flush_entrylog_bytes > 0:
            # flushAndForceWriteIfRegularFlush before a rotation from an add.
            self._guard(old, "forcing", lambda: old.channel.flush_and_force(False))
        self._seal(old)
        if current.dir_full:
            self.events[MOVED_OFF_FULL_DIR] += 1
        new = self._allocate(directory)
        del self._by_log[old.log_id]
        current.log = new
        current.dir_full = False
        self._by_log[new.log_id] = current
        self._rotated.append(old)
        return current

    def _dir_for_new_log(self) -> str:
        """getDirForNextEntryLog: the writable directory holding the fewest current logs, the
        first in configuration order among equals. Raises NoWritableLedgerDir."""
        writable = self._ledger_dirs.writable_dirs()
        if not writable:
            raise NoWritableLedgerDir(self._ledger_dirs.describe_no_writable_dir())
        counts = dict.fromkeys(writable, 0)
        for current in self._current.values():
            directory = current.log.directory
            if directory in counts:
                counts[directory] += 1
        return min(writable, key=counts.__getitem__)

    # --- eviction and rotation ---------------------------------------------------------

    def _evict_expired(self, now: int) -> None:
        """Evict, least recently added-to first, every ledger whose log took no add for the
        expiry time (expireAfterAccess)."""
        while self._current:
            oldest = next(iter(self._current.values()))
            if now - oldest.last_access_ns < self._expiry_ns:
                return
            self._evict(oldest)
            self.events[EVICTED_ON_EXPIRY] += 1

    def _evict(self, current: CurrentLog) -> None:
        """onCacheEntryRemoval: seal the ledger's log and move it to the rotated list; the
        ledger has no current log until its next add. A seal that fails leaves it current
        (the seal resumes at the next try)."""
        self._seal(current.log)
        del self._current[current.ledger_id]
        del self._by_log[current.log.log_id]
        self._rotated.append(current.log)

    def rotate(self) -> EntryLogId | None:
        """Seal every current log, by id, with no replacement: each ledger's next add starts
        a new log. Returns the highest id sealed, None when no ledger had a log."""
        self._require_open()
        highest: EntryLogId | None = None
        for current in sorted(self._current.values(), key=lambda c: c.log.log_id):
            self._evict(current)
            highest = current.log.log_id
        return highest

    def write_close(self, ledger_id: int) -> None:
        """Remember that ``ledger_id`` is write-closed (BP-32): the next checkpoint seals its
        current log, if it has one, before forcing anything (spec/protocol/write_close.md).
        Adds to it are still taken meanwhile (a hint, not a fence)."""
        super().write_close(ledger_id)
        self._write_closed.add(ledger_id)

    def seal_for_checkpoint(self) -> None:
        """A checkpoint's first step: evict every write-closed ledger's current log, by
        ledger id. A seal that finds no room raises, and that ledger and the ones after it
        stay write-closed for the next checkpoint."""
        self._require_open()
        for ledger_id in sorted(self._write_closed):
            current = self._current.get(ledger_id)
            if current is not None:
                self._evict(current)
                self.events[SEALED_WRITE_CLOSED] += 1
            self._write_closed.discard(ledger_id)

    def preallocate(self) -> EntryLogId | None:
        """Nothing: this manager does not preallocate (a deviation from Java, which
        preallocates one log ahead in this mode too). Always None."""
        self._require_open()
        return None

    # --- durability --------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Java's per-ledger checkpoint is ``flush`` (see :meth:`flush`); bkref's seals the
        write-closed ledgers' logs first."""
        self.seal_for_checkpoint()
        self.flush()

    def flush(self) -> None:
        """Evict the expired ledgers, force every current log (data and metadata), then
        fsync, close and mark flushed the rotated logs (flushCurrentLogs + flushRotatedLogs).
        On a failure nothing flushed so far is undone and the rest stays as it was, for a
        retry. The write-closed ledgers' logs are sealed by a checkpoint only
        (:meth:`seal_for_checkpoint`), not by the flush a compaction's index phase runs."""
        self._require_open()
        self._evict_expired(self._clock.monotonic_ns())
        self._force_current()
        self._flush_rotated()

    def _force_current(self) -> None:
        for log in self.actives():
            self._guard(log, "syncing", functools.partial(log.channel.flush_and_force, True))

    def close(self) -> None:
        """Force every log and flush the rotated ones, then release the current logs'
        handles; nothing is evicted and no ledgers map is written. If the flush fails nothing
        is closed, so the caller can retry."""
        if self._closed:
            return
        self._force_current()
        self._flush_rotated()
        for log in self.actives():
            log.channel.close()
        self._closed = True

    # --- disk events -------------------------------------------------------------------

    def _on_dir_state(self, directory: str, state: DirState) -> None:
        """diskFull marks the current logs in ``directory`` to move at their next add;
        diskWritable clears the mark; almost full does nothing in this mode (Java's
        diskAlmostFull and diskJustWritable are no-ops in the per-ledger manager)."""
        if state is DirState.ALMOST_FULL:
            return
        for current in self._current.values():
            if current.log.directory == directory:
                current.dir_full = state is DirState.FULL

    # --- invariants --------------------------------------------------------------------

    def _unflushed_logs(self) -> list[LogChannel]:
        return [*self._rotated, *(current.log for current in self._current.values())]

    def check_invariants(self) -> None:
        super().check_invariants()
        assert len(self._current) <= self._max_active, (len(self._current), self._max_active)
        assert set(self._by_log) == {c.log.log_id for c in self._current.values()}
        last_access = None
        for ledger_id, current in self._current.items():
            assert current.ledger_id == ledger_id
            assert self._by_log[current.log.log_id] is current
            # Each current log holds one ledger's records, and no ledger has two.
            assert set(current.log.ledgers) <= {ledger_id}, (ledger_id, current.log.ledgers)
            assert last_access is None or last_access <= current.last_access_ns
            last_access = current.last_access_ns
        for log in self._rotated:
            assert len(log.ledgers) <= 1, (log.log_id, log.ledgers)
