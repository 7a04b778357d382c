"""The entry-log manager with N active logs per ledger directory ("slots"; bkref's own).

Spec page: spec/format/entry_log.md ("The ledgers map", "Rules every entry-log manager
keeps"). Origin: BookKeeper issue #570 proposed it; BookKeeper built the log per ledger
instead (impl/entrylog/per_ledger.py), so there is no Java class to follow. Configured by
bkref's own key ``entryLogSlotsPerLedgerDir`` (N > 0; 0, the default, is off), not by a key
of BookKeeper's; with entryLogPerLedgerEnabled=true the configuration is refused.

There are ``dirs x N`` slots, numbered so that consecutive slots are in different
directories (slot ``i`` is in directory ``i % dirs``, configuration order). A slot has at
most one current (active) log, created in the slot's directory at the first add that needs
it, with the next id of the shared counter (registered in RecentEntryLogsStatus like any
log). Several ledgers share a slot and its log. Each ledger is mapped to one slot through an
evicting map: a ledger with no slot takes the next slot in round-robin order, skipping the
slots of full directories; the mapping is forgotten when the ledger took no add for
``entrylogMapAccessExpiryTimeInSeconds`` (on the injected clock, Guava's ``now - last access
>= expiry`` as in the per-ledger manager), or, least recently added-to first, when more than
``maximumNumberOfActiveEntryLogs`` ledgers are mapped. Forgetting a mapping seals nothing:
the slot's log is other ledgers' too. The ledger takes the next slot at its next add, so its
records may then be in two active logs, but its new records go to one. A slot no ledger is
mapped to whose log took no add for the expiry time is idle: at the next add or checkpoint
its log is sealed and rotated (as the per-ledger manager seals an idle ledger's log), so its
records become a GC candidate instead of waiting in an active log until more adds fill it;
not while no directory is writable.

Before an add the slot's log is sealed (its ledgers map appended and the header pointed at
it, exactly as the other managers seal: impl/entrylog/manager.py) and replaced by a new log
in the slot's directory when ``position + record size > logSizeLimit``; with
flushEntrylogBytes > 0 the old log is forced first. When the disk listener reports a
directory full, its slots become inactive: at the next add of any ledger, when some
directory is writable, their current logs are sealed (joining the rotated list) and the
ledgers mapped to them forget their slot (they take a slot in a writable directory at their
next add). When the directory is writable again, round robin reaches its slots again. When
every directory is full nothing moves: the ledgers go on appending to their slots' logs, as
the per-ledger manager does, and a ledger with no slot joins a slot that has a current log
(NoWritableLedgerDir when none has).

``rotate`` seals every slot's current log with no replacement (each slot's next add starts a
new one; the mappings stay) and returns the highest id sealed, None when no slot had a log.
``checkpoint`` and ``flush`` are one step, as in the per-ledger manager: seal each slot's log
whose ledgers are all write-closed and forget the write-closed ledgers' mappings
(spec/protocol/write_close.md), forget the expired mappings, seal the idle slots' logs (a
checkpoint's only, not the flush of a compaction's index phase), force every current log (data
and metadata), then fsync, close and mark flushed the rotated ones; leastUnflushedLogId then
stays at the smallest log that is current or rotated. ``close`` forces everything and
releases the handles; it seals nothing.

``current_log_id``: the current log most recently added to (None before the first add and
once no slot has a log). :meth:`SlotsEntryLogManager.log_for_ledger` is a ledger's slot's
log.

Choices, besides the shared deviations of impl/entrylog/manager.py (fsync of the directory
after creating a log, the directory checked before the old log is sealed, resumable sealing,
the ENOSPC mapping):

- No preallocation: ``preallocate`` does nothing and returns None.
- Inactive slots are retired at the next add, not in the disk listener (which may run inside
  a write that met ENOSPC). A retirement that cannot seal its log (no space for the map)
  fails the add that triggered it with NoWritableLedgerDir, nothing of that add written, and
  is tried again at the next add, as the per-ledger manager's evictions are. Until then the
  log stays current and takes no add (no ledger is mapped to its slot).
- Only a full directory makes its slots inactive; almost full does nothing (as in the
  per-ledger manager).
- Compaction logs are allocated as in the other managers.

Not verified here: concurrency (bkref calls the manager under the bookie's state lock).
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
    FORGOTTEN_AT_MOST_MAPPED,
    FORGOTTEN_ON_EXPIRY,
    IDLE_SLOT_SEALED,
    NS_PER_S,
    RETIRED_FULL_DIR,
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


class Slot:
    """One slot: its directory, its current log, if it has one, and when an add last went to
    it (the injected clock's monotonic reading)."""

    __slots__ = ("directory", "index", "last_add_ns", "log")

    def __init__(self, index: int, directory: str) -> None:
        self.index = index
        self.directory = directory
        self.log: LogChannel | None = None
        self.last_add_ns = 0


class Mapping:
    """One ledger's entry in the evicting map: its slot and when an add last touched it."""

    __slots__ = ("last_access_ns", "slot")

    def __init__(self, slot: Slot, last_access_ns: int) -> None:
        self.slot = slot
        self.last_access_ns = last_access_ns


class SlotsEntryLogManager(EntryLogManagerBase):
    """``slots_per_dir`` active logs per ledger directory, ledgers mapped to them round robin.

    ``clock`` times the map's expiry (its monotonic reading); ``expiry_s`` is
    entrylogMapAccessExpiryTimeInSeconds and ``max_mapped`` maximumNumberOfActiveEntryLogs
    (here: the most ledgers mapped at once).
    """

    def __init__(
        self,
        fs: FileSystem,
        ledger_dirs: LedgerDirs,
        allocator: LogIdAllocator,
        status: RecentEntryLogsStatus,
        clock: Clock,
        *,
        slots_per_dir: int,
        log_size_limit_bytes: int,
        write_buffer_bytes: int,
        flush_entrylog_bytes: int,
        expiry_s: int,
        max_mapped: int,
        map_batch_max: int = LEDGERS_MAP_MAX_BATCH_SIZE,
    ) -> None:
        assert slots_per_dir >= 1, slots_per_dir
        assert expiry_s >= 0, expiry_s
        assert max_mapped >= 1, max_mapped
        self._clock = clock
        self._expiry_ns = expiry_s * NS_PER_S
        self._max_mapped = max_mapped
        dirs = ledger_dirs.dirs
        self._slots = tuple(Slot(i, dirs[i % len(dirs)]) for i in range(len(dirs) * slots_per_dir))
        #: The slot the next unmapped ledger tries first.
        self._next_slot = 0
        #: Ledger id -> its slot, least recently added-to first (the evicting map).
        self._mapped: collections.OrderedDict[int, Mapping] = collections.OrderedDict()
        #: Log id -> the slot whose current log it is: reads and flushes use it.
        self._by_log: dict[int, Slot] = {}
        #: Slots with a current log, least recently added-to first (``current_log_id``).
        self._recent: collections.OrderedDict[int, Slot] = collections.OrderedDict()
        #: The listener reported a directory full: retire its slots at the next add.
        self._retire_pending = False
        #: The ledgers write-closed (spec/protocol/write_close.md) whose records are still in
        #: an active log: a slot's log is sealed at a checkpoint once all its ledgers are.
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
    def slot_count(self) -> int:
        """dirs x slots per directory: the most current logs at once."""
        return len(self._slots)

    @property
    def current_log_id(self) -> EntryLogId | None:
        """The id of the current log most recently added to; None before the first add and
        when no slot has a current log."""
        log = self.active()
        return None if log is None else log.log_id

    @property
    def rotate_requested(self) -> bool:
        """A directory holding a slot's current log was reported full: that slot is retired
        at the next add (when some directory is writable)."""
        return self._retire_pending and any(
            s.log is not None and not self._ledger_dirs.is_writable(s.directory)
            for s in self._slots
        )

    def active(self) -> LogChannel | None:
        """The log of ``current_log_id``."""
        if not self._recent:
            return None
        return next(reversed(self._recent.values())).log

    def actives(self) -> tuple[LogChannel, ...]:
        """Every slot's current log, by id."""
        logs = [s.log for s in self._slots if s.log is not None]
        return tuple(sorted(logs, key=lambda log: log.log_id))

    def slot_of(self, ledger_id: int) -> int | None:
        """The index of the ledger's slot, None when it has none (without touching its
        access time)."""
        mapping = self._mapped.get(ledger_id)
        return None if mapping is None else mapping.slot.index

    def slot_directory(self, index: int) -> str:
        return self._slots[index].directory

    def log_for_ledger(self, ledger_id: int) -> LogChannel | None:
        """The current log of the ledger's slot (None: no slot, or the slot has no log)."""
        mapping = self._mapped.get(ledger_id)
        return None if mapping is None else mapping.slot.log

    def mapped_by_access(self) -> tuple[int, ...]:
        """The ledgers mapped to a slot, least recently added-to first."""
        return tuple(self._mapped)

    def preallocated(self) -> LogChannel | None:
        """Never any: this manager does not preallocate."""
        return None

    def channel_for(self, log_id: int) -> BufferedChannel | None:
        """The channel of a current log: reads of a current log must see its write buffer.
        None for any other log."""
        slot = self._by_log.get(log_id)
        if slot is None or slot.log is None:
            return None
        return slot.log.channel

    def describe(self) -> list[LogDescription]:
        """Every log of this run, by id: flushed, rotated, and each slot's current log."""
        out = list(self._flushed.values())
        out += [log.describe(LogState.ROTATED) for log in self._rotated]
        out += [log.describe(LogState.ACTIVE) for log in self.actives()]
        return sorted(out, key=lambda d: d.log_id)

    # --- adding ------------------------------------------------------------------------

    def add_record(self, ledger_id: LedgerId, record: bytes) -> Location:
        """Append one encoded record (``encode_record``: int32 size + a payload beginning
        with ``ledger_id`` and the entry id) to the log of the ledger's slot and return its
        location. Expired mappings are forgotten and inactive slots retired first; the
        ledger takes a slot, and the slot a new log, when needed (module docstring). Raises
        NoWritableLedgerDir when the record cannot be written for lack of space (nothing of
        it is then written)."""
        assert not self._closed, "the entry log manager is closed"
        record_bytes = len(record)
        assert record_bytes >= RECORD_SIZE_PREFIX + MIN_SANE_ENTRY_SIZE, record_bytes
        size, found = _RECORD_HEAD.unpack_from(record, 0)
        assert size == record_bytes - RECORD_SIZE_PREFIX, (size, record_bytes)
        assert found == ledger_id, f"record of ledger {found} added to ledger {ledger_id}"
        assert ledger_id >= 0, f"ledger id {ledger_id} is reserved"
        now = self._clock.monotonic_ns()
        self._forget_expired(now)
        self._seal_idle(now)
        if self._retire_pending:
            self._retire_inactive()
        mapping = self._mapped.get(ledger_id)
        slot = self._slot_for_new_ledger() if mapping is None else mapping.slot
        log = slot.log
        if (
            log is None
            or log.map_offset is not None
            or log.channel.position + record_bytes > self._log_size_limit_bytes
        ):
            log = self._new_log(slot)
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
        if mapping is None:
            # Mapped once the record is written: a refused add maps nothing.
            self._mapped[ledger_id] = Mapping(slot, now)
            self._next_slot = (slot.index + 1) % len(self._slots)
            while len(self._mapped) > self._max_mapped:
                self._mapped.popitem(last=False)  # the map's maximumSize: forget the oldest
                self.events[FORGOTTEN_AT_MOST_MAPPED] += 1
        else:
            mapping.last_access_ns = now
            self._mapped.move_to_end(ledger_id)
        self._recent.move_to_end(slot.index)
        slot.last_add_ns = now
        return Location((log.log_id << 32) | offset)

    def _slot_for_new_ledger(self) -> Slot:
        """The next slot in round-robin order whose directory is writable; with no writable
        directory, the next slot that has a current log taking adds. The round robin moves
        past it once the ledger is mapped, after its record is written (:meth:`add_record`),
        so a refused add maps nothing and moves nothing. Raises NoWritableLedgerDir."""
        count = len(self._slots)
        writable = bool(self._ledger_dirs.writable_dirs())
        for step in range(count):
            slot = self._slots[(self._next_slot + step) % count]
            usable = (
                self._ledger_dirs.is_writable(slot.directory)
                if writable
                else slot.log is not None and slot.log.map_offset is None
            )
            if usable:
                return slot
        raise NoWritableLedgerDir(self._ledger_dirs.describe_no_writable_dir())

    def _new_log(self, slot: Slot) -> LogChannel:
        """The slot's first log, or its next one: the old one sealed and rotated."""
        if not self._ledger_dirs.is_writable(slot.directory):
            # Only when every directory is full (inactive slots are retired otherwise).
            raise NoWritableLedgerDir(self._ledger_dirs.describe_no_writable_dir())
        old = slot.log
        if old is not None:
            if self._flush_entrylog_bytes > 0 and old.map_offset is None:
                # flushAndForceWriteIfRegularFlush before a rotation from an add.
                self._guard(old, "forcing", lambda: old.channel.flush_and_force(False))
            self._retire(slot)
        new = self._allocate(slot.directory)
        slot.log = new
        self._by_log[new.log_id] = slot
        self._recent[slot.index] = slot
        return new

    # --- the map, retirement and rotation ----------------------------------------------

    def _forget_expired(self, now: int) -> None:
        """Forget, least recently added-to first, every mapping that took no add for the
        expiry time (expireAfterAccess). Nothing is sealed: the slot's log is shared."""
        while self._mapped:
            oldest = next(iter(self._mapped.values()))
            if now - oldest.last_access_ns < self._expiry_ns:
                return
            self._mapped.popitem(last=False)
            self.events[FORGOTTEN_ON_EXPIRY] += 1

    def _seal_idle(self, now: int) -> None:
        """Seal the log of every slot no mapped ledger points at that took no add for the
        expiry time, as the per-ledger manager seals an idle ledger's log: its records become
        a GC candidate at the next checkpoint, where they would wait in an active log until
        more adds filled it. Not while no directory is writable (the slots' logs are then
        where every ledger appends). A seal that fails leaves the log current, for the next
        try, and raises."""
        if not self._ledger_dirs.writable_dirs():
            return
        mapped = {mapping.slot.index for mapping in self._mapped.values()}
        for slot in self._slots:
            if slot.log is None or slot.index in mapped:
                continue
            if now - slot.last_add_ns < self._expiry_ns:
                continue
            self._retire(slot)
            self.events[IDLE_SLOT_SEALED] += 1

    def _retire(self, slot: Slot) -> None:
        """Seal the slot's current log and move it to the rotated list; the slot has no log
        until its next add. A seal that fails leaves it current (the seal resumes at the
        next try)."""
        log = slot.log
        assert log is not None
        self._seal(log)
        slot.log = None
        del self._by_log[log.log_id]
        del self._recent[slot.index]
        self._rotated.append(log)

    def _retire_inactive(self) -> None:
        """When some directory is writable, seal the logs of the slots in full directories
        and make their ledgers forget their slot. With none writable nothing moves (and the
        retirement waits for a directory to come back)."""
        if not self._ledger_dirs.writable_dirs():
            return
        for slot in self._slots:
            if self._ledger_dirs.is_writable(slot.directory):
                continue
            if slot.log is not None:
                self._retire(slot)
                self.events[RETIRED_FULL_DIR] += 1
            for ledger_id in [k for k, m in self._mapped.items() if m.slot is slot]:
                del self._mapped[ledger_id]
        self._retire_pending = False

    def rotate(self) -> EntryLogId | None:
        """Seal every slot's current log, by id, with no replacement: each slot's next add
        starts a new log (the mappings stay). Returns the highest id sealed, None when no
        slot had a log."""
        self._require_open()
        highest: EntryLogId | None = None
        for log in self.actives():
            slot = self._by_log[log.log_id]
            self._retire(slot)
            highest = log.log_id
        return highest

    def write_close(self, ledger_id: int) -> None:
        """Remember that ``ledger_id`` is write-closed (BP-32): at the next checkpoint its
        mapping is forgotten, and a slot's log whose ledgers are all write-closed is sealed
        (spec/protocol/write_close.md). Adds to it are still taken meanwhile."""
        super().write_close(ledger_id)
        self._write_closed.add(ledger_id)

    def seal_for_checkpoint(self) -> None:
        """A checkpoint's first step: seal every slot's log whose ledgers are all
        write-closed, by slot, and forget the write-closed ledgers' mappings. A mark stays
        while an active log still holds the ledger's records beside a ledger still writing
        (a later write close of that one seals it). Then forget the expired mappings and seal
        the idle slots' logs (:meth:`_seal_idle`). A seal that finds no room raises, the rest
        waiting for the next checkpoint. Not run by the flush of a compaction's index phase
        (a GC step seals nothing)."""
        self._require_open()
        for slot in self._slots:
            log = slot.log
            if log is not None and log.ledgers and set(log.ledgers) <= self._write_closed:
                self._retire(slot)
                self.events[SEALED_WRITE_CLOSED] += 1
        for ledger_id in self._write_closed:
            self._mapped.pop(ledger_id, None)
        still = {ledger for log in self.actives() for ledger in log.ledgers}
        self._write_closed &= still
        now = self._clock.monotonic_ns()
        self._forget_expired(now)
        self._seal_idle(now)

    def preallocate(self) -> EntryLogId | None:
        """Nothing: this manager does not preallocate. Always None."""
        self._require_open()
        return None

    # --- durability --------------------------------------------------------------------

    def checkpoint(self) -> None:
        """As the per-ledger manager's, a checkpoint is :meth:`flush`, after
        :meth:`seal_for_checkpoint`."""
        self.seal_for_checkpoint()
        self.flush()

    def flush(self) -> None:
        """Forget the expired mappings, force every slot's current log (data and metadata),
        then fsync, close and mark flushed the rotated logs. On a failure nothing flushed so
        far is undone and the rest stays as it was, for a retry."""
        self._require_open()
        self._forget_expired(self._clock.monotonic_ns())
        self._force_current()
        self._flush_rotated()

    def _force_current(self) -> None:
        for log in self.actives():
            self._guard(log, "syncing", functools.partial(log.channel.flush_and_force, True))

    def close(self) -> None:
        """Force every log and flush the rotated ones, then release the current logs'
        handles; nothing is sealed. If the flush fails nothing is closed, so the caller can
        retry."""
        if self._closed:
            return
        self._force_current()
        self._flush_rotated()
        for log in self.actives():
            log.channel.close()
        self._closed = True

    # --- disk events -------------------------------------------------------------------

    def _on_dir_state(self, directory: str, state: DirState) -> None:
        """A full directory's slots become inactive: they are retired at the next add.
        Almost full does nothing; a writable directory's slots are chosen again."""
        if state is DirState.FULL:
            self._retire_pending = True

    # --- invariants --------------------------------------------------------------------

    def _unflushed_logs(self) -> list[LogChannel]:
        return [*self._rotated, *self.actives()]

    def check_invariants(self) -> None:
        super().check_invariants()
        actives = self.actives()
        assert len(actives) <= len(self._slots), (len(actives), len(self._slots))
        assert set(self._by_log) == {log.log_id for log in actives}
        assert set(self._recent) == {s.index for s in self._slots if s.log is not None}
        assert 0 <= self._next_slot < len(self._slots), self._next_slot
        all_full = not self._ledger_dirs.writable_dirs()
        for index, slot in enumerate(self._slots):
            assert slot.index == index
            if slot.log is None:
                continue
            assert self._by_log[slot.log.log_id] is slot
            assert slot.log.directory == slot.directory, (slot.log.directory, slot.directory)
            # No current log in a full directory unless every directory is full, or its
            # slot's retirement is pending (the next add seals it).
            writable = self._ledger_dirs.is_writable(slot.directory)
            assert writable or all_full or self._retire_pending, (index, slot.directory)
        # Each ledger is in at most one slot (one key of the map); the map is bounded and in
        # access order.
        assert len(self._mapped) <= self._max_mapped, (len(self._mapped), self._max_mapped)
        last_access = None
        for mapping in self._mapped.values():
            assert self._slots[mapping.slot.index] is mapping.slot
            assert last_access is None or last_access <= mapping.last_access_ns
            last_access = mapping.last_access_ns
            writable = self._ledger_dirs.is_writable(mapping.slot.directory)
            assert writable or all_full or self._retire_pending
