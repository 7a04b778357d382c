"""The abstract state of a bookie: what the model and an implementation are compared on.

An implementation maps its own state onto this (the abstraction function: Bookie.inspect in
impl/bookie/bookie.py, built by impl/bookie/state.py, through proofs/harness/refinement.py;
the ``inspect`` op of spec/adapter.md for any other bookie), and the model keeps one of its
own. Field by field:

- ``entry_logs``: every entry log on the bookie, by id, with its state and, per ledger, the
  bytes of that ledger's records in it (size prefixes included, as BookKeeper's
  EntryLogMetadata counts them). States: ``active`` (adds go there), ``rotated`` (sealed, not
  yet fsynced), ``flushed`` (sealed and durable, or a log of an earlier run), ``preallocated``.
- ``least_unflushed_log_id``: BookKeeper's leastUnflushedLogId.
- ``last_mark``: the persisted lastMark, as (journal id, offset): a restart replays from it.
- ``journal_mark``: the journal's durable mark: every record before it is on disk.
- ``current_log_id``: the active log, or None before the first add of a run.
- ``ledgers``: every live ledger with its last entry (None before its first add) and whether
  it is fenced.
- ``deleted_ledgers``: the ids of deleted ledgers.
- ``durable_last_mark`` (optional, None when not reported): the lastMark the disk holds
  durably, what a power cut now would leave for recovery ((0, 0) when there is none). The
  in-process harness fills it from its own reader of the simulated disk's durable contents
  (proofs/harness/disk_view.py), not from the bookie.
- ``ledgers_maps`` (optional, None when not reported): per entry log, what its header says of
  its ledgers map and the map itself (:class:`MapView`): a sealed log's map must list exactly
  the records the log held when it was sealed; an active or preallocated log has none. The
  in-process harness reads it from the simulated disk; bkref's adapter reads its own files.
"""

from __future__ import annotations

import attrs

#: A journal position: (journal id, offset in that journal), ordered as BookKeeper's LogMark.
Mark = tuple[int, int]

LOG_STATES = ("preallocated", "active", "rotated", "flushed")


@attrs.frozen
class LogView:
    """One entry log: id, state, and per ledger the bytes of its records there."""

    log_id: int
    state: str = attrs.field(validator=attrs.validators.in_(LOG_STATES))
    ledger_bytes: tuple[tuple[int, int], ...]

    @property
    def ledgers(self) -> tuple[int, ...]:
        return tuple(ledger for ledger, _ in self.ledger_bytes)

    @property
    def entry_bytes(self) -> int:
        """Bytes of the log's entry records (the log's size is 1024 header bytes more, and the
        ledgers map once it is sealed)."""
        return sum(size for _, size in self.ledger_bytes)


#: A ledgers map as the model compares it: per ledger id, in increasing order, the bytes of
#: that ledger's records in the log (size prefixes included), as ``LogView.ledger_bytes``.
LedgerBytes = tuple[tuple[int, int], ...]


@attrs.frozen
class MapView:
    """What one entry log's header says of its ledgers map (spec/format/entry_log.md, "The
    ledgers map"): ``sealed`` when the header points at a map (a non-zero map offset);
    ``ledger_bytes`` the map read whole, or None when there is no map or it does not read
    whole (sealed and None: the header points at a map that is unreadable)."""

    log_id: int
    sealed: bool
    ledger_bytes: LedgerBytes | None

    def __attrs_post_init__(self) -> None:
        assert self.sealed or self.ledger_bytes is None, "an unsealed log has no map"
        ids = [ledger for ledger, _ in self.ledger_bytes or ()]
        assert ids == sorted(set(ids)), f"ledger ids not increasing: {ids}"


@attrs.frozen
class LedgerView:
    """One live ledger."""

    ledger_id: int
    last_entry: int | None
    fenced: bool


@attrs.frozen
class AbstractState:
    """See the module docstring."""

    entry_logs: tuple[LogView, ...]
    least_unflushed_log_id: int
    last_mark: Mark
    journal_mark: Mark
    current_log_id: int | None
    ledgers: tuple[LedgerView, ...]
    deleted_ledgers: tuple[int, ...]
    durable_last_mark: Mark | None = None
    ledgers_maps: tuple[MapView, ...] | None = None

    def log(self, log_id: int) -> LogView | None:
        for view in self.entry_logs:
            if view.log_id == log_id:
                return view
        return None

    def ledgers_map(self, log_id: int) -> MapView | None:
        for view in self.ledgers_maps or ():
            if view.log_id == log_id:
                return view
        return None

    def ledger(self, ledger_id: int) -> LedgerView | None:
        for view in self.ledgers:
            if view.ledger_id == ledger_id:
                return view
        return None
