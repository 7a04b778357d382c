"""The entry logger: BookKeeper's DefaultEntryLogger with its entry-log manager.

Spec page: spec/format/entry_log.md. This module puts together the pieces of the write path
(impl/entrylog/ledger_dirs.py, impl/entrylog/ids.py, and the manager) and the read path
(impl/entrylog/reader.py): adds go to an active log, reads of an active log go through its
channel (so they see the write buffer, DefaultEntryLogger.readFromLogChannel) and reads of
any other log through a cached read handle on its file, found in any ledger directory.

The manager is chosen by entryLogPerLedgerEnabled, as DefaultEntryLogger chooses it: one
active log for every ledger (impl/entrylog/manager.py, EntryLogManagerForSingleEntryLog), or
one per ledger (impl/entrylog/per_ledger.py, EntryLogManagerForEntryLogPerLedger, tuned by
entrylogMapAccessExpiryTimeInSeconds and maximumNumberOfActiveEntryLogs); or by bkref's own
entryLogSlotsPerLedgerDir > 0: that many active logs per ledger directory, ledgers mapped to
them round robin (impl/entrylog/slots.py, BookKeeper issue #570's proposal, never built in
Java). Logs written by any are read by any: the files are the same.

Everything is an explicit step: ``add_entry``, ``flush``, ``checkpoint``, ``rotate``,
``preallocate``, ``check_dirs``. No thread; the random source that picks a ledger directory
(single mode) and the clock that expires a ledger's log (per-ledger mode) are injected.
Deviations from BookKeeper are listed in impl/entrylog/manager.py (fsync of the directory
after creating a log, ENOSPC handling, explicit preallocation), impl/entrylog/per_ledger.py
(no preallocation, eviction at every add and checkpoint) and impl/entrylog/ledger_dirs.py (no
low-water mark, notifications on state changes only).

``close`` does what DefaultEntryLogger.close does: ``flush`` (which forces the active logs and
checkpoints the rotated ones), then releases the handles. No ledgers map is written on close:
an active log keeps a header offset of 0 and its metadata comes from a scan.

Not verified here: readers in other threads, logs deleted under a cached read handle (the
garbage collector must call :meth:`forget_log`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import attrs

from impl.clock import Clock, SystemClock
from impl.config.config import ServerConfig
from impl.entrylog.ids import LogIdAllocator, RecentEntryLogsStatus
from impl.entrylog.ledger_dirs import DirState, LedgerDirs, RandomSource
from impl.entrylog.manager import (
    EntryLogManagerBase,
    LogChannel,
    LogDescription,
    SingleEntryLogManager,
)
from impl.entrylog.per_ledger import PerLedgerEntryLogManager
from impl.entrylog.reader import (
    ByteSource,
    MetadataResult,
    extract_metadata,
    map_as_written,
    read_entry,
)
from impl.entrylog.slots import SlotsEntryLogManager
from impl.format.entry_log import LOGFILE_HEADER_SIZE
from impl.format.names import log_file_name, parse_log_file_name
from impl.fs.api import FileHandle, FileSystem, join
from impl.limits import LIMITS, Limits
from spec.errors import ConfigError, FsError, MissingLogFile
from spec.ids import (
    EntryId,
    EntryLogId,
    LedgerId,
    Location,
    location_log_id,
    location_offset,
)


def _non_negative_int(name: str, value: int) -> None:
    if value < 0:
        raise ConfigError(f"{name}={value} is negative: use 0 or more")


@attrs.frozen(kw_only=True)
class EntryLoggerSettings:
    """The entry logger's configuration, under BookKeeper's key names (bk_server.conf):
    logSizeLimit, flushEntrylogBytes, writeBufferSizeBytes, entryLogFilePreallocationEnabled,
    diskUsageThreshold, diskUsageWarnThreshold, entryLogPerLedgerEnabled,
    entrylogMapAccessExpiryTimeInSeconds, maximumNumberOfActiveEntryLogs, and bkref's own
    entryLogSlotsPerLedgerDir (``slots_per_dir``: 0 is off). Invalid values raise
    ConfigError. As in Java, a flushEntrylogBytes of 0 or below disables the forced flushes;
    preallocation applies in single mode only (impl/entrylog/per_ledger.py)."""

    log_size_limit_bytes: int = 1073741824
    flush_entrylog_bytes: int = 0
    write_buffer_bytes: int = 65536
    preallocation_enabled: bool = True
    disk_usage_threshold: float = 0.95
    disk_usage_warn_threshold: float = 0.90
    per_ledger: bool = False
    entrylog_map_access_expiry_s: int = 300
    maximum_active_entry_logs: int = 500
    slots_per_dir: int = 0

    def __attrs_post_init__(self) -> None:
        _non_negative_int("logSizeLimit", self.log_size_limit_bytes)
        # ServerConfiguration's MAX_LOG_SIZE_LIMIT (settings are checked before any engine
        # exists, so against the production LIMITS).
        if self.log_size_limit_bytes > LIMITS.log_size_limit_max_bytes:
            raise ConfigError(
                f"logSizeLimit={self.log_size_limit_bytes} is above the maximum "
                f"{LIMITS.log_size_limit_max_bytes} (1 GiB): lower it"
            )
        if self.write_buffer_bytes <= 0:
            raise ConfigError(
                f"writeBufferSizeBytes={self.write_buffer_bytes} must be positive "
                "(BookKeeper's default is 65536)"
            )
        _non_negative_int("entrylogMapAccessExpiryTimeInSeconds", self.entrylog_map_access_expiry_s)
        if self.maximum_active_entry_logs < 1:
            raise ConfigError(
                f"maximumNumberOfActiveEntryLogs={self.maximum_active_entry_logs} must be at "
                "least 1 (BookKeeper's default is 500)"
            )
        _non_negative_int("entryLogSlotsPerLedgerDir", self.slots_per_dir)
        if self.per_ledger and self.slots_per_dir > 0:
            raise ConfigError(
                f"entryLogPerLedgerEnabled=true and entryLogSlotsPerLedgerDir="
                f"{self.slots_per_dir}: each chooses an entry-log manager; set at most one"
            )


def settings_from_config(config: ServerConfig) -> EntryLoggerSettings:
    """The entry logger's settings from a validated ServerConfig (impl/config/config.py), so
    bk_server.conf and ``--set`` are the one source of truth for every knob."""
    return EntryLoggerSettings(
        log_size_limit_bytes=config.log_size_limit_bytes,
        flush_entrylog_bytes=config.flush_entrylog_bytes,
        write_buffer_bytes=config.write_buffer_size_bytes,
        preallocation_enabled=config.entry_log_file_preallocation_enabled,
        disk_usage_threshold=config.disk_usage_threshold,
        disk_usage_warn_threshold=config.disk_usage_warn_threshold,
        per_ledger=config.entry_log_per_ledger_enabled,
        entrylog_map_access_expiry_s=config.entrylog_map_access_expiry_time_s,
        maximum_active_entry_logs=config.maximum_number_of_active_entry_logs,
        slots_per_dir=config.entry_log_slots_per_ledger_dir,
    )


@attrs.frozen
class EntryLoggerState:
    """A frozen description of the entry logger, for tests and the refinement harness.

    ``logs`` are the logs of this run (created since start), by id; logs found on disk at
    start are listed by :meth:`EntryLogger.log_ids` only.
    """

    logs: tuple[LogDescription, ...]
    least_unflushed_log_id: int
    current_log_id: EntryLogId | None
    dir_states: tuple[tuple[str, DirState], ...]


class EntryLogger:
    """Adds and reads entries in entry logs spread over ledger directories.

    ``ledger_dirs`` are the ``current`` directories holding the logs; they must exist.
    ``limits`` (impl/limits.py): at most ``read_handles_max`` read handles stay open (the
    oldest is closed first), scans read ``scan_chunk_bytes`` at a time, a ``lastId`` longer
    than ``last_id_file_max_bytes`` is garbage. ``rng`` picks the directory of a new log in
    single mode; ``clock`` expires a ledger's log in per-ledger mode (the system clock when
    not given).
    """

    def __init__(
        self,
        fs: FileSystem,
        ledger_dirs: Sequence[str],
        settings: EntryLoggerSettings,
        rng: RandomSource,
        *,
        limits: Limits = LIMITS,
        clock: Clock | None = None,
    ) -> None:
        for directory in ledger_dirs:
            if not fs.is_dir(directory):
                raise ConfigError(
                    f"entry log directory {directory} does not exist or is not a directory: "
                    "create it (BookKeeper's <ledgerDir>/current) or fix ledgerDirectories"
                )
        self._fs = fs
        self._settings = settings
        self._limits = limits
        self._dirs = LedgerDirs(
            fs,
            ledger_dirs,
            warn_threshold=settings.disk_usage_warn_threshold,
            threshold=settings.disk_usage_threshold,
        )
        self._allocator = LogIdAllocator(fs, ledger_dirs, limits=limits)
        # Java: new RecentEntryLogsStatus(logId + 1), no wrap.
        self._status = RecentEntryLogsStatus(self._allocator.last_id + 1)
        self._manager: EntryLogManagerBase
        if settings.slots_per_dir > 0:
            self._manager = SlotsEntryLogManager(
                fs,
                self._dirs,
                self._allocator,
                self._status,
                clock if clock is not None else SystemClock(),
                slots_per_dir=settings.slots_per_dir,
                log_size_limit_bytes=settings.log_size_limit_bytes,
                write_buffer_bytes=settings.write_buffer_bytes,
                flush_entrylog_bytes=max(0, settings.flush_entrylog_bytes),
                expiry_s=settings.entrylog_map_access_expiry_s,
                max_mapped=settings.maximum_active_entry_logs,
                map_batch_max=limits.ledgers_map_batch_max,
            )
        elif settings.per_ledger:
            self._manager = PerLedgerEntryLogManager(
                fs,
                self._dirs,
                self._allocator,
                self._status,
                clock if clock is not None else SystemClock(),
                log_size_limit_bytes=settings.log_size_limit_bytes,
                write_buffer_bytes=settings.write_buffer_bytes,
                flush_entrylog_bytes=max(0, settings.flush_entrylog_bytes),
                expiry_s=settings.entrylog_map_access_expiry_s,
                max_active=settings.maximum_active_entry_logs,
                map_batch_max=limits.ledgers_map_batch_max,
            )
        else:
            self._manager = SingleEntryLogManager(
                fs,
                self._dirs,
                self._allocator,
                self._status,
                rng,
                log_size_limit_bytes=settings.log_size_limit_bytes,
                write_buffer_bytes=settings.write_buffer_bytes,
                flush_entrylog_bytes=max(0, settings.flush_entrylog_bytes),
                preallocation_enabled=settings.preallocation_enabled,
                map_batch_max=limits.ledgers_map_batch_max,
            )
        self._read_handles: dict[int, FileHandle] = {}
        self._closed = False

    # --- the parts, for tests and the bookie ------------------------------------------

    @property
    def settings(self) -> EntryLoggerSettings:
        return self._settings

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def ledger_dirs(self) -> LedgerDirs:
        return self._dirs

    @property
    def manager(self) -> EntryLogManagerBase:
        """The entry-log manager: SingleEntryLogManager, PerLedgerEntryLogManager or
        SlotsEntryLogManager."""
        return self._manager

    @property
    def current_log_id(self) -> EntryLogId | None:
        """The active log's id, None before the first add; in per-ledger and slots mode the
        id of the active log most recently added to (PerLedgerEntryLogManager.current_log_id,
        SlotsEntryLogManager.current_log_id)."""
        return self._manager.current_log_id

    @property
    def least_unflushed_log_id(self) -> int:
        """Logs below this id are rotated and fsynced (getLeastUnflushedLogId)."""
        return self._status.least_unflushed_log_id

    # --- steps -------------------------------------------------------------------------

    def add_entry(self, ledger_id: LedgerId, payload: bytes) -> Location:
        """Append an entry; ``payload`` begins with its ledger id and entry id. Raises
        NoWritableLedgerDir when there is no space for it (nothing of it is then written)."""
        self._require_open()
        return self._manager.add_entry(ledger_id, payload)

    def add_record(self, ledger_id: LedgerId, record: bytes) -> Location:
        """Append an encoded record (entry_log_format.encode_record: int32 size + payload);
        the bookie builds it once for the journal and the entry log (the journal's data
        record is the same bytes). Raises NoWritableLedgerDir as ``add_entry`` does."""
        assert not self._closed, "the entry logger is closed"
        return self._manager.add_record(ledger_id, record)

    def read_entry(self, ledger_id: LedgerId, entry_id: EntryId, location: Location) -> bytes:
        """The payload stored at ``location``, checked to be (ledger_id, entry_id). Raises
        MissingLogFile, ShortRead, BadEntryLength or WrongEntry."""
        self._require_open()
        log_id = location_log_id(location)
        src = self._source(log_id)
        return read_entry(src, log_id, location_offset(location), ledger_id, entry_id)

    def extract_metadata(self, log_id: EntryLogId) -> MetadataResult:
        """Per-ledger bytes of one log, from its ledgers map or by a scan
        (getEntryLogMetadata). Raises MissingLogFile or NotAnEntryLog."""
        self._require_open()
        return extract_metadata(
            self._source(log_id), log_id, chunk_bytes=self._limits.scan_chunk_bytes
        )

    def ledgers_map(self, log_id: EntryLogId) -> tuple[bool, dict[int, int] | None]:
        """What log ``log_id``'s header says of its ledgers map, and the map as written
        (reader.map_as_written). Raises MissingLogFile."""
        self._require_open()
        return map_as_written(self._source(log_id))

    def flush(self) -> None:
        """Force the active log(s) and checkpoint the rotated ones (DefaultEntryLogger.flush)."""
        self._require_open()
        self._manager.flush()

    def checkpoint(self) -> None:
        """fsync and close the rotated logs; ``least_unflushed_log_id`` moves past them. In
        per-ledger mode also forces the active logs, after evicting the expired ledgers (slots
        mode: after forgetting the expired ledger-to-slot mappings)."""
        self._require_open()
        self._manager.checkpoint()

    def write_close(self, ledger_id: LedgerId) -> None:
        """An advisory write close (spec/protocol/write_close.md): a manager with many active
        logs seals the ledger's log at the next checkpoint; the single log does nothing."""
        self._require_open()
        self._manager.write_close(ledger_id)

    def seal_for_checkpoint(self) -> None:
        """A checkpoint's first step: with many active logs, seal the write-closed ledgers'
        logs (spec/protocol/write_close.md), and with slots the idle slots' logs; ``flush``
        alone does not."""
        self._require_open()
        self._manager.seal_for_checkpoint()

    def rotate(self) -> EntryLogId | None:
        """Single mode: seal the active log and start a new one (createNewLog); return the
        new id. Per-ledger mode: seal every active log, no new one until each ledger's next
        add; return the highest id sealed (None when there was none). Slots mode: seal every
        slot's active log, the same way."""
        self._require_open()
        return self._manager.rotate()

    def preallocate(self) -> EntryLogId | None:
        """Create the next log ahead of need (entryLogFilePreallocationEnabled; single mode
        only: None in per-ledger and slots mode)."""
        self._require_open()
        return self._manager.preallocate()

    def create_compaction_log(self) -> LogChannel:
        """A new ``<hex id>.log.compacting`` in a directory with room for a whole log, even
        when every directory is marked full (SingleEntryLogManager.allocate_compaction_log;
        EntryLoggerAllocator.createNewLogForCompaction). Its channel is the caller's to write,
        force and close. Raises NoWritableLedgerDir or FsError."""
        self._require_open()
        return self._manager.allocate_compaction_log()

    def check_dirs(self) -> dict[str, DirState]:
        """Measure every ledger directory (LedgerDirsMonitor.check); a full or almost full
        directory holding the active log makes the next add rotate (per-ledger mode: a full
        one, at the next add of each ledger whose log is there; slots mode: a full one, whose
        slots are retired at the next add)."""
        self._require_open()
        return self._dirs.check()

    def close(self) -> None:
        """flush, then close every handle. No ledgers map is written."""
        if self._closed:
            return
        self._manager.close()
        for handle in self._read_handles.values():
            with contextlib.suppress(FsError):
                handle.close()
        self._read_handles.clear()
        self._closed = True

    # --- logs on disk ------------------------------------------------------------------

    def log_ids(self) -> list[EntryLogId]:
        """Ids of every ``<hex>.log`` file in the ledger directories (getEntryLogsSet)."""
        ids: set[EntryLogId] = set()
        for directory in self._dirs.dirs:
            for name in self._fs.listdir(directory):
                log_id = parse_log_file_name(name)
                if log_id is not None:
                    ids.add(log_id)
        return sorted(ids)

    def find_log(self, log_id: EntryLogId) -> str | None:
        """The path of ``<hex id>.log`` in the first ledger directory that has it."""
        name = log_file_name(log_id)
        for directory in self._dirs.dirs:
            path = join(directory, name)
            if self._fs.exists(path):
                return path
        return None

    def forget_log(self, log_id: EntryLogId) -> None:
        """Close the cached read handle of a log (removeFromChannelsAndClose)."""
        handle = self._read_handles.pop(log_id, None)
        if handle is not None:
            with contextlib.suppress(FsError):
                handle.close()

    def _source(self, log_id: EntryLogId) -> ByteSource:
        channel = self._manager.channel_for(log_id)
        if channel is not None:
            return channel
        handle = self._read_handles.get(log_id)
        if handle is not None:
            return handle
        path = self.find_log(log_id)
        if path is None:
            raise MissingLogFile(log_id)
        handle = self._fs.open(path, read_only=True)
        if len(self._read_handles) >= self._limits.read_handles_max:
            oldest = next(iter(self._read_handles))
            self.forget_log(EntryLogId(oldest))
        self._read_handles[log_id] = handle
        return handle

    # --- description -------------------------------------------------------------------

    def state(self) -> EntryLoggerState:
        return EntryLoggerState(
            logs=tuple(self._manager.describe()),
            least_unflushed_log_id=self._status.least_unflushed_log_id,
            current_log_id=self._manager.current_log_id,
            dir_states=tuple((d, self._dirs.state(d)) for d in self._dirs.dirs),
        )

    def check_invariants(self) -> None:
        self._dirs.check_invariants()
        self._allocator.check_invariants()
        self._status.check_invariants()
        self._manager.check_invariants()
        assert len(self._read_handles) <= self._limits.read_handles_max
        current = self._manager.current_log_id
        if current is not None:
            assert self._allocator.last_id >= 0
            active = self._manager.active()
            assert active is not None
            assert active.channel.position >= LOGFILE_HEADER_SIZE

    def _require_open(self) -> None:
        assert not self._closed, "the entry logger is closed"
