"""The properties of spec/properties.md as predicates over a history (spec/trace.py Steps).

The model checks that an implementation does what the model does; these predicates check
what every implementation must do whatever the model says, from the client's side only
(results, acks, and the abstract state where the recorder captured it). They run over a
trace from any source (the refinement harness, a recorded adapter run), incrementally:
:class:`PropertyMonitor` takes the steps in order and reports each violation at the step
where it becomes visible. Spec pages: spec/properties.md, spec/trace.md.

Definitions:

- An add or fence is **acknowledged** at step j when its own result is ok at j, or a
  completion for it without an error appears in step j's ``completed``. Within a step the
  step's own request is judged first (it saw only acks of earlier steps), then the
  completions in their order, then the step's own ack. This definition is
  spec/operations.py ``acknowledgements``, which the model (models/bookie/bookie.py) uses too.
- A **run** is the stretch from the start, or from a ``restart`` that returned ok, to the next
  ``crash`` or ``shutdown``. While the bookie is down (after a crash or shutdown, before an ok
  restart; a failed restart leaves it down) requests are not checked: they may fail.
- A **fault** is active from a ``fail_fsync`` or ``disk_full`` step until the next
  ``restart``.
- An add **may have taken effect** unless it failed with an error other than ``io_error``
  (spec/adapter.md: after any other code nothing was written).

Properties (numbered as in spec/properties.md; ``prop`` is the name in brackets):

1. Durability [durability]: after an add of (L, E, data) is acknowledged, every later read of
   (L, E) while the bookie is up returns ok with that data, until a ``delete`` of L is issued
   (whatever its result: a delete that crashed may or may not have happened, so L is not
   checked from the delete on). While a fault is active, a read may fail with ``io_error``
   instead; a read interrupted by a crash is not judged. Accepted data: that of every
   acknowledged add of (L, E), and of every add of (L, E) issued after the first
   acknowledged one that may have taken effect (a later overwrite, acknowledged or not yet,
   may be what a read sees; an older unacknowledged one may not).
2. Fence durability [fence]: after a fence of L is acknowledged at step j, no add of L whose
   own step index is greater than j is ever acknowledged (an add issued before the fence's
   ack may still be).
3. Auth [auth]: the key of L is the key of the first add or fence of L to be acknowledged;
   any later acknowledged add or fence of L with another key is a violation. A delete resets
   nothing: ledger ids are never reused.
4. No resurrection [resurrection]: after a delete of L returns ok at step j, no later read of
   L returns ok while the bookie is up, except a read of an entry whose add was issued after
   step j and may have taken effect (a new entry, not a deleted one).
6. Forward progress [progress], over the steps that carry a ``state`` (a step whose result
   is ``crashed`` is skipped: its state is of a half-done step):
   - ``last_mark`` never decreases over the whole history, across restarts too;
   - ``journal_mark`` never decreases within a run, and ``journal_mark >= last_mark`` in
     every state;
   - ``least_unflushed_log_id`` never decreases within a run;
   - an ok ``checkpoint`` has ``last_mark == journal_mark`` in its state (only under the
     ``in_process`` ack profile: a bookie that commits on its own threads may have forced the
     journal again between the checkpoint and the state);
   - an ok ``restart`` after an ok ``shutdown``, with no crash in between, reports
     ``replayed == 0`` when it reports ``replayed`` at all.
   Marks compare as (journal id, offset). "Within a run": the trackers start again at each
   ``crash`` and each ``restart`` step. Checked only under the ``full`` state profile
   (spec/profile.py): the other profiles do not judge marks.

How each operation matters to the monitor is one table, :data:`RULES` (checked against the
operation registry of spec/operations.py when this module is imported): what it checks
before the step's completions (a read), what it records after them (a request, a change of
the environment), and whether an ok step of it must leave ``last_mark == journal_mark``; and
:data:`ACK_RULES`, what an ack (or a failed ack) of each operation answered later means.

Not here: 5 (compaction atomicity) and 7 (format validity) are about files, not about what a
client sees; they are checked on the disk (proofs/). Nor is it checked that a read of an
entry never acknowledged fails, or which acks a crash may drop: that is the model's job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from spec.operations import (
    Add,
    AdvanceClock,
    CheckDirs,
    Checkpoint,
    CheckpointFlush,
    CheckpointPersist,
    CompactCopy,
    CompactFlush,
    CompactIndex,
    Completion,
    Crash,
    Delete,
    DiskFull,
    DiskWritable,
    FailFsync,
    FailRead,
    FailWrite,
    Fence,
    Gc,
    GcBegin,
    JournalAck,
    JournalForce,
    JournalSync,
    JournalWrite,
    Preallocate,
    Read,
    Restart,
    Rotate,
    Shutdown,
    WriteClose,
    acknowledgements,
    answered_later,
    require_complete,
)
from spec.profile import DEFAULT_PROFILE, Profile
from spec.state import AbstractState, Mark
from spec.trace import Step

#: The names of the properties, in spec/properties.md's order.
PROPERTIES = ("durability", "fence", "auth", "resurrection", "progress")

#: The error a failed add may leave behind it (spec/adapter.md, "add").
_MAYBE_WRITTEN = "io_error"


@attrs.frozen
class Violation:
    """Property ``prop`` is broken, visibly at step ``step``; ``message`` says how."""

    prop: str = attrs.field(validator=attrs.validators.in_(PROPERTIES))
    step: int
    message: str


@attrs.define
class _AddRecord:
    """One add of some (ledger, entry): where it was issued, its data, what became of it."""

    step: int
    data: bytes
    acked_at: int | None = None
    failed: bool = False  # failed with a code after which nothing was written


class PropertyMonitor:
    """Checks properties 1, 2, 3, 4 and 6 over a history fed step by step (see the module
    docstring). ``observe`` returns the violations the step reveals."""

    def __init__(self, profile: Profile = DEFAULT_PROFILE) -> None:
        self.profile = profile
        self._next_index = 0
        self._pending: dict[int, Add | Fence] = {}
        self._up = True
        #: An injected fault that can break writes fired in this run; a read fault fired in
        #: the current step.
        self._fault = False
        self._read_fault = False
        self._clean_stop = False  # an ok shutdown, and no crash since
        self._adds: dict[tuple[int, int], list[_AddRecord]] = {}
        #: The (ledger, entry) whose add records changed since the last check_invariants.
        self._touched: set[tuple[int, int]] = set()
        self._delete_issued: dict[int, int] = {}  # ledger -> step of its first delete
        #: ledger -> steps of every delete issued: a fence and a key hold until the next one
        #: (BookKeeper's answers may then create the ledger again, a new ledger).
        self._deletes: dict[int, list[int]] = {}
        self._deleted_at: dict[int, int] = {}  # ledger -> step of its first ok delete
        self._fence_acked_at: dict[int, int] = {}
        self._keys: dict[int, tuple[bytes, int]] = {}  # ledger -> (key, step acknowledged)
        self._last_mark: Mark | None = None
        self._run_journal_mark: Mark | None = None
        self._run_least_unflushed: int | None = None

    # --- the step ---------------------------------------------------------------------------

    def observe(self, step: Step) -> list[Violation]:
        """Take the next step (indices 0, 1, 2, ... in order) and return its violations."""
        assert step.index == self._next_index, (
            f"steps must come in order: expected {self._next_index}, got {step.index}"
        )
        rule = RULES[type(step.op)]
        found: list[Violation] = []
        # A read fault that met a read excuses that read; any other fault (a read fault in a
        # write path too) may fail the bookie from its step until the next restart.
        reading = isinstance(step.op, Read)
        self._read_fault = reading and any(fault.op == "read" for fault in step.faults)
        if any(fault.op != "read" or not reading for fault in step.faults):
            self._fault = True
        if rule.before_acks is not None:
            found += rule.before_acks(self, step.op, step)
        acks = acknowledgements(step.index, step.op, step.result, step.completed)
        own = [ack for ack in acks if ack.step == step.index]
        for completion in acks:
            if completion.step != step.index:
                found += self._complete(completion, step.index)
        if rule.after_acks is not None:
            found += rule.after_acks(self, step.op, step)
        for _ in own:  # the step's own ack, once its request is recorded
            assert isinstance(step.op, Add | Fence), step.op
            found += self._acknowledged(step.index, step.op, step.index)
        if step.state is not None and not step.result.crashed and self.profile.state == "full":
            meet = rule.marks_meet and self.profile.acks == "in_process"
            found += self._progress(step, step.state, marks_meet=meet)
        self._next_index += 1
        return found

    # --- requests ---------------------------------------------------------------------------

    def _on_delete(self, op: Delete, step: Step) -> list[Violation]:
        self._delete_issued.setdefault(op.ledger, step.index)
        self._deletes.setdefault(op.ledger, []).append(step.index)
        if step.result.ok:
            self._deleted_at.setdefault(op.ledger, step.index)
        return []

    def _on_add(self, op: Add, step: Step) -> list[Violation]:
        record = _AddRecord(step.index, op.data, failed=_no_effect(step.result.error))
        self._adds.setdefault((op.ledger, op.entry), []).append(record)
        self._touched.add((op.ledger, op.entry))
        return self._answered(op, step)

    def _answered(self, op: Add | Fence, step: Step) -> list[Violation]:
        """The answer to an add or fence: pending (its ack comes later), or not (an ok answer
        is its own ack: ``observe`` takes it after this)."""
        if step.result.pending:
            self._pending[step.index] = op
        return []

    def _complete(self, completion: Completion, index: int) -> list[Violation]:
        assert completion.step in self._pending, (
            f"step {index} completes step {completion.step}, which is not pending"
        )
        op = self._pending.pop(completion.step)
        if completion.error is None:
            return self._acknowledged(completion.step, op, index)
        ACK_RULES[type(op)].failed(self, op, completion.step, completion.error)
        return []

    def _add_failed(self, op: Add, issued: int, error: str) -> None:
        if _no_effect(error):
            self._add_record(op, issued).failed = True

    def _fence_failed(self, op: Fence, issued: int, error: str) -> None:
        """A fence whose ack failed may or may not be in effect: nothing is recorded."""

    def _add_record(self, op: Add, issued: int) -> _AddRecord:
        """The record of the add of step ``issued``, to change it."""
        self._touched.add((op.ledger, op.entry))
        for record in self._adds[(op.ledger, op.entry)]:
            if record.step == issued:
                return record
        raise AssertionError(f"no add of step {issued}")

    def _acknowledged(self, issued: int, op: Add | Fence, index: int) -> list[Violation]:
        """The add or fence of step ``issued`` is acknowledged at step ``index``."""
        found = self._check_key(issued, op, index)
        return found + ACK_RULES[type(op)].acked(self, op, issued, index)

    def _fence_acked(self, op: Fence, issued: int, index: int) -> list[Violation]:
        fenced_at = self._fence_acked_at.get(op.ledger)
        if fenced_at is None or self._deleted_between(op.ledger, fenced_at, issued):
            self._fence_acked_at[op.ledger] = index
        return []

    def _deleted_between(self, ledger: int, after: int, before: int) -> bool:
        """Whether a delete of ``ledger`` was issued after step ``after`` and before step
        ``before``: what was promised of the ledger before it ends there (properties 2 and
        3; under BookKeeper's answers a later add creates the ledger again)."""
        return any(after < at < before for at in self._deletes.get(ledger, ()))

    def _add_acked(self, op: Add, issued: int, index: int) -> list[Violation]:
        found: list[Violation] = []
        self._add_record(op, issued).acked_at = index
        fenced_at = self._fence_acked_at.get(op.ledger)
        if (
            fenced_at is not None
            and issued > fenced_at
            and not self._deleted_between(op.ledger, fenced_at, issued)
        ):
            found.append(
                Violation(
                    "fence",
                    index,
                    f"the add of ledger {op.ledger} entry {op.entry} issued at step {issued} "
                    f"was acknowledged, but the ledger's fence was acknowledged at step "
                    f"{fenced_at}, before the add was issued",
                )
            )
        return found

    def _check_key(self, issued: int, op: Add | Fence, index: int) -> list[Violation]:
        known = self._keys.get(op.ledger)
        if known is None:
            self._keys[op.ledger] = (op.key, index)
            return []
        key, since = known
        if op.key == key:
            return []
        if self._deleted_between(op.ledger, since, issued):
            self._keys[op.ledger] = (op.key, index)  # a new ledger under the old id
            return []
        message = (
            f"the {op.name} of ledger {op.ledger} issued at step {issued} was acknowledged "
            f"with key {op.key.hex() or '(empty)'}, but the ledger's key is "
            f"{key.hex() or '(empty)'} (set by an ack at step {since})"
        )
        return [Violation("auth", index, message)]

    # --- reads ------------------------------------------------------------------------------

    def _on_read(self, op: Read, step: Step) -> list[Violation]:
        """A read is judged before the step's completions: it saw only earlier acks. While
        the bookie is down reads are not judged."""
        index, result = step.index, step.result
        if not self._up or result.crashed:
            return []
        found = self._check_resurrection(index, op, result.ok)
        if op.ledger in self._delete_issued:
            return found
        records = self._adds.get((op.ledger, op.entry), [])
        acked = [r for r in records if r.acked_at is not None]
        if not acked:
            return found
        first = min(r.step for r in acked)
        accepted = {
            r.data for r in records if r.acked_at is not None or (r.step > first and not r.failed)
        }
        what = f"ledger {op.ledger} entry {op.entry} (acknowledged at step {acked[0].acked_at})"
        if result.ok:
            if result.data not in accepted:
                size = len(result.data or b"")
                message = (
                    f"a read of {what} returned {size} bytes that are neither an acknowledged "
                    "add's data nor that of a later add of the entry"
                )
                found.append(Violation("durability", index, message))
        elif not ((self._fault or self._read_fault) and result.error == "io_error"):
            message = f"{what} is unreadable: the read failed with {result.error}"
            if result.error == "io_error":
                message += " while no injected fault had fired"
            found.append(Violation("durability", index, message))
        return found

    def _check_resurrection(self, index: int, op: Read, ok: bool) -> list[Violation]:
        deleted_at = self._deleted_at.get(op.ledger)
        if not ok or deleted_at is None:
            return []
        records = self._adds.get((op.ledger, op.entry), [])
        if any(r.step > deleted_at and not r.failed for r in records):
            return []  # a new entry, added after the delete
        message = (
            f"a read of ledger {op.ledger} entry {op.entry} returned data, but the ledger "
            f"was deleted at step {deleted_at}"
        )
        return [Violation("resurrection", index, message)]

    # --- the environment --------------------------------------------------------------------

    def _on_crash(self, _op: Crash, _step: Step) -> list[Violation]:
        self._up = False
        self._clean_stop = False
        self._new_run()
        return []

    def _on_shutdown(self, _op: Shutdown, step: Step) -> list[Violation]:
        self._up = False
        self._clean_stop = self._clean_stop or step.result.ok
        return []

    def _on_restart(self, _op: Restart, step: Step) -> list[Violation]:
        found: list[Violation] = []
        self._fault = False
        self._new_run()
        if step.result.ok:
            found += self._check_clean_restart(step)
            self._up = True
            self._clean_stop = False
        return found

    def _check_clean_restart(self, step: Step) -> list[Violation]:
        replayed = step.result.replayed
        if not self._clean_stop or replayed is None or replayed == 0:
            return []
        message = (
            f"the restart after a clean shutdown replayed {replayed} journal records; "
            "after a clean shutdown nothing needs replay"
        )
        return [Violation("progress", step.index, message)]

    def _new_run(self) -> None:
        self._run_journal_mark = None
        self._run_least_unflushed = None

    # --- forward progress -------------------------------------------------------------------

    def _progress(self, step: Step, state: AbstractState, *, marks_meet: bool) -> list[Violation]:
        problems: list[str] = []
        if state.journal_mark < state.last_mark:
            problems.append(
                f"journal_mark {state.journal_mark} is behind last_mark {state.last_mark}"
            )
        if self._last_mark is not None and state.last_mark < self._last_mark:
            problems.append(f"last_mark moved backwards: {self._last_mark} -> {state.last_mark}")
        run_mark = self._run_journal_mark
        if run_mark is not None and state.journal_mark < run_mark:
            problems.append(
                f"journal_mark moved backwards within a run: {run_mark} -> {state.journal_mark}"
            )
        least = self._run_least_unflushed
        if least is not None and state.least_unflushed_log_id < least:
            problems.append(
                "least_unflushed_log_id moved backwards within a run: "
                f"{least} -> {state.least_unflushed_log_id}"
            )
        if marks_meet and step.result.ok and state.last_mark != state.journal_mark:
            problems.append(
                f"after the checkpoint last_mark {state.last_mark} is not journal_mark "
                f"{state.journal_mark}"
            )
        self._last_mark = state.last_mark
        self._run_journal_mark = state.journal_mark
        self._run_least_unflushed = state.least_unflushed_log_id
        return [Violation("progress", step.index, problem) for problem in problems]

    # --- invariants -------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Assert the monitor's internal relations (after every step: the refinement judge,
        proofs/harness/judge.py, calls it). The add records are checked where they changed
        since the last call, so that a step costs the same at step 10 and at step 10,000:
        an unchanged record cannot have broken, for everything it is compared with only
        grows (the step count, the acknowledged keys)."""
        seen = self._next_index
        assert seen >= 0, seen
        if self._pending:
            assert min(self._pending) >= 0 and max(self._pending) < seen, self._pending
            assert all(type(op) in ACK_RULES for op in self._pending.values()), self._pending
        assert not (self._clean_stop and self._up), "a clean stop while up"
        for ledger, at in self._deleted_at.items():
            assert self._delete_issued[ledger] <= at < seen, (ledger, at)
        # Step numbers recorded so far are all before the next one (max: one call, no loop).
        assert max(self._delete_issued.values(), default=-1) < seen
        assert max(self._fence_acked_at.values(), default=-1) < seen
        assert max((at for _, at in self._keys.values()), default=-1) < seen
        for ledger, entry in self._touched:
            records = self._adds[(ledger, entry)]
            steps = [r.step for r in records]
            assert steps == sorted(set(steps)), steps
            for record in records:
                assert record.step < seen, record
                assert record.acked_at is None or record.step <= record.acked_at < seen
                assert not (record.failed and record.acked_at is not None), record
                assert record.acked_at is None or ledger in self._keys, record
        if self._run_journal_mark is not None:
            assert self._last_mark is not None
        self._touched.clear()


_Handler = Callable[[PropertyMonitor, Any, Step], list[Violation]]


@attrs.frozen
class Rule:
    """What the monitor does with a step of one operation (see ``observe``): ``before_acks``
    runs before the step's completions, ``after_acks`` after them; ``marks_meet``: an ok step
    of it has ``last_mark == journal_mark`` in its state (property 6)."""

    before_acks: _Handler | None = None
    after_acks: _Handler | None = None
    marks_meet: bool = False


#: Every operation's rule, checked against the registry (spec/operations.py) at import.
RULES: Mapping[type[Any], Rule] = require_complete(
    {
        Add: Rule(after_acks=PropertyMonitor._on_add),
        Read: Rule(before_acks=PropertyMonitor._on_read),
        Fence: Rule(after_acks=PropertyMonitor._answered),
        WriteClose: Rule(),
        Delete: Rule(after_acks=PropertyMonitor._on_delete),
        Checkpoint: Rule(marks_meet=True),
        JournalForce: Rule(),
        JournalWrite: Rule(),
        JournalSync: Rule(),
        JournalAck: Rule(),
        CheckpointFlush: Rule(),
        CheckpointPersist: Rule(),
        Rotate: Rule(),
        Preallocate: Rule(),
        CheckDirs: Rule(),
        Gc: Rule(),
        GcBegin: Rule(),
        CompactCopy: Rule(),
        CompactFlush: Rule(),
        CompactIndex: Rule(),
        Crash: Rule(after_acks=PropertyMonitor._on_crash),
        Restart: Rule(after_acks=PropertyMonitor._on_restart),
        Shutdown: Rule(after_acks=PropertyMonitor._on_shutdown),
        DiskFull: Rule(),
        DiskWritable: Rule(),
        AdvanceClock: Rule(),
        FailFsync: Rule(),
        FailWrite: Rule(),
        FailRead: Rule(),
    },
    "the property monitor's rules (spec/properties.py RULES)",
)


@attrs.frozen
class AckRule:
    """What the ack of an operation answered later means: ``acked(monitor, op, issued,
    index)`` when it succeeds at step ``index`` (its key was checked), ``failed(monitor, op,
    issued, error)`` when it fails."""

    acked: Callable[[PropertyMonitor, Any, int, int], list[Violation]]
    failed: Callable[[PropertyMonitor, Any, int, str], None]


#: Every operation answered later, checked against the registry at import.
ACK_RULES: Mapping[type[Any], AckRule] = require_complete(
    {
        Add: AckRule(PropertyMonitor._add_acked, PropertyMonitor._add_failed),
        Fence: AckRule(PropertyMonitor._fence_acked, PropertyMonitor._fence_failed),
    },
    "the property monitor's ack rules (spec/properties.py ACK_RULES)",
    among=answered_later,
)


def _no_effect(error: str | None) -> bool:
    """An add that failed with ``error`` wrote nothing (spec/adapter.md, "add")."""
    return error is not None and error != _MAYBE_WRITTEN


def check_history(steps: Iterable[Step]) -> list[Violation]:
    """Every violation of the history, in step order (a fresh monitor fed every step)."""
    monitor = PropertyMonitor()
    found: list[Violation] = []
    for step in steps:
        found += monitor.observe(step)
        monitor.check_invariants()
    return found
