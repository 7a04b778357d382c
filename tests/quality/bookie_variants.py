"""Known-bad variants of the journal and the bookie, each a real way to lose data.

They live here, never in impl/. tests/quality/test_bookie_crash_catches.py checks that the
bookie crash check (proofs/crash/bookie_check.py) catches each of them.
"""

from __future__ import annotations

from collections.abc import Callable

from impl.bookie.checkpoint import Checkpointer
from impl.journal.journal import Journal, OnDurable
from impl.journal.last_mark import LogMark, write_last_mark


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
