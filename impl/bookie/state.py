"""The bookie's abstract state (the abstraction function the model compares it with) and the
report of what recovery did.

Spec pages: spec/state.py (the abstract state the model keeps), spec/adapter.md (the
``inspect`` operation that returns it), spec/properties.md (what the refinement test checks on
it). docs/design.md "Checking" says how the harness uses it.

Why a module of its own: the state is a value computed from the parts (entry logger, index,
marks), never a source of truth, so it is built by functions of those parts rather than by the
bookie's request code. :class:`EntryLogInfos` caches what cannot change any more (logs of
earlier runs, logs of this run once flushed), because the refinement harness inspects after
every step; the bookie calls it under its state lock.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from impl.entrylog.logger import EntryLogger, EntryLoggerState
from impl.entrylog.manager import LogDescription, LogState
from impl.index.ledger_index import LedgerIndex
from impl.journal.last_mark import NO_MARK, LogMark
from spec.errors import EntryLogError
from spec.ids import EntryId, EntryLogId, LedgerId

LedgerSizes = tuple[tuple[LedgerId, int], ...]


@attrs.frozen
class EntryLogInfo:
    """One entry log: its state (preallocated, active, rotated, flushed), its ledgers, and per
    ledger the bytes of its records there (size prefixes included, as EntryLogMetadata)."""

    log_id: EntryLogId
    state: str
    ledgers: tuple[LedgerId, ...]
    ledger_bytes: tuple[tuple[LedgerId, int], ...]


@attrs.frozen
class LedgersMapInfo:
    """One entry log's header and ledgers map as its file holds them (the adapter's
    ``ledgers_maps``): ``sealed`` when the header points at a map; ``ledger_bytes`` the map by
    ledger id when it reads whole, else None."""

    log_id: EntryLogId
    sealed: bool
    ledger_bytes: tuple[tuple[int, int], ...] | None


@attrs.frozen
class LedgerInfo:
    """One live ledger: its last entry (None before the first add) and whether fenced."""

    ledger_id: LedgerId
    last_entry: EntryId | None
    fenced: bool


@attrs.frozen
class BookieState:
    """The abstraction function: what the model compares the bookie with.

    ``last_mark`` is the persisted lastMark (what a restart replays from); ``journal_mark`` the
    journal's durable mark (everything before it is on disk). In single-log mode every ledger's
    current log is ``current_log_id``; with entryLogPerLedgerEnabled it is the active log most
    recently added to (impl/entrylog/per_ledger.py), and each active log holds one ledger;
    with entryLogSlotsPerLedgerDir > 0 it is the active log most recently added to too
    (impl/entrylog/slots.py), and an active log may hold several ledgers.
    ``compaction_files``: the ``.compacting`` or
    ``.compacted`` file of the compaction in flight (spec/protocol/compaction.md), if any.
    """

    entry_logs: tuple[EntryLogInfo, ...]
    least_unflushed_log_id: int
    last_mark: LogMark
    journal_mark: LogMark
    current_log_id: EntryLogId | None
    ledgers: tuple[LedgerInfo, ...]
    fenced_ledgers: tuple[LedgerId, ...]
    deleted_ledgers: tuple[LedgerId, ...]
    compaction_files: tuple[str, ...]


@attrs.frozen
class RecoveryReport:
    """What the last open did: the mark it replayed from and to, and per kind of record what
    replay did with it. A clean restart reports zero records replayed."""

    index_rebuilt: bool = False
    entries_rebuilt: int = 0
    start_mark: LogMark = NO_MARK
    end_mark: LogMark = NO_MARK
    records_replayed: int = 0
    keys_set: int = 0
    fences_set: int = 0
    entries_re_added: int = 0
    entries_present: int = 0
    skipped_deleted: int = 0
    skipped_unknown: int = 0
    ignored: int = 0
    #: Data records no ledger directory had room for: served from the journal until a
    #: checkpoint finds room (impl/bookie/held.py; the bookie is read-only meanwhile).
    entries_held: int = 0


def bookie_state(
    index: LedgerIndex,
    logger: EntryLoggerState,
    entry_logs: tuple[EntryLogInfo, ...],
    last_mark: LogMark,
    journal_mark: LogMark,
    compaction_files: tuple[str, ...] = (),
) -> BookieState:
    """The abstract state from its parts (the caller holds the bookie's state lock)."""
    ledgers = tuple(
        LedgerInfo(ledger_id, index.last_entry(ledger_id), index.is_fenced(ledger_id))
        for ledger_id in index.ledgers()
    )
    return BookieState(
        entry_logs=entry_logs,
        least_unflushed_log_id=logger.least_unflushed_log_id,
        last_mark=last_mark,
        journal_mark=journal_mark,
        current_log_id=logger.current_log_id,
        ledgers=ledgers,
        fenced_ledgers=tuple(info.ledger_id for info in ledgers if info.fenced),
        deleted_ledgers=tuple(sorted(index.deleted_ledgers())),
        compaction_files=compaction_files,
    )


def _log_info(log_id: EntryLogId, state: str, sizes: LedgerSizes) -> EntryLogInfo:
    return EntryLogInfo(log_id, state, tuple(lid for lid, _ in sizes), sizes)


class EntryLogInfos:
    """The entry logs as BookieState lists them: the logs of this run as the manager describes
    them; the logs of earlier runs (on disk, no longer written) as flushed, with their
    ledgers from the ledgers map or a scan. Both the earlier runs' logs and this run's flushed
    ones never change, so their infos are cached. Not thread-safe: the bookie calls it under
    its state lock."""

    def __init__(self, entry_logger: EntryLogger) -> None:
        self._entry_logger = entry_logger
        self._old_log_ledgers: dict[EntryLogId, LedgerSizes] = {}
        self._old_infos: dict[EntryLogId, EntryLogInfo] | None = None
        self._flushed_infos: dict[EntryLogId, EntryLogInfo] = {}
        #: This run's logs not flushed yet, as last described: the same info object again
        #: while a log's state and bytes stay the same (an info is a function of them).
        self._run_infos: dict[EntryLogId, EntryLogInfo] = {}
        #: Logs garbage collection removed (this run's flushed ones stay in the manager's
        #: description; they are no longer logs of the bookie).
        self._gone: set[EntryLogId] = set()

    def describe(self, descs: Sequence[LogDescription]) -> tuple[EntryLogInfo, ...]:
        """Every log, by id: ``descs`` are this run's logs (EntryLoggerState.logs)."""
        if self._old_infos is None:
            run_ids = {desc.log_id for desc in descs}
            self._old_infos = {
                log_id: _log_info(log_id, "flushed", self._old_ledgers(log_id))
                for log_id in self._entry_logger.log_ids()
                if log_id not in run_ids
            }
        infos = dict(self._old_infos)
        for desc in descs:
            if desc.log_id in self._gone:
                continue
            info = self._flushed_infos.get(desc.log_id)
            if info is None:
                state = desc.state.value
                info = self._run_infos.get(desc.log_id)
                if info is None or info.state != state or info.ledger_bytes != desc.ledgers:
                    sizes = tuple((LedgerId(lid), size) for lid, size in desc.ledgers)
                    info = _log_info(desc.log_id, state, sizes)
                if desc.state is LogState.FLUSHED:
                    self._flushed_infos[desc.log_id] = info
                    self._run_infos.pop(desc.log_id, None)
                else:
                    self._run_infos[desc.log_id] = info
            infos[desc.log_id] = info
        return tuple(infos[log_id] for log_id in sorted(infos))

    def removed(self, log_id: EntryLogId) -> None:
        """Garbage collection deleted ``log_id`` (a dead log, or a compaction's source)."""
        self._gone.add(log_id)
        self._old_log_ledgers.pop(log_id, None)
        self._flushed_infos.pop(log_id, None)
        self._run_infos.pop(log_id, None)
        if self._old_infos is not None:
            self._old_infos.pop(log_id, None)

    def rescan(self) -> None:
        """The set of logs on disk changed (a compaction's new log was linked): list the
        earlier runs' logs again at the next ``describe`` (their ledgers stay cached)."""
        self._old_infos = None

    def _old_ledgers(self, log_id: EntryLogId) -> LedgerSizes:
        cached = self._old_log_ledgers.get(log_id)
        if cached is None:
            try:
                metadata = self._entry_logger.extract_metadata(log_id).metadata
                cached = tuple(
                    (LedgerId(lid), size) for lid, size in sorted(metadata.ledgers.items())
                )
            except EntryLogError:
                # Not an entry log (an empty preallocated file of an earlier run, or gone):
                # it holds nothing. A read error (FsError) is no such fact: it propagates and
                # nothing is cached, so the next inspect reads the log again.
                cached = ()
            self._old_log_ledgers[log_id] = cached
        return cached

    def check_invariants(self) -> None:
        for log_id, info in self._run_infos.items():
            assert info.log_id == log_id and log_id not in self._flushed_infos, info
        for log_id, info in self._flushed_infos.items():
            assert info.log_id == log_id and info.state == LogState.FLUSHED.value, info
        if self._old_infos is not None:
            for log_id, info in self._old_infos.items():
                assert info.log_id == log_id and info.state == "flushed", info
                assert info.ledger_bytes == self._old_log_ledgers[log_id], log_id
