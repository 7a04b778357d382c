"""The stateful refinement test: Hypothesis drives the harness (proofs/harness/refinement.py) with
every operation, background step and fault, and the harness compares bkref's Bookie with the
model after each step.

Biases, because they pay: a handful of ledgers reused across the run (bundles of adds to the
same ledgers), entry logs of 1400 bytes and payloads half of them large, so that a few adds
rotate them, a crash right after a whole checkpoint, crash plans drawn as
data (so a failure shrinks to a small plan), crashes in the middle of a step (after a drawn
number of file-system operations: a crash during a checkpoint, a rotation, a journal force, a
recovery), and long runs in the deep profile.

The machine class is built by :func:`machine_for` so that tests/quality can run the same
rules against a known-bad variant of the bookie (an ``opener`` that builds the variant).

Which rules produce each operation is :data:`PRODUCERS`, checked against the operation
registry (spec/operations.py) at import: a newly declared operation that no rule draws fails
the import of this module, naming it. tests/unit/proofs/harness/test_registry_tables.py
checks the claims (each rule named runs that operation) and that every rule is named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from impl.bookie.bookie import Bookie
from proofs.harness.refinement import SMALL_SETTINGS, InProcessBookie, Refinement
from spec.crash import CrashPlan, KeepPrefix, KeepSubset, LoseUnsynced, TornSectors, TornWrite
from spec.operations import (
    Add,
    Checkpoint,
    Crash,
    Delete,
    DiskFull,
    DiskWritable,
    FailFsync,
    Fence,
    JournalForce,
    Operation,
    Read,
    Restart,
    Rotate,
    Shutdown,
    require_complete,
)

LEDGERS = (1, 2, 3, 4)


def key_of(ledger: int) -> bytes:
    return b"key-%d" % ledger


crash_plans: st.SearchStrategy[CrashPlan] = st.one_of(
    st.just(LoseUnsynced()),
    st.builds(KeepPrefix, st.integers(0, 40)),
    st.builds(TornWrite, st.integers(0, 40), st.integers(0, 3)),
    st.builds(TornSectors, st.integers(0, 40), st.frozensets(st.integers(0, 3)), st.integers(0, 3)),
    st.builds(KeepSubset, st.frozensets(st.integers(0, 40), max_size=12)),
)
#: How many file-system operations a step may issue before the machine dies in it.
crash_points = st.none() | st.integers(0, 24)
#: Half of the payloads are large (120-160 bytes, records of 140-180): Hypothesis draws mostly
#: short binaries, which filled a 1400-byte log only after a dozen adds, so a log rotated and
#: was checkpointed within one run (between two restarts) too rarely for a crash to test what
#: the checkpoint made durable (tests/quality/test_refinement_catches.py measured it).
payloads = st.binary(max_size=160) | st.binary(min_size=120, max_size=160)
ledgers = st.sampled_from(LEDGERS)


def machine_for(opener: Callable[..., Bookie] = Bookie.open) -> type[RuleBasedStateMachine]:
    """A state machine class whose bookie is built by ``opener`` (Bookie.open, or a
    variant's)."""

    class RefinementMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.sut = InProcessBookie(SMALL_SETTINGS, opener=opener)
            self.harness = Refinement(self.sut, SMALL_SETTINGS)
            #: The next entry id per ledger: ids are never reused, even after a crash.
            self.next_entry = dict.fromkeys(LEDGERS, 0)
            self.logs_seen = 0

        # --- helpers --------------------------------------------------------------------

        @property
        def up(self) -> bool:
            return self.harness.model.up

        def _run(self, op: Operation, crash_after_ops: int | None = None) -> None:
            step = self.harness.run(op, crash_after_ops=crash_after_ops)
            if step.result.crashed:
                event(f"crash during {op.name}")
            if step.state is not None and len(step.state.entry_logs) > self.logs_seen:
                if self.logs_seen:
                    event("entry log rotated")
                self.logs_seen = len(step.state.entry_logs)
            if isinstance(op, Restart) and step.result.replayed:
                event("restart replayed journal records")
                recovery = self.sut.bookie.recovery if self.sut.bookie else None
                if recovery is not None and recovery.fences_set:
                    event("replay with fence records")

        def _crash_and_restart(self, plan: CrashPlan, restart_crash: int | None) -> None:
            if any(p.kind == "fence" for p in self.harness.model.pending.values()):
                event("crash between a fence and its ack")
            if self.harness.model.pending:
                event("crash with adds waiting for the journal")
            self._run(Crash(plan))
            if restart_crash is not None:
                self._run(Restart(), restart_crash)
                if not self.up:
                    self._run(Crash(plan))
            if not self.up:
                self._run(Restart())

        def _maybe_crashed(self, plan: CrashPlan) -> None:
            """After a step run with a crash point: if it died, crash and restart."""
            if self.harness.model.interrupted is not None:
                self._run(Crash(plan))
                self._run(Restart())

        # --- requests -------------------------------------------------------------------

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, data=payloads, count=st.integers(1, 4))
        def add(self, ledger: int, data: bytes, count: int) -> None:
            for _ in range(count):
                entry = self.next_entry[ledger]
                self.next_entry[ledger] += 1
                self._run(Add(ledger, entry, key_of(ledger), data))

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, data=payloads, at=crash_points, plan=crash_plans)
        def add_then_crash(self, ledger: int, data: bytes, at: int | None, plan: CrashPlan) -> None:
            entry = self.next_entry[ledger]
            self.next_entry[ledger] += 1
            self._run(Add(ledger, entry, key_of(ledger), data), at)
            self._maybe_crashed(plan)

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers)
        def add_with_wrong_key(self, ledger: int) -> None:
            entry = self.next_entry[ledger]
            self.next_entry[ledger] += 1
            self._run(Add(ledger, entry, b"wrong", b"intruder"))

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, back=st.integers(0, 6))
        def read(self, ledger: int, back: int) -> None:
            self._run(Read(ledger, max(0, self.next_entry[ledger] - 1 - back)))

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, wrong=st.booleans())
        def fence(self, ledger: int, wrong: bool) -> None:
            self._run(Fence(ledger, b"wrong" if wrong else key_of(ledger)))

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, at=crash_points, plan=crash_plans)
        def delete(self, ledger: int, at: int | None, plan: CrashPlan) -> None:
            self._run(Delete(ledger), at)
            self._maybe_crashed(plan)

        @precondition(lambda self: self.up)
        @rule(at=crash_points, plan=crash_plans)
        def checkpoint(self, at: int | None, plan: CrashPlan) -> None:
            self._run(Checkpoint(), at)
            self._maybe_crashed(plan)

        @precondition(lambda self: self.up)
        @rule(plan=crash_plans, restart_crash=st.none() | st.integers(0, 30))
        def checkpoint_then_crash(self, plan: CrashPlan, restart_crash: int | None) -> None:
            """A whole checkpoint, then a crash: everything it claimed durable (the rotated
            logs, the index, lastMark) must survive any crash plan. Without this rule the
            crash has to come from a later step of the same run."""
            self._run(Checkpoint())
            if self.up:
                event("crash right after a checkpoint")
                self._crash_and_restart(plan, restart_crash)

        # --- background steps -----------------------------------------------------------

        @precondition(lambda self: self.up)
        @rule(at=crash_points, plan=crash_plans)
        def journal_force(self, at: int | None, plan: CrashPlan) -> None:
            self._run(JournalForce(), at)
            self._maybe_crashed(plan)

        @precondition(lambda self: self.up)
        @rule(at=crash_points, plan=crash_plans)
        def rotate(self, at: int | None, plan: CrashPlan) -> None:
            self._run(Rotate(), at)
            self._maybe_crashed(plan)

        # --- the environment ------------------------------------------------------------

        @precondition(lambda self: self.up)
        @rule(plan=crash_plans, restart_crash=st.none() | st.integers(0, 30))
        def crash(self, plan: CrashPlan, restart_crash: int | None) -> None:
            self._crash_and_restart(plan, restart_crash)

        @precondition(lambda self: self.up)
        @rule(at=crash_points, plan=crash_plans)
        def shutdown_and_restart(self, at: int | None, plan: CrashPlan) -> None:
            self._run(Shutdown(), at)
            if self.harness.model.interrupted is not None:
                self._run(Crash(plan))
            self._run(Restart())

        @precondition(lambda self: self.up and not self.harness.model.disk_full)
        @rule()
        def disk_full(self) -> None:
            self._run(DiskFull())

        @precondition(lambda self: self.up and self.harness.model.disk_full)
        @rule()
        def disk_writable(self) -> None:
            self._run(DiskWritable())

        @precondition(lambda self: self.up)
        @rule()
        def fail_fsync(self) -> None:
            self._run(FailFsync())

        @precondition(lambda self: self.up)
        @rule(plan=crash_plans, retry=st.booleans())
        def fsync_failure_in_checkpoint(self, plan: CrashPlan, retry: bool) -> None:
            """fsyncgate: a checkpoint whose fsync fails (its unsynced bytes are gone), maybe
            a second checkpoint, then a crash. Nothing acknowledged may be lost, and no
            checkpoint may claim durable what the failed fsync dropped."""
            self._run(FailFsync())
            self._run(Checkpoint())
            if retry and self.up:
                self._run(Checkpoint())
            if self.up:
                event("crash after a failed fsync in a checkpoint")
                self._crash_and_restart(plan, None)

        @invariant()
        def model_and_bookie_agree(self) -> None:
            # The harness compares after every step and raises RefinementFailure; here the
            # last step's state must have been compared whenever the bookie is up.
            if self.up and self.harness.steps:
                assert self.harness.steps[-1].state is not None

    return RefinementMachine


#: The rules that run each operation (a crash and a restart also follow every rule with a
#: crash point when the step died; the harness adds reads after every restart).
PRODUCERS: Mapping[type[Operation], tuple[str, ...]] = require_complete(
    {
        Add: ("add", "add_then_crash", "add_with_wrong_key"),
        Read: ("read",),
        Fence: ("fence",),
        Delete: ("delete",),
        Checkpoint: ("checkpoint", "checkpoint_then_crash", "fsync_failure_in_checkpoint"),
        JournalForce: ("journal_force",),
        Rotate: ("rotate",),
        Crash: (
            "crash",
            "checkpoint_then_crash",
            "fsync_failure_in_checkpoint",
            "add_then_crash",
            "delete",
            "checkpoint",
            "journal_force",
            "rotate",
            "shutdown_and_restart",
        ),
        Restart: ("crash", "checkpoint_then_crash", "shutdown_and_restart"),
        Shutdown: ("shutdown_and_restart",),
        DiskFull: ("disk_full",),
        DiskWritable: ("disk_writable",),
        FailFsync: ("fail_fsync", "fsync_failure_in_checkpoint"),
    },
    "the Hypothesis refinement machine (tests/refinement/machine.py PRODUCERS)",
)
