"""The entry-log layout judged by rules, not predicted.

Spec pages: spec/format/entry_log.md ("Rules every entry-log manager keeps") and the
entry-log rows of spec/adapter.md. Which log a record goes to, when a log is rotated and
which id a new log takes are the manager's choices: many are made by timing (a preallocated
log, a compaction taking an id from the shared counter, a directory filling up), and with
many active logs they are made per ledger. Predicting them exactly means modelling one
manager's every decision; this module instead checks, on each observed layout against the
one observed before it in the same run, the rules every correct manager keeps:

- ``R-LOG-IDS``: a log that appears takes an id never seen in this run and not below the
  run's first id; while every step is observed, ids appear in increasing order.
- ``R-LOG-SEALED``: a sealed (rotated or flushed) log never changes its bytes, never becomes
  active again, and never vanishes but by a GC step.
- ``R-LOG-BYTES``: per ledger, the bytes the logs gained are exactly the records the bookie
  accepted since (every step observed), or at most those (some still in flight).
- ``R-LOG-FLUSH``: a log becomes flushed only by a checkpoint, and a checkpoint that returned
  leaves no rotated log behind.
- ``R-LOG-ACTIVE``: the manager's own rule: ``single``, one active log, the current one;
  ``per_ledger``, each active log holds one ledger, and no ledger has two active logs;
  ``slots``, at most dirs x N active logs (an active log may hold several ledgers), and a
  ledger's new records between two states go to one log that stays active (its records may
  be in two active logs: the map forgot its slot and it took another).
- ``R-LOG-ROTATION``: a log is rotated only for a reason (the next record would pass
  ``logSizeLimit``, an explicit rotation, a directory that filled up, the manager's own
  eviction), and a log holding more than one record never passes ``logSizeLimit``.
- ``R-LOG-MAP``: a log sealed in this run has a ledgers map of exactly its records; an
  active or preallocated log has none; a map once seen never changes.
- ``R-LEAST-UNFLUSHED``: leastUnflushedLogId never passes a log that is not flushed, never
  moves back, and moves past every log of this run that is flushed below the first
  unflushed one.
- ``R-PREALLOC``: a preallocated log holds nothing.
- ``R-WRITE-CLOSE``: with many active logs, a checkpoint that returned leaves no active log
  whose ledgers were all write-closed (or fenced) before it began
  (spec/protocol/write_close.md): their logs are sealed and flushed, GC candidates.

Garbage collection, crashes and faults are judged elsewhere (models/bookie/bookie.py): a
GC step is computed from the layout before it, a restart against what the crash could
leave, and while a fault is active only what holds in any case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from models.entrylog.manager import HEADER_BYTES, MapState, describe_map
from spec.state import LogView

#: The managers whose rules this module knows (spec/format/entry_log.md).
MANAGERS = ("single", "per_ledger", "slots")


class LayoutProblem(Exception):
    """A rule the observed layout breaks: ``rule`` names it (spec/adapter.md)."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


@attrs.frozen
class Layout:
    """One observed layout: every entry log (preallocated ones included) by id, their
    ledgers maps when the state reports them, leastUnflushedLogId and the current log."""

    logs: Mapping[int, LogView]
    maps: Mapping[int, MapState] | None
    least: int
    current: int | None

    @classmethod
    def of(
        cls,
        views: Sequence[LogView],
        maps: Mapping[int, MapState] | None,
        least: int,
        current: int | None,
    ) -> Layout:
        return cls({view.log_id: view for view in views}, maps, least, current)


@attrs.define
class Between:
    """What the model knows happened between two observed layouts of one run."""

    #: The records the bookie accepted into the entry logs, in order: (ledger, bytes).
    records: list[tuple[int, int]] = attrs.Factory(list)
    #: An explicit rotation returned ok.
    rotate: bool = False
    #: A checkpoint (or its flush phase) returned ok.
    checkpoint: bool = False
    #: A ledger directory filled up (the active log may move off it).
    dir_full: bool = False
    #: The bookie runs on threads of its own (asynchronous acks): some steps may not have
    #: run yet, and a checkpoint or a preallocation may run unseen.
    unsure: bool = False
    #: A GC step ran between (judged here only when the layout before it is not known
    #: exactly, under asynchronous acks): flushed logs may vanish (dead, or compacted away)
    #: and new flushed logs appear (compactions), holding only what the vanished ones held.
    gc: bool = False
    #: The ledgers surely write-closed (or fenced) before the checkpoint between began: with
    #: many active logs it sealed their logs (R-WRITE-CLOSE). Empty when no checkpoint ran.
    write_closed: frozenset[int] = frozenset()

    def added(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for ledger, size in self.records:
            out[ledger] = out.get(ledger, 0) + size
        return out


@attrs.define
class RunHistory:
    """What the rules remember of the current run."""

    #: The run's first id (leastUnflushedLogId when it started): no new log goes below it.
    first_id: int = 0
    #: Every id a state of this run showed.
    seen: set[int] = attrs.Factory(set)
    #: The ids of logs this run created for adds (seen preallocated, active or rotated): the
    #: logs leastUnflushedLogId counts (a compaction's new log is not among them).
    created: set[int] = attrs.Factory(set)
    #: The logs this run sealed (seen active, then sealed): their maps are exact.
    sealed_here: set[int] = attrs.Factory(set)

    def restarted(self, first_id: int, layout: Layout) -> None:
        """A new run, starting with ``layout`` (judged by the restart rules)."""
        self.first_id = first_id
        self.seen = set(layout.logs)
        self.created = {i for i, v in layout.logs.items() if v.state != "flushed"}
        self.sealed_here = set()

    def learn(self, layout: Layout) -> None:
        for log_id, view in layout.logs.items():
            self.seen.add(log_id)
            if view.state in ("preallocated", "active", "rotated"):
                self.created.add(log_id)


@attrs.frozen
class ManagerRules:
    """The manager's parameters the rules need."""

    kind: str = attrs.field(validator=attrs.validators.in_(MANAGERS))
    log_size_limit_bytes: int
    #: ``slots``: the most active logs at once, ledger directories x entryLogSlotsPerLedgerDir
    #: (0 for the other managers, or when the ledger directories are not known).
    active_max: int = 0


def judge(
    before: Layout,
    after: Layout,
    between: Between,
    manager: ManagerRules,
    history: RunHistory,
) -> None:
    """Check ``after`` against ``before`` and what happened between them; raise
    LayoutProblem for the first rule broken. ``history`` is updated when all hold."""
    check_ids(before, after, between, history)
    _check_sealed(before, after, between)
    _check_bytes(before, after, between)
    _check_flush(before, after, between)
    check_active(after, manager)
    _check_one_active_log(before, after, between, manager)
    _check_rotation(before, after, between, manager)
    _check_maps(before, after, history)
    _check_least(before, after, between, history)
    _check_write_close(after, between, manager)
    for log_id, view in before.logs.items():
        if view.state == "active" and after.logs.get(log_id, view).state != "active":
            history.sealed_here.add(log_id)
    history.learn(after)


def check_ids(before: Layout, after: Layout, between: Between, history: RunHistory) -> None:
    """R-LOG-IDS, which every state of a run keeps, a GC step's too."""
    high = max(history.seen, default=-1)
    new = sorted(set(after.logs) - set(before.logs))
    for log_id in new:
        if log_id in history.seen:
            raise LayoutProblem(
                "R-LOG-IDS",
                f"entry log {log_id} appeared with an id already used in this run (ids come "
                "from one counter and are never reused while a file or the index names them)",
            )
        if log_id < history.first_id:
            raise LayoutProblem(
                "R-LOG-IDS",
                f"entry log {log_id} appeared below {history.first_id}, where this run's ids "
                "start (one past the last id of the runs before: ids are never reused)",
            )
        view = after.logs[log_id]
        if log_id < high and not between.unsure and view.state != "flushed":
            # (A compaction's new log took its id at the copy phase and shows at phase 3,
            # after logs the rotations took since: only its newness is judged.)
            raise LayoutProblem(
                "R-LOG-IDS",
                f"entry log {log_id} appeared below entry log {high}, seen before: ids are "
                "taken from one counter, in increasing order",
            )


def _check_sealed(before: Layout, after: Layout, between: Between) -> None:
    for log_id, old in before.logs.items():
        view = after.logs.get(log_id)
        if view is None:
            if old.state == "preallocated":
                continue  # dropped: its directory filled up (it holds nothing)
            if between.gc and (old.state == "flushed" or between.unsure):
                continue  # deleted as dead, or compacted away (flushed unseen, if async)
            raise LayoutProblem(
                "R-LOG-SEALED", f"entry log {log_id} ({old.state}) vanished without a GC"
            )
        if old.state in ("rotated", "flushed"):
            if view.state not in ("rotated", "flushed") or (
                old.state == "flushed" and view.state != "flushed"
            ):
                raise LayoutProblem(
                    "R-LOG-SEALED",
                    f"entry log {log_id} was {old.state} and is {view.state} now: a sealed "
                    "log takes no more records",
                )
            if view.ledger_bytes != old.ledger_bytes:
                raise LayoutProblem(
                    "R-LOG-SEALED",
                    f"entry log {log_id} was sealed holding {dict(old.ledger_bytes)} and "
                    f"holds {dict(view.ledger_bytes)} now: a sealed log never changes",
                )
        elif old.state == "active" and view.state == "preallocated":
            raise LayoutProblem(
                "R-LOG-SEALED", f"entry log {log_id} was active and is preallocated now"
            )


def _check_bytes(before: Layout, after: Layout, between: Between) -> None:
    gained: dict[int, int] = {}
    # Under asynchronous acks a new flushed log may be an ordinary one, created and flushed
    # between the two states: a compaction's bytes are then bounded with the rest.
    separate = between.gc and not between.unsure
    if separate:
        _check_compacted(before, after)
    removed = _removed(before, after) if between.gc else {}
    for log_id, view in after.logs.items():
        if separate and log_id not in before.logs and view.state == "flushed":
            continue  # a compaction's new log (_check_compacted)
        old = dict(before.logs[log_id].ledger_bytes) if log_id in before.logs else {}
        for ledger, size in view.ledger_bytes:
            if size < old.get(ledger, 0):
                raise LayoutProblem(
                    "R-LOG-BYTES",
                    f"entry log {log_id} lost bytes of ledger {ledger}: {old[ledger]} -> {size}",
                )
            if size > old.get(ledger, 0):
                gained[ledger] = gained.get(ledger, 0) + size - old.get(ledger, 0)
        for ledger in set(old) - {led for led, _ in view.ledger_bytes}:
            raise LayoutProblem(
                "R-LOG-BYTES", f"entry log {log_id} lost every byte of ledger {ledger}"
            )
    added = between.added()
    for ledger in sorted(set(gained) | set(added)):
        got, want = gained.get(ledger, 0), added.get(ledger, 0)
        if got == want or (between.unsure and got <= want + removed.get(ledger, 0)):
            continue
        raise LayoutProblem(
            "R-LOG-BYTES",
            f"the entry logs gained {got} bytes of ledger {ledger}; the records accepted "
            f"since the state before come to {want}"
            + (" at most" if between.unsure else "")
            + " (a record written twice, or lost, or bytes nobody added)",
        )


def _removed(before: Layout, after: Layout) -> dict[int, int]:
    """Per ledger, the bytes of the logs a GC step removed."""
    removed: dict[int, int] = {}
    for log_id, old in before.logs.items():
        if log_id not in after.logs:
            for ledger, size in old.ledger_bytes:
                removed[ledger] = removed.get(ledger, 0) + size
    return removed


def _check_compacted(before: Layout, after: Layout) -> None:
    """The new flushed logs of a GC step hold, per ledger, no more than the logs it removed
    held: a compaction copies, it never makes records."""
    removed = _removed(before, after)
    copied: dict[int, int] = {}
    for log_id, view in after.logs.items():
        if log_id not in before.logs and view.state == "flushed":
            for ledger, size in view.ledger_bytes:
                copied[ledger] = copied.get(ledger, 0) + size
    for ledger, size in sorted(copied.items()):
        if size > removed.get(ledger, 0):
            raise LayoutProblem(
                "R-LOG-BYTES",
                f"a GC step's new logs hold {size} bytes of ledger {ledger}; the logs it "
                f"removed held {removed.get(ledger, 0)} (a compaction copies, it never makes "
                "records)",
            )


def _check_flush(before: Layout, after: Layout, between: Between) -> None:
    for log_id, view in after.logs.items():
        old = before.logs.get(log_id)
        if (
            view.state == "flushed"
            and old is not None
            and old.state != "flushed"
            and not (between.checkpoint or between.unsure)
        ):
            raise LayoutProblem(
                "R-LOG-FLUSH",
                f"entry log {log_id} was {old.state} and is flushed now, with no checkpoint "
                "between: only a checkpoint fsyncs a log",
            )
        if view.state == "flushed" and old is None and not (between.unsure or between.gc):
            raise LayoutProblem(
                "R-LOG-FLUSH",
                f"entry log {log_id} appeared flushed outside a GC step: a new log is "
                "active (or preallocated) until a checkpoint fsyncs it",
            )
        rotated_before = old is not None and old.state == "rotated"
        if between.checkpoint and not between.unsure and view.state == "rotated" and rotated_before:
            raise LayoutProblem(
                "R-LOG-FLUSH",
                f"entry log {log_id} is still rotated after a checkpoint returned: a "
                "checkpoint fsyncs every rotated log",
            )


def check_active(after: Layout, manager: ManagerRules) -> None:
    """R-LOG-ACTIVE, which every layout keeps, after a restart and under a fault too."""
    active = sorted(i for i, v in after.logs.items() if v.state == "active")
    if manager.kind == "single":
        if len(active) > 1:
            raise LayoutProblem(
                "R-LOG-ACTIVE", f"entry logs {active} are all active; one log takes the adds"
            )
        if active and after.current != active[0]:
            raise LayoutProblem(
                "R-LOG-ACTIVE",
                f"entry log {active[0]} is active but the current log is {after.current}",
            )
        return
    if manager.kind == "slots":
        # (0: the number of ledger directories is not known, the count is not judged.)
        if manager.active_max and len(active) > manager.active_max:
            raise LayoutProblem(
                "R-LOG-ACTIVE",
                f"entry logs {active} are all active: {len(active)} logs, above "
                f"{manager.active_max} (ledger directories x entryLogSlotsPerLedgerDir), the "
                "most slots a slots manager has",
            )
        return
    owner: dict[int, int] = {}
    for log_id in active:
        ledgers = after.logs[log_id].ledgers
        if len(ledgers) > 1:
            raise LayoutProblem(
                "R-LOG-ACTIVE",
                f"active entry log {log_id} holds ledgers {list(ledgers)}: with an entry "
                "log per ledger, an active log takes one ledger's records",
            )
        for ledger in ledgers:
            if ledger in owner:
                raise LayoutProblem(
                    "R-LOG-ACTIVE",
                    f"ledger {ledger} has two active entry logs, {owner[ledger]} and "
                    f"{log_id}: its new records go to one",
                )
            owner[ledger] = log_id


def _check_one_active_log(
    before: Layout, after: Layout, between: Between, manager: ManagerRules
) -> None:
    """R-LOG-ACTIVE for ``slots``: a ledger's new records between two states went to one log
    that is still active (a rotated one may have taken the first of them). Judged only for a
    ledger whose records between are not interleaved with another ledger's (another
    ledger's add may make the map forget its slot) and when every step is observed (the
    map's expiry, on the bookie's clock, is assumed not to fall between two adds of a ledger
    inside one observed step)."""
    if manager.kind != "slots" or between.unsure or between.dir_full or between.gc:
        return
    order = [ledger for ledger, _ in between.records]
    for ledger in sorted(set(order)):
        first, last = order.index(ledger), len(order) - 1 - order[::-1].index(ledger)
        if any(other != ledger for other in order[first : last + 1]):
            continue
        gained = []
        for log_id, view in sorted(after.logs.items()):
            old = before.logs.get(log_id)
            had = dict(old.ledger_bytes).get(ledger, 0) if old is not None else 0
            if view.state == "active" and dict(view.ledger_bytes).get(ledger, 0) > had:
                gained.append(log_id)
        if len(gained) > 1:
            raise LayoutProblem(
                "R-LOG-ACTIVE",
                f"ledger {ledger}'s new records went to active entry logs {gained}: a slots "
                "manager adds a ledger's records to its one slot's log",
            )


def _check_rotation(before: Layout, after: Layout, between: Between, manager: ManagerRules) -> None:
    limit = manager.log_size_limit_bytes
    for log_id, old in before.logs.items():
        view = after.logs.get(log_id)
        if old.state != "active" or view is None:
            continue
        size = HEADER_BYTES + view.entry_bytes
        if view.state == "active":
            if size > limit and old.entry_bytes > 0 and view.entry_bytes > old.entry_bytes:
                raise LayoutProblem(
                    "R-LOG-ROTATION",
                    f"active entry log {log_id} holds {size} bytes, past logSizeLimit "
                    f"({limit}): the record that passed it should have gone to a new log",
                )
            continue
        if between.rotate or between.dir_full or between.unsure:
            continue
        if manager.kind != "single":
            continue  # eviction and write close rotate too (the manager's own clock)
        nxt = _next_record(old, view, between.records)
        if nxt is None or size + nxt <= limit:
            raise LayoutProblem(
                "R-LOG-ROTATION",
                f"entry log {log_id} was rotated at {size} bytes with no reason: the next "
                + (
                    "add brought no record"
                    if nxt is None
                    else f"record ({nxt} bytes) still fitted under logSizeLimit ({limit})"
                ),
            )


def _check_write_close(after: Layout, between: Between, manager: ManagerRules) -> None:
    """R-WRITE-CLOSE: a checkpoint seals every active log whose ledgers were all write-closed
    before it (the single log is every ledger's: never sealed by a write close)."""
    if manager.kind == "single" or not between.checkpoint or between.unsure:
        return
    for log_id, view in sorted(after.logs.items()):
        ledgers = set(view.ledgers)
        if view.state == "active" and ledgers and ledgers <= between.write_closed:
            raise LayoutProblem(
                "R-WRITE-CLOSE",
                f"entry log {log_id} of write-closed ledger(s) {sorted(ledgers)} is still "
                "active after a checkpoint returned: the checkpoint seals a write-closed "
                "ledger's log (spec/protocol/write_close.md)",
            )


def _next_record(old: LogView, view: LogView, records: list[tuple[int, int]]) -> int | None:
    """The size of the first record since ``old`` that did not go to the log: the records
    are taken in order, those that went to it first (as many as its bytes grew by)."""
    grew = view.entry_bytes - old.entry_bytes
    for _, size in records:
        if grew == 0:
            return size
        grew -= size
        if grew < 0:
            return None
    return None


def _check_maps(before: Layout, after: Layout, history: RunHistory) -> None:
    if after.maps is None:
        return
    for log_id, view in after.logs.items():
        found = after.maps.get(log_id)
        if found is None:
            continue
        if view.state in ("active", "preallocated"):
            if found != (False, None):
                raise LayoutProblem(
                    "R-LOG-MAP", f"entry log {log_id} is {view.state} but has a ledgers map"
                )
            continue
        old = before.logs.get(log_id)
        sealed_now = old is not None and old.state == "active"
        if sealed_now or log_id in history.sealed_here:
            want: MapState = (True, view.ledger_bytes)
            if found != want:
                raise LayoutProblem(
                    "R-LOG-MAP",
                    f"entry log {log_id} ({view.state}) has {describe_map(found)}; sealing "
                    f"writes a map of exactly its records ({describe_map(want)})",
                )
        known = None if before.maps is None else before.maps.get(log_id)
        if known is not None and known[0] and found != known:
            raise LayoutProblem(
                "R-LOG-MAP",
                f"entry log {log_id} has {describe_map(found)}; it had {describe_map(known)} (a "
                "sealed log's map never changes)",
            )


def _check_least(before: Layout, after: Layout, between: Between, history: RunHistory) -> None:
    least = after.least
    unflushed = sorted(i for i, v in after.logs.items() if v.state in ("active", "rotated"))
    below = [i for i in unflushed if i < least]
    if below:
        raise LayoutProblem(
            "R-LEAST-UNFLUSHED",
            f"leastUnflushedLogId is {least}, but entry logs {below} below it are not flushed",
        )
    if least < before.least:
        raise LayoutProblem(
            "R-LEAST-UNFLUSHED", f"leastUnflushedLogId moved backwards: {before.least} -> {least}"
        )
    if between.unsure:
        return
    waiting = sorted(
        i for i, v in after.logs.items() if v.state in ("active", "rotated", "preallocated")
    )
    first = waiting[0] if waiting else None
    passed = [
        i
        for i, v in after.logs.items()
        if v.state == "flushed"
        and i in history.created
        and i >= least
        and (first is None or i < first)
    ]
    if passed:
        raise LayoutProblem(
            "R-LEAST-UNFLUSHED",
            f"leastUnflushedLogId is {least}, but entry logs {sorted(passed)} of this run are "
            "flushed with nothing unflushed below them: it moves past each once it is flushed",
        )
