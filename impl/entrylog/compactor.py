"""Transactional compaction of one entry log in three phases, and recovery of its leftovers.

Spec page: spec/protocol/compaction.md (the file states, every crash point and what recovery
reaches from it, the order of operations with their fsyncs, and what BookKeeper does
differently). BookKeeper sources: TransactionalEntryLogCompactor (BP-6: ScanEntryLogPhase,
FlushCompactionLogPhase, UpdateIndexPhase, cleanUpAndRecover) and DefaultEntryLogger's
EntryLoggerCompactionEntryLog and incompleteCompactionLogs.

Why three phases and two hard links: each phase ends with a name on disk that says how far it
got, so a crash anywhere leaves a state recovery can name and finish or undo without reading
the index. ``<new>.log.compacting`` (phase 1, copy) is a log nobody relies on yet: recovery
removes it. ``<new>.log.<src>.compacted`` (phase 2, flush) is made only once the copy and its
ledgers map are fsynced: from then on the compaction is finished by recovery whatever happens.
``<new>.log`` (phase 3, index) is linked before the index names it, and the source goes only
after the index that no longer names it is durable.

Why every step is a method: the steps are what the crash checks cut between, and the known-bad
variants of tests/quality are subclasses that change one step (remove the source before the
index flush, BookKeeper #1534; name the recovered log in decimal, #4804; leave ``.compacting``
after recovery; update the index before the compaction log is fsynced). The bookie does phase
3's index part between :meth:`TransactionalCompactor.link` and
:meth:`TransactionalCompactor.remove_source`; recovery does it through ``apply_moves``.

Every name is made and parsed by impl/format/names.py (lower-case hex), every byte goes
through the FileSystem seam, the ledgers map is encoded by impl/format/entry_log.py as sealing
does, and the source is read with impl/entrylog/reader.py's scan.

Differences from BookKeeper, each on purpose (spec/protocol/compaction.md says more):

- The source is removed before ``.compacted``, not after: a crash between the two then leaves
  a ``.compacted`` that recovery finishes, where BookKeeper's order can leave a source beside
  a finished compaction that nothing reclaims until its ledgers are deleted.
- Every name made or removed is followed by an fsync of its directory (BookKeeper fsyncs none),
  so the on-disk state is always one of the states of the page.
- The recovered log is named ``<hex new>.log`` by the names module (BookKeeper #4804 wrote it
  in decimal).
- A ``.compacted`` that is not well formed is refused with DamagedFile when its source is gone
  (the data exists nowhere else) instead of being recovered or deleted.
- The index is flushed with the entry logs forced first, as a checkpoint flushes it (the
  caller's ``apply_moves``), where BookKeeper's flushEntriesLocationsIndex flushes the index
  alone.

Not verified here: concurrent compactions (one at a time, as BookKeeper's GC thread), entry log
per ledger.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import attrs

from impl.entrylog.logger import EntryLogger
from impl.entrylog.manager import LogChannel
from impl.entrylog.reader import (
    iter_record_chunks,
    iter_records,
    map_as_written,
    read_header,
    scan,
)
from impl.format.entry_log import (
    LEDGERS_MAP_OFFSET_POSITION,
    RECORD_SIZE_PREFIX,
    encode_ledgers_map,
    encode_map_location,
)
from impl.format.names import (
    compacted_file_name,
    compacting_file_name,
    log_file_name,
    parse_compacted_file_name,
    parse_compacting_file_name,
)
from impl.fs.api import FileHandle, FileSystem, join, parent
from impl.limits import LIMITS, Limits
from spec.errors import (
    REPLICA_ADVICE,
    DamagedFile,
    EntryLogError,
    FsError,
    FsNoSpace,
    FsNotFound,
    MissingLogFile,
    NoWritableLedgerDir,
)
from spec.ids import EntryId, EntryLogId, LedgerId, Location, make_location

__all__ = [
    "Compaction",
    "LeftoverReport",
    "MovedEntry",
    "Throttle",
    "TransactionalCompactor",
    "recover_leftovers",
]

#: Phases a Compaction reports (spec/protocol/compaction.md, "The phases").
COPYING = "copying"
COPIED = "copied"
FLUSHED = "flushed"
DONE = "done"
ABORTED = "aborted"


class Throttle(Protocol):
    """Paces the copy (compactionRateByEntries / compactionRateByBytes): called once per
    record copied, before it is written; it may sleep on its clock. The GC owns the clock."""

    def acquire(self, records: int, bytes_: int) -> None:
        """Wait until ``records`` more records of ``bytes_`` bytes may be copied."""
        ...


@attrs.frozen
class MovedEntry:
    """One record copied: where it was and where it is now. At recovery the source is not
    read again (it may be gone): ``old`` then names the source log at offset 0, which no
    record has, and the index update compares log ids only."""

    ledger_id: LedgerId
    entry_id: EntryId
    old: Location
    new: Location


@attrs.define(eq=False)
class Compaction:
    """One compaction in flight, owned by the compactor that made it.

    ``phase``: ``copying`` while phase 1 runs, then ``copied``, ``flushed`` (phase 2 returned:
    recovery finishes it whatever happens), ``done`` or ``aborted``. ``new_log`` is None once
    phase 1 found nothing live (the source is then deleted and ``phase`` is ``done``).
    ``linked``: ``<new>.log`` is made durable (phase 3 began; no abort any more)."""

    source: EntryLogId
    directory: str
    source_path: str
    new_log: EntryLogId | None = None
    phase: str = COPYING
    moved: list[MovedEntry] = attrs.Factory(list)
    bytes_moved: int = 0
    linked: bool = False
    #: Per ledger, the bytes of its records in the new log (size prefixes included).
    ledgers: dict[int, int] = attrs.Factory(dict)
    #: The compaction log being written, until phase 2 closes it.
    log: LogChannel | None = None

    @property
    def compacting_path(self) -> str:
        assert self.new_log is not None
        return join(self.directory, compacting_file_name(self.new_log))

    @property
    def compacted_path(self) -> str:
        assert self.new_log is not None
        return join(self.directory, compacted_file_name(self.new_log, self.source))

    @property
    def new_log_path(self) -> str:
        assert self.new_log is not None
        return join(self.directory, log_file_name(self.new_log))

    def file_names(self) -> tuple[str, ...]:
        """The names of the compaction files this compaction holds now: ``.compacting`` once
        phase 1 copied, ``.compacted`` once phase 2 returned (and ``<new>.log`` beside it once
        phase 3 linked it, which is an entry log), none before or after."""
        if self.new_log is None or self.phase in (DONE, ABORTED):
            return ()
        if self.phase in (COPYING, COPIED):
            return (compacting_file_name(self.new_log),)
        return (compacted_file_name(self.new_log, self.source),)

    def check_invariants(self) -> None:
        assert self.phase in (COPYING, COPIED, FLUSHED, DONE, ABORTED), self.phase
        assert self.bytes_moved == sum(self.ledgers.values()), (self.bytes_moved, self.ledgers)
        assert self.bytes_moved >= len(self.moved) * RECORD_SIZE_PREFIX
        if self.linked:
            assert self.phase in (FLUSHED, DONE), self.phase
        if self.phase in (COPIED, FLUSHED):
            assert self.new_log is not None and self.moved
        if self.phase == COPIED:
            assert self.log is not None
        for moved in self.moved:
            assert moved.old >> 32 == self.source, moved
            assert self.new_log is not None and moved.new >> 32 == self.new_log, moved


@attrs.frozen
class LeftoverReport:
    """What :func:`recover_leftovers` did: the ``.compacting`` files removed (paths), the
    compactions finished (new log id, source id), the ``.compacted`` files removed because
    they were not well formed while their source was still there (paths), the entries
    whose new locations were handed to ``apply_moves``, and the sources of finished
    compactions kept because ``apply_moves`` said the index still needs them."""

    removed_compacting: tuple[str, ...] = ()
    finished: tuple[tuple[EntryLogId, EntryLogId], ...] = ()
    removed_compacted: tuple[str, ...] = ()
    entries_moved: int = 0
    kept_sources: tuple[EntryLogId, ...] = ()

    @property
    def anything(self) -> bool:
        return bool(self.removed_compacting or self.finished or self.removed_compacted)


class TransactionalCompactor:
    """BP-6's three phases over one source log at a time (spec/protocol/compaction.md).

    ``limits.scan_chunk_bytes`` sizes the scan of the source and ``ledgers_map_batch_max``
    the compaction log's map records; ``throttle`` paces the copy. Errors: FsError from the
    disk (FsNoSpace becomes NoWritableLedgerDir), MissingLogFile for a source that is gone;
    phases 1 and 2 roll back (:meth:`abort`) before they raise."""

    def __init__(
        self,
        fs: FileSystem,
        entry_logger: EntryLogger,
        *,
        limits: Limits = LIMITS,
        throttle: Throttle | None = None,
    ) -> None:
        self._fs = fs
        self._entry_logger = entry_logger
        self._limits = limits
        self._throttle = throttle

    # --- phase 1: copy ---------------------------------------------------------------------

    def copy(self, source: EntryLogId, is_live: Callable[[LedgerId], bool]) -> Compaction:
        """Allocate ``<new>.log.compacting`` and copy into it every record of ``source`` whose
        ledger ``is_live`` now. Nothing live: the compaction log and the source are removed
        (their directory entries made durable) and the Compaction is ``done`` with
        ``new_log`` None. Any failure rolls back and raises."""
        source_path = self._entry_logger.find_log(source)
        if source_path is None:
            raise MissingLogFile(source)
        handle = self._fs.open(source_path, read_only=True)
        try:
            log = self._allocate()
            c = Compaction(
                source=source,
                directory=log.directory,
                source_path=source_path,
                new_log=log.log_id,
                log=log,
            )
            try:
                self._copy_records(c, handle, is_live)
            except BaseException:
                self.abort(c)
                raise
        finally:
            with contextlib.suppress(FsError):
                handle.close()
        if not c.moved:
            try:
                self._nothing_live(c)
            except BaseException:
                if c.new_log is not None:
                    self.abort(c)
                raise
        else:
            c.phase = COPIED
        c.check_invariants()
        return c

    def _allocate(self) -> LogChannel:
        """The compaction log, from the entry logger's shared id counter."""
        return self._entry_logger.create_compaction_log()

    def _copy_records(
        self, c: Compaction, src: FileHandle, is_live: Callable[[LedgerId], bool]
    ) -> None:
        # The hot loop of a compaction (tests/bench/bench_compaction.py): each live record is
        # sliced out of the chunk the scan already read (one pread a chunk, not a record), and
        # only a record running past its chunk's end is read on its own. ``is_live`` is asked
        # once per ledger per chunk (it takes the bookie's lock): a delete during the copy is
        # still seen from the next chunk on, and phase 3 asks again before the index moves.
        chunk_bytes = self._limits.scan_chunk_bytes
        throttle = self._throttle
        append = self._append
        for chunk in iter_record_chunks(src, c.source, chunk_bytes=chunk_bytes):
            base, data = chunk.base, chunk.data
            held = base + len(data)
            live: dict[int, bool] = {}
            for rec in chunk.records:
                ledger_id = rec.ledger_id
                keep = live.get(ledger_id)
                if keep is None:
                    keep = live[ledger_id] = is_live(LedgerId(ledger_id))
                if not keep:
                    continue
                start = rec.offset - RECORD_SIZE_PREFIX
                end = rec.offset + rec.size
                if end <= held:
                    record = data[start - base : end - base]
                else:
                    record = src.pread(start, end - start)
                    if len(record) != end - start:
                        raise EntryLogError(
                            c.source,
                            f"the record at offset {start} of {c.source_path} was cut short "
                            "while it was copied: the file shrank",
                        )
                if throttle is not None:
                    throttle.acquire(1, len(record))
                append(c, ledger_id, rec.entry_id, rec.offset, record)

    def _append(
        self, c: Compaction, ledger_id: int, entry_id: int, old_offset: int, record: bytes
    ) -> None:
        """Append one record to the compaction log and remember where it went."""
        log = c.log
        assert log is not None and c.new_log is not None
        new_offset = log.channel.position + RECORD_SIZE_PREFIX
        try:
            log.channel.write_record(record)
        except FsNoSpace as exc:
            raise self._no_space(c, "copying a record", exc) from exc
        c.ledgers[ledger_id] = c.ledgers.get(ledger_id, 0) + len(record)
        c.bytes_moved += len(record)
        c.moved.append(
            MovedEntry(
                LedgerId(ledger_id),
                EntryId(entry_id),
                make_location(c.source, old_offset),
                make_location(c.new_log, new_offset),
            )
        )

    def _nothing_live(self, c: Compaction) -> None:
        """Phase 1 found no live record: drop the empty compaction log, then the source."""
        self._drop_compaction_log(c)
        c.new_log = None
        self._remove_source_file(c)
        c.phase = DONE

    def _drop_compaction_log(self, c: Compaction) -> None:
        log = c.log
        c.log = None
        if log is not None:
            with contextlib.suppress(FsError):
                log.channel.close()
        self._fs.unlink(c.compacting_path)
        self._fs.fsync_dir(c.directory)

    # --- phase 2: flush --------------------------------------------------------------------

    def flush(self, c: Compaction) -> None:
        """Append the ledgers map, fsync the compaction log, link ``.compacted``, fsync the
        directory, unlink ``.compacting``, fsync the directory. Once this returns, recovery
        finishes the compaction whatever happens. A failure rolls back and raises."""
        assert c.phase == COPIED, c.phase
        try:
            self._write_ledgers_map(c)
            self._sync_compaction_log(c)
            self._mark_compacted(c)
            self._remove_compacting(c)
        except BaseException:
            self.abort(c)
            raise
        c.phase = FLUSHED
        c.check_invariants()

    def _write_ledgers_map(self, c: Compaction) -> None:
        """As sealing writes it (impl/entrylog/manager.py ``_seal``): the map records after
        the last entry, then the header pointing at them."""
        log = c.log
        assert log is not None
        channel = log.channel
        self._guard(c, "flushing the compaction log", channel.flush)
        map_offset = channel.position
        pairs = sorted(c.ledgers.items())
        data = encode_ledgers_map(pairs, self._limits.ledgers_map_batch_max)
        if data:
            self._guard(c, "appending the ledgers map", lambda: channel.write(data))
        self._guard(c, "flushing the ledgers map", channel.flush)
        location = encode_map_location(map_offset, len(pairs))
        self._guard(
            c,
            "updating the header",
            lambda: channel.write_in_place(LEDGERS_MAP_OFFSET_POSITION, location),
        )

    def _sync_compaction_log(self, c: Compaction) -> None:
        """fsync the compaction log, then close it: its bytes never change again."""
        log = c.log
        assert log is not None
        self._guard(c, "syncing the compaction log", lambda: log.channel.flush_and_force(True))
        c.log = None
        with contextlib.suppress(FsError):
            log.channel.close()

    def _mark_compacted(self, c: Compaction) -> None:
        """The commit point of phase 2: ``.compacted`` made durable."""
        self._fs.link(c.compacting_path, c.compacted_path)
        self._fs.fsync_dir(c.directory)

    def _remove_compacting(self, c: Compaction) -> None:
        self._fs.unlink(c.compacting_path)
        self._fs.fsync_dir(c.directory)

    # --- phase 3: index ----------------------------------------------------------------------

    def link(self, c: Compaction) -> None:
        """Phase 3, first part: ``<new>.log`` linked from ``.compacted`` and made durable, so
        the index may name it. Raises FsError (the bookie then fails: recovery finishes)."""
        assert c.phase == FLUSHED and not c.linked, (c.phase, c.linked)
        self._link_new_log(c)
        c.linked = True

    def _link_new_log(self, c: Compaction) -> None:
        if not self._fs.exists(c.new_log_path):
            self._fs.link(c.compacted_path, c.new_log_path)
        self._fs.fsync_dir(c.directory)

    def remove_source(self, c: Compaction) -> None:
        """Phase 3, last part, once the index naming the new log is durable: unlink the
        source and fsync its directory, then unlink ``.compacted`` and fsync its directory."""
        assert c.phase == FLUSHED and c.linked, (c.phase, c.linked)
        self._remove_source_file(c)
        self._remove_compacted(c)
        c.phase = DONE
        c.check_invariants()

    def _remove_source_file(self, c: Compaction) -> None:
        remove_log_file(self._fs, self._entry_logger, c.source, c.source_path)

    def _remove_compacted(self, c: Compaction) -> None:
        self._fs.unlink(c.compacted_path)
        self._fs.fsync_dir(c.directory)

    # --- abort -------------------------------------------------------------------------------

    def abort(self, c: Compaction) -> None:
        """Roll back phase 1 or 2: remove ``.compacting`` and ``.compacted``, leaving the
        source and the index untouched. Best effort: a name that cannot be removed now is
        removed (``.compacting``) or finished (``.compacted``) by the next recovery, which
        is safe either way. Phase 3 (``linked``) cannot be rolled back."""
        assert not c.linked and c.phase in (COPYING, COPIED, FLUSHED), (c.phase, c.linked)
        log = c.log
        c.log = None
        if log is not None:
            with contextlib.suppress(FsError):
                log.channel.close()
        if c.new_log is not None:
            for path in (c.compacting_path, c.compacted_path):
                with contextlib.suppress(FsError):
                    self._fs.unlink(path)
            with contextlib.suppress(FsError):
                self._fs.fsync_dir(c.directory)
        c.phase = ABORTED

    # --- helpers -----------------------------------------------------------------------------

    def _guard(self, c: Compaction, action: str, step: Callable[[], object]) -> None:
        try:
            step()
        except FsNoSpace as exc:
            raise self._no_space(c, action, exc) from exc

    def _no_space(self, c: Compaction, action: str, exc: FsNoSpace) -> NoWritableLedgerDir:
        del exc  # chained by the caller
        path = c.compacting_path if c.new_log is not None else c.directory
        return NoWritableLedgerDir(
            f"{c.directory}: no space left on device while {action} ({path}) in the "
            f"compaction of entry log {log_file_name(c.source)}. The compaction was rolled "
            "back: the source log and the index are unchanged. Free space in "
            f"{c.directory}, then run garbage collection again"
        )


def remove_log_file(
    fs: FileSystem, entry_logger: EntryLogger, log_id: EntryLogId, path: str
) -> None:
    """Unlink an entry log and make that durable (removeEntryLog, with our directory fsync);
    its cached read handle is closed first."""
    entry_logger.forget_log(log_id)
    fs.unlink(path)
    fs.fsync_dir(parent(path))


# --- recovery -----------------------------------------------------------------------------------


def recover_leftovers(
    fs: FileSystem,
    ledger_dirs: Sequence[str],
    entry_logger: EntryLogger,
    apply_moves: Callable[[list[MovedEntry]], bool | None],
    *,
    limits: Limits = LIMITS,
) -> LeftoverReport:
    """Finish or undo what interrupted compactions left (cleanUpAndRecover), in every ledger
    directory: remove every ``.compacting``; finish every well-formed ``.compacted`` (link
    ``<new>.log`` if missing, rescan it, ``apply_moves`` its records, unlink the source if
    present, unlink ``.compacted``, each name change made durable). ``apply_moves`` must make
    the index name the new locations durably before it returns (the source goes next).
    When ``apply_moves`` answers True the index still places entries in the source that the
    compaction log does not hold (a scan stopped by damage in the source leaves them
    behind): the source is kept, only ``.compacted`` is removed, and both logs stay.

    A ``.compacted`` that is not well formed is removed like a ``.compacting`` while its
    source is there, and refused with DamagedFile when the source is gone. Raises FsError
    from the disk; run again after a failure (every step is idempotent)."""
    return LeftoverRecovery(fs, ledger_dirs, entry_logger, apply_moves, limits=limits).run()


class LeftoverRecovery:
    """The steps of :func:`recover_leftovers`, each a method (tests/quality overrides them)."""

    def __init__(
        self,
        fs: FileSystem,
        ledger_dirs: Sequence[str],
        entry_logger: EntryLogger,
        apply_moves: Callable[[list[MovedEntry]], bool | None],
        *,
        limits: Limits = LIMITS,
    ) -> None:
        self._fs = fs
        self._dirs = tuple(ledger_dirs)
        self._kept: list[EntryLogId] = []
        self._entry_logger = entry_logger
        self._apply_moves = apply_moves
        self._limits = limits
        self._removed_compacting: list[str] = []
        self._finished: list[tuple[EntryLogId, EntryLogId]] = []
        self._removed_compacted: list[str] = []
        self._moved = 0

    def run(self) -> LeftoverReport:
        for directory in self._dirs:
            self.remove_compacting(directory)
        for directory in self._dirs:
            for name, new_id, src_id in compacted_names(self._fs.listdir(directory)):
                self.finish(directory, name, new_id, src_id)
        return LeftoverReport(
            removed_compacting=tuple(self._removed_compacting),
            finished=tuple(self._finished),
            removed_compacted=tuple(self._removed_compacted),
            entries_moved=self._moved,
            kept_sources=tuple(self._kept),
        )

    def remove_compacting(self, directory: str) -> None:
        """Unlink every ``<hex>.log.compacting`` of ``directory``, then fsync it."""
        removed = False
        for name in sorted(self._fs.listdir(directory)):
            if parse_compacting_file_name(name) is None:
                continue
            path = join(directory, name)
            self._fs.unlink(path)
            self._removed_compacting.append(path)
            removed = True
        if removed:
            self._fs.fsync_dir(directory)

    def finish(self, directory: str, name: str, new_id: EntryLogId, src_id: EntryLogId) -> None:
        """Finish one compaction from its ``.compacted`` file (or remove a malformed one)."""
        path = join(directory, name)
        source_path = self._entry_logger.find_log(src_id)
        reason = self.malformed(path, new_id)
        if reason is not None:
            if source_path is None:
                raise malformed_leftover_damage(path, src_id, reason)
            self._fs.unlink(path)
            self._fs.fsync_dir(directory)
            self._removed_compacted.append(path)
            return
        new_path = self.link_new_log(directory, path, new_id)
        moves = self.rescan(new_path, new_id, src_id)
        keep_source = self._apply_moves(moves) is True
        self._moved += len(moves)
        if source_path is not None:
            if keep_source:
                self._kept.append(src_id)
            else:
                remove_log_file(self._fs, self._entry_logger, src_id, source_path)
        self.remove_compacted(directory, path)
        self._finished.append((new_id, src_id))

    def new_log_name(self, new_id: EntryLogId) -> str:
        """The recovered log's name: lower-case hex (BookKeeper #4804 wrote decimal)."""
        return log_file_name(new_id)

    def link_new_log(self, directory: str, compacted_path: str, new_id: EntryLogId) -> str:
        new_path = join(directory, self.new_log_name(new_id))
        if not self._fs.exists(new_path):
            self._fs.link(compacted_path, new_path)
        self._fs.fsync_dir(directory)
        return new_path

    def rescan(self, new_path: str, new_id: EntryLogId, src_id: EntryLogId) -> list[MovedEntry]:
        """The new locations of every record of the new log (recoverEntryLocations)."""
        handle = self._fs.open(new_path, read_only=True)
        try:
            records = iter_records(handle, new_id, chunk_bytes=self._limits.scan_chunk_bytes)
            return [
                MovedEntry(
                    LedgerId(r.ledger_id),
                    EntryId(r.entry_id),
                    make_location(src_id, 0),
                    make_location(new_id, r.offset),
                )
                for r in records
            ]
        finally:
            with contextlib.suppress(FsError):
                handle.close()

    def remove_compacted(self, directory: str, path: str) -> None:
        self._fs.unlink(path)
        self._fs.fsync_dir(directory)

    def malformed(self, path: str, log_id: EntryLogId) -> str | None:
        """Why the file at ``path`` is not a well-formed compaction log, else None: it needs
        a good header and either a whole ledgers map equal to its scan or records that scan
        to the end of the file (what phase 2 fsyncs before it links ``.compacted``)."""
        return malformed_compaction_log(self._fs, path, log_id, self._limits)


def malformed_leftover_damage(path: str, src_id: int, reason: str) -> DamagedFile:
    """The refusal of a ``.compacted`` file that is not well formed (``reason``) when its
    source log is in no ledger directory (spec/protocol/compaction.md, "Recovery"): one
    decision for a start and for ``bkref inspect``."""
    return DamagedFile(
        path,
        None,
        f"the compaction log of entry log {log_file_name(src_id)} is not well formed "
        f"({reason}) and the source log is gone: the live entries it copied exist nowhere "
        "else on this bookie",
        "restore the source log from a backup taken while the bookie was stopped, or move "
        f"this file aside. {REPLICA_ADVICE}",
    )


def malformed_compaction_log(
    fs: FileSystem, path: str, log_id: EntryLogId, limits: Limits = LIMITS
) -> str | None:
    """See :meth:`LeftoverRecovery.malformed` (also used by ``bkref inspect``)."""
    try:
        handle = fs.open(path, read_only=True)
    except FsNotFound:
        return "the file is gone"
    try:
        read_header(handle, log_id)
        result = scan(handle, log_id, chunk_bytes=limits.scan_chunk_bytes)
        sealed, written = map_as_written(handle)
    except EntryLogError as exc:
        return str(exc)
    finally:
        with contextlib.suppress(FsError):
            handle.close()
    if sealed and written is not None:
        if written != result.ledgers():
            return "its ledgers map disagrees with its records"
        return None
    if result.torn_tail_bytes:
        return f"its last {result.torn_tail_bytes} bytes are a torn record and it has no map"
    if not result.records:
        return "it holds no record and no ledgers map"
    return None


def compacted_names(names: Iterable[str]) -> list[tuple[str, EntryLogId, EntryLogId]]:
    """(name, new id, source id) of every ``.compacted`` name, in name order."""
    out: list[tuple[str, EntryLogId, EntryLogId]] = []
    for name in sorted(names):
        parsed = parse_compacted_file_name(name)
        if parsed is not None:
            out.append((name, parsed[0], parsed[1]))
    return out
