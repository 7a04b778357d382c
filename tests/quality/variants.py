"""Known-bad variants of the entry logger, each reproducing a real way to lose data.

Each variant is a drop-in replacement for one method of the implementation, differing from it
in exactly the way its name says. They live here, never in impl/. tests/quality/ checks that
``bkref crash-check`` catches every one of them within the CI budget: a variant that slips
through is a defect of the checker, to be fixed there, not here.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

from impl.entrylog.buffered_channel import BufferedChannel
from impl.entrylog.ids import LogIdAllocator, read_last_id
from impl.entrylog.manager import LogChannel, LogState, SingleEntryLogManager
from impl.format.entry_log import encode_header
from impl.format.names import log_file_name
from impl.fs.api import join
from spec.errors import FsError
from spec.ids import EntryLogId


def allocate_without_dir_fsync(self: SingleEntryLogManager, directory: str) -> LogChannel:
    """BookKeeper's own allocateNewLog: the new log's name is never made durable (no fsync of
    the ledger directory). On a strict POSIX disk a crash can drop the whole file, even after
    its data was fsynced at a checkpoint."""
    log_id = self._allocator.next_id(log_file_name)
    path = join(directory, log_file_name(log_id))
    handle = self._fs.open(path, create=True, exclusive=True)
    channel = BufferedChannel(
        handle, self._write_buffer_bytes, self._flush_entrylog_bytes, start_position=0
    )
    log = LogChannel(log_id, directory, path, channel)
    channel.write(encode_header())
    self._allocator.publish(log_id)
    self._status.created(log_id)
    return log


def checkpoint_without_fsync(self: SingleEntryLogManager) -> None:
    """flushRotatedLogs that writes the rotated logs to the OS but never fsyncs them, and
    still marks them flushed."""
    channels, self._rotated = self._rotated, []
    for log in channels:
        log.channel.flush()
        self._flushed[log.log_id] = log.describe(LogState.FLUSHED)
        self._status.flushed(log.log_id)
        with contextlib.suppress(FsError):
            log.channel.close()


def flush_forgetting_rotated_logs(self: SingleEntryLogManager) -> None:
    """flush() that forces the active log but leaves the rotated ones unsynced."""
    active = self._active
    if active is not None:
        self._guard(active, "syncing", functools.partial(active.channel.flush_and_force, True))


def allocator_start_from_last_id_only(self: LogIdAllocator, directory: str) -> int:
    """Start-up that trusts ``lastId`` alone (no largest-gap rule over the files present)."""
    last = read_last_id(self._fs, directory)
    return -1 if last is None else last


def allocator_next_id_without_existence_check(
    self: LogIdAllocator, file_name: Callable[[int], str] = log_file_name
) -> EntryLogId:
    """next_id that does not skip ids whose file already exists in a ledger directory."""
    candidate = EntryLogId(0 if self._last_id >= 2**31 - 1 else self._last_id + 1)
    self._last_id = candidate
    return candidate


def allocator_trusting_last_id(monkeypatch: object) -> None:
    """Both halves of the id bug at once (lastId alone, no existence check)."""
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setattr(LogIdAllocator, "_last_id_of", allocator_start_from_last_id_only)
    monkeypatch.setattr(LogIdAllocator, "next_id", allocator_next_id_without_existence_check)
