"""Known-bad variants of the journal and the bookie, each a real way to lose data.

They live here, never in impl/. tests/quality/test_bookie_crash_catches.py checks that the
bookie crash check (proofs/crash/bookie_check.py) catches each of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from impl.bookie.checkpoint import Checkpointer
from impl.journal.journal import Journal, OnDurable
from impl.journal.last_mark import LogMark, write_last_mark
from spec.errors import FsError


def journal_acking_at_once(
    original: Callable[[Journal, bytes, OnDurable | None], None],
) -> Callable[[Journal, bytes, OnDurable | None], None]:
    """Journal.append that acknowledges a record as soon as it is queued, before the fsync
    that covers it (the bug the kill -9 test caught in an early bookie)."""

    def append(self: Journal, record: bytes, on_durable: OnDurable | None = None) -> None:
        original(self, record, None)
        if on_durable is not None:
            on_durable(None)

    return append


def checkpoint_persisting_last_mark_first(
    self: Checkpointer, mark: LogMark, journal: Journal | None
) -> None:
    """Checkpointer.complete persisting lastMark before the entry logs and the index are
    flushed: a crash in between replays from a mark past records whose entries are not
    durable. The post-replay checkpoint (``journal`` None) runs the same order."""
    if journal is None or mark != self._last_mark:
        write_last_mark(self._fs, list(self._ledger_dirs), mark)
    self._last_mark = mark
    with self._state_lock:
        self._entry_logger.flush()
        self._index.flush()
    if journal is not None:
        journal.trim(mark)


WriteGroup = Callable[
    [Journal, list[bytes], int, list[OnDurable | None], list[OnDurable | None]], int
]
SyncGroup = Callable[[Journal, int, list[OnDurable | None]], None]


def journal_retrying_a_failed_fsync(
    original_write: WriteGroup, original_sync: SyncGroup
) -> tuple[WriteGroup, SyncGroup]:
    """Journal._write and Journal._sync treating a failed fsync as transient: the sync reads
    the group back, writes it again only if the file no longer holds it, and syncs again;
    the retry succeeds, so the group is acknowledged. Right where a failed fsync reverts the
    file (the rewrite makes the bytes dirty again); wrong on ext4 and XFS, where the bytes
    stay readable but their pages were marked clean, so the retry syncs nothing and a crash
    loses acknowledged adds (PostgreSQL's "fsyncgate" mistake). Only a SimDisk with
    fsync_failure="keep" shows it. ``_write`` is unchanged but for remembering the group."""
    groups: dict[int, bytes] = {}

    def write(
        self: Journal,
        records: list[bytes],
        size_bytes: int,
        deferred: list[OnDurable | None],
        callbacks: list[OnDurable | None],
    ) -> int:
        written = original_write(self, records, size_bytes, deferred, callbacks)
        groups[id(self)] = b"".join(records)  # the padding was appended to ``records``
        return written

    def sync(self: Journal, written_bytes: int, callbacks: list[OnDurable | None]) -> None:
        handle = self._handle
        assert handle is not None
        try:
            handle.fsync()
        except FsError:
            group = groups[id(self)]
            if handle.pread(self._position, len(group)) != group:
                handle.pwrite(self._position, group)
        original_sync(self, written_bytes, callbacks)

    return write, sync


def journal_simply_retrying_a_failed_fsync(original_sync: SyncGroup) -> SyncGroup:
    """Journal._sync that ignores a failed fsync and syncs again; the retry succeeds, so the
    group is acknowledged. Loses acknowledged adds under both behaviours of a failed fsync:
    where it reverts the file the group's bytes are gone before the retry, where it keeps
    them they are never written back."""

    def sync(self: Journal, written_bytes: int, callbacks: list[OnDurable | None]) -> None:
        handle = self._handle
        assert handle is not None
        with contextlib.suppress(FsError):
            handle.fsync()
        original_sync(self, written_bytes, callbacks)

    return sync
