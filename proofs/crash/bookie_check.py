"""The bookie crash check: crash a scripted workload before every file-system operation, and
let the model judge every crash state as a trace.

The workload is a list of spec/operations.py steps: adds across three ledgers with tiny entry
logs so they rotate, journal forces every few adds (every other one as its phases: write,
an add, sync, an add, acks), a fence of ledger 3 halfway with a wrong-key add and fence right
after it and a write close of ledger 2, which goes on taking adds (with many active logs the
next checkpoint seals its log), the clock moved on by the managers' access expiry three adds
later (with many active logs the next add lets the idle logs go), explicit rotations, a
checkpoint every eight adds (every other one as its phases, with adds and a force between
its flush and its persist of lastMark), a final force and a clean shutdown. So the machine
also dies inside each phase while requests interleave with them. It runs once through the
refinement harness
(proofs/harness/refinement.py: ``Refinement`` over ``InProcessBookie``), so the model and the
PropertyMonitor of spec/properties.py judge every step of it, and the harness counts the
file-system operations of each step.

A crash state is then a trace: the steps before step i, step i interrupted after k of its
file-system operations (``crash_after_ops=k``), ``Crash(plan)`` for every plan of
proofs/crash/plans.py at that point, ``Restart`` (the harness then reads back every entry
whose survival the crash left open and every entry that must have survived), and, as
ordinary steps, an add with the right key to every ledger whose fence was acknowledged
(property 2: refused, fenced) and an add and a fence with a wrong key to every ledger with an
acknowledged add or fence (property 3: refused, unauthorized). The crash points of the
bookie's first start (before step 0) are crash states too: the SUT's disk is replaced by the
disk of that interrupted start, and the trace begins with its crash (its header says so).

The model judges each step (answers, acks, the abstract state), and the PropertyMonitor
properties 1 durability, 2 fence durability, 3 auth and 6 forward progress. lastMark
progress (6) is the model's: lastMark never moves backwards, across crashes too, so after
recovery it is not behind the mark the last completed checkpoint reported
(models/journal/last_mark.py). Each recorded state also carries the lastMark the disk holds
durably (the harness reads it from the simulated disk), which the model holds equal to the
bookie's lastMark; one more check, on the disk's current contents, stays outside the trace as
a backstop: after recovery the lastMark file must say the ``last_mark`` of the restart's
state.

A failing state is a RefinementFailure whose trace replays with ``bkref check-trace`` and
is told by ``bkref explain``; its message names the properties the monitor finds broken in
the trace. Speed (docs/crash-check.md): the harness after an interrupted step is pickled once
per crash point and unpickled per plan, and a plan whose crashed disk is identical to one
that passed at the same point passes without a second recovery (proofs/crash/explorer.py).

Two entry-log managers (``manager``, ``bkref crash-check --manager``): ``single`` (one
active log, the default) and ``per-ledger`` (entryLogPerLedgerEnabled=true with
maximumNumberOfActiveEntryLogs 2: :func:`crash_settings`). The workload is the same; with
per-ledger logs its first half, round robin over three ledgers, evicts the least recently
added-to ledger's log at nearly every add (sealed, and flushed at the next checkpoint), the
second half keeps two logs active, and each Rotate seals every active log. Nothing in this
check assumes one active log: the model judges the layout of a per-ledger run by the rules
every manager keeps (models/entrylog/layout.py, property 10 of spec/properties.md) instead of
predicting each log as it does for the single manager, and the harness's disk check
(proofs/harness/disk_check.py) takes every active log as this run's. Not exercised with
per-ledger logs: eviction by entrylogMapAccessExpiryTimeInSeconds (the harness's clock does
not move, so no log expires; the entry-log target covers expiry). ``slots`` (bkref's own
entryLogSlotsPerLedgerDir=1, two slots over the two ledger directories, with at most
SLOTS_MAX_MAPPED ledgers mapped): three ledgers share two slots' logs, the map forgets the
least recently added-to ledger at nearly every add of the first half, and each Rotate seals
every slot's log; judged by the same rules (``slots``' own: at most two active logs, a
ledger's records between two states to one active log).

Not checked here: deletes and no resurrection (the refinement test), compaction, the
threaded driver (its acks are the same Acks; tests/unit/impl/bookie/test_driver.py covers it).
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Callable, Hashable, Mapping, Sequence

import attrs

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import load_config
from impl.journal.last_mark import read_last_mark
from impl.limits import TEST_LIMITS
from proofs.crash.explorer import (
    CrashFailure,
    ProgressTicker,
    Report,
    disk_fingerprint,
    disk_image,
    plans_at,
    restore_disk,
)
from proofs.harness.refinement import (
    JOURNAL_DIR,
    LEDGER_DIRS,
    InProcessBookie,
    Refinement,
    RefinementFailure,
    fresh_disk,
)
from spec.crash import CrashPlan
from spec.operations import (
    Add,
    AdvanceClock,
    Checkpoint,
    CheckpointFlush,
    CheckpointPersist,
    Crash,
    Fence,
    JournalAck,
    JournalForce,
    JournalSync,
    JournalWrite,
    Operation,
    Read,
    Restart,
    Rotate,
    Shutdown,
    WriteClose,
    failed,
)
from spec.properties import check_history
from spec.trace import Step, Trace

KEY = b"secret"
WRONG_KEY = b"not-the-key"
#: Entry ids of the probing adds (never the id of a workload add).
WORKLOAD_WRONG_KEY_ENTRY = 30_000
FENCE_PROBE_ENTRY = 10_000
WRONG_KEY_PROBE_ENTRY = 20_000

#: The properties of spec/properties.md the monitor checks here, by the monitor's names.
PROPERTY_NUMBERS = {"durability": 1, "fence": 2, "auth": 3, "resurrection": 4, "progress": 6}

#: What the bookie target checks, for progress lines and the summary.
PROPERTIES = (
    "every step and crash state a trace judged by the model; properties 1 durability, "
    "2 fence durability, 3 auth, 6 forward progress (lastMark)"
)
#: The same, in a few words for the summary line.
SUMMARY = "traces judged by the model, properties 1, 2, 3 and 6"

#: The entry-log managers the check runs (``bkref crash-check --manager``).
MANAGERS = ("single", "per-ledger", "slots")
#: maximumNumberOfActiveEntryLogs of a per-ledger run: fewer than the workload's three
#: ledgers, so logs are evicted inside the workload.
PER_LEDGER_MAX_ACTIVE = 2
#: A slots run: entryLogSlotsPerLedgerDir (two slots over LEDGER_DIRS, fewer than the
#: workload's three ledgers, so logs are shared) and maximumNumberOfActiveEntryLogs (the
#: most ledgers mapped, so mappings are forgotten).
SLOTS_PER_DIR = 1
SLOTS_MAX_MAPPED = 2


def describe_manager(manager: str) -> str:
    """The manager, in words, for the header and summary lines."""
    if manager == "single":
        return "manager single (one active log, entryLogPerLedgerEnabled=false)"
    if manager == "slots":
        return (
            f"manager slots (bkref's entryLogSlotsPerLedgerDir={SLOTS_PER_DIR}, "
            f"{SLOTS_PER_DIR * len(LEDGER_DIRS)} slots shared by the ledgers, at most "
            f"{SLOTS_MAX_MAPPED} ledgers mapped; mappings expire once, when the clock moves "
            "past the access expiry, and the idle slots' logs are sealed)"
        )
    assert manager == "per-ledger", manager
    return (
        "manager per-ledger (an active log per ledger, entryLogPerLedgerEnabled=true, "
        f"maximumNumberOfActiveEntryLogs {PER_LEDGER_MAX_ACTIVE}; logs expire once, when the "
        "clock moves past the access expiry)"
    )


def crash_settings(manager: str = "single") -> dict[str, str]:
    """Tiny limits so entry logs rotate every few entries (BookKeeper key names). Not
    TEST_SETTINGS (impl/limits.py), whose logSizeLimit and writeBufferSizeBytes are half
    these: the workload was sized with these, and other settings would move every crash
    point. The bookie itself is opened with TEST_LIMITS, as InProcessBookie opens it (its
    index then merges segments within the workload: the crash points of a merge). With
    ``manager`` per-ledger, an entry log per ledger, at most PER_LEDGER_MAX_ACTIVE active;
    ``slots``, SLOTS_PER_DIR slots per ledger directory, at most SLOTS_MAX_MAPPED mapped."""
    assert manager in MANAGERS, manager
    settings = {
        "journalDirectories": JOURNAL_DIR,
        "ledgerDirectories": ",".join(LEDGER_DIRS),
        "logSizeLimit": "2048",
        "writeBufferSizeBytes": "512",
        "journalMaxGroupWaitMSec": "0",
    }
    if manager == "per-ledger":
        settings["entryLogPerLedgerEnabled"] = "true"
        settings["maximumNumberOfActiveEntryLogs"] = str(PER_LEDGER_MAX_ACTIVE)
    elif manager == "slots":
        settings["entryLogSlotsPerLedgerDir"] = str(SLOTS_PER_DIR)
        settings["maximumNumberOfActiveEntryLogs"] = str(SLOTS_MAX_MAPPED)
    return settings


def workload(seed: int, adds: int) -> list[Operation]:
    """The scripted steps (module docstring); payloads of 0 to 199 bytes drawn from ``seed``."""
    rng = random.Random(seed)
    next_entry = {1: 0, 2: 0, 3: 0}
    ops: list[Operation] = []
    #: Phases of a group commit or a checkpoint still to run, one after each of the next adds.
    phases: list[Operation] = []
    for number in range(1, adds + 1):
        ledger = 1 + number % 3 if number < adds // 2 else 1 + number % 2
        ops.append(Add(ledger, next_entry[ledger], KEY, rng.randbytes(rng.randrange(0, 200))))
        next_entry[ledger] += 1
        if phases:
            ops.append(phases.pop(0))
        if number % 3 == 0:
            if number % 6 == 3 and not phases:
                # A group commit phase by phase, an add between each phase and the next.
                ops.append(JournalWrite())
                phases = [JournalSync(), JournalAck()]
            else:
                ops.append(JournalForce())
        if number == adds // 2:
            ops += [Fence(3, KEY), JournalForce()]
            ops += [Add(1, WORKLOAD_WRONG_KEY_ENTRY, WRONG_KEY, b"x"), Fence(1, WRONG_KEY)]
            # A write close of a ledger still written to (a hint: its adds go on); with many
            # active logs the next checkpoint seals its log (spec/protocol/write_close.md).
            ops.append(WriteClose(2, KEY))
        if number == adds // 2 + 3:
            # The clock moves on the managers' access expiry (300 s): with a log per
            # ledger the next add finds every ledger idle that long, their logs are let go
            # (sealed, rotated) and the add starts a new one; with slots the mappings are
            # forgotten. The machine dies inside that eviction too.
            ops.append(AdvanceClock(300))
        if number % 7 == 0:
            ops.append(Rotate())
        if number % 16 == 8 and not phases:
            # A checkpoint phase by phase, with adds and a group commit between its phases.
            ops += [JournalForce(), CheckpointFlush()]
            phases = [JournalForce(), CheckpointPersist()]
        elif number % 8 == 0:
            ops += [JournalForce(), Checkpoint()]
    ops += [*phases, JournalForce(), Shutdown()]
    return ops


# --- where the machine dies -----------------------------------------------------------------


@attrs.frozen
class CrashSite:
    """The machine dies before file-system operation ``after_ops`` of step ``step`` (None:
    of the bookie's first start), operation ``op_index`` of the whole run, of kind
    ``op_kind``. ``step_ops``: how many the step (or the start) issues in all."""

    step: int | None
    after_ops: int
    step_ops: int
    op_index: int
    op_kind: str

    def describe(self, ops: Sequence[Operation]) -> str:
        what = (
            "the first start" if self.step is None else f"step {self.step} ({ops[self.step].name})"
        )
        return (
            f"crash in {what} after {self.after_ops} of its {self.step_ops} file-system "
            f"operations (crash point {self.op_index}, before a {self.op_kind})"
        )


@attrs.frozen
class Recording:
    """The workload's run without a crash: its crash sites and its verdict."""

    sites: tuple[CrashSite, ...]
    #: Steps of the workload that ran and passed (all of them unless ``failure``).
    steps_passed: int
    #: The start's disk before each of its operations (images, by ``after_ops``).
    start_images: tuple[bytes, ...] = attrs.field(repr=False)
    failure: RefinementFailure | None = None


def _record_start(settings: Mapping[str, str], seed: int) -> list[tuple[str, bytes]]:
    """The bookie's first start on a fresh disk, as InProcessBookie opens it, with the disk's
    image before each of its operations."""
    disk = fresh_disk()
    config = load_config(None, "bookie crash check", [f"{k}={v}" for k, v in settings.items()])
    images: list[tuple[str, bytes]] = []
    disk.on_operation = lambda kind: images.append((kind, disk_image(disk)))
    try:
        Bookie.open(disk, config, clock=ManualClock(), rng=random.Random(seed), limits=TEST_LIMITS)
    finally:
        disk.on_operation = None
    return images


def record(ops: Sequence[Operation], settings: Mapping[str, str], seed: int) -> Recording:
    """Run the workload once through the harness, counting each step's operations."""

    start = _record_start(settings, seed)
    sites = [CrashSite(None, k, len(start), k, kind) for k, (kind, _) in enumerate(start)]
    sut = InProcessBookie(settings, seed=seed)
    harness = Refinement(sut, settings, source=_source(seed, len(ops), None, settings))
    passed = 0
    failure: RefinementFailure | None = None
    for index, op in enumerate(ops):
        kinds: list[str] = []
        sut.disk.on_operation = kinds.append
        try:
            harness.run(op)
        except RefinementFailure as exc:
            failure = exc
            break
        finally:
            sut.disk.on_operation = None
        first = len(sites)
        sites += [CrashSite(index, k, len(kinds), first + k, kind) for k, kind in enumerate(kinds)]
        passed += 1
    return Recording(tuple(sites), passed, tuple(image for _, image in start), failure)


def _source(seed: int, steps: int, site: str | None, settings: Mapping[str, str]) -> str:
    where = "" if site is None else f"; {site}"
    per_ledger = settings.get("entryLogPerLedgerEnabled") == "true"
    slots = settings.get("entryLogSlotsPerLedgerDir", "0") != "0"
    logs = ", an entry log per ledger" if per_ledger else ", entry-log slots" if slots else ""
    return (
        f"bkref crash-check bookie: in-process Bookie on the simulated disk{logs}, seed {seed}, "
        f"{steps} workload steps{where}"
    )


# --- one crash point --------------------------------------------------------------------------


def snapshot_harness(harness: Refinement, sut: InProcessBookie) -> bytes:
    """The harness with its SUT (the disk, the model, the monitor, the trace) as bytes."""
    return pickle.dumps((harness, sut), pickle.HIGHEST_PROTOCOL)


class _Template:
    """The harness just after the crash site's interrupted step, from which every plan of the
    point starts afresh: pickled once, unpickled per plan (several times faster than running
    the prefix again). Should the harness ever hold something pickle cannot take, the
    prefix is run again for every plan instead: slower, same verdicts."""

    def __init__(self, build: Callable[[], tuple[Refinement, InProcessBookie]]) -> None:
        self._build = build
        harness, sut = build()
        self.disk = disk_image(sut.disk)
        self.trace = harness.trace()
        self._spare: tuple[Refinement, InProcessBookie] | None = None
        try:
            self._blob: bytes | None = snapshot_harness(harness, sut)
        except (pickle.PicklingError, TypeError, AttributeError):
            self._blob = None
            self._spare = (harness, sut)

    def fresh(self) -> tuple[Refinement, InProcessBookie]:
        if self._blob is not None:
            harness, sut = pickle.loads(self._blob)
            return harness, sut
        spare, self._spare = self._spare, None
        return spare if spare is not None else self._build()

    def check_invariants(self) -> None:
        assert self._blob is not None or self._build is not None
        assert self._blob is None or self._spare is None, "a spare is kept only without a blob"


def _interrupted(
    ops: Sequence[Operation],
    site: CrashSite,
    settings: Mapping[str, str],
    seed: int,
    start_images: Sequence[bytes],
) -> tuple[Refinement, InProcessBookie]:
    """A harness whose next step is the crash: the steps before ``site.step`` run whole, and
    that step interrupted after ``site.after_ops`` operations. For a crash site in the first
    start, the SUT's disk is that of the interrupted start and its bookie is not up yet:
    nothing happened that a client saw, so the trace begins with the crash (its header says
    where it came from), and the model has no state of the start to hold the restart to."""

    sut = InProcessBookie(settings, seed=seed)
    if site.step is None:
        # Still starting: no state a client could see before the crash, so none to compare.
        sut.disk = restore_disk(start_images[site.after_ops])
        sut.bookie = None
    harness = Refinement(
        sut, settings, source=_source(seed, len(ops), site.describe(ops), settings)
    )
    if site.step is None:
        return harness, sut
    for op in ops[: site.step]:
        harness.run(op)
    step = harness.run(ops[site.step], crash_after_ops=site.after_ops)
    assert step.result.crashed, f"{site} did not crash: the run is not deterministic"
    return harness, sut


def probes_after_restart(trace: Trace) -> list[Operation]:
    """The fence and auth checks run after the restart, from what the trace acknowledged:
    an add with the right key to every ledger whose fence was acknowledged, and an add and a
    fence with a wrong key to every ledger with an acknowledged add or fence."""
    acked: list[Operation] = [step.op for step in trace.steps if step.result.ok]
    acked += [
        trace.steps[done.step].op
        for step in trace.steps
        for done in step.completed
        if done.error is None
    ]
    fenced = sorted({op.ledger for op in acked if isinstance(op, Fence)})
    known = sorted({op.ledger for op in acked if isinstance(op, Add | Fence)})
    probes: list[Operation] = [
        Add(ledger, FENCE_PROBE_ENTRY, KEY, b"after fence") for ledger in fenced
    ]
    for ledger in known:
        probes += [Add(ledger, WRONG_KEY_PROBE_ENTRY, WRONG_KEY, b"x"), Fence(ledger, WRONG_KEY)]
    return probes


def judge_state(
    harness: Refinement, sut: InProcessBookie, plan: CrashPlan, probes: Sequence[Operation]
) -> tuple[int, RefinementFailure | None]:
    """Crash under ``plan``, restart (with the harness's read-backs), run ``probes``, and
    compare the persisted lastMark with the restart's state. Returns the steps judged after
    the crash and the failure, if any (a RefinementFailure, with its trace)."""

    start = len(harness.trace().steps)
    op: Operation = Crash(plan)
    try:
        harness.run(op)
        op = Restart()
        restart = harness.run(op)
        for op in probes:
            harness.run(op)
        check_persisted_mark(harness, sut, restart)
    except RefinementFailure as failure:
        return len(failure.trace.steps) - start, failure
    except Exception as exc:  # the bookie (or the model) raised: a failure, with its trace
        trace = harness.trace()
        text = f"step {len(trace.steps)} ({op.name}) raised {type(exc).__name__}: {exc}"
        if isinstance(op, Restart):
            # Recovery failed: the trace says so, as a restart answered with an error.
            failed_restart = Step(len(trace.steps), op, failed("io_error"))
            trace = attrs.evolve(trace, steps=(*trace.steps, failed_restart))
            text = (
                f"step {failed_restart.index} (restart): recovery failed: "
                f"{type(exc).__name__}: {exc}"
            )
        return len(trace.steps) - start, RefinementFailure(text, trace)
    return len(harness.trace().steps) - start, None


def _what_was_judged(steps: Sequence[Step]) -> dict[str, int]:
    """The steps judged after one crash, by kind: the restart (with the lastMark on disk
    compared), the read-backs of entries the crash may or must have kept, and the fence and
    wrong-key probes."""
    counts = {
        "restarts with lastMark checked": sum(isinstance(s.op, Restart) for s in steps),
        "entries read back": sum(isinstance(s.op, Read) for s in steps),
        "fence and wrong-key probes": sum(isinstance(s.op, Add | Fence) for s in steps),
    }
    return counts


def check_persisted_mark(harness: Refinement, sut: InProcessBookie, restart: Step) -> None:
    """The backstop outside the trace (module docstring): after recovery the lastMark file's
    current contents are the ``last_mark`` of the restart's state."""

    if restart.state is None:
        return
    persisted = read_last_mark(sut.disk, [f"{d}/current" for d in LEDGER_DIRS])
    on_disk = (persisted.journal_id, persisted.offset)
    if on_disk != restart.state.last_mark:
        raise RefinementFailure(
            f"after the restart (step {restart.index}) the lastMark persisted on disk is "
            f"{on_disk}, but the bookie's state says {restart.state.last_mark}: the mark a "
            "next restart replays from is not the one the model judged (a check of the "
            "disk's current contents, outside the trace)",
            harness.trace(),
        )


def describe_failure(failure: RefinementFailure) -> str:
    """The failure's message, with the properties of spec/properties.md that the monitor
    finds broken in its trace (when the model spoke first, they are not in the message)."""
    extra = [
        f"property {PROPERTY_NUMBERS[v.prop]} ({v.prop}) at step {v.step}: {v.message}"
        for v in check_history(failure.trace.steps)
        if f"property {v.prop} at step {v.step}" not in failure.message
    ]
    return failure.message + "".join(f"; breaks {text}" for text in extra)


# --- the whole check ----------------------------------------------------------------------


@attrs.frozen
class BookieRun:
    """One bookie crash check: the workload's parameters and steps."""

    seed: int
    adds: int
    manager: str = attrs.field(default="single", validator=attrs.validators.in_(MANAGERS))
    settings: Mapping[str, str] = attrs.field(
        default=attrs.Factory(lambda run: crash_settings(run.manager), takes_self=True)
    )

    @property
    def ops(self) -> list[Operation]:
        return workload(self.seed, self.adds)

    def describe(self) -> str:
        return (
            f"seed {self.seed}, {self.adds} adds over 3 ledgers, a fence, a wrong-key add and "
            f"fence, a write close, the clock moved on 300 s, journal forces and checkpoints "
            f"(some phase by phase, with adds between the phases), rotations, a clean "
            f"shutdown; logSizeLimit "
            f"{self.settings['logSizeLimit']}; {describe_manager(self.manager)}"
        )


def run_bookie_check(
    *,
    seed: int = 1,
    adds: int = 24,
    manager: str = "single",
    max_points: int | None = None,
    max_failures: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Crash the workload at every file-system operation (or ``max_points`` of them) under
    every plan, each crash state a trace judged by the model (module docstring), the bookie
    running with ``manager``'s entry logs. With ``max_failures``, stop after the crash point
    at which that many failures were found (a known-bad variant fails thousands of states,
    each recovered and judged in full)."""
    run = BookieRun(seed, adds, manager)
    ops = run.ops
    recording = record(ops, run.settings, seed)
    report = Report()
    if recording.failure is not None:
        # The workload itself fails, before any crash: the model's first word is the verdict.
        step = recording.steps_passed
        report.failures.append(
            CrashFailure(
                -1,
                "none",
                None,
                describe_failure(recording.failure),
                where=f"the workload without a crash, step {step} ({ops[step].name})",
                trace=recording.failure,
            )
        )
    sites = list(recording.sites)
    if max_points is not None and len(sites) > max_points:
        sites = sites[:: -(-len(sites) // max_points)]
    ticker = ProgressTicker(progress)
    label = "bookie" if manager == "single" else f"bookie {manager}"
    for number, site in enumerate(sites, start=1):
        if max_failures is not None and len(report.failures) >= max_failures:
            break
        _explore_site(run, ops, site, recording, report)
        if ticker.due():
            ticker.say(
                f"  {label}: crash point {number}/{len(sites)} ({site.describe(ops)}): "
                f"{report.describe_states()}"
            )
    return report


def _explore_site(
    run: BookieRun,
    ops: Sequence[Operation],
    site: CrashSite,
    recording: Recording,
    report: Report,
) -> None:
    """Every plan at one crash site (module docstring)."""

    report.crash_points += 1
    where = site.describe(ops)
    try:
        template = _Template(
            lambda: _interrupted(ops, site, run.settings, run.seed, recording.start_images)
        )
    except RefinementFailure as refused:  # the interrupted step itself is refused
        message = describe_failure(refused)
        report.failures.append(
            CrashFailure(site.op_index, site.op_kind, None, message, where=where, trace=refused)
        )
        return
    probes = probes_after_restart(template.trace)
    passed: set[Hashable] = set()
    for plan in plans_at(restore_disk(template.disk)):
        report.crash_states += 1
        crashed = restore_disk(template.disk)
        crashed.crash(plan)
        fingerprint = disk_fingerprint(crashed)
        if fingerprint in passed:
            continue
        harness, sut = template.fresh()
        before = len(harness.trace().steps)
        checked, found = judge_state(harness, sut, plan, probes)
        report.recovered_states += 1
        report.checked_items += checked
        report.count(_what_was_judged(harness.trace().steps[before:]))
        if found is None:
            passed.add(fingerprint)
            continue
        message = describe_failure(found)
        report.failures.append(
            CrashFailure(site.op_index, site.op_kind, plan, message, where=where, trace=found)
        )
