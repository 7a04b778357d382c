"""The entry-log sub-model: which logs exist, their state, which ledgers wrote how many bytes
to each, the active log, leastUnflushedLogId, and when rotation happens.

Spec page: spec/format/entry_log.md (record and header sizes). BookKeeper's single-log mode
(EntryLogManagerForSingleEntryLog) in the fewest words:

- one log is *active*; the first add of a run creates it, with the next id;
- before an add, if the active log's size (1024 header bytes + its records) plus the new
  record (4 size bytes + 16 id bytes + data) would pass logSizeLimit, the log is sealed
  (*rotated*) and a new one, with the next id, becomes active;
- a checkpoint fsyncs the rotated logs (*flushed*) and the active one (its bytes become
  durable, it stays active);
- leastUnflushedLogId starts a run at the id its first new log will take; whenever the
  smallest log created in the run and not yet forgotten is flushed, it is forgotten and the
  id moves one past it (RecentEntryLogsStatus).

After a crash the model cannot say which bytes of an unflushed log survived, or which log
recovery created for replayed entries: :meth:`EntryLogManagerModel.restarted` takes the
implementation's word for the new layout once it has checked it against what the crash
could have left (:meth:`EntryLogManagerModel.crash_constraints`). The same happens while a fault
(a full disk, a failed fsync) makes rotation and flushing unpredictable: the model is
*relaxed* and follows the observed layout, checking only what must hold in any case.

The ledgers map: sealing a log appends its map, which lists exactly the records written to
it, and points the header at it; an active log has none. Once the log is fsynced (flushed)
the map is durable and never changes, across crashes too. A crash may leave a map that was
not durable whole, unreadable, or missing, but a readable one lists no more bytes per ledger
than were written and no fewer than were fsynced (:meth:`LogConstraints.map_problem`).

Garbage collection and compaction (spec/protocol/compaction.md) change the layout in three
ways the sub-model computes from its own logs: a *dead* log (flushed, no byte of a live
ledger) is removed; a compaction takes an id from the shared counter at its copy phase
(:meth:`EntryLogManagerModel.take_compaction_id`: a rotation never reuses it), and its third
phase replaces the source by a new *flushed* log holding exactly the source's bytes of the
ledgers that were live at copy time, with a ledgers map of them
(:meth:`EntryLogManagerModel.compacted`). Which logs a GC cycle deletes and which it
compacts, in which order, is :meth:`EntryLogManagerModel.dead_logs` and
:meth:`EntryLogManagerModel.candidates` (BookKeeper's GarbageCollectorThread: usage =
remaining / total, lowest first, ties by id). A crash in the middle of a GC step or between
phases leaves each compaction undone, finished, or either (:class:`CompactionOutcome`), and
dead logs deleted or not (``LogConstraints.may_vanish``). Once a compaction took an id in a
run, leastUnflushedLogId is followed, not predicted (whether the compaction log counts among
the run's new logs is the bookie's business); its meaning is still checked, and that it
never moves back.

A compared state is held to this prediction only after a GC step (computed from the layout
before it); any other is judged by the rules every manager keeps (models/entrylog/layout.py)
and then followed (:meth:`EntryLogManagerModel.follow`). The prediction serves what no state
shows: the steps between two states (a trace may carry a state only now and then, and the
``protocol`` and ``none`` state profiles compare no layout at all), from which a GC step is
computed and a crash's outcomes are bounded. An entry log per ledger is only judged by
rules: this sub-model then counts an add in its ledger's active log, if it has seen one, and
creates none. So are slots (N active logs per ledger directory, shared by ledgers): an add
may go to any active log (the ledger's slot may have been forgotten) or a new one, so it
counts in every active log, as an upper bound.

Not modelled: preallocation, the ledgers map's bytes (a sealed log's size is not compared,
only its records' bytes per ledger, and its map's).
"""

from __future__ import annotations

import attrs

from spec.state import LogView

#: Bytes of an entry log's header (spec/format/entry_log.md).
HEADER_BYTES = 1024
#: Bytes of a record besides the entry's data: int32 size, int64 ledger id, int64 entry id.
RECORD_OVERHEAD_BYTES = 4 + 8 + 8


#: What a log's header says of its ledgers map: (sealed, the map's pairs by ledger id, or
#: None when there is no map or it does not read whole), as spec/state.py's MapView.
MapState = tuple[bool, tuple[tuple[int, int], ...] | None]
#: An active (or preallocated) log's: the header points at no map.
NO_MAP: MapState = (False, None)


def describe_map(found: MapState | None) -> str:
    """For messages."""
    if found is None:
        return "an unknown ledgers map"
    sealed, pairs = found
    if not sealed:
        return "no ledgers map"
    if pairs is None:
        return "a ledgers map that does not read whole"
    return "the ledgers map {" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"


def record_bytes(data_bytes: int) -> int:
    """The bytes one entry takes in an entry log."""
    assert data_bytes >= 0, data_bytes
    return RECORD_OVERHEAD_BYTES + data_bytes


@attrs.define
class LogModel:
    """One entry log: state, bytes per ledger written, and bytes per ledger known durable;
    its ledgers map as the model knows it (None: not known, an adopted log whose map no
    state reported) and whether that map is durable."""

    log_id: int
    state: str
    written: dict[int, int] = attrs.Factory(dict)
    durable: dict[int, int] = attrs.Factory(dict)
    ledgers_map: MapState | None = NO_MAP
    map_durable: bool = False
    #: The bytes per ledger the last state showed (:meth:`EntryLogManagerModel.follow`):
    #: with an entry log per ledger, what a checkpoint makes durable (``written`` may count
    #: records the bookie put in a new log the model has not seen).
    seen: dict[int, int] | None = None
    #: After a crash, the bytes per ledger the log surely holds: what was fsynced before the
    #: crash (a log a checkpoint flushed is wholly sure). None: all of ``written`` (every log
    #: of a run without a crash, and every log written and fsynced in this run). A log's map
    #: may claim records the crash lost (spec/protocol/compaction.md): a compaction of it
    #: copies between its sure and its claimed live bytes. Kept until the log is gone.
    sure: dict[int, int] | None = None

    def view(self) -> LogView:
        """The log as the abstract state shows it (built anew: the harness compares after
        every step, and most logs do not change between steps, so callers may cache it)."""
        return LogView(self.log_id, self.state, tuple(sorted(self.written.items())))

    def size_bytes(self) -> int:
        return HEADER_BYTES + sum(self.written.values())

    def check_invariants(self) -> None:
        assert self.log_id >= 0, self.log_id
        assert self.state in ("active", "rotated", "flushed"), self.state
        for ledger, size in self.written.items():
            # Adopted logs may hold garbage records a scan read past a hole (any id, any
            # size); the model's own records are at least RECORD_OVERHEAD_BYTES each.
            assert size > 0, (ledger, size)
        for ledger, size in self.durable.items():
            assert 0 < size <= self.written.get(ledger, 0), (self.log_id, ledger)
        for ledger, size in (self.sure or {}).items():
            assert 0 < size <= self.written.get(ledger, 0), (self.log_id, ledger)

    def surely_held(self) -> dict[int, int]:
        """The bytes per ledger the log surely holds (``sure``, or all it has)."""
        return dict(self.written) if self.sure is None else dict(self.sure)


def _sure_after(sure: dict[int, int] | None, written: dict[int, int]) -> dict[int, int] | None:
    """A log's ``sure`` bytes, bounded by what it now shows to have (``written``): None when
    it is all sure."""
    if sure is None:
        return None
    capped = {k: min(n, written[k]) for k, n in sure.items() if n > 0 and k in written}
    return None if capped == written else capped


#: What a crash may have left of one compaction: ``no`` (undone: the source stays, the new
#: log never appears), ``yes`` (finished: phase 2 had returned, so recovery finishes it) or
#: ``maybe`` (either; the restarted bookie shows which).
FINISH = ("no", "maybe", "yes")


@attrs.frozen
class CompactionOutcome:
    """One compaction a crash interrupted (or left between phases): its source, its new log's
    id (None when the model does not know it: a whole ``gc`` cycle cut short), the bytes per
    ledger it moved (the source's live ledgers at copy time; empty: nothing live, the source
    is just deleted) and whether recovery must finish it (FINISH)."""

    source: int
    new_id: int | None
    moved: tuple[tuple[int, int], ...]
    finish: str = attrs.field(validator=attrs.validators.in_(FINISH))
    #: False when the source's contents were taken from a damaged log (``suspect``): its
    #: records per ledger were read by the bookie's scan, undersized and garbled records
    #: included, which a compaction does not copy; the new log then holds at most ``moved``.
    exact: bool = True
    #: Not ``exact`` because the source's map claimed records a crash may have lost: the
    #: most bytes of garbage records of other ledgers the new log may hold, and whether the
    #: copy may have found nothing (no live byte surely held: the source is then just
    #: deleted). See spec/protocol/compaction.md, "A map that claims records a crash lost".
    slack: int = 0
    may_be_empty: bool = False

    def _holds(self, view: LogView) -> bool:
        if self.exact:
            return view.ledger_bytes == self.moved
        most = dict(self.moved)
        other = sum(n for led, n in view.ledger_bytes if led not in most)
        return other <= self.slack and all(
            n <= most[led] for led, n in view.ledger_bytes if led in most
        )

    def describe(self) -> str:
        """What recovery must make of this compaction, in words (``bkref explain``)."""
        into = "a new log" if self.new_id is None else f"entry log {self.new_id}"
        ledgers = ", ".join(str(ledger) for ledger, _ in self.moved) or "none"
        what = f"the compaction of entry log {self.source} into {into} (live ledgers: {ledgers})"
        if not self.moved:
            return f"{what}: log {self.source} may be deleted or stay (nothing in it was live)"
        if self.finish == "yes":
            return (
                f"{what} was past phase 2: recovery must finish it ({into} holds the live "
                f"records, log {self.source} is gone)"
            )
        if self.finish == "maybe":
            return f"{what} may be finished or undone by recovery, not half of each"
        return f"{what} had not reached phase 2: recovery must undo it (log {self.source} stays)"

    def problem(
        self,
        seen: dict[int, LogView],
        unlisted: set[int],
        may_vanish: frozenset[int] = frozenset(),
    ) -> str | None:
        """Why the layout ``seen`` after the restart breaks this outcome, or None.
        ``unlisted``: the observed logs the crash constraints do not list (new ones);
        ``may_vanish``: the listed logs a GC step may have deleted for a reason of its own
        (no live ledger left in them): an undone compaction's source among them may be gone,
        deleted as a dead log by the cycle that rolled the compaction back."""
        present = self.source in seen
        if present and self.finish == "yes":
            return (
                f"the compaction of entry log {self.source} had returned from its flush phase "
                "(its .compacted file was durable): recovery must finish it, but the source "
                "is still there"
            )
        if present:
            view = seen.get(self.new_id) if self.new_id is not None else None
            if (
                view is not None
                and self.new_id in unlisted
                and view.state == "flushed"
                and self._holds(view)
            ):
                # A flushed log holding what the compaction copied. Any other log with that
                # id is the new run's own: an id an undone compaction took is durable
                # nowhere, and a restart may use it again (the replay's new active log).
                return (
                    f"entry log {self.new_id}, the unfinished compaction of {self.source}, "
                    "appeared beside its source: an undone compaction leaves no log"
                )
            return None
        if self.finish == "no":
            if self.source in may_vanish:
                return None  # undone, then deleted as a dead log
            return f"entry log {self.source} vanished; its compaction was undone"
        if not self.moved or self.may_be_empty:
            return None  # nothing (surely) live: the source may just be deleted
        if self.new_id is not None:
            view = seen.get(self.new_id)
            if view is None or not self._holds(view) or view.state != "flushed":
                found = "missing" if view is None else f"{view.state}, {dict(view.ledger_bytes)}"
                return (
                    f"entry log {self.source} was compacted away, but its new log "
                    f"{self.new_id} is {found}; it must be flushed with exactly "
                    f"{dict(self.moved)} (the source's live ledgers at copy time)"
                )
            return None
        if not any(self._holds(seen[i]) for i in unlisted):
            return (
                f"entry log {self.source} was compacted away, but no new log holds exactly "
                f"{dict(self.moved)} (the source's live ledgers at copy time)"
            )
        return None


@attrs.frozen
class LogConstraints:
    """What a crash may leave of the entry logs: every listed log still exists, with, per
    ledger, at least its ``durable`` bytes, and exactly its ``written`` bytes when everything
    written was fsynced (an unsynced tail may come back torn, and a scan may read garbage
    past a hole); a log not listed must have an id above ``max_known_id`` (created by the
    interrupted step or by recovery)."""

    logs: tuple[tuple[int, tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]], ...]
    max_known_id: int
    #: The ledgers maps that were durable: they read back exactly.
    durable_maps: tuple[tuple[int, MapState], ...] = ()
    #: The model followed the layout at the crash (a fault): a map not durable is not bounded
    #: by ``logs``, which were observed, not predicted.
    relaxed: bool = False
    #: Listed logs a GC step cut short may have deleted (no live ledger left in them).
    may_vanish: frozenset[int] = frozenset()
    #: The compactions in flight or cut short, and what recovery must make of each.
    compactions: tuple[CompactionOutcome, ...] = ()

    def may_be_gone(self, log_id: int) -> bool:
        """Whether listed log ``log_id`` may be missing after the restart: a dead log a GC
        step may have deleted, or the source of a compaction recovery may have finished."""
        return log_id in self.may_vanish or any(
            c.source == log_id and c.finish != "no" for c in self.compactions
        )

    def compaction_ids(self) -> set[int]:
        """The ids of new logs a finished compaction may have left (checked on their own)."""
        return {c.new_id for c in self.compactions if c.new_id is not None and c.finish != "no"}

    def map_problem(self, log_id: int, found: MapState) -> str | None:
        """Why log ``log_id``'s ledgers map ``found`` after the crash breaks its bounds, or
        None: a durable map reads back exactly; a map that was not durable may be missing or
        unreadable, and a readable one lists, per ledger, no fewer bytes than were fsynced
        (the map is written at sealing, after every record), and exactly the bytes written
        when everything written was fsynced (as :meth:`log_problem`: otherwise the model's
        ``written`` is no upper bound, since a step the crash cut short, or an add whose
        answer never came, may have written more). A log not listed is new: recovery's or
        the interrupted step's."""
        for known_id, known in self.durable_maps:
            if known_id == log_id:
                if found != known:
                    return f"has {describe_map(found)}; {describe_map(known)} was durable"
                return None
        pairs = found[1]
        if pairs is None or self.relaxed:
            return None
        for listed_id, durable, written in self.logs:
            bad = _out_of_bounds(durable, written, dict(pairs)) if listed_id == log_id else None
            if bad is not None:
                ledger, count, fsynced, whole = bad
                return (
                    f"has {describe_map(found)}, which gives ledger {ledger} {count} bytes; "
                    f"{fsynced} were fsynced"
                    + (" and nothing more was written" if whole else " (at least those)")
                )
        return None

    def log_problem(
        self,
        durable: tuple[tuple[int, int], ...],
        written: tuple[tuple[int, int], ...],
        have: dict[int, int],
    ) -> str | None:
        """Why a listed log holding ``have`` bytes per ledger after the crash breaks its
        bounds (``durable`` and ``written``, one entry of ``logs``), or None. A log fsynced
        whole must read back exactly. One with unsynced bytes may come back with holes of
        zeros (a torn or reordered crash), and BookKeeper's scan reads past a hole into
        garbage records (spec/format/entry_log.md): for it only the fsynced bytes bound it."""
        bad = _out_of_bounds(durable, written, have)
        if bad is None:
            return None
        ledger, count, fsynced, whole = bad
        return f"holds {count} bytes of ledger {ledger}; {fsynced} were fsynced" + (
            " and nothing more was written" if whole else " (at least those)"
        )


def _out_of_bounds(
    durable: tuple[tuple[int, int], ...],
    written: tuple[tuple[int, int], ...],
    have: dict[int, int],
) -> tuple[int, int, int, bool] | None:
    """The first ledger whose ``have`` bytes are below its fsynced bytes, or, when everything
    written was fsynced (``whole``), not exactly its written bytes: (ledger, bytes, fsynced
    bytes, whole); None when every ledger is within its bounds."""
    low, high = dict(durable), dict(written)
    whole = low == high
    for ledger in sorted(set(have) | set(low)):
        count = have.get(ledger, 0)
        if count < low.get(ledger, 0) or (whole and count != high.get(ledger, 0)):
            return ledger, count, low.get(ledger, 0), whole
    return None


class EntryLogManagerModel:
    """See the module docstring."""

    def __init__(self, log_size_limit_bytes: int) -> None:
        assert log_size_limit_bytes > HEADER_BYTES, log_size_limit_bytes
        self.log_size_limit_bytes = log_size_limit_bytes
        self.logs: dict[int, LogModel] = {}
        self.current: int | None = None
        #: The id the next new log takes; None after a restart until the first new log
        #: shows it (it must be above every id ever seen).
        self.next_id: int | None = 0
        #: Logs created while ``next_id`` was unknown, in creation order, under provisional
        #: ids until the implementation shows their real ones (:meth:`resolve_provisional`;
        #: a trace may carry no state for several rotations).
        self.provisional: list[int] = []
        #: Logs created in this run, and whether each is flushed.
        self.created: dict[int, bool] = {}
        self.least_unflushed = 0
        #: The layout is followed, not predicted (a fault, see the module docstring).
        self.relaxed = False
        #: Every log id ever seen: ids are never reused.
        self.max_seen_id = -1
        #: The active log's directory is full: the next add starts a new log first (the
        #: disk listener's request, which only a new log ends).
        self.rotate_requested = False
        #: A preallocate step ran since the last new log: a log may be waiting with the
        #: next id (the next rotation takes it, so its id is the one predicted anyway).
        self.preallocated = False
        #: The bookie preallocates on its own threads, unseen (the caller sets it under
        #: asynchronous acks): a log may always be waiting with the next id, so
        #: ``preallocated`` never goes back to False.
        self.preallocates_unseen = False
        #: The id the next log would have had when a preallocated log may have been dropped
        #: (forget_next_id): ids from it below the next log seen were used by dropped logs.
        self.dropped_from: int | None = None
        #: Under asynchronous acks (the caller sets ``track_tentative``): the logs created for
        #: steps the bookie may not have run yet (adds answered ``pending`` with no answered
        #: step after them, so perhaps still unread in its input). A crash may leave none of
        #: them, and their ids unused (:meth:`forget_tentative`); an answered step or a
        #: compared state settles them (:meth:`settle`).
        self.track_tentative = False
        self.tentative: set[int] = set()
        #: ``max_seen_id`` when the logs were last settled.
        self.settled_max_seen_id = -1
        #: Ids compaction logs took from the shared counter (a rotation never takes them).
        self.taken: set[int] = set()
        #: A compaction took an id in this run: leastUnflushedLogId is followed from now on.
        self.least_followed = False
        #: The leastUnflushedLogId the last compared state showed.
        self.least_seen = 0
        #: Ids of logs a GC removed (dead, or compacted away), in any run: ``lastId`` is a
        #: hint written without fsync (impl/entrylog/ids.py), so once no file holds such an
        #: id a later run may use it again. Nothing can name the old log by then: the index
        #: never names a removed log for a live ledger (the harness's disk check).
        self.removed: set[int] = set()
        #: Every id that was ever a log's, in any run (the provisional placeholders aside).
        #: An id no log ever held (a compaction that took it rolled back, a preallocated log
        #: dropped with it) is durable nowhere, so a later run may use it, as it may a removed
        #: log's; one a log held and that nothing removed is never used again.
        self.held: set[int] = set()
        #: Ids a compaction took in an earlier run that never became a log's (the
        #: compaction rolled back): no file keeps them (:meth:`freed`).
        self.released: set[int] = set()
        #: The leastUnflushedLogId the state after the last restart showed: the first id of
        #: this run (0 when no state showed it).
        self.run_first_id = 0
        #: Logs whose contents the model took from the bookie after a restart that it never
        #: wrote (a ledger it did not write there, or more bytes than it wrote): the scan of
        #: a damaged tail (a failed fsync's garbage). A compaction of one copies what its
        #: records really hold, which the model cannot tell from the per-ledger bytes.
        self.suspect: set[int] = set()
        #: ``max_seen_id`` before the first provisional log of the run.
        self.max_before_provisional = -1
        #: While relaxed: logs a GC step may have deleted or compacted away.
        self.may_vanish: set[int] = set()
        #: The layout is judged by rules and followed (:meth:`follow`): a compaction's id is
        #: not predicted, only checked to be new.
        self.followed = False
        #: The highest id a state showed (:meth:`follow`).
        self.observed_max = -1
        #: An entry log per ledger (entryLogPerLedgerEnabled) or slots
        #: (entryLogSlotsPerLedgerDir): many active logs, judged by rules and followed
        #: (models/entrylog/layout.py).
        self.per_ledger = False
        #: Slots: active logs shared by ledgers, an add may go to any of them.
        self.shared_logs = False
        #: New logs of compactions whose sources' maps claimed records a crash may have lost:
        #: their id -> the bytes per ledger they surely hold (``written`` is the most) and the
        #: most bytes of records of other ledgers they may hold (garbage the crash left); the
        #: next compared state shows what they hold (:meth:`resolve_copy`).
        self.unresolved: dict[int, tuple[dict[int, int], int]] = {}

    # --- the operations, in the implementation's order ---------------------------------

    def log_of(self, ledger_id: int) -> int | None:
        """The active log an add of ``ledger_id`` goes to now: the single active log, or
        with an entry log per ledger that ledger's (None: a new log)."""
        if not self.per_ledger:
            return self.current
        for log_id, log in sorted(self.logs.items()):
            if log.state == "active" and ledger_id in log.written:
                return log_id
        return None

    def logs_an_add_may_reach(self, ledger_id: int) -> list[int]:
        """The known logs an add of ``ledger_id`` may go to now (it may also go to a new
        one): the single active log, the ledger's active log with a log per ledger, every
        active log with slots."""
        if self.shared_logs:
            return sorted(i for i, log in self.logs.items() if log.state == "active")
        found = self.log_of(ledger_id)
        return [] if found is None or found not in self.logs else [found]

    def add_entry(self, ledger_id: int, data_bytes: int) -> int:
        """Append one entry; return the id of the log it went to (-1: a new log, not known
        yet). With an entry log per ledger the layout is judged by rules and followed at the
        next state."""
        size = record_bytes(data_bytes)
        if self.shared_logs:
            # Any active log (the ledger's slot's, or another's once the map forgot it) or a
            # new one: every active log's bytes grow, as an upper bound.
            for reached in self.logs_an_add_may_reach(ledger_id):
                shared = self.logs[reached]
                shared.written[ledger_id] = shared.written.get(ledger_id, 0) + size
            return -1
        if self.per_ledger:
            # The ledger's active log grows (an upper bound: the bookie may have rotated or
            # evicted it first); a ledger with none gets a new log whose id only the next
            # state shows: no placeholder, so the crash constraints leave it to the rules
            # for new logs (models/entrylog/manager.py LogConstraints: unlisted logs).
            log_id = self.log_of(ledger_id)
            if log_id is None:
                return -1
            log = self.logs[log_id]
            log.written[ledger_id] = log.written.get(ledger_id, 0) + size
            return log_id
        active = self.logs.get(self.current) if self.current is not None else None
        if (
            active is None
            or self.rotate_requested
            or active.size_bytes() + size > self.log_size_limit_bytes
        ):
            active = self._new_active()
        active.written[ledger_id] = active.written.get(ledger_id, 0) + size
        return active.log_id

    def rotate(self) -> int:
        """Seal the active log (if any) and start a new one (with an entry log per ledger,
        seal every active log: each ledger's next add starts its new one; -1)."""
        if self.per_ledger:
            for log in self.logs.values():
                if log.state == "active":
                    log.state = "rotated"
                    log.ledgers_map = (True, tuple(sorted(log.written.items())))
            self.current = None
            return -1
        return self._new_active().log_id

    def checkpoint(self) -> None:
        """flush: the active log's bytes and every rotated log become durable."""
        for log in self.logs.values():
            if log.state in ("active", "rotated"):
                if self.per_ledger and log.seen is not None:
                    log.durable = {k: n for k, n in log.seen.items() if n > 0}
                else:
                    log.durable = dict(log.written)
            if log.state == "rotated":
                log.state = "flushed"
                log.map_durable = True
                if log.log_id in self.created:
                    self.created[log.log_id] = True
        self._update_least_unflushed()

    def _new_active(self) -> LogModel:
        if self.current is not None:
            old = self.logs[self.current]
            old.state = "rotated"
            # Sealed: its map lists exactly what was written to it.
            old.ledgers_map = (True, tuple(sorted(old.written.items())))
        if self.next_id is None:
            if not self.provisional:
                self.max_before_provisional = self.max_seen_id
            log_id = max([self.max_seen_id, *self.taken, *self.logs]) + 1
            self.provisional.append(log_id)
        else:
            log_id = self.next_id
            self.next_id += 1
            self._skip_taken()
        log = LogModel(log_id, "active")
        self._put(log_id, log)
        if self.track_tentative:
            self.tentative.add(log_id)
        self.current = log_id
        self.rotate_requested = False
        self.preallocated = self.preallocates_unseen
        self.created[log_id] = False
        self.max_seen_id = max(self.max_seen_id, log.log_id)
        self._update_least_unflushed()
        return log

    def _skip_taken(self) -> None:
        """The next rotation's id is never one a compaction log took."""
        while self.next_id is not None and self.next_id in self.taken:
            self.next_id += 1

    # --- garbage collection and compaction ----------------------------------------------

    def dead_logs(self, live: frozenset[int] | set[int]) -> list[int]:
        """The candidate logs (flushed) with no byte of a live ledger, by id: a GC cycle's
        step 3 deletes them (empty and zero-byte logs included)."""
        return [
            log_id
            for log_id, log in sorted(self.logs.items())
            if log.state == "flushed" and not any(led in live for led in log.written)
        ]

    def live_bytes(self, log_id: int, live: frozenset[int] | set[int]) -> dict[int, int]:
        """Log ``log_id``'s bytes per live ledger: what a compaction copies."""
        return {led: n for led, n in self.logs[log_id].written.items() if led in live}

    def sure_live_bytes(self, log_id: int, live: frozenset[int] | set[int]) -> dict[int, int]:
        """Log ``log_id``'s bytes per live ledger that it surely holds: the least a compaction
        copies (all of :meth:`live_bytes` unless a crash may have lost some of its records)."""
        held = self.logs[log_id].surely_held()
        return {led: n for led, n in held.items() if led in live}

    def unsure(self, log_id: int) -> bool:
        """Whether a crash may have lost some of the records log ``log_id``'s map claims."""
        return self.logs[log_id].sure is not None

    def unsure_bytes(self, log_id: int) -> int:
        """The bytes of log ``log_id`` a crash may have lost or garbled (its map claims them,
        nothing made them durable): where a scan may find records of any ledger."""
        log = self.logs[log_id]
        return sum(log.written.values()) - sum(log.surely_held().values())

    def candidates(self, live: frozenset[int] | set[int], threshold: float) -> list[int]:
        """The logs a compaction of ``threshold`` takes, in order: flushed, some byte live
        (remaining > 0), usage = remaining / total below the threshold; lowest usage first,
        ties by lower id (BookKeeper's GarbageCollectorThread.doCompactEntryLogs)."""
        found: list[tuple[float, int]] = []
        for log_id, log in sorted(self.logs.items()):
            if log.state != "flushed":
                continue
            total = sum(log.written.values())
            remaining = sum(self.live_bytes(log_id, live).values())
            if remaining > 0 and remaining / total < threshold:
                found.append((remaining / total, log_id))
        return [log_id for _, log_id in sorted(found)]

    def remove(self, log_id: int) -> None:
        """A log was deleted (dead, or a compaction's source)."""
        del self.logs[log_id]
        self.created.pop(log_id, None)
        self.removed.add(log_id)

    def next_compaction_ids(self) -> set[int]:
        """The ids a compaction may take now: the next id, or the one after it when a
        preallocated log may hold the next (empty when the next id is unknown)."""
        if self.next_id is None or self.followed:
            return set()
        ids = {self.next_id}
        if self.preallocated:
            after = self.next_id + 1
            while after in self.taken:
                after += 1
            ids.add(after)
        return ids

    def _put(self, log_id: int, log: LogModel) -> None:
        self.logs[log_id] = log
        self.held.add(log_id)

    def reusable(self, log_id: int) -> bool:
        """Whether a new log may take ``log_id``, an id at or below one used before: not below
        the id this run started from (a run's ids only go up), no log holds it now, and either
        a GC removed the log that held it or no log ever did."""
        if log_id < self.run_first_id or log_id in self.logs:
            return False
        return log_id in self.removed or log_id not in self.held

    def freed(self, log_id: int) -> bool:
        """Whether the model knows that no file or index entry names ``log_id`` any more
        (R-LOG-IDS), so that recovery after a crash may give it to a new log: a GC removed
        the log that held it, or a compaction took it in an earlier run and never became a
        log (rolled back; ``lastId`` is written without fsync, so a later run need not
        remember the id). Narrower than :meth:`reusable`'s "no log ever held it": an id the
        model never saw may be a file the bookie created unreported, which is not free."""
        return log_id in self.removed or log_id in self.released

    def take_compaction_id(self, log_id: int) -> None:
        """A compaction log took ``log_id`` from the shared counter."""
        self.taken.add(log_id)
        self.least_followed = True
        if self.next_id is not None and log_id > self.next_id:
            self.preallocated = True  # the next id is a preallocated log's
        self._skip_taken()

    def compacted(
        self,
        source: int,
        new_id: int,
        moved: dict[int, int],
        low: dict[int, int] | None = None,
        slack: int = 0,
    ) -> None:
        """Phase 3 finished: the source is gone and the new log is flushed, holding exactly
        ``moved`` (its ledgers map too, durable: phase 2 fsynced it); between ``low`` and
        ``moved`` when ``low`` is given (:meth:`add_compacted`)."""
        self.remove(source)
        self.add_compacted(new_id, moved, low, slack)

    def add_compacted(
        self,
        new_id: int,
        moved: dict[int, int],
        low: dict[int, int] | None = None,
        slack: int = 0,
    ) -> None:
        """A compaction's new log, flushed, holding exactly ``moved``, its map durable; or,
        when ``low`` is given (the source's map claimed records a crash may have lost), at
        least ``low`` and at most ``moved`` per ledger, and at most ``slack`` bytes of
        records of other ledgers (garbage the crash left where records were lost), as the
        next state shows (:meth:`resolve_copy`)."""
        pairs = tuple(sorted(moved.items()))
        log = LogModel(new_id, "flushed", dict(moved), dict(moved), (True, pairs), True)
        if low is not None:
            log.durable = {k: n for k, n in low.items() if n > 0}
            log.ledgers_map, log.map_durable = None, False
            self.unresolved[new_id] = (dict(log.durable), slack)
        self._put(new_id, log)
        self.max_seen_id = max(self.max_seen_id, new_id)

    def _update_least_unflushed(self) -> None:
        """The smallest logs of this run that are flushed are forgotten, and the id moves
        past each (it starts at lastId + 1, the id of the run's first new log)."""
        for log_id in sorted(self.created):
            if not self.created[log_id] or log_id in self.provisional:
                # A provisional log's id is a placeholder until the implementation shows
                # the real one: it is forgotten once resolved (resolve_provisional calls
                # this again), not under an id that may not be its own.
                return
            del self.created[log_id]
            self.least_unflushed = log_id + 1

    def forget_next_id(self) -> None:
        """The next new log's id is no longer known (a preallocated log may have been dropped
        with its id): the logs created from now on are provisional until seen."""
        if self.next_id is not None:
            # Ids a compaction took are no log's (a restart may use them again): the highest
            # id below the next one that is not a compaction's was used.
            high = self.next_id - 1
            while high in self.taken:
                high -= 1
            self.max_seen_id = max(self.max_seen_id, high)
            self.dropped_from = self.next_id
            self.next_id = None

    def resolve_provisional(self, observed_ids: list[int]) -> None:
        """The new logs since a restart have ids ``observed_ids``, in order (checked by the
        caller: as many as the provisional ones, increasing, above every id seen before):
        rename the provisional logs and learn the next id."""
        assert len(observed_ids) == len(self.provisional), (observed_ids, self.provisional)
        assert observed_ids == sorted(set(observed_ids)), observed_ids
        moved = [(self.logs.pop(old), self.created.pop(old), old) for old in self.provisional]
        self.held -= set(self.provisional)  # placeholders, not ids a log held
        for (log, done, old), new in zip(moved, observed_ids, strict=True):
            log.log_id = new
            self._put(new, log)
            self.created[new] = done
            if self.current == old:
                self.current = new
        self.provisional = []
        if self.dropped_from is not None:
            # Ids skipped since then belong to preallocated logs that were dropped: created in
            # this run, and flushed (leastUnflushedLogId moves past them).
            for log_id in range(self.dropped_from, observed_ids[-1]):
                if log_id not in self.logs and log_id >= self.least_unflushed:
                    self.created[log_id] = True
            self.dropped_from = None
        self.next_id = observed_ids[-1] + 1
        self._skip_taken()
        # The placeholders counted as seen ids; the real ones may be lower (an id of a log a
        # GC removed, used again).
        self.max_seen_id = max([self.max_before_provisional, *self.logs])
        self._update_least_unflushed()

    def resolve_copy(self, views: tuple[LogView, ...], deleted: set[int]) -> str | None:
        """The new logs of compactions whose sources were unsure (``unresolved``), as the
        state ``views`` shows them: each flushed, some bytes, per claimed live ledger between
        the sure live bytes and the claimed ones, and of other ledgers not deleted (garbage
        records a crash left in the lost part) no more bytes than that part; then taken as
        known exactly. Why not, or None."""
        byid = {view.log_id: view for view in views}
        for new_id, (low, slack) in sorted(self.unresolved.items()):
            log = self.logs.get(new_id)
            if log is None:
                continue
            view = byid.get(new_id)
            have = {} if view is None else dict(view.ledger_bytes)
            high = log.written
            other = {k: n for k, n in have.items() if k not in high}
            fits = (
                all(have[k] <= n for k, n in high.items() if k in have)
                and all(have.get(k, 0) >= n for k, n in low.items())
                and sum(other.values()) <= slack
                and not set(other) & deleted
            )
            if view is None or view.state != "flushed" or not have or not fits:
                found = "missing" if view is None else f"{view.state}, {have}"
                return (
                    f"entry log {new_id}, a compaction of a log whose map claimed records a "
                    f"crash may have lost, is {found}; it must be flushed with at least "
                    f"{low} (the live bytes surely held) and at most {high} (the live bytes "
                    f"the map claimed) per ledger, and at most {slack} bytes of other ledgers "
                    "not deleted (garbage records where the crash lost records)"
                )
            pairs = tuple(sorted(have.items()))
            log.written, log.durable = dict(have), dict(have)
            log.ledgers_map, log.map_durable = (True, pairs), True
        self.unresolved = {}
        return None

    def observed_flushed(self, log_id: int) -> None:
        """A rotated log was seen flushed (a checkpoint the bookie ran on its own: under
        asynchronous acks its background threads flush when they please)."""
        log = self.logs[log_id]
        assert log.state == "rotated", log
        log.state = "flushed"
        log.durable = dict(log.written)
        log.map_durable = True
        if log_id in self.created:
            self.created[log_id] = True

    def settle(self) -> None:
        """Every step so far has run in the bookie (an answered step: the bookie reads its
        requests in order; or a compared state): the logs the model created are real."""
        self.tentative.clear()
        self.settled_max_seen_id = self.max_seen_id

    # --- crash and restart --------------------------------------------------------------

    def forget_tentative(self) -> None:
        """The bookie died: the logs created for steps it may never have run may not exist,
        and their ids may be unused (the crash constraints and the ids known to be used hold
        only what was settled)."""
        if not self.tentative:
            return
        for log_id in self.tentative:
            self.logs.pop(log_id, None)
            self.removed.discard(log_id)
            self.created.pop(log_id, None)
            if log_id in self.provisional:
                self.provisional.remove(log_id)
        if self.current in self.tentative:
            self.current = None
        self.max_seen_id = max([self.settled_max_seen_id, *self.logs])
        if self.next_id is not None:
            self.next_id = self.max_seen_id + 1
            self._skip_taken()
        self.tentative.clear()

    def crash_constraints(self) -> LogConstraints:
        """What any layout after a crash must keep (see LogConstraints)."""
        return LogConstraints(
            logs=tuple(
                (log.log_id, tuple(sorted(log.durable.items())), tuple(sorted(log.written.items())))
                for log in sorted(self.logs.values(), key=lambda log: log.log_id)
            ),
            max_known_id=self.max_seen_id,
            durable_maps=tuple(
                (log.log_id, log.ledgers_map)
                for log in sorted(self.logs.values(), key=lambda log: log.log_id)
                if log.map_durable and log.ledgers_map is not None
            ),
            relaxed=self.relaxed,
        )

    def adopt(
        self,
        views: tuple[LogView, ...],
        current: int | None,
        least: int,
        maps: dict[int, MapState] | None = None,
        *,
        after_restart: bool = False,
    ) -> None:
        """Take the observed layout as the model's (after a restart, or while relaxed): every
        byte there is durable from now on only if its log is flushed. ``maps``: the observed
        ledgers maps (None when the state reports none). A map known durable stays so (the
        caller checked it); after a restart every flushed log's map is durable, while
        relaxed only what was durable before."""
        before = self.logs
        seen = {view.log_id for view in views}
        # A log that is gone was removed by a GC (the caller checked that it may be).
        self.removed |= {log_id for log_id in before if log_id not in seen}
        self.logs = {}
        self.suspect &= seen
        self.unresolved = {}
        for view in views:
            written = dict(view.ledger_bytes)
            durable = written if view.state == "flushed" else {}
            log = LogModel(view.log_id, view.state, written, dict(durable))
            old = before.get(view.log_id)
            found = None if maps is None else maps.get(view.log_id)
            scanned = maps is not None and (found is None or found[1] is None)
            if old is not None and not scanned:
                # (A log with no map that reads whole shows what the scan read: its records.)
                log.sure = _sure_after(old.sure, written)
            if (
                after_restart
                and old is not None
                and any(n > old.written.get(led, 0) for led, n in written.items())
            ):
                self.suspect.add(view.log_id)
            if old is not None and old.map_durable and old.ledgers_map is not None:
                log.ledgers_map, log.map_durable = old.ledgers_map, True
            else:
                log.ledgers_map = None if maps is None else maps.get(view.log_id)
                log.map_durable = after_restart and view.state == "flushed"
            self._put(view.log_id, log)
            self.max_seen_id = max(self.max_seen_id, view.log_id)
        self.current = current
        self.least_unflushed = least
        self.least_seen = least
        if after_restart:
            self.run_first_id = least
        # leastUnflushedLogId starts a run one past the last id used (BookKeeper's lastId):
        # every id below it was used, even by a log that did not survive.
        self.max_seen_id = max(self.max_seen_id, least - 1)
        self.created = {
            view.log_id: view.state == "flushed"
            for view in views
            if view.log_id >= least and view.state != "flushed"
        }
        if current is not None and self.next_id is None and not self.provisional:
            self.next_id = current + 1
            self._skip_taken()

    def follow(
        self,
        views: tuple[LogView, ...],
        preallocated: tuple[int, ...],
        current: int | None,
        least: int,
        maps: dict[int, MapState] | None,
    ) -> None:
        """Take a layout the rules accepted (models/entrylog/layout.py) as the model's, in
        the same run: what each log that stays had durable stays durable (bytes a checkpoint
        fsynced, a map that was fsynced), the next id is the preallocated log's or one past
        every id seen, and leastUnflushedLogId is followed from now on."""
        before = self.logs
        self.logs = {}
        self.unresolved = {}
        for view in views:
            written = dict(view.ledger_bytes)
            old = before.get(view.log_id)
            log = LogModel(view.log_id, view.state, written, seen=dict(written))
            if old is not None:
                log.sure = _sure_after(old.sure, written)
            if view.state == "flushed":
                log.durable = dict(written)
            elif old is not None:
                log.durable = {k: min(n, written.get(k, 0)) for k, n in old.durable.items()}
                log.durable = {k: n for k, n in log.durable.items() if n > 0}
            if old is not None and old.map_durable:
                log.ledgers_map, log.map_durable = old.ledgers_map, True
            else:
                log.ledgers_map = None if maps is None else maps.get(view.log_id)
                log.map_durable = view.state == "flushed" and old is not None
            self._put(view.log_id, log)
        # Ids from what states showed only (the predicted logs between two states are
        # placeholders). A preallocated log's id is not counted: a crash may drop the log,
        # which holds nothing, and its id with it, as the predicting model's does.
        self.observed_max = max([self.observed_max, *self.logs])
        self.max_seen_id = max(self.observed_max, least - 1)
        self.current = current
        self.least_unflushed = self.least_seen = least
        self.least_followed = True
        self.followed = True
        self.provisional = []
        self.dropped_from = None
        self.rotate_requested = False
        self.preallocated = bool(preallocated) or self.preallocates_unseen
        # The next id: the waiting preallocated log's, or one past this run's logs (the
        # run starts at leastUnflushedLogId's first value; ids of removed logs may come back).
        self.next_id = (
            min(preallocated) if preallocated else max([least, *(i + 1 for i in self.logs)])
        )
        # Logs above a waiting preallocated log are compactions' (they took the ids after
        # it from the shared counter): the next rotation never takes them.
        self.taken |= {i for i in self.logs if i >= self.next_id}
        self._skip_taken()
        self.created = {}

    def lost_unsynced(self) -> None:
        """A crash that may lose what was never fsynced (a power cut; not a killed process,
        whose page cache the restart reads): every log surely holds its fsynced bytes only,
        though its map (or the header pointing at it) may still claim the rest (R-LOG-CRASH,
        spec/protocol/compaction.md)."""
        for log in self.logs.values():
            held = log.surely_held()
            log.sure = _sure_after(
                {k: min(n, log.durable.get(k, 0)) for k, n in held.items()}, log.written
            )

    def restarted(self) -> None:
        """A new run: nothing is created in it yet, the next id is unknown until seen, and
        the logs of earlier runs are sealed (the first state of the run replaces them with
        what recovery left; until one is seen, their durable bytes stay what they were)."""
        for log in self.logs.values():
            if log.state in ("active", "rotated"):
                log.state = "flushed"
        self.unresolved = {}
        self.next_id = None
        self.provisional = []
        self.created = {}
        self.current = None
        self.relaxed = False
        self.rotate_requested = False
        self.preallocated = self.preallocates_unseen
        self.dropped_from = None
        self.least_followed = False
        self.may_vanish = set()
        # An id a compaction took and rolled back is durable nowhere (no file keeps it, and
        # lastId need not be fsynced): a new run may use it again (no log held it: see
        # ``reusable`` and ``freed``). The compaction logs that exist are logs now.
        self.released |= self.taken - self.held
        self.taken = set()

    def check_invariants(self) -> None:
        for log_id, log in self.logs.items():
            assert log.log_id == log_id
            log.check_invariants()
            assert log_id <= self.max_seen_id, (log_id, self.max_seen_id)
        actives = [log_id for log_id, log in self.logs.items() if log.state == "active"]
        if self.per_ledger:
            return
        assert len(actives) <= 1, actives
        if self.current is not None and not self.relaxed:
            assert actives == [self.current], (actives, self.current)
        if self.next_id is not None and not self.relaxed:
            assert self.next_id not in self.logs and self.next_id not in self.taken, self.next_id
            assert all(log_id < self.next_id or log_id in self.taken for log_id in self.logs), (
                self.next_id,
                sorted(self.logs),
            )
