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
from collections.abc import Callable

from impl.bookie.held import HeldEntries
from impl.entrylog.logger import EntryLogger
from impl.format.names import COVERAGE_FILE_NAME
from impl.fs.api import FileSystem, join
from impl.index.ledger_index import LedgerIndex
from impl.journal.journal import Journal
from impl.journal.last_mark import (
    IndexCoverage,
    LogMark,
    write_coverage_record,
    write_last_mark,
)
from spec.errors import FsError


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
        *,
        journal_dir: str | None = None,
        say: Callable[[str], None] | None = None,
        held: HeldEntries | None = None,
    ) -> None:
        """``last_mark``: the lastMark on disk at start (what recovery replayed from).
        ``journal_dir``: the journal directory's ``current/``, where the coverage record is
        kept (None: none is kept); ``say`` reports a record that could not be written."""
        #: Serialises checkpoints; held from the capture of a mark to the end of ``complete``.
        self.lock = threading.Lock()
        self._fs = fs
        self._ledger_dirs = ledger_dirs
        self._state_lock = state_lock
        self._entry_logger = entry_logger
        self._index = index
        self._start_mark = last_mark
        self._last_mark = last_mark
        #: The index coverage the lastMark files hold (None: not written by this process).
        self._last_coverage: IndexCoverage | None = None
        self._journal_dir = journal_dir
        self._say = say
        #: Entries served from the journal: written to the entry logs before each flush.
        self._held = held
        #: Serialises writes of the coverage record (a checkpoint's and a delete's).
        self._record_lock = threading.Lock()
        self._recorded: tuple[LogMark, IndexCoverage] | None = None

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

    def flush_storage(self, *, checkpoint: bool = True) -> None:
        """The checkpoint's first half, after the capture of its mark: seal the write-closed
        ledgers' logs (a checkpoint's only: ``checkpoint`` False for a compaction's index
        phase, which flushes as this half does), force the entry logs, then flush the index.
        Raises what the disk raises; the caller holds ``lock``."""
        assert self.lock.locked(), "a checkpoint runs under the checkpoint lock"
        with self._state_lock:
            # Entries a start served from the journal (no room then) go to the entry logs
            # first: the mark about to be persisted lies past their records. No room still:
            # NoWritableLedgerDir, nothing persisted, and they stay served from the journal.
            if self._held is not None and len(self._held):
                self._held.drain(self._entry_logger, self._index)
            if checkpoint:
                # The write-closed ledgers' logs (spec/protocol/write_close.md), idle slots.
                self._entry_logger.seal_for_checkpoint()
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
        # With the mark, what the index durably holds now: a later start refuses an index
        # with less (a deleted newest segment, a shortened deleted-ledgers file). Written
        # when either moved: a delete or a compaction's index flush moves only the coverage.
        index = self._index
        coverage = IndexCoverage(index.newest_segment_seq, index.deleted_records)
        if journal is None or mark != self._last_mark or coverage != self._last_coverage:
            write_last_mark(self._fs, list(self._ledger_dirs), mark, coverage=coverage)
            self._last_coverage = coverage
        self._last_mark = mark
        self._record(mark, coverage)
        # ... and delete the journals wholly before it, keeping journalMaxBackups.
        if journal is not None:
            journal.trim(mark)

    def record_deletes(self) -> None:
        """A delete was made durable in the index: count it in the coverage record now, not
        at the next checkpoint, so an old copy of the ledger directories put back after a
        kill -9 is refused too (spec/format/identity.md, "Old copies"). The caller holds the
        state lock (the index's counts are read under it)."""
        index = self._index
        coverage = IndexCoverage(index.newest_segment_seq, index.deleted_records)
        self._record(self._last_mark, coverage)

    def _record(self, mark: LogMark, coverage: IndexCoverage) -> None:
        """Write the coverage record in the journal directory, after lastMark (``mark`` is
        persisted) and the index (``coverage`` is durable): a lower bound of what the ledger
        directories hold, which a start checks them against (impl/bookie/recovery.py,
        ``coverage_record_damage``). A record that cannot be written is said and skipped: it
        only checks, and a stale one is still a lower bound (the next checkpoint or delete
        writes it again)."""
        if self._journal_dir is None:
            return
        with self._record_lock:
            if self._recorded == (mark, coverage):
                return
            try:
                write_coverage_record(self._fs, self._journal_dir, mark, coverage)
            except FsError as exc:
                if self._say is not None:
                    self._say(
                        f"could not write {join(self._journal_dir, COVERAGE_FILE_NAME)}: "
                        f"{exc}. Until a later checkpoint or delete writes it, a start checks "
                        "the ledger directories against an older record (spec/format/"
                        "identity.md, Old copies)"
                    )
                return
            self._recorded = (mark, coverage)

    def check_invariants(self) -> None:
        assert self._last_mark >= self._start_mark, (self._last_mark, self._start_mark)
