"""The stateful refinement test: Hypothesis drives the harness (proofs/harness/refinement.py) with
every operation, background step and fault, and the harness compares bkref's Bookie with the
model after each step.

Biases, because they pay: a handful of ledgers reused across the run (bundles of adds to the
same ledgers), the group commit's and the checkpoint's phases as steps with adds between them
(races with the journal and maintenance threads), a process kill that keeps the page cache
followed by a power cut, entry logs of 1400 bytes and payloads half of them large, so that a
few adds rotate them, a crash right after a whole checkpoint, crash plans drawn as
data (so a failure shrinks to a small plan), crashes in the middle of a step (after a drawn
number of file-system operations: a crash during a checkpoint, a rotation, a journal force, a
recovery), and long runs in the deep profile. For garbage collection and compaction (issue
11): logs made dead or compactable before a GC (adds over a few ledgers, a checkpoint, a
delete), compactions stepped phase by phase with requests between the phases (an add before
each, a delete between copy and index), a crash at a drawn file-system operation inside
gc_begin, each phase and the recovery that finishes or undoes them, faults aimed at a
compaction's files in each phase, forced GCs (whose kind the model predicts exactly), drawn
compaction thresholds, and rotations in bursts so that log ids pass 16 (BookKeeper #4804
shows only for ids >= 10).

The machine class is built by :func:`machine_for` so that tests/quality can run the same
rules against a known-bad variant of the bookie (an ``opener`` that builds the variant).

Which rules produce each operation is :data:`PRODUCERS`, checked against the operation
registry (spec/operations.py) at import: a newly declared operation that no rule draws fails
the import of this module, naming it. tests/unit/proofs/harness/test_registry_tables.py
checks the claims (each rule named runs that operation) and that every rule is named.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator, Mapping

import attrs
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from impl.bookie.bookie import Bookie
from impl.limits import TEST_LIMITS
from models.entrylog.manager import RECORD_OVERHEAD_BYTES
from proofs.harness.refinement import (
    DEFAULT_WALL_MS,
    HALF_FULL_THRESHOLDS,
    SMALL_SETTINGS,
    InProcessBookie,
    Refinement,
)
from spec.crash import (
    CrashPlan,
    KeepAll,
    KeepPrefix,
    KeepSubset,
    KillProcess,
    LoseUnsynced,
    TornWrite,
)
from spec.operations import (
    DATA_AIMS,
    DISK_FULL_PLACES,
    FAULT_AIMS,
    Add,
    CheckDirs,
    Checkpoint,
    CheckpointFlush,
    CheckpointPersist,
    CompactCopy,
    CompactFlush,
    CompactIndex,
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
    Operation,
    Preallocate,
    Read,
    Restart,
    Rotate,
    Shutdown,
    require_complete,
)
from spec.trace import Step

#: How often each situation was seen in this process, by its event text (Hypothesis's own
#: statistics are for reading; tests/refinement/test_coverage.py asserts minimum counts of the
#: rare situations from these).
COVERAGE: collections.Counter[str] = collections.Counter()


def _seen(text: str) -> None:
    """Record a situation: a Hypothesis event (``--hypothesis-show-statistics``) and a count
    in COVERAGE."""
    event(text)
    COVERAGE[text] += 1


#: The ledgers a run starts with; more are created as it goes (``new_ledger``), and deletes
#: take them out of use.
LEDGERS = (1, 2, 3, 4)
#: Ledgers per ledgers-map record of the bookie under test (its TEST_LIMITS).
MAP_BATCH = TEST_LIMITS.ledgers_map_batch_max


def key_of(ledger: int) -> bytes:
    return b"key-%d" % ledger


#: Not drawn: TornSectors (a write keeping any subset of its sectors, garbage in the rest).
#: bkref's recovery refuses a journal whose unsynced tail was garbled into something that
#: parses as a record, as BookKeeper's would misread it; whether it should take such a tail
#: for a torn one is an open decision of the engine (docs/design.md, "Not built yet"), so the
#: plan is opt-in until then (proofs/crash/plans.py ``garbled``).
crash_plans: st.SearchStrategy[CrashPlan] = st.one_of(
    st.just(LoseUnsynced()),
    st.just(KeepAll()),  # kill -9: the process dies, the page cache reaches the disk
    st.just(KillProcess()),  # kill -9, the page cache kept but not on the disk yet
    st.builds(KeepPrefix, st.integers(0, 40)),
    st.builds(TornWrite, st.integers(0, 40), st.integers(0, 3)),
    st.builds(KeepSubset, st.frozensets(st.integers(0, 40), max_size=12)),
)
#: How many file-system operations a step may issue before the machine dies in it; most
#: steps run whole (two in three: the crash rules and the rules that end in a crash are
#: many, and half of the steps dying left too few acknowledged adds per example).
crash_points = st.one_of(st.none(), st.none(), st.integers(0, 24))
#: The same for a group commit, which issues only two or three (write, fsync, maybe a
#: rollover): drawn up to 24, a crash almost never landed inside one
#: (tests/refinement/test_coverage.py counted none in 120 examples).
force_crash_points = st.none() | st.integers(0, 3)
#: Half of the payloads are large (120-160 bytes, records of 140-180): Hypothesis draws mostly
#: short binaries, which filled a 1400-byte log only after a dozen adds, so a log rotated and
#: was checkpointed within one run (between two restarts) too rarely for a crash to test what
#: the checkpoint made durable (tests/quality/test_refinement_catches.py measured it).
payloads = st.binary(max_size=160) | st.binary(min_size=120, max_size=160)
#: A live ledger, as an index into the run's live ledgers (so it shrinks and stays valid as
#: ledgers come and go).
ledgers = st.integers(0, 63)
#: The knobs drawn per example, as FoundationDB's simulator draws its configuration: the
#: entry log's size limit (rotation every few adds), the write buffer (records cross it, or
#: it holds several), flushEntrylogBytes (0: off) and how many journals before lastMark a
#: checkpoint keeps.
knobs = st.fixed_dictionaries(
    {
        "logSizeLimit": st.sampled_from(("1100", "1400", "2048")),
        "writeBufferSizeBytes": st.sampled_from(("64", "256", "1024")),
        "flushEntrylogBytes": st.sampled_from(("0", "0", "300")),
        # With TEST_LIMITS a journal rolls over every few groups: 0 keeps no journal before
        # lastMark, 5 is BookKeeper's default.
        "journalMaxBackups": st.sampled_from(("0", "1", "5")),
        "entryLogFilePreallocationEnabled": st.sampled_from(("true", "false")),
        # Compaction: BookKeeper's thresholds, or higher ones (more logs are candidates); a
        # major interval of 0 disables major compaction, so a forced GC compacts minor.
        "majorCompactionThreshold": st.sampled_from(("0.8", "0.95")),
        "minorCompactionThreshold": st.sampled_from(("0.2", "0.6")),
        "majorCompactionInterval": st.sampled_from(("86400", "86400", "0")),
    }
)
#: Where a fault inside a compaction is aimed: its own files (the .compacting and the
#: .compacted), the source it reads, any file.
COMPACTION_FAULTS = (
    st.sampled_from(("compaction", "any")).map(FailFsync)
    | st.sampled_from(("compaction", "any")).map(FailWrite)
    | st.sampled_from(("compaction", "entry_log")).map(FailRead)
    | st.just(DiskFull("ledger_dirs"))
)
#: The GC steps a compaction story may die in.
GC_PHASES = ("begin", "copy", "flush", "index")
#: Where reads are failed: the kinds of file a bookie reads while it runs, or any.
READ_AIMS = ("any", "entry_log", "index")

#: The faults a rule arms: an fsync, a write or a read that fails, aimed at one kind of
#: file (or any).
faults = (
    st.sampled_from(FAULT_AIMS).map(FailFsync)
    | st.sampled_from(DATA_AIMS).map(FailWrite)
    | st.sampled_from(READ_AIMS).map(FailRead)
)

#: The wall clock the bookie reads, which new journal ids start from: mostly today's, and
#: sometimes a few milliseconds below 0x100000000000, so that the journals of a run cross a
#: hex width (fffffffffff.txn, then 100000000000.txn: name order is not id order).
wall_clocks = st.sampled_from((DEFAULT_WALL_MS, DEFAULT_WALL_MS, 0xFFFFFFFFFFF - 2))
#: How far past the previous entry id an add's id is: mostly the next one; sometimes a
#: stripe (an ensemble of 3 writes every third id), sometimes far ahead.
entry_gaps = st.sampled_from((1, 1, 1, 1, 3, 17))


def fixed_profile(examples: int, steps: int) -> settings:
    """A profile that runs the same examples on every run (derandomized, no database, no
    shrinking, no health check): for measurements and quality catches, whose counts must
    not move between runs."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=True,
        database=None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )


@contextlib.contextmanager
def stable_draws() -> Iterator[None]:
    """Run a fixed profile with Hypothesis's pool of local constants empty. Hypothesis seeds
    about one draw in twenty with constants it collects from every local module loaded (its
    ``_get_local_constants``), so a derandomized run drew other examples whenever any source
    file of bkref changed, or another test module had been imported first: quality catches
    and coverage counts moved with unrelated edits. With the pool empty the draws depend on
    the strategies and the profile alone. This reaches into Hypothesis's internals; on a
    version without that function it does nothing (and the runs are as sensitive as before)."""
    from hypothesis.internal.conjecture import providers

    original = getattr(providers, "_get_local_constants", None)
    if original is None:
        yield
        return
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()


#: The longest healthy stretch (adds between faults) of the fast profile; the deep one draws
#: longer ones (tests/refinement/test_refinement.py): Hypothesis bounds how many rules an
#: example holds, so a deep history is one with longer stretches, not only more rules.
STRETCH_MAX = 24


def machine_for(
    opener: Callable[..., Bookie] = Bookie.open, *, stretch_max: int = STRETCH_MAX
) -> type[RuleBasedStateMachine]:
    """A state machine class whose bookie is built by ``opener`` (Bookie.open, or a
    variant's); its healthy stretches hold 4 to ``stretch_max`` adds."""

    class RefinementMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.settings = dict(SMALL_SETTINGS)
            self.sut = InProcessBookie(self.settings, opener=opener)
            self.harness = Refinement(self.sut, self.settings)
            #: The live ledgers, and the next entry id of each: ids are never reused.
            self.live: list[int] = list(LEDGERS)
            self.next_entry = dict.fromkeys(LEDGERS, 0)
            #: Entries added, with their data, so an add can be sent again (a retry).
            self.sent: dict[tuple[int, int], bytes] = {}
            self.logs_seen = 0
            self.journal_seen = 0

        @initialize(drawn=knobs, wall_ms=wall_clocks)
        def configure(self, drawn: dict[str, str], wall_ms: int) -> None:
            """Draw this example's knobs and start its bookie with them."""
            self.settings = {**SMALL_SETTINGS, **HALF_FULL_THRESHOLDS, **drawn}
            self.sut = InProcessBookie(self.settings, opener=opener, wall_ms=wall_ms)
            self.harness = Refinement(self.sut, self.settings)
            _seen(f"logSizeLimit {drawn['logSizeLimit']}")

        # --- helpers --------------------------------------------------------------------

        @property
        def up(self) -> bool:
            return self.harness.model.up

        def _run(self, op: Operation, crash_after_ops: int | None = None) -> Step:
            step = self.harness.run(op, crash_after_ops=crash_after_ops)
            if step.result.crashed:
                _seen(f"crash during {op.name}")
            if step.state is not None and len(step.state.entry_logs) > self.logs_seen:
                if self.logs_seen:
                    _seen("entry log rotated")
                self.logs_seen = len(step.state.entry_logs)
            if step.state is not None:
                journal = step.state.journal_mark[0]
                if not isinstance(op, Restart) and journal != self.journal_seen:
                    _seen("journal rolled over")
                self.journal_seen = journal
            if step.state is not None and step.state.journal_mark[0] > 0xFFFFFFFFFFF:
                _seen("a journal id with one more hex digit")
            for fault in step.faults:
                _seen(f"a fault fired: {fault.op} of {fault.file}")
            partly_full = self.harness.model.disk_full == "active_log_dir"
            if isinstance(op, Add) and partly_full and (step.result.ok or step.result.pending):
                _seen("an add taken while the active log's directory is full")
            if isinstance(op, Restart) and step.result.replayed:
                _seen("restart replayed journal records")
                recovery = self.sut.bookie.recovery if self.sut.bookie else None
                if recovery is not None and recovery.fences_set:
                    _seen("replay with fence records")
            return step

        def _crash_and_restart(self, plan: CrashPlan, restart_crash: int | None) -> None:
            if any(p.kind == "fence" for p in self.harness.model.pending.values()):
                _seen("crash between a fence and its ack")
            if self.harness.model.pending:
                _seen("crash with adds waiting for the journal")
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

        def _ledger(self, index: int) -> int:
            """The live ledger ``index`` picks (any ledger id once none is live)."""
            return self.live[index % len(self.live)] if self.live else index + 1

        def _next_id(self, ledger: int, gap: int = 1) -> int:
            entry = self.next_entry.get(ledger, 0) + gap - 1
            self.next_entry[ledger] = entry + 1
            return entry

        def _add(self, ledger: int, data: bytes, gap: int = 1, at: int | None = None) -> None:
            entry = self._next_id(ledger, gap)
            self.sent[(ledger, entry)] = data
            self._run(Add(ledger, entry, key_of(ledger), data), at)

        def _fill_map_batches(self, ledger: int, delta: int) -> None:
            """Small adds to ledgers the active log does not hold yet (new ones when the live
            ledgers run out) until it holds the next whole number of map batches plus
            ``delta`` ledgers, then a rotation (an add may rotate first: then the new log is
            filled)."""
            model = self.harness.model
            for _ in range(3 * MAP_BATCH + 2):
                logs = model.logs
                active = logs.logs.get(logs.current) if logs.current is not None else None
                held = set(active.written) if active is not None else set()
                want = MAP_BATCH * max(1, -(-len(held) // MAP_BATCH)) + delta
                if len(held) >= want or not self.up:
                    break
                fresh = [led for led in self.live if led not in held]
                target = fresh[ledger % len(fresh)] if fresh else self._new_ledger_id()
                self._add(target, b"m")
            if self.up:
                logs = model.logs
                active = logs.logs.get(logs.current) if logs.current is not None else None
                count = len(active.written) if active is not None else 0
                if count and count % MAP_BATCH in (0, 1, MAP_BATCH - 1):
                    _seen("a log sealed with its ledgers at a map batch boundary")
                self._run(Rotate())

        def _see_gc(self, op: Operation, step: Step) -> None:
            """Coverage of the GC steps (tests/refinement/test_coverage.py)."""
            phase = step.result.phase
            if phase is not None and phase.phase == "copy" and phase.new_log is not None:
                if phase.new_log >= 16:
                    _seen("a compaction log id >= 16")
                if phase.source_log is not None and phase.source_log >= 16:
                    _seen("a compaction of a log id >= 16")
            if phase is not None and phase.phase == "index":
                _seen("a compaction finished")
            if step.result.gc is not None and step.result.gc.logs_deleted:
                _seen("a GC deleted dead logs")
            if step.result.gc is not None and step.result.gc.logs_compacted:
                _seen("a whole gc compacted logs")
            if step.faults and isinstance(op, GC_STEP_OPS):
                _seen(f"a fault in {op.name}")

        def _compaction_in_flight(self) -> str | None:
            """The phase the model's compaction in flight has reached, or None."""
            cycle = self.harness.model.gc
            if cycle is None or cycle.current is None:
                return None
            return cycle.current.phase

        def _make_logs_compactable(self, ledger: int, data: bytes, deletes: int) -> None:
            """Adds spread over a few ledgers and logs, a checkpoint (the rotated logs become
            flushed: candidates), then deletes: logs become dead or partly dead."""
            for number in range(6):
                if not self.up:
                    return
                self._add(self._ledger(ledger + number % 3), data)
            if self.up:
                self._run(JournalForce())
            if self.up:
                self._run(Rotate())
            if self.up:
                self._run(Checkpoint())
            for number in range(deletes):
                if not self.up or len(self.live) <= 1:
                    return
                target = self._ledger(ledger + number)
                self.live.remove(target)
                self.sent = {key: d for key, d in self.sent.items() if key[0] != target}
                self._run(Delete(target))

        def _gc_step(
            self, op: Operation, at: int | None, plan: CrashPlan, *, inside: str | None = None
        ) -> bool:
            """Run one GC step (dying in it at ``at`` operations); True when the machine
            died in it and was crashed and restarted."""
            step = self._run(op, at)
            self._see_gc(op, step)
            if self.harness.model.interrupted is None:
                return False
            if inside is not None:
                _seen(f"crash inside compaction {inside}")
            self._run(Crash(plan))
            self._run(Restart(), None)
            return True

        def _new_ledger_id(self) -> int:
            ledger = max([*self.next_entry, *LEDGERS]) + 1
            self.live.append(ledger)
            self.next_entry[ledger] = 0
            return ledger

        # --- requests -------------------------------------------------------------------

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, data=payloads, count=st.integers(1, 8), gap=entry_gaps)
        def add(self, ledger: int, data: bytes, count: int, gap: int) -> None:
            target = self._ledger(ledger)
            for _ in range(count):
                self._add(target, data, gap)

        @precondition(lambda self: self.up)
        @rule(
            ledger=ledgers,
            data=payloads,
            count=st.integers(4, stretch_max),
            read_back=st.booleans(),
        )
        def healthy_stretch(self, ledger: int, data: bytes, count: int, read_back: bool) -> None:
            """Adds to a few ledgers, their group commit, and reads of them: the long healthy
            stretches between faults that real bookies see (a rule mix drawn uniformly spent
            a quarter of its steps crashing and restarting)."""
            for number in range(count):
                self._add(self._ledger(ledger + number % 3), data)
            self._run(JournalForce())
            if read_back and self.up:
                target = self._ledger(ledger)
                if self.next_entry.get(target, 0):
                    self._run(Read(target, self.next_entry[target] - 1))

        @precondition(lambda self: self.up)
        @rule(
            ledger=ledgers,
            delta=st.sampled_from((-1, 0, 1)),
            boundary=st.sampled_from(("log", "log", "buffer", "map_batch")),
        )
        def add_to_the_boundary(self, ledger: int, delta: int, boundary: str) -> None:
            """An add at a boundary, exactly (or one byte short, or over): ``log``, a record
            that ends at the entry log's size limit (the rotation point); ``buffer``, a
            record as large as the write buffer; ``map_batch``, adds to other ledgers until
            the active log holds a whole number of ledgers-map batches (or one ledger fewer,
            or more), then a rotation that seals it. Off-by-one bugs live there."""
            if boundary == "map_batch":
                self._fill_map_batches(ledger, delta)
                return
            if boundary == "buffer":
                size = int(self.settings["writeBufferSizeBytes"]) - RECORD_OVERHEAD_BYTES + delta
                _seen("an add as large as the write buffer")
                self._add(self._ledger(ledger), b"w" * max(0, size))
                return
            logs = self.harness.model.logs
            active = logs.logs.get(logs.current) if logs.current is not None else None
            used = active.size_bytes() if active is not None else 1024
            room = int(self.settings["logSizeLimit"]) - used - RECORD_OVERHEAD_BYTES + delta
            if room >= 0:
                _seen("an add at the rotation boundary")
                self._add(self._ledger(ledger), b"b" * min(room, 4096))

        @precondition(lambda self: self.up and bool(self.sent))
        @rule(pick=st.integers(0, 10**6))
        def add_again(self, pick: int) -> None:
            """A client retrying an add: the same entry id, the same data."""
            (ledger, entry), data = sorted(self.sent.items())[pick % len(self.sent)]
            _seen("an add sent again")
            self._run(Add(ledger, entry, key_of(ledger), data))

        @precondition(lambda self: self.up)
        @rule(data=payloads)
        def new_ledger(self, data: bytes) -> None:
            """A new ledger comes into use: its first add creates it."""
            self._add(self._new_ledger_id(), data)

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, data=payloads, at=st.integers(0, 6), plan=crash_plans)
        def add_then_crash(self, ledger: int, data: bytes, at: int, plan: CrashPlan) -> None:
            """An add the machine dies in when it touches the disk (a write-buffer flush, a
            rotation: an add that only fills the buffer issues no operation to die in)."""
            self._add(self._ledger(ledger), data, at=at)
            self._maybe_crashed(plan)

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers)
        def add_with_wrong_key(self, ledger: int) -> None:
            target = self._ledger(ledger)
            self._run(Add(target, self._next_id(target), b"wrong", b"intruder"))

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, back=st.integers(0, 6))
        def read(self, ledger: int, back: int) -> None:
            target = self._ledger(ledger)
            self._run(Read(target, max(0, self.next_entry.get(target, 0) - 1 - back)))

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, wrong=st.booleans())
        def fence(self, ledger: int, wrong: bool) -> None:
            target = self._ledger(ledger)
            self._run(Fence(target, b"wrong" if wrong else key_of(target)))

        @precondition(lambda self: self.up)
        @rule(ledger=ledgers, at=crash_points, plan=crash_plans)
        def delete(self, ledger: int, at: int | None, plan: CrashPlan) -> None:
            """Deletes take the ledger out of use (the machine never adds to it again: ids
            are not reused; bkref refuses an add to a deleted ledger)."""
            target = self._ledger(ledger)
            if target in self.live:
                self.live.remove(target)
            self.sent = {key: data for key, data in self.sent.items() if key[0] != target}
            self._run(Delete(target), at)
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
                _seen("crash right after a checkpoint")
                self._crash_and_restart(plan, restart_crash)

        # --- background steps -----------------------------------------------------------

        @precondition(lambda self: self.up)
        @rule(at=force_crash_points, plan=crash_plans)
        def journal_force(self, at: int | None, plan: CrashPlan) -> None:
            self._run(JournalForce(), at)
            self._maybe_crashed(plan)

        @precondition(lambda self: self.up)
        @rule(at=crash_points, plan=crash_plans)
        def rotate(self, at: int | None, plan: CrashPlan) -> None:
            self._run(Rotate(), at)
            self._maybe_crashed(plan)

        @precondition(lambda self: self.up)
        @rule()
        def preallocate(self) -> None:
            """The maintenance thread creates the next entry log ahead of need."""
            self._run(Preallocate())

        @precondition(lambda self: self.up)
        @rule()
        def check_dirs(self) -> None:
            """The disk check runs (it also runs whenever a directory fills or gets room)."""
            self._run(CheckDirs())

        # --- garbage collection and compaction -------------------------------------------
        # GC steps as a bookie's GC thread runs them, with requests between the phases (the
        # locks are free between them, on purpose), crashes at a drawn file-system operation
        # inside each, and faults aimed at a compaction's files. Deletes and rotations are
        # frequent enough (the composite rules below make logs dead or compactable first)
        # that most GC cycles delete or compact something.

        @precondition(lambda self: self.up)
        @rule(force=st.booleans(), at=crash_points, plan=crash_plans)
        def gc(self, force: bool, at: int | None, plan: CrashPlan) -> None:
            """A whole GC cycle (the adapter's gc), maybe cut by a crash."""
            self._gc_step(Gc(force), at, plan, inside="gc")

        @precondition(lambda self: self.up)
        @rule(force=st.booleans(), at=crash_points, plan=crash_plans)
        def gc_begin(self, force: bool, at: int | None, plan: CrashPlan) -> None:
            self._gc_step(GcBegin(force), at, plan)

        @precondition(lambda self: self.up)
        @rule(at=crash_points, plan=crash_plans)
        def compact_copy(self, at: int | None, plan: CrashPlan) -> None:
            self._gc_step(CompactCopy(), at, plan)

        @precondition(lambda self: self.up)
        @rule(at=crash_points, plan=crash_plans)
        def compact_flush(self, at: int | None, plan: CrashPlan) -> None:
            self._gc_step(CompactFlush(), at, plan)

        @precondition(lambda self: self.up)
        @rule(at=crash_points, plan=crash_plans)
        def compact_index(self, at: int | None, plan: CrashPlan) -> None:
            self._gc_step(CompactIndex(), at, plan)

        @precondition(lambda self: self.up)
        @rule(count=st.integers(1, 6), data=payloads, ledger=ledgers)
        def rotate_many(self, count: int, data: bytes, ledger: int) -> None:
            """Rotations with an add or none between them: entry log ids climb past 16 in
            some runs (BookKeeper #4804, a recovered log named in decimal, shows only for
            ids >= 10), and the sealed logs, once checkpointed, are GC candidates."""
            for number in range(count):
                if not self.up:
                    return
                if number % 2:
                    self._add(self._ledger(ledger + number), data)
                if self.up:
                    self._run(Rotate())

        @precondition(lambda self: self.up)
        @rule(
            ledger=ledgers,
            data=payloads,
            deletes=st.integers(0, 2),
            force=st.booleans(),
            between=st.lists(
                st.sampled_from(("add", "delete", "checkpoint", "rotate", "read", "fence")),
                max_size=6,
            ),
            crash_in=st.sampled_from(
                (None, "begin", "copy", "copy", "flush", "flush", "index", "recovery")
            ),
            at=st.integers(0, 30),
            plan=crash_plans,
        )
        def compaction_with_requests_between_its_phases(
            self,
            ledger: int,
            data: bytes,
            deletes: int,
            force: bool,
            between: list[str],
            crash_in: str | None,
            at: int,
            plan: CrashPlan,
        ) -> None:
            """Logs made compactable (adds, a checkpoint, deletes), then a GC cycle step by
            step: gc_begin, and for each candidate its copy, flush and index, with adds,
            deletes (a delete between copy and index), checkpoints, rotations, reads and
            fences drawn between the phases; maybe a crash at a drawn file-system operation
            inside one of the steps, or inside the recovery after a crash between phases."""
            self._make_logs_compactable(ledger, data, deletes)
            if not self.up:
                return
            if self._gc_step(
                GcBegin(force), at if crash_in == "begin" else None, plan, inside="gc_begin"
            ):
                return
            todo = list(between)
            for _ in range(4):  # at most a few candidates per story
                for phase, op in (
                    ("copy", CompactCopy()),
                    ("flush", CompactFlush()),
                    ("index", CompactIndex()),
                ):
                    if not self.up:
                        return
                    died = self._gc_step(op, at if crash_in == phase else None, plan, inside=phase)
                    if died:
                        return
                    if phase == "copy" and self._compaction_in_flight() is None:
                        return  # idle, or nothing live: the cycle is over (or moved on)
                    if todo and self.up:
                        self._between(todo.pop(0), ledger, data, phase)
                if crash_in == "recovery" and self.up:
                    _seen("crash inside recovery after a compaction")
                    self._crash_and_restart(plan, at)
                    return

        @precondition(lambda self: self.up)
        @rule(
            ledger=ledgers,
            data=payloads,
            phase=st.sampled_from(("begin", "copy", "flush", "index")),
            # Small counts often: gc_begin issues two operations per dead log and none when
            # there is none, so a crash inside it needs a count below that.
            at=st.one_of(st.integers(0, 3), st.integers(0, 30)),
            plan=crash_plans,
            delete_between=st.booleans(),
        )
        def crash_inside_a_compaction_phase(
            self,
            ledger: int,
            data: bytes,
            phase: str,
            at: int,
            plan: CrashPlan,
            delete_between: bool,
        ) -> None:
            """A compaction step by step with an add before each phase (requests go on
            between a GC thread's phases), dying at a drawn file-system operation inside
            one phase (or inside gc_begin, which deletes the dead logs); then the crash and the
            restart, which must undo or finish it."""
            self._make_logs_compactable(ledger, data, 1)
            begin_at = at if phase == "begin" else None
            if not self.up or self._gc_step(GcBegin(True), begin_at, plan, inside="gc_begin"):
                return
            for name, op in (
                ("copy", CompactCopy()),
                ("flush", CompactFlush()),
                ("index", CompactIndex()),
            ):
                if not self.up:
                    return
                in_flight = self._compaction_in_flight()
                self._add(self._ledger(ledger), data)
                if in_flight is not None and self.up:
                    _seen(f"an add between compaction phases ({in_flight})")
                if in_flight == "copied" and delete_between and self.up:
                    # A ledger the copy found live is deleted before the index phase.
                    self._between("delete", ledger, data, name)
                if not self.up:
                    return
                if self._gc_step(op, at if name == phase else None, plan, inside=name):
                    return
                if self._compaction_in_flight() is None and name != "index":
                    return  # nothing live, or idle: no compaction to step

        @precondition(lambda self: self.up)
        @rule(
            ledger=ledgers,
            data=payloads,
            flushed=st.booleans(),
            plan=crash_plans,
            at=st.integers(0, 40),
        )
        def crash_inside_recovery_of_a_compaction(
            self, ledger: int, data: bytes, flushed: bool, plan: CrashPlan, at: int
        ) -> None:
            """A compaction copied (and maybe flushed: its .compacted durable), then a power
            cut, and a recovery that dies at a drawn file-system operation while it removes
            the .compacting or finishes the .compacted, then a recovery again: recovery must
            cope with its own half-done work (every step idempotent)."""
            self._make_logs_compactable(ledger, data, 1)
            if not self.up or self._gc_step(GcBegin(True), None, plan):
                return
            if self._gc_step(CompactCopy(), None, plan) or self._compaction_in_flight() is None:
                return
            if flushed and self._gc_step(CompactFlush(), None, plan):
                return
            _seen("crash inside recovery after a compaction")
            self._crash_and_restart(plan, at)

        def _between(self, what: str, ledger: int, data: bytes, phase: str) -> None:
            """One request between two compaction phases."""
            in_flight = self._compaction_in_flight()
            if in_flight is not None:
                _seen(f"a {what} while a compaction is {in_flight}")
            if what == "add":
                self._add(self._ledger(ledger), data)
            elif what == "delete" and len(self.live) > 1:
                target = self._ledger(ledger + 1)
                self.live.remove(target)
                self.sent = {key: d for key, d in self.sent.items() if key[0] != target}
                if in_flight == "copied":
                    _seen("a delete between copy and index")
                self._run(Delete(target))
            elif what == "checkpoint":
                self._run(Checkpoint())
            elif what == "rotate":
                self._run(Rotate())
            elif what == "read":
                target = self._ledger(ledger)
                self._run(Read(target, max(0, self.next_entry.get(target, 0) - 1)))
            elif what == "fence":
                self._run(Fence(self._ledger(ledger + 2), key_of(self._ledger(ledger + 2))))

        @precondition(lambda self: self.up and not self.harness.model.disk_full)
        @rule(
            ledger=ledgers,
            data=payloads,
            fault=COMPACTION_FAULTS,
            phase=st.sampled_from(("copy", "flush", "index")),
            repeat=st.integers(1, 3),
            plan=crash_plans,
            crash=st.booleans(),
        )
        def fault_in_a_compaction(
            self,
            ledger: int,
            data: bytes,
            fault: Operation,
            phase: str,
            repeat: int,
            plan: CrashPlan,
            crash: bool,
        ) -> None:
            """A fault aimed at a compaction's files (or its source, or a full disk), armed
            before its copy, its flush or its index phase, again and again: a failed copy or
            flush rolls back (the bookie serves on) and repeated failed compactions leave
            nothing behind on the disk (the harness's disk check counts the files after
            recovery); a failed index phase fails the bookie, and the restart finishes the
            compaction; maybe a crash."""
            self._make_logs_compactable(ledger, data, 1)
            phases = ("copy", "flush", "index")
            first = phases.index(phase)
            for attempt in range(repeat):
                # Each attempt aims at the next phase: repeated attempts fail in several.
                phase = phases[(first + attempt) % len(phases)]
                if not self.up:
                    return
                self._gc_step(GcBegin(True), None, plan)
                if not self.up:
                    return
                if phase in ("flush", "index"):
                    self._gc_step(CompactCopy(), None, plan)
                    if not self.up or self._compaction_in_flight() is None:
                        continue
                if phase == "index":
                    self._gc_step(CompactFlush(), None, plan)
                    if not self.up or self._compaction_in_flight() != "flushed":
                        continue
                self._run(fault)
                op = {"copy": CompactCopy(), "flush": CompactFlush()}.get(phase, CompactIndex())
                step = self._run(op)
                self._see_gc(op, step)
                if step.result.error is not None:
                    _seen(f"compaction {phase} failed")
                if isinstance(fault, DiskFull) and self.up:
                    self._run(DiskWritable())
                if phase == "index" and step.result.error is not None and self.up:
                    self._crash_and_restart(plan, None)  # the bookie failed: restart it
            if self.up:
                self._run(Read(self._ledger(ledger), 0))
            if crash and self.up:
                self._crash_and_restart(plan, None)

        # --- the phases of the group commit and the checkpoint ----------------------------
        # A bookie's request threads add, fence, read and delete while its journal thread
        # writes and fsyncs a group and while its maintenance thread checkpoints (the locks
        # are free then, on purpose). Each phase is a step of its own, so Hypothesis
        # interleaves every other rule between them and a race shrinks like any failure.

        @precondition(lambda self: self.up)
        @rule()
        def journal_write(self) -> None:
            self._run(JournalWrite())

        @precondition(lambda self: self.up)
        @rule()
        def journal_sync(self) -> None:
            self._run(JournalSync())

        @precondition(lambda self: self.up)
        @rule()
        def journal_ack(self) -> None:
            self._run(JournalAck())

        @precondition(lambda self: self.up)
        @rule()
        def checkpoint_flush(self) -> None:
            self._run(CheckpointFlush())

        @precondition(lambda self: self.up)
        @rule()
        def checkpoint_persist(self) -> None:
            self._run(CheckpointPersist())

        @precondition(lambda self: self.up)
        @rule(
            ledger=ledgers,
            data=payloads,
            before=st.integers(0, 4),
            during=st.integers(0, 4),
            at=force_crash_points,
            plan=crash_plans,
            crash_after=st.booleans(),
        )
        def group_commit_with_adds_between_its_phases(
            self,
            ledger: int,
            data: bytes,
            before: int,
            during: int,
            at: int | None,
            plan: CrashPlan,
            crash_after: bool,
        ) -> None:
            """A group commit phase by phase, with adds between its write and its fsync and
            between its fsync and its acks: those adds belong to the next group, and an ack
            for one of them now would be an ack before its fsync. Maybe a crash in the fsync,
            or right after the acks."""
            self._run(JournalWrite())
            for number in range(before):
                self._add(self._ledger(ledger + number % 2), data)
            self._run(JournalSync(), at)
            if self.harness.model.interrupted is not None:
                _seen("crash inside a group commit's fsync, adds appended during it")
                self._maybe_crashed(plan)
                return
            for number in range(during):
                self._add(self._ledger(ledger + number % 2), data)
            self._run(JournalAck())
            if crash_after and self.up:
                _seen("crash after a group commit with adds between its phases")
                self._crash_and_restart(plan, None)

        @precondition(lambda self: self.up)
        @rule(
            ledger=ledgers,
            data=payloads,
            count=st.integers(0, 4),
            force=st.booleans(),
            rotate=st.booleans(),
            at=crash_points,
            plan=crash_plans,
            crash_after=st.booleans(),
        )
        def checkpoint_with_adds_between_its_phases(
            self,
            ledger: int,
            data: bytes,
            count: int,
            force: bool,
            rotate: bool,
            at: int | None,
            plan: CrashPlan,
            crash_after: bool,
        ) -> None:
            """A checkpoint phase by phase, with adds, a group commit and a rotation between
            its flush and its persist of lastMark: the mark it persists must be the one it
            captured before the flush, or replay skips records whose entries were never
            flushed. Maybe a crash in the persist, or right after it."""
            self._run(CheckpointFlush())
            for number in range(count):
                self._add(self._ledger(ledger + number % 2), data)
            if force and self.up:
                self._run(JournalForce())
            if rotate and self.up:
                self._run(Rotate())
            if not self.up:
                return
            self._run(CheckpointPersist(), at)
            if self.harness.model.interrupted is not None:
                _seen("crash inside a checkpoint's persist, adds made durable after its flush")
                self._maybe_crashed(plan)
            elif crash_after and self.up:
                _seen("crash after a checkpoint with adds between its phases")
                self._crash_and_restart(plan, None)

        # --- the environment ------------------------------------------------------------

        @precondition(lambda self: self.up)
        @rule(plan=crash_plans, restart_crash=st.none() | st.integers(0, 30))
        def crash(self, plan: CrashPlan, restart_crash: int | None) -> None:
            self._crash_and_restart(plan, restart_crash)

        @precondition(lambda self: self.up)
        @rule(plan=crash_plans)
        def process_killed_then_power_cut(self, plan: CrashPlan) -> None:
            """The process is killed (the machine keeps its page cache), restarts, and then
            the power goes: whatever the restarted bookie relied on from the dead process's
            unsynced writes (an entry that read back, so replay skipped its record) must
            have been made durable by its recovery."""
            _seen("a power cut after a process kill and a restart")
            self._run(Crash(KillProcess()))
            self._run(Restart())
            if self.up:
                self._run(Crash(plan))
                self._run(Restart())

        @precondition(lambda self: self.up)
        @rule(at=crash_points, plan=crash_plans, power_cut=st.booleans())
        def shutdown_and_restart(self, at: int | None, plan: CrashPlan, power_cut: bool) -> None:
            """A shutdown (maybe cut by a crash), maybe a power cut right after it (everything
            a clean shutdown did must be on the disk already), and a restart."""
            self._run(Shutdown(), at)
            if self.harness.model.interrupted is not None or power_cut:
                if power_cut and self.harness.model.interrupted is None:
                    _seen("a power cut right after a shutdown")
                self._run(Crash(plan))
            self._run(Restart())

        @precondition(lambda self: self.up and not self.harness.model.disk_full)
        @rule(where=st.sampled_from(DISK_FULL_PLACES), ledger=ledgers, data=payloads)
        def disk_full(self, where: str, ledger: int, data: bytes) -> None:
            """A place runs out of space: every ledger directory, the one holding the active
            entry log (the bookie must carry on in the other), or the journal directory; and
            the clients' next add meets it (with the GC rules the machine drew too few adds
            right after the active log's directory filled for BookKeeper #3329 to show)."""
            self._run(DiskFull(where))
            if self.up:
                self._add(self._ledger(ledger), data)

        @precondition(lambda self: self.up and self.harness.model.disk_full)
        @rule()
        def disk_writable(self) -> None:
            self._run(DiskWritable())

        @precondition(lambda self: self.up)
        @rule(fault=faults, ledger=ledgers, back=st.integers(0, 3))
        def inject_fault(
            self, fault: FailFsync | FailWrite | FailRead, ledger: int, back: int
        ) -> None:
            """Arm a failed fsync, write or read aimed at one kind of file (one rule for all,
            so that faults do not crowd out the healthy stretches); a read fault is followed
            by a read that may meet it, of one of the ledger's first entries (the newest are
            in the write buffer, and a read of them meets no file): the bookie may answer
            io_error for that read only, and nothing durable may change."""
            self._run(fault)
            if isinstance(fault, FailRead) and self.up:
                target = self._ledger(ledger)
                self._run(Read(target, min(back, max(0, self.next_entry.get(target, 0) - 1))))

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
                _seen("crash after a failed fsync in a checkpoint")
                self._crash_and_restart(plan, None)

        @precondition(lambda self: self.up and not self.harness.model.disk_full)
        @rule(
            step=st.sampled_from(("checkpoint", "checkpoint_flush", "preallocate")),
            ledger=ledgers,
            data=payloads,
            plan=crash_plans,
            crash=st.booleans(),
        )
        def full_disk_in_background_work(
            self, step: str, ledger: int, data: bytes, plan: CrashPlan, crash: bool
        ) -> None:
            """Issue 10: the maintenance thread's checkpoint (whole or its first phase) or
            preallocation meets full ledger directories. It answers no_space and the bookie
            goes on serving: a read, an add answered no_space or taken; then room comes
            back and the step and an add succeed again (the model allows no io_error for a
            full disk, and no no_space once room is back); maybe a crash at the end, so that
            what the step half did is judged by recovery too."""
            target = self._ledger(ledger)
            self._add(target, data)  # something for the checkpoint to flush
            if step == "preallocate":
                self._run(Rotate())  # a preallocated log is taken: the next one needs room
            self._run(DiskFull("ledger_dirs"))
            background = {"checkpoint": Checkpoint, "checkpoint_flush": CheckpointFlush}.get(
                step, Preallocate
            )
            answered = self._run(background()).result.error
            if not self.up:
                return
            if answered == "no_space":
                _seen(f"{step} found no room")
            self._run(Read(target, max(0, self.next_entry.get(target, 1) - 1)))
            self._add(target, data)
            self._run(DiskWritable())
            self._run(background())
            if self.up:
                self._add(target, data)
                if answered == "no_space":
                    _seen(f"service resumed after {step} found no room")
            if crash and self.up:
                self._crash_and_restart(plan, None)

        @invariant()
        def the_judged_state_is_the_bookies_and_the_judge_is_consistent(self) -> None:
            """The harness judges each step's state as it runs it (RefinementFailure on a
            difference). Between rules, the bookie is left alone: the state it reports now
            must be the one the last step recorded and the model judged (a bookie that changes
            by itself between steps, or a step whose state was not recorded, fails here), and
            the model's and the property monitor's invariants hold."""
            self.harness.judge.check_invariants()
            if self.up and self.harness.steps:
                recorded = self.harness.steps[-1].state
                assert recorded is not None, "the last step's state was not recorded"
                # (durable_last_mark and ledgers_maps are the harness's reading of the
                # disk, not the bookie's.)
                reported = attrs.evolve(recorded, durable_last_mark=None, ledgers_maps=None)
                assert self.sut.inspect() == reported, "the bookie changed between steps"

    return RefinementMachine


#: The GC steps (for coverage).
GC_STEP_OPS = (Gc, GcBegin, CompactCopy, CompactFlush, CompactIndex)


#: The rules that run each operation (a crash and a restart also follow every rule with a
#: crash point when the step died; the harness adds reads after every restart).
PRODUCERS: Mapping[type[Operation], tuple[str, ...]] = require_complete(
    {
        Add: (
            "add",
            "healthy_stretch",
            "add_to_the_boundary",
            "add_again",
            "new_ledger",
            "add_then_crash",
            "add_with_wrong_key",
            "group_commit_with_adds_between_its_phases",
            "checkpoint_with_adds_between_its_phases",
            "full_disk_in_background_work",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "rotate_many",
            "crash_inside_recovery_of_a_compaction",
            "crash_inside_a_compaction_phase",
            "disk_full",
        ),
        Read: (
            "read",
            "healthy_stretch",
            "inject_fault",
            "full_disk_in_background_work",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
        ),
        Fence: ("fence", "compaction_with_requests_between_its_phases"),
        Delete: (
            "delete",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "crash_inside_recovery_of_a_compaction",
        ),
        Checkpoint: (
            "checkpoint",
            "checkpoint_then_crash",
            "fsync_failure_in_checkpoint",
            "full_disk_in_background_work",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "crash_inside_recovery_of_a_compaction",
        ),
        JournalForce: (
            "journal_force",
            "healthy_stretch",
            "checkpoint_with_adds_between_its_phases",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
        ),
        JournalWrite: ("journal_write", "group_commit_with_adds_between_its_phases"),
        JournalSync: ("journal_sync", "group_commit_with_adds_between_its_phases"),
        JournalAck: ("journal_ack", "group_commit_with_adds_between_its_phases"),
        CheckpointFlush: (
            "checkpoint_flush",
            "checkpoint_with_adds_between_its_phases",
            "full_disk_in_background_work",
        ),
        CheckpointPersist: ("checkpoint_persist", "checkpoint_with_adds_between_its_phases"),
        Rotate: (
            "rotate",
            "checkpoint_with_adds_between_its_phases",
            "full_disk_in_background_work",
            "rotate_many",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "crash_inside_recovery_of_a_compaction",
        ),
        Preallocate: ("preallocate", "full_disk_in_background_work"),
        CheckDirs: ("check_dirs",),
        Gc: ("gc",),
        GcBegin: (
            "gc_begin",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "crash_inside_recovery_of_a_compaction",
            "crash_inside_a_compaction_phase",
        ),
        CompactCopy: (
            "compact_copy",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "crash_inside_recovery_of_a_compaction",
            "crash_inside_a_compaction_phase",
        ),
        CompactFlush: (
            "compact_flush",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "crash_inside_recovery_of_a_compaction",
        ),
        CompactIndex: (
            "compact_index",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
        ),
        Crash: (
            "crash",
            "process_killed_then_power_cut",
            "group_commit_with_adds_between_its_phases",
            "checkpoint_with_adds_between_its_phases",
            "checkpoint_then_crash",
            "fsync_failure_in_checkpoint",
            "add_then_crash",
            "delete",
            "checkpoint",
            "journal_force",
            "rotate",
            "shutdown_and_restart",
            "full_disk_in_background_work",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "crash_inside_recovery_of_a_compaction",
            "crash_inside_a_compaction_phase",
        ),
        Restart: (
            "crash",
            "process_killed_then_power_cut",
            "checkpoint_then_crash",
            "shutdown_and_restart",
            "group_commit_with_adds_between_its_phases",
            "checkpoint_with_adds_between_its_phases",
            "full_disk_in_background_work",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "crash_inside_recovery_of_a_compaction",
            "crash_inside_a_compaction_phase",
        ),
        Shutdown: ("shutdown_and_restart",),
        DiskFull: ("disk_full", "full_disk_in_background_work", "fault_in_a_compaction"),
        DiskWritable: ("disk_writable", "full_disk_in_background_work", "fault_in_a_compaction"),
        FailFsync: ("inject_fault", "fsync_failure_in_checkpoint", "fault_in_a_compaction"),
        FailWrite: ("inject_fault", "fault_in_a_compaction"),
        FailRead: ("inject_fault", "fault_in_a_compaction"),
    },
    "the Hypothesis refinement machine (tests/refinement/machine.py PRODUCERS)",
)
