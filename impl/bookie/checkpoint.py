"""The checkpoint: make everything the journal covered up to a mark durable elsewhere, then
persist that mark as lastMark and forget the journals before it (SyncThread.checkpoint +
Journal.checkpointComplete).

Spec pages: spec/format/journal.md ("The lastMark file", "Checkpoint"),
spec/format/ledger_index.md ("Writing"), spec/properties.md (1 durability: the journal before
lastMark may be trimmed only once its records are durable in the entry logs and the index; 6
forward progress: lastMark never moves backwards).

Why a collaborator of its own: lastMark has one writer, and the order of a checkpoint is the
promise the whole engine rests on: (1) the entry logs are forced, (2) the index is flushed
(it must never name bytes that are not durable), (3) only then lastMark is written in every
ledger directory, (4) only then are the journals before it deleted. The :class:`Checkpointer`
owns lastMark and that order; the bookie decides *when* (its failure rule: no checkpoint after
a failure) and captures the mark.

Threads: ``lock`` serialises checkpoints and guards lastMark; a caller holds it from the
capture of the mark to the end of :meth:`Checkpointer.complete`. The entry logs and the index
are flushed under the bookie's state lock (passed in), so that adds wait meanwhile, as they wait
in BookKeeper, whose entry logger is synchronized too; lastMark is written and the journal
trimmed outside it.
"""

from __future__ import annotations

import threading

from impl.entrylog.logger import EntryLogger
from impl.fs.api import FileSystem
from impl.index.ledger_index import LedgerIndex
from impl.journal.journal import Journal
from impl.journal.last_mark import IndexCoverage, LogMark, write_last_mark


class Checkpointer:
    """Owns lastMark and the order of a checkpoint (module docstring)."""

    def __init__(
        self,
        fs: FileSystem,
        ledger_dirs: tuple[str, ...],
        state_lock: threading.RLock,
        entry_logger: EntryLogger,
        index: LedgerIndex,
        last_mark: LogMark,
    ) -> None:
        """``last_mark``: the lastMark on disk at start (what recovery replayed from)."""
        #: Serialises checkpoints; held from the capture of a mark to the end of ``complete``.
        self.lock = threading.Lock()
        self._fs = fs
        self._ledger_dirs = ledger_dirs
        self._state_lock = state_lock
        self._entry_logger = entry_logger
        self._index = index
        self._start_mark = last_mark
        self._last_mark = last_mark

    @property
    def last_mark(self) -> LogMark:
        """The lastMark last persisted (or read at start)."""
        return self._last_mark

    def complete(self, mark: LogMark, journal: Journal | None) -> None:
        """The checkpoint's steps after the capture of ``mark`` (the journal's durable mark,
        captured after the records before it were applied to the entry logs and the index).

        ``journal`` is trimmed to the mark at the end. None for the post-replay checkpoint: the
        journal is not open yet, so nothing is trimmed (as BookieImpl's post-replay flush,
        checkpointComplete with compact=false), and lastMark is written even when it did not
        move, because a ledger directory may lack the file. Raises what the disk raises; the
        caller holds ``lock``."""
        self.flush_storage()
        self.persist(mark, journal)

    def flush_storage(self) -> None:
        """The checkpoint's first half, after the capture of its mark: force the entry logs,
        then flush the index. Raises what the disk raises; the caller holds ``lock``."""
        assert self.lock.locked(), "a checkpoint runs under the checkpoint lock"
        with self._state_lock:
            # Entry logs first: the index must never name bytes that are not durable. flush
            # forces the active log and the rotated ones (SyncThread.flush in single-log mode).
            self._entry_logger.flush()
            # Then the index: crash-consistent on its own (spec/format/ledger_index.md); it
            # now holds every key, fence and location of the records before the mark.
            self._index.flush()

    def persist(self, mark: LogMark, journal: Journal | None) -> None:
        """The checkpoint's second half, once ``flush_storage`` has made durable everything
        before ``mark``: persist it as lastMark, then trim ``journal`` (see ``complete``).
        Raises what the disk raises; the caller holds ``lock``."""
        assert self.lock.locked(), "a checkpoint runs under the checkpoint lock"
        assert mark >= self._last_mark, f"lastMark would move back: {self._last_mark} -> {mark}"
        # Only now may the journal before the mark be forgotten: persist the mark in every
        # ledger directory (the largest wins at start, so it never moves back) ...
        if journal is None or mark != self._last_mark:
            # With the mark, what the index durably holds now: a later start refuses an index
            # with less (a deleted newest segment, a shortened deleted-ledgers file).
            index = self._index
            coverage = IndexCoverage(index.newest_segment_seq, index.deleted_records)
            write_last_mark(self._fs, list(self._ledger_dirs), mark, coverage=coverage)
        self._last_mark = mark
        # ... and delete the journals wholly before it, keeping journalMaxBackups.
        if journal is not None:
            journal.trim(mark)

    def check_invariants(self) -> None:
        assert self._last_mark >= self._start_mark, (self._last_mark, self._start_mark)
