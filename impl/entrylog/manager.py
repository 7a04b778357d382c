"""The entry-log managers' shared part and the single-active-log manager: where each entry
goes, rotation, checkpoint.

Spec page: spec/format/entry_log.md ("The ledgers map", "Which crash states are possible").
BookKeeper sources: EntryLogManagerBase (addEntry, createNewLog),
EntryLogManagerForSingleEntryLog (rotation triggers, flushRotatedLogs, the disk listener),
EntryLoggerAllocator (allocateNewLog, preallocation) and
DefaultEntryLogger.BufferedLogChannel.appendLedgersMap.

One log is active at a time. It is created lazily by the first add. An add writes the record
``int32 size + payload`` (the payload begins with the ledger id and entry id) and returns the
location ``(log id << 32) | payload offset``. Before an add the active log is rotated when
``position + record size > logSizeLimit``, or when a disk listener reported its directory
full or almost full. Rotation: flush the old log, append its ledgers map as records through
its channel, flush, write the map's offset and ledger count in place into the header; the old
log joins the rotated list; the new log is taken from preallocation or allocated. The map is
written at rotation only, never on close; it lists ledgers in id order (Java: hash order,
which readers must not rely on). With flushEntrylogBytes > 0 a rotation caused by an add first
flushes and forces the old log (flushAndForceWriteIfRegularFlush); an explicit ``rotate`` does
not, as in Java. ``checkpoint`` fsyncs and closes the rotated logs and marks them flushed in
RecentEntryLogsStatus; ``flush`` also forces the active log.

Deviations from BookKeeper, each on purpose:

- After creating a log file we fsync its directory. BookKeeper never does; under a strict
  POSIX crash model (our simulated disk) the log's name, and every entry in it, could vanish
  in a crash even after the log's data was fsynced.
- The directory for the next log is chosen before the old log is sealed, so "no writable
  directory" fails the add with nothing changed (BookKeeper appends the map first and appends
  another one on the retry).
- Sealing is resumable: once the map is accepted no entry goes to that log any more, and a
  retry after a failure finishes the seal without writing a second map.
- A preallocated log whose directory became full is discarded (unlinked, marked flushed: it
  holds no entry) instead of being used; BookKeeper uses it anyway.
- ``preallocate`` is an explicit step, and the preallocated log goes to a directory chosen
  when that step runs (BookKeeper preallocates after every new log, in that log's directory).
- ENOSPC: any write that meets FsNoSpace marks the log's directory full and raises
  spec.errors.NoWritableLedgerDir (the FsNoSpace is its ``__cause__``). The write itself is
  atomic (BufferedChannel.write_record), so nothing already accepted is lost: earlier entries
  stay readable, and once space returns and a disk check sees it, the next add rotates to a
  writable directory. FsIOError and other FsErrors propagate unchanged.

:class:`EntryLogManagerBase` holds what every manager shares (sealing, allocating a log or a
compaction log, flushing the rotated logs, the ENOSPC mapping, the invariants over
RecentEntryLogsStatus); the manager with an active log per ledger
(EntryLogManagerForEntryLogPerLedger) is impl/entrylog/per_ledger.py, built on it with the same
deviations.

Not verified here: recovery from a failed fsync (see impl/entrylog/buffered_channel.py),
``rollLog=false``. Compaction logs are allocated here (``allocate_compaction_log``) and written
by impl/entrylog/compactor.py.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import enum
import functools
import struct
from collections.abc import Callable
from typing import TypeVar

import attrs

from impl.entrylog.buffered_channel import BufferedChannel
from impl.entrylog.ids import LogIdAllocator, RecentEntryLogsStatus
from impl.entrylog.ledger_dirs import DirState, LedgerDirs, RandomSource
from impl.format.entry_log import (
    LEDGERS_MAP_MAX_BATCH_SIZE,
    LEDGERS_MAP_OFFSET_POSITION,
    LOGFILE_HEADER_SIZE,
    MIN_SANE_ENTRY_SIZE,
    RECORD_SIZE_PREFIX,
    decode_ids,
    encode_header,
    encode_ledgers_map,
    encode_map_location,
    encode_record,
)
from impl.format.names import compacting_file_name, log_file_name
from impl.fs.api import FileSystem, join
from spec.errors import FsError, FsNoSpace, NoWritableLedgerDir
from spec.ids import LOCATION_OFFSET_END, EntryLogId, LedgerId, Location

T = TypeVar("T")

#: A record's size prefix and ledger id, checked on every add with one unpack.
_RECORD_HEAD = struct.Struct(">iq")
#: Nanoseconds per second (the managers' expiry times are configured in seconds).
NS_PER_S = 1_000_000_000

#: What a manager with many active logs counts in ``events`` (EntryLogManagerBase): with a
#: log per ledger, a ledger's log evicted (sealed) because it took no add for the access
#: expiry, or to make room under maximumNumberOfActiveEntryLogs, or sealed by a checkpoint
#: after the ledger's write close, or moved off a directory that filled up; with slots, a
#: ledger's slot forgotten on expiry or at the most ledgers mapped, a slot's log sealed by a
#: checkpoint once its ledgers are all write-closed, a full directory's slot retired, an idle
#: slot's log sealed (no ledger mapped to it, no add for the expiry time).
EVICTED_ON_EXPIRY = "a ledger's log evicted on expiry"
EVICTED_AT_MOST_ACTIVE = "a ledger's log evicted at the most active logs"
SEALED_WRITE_CLOSED = "a write-closed ledger's log sealed"
MOVED_OFF_FULL_DIR = "a ledger's log moved off a full directory"
FORGOTTEN_ON_EXPIRY = "a ledger's slot forgotten on expiry"
FORGOTTEN_AT_MOST_MAPPED = "a ledger's slot forgotten at the most mapped"
RETIRED_FULL_DIR = "a full directory's slot retired"
IDLE_SLOT_SEALED = "an idle slot's log sealed"
EVENTS = (
    EVICTED_ON_EXPIRY,
    EVICTED_AT_MOST_ACTIVE,
    SEALED_WRITE_CLOSED,
    MOVED_OFF_FULL_DIR,
    FORGOTTEN_ON_EXPIRY,
    FORGOTTEN_AT_MOST_MAPPED,
    RETIRED_FULL_DIR,
    IDLE_SLOT_SEALED,
)


class LogState(enum.Enum):
    """Where a log of this run is in its life."""

    PREALLOCATED = "preallocated"
    ACTIVE = "active"
    ROTATED = "rotated"
    FLUSHED = "flushed"


@attrs.frozen
class LogDescription:
    """One log as the manager sees it: ledgers with their bytes (size + 4 per record)."""

    log_id: EntryLogId
    directory: str
    state: LogState
    ledgers: tuple[tuple[int, int], ...]


class LogChannel:
    """One entry log being written (DefaultEntryLogger.BufferedLogChannel)."""

    def __init__(
        self, log_id: EntryLogId, directory: str, path: str, channel: BufferedChannel
    ) -> None:
        self.log_id = log_id
        self.directory = directory
        self.path = path
        self.channel = channel
        #: ledger id -> bytes of its records, size prefixes included (EntryLogMetadata).
        self.ledgers: dict[int, int] = {}
        #: Where the ledgers map starts, once it is accepted; no entry goes in after that.
        self.map_offset: int | None = None
        #: The header points at the map (the seal is complete).
        self.sealed = False

    def register(self, ledger_id: int, record_bytes: int) -> None:
        """registerWrittenEntry: count a record against its ledger."""
        assert self.map_offset is None, "entry after the ledgers map"
        self.ledgers[ledger_id] = self.ledgers.get(ledger_id, 0) + record_bytes

    def entry_bytes(self) -> int:
        return sum(self.ledgers.values())

    def describe(self, state: LogState) -> LogDescription:
        return LogDescription(
            log_id=self.log_id,
            directory=self.directory,
            state=state,
            ledgers=tuple(sorted(self.ledgers.items())),
        )


class EntryLogManagerBase(abc.ABC):
    """What every entry-log manager shares (EntryLogManagerBase with the allocator's part):
    the rotated and flushed logs, sealing (the ledgers map), allocating a log or a compaction
    log, checkpointing the rotated logs, and the ENOSPC mapping. The managers differ in which
    log takes an add and when a log is sealed: :class:`SingleEntryLogManager` here,
    ``PerLedgerEntryLogManager`` in impl/entrylog/per_ledger.py."""

    def __init__(
        self,
        fs: FileSystem,
        ledger_dirs: LedgerDirs,
        allocator: LogIdAllocator,
        status: RecentEntryLogsStatus,
        *,
        log_size_limit_bytes: int,
        write_buffer_bytes: int,
        flush_entrylog_bytes: int,
        map_batch_max: int = LEDGERS_MAP_MAX_BATCH_SIZE,
    ) -> None:
        assert log_size_limit_bytes >= 0, log_size_limit_bytes
        assert write_buffer_bytes > 0, write_buffer_bytes
        assert flush_entrylog_bytes >= 0, flush_entrylog_bytes
        self._fs = fs
        self._ledger_dirs = ledger_dirs
        self._allocator = allocator
        self._status = status
        self._log_size_limit_bytes = log_size_limit_bytes
        self._write_buffer_bytes = write_buffer_bytes
        self._flush_entrylog_bytes = flush_entrylog_bytes
        #: Ledgers per record of a ledgers map (Limits.ledgers_map_batch_max).
        self._map_batch_max = map_batch_max
        self._rotated: list[LogChannel] = []
        self._flushed: dict[int, LogDescription] = {}
        self._closed = False
        #: What this manager let go or moved, and why, counted since it opened (the managers
        #: with many active logs: evictions, write closes, full directories; EVENTS).
        self.events: collections.Counter[str] = collections.Counter()
        ledger_dirs.add_listener(self._on_dir_state)

    # --- the interface every manager has -----------------------------------------------

    @property
    @abc.abstractmethod
    def current_log_id(self) -> EntryLogId | None:
        """The log the abstract state calls current (None before the first add)."""

    @property
    @abc.abstractmethod
    def rotate_requested(self) -> bool:
        """A disk listener asked to move an active log off its directory."""

    @abc.abstractmethod
    def active(self) -> LogChannel | None:
        """The current log's channel (the log of ``current_log_id``), if any."""

    @abc.abstractmethod
    def preallocated(self) -> LogChannel | None:
        """The log created ahead of need, if any."""

    @abc.abstractmethod
    def channel_for(self, log_id: int) -> BufferedChannel | None:
        """The channel of an active log (getCurrentLogIfPresent): reads of an active log must
        see its write buffer. None for any other log."""

    @abc.abstractmethod
    def describe(self) -> list[LogDescription]:
        """Every log of this run, by id."""

    @abc.abstractmethod
    def add_record(self, ledger_id: LedgerId, record: bytes) -> Location:
        """Append one encoded record and return its location (see the subclasses)."""

    @abc.abstractmethod
    def rotate(self) -> EntryLogId | None:
        """An explicit rotation (see the subclasses for what it seals and returns)."""

    @abc.abstractmethod
    def preallocate(self) -> EntryLogId | None:
        """Create the next log ahead of need, if the manager does; its id or None."""

    @abc.abstractmethod
    def checkpoint(self) -> None:
        """What a checkpoint makes durable (see the subclasses)."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Force every log of this run that is not flushed yet (DefaultEntryLogger.flush)."""

    @abc.abstractmethod
    def close(self) -> None:
        """flush, then release the handles; no ledgers map is written."""

    @abc.abstractmethod
    def _unflushed_logs(self) -> list[LogChannel]:
        """Every log of this run not flushed yet: rotated, active, preallocated."""

    @abc.abstractmethod
    def _on_dir_state(self, directory: str, state: DirState) -> None:
        """The disk listener: ``directory`` changed to ``state``."""

    def write_close(self, ledger_id: int) -> None:
        """An advisory write close of ``ledger_id`` (spec/protocol/write_close.md): with one
        log for every ledger there is nothing to seal, so nothing is done. The managers with
        many active logs remember it and seal the ledger's log at the next checkpoint."""
        self._require_open()
        assert ledger_id >= 0, ledger_id

    def seal_for_checkpoint(self) -> None:
        """A checkpoint's first step with many active logs: seal what only a checkpoint
        seals (the logs of the ledgers write-closed since the last one; with slots also the
        idle slots' logs). Nothing with one log for every ledger."""
        self._require_open()

    def rotated(self) -> tuple[LogChannel, ...]:
        return tuple(self._rotated)

    def add_entry(self, ledger_id: LedgerId, payload: bytes) -> Location:
        """Append one entry; return its location. Raises NoWritableLedgerDir when it cannot
        be written for lack of space (nothing of it is then written)."""
        _check_payload(ledger_id, payload)
        return self.add_record(ledger_id, encode_record(payload))

    # --- shared steps --------------------------------------------------------------------

    def _seal(self, log: LogChannel) -> None:
        """appendLedgersMap, resumable: flush, append the map (once), flush, then point the
        header at it. An empty map writes no record; the header then says count 0."""
        if log.sealed:
            return
        if log.map_offset is None:
            self._guard(log, "flushing before the ledgers map", log.channel.flush)
            map_offset = log.channel.position
            pairs = sorted(log.ledgers.items())
            map_bytes = encode_ledgers_map(pairs, self._map_batch_max)
            if map_bytes:
                self._guard(log, "appending the ledgers map", lambda: log.channel.write(map_bytes))
            log.map_offset = map_offset
        # Flush the map before the header points at it (a header must never point past it).
        self._guard(log, "flushing the ledgers map", log.channel.flush)
        location = encode_map_location(log.map_offset, len(log.ledgers))
        self._guard(
            log,
            "updating the header",
            lambda: log.channel.write_in_place(LEDGERS_MAP_OFFSET_POSITION, location),
        )
        log.sealed = True

    def _allocate(
        self,
        directory: str,
        file_name: Callable[[int], str] = log_file_name,
        *,
        register: bool = True,
    ) -> LogChannel:
        """allocateNewLog: next free id, exclusive create, fsync of the directory (ours),
        header into the channel, lastId everywhere, created in the status (``register``:
        a ``.log``; a compaction log is not registered)."""
        log_id = self._allocator.next_id(file_name)
        path = join(directory, file_name(log_id))
        try:
            handle = self._fs.open(path, create=True, exclusive=True)
        except FsNoSpace as exc:
            self._ledger_dirs.mark_full(directory)
            raise NoWritableLedgerDir(no_space_message(directory, path, "creating")) from exc
        channel = BufferedChannel(
            handle, self._write_buffer_bytes, self._flush_entrylog_bytes, start_position=0
        )
        log = LogChannel(log_id, directory, path, channel)
        try:
            self._fs.fsync_dir(directory)
            self._guard(log, "writing the header", lambda: channel.write(encode_header()))
        except FsError:
            with contextlib.suppress(FsError):
                channel.close()
            if not register:
                # A compaction log nobody will ever finish: remove it now (recovery would).
                with contextlib.suppress(FsError):
                    self._fs.unlink(path)
            raise
        self._allocator.publish(log_id)
        if register:
            self._status.created(log_id)
        return log

    def allocate_compaction_log(self) -> LogChannel:
        """createNewLogForCompaction: a ``<hex id>.log.compacting`` file with its header in
        its channel, the id from the shared counter and ``lastId`` published like any log.

        It goes to the directory with the most free space among those with room for a whole
        log (logSizeLimit bytes), whether or not a disk check marked it full: compaction is
        what frees space, so BookKeeper allows it on a full disk. The choice uses no random
        draw, so compaction never shifts the directories later logs get. The log is not
        registered in RecentEntryLogsStatus (BookKeeper registers ``.log`` files only): it is
        no log of the entry logger until the compactor links it as ``<hex id>.log``. Raises
        NoWritableLedgerDir when no directory has room (nothing is created), FsError from
        the disk."""
        self._require_open()
        need = self._log_size_limit_bytes
        spaces = [(self._fs.disk_space(d).free_bytes, d) for d in self._ledger_dirs.dirs]
        roomy = [(free, d) for free, d in spaces if free >= need]
        if not roomy:
            shown = ", ".join(f"{d} ({free} bytes free)" for free, d in spaces)
            raise NoWritableLedgerDir(
                f"no ledger directory has room for a compaction log of up to {need} bytes "
                f"(logSizeLimit): {shown}. Nothing was created; free space (or add a ledger "
                "directory: stop the bookie, `bkref dirs accept` with it added, start it), "
                "then run garbage collection again"
            )
        directory = max(roomy, key=lambda pair: pair[0])[1]
        return self._allocate(directory, compacting_file_name, register=False)

    def _flush_rotated(self) -> None:
        """flushRotatedLogs: fsync and close each rotated log and mark it flushed. On a
        failure the logs not yet flushed go back to the rotated list, in order."""
        channels, self._rotated = self._rotated, []
        for index, log in enumerate(channels):
            try:
                self._guard(log, "syncing", functools.partial(log.channel.flush_and_force, True))
            except BaseException:
                self._rotated = channels[index:] + self._rotated
                raise
            self._flushed[log.log_id] = log.describe(LogState.FLUSHED)
            self._status.flushed(log.log_id)
            try:
                log.channel.close()
            except BaseException:
                self._rotated = channels[index + 1 :] + self._rotated
                raise

    def _guard(self, log: LogChannel, action: str, step: Callable[[], T]) -> T:
        try:
            return step()
        except FsNoSpace as exc:
            self._ledger_dirs.mark_full(log.directory)
            raise NoWritableLedgerDir(no_space_message(log.directory, log.path, action)) from exc

    def _require_open(self) -> None:
        assert not self._closed, "the entry log manager is closed"

    def check_invariants(self) -> None:
        """What every manager keeps; the subclasses add their own."""
        logs = self._unflushed_logs()
        ids = [log.log_id for log in logs]
        assert len(set(ids)) == len(ids), ids
        assert not set(ids) & set(self._flushed), (ids, sorted(self._flushed))
        pending = self._status.pending()
        for log in logs:
            assert pending.get(log.log_id) is False, (log.log_id, pending)
            check_log(log)
            assert not log.channel.closed
        for log in self._rotated:
            assert log.sealed
            assert log.channel.buffered_bytes == 0
        for log_id in self._flushed:
            # Flushed ids are marked True, or already dropped from the front.
            assert pending.get(log_id, True) is True, (log_id, pending)


class SingleEntryLogManager(EntryLogManagerBase):
    """EntryLogManagerForSingleEntryLog with its allocator, as explicit steps."""

    def __init__(
        self,
        fs: FileSystem,
        ledger_dirs: LedgerDirs,
        allocator: LogIdAllocator,
        status: RecentEntryLogsStatus,
        rng: RandomSource,
        *,
        log_size_limit_bytes: int,
        write_buffer_bytes: int,
        flush_entrylog_bytes: int,
        preallocation_enabled: bool,
        map_batch_max: int = LEDGERS_MAP_MAX_BATCH_SIZE,
    ) -> None:
        self._rng = rng
        self._preallocation_enabled = preallocation_enabled
        self._active: LogChannel | None = None
        self._preallocated: LogChannel | None = None
        self._rotate_requested = False
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
        """The active log's id, or None before the first add (UNINITIALIZED_LOG_ID)."""
        return None if self._active is None else self._active.log_id

    @property
    def rotate_requested(self) -> bool:
        """A disk listener asked to move the active log off its directory."""
        return self._rotate_requested

    def active(self) -> LogChannel | None:
        return self._active

    def preallocated(self) -> LogChannel | None:
        return self._preallocated

    def channel_for(self, log_id: int) -> BufferedChannel | None:
        """The active log's channel if ``log_id`` is active (getCurrentLogIfPresent): reads of
        the active log must see its write buffer."""
        if self._active is not None and self._active.log_id == log_id:
            return self._active.channel
        return None

    def describe(self) -> list[LogDescription]:
        """Every log of this run, by id: flushed, rotated, active, preallocated."""
        out = list(self._flushed.values())
        out += [log.describe(LogState.ROTATED) for log in self._rotated]
        if self._active is not None:
            out.append(self._active.describe(LogState.ACTIVE))
        if self._preallocated is not None:
            out.append(self._preallocated.describe(LogState.PREALLOCATED))
        return sorted(out, key=lambda d: d.log_id)

    # --- adding ------------------------------------------------------------------------

    def add_record(self, ledger_id: LedgerId, record: bytes) -> Location:
        """Append one encoded record (``encode_record``: int32 size + a payload beginning
        with ``ledger_id`` and the entry id) and return its location; the bookie's add path,
        which builds the record once for the journal and the entry log. Raises
        NoWritableLedgerDir as ``add_entry`` does.

        Every add goes through here, so it is kept lean: one unpack checks the record's
        head, and the checks of ``_log_for_add`` and ``LogChannel.register`` are inlined."""
        assert not self._closed, "the entry log manager is closed"
        record_bytes = len(record)
        assert record_bytes >= RECORD_SIZE_PREFIX + MIN_SANE_ENTRY_SIZE, record_bytes
        size, found = _RECORD_HEAD.unpack_from(record, 0)
        assert size == record_bytes - RECORD_SIZE_PREFIX, (size, record_bytes)
        assert found == ledger_id, f"record of ledger {found} added to ledger {ledger_id}"
        assert ledger_id >= 0, f"ledger id {ledger_id} is reserved"
        log = self._active
        # Fast path: the active log takes the record (the checks of _log_for_add, inlined).
        if (
            log is None
            or self._rotate_requested
            or log.map_offset is not None
            or log.channel.position + record_bytes > self._log_size_limit_bytes
        ):
            log = self._log_for_add(record_bytes)
        channel = log.channel
        offset = channel.position + RECORD_SIZE_PREFIX
        try:
            channel.write_record(record)
        except FsNoSpace as exc:
            entry_id = decode_ids(record[RECORD_SIZE_PREFIX:])[1]
            action = f"writing entry {entry_id} of ledger {ledger_id}"
            self._ledger_dirs.mark_full(log.directory)
            raise NoWritableLedgerDir(no_space_message(log.directory, log.path, action)) from exc
        # LogChannel.register, inlined: the log takes no entry once its map is accepted.
        assert log.map_offset is None, "entry after the ledgers map"
        ledgers = log.ledgers
        ledgers[ledger_id] = ledgers.get(ledger_id, 0) + record_bytes
        assert channel.position == offset + size, (channel.position, offset, size)
        assert offset < LOCATION_OFFSET_END, offset
        return Location((log.log_id << 32) | offset)  # make_location, inlined

    def _log_for_add(self, record_bytes: int) -> LogChannel:
        """getCurrentLogForLedgerForAddEntry: lazy first log, or rotate when needed."""
        active = self._active
        if active is None:
            return self._create_new_log(force_old=False)
        over_limit = active.channel.position + record_bytes > self._log_size_limit_bytes
        if over_limit or self._rotate_requested or active.map_offset is not None:
            return self._create_new_log(force_old=True)
        return active

    # --- rotation ----------------------------------------------------------------------

    def rotate(self) -> EntryLogId:
        """createNewLog: seal the active log (if any) and start a new one; return its id."""
        self._require_open()
        return self._create_new_log(force_old=False).log_id

    def _create_new_log(self, force_old: bool) -> LogChannel:
        directory = self._ledger_dirs.dir_for_new_log(self._rng)
        old = self._active
        if old is not None:
            if force_old and self._flush_entrylog_bytes > 0:
                # flushAndForceWriteIfRegularFlush before a rotation from an add.
                self._guard(old, "forcing", lambda: old.channel.flush_and_force(False))
            self._seal(old)
        new = self._take_preallocated()
        if new is None:
            new = self._allocate(directory)
        self._active = new
        if old is not None:
            self._rotated.append(old)
        self._rotate_requested = False
        return new

    def _take_preallocated(self) -> LogChannel | None:
        pre = self._preallocated
        if pre is None:
            return None
        if not self._ledger_dirs.is_writable(pre.directory):
            self._discard_preallocated(pre)
            return None
        self._preallocated = None
        return pre

    def _discard_preallocated(self, pre: LogChannel) -> None:
        """Drop a preallocated log whose directory became full. It holds no entry (its
        header is still in its buffer), so it is unlinked and counts as flushed."""
        assert not pre.ledgers
        self._fs.unlink(pre.path)
        self._preallocated = None
        with contextlib.suppress(FsError):
            pre.channel.close()
        self._status.flushed(pre.log_id)
        self._fs.fsync_dir(pre.directory)

    def preallocate(self) -> EntryLogId | None:
        """Create the next log ahead of need, when preallocation is enabled; the next
        rotation takes it. Returns its id (None when disabled)."""
        self._require_open()
        if not self._preallocation_enabled:
            return None
        if self._preallocated is None:
            directory = self._ledger_dirs.dir_for_new_log(self._rng)
            self._preallocated = self._allocate(directory)
        return self._preallocated.log_id

    # --- durability --------------------------------------------------------------------

    def checkpoint(self) -> None:
        """flushRotatedLogs: fsync and close each rotated log and mark it flushed. On a
        failure the logs not yet flushed go back to the rotated list, in order."""
        self._require_open()
        self._flush_rotated()

    def flush(self) -> None:
        """flushCurrentLogs + flushRotatedLogs: force the active log (data and metadata),
        then checkpoint the rotated ones."""
        self._require_open()
        active = self._active
        if active is not None:
            self._guard(active, "syncing", lambda: active.channel.flush_and_force(True))
        self.checkpoint()

    def close(self) -> None:
        """flush, then release the handles; no ledgers map is written. The preallocated log's
        header was never flushed (an empty file remains, as in BookKeeper). If the flush
        fails nothing is closed, so the caller can retry."""
        if self._closed:
            return
        self.flush()
        for log in (self._active, self._preallocated):
            if log is not None:
                log.channel.close()
        self._closed = True

    # --- disk events -------------------------------------------------------------------

    def _on_dir_state(self, directory: str, state: DirState) -> None:
        """diskFull / diskAlmostFull: rotate the active log off that directory."""
        if state is DirState.WRITABLE:
            return
        if self._active is not None and self._active.directory == directory:
            self._rotate_requested = True

    # --- invariants --------------------------------------------------------------------

    def _unflushed_logs(self) -> list[LogChannel]:
        logs = list(self._rotated)
        if self._active is not None:
            logs.append(self._active)
        if self._preallocated is not None:
            logs.append(self._preallocated)
        return logs

    def check_invariants(self) -> None:
        super().check_invariants()
        if self._preallocated is not None:
            assert not self._preallocated.ledgers
            assert self._preallocated.map_offset is None
        if self._rotate_requested:
            assert self._active is not None


def check_log(log: LogChannel) -> None:
    """A log's own invariants: its channel, its header, its counted bytes, its map."""
    log.channel.check_invariants()
    assert log.channel.position >= LOGFILE_HEADER_SIZE
    for ledger_id, size in log.ledgers.items():
        assert ledger_id >= 0, ledger_id
        assert size >= RECORD_SIZE_PREFIX + MIN_SANE_ENTRY_SIZE, (ledger_id, size)
    if log.map_offset is None:
        assert not log.sealed
        assert log.channel.position == LOGFILE_HEADER_SIZE + log.entry_bytes()
    else:
        assert log.map_offset == LOGFILE_HEADER_SIZE + log.entry_bytes()
        assert log.map_offset <= log.channel.position


def _check_payload(ledger_id: LedgerId, payload: bytes) -> None:
    assert ledger_id >= 0, f"ledger id {ledger_id} is reserved"
    assert len(payload) >= MIN_SANE_ENTRY_SIZE, f"payload of {len(payload)} bytes"
    found = decode_ids(payload[:MIN_SANE_ENTRY_SIZE])[0]
    assert found == ledger_id, f"payload of ledger {found} added to ledger {ledger_id}"


def no_space_message(directory: str, path: str, action: str) -> str:
    """What NoWritableLedgerDir says when a write in ``directory`` met ENOSPC."""
    return (
        f"{directory}: no space left on device while {action} ({path}). Nothing of that "
        "write was accepted and entries already written are kept (in memory until the log "
        f"can be flushed). Free space in {directory} (the next disk check, every "
        "diskCheckInterval ms, sees it) or add a ledger directory (stop the bookie, run "
        "`bkref dirs accept` with the directory added to ledgerDirectories, start it), then "
        "retry."
    )
