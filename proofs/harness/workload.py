"""The refinement workload: the rules that drive the refinement harness
(proofs/harness/refinement.py) through every operation, background step and fault, written
once and drawn two ways: by Hypothesis in the stateful refinement test
(tests/refinement/machine.py, which shrinks a failure to a minimal rule sequence) and by a
seeded random source in the verification campaign (proofs/campaign/scenario.py, where a
scenario is derived from (seed, index) alone, so that any campaign row replays anywhere).

Spec pages: spec/properties.md (what the harness checks after every step), spec/crash.py
(the crash plans), spec/operations.py (the operations each rule runs: :data:`PRODUCERS`).

Why the rules live here and not in the test: a campaign that ran a rule set of its own would
drift from the one the test's coverage minimums and the quality catches measure, and a check
weaker than its name would go unnoticed. So each rule is a plain method of :class:`Workload`
taking plain values, each argument is drawn by a :data:`Draw` description that both drawers
read (the Hypothesis strategy built from it is the very strategy the test drew before), and
each rule's precondition is one of four names (:data:`WHEN`).

Biases, because they pay: a handful of ledgers reused across the run (bundles of adds to the
same ledgers), the group commit's and the checkpoint's phases as steps with adds between them
(races with the journal and maintenance threads), a process kill that keeps the page cache
followed by a power cut, entry logs of 1400 bytes and payloads half of them large, so that a
few adds rotate them, a crash right after a whole checkpoint, crash plans drawn as data (so a
failure shrinks to a small plan), crashes in the middle of a step (after a drawn number of
file-system operations: a crash during a checkpoint, a rotation, a journal force, a
recovery), and long runs in the deep profile. For garbage collection and compaction: logs
made dead or compactable before a GC (adds over a few ledgers, a checkpoint, a delete),
compactions stepped phase by phase with requests between the phases (an add before each, a
delete between copy and index), a crash at a drawn file-system operation inside gc_begin,
each phase and the recovery that finishes or undoes them, faults aimed at a compaction's
files in each phase, forced GCs (whose kind the model predicts exactly), drawn compaction
thresholds, and rotations in bursts so that log ids pass 16 (BookKeeper #4804 shows only for
ids >= 10).

The rare situations a run meets are recorded through the ``seen`` callback with the texts of
:data:`PROBES` (Hypothesis events in the test, counts per scenario in a campaign), so the
test and the campaign measure the same things.

Not verified here: that the two drawers draw alike. Hypothesis favours small values and
short binaries and shrinks; the seeded drawer draws uniformly within each description. Both
reach every probe (tests/refinement/test_coverage.py, tests/unit/proofs/campaign/).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import attrs

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
    AdvanceClock,
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
    WriteClose,
    require_complete,
)
from spec.trace import Step

# --- how an argument is drawn --------------------------------------------------------------


@attrs.frozen
class Just:
    """Always ``value``."""

    value: Any


@attrs.frozen
class Ints:
    """An integer from ``low`` to ``high``, both included."""

    low: int
    high: int


@attrs.frozen
class Sampled:
    """One of ``values``."""

    values: tuple[Any, ...]


@attrs.frozen
class Bools:
    """True or False."""


@attrs.frozen
class Binary:
    """Bytes of ``min_size`` to ``max_size`` bytes."""

    max_size: int
    min_size: int = 0


@attrs.frozen
class OneOf:
    """What one of ``options`` draws (each option as likely, for the seeded drawer)."""

    options: tuple[Draw, ...]


@attrs.frozen
class Mapped:
    """``function`` of what ``inner`` draws."""

    inner: Draw
    function: Callable[[Any], Any]


@attrs.frozen
class Builds:
    """``target`` called with what each of ``args`` draws."""

    target: Callable[..., Any]
    args: tuple[Draw, ...]


@attrs.frozen
class FrozenSets:
    """A frozenset of at most ``max_size`` elements drawn by ``element``."""

    element: Draw
    max_size: int


@attrs.frozen
class Lists:
    """A list of at most ``max_size`` elements drawn by ``element``."""

    element: Draw
    max_size: int


@attrs.frozen
class Fixed:
    """A dict with ``fields``' keys, each value drawn by its description."""

    fields: tuple[tuple[str, Draw], ...]


Draw = Just | Ints | Sampled | Bools | Binary | OneOf | Mapped | Builds | FrozenSets | Lists | Fixed


@attrs.frozen
class Steer:
    """What a seeded drawer favours (the campaign's second pass aims at what its first pass
    missed): crash plans of these kinds (:func:`plan_kind`), crash points inside a step
    rather than none (``inside``), and these injected faults (``op:file``, as
    ``fsync:journal``). Each is kept to three draws in four; the fourth draws as usual."""

    plans: frozenset[str] = frozenset()
    inside: bool = False
    faults: frozenset[str] = frozenset()


class RandomDrawer:
    """Draws values from :data:`Draw` descriptions with a seeded ``random.Random`` (the
    campaign's drawer), favouring what ``steer`` says. Unsteered, it calls the random source
    exactly as often as the descriptions need, so a focus never changes the draws of a
    scenario without one."""

    #: How often a steered draw keeps to what is favoured.
    STEERED_SHARE = 0.75

    def __init__(self, rng: random.Random, steer: Steer = Steer()) -> None:
        self.rng = rng
        self.steer = steer

    def draw(self, what: Draw) -> Any:
        rng = self.rng
        steered = self._steered(what)
        if steered is not None and rng.random() < self.STEERED_SHARE:
            return self.draw(steered)
        if isinstance(what, Just):
            return what.value
        if isinstance(what, Ints):
            return rng.randint(what.low, what.high)
        if isinstance(what, Sampled):
            return rng.choice(what.values)
        if isinstance(what, Bools):
            return rng.random() < 0.5
        if isinstance(what, Binary):
            return rng.randbytes(rng.randint(what.min_size, what.max_size))
        if isinstance(what, OneOf):
            return self.draw(rng.choice(what.options))
        if isinstance(what, Mapped):
            return what.function(self.draw(what.inner))
        if isinstance(what, Builds):
            return what.target(*(self.draw(arg) for arg in what.args))
        if isinstance(what, FrozenSets):
            return frozenset(self.draw(what.element) for _ in range(rng.randint(0, what.max_size)))
        if isinstance(what, Lists):
            return [self.draw(what.element) for _ in range(rng.randint(0, what.max_size))]
        return {name: self.draw(field) for name, field in what.fields}

    def _steered(self, what: Draw) -> Draw | None:
        """The favoured part of ``what``, when the steer favours some of it."""
        steer = self.steer
        options: tuple[Draw, ...] = ()
        if what is CRASH_PLANS and steer.plans:
            options = tuple(o for o in CRASH_PLANS.options if _option_kind(o) in steer.plans)
        elif steer.inside and isinstance(what, OneOf) and what in CRASH_POINT_DRAWS:
            options = tuple(o for o in what.options if isinstance(o, Ints))
        elif steer.faults and (what is FAULTS or what is COMPACTION_FAULTS):
            options = tuple(Just(fault) for fault in faults_named(steer.faults))
        return OneOf(options) if options else None


# --- what the rules draw ------------------------------------------------------------------

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
CRASH_PLANS = OneOf(
    (
        Just(LoseUnsynced()),
        Just(KeepAll()),  # kill -9: the process dies, the page cache reaches the disk
        Just(KillProcess()),  # kill -9, the page cache kept but not on the disk yet
        Builds(KeepPrefix, (Ints(0, 40),)),
        Builds(TornWrite, (Ints(0, 40), Ints(0, 3))),
        Builds(KeepSubset, (FrozenSets(Ints(0, 40), max_size=12),)),
    )
)
#: How many file-system operations a step may issue before the machine dies in it; most
#: steps run whole (two in three: the crash rules and the rules that end in a crash are
#: many, and half of the steps dying left too few acknowledged adds per example).
CRASH_POINTS = OneOf((Just(None), Just(None), Ints(0, 24)))
#: The same for a group commit, which issues only two or three (write, fsync, maybe a
#: rollover): drawn up to 24, a crash almost never landed inside one
#: (tests/refinement/test_coverage.py counted none in 120 examples).
FORCE_CRASH_POINTS = OneOf((Just(None), Ints(0, 3)))
#: Half of the payloads are large (120-160 bytes, records of 140-180): Hypothesis draws mostly
#: short binaries, which filled a 1400-byte log only after a dozen adds, so a log rotated and
#: was checkpointed within one run (between two restarts) too rarely for a crash to test what
#: the checkpoint made durable (tests/quality/test_refinement_catches.py measured it).
PAYLOADS = OneOf((Binary(max_size=160), Binary(min_size=120, max_size=160)))
#: A live ledger, as an index into the run's live ledgers (so it shrinks and stays valid as
#: ledgers come and go).
LEDGER_PICKS = Ints(0, 63)
#: The knobs drawn per run, as FoundationDB's simulator draws its configuration: the entry
#: log's size limit (rotation every few adds), the write buffer (records cross it, or it
#: holds several), flushEntrylogBytes (0: off) and how many journals before lastMark a
#: checkpoint keeps.
KNOBS = Fixed(
    (
        ("logSizeLimit", Sampled(("1100", "1400", "2048"))),
        ("writeBufferSizeBytes", Sampled(("64", "256", "1024"))),
        ("flushEntrylogBytes", Sampled(("0", "0", "300"))),
        # With TEST_LIMITS a journal rolls over every few groups: 0 keeps no journal before
        # lastMark, 5 is BookKeeper's default.
        ("journalMaxBackups", Sampled(("0", "1", "5"))),
        ("entryLogFilePreallocationEnabled", Sampled(("true", "false"))),
        # Compaction: BookKeeper's thresholds, or higher ones (more logs are candidates); a
        # major interval of 0 disables major compaction, so a forced GC compacts minor.
        ("majorCompactionThreshold", Sampled(("0.8", "0.95"))),
        ("minorCompactionThreshold", Sampled(("0.2", "0.6"))),
        ("majorCompactionInterval", Sampled(("86400", "86400", "0"))),
    )
)
#: Where a fault inside a compaction is aimed: its own files (the .compacting and the
#: .compacted), the source it reads, any file.
COMPACTION_FAULTS = OneOf(
    (
        Mapped(Sampled(("compaction", "any")), FailFsync),
        Mapped(Sampled(("compaction", "any")), FailWrite),
        Mapped(Sampled(("compaction", "entry_log")), FailRead),
        Just(DiskFull("ledger_dirs")),
    )
)
#: The GC steps a compaction story may die in.
GC_PHASES = ("begin", "copy", "flush", "index")
#: Where reads are failed: the kinds of file a bookie reads while it runs, or any.
READ_AIMS = ("any", "entry_log", "index")
#: The faults a rule arms: an fsync, a write or a read that fails, aimed at one kind of
#: file (or any).
FAULTS = OneOf(
    (
        Mapped(Sampled(FAULT_AIMS), FailFsync),
        Mapped(Sampled(DATA_AIMS), FailWrite),
        Mapped(Sampled(READ_AIMS), FailRead),
    )
)
#: The wall clock the bookie reads, which new journal ids start from: mostly today's, and
#: sometimes a few milliseconds below 0x100000000000, so that the journals of a run cross a
#: hex width (fffffffffff.txn, then 100000000000.txn: name order is not id order).
WALL_CLOCKS = Sampled((DEFAULT_WALL_MS, DEFAULT_WALL_MS, 0xFFFFFFFFFFF - 2))
#: How far past the previous entry id an add's id is: mostly the next one; sometimes a
#: stripe (an ensemble of 3 writes every third id), sometimes far ahead.
ENTRY_GAPS = Sampled((1, 1, 1, 1, 3, 17))
#: A crash inside a restart, or none.
RESTART_CRASHES = OneOf((Just(None), Ints(0, 30)))
#: The draws of a crash point (a count of file-system operations, or none).
CRASH_POINT_DRAWS = (CRASH_POINTS, FORCE_CRASH_POINTS, RESTART_CRASHES)
#: The injected faults by the name a steer gives them (``op:file``), and the files each aims.
FAULT_KINDS: Mapping[str, tuple[type[Any], tuple[str, ...]]] = {
    "fsync": (FailFsync, FAULT_AIMS),
    "write": (FailWrite, DATA_AIMS),
    "read": (FailRead, READ_AIMS),
}


def faults_named(names: frozenset[str]) -> list[Operation]:
    """The faults ``names`` (``op:file``) name that can be injected, in name order."""
    found: list[Operation] = []
    for name in sorted(names):
        op, _, file = name.partition(":")
        kind = FAULT_KINDS.get(op)
        if kind is not None and file in kind[1]:
            found.append(kind[0](file))
    return found


#: The longest healthy stretch (adds between faults) of the fast profile; the deep one draws
#: longer ones (tests/refinement/test_refinement.py): Hypothesis bounds how many rules an
#: example holds, so a deep history is one with longer stretches, not only more rules.
STRETCH_MAX = 24


def plan_kind(plan: CrashPlan) -> str:
    """The name of a crash plan's kind, as coverage cells and steering name it."""
    return PLAN_KINDS.get(type(plan), type(plan).__name__)


#: Crash plan kinds by class (spec/crash.py), in the order the coverage matrix shows them.
PLAN_KINDS: Mapping[type[Any], str] = {
    LoseUnsynced: "lose_unsynced",
    KeepAll: "keep_all",
    KillProcess: "kill",
    KeepPrefix: "keep_prefix",
    TornWrite: "torn_write",
    KeepSubset: "keep_subset",
}


def _option_kind(option: Draw) -> str:
    """The plan kind one option of :data:`CRASH_PLANS` draws."""
    if isinstance(option, Just):
        return plan_kind(option.value)
    assert isinstance(option, Builds) and isinstance(option.target, type), option
    return PLAN_KINDS[option.target]


# --- the rules ------------------------------------------------------------------------------


@attrs.frozen
class Rule:
    """One rule: the :class:`Workload` method ``name``, when it may run (a key of
    :data:`WHEN`), and how each of its arguments is drawn."""

    name: str
    args: tuple[tuple[str, Draw], ...] = ()
    when: str = "up"


#: The advisory write close (spec/protocol/write_close.md) and what may follow it: more adds
#: (a hint, not a fence), a checkpoint (which seals the ledger's log: R-WRITE-CLOSE), or a
#: checkpoint, the ledger's delete and a GC (which must then find the log dead: forward
#: progress). Drawn only with many active logs (:func:`many_active_logs`): with the single log
#: a write close changes nothing, and adding a rule to the single-log workload would move
#: every derandomized draw the quality catches and coverage counts were measured on.
WRITE_CLOSE_RULE = Rule(
    "write_close",
    (
        ("ledger", LEDGER_PICKS),
        ("wrong", Bools()),
        ("then", Sampled(("nothing", "add", "checkpoint", "checkpoint", "delete_and_gc"))),
        ("data", PAYLOADS),
    ),
)


#: The bookie's clock moving on (spec/operations.py AdvanceClock): below, at and past the
#: default access expiry of the managers with many active logs (300 s), so that at the next
#: add or checkpoint an idle ledger's log (or slot) is let go, or not yet; then an add to a
#: ledger, a checkpoint, or nothing. Drawn only with many active logs, for the reason
#: WRITE_CLOSE_RULE is: the single log times nothing.
ADVANCE_CLOCK_RULE = Rule(
    "advance_clock",
    (
        ("seconds", Sampled((1, 299, 300, 301, 3600))),
        ("ledger", LEDGER_PICKS),
        ("then", Sampled(("nothing", "add", "add", "checkpoint"))),
        ("data", PAYLOADS),
    ),
)
#: The rules only a manager with many active logs draws (:func:`rules`).
MANY_LOG_RULES = (ADVANCE_CLOCK_RULE, WRITE_CLOSE_RULE)


def many_active_logs(settings: Mapping[str, str]) -> bool:
    """Whether ``settings`` choose an entry-log manager with many active logs: a log per
    ledger, or slots (bkref's entryLogSlotsPerLedgerDir above 0)."""
    per_ledger = settings.get("entryLogPerLedgerEnabled", "false").strip().lower() == "true"
    slots = settings.get("entryLogSlotsPerLedgerDir", "0").strip()
    return per_ledger or (slots.isdigit() and int(slots) > 0)


def rules(stretch_max: int = STRETCH_MAX, *, many_logs: bool = False) -> tuple[Rule, ...]:
    """Every rule, in name order (the order Hypothesis lists a machine's rules in); healthy
    stretches hold 4 to ``stretch_max`` adds. ``many_logs``: with :data:`MANY_LOG_RULES`
    (for the managers with many active logs)."""
    at, plan = ("at", CRASH_POINTS), ("plan", CRASH_PLANS)
    ledger, data = ("ledger", LEDGER_PICKS), ("data", PAYLOADS)
    table: tuple[Rule, ...] = (
        Rule("add", (ledger, data, ("count", Ints(1, 8)), ("gap", ENTRY_GAPS))),
        Rule("add_again", (("pick", Ints(0, 10**6)),), when="up_with_sent"),
        Rule("add_then_crash", (ledger, data, ("at", Ints(0, 6)), plan)),
        Rule(
            "add_to_the_boundary",
            (
                ledger,
                ("delta", Sampled((-1, 0, 1))),
                ("boundary", Sampled(("log", "log", "buffer", "map_batch"))),
            ),
        ),
        Rule("add_with_wrong_key", (ledger,)),
        Rule("check_dirs"),
        Rule("checkpoint", (at, plan)),
        Rule("checkpoint_flush"),
        Rule("checkpoint_persist"),
        Rule("checkpoint_then_crash", (plan, ("restart_crash", RESTART_CRASHES))),
        Rule(
            "checkpoint_with_adds_between_its_phases",
            (
                ledger,
                data,
                ("count", Ints(0, 4)),
                ("force", Bools()),
                ("rotate", Bools()),
                at,
                plan,
                ("crash_after", Bools()),
            ),
        ),
        Rule("compact_copy", (at, plan)),
        Rule("compact_flush", (at, plan)),
        Rule("compact_index", (at, plan)),
        Rule(
            "compaction_with_requests_between_its_phases",
            (
                ledger,
                data,
                ("deletes", Ints(0, 2)),
                ("force", Bools()),
                (
                    "between",
                    Lists(
                        Sampled(("add", "delete", "checkpoint", "rotate", "read", "fence")),
                        max_size=6,
                    ),
                ),
                (
                    "crash_in",
                    Sampled((None, "begin", "copy", "copy", "flush", "flush", "index", "recovery")),
                ),
                ("at", Ints(0, 30)),
                plan,
            ),
        ),
        Rule("crash", (plan, ("restart_crash", RESTART_CRASHES))),
        Rule(
            "crash_inside_a_compaction_phase",
            (
                ledger,
                data,
                ("phase", Sampled(GC_PHASES)),
                # Small counts often: gc_begin issues two operations per dead log and none
                # when there is none, so a crash inside it needs a count below that.
                ("at", OneOf((Ints(0, 3), Ints(0, 30)))),
                plan,
                ("delete_between", Bools()),
            ),
        ),
        Rule(
            "crash_inside_recovery_of_a_compaction",
            (ledger, data, ("flushed", Bools()), plan, ("at", Ints(0, 40))),
        ),
        Rule("delete", (ledger, at, plan)),
        Rule(
            "disk_full",
            (("where", Sampled(DISK_FULL_PLACES)), ledger, data),
            when="up_not_full",
        ),
        Rule("disk_writable", when="up_full"),
        Rule(
            "fault_in_a_compaction",
            (
                ledger,
                data,
                ("fault", COMPACTION_FAULTS),
                ("phase", Sampled(("copy", "flush", "index"))),
                ("repeat", Ints(1, 3)),
                plan,
                ("crash", Bools()),
            ),
            when="up_not_full",
        ),
        Rule("fence", (ledger, ("wrong", Bools()))),
        Rule("fsync_failure_in_checkpoint", (plan, ("retry", Bools()))),
        Rule(
            "full_disk_in_background_work",
            (
                ("step", Sampled(("checkpoint", "checkpoint_flush", "preallocate"))),
                ledger,
                data,
                plan,
                ("crash", Bools()),
            ),
            when="up_not_full",
        ),
        Rule("gc", (("force", Bools()), at, plan)),
        Rule("gc_begin", (("force", Bools()), at, plan)),
        Rule(
            "group_commit_with_adds_between_its_phases",
            (
                ledger,
                data,
                ("before", Ints(0, 4)),
                ("during", Ints(0, 4)),
                ("at", FORCE_CRASH_POINTS),
                plan,
                ("crash_after", Bools()),
            ),
        ),
        Rule(
            "healthy_stretch",
            (ledger, data, ("count", Ints(4, stretch_max)), ("read_back", Bools())),
        ),
        Rule("inject_fault", (("fault", FAULTS), ledger, ("back", Ints(0, 3)))),
        Rule("journal_ack"),
        Rule("journal_force", (("at", FORCE_CRASH_POINTS), plan)),
        Rule("journal_sync"),
        Rule("journal_write"),
        Rule("new_ledger", (data,)),
        Rule("preallocate"),
        Rule("process_killed_then_power_cut", (plan,)),
        Rule("read", (ledger, ("back", Ints(0, 6)))),
        Rule("rotate", (at, plan)),
        Rule("rotate_many", (("count", Ints(1, 6)), data, ledger)),
        Rule("shutdown_and_restart", (at, plan, ("power_cut", Bools()))),
    )
    if many_logs:
        table = tuple(sorted((*table, *MANY_LOG_RULES), key=lambda r: r.name))
    assert [r.name for r in table] == sorted(r.name for r in table), "keep the rules in order"
    return table


class Workload:
    """One run of the refinement harness driven by rules: the bookie under test (built by
    ``opener``: Bookie.open, or a known-bad variant's), the harness, and what the rules need
    to remember (the live ledgers, each one's next entry id, the adds sent). ``seen`` records
    a situation (a text of :data:`PROBES`); healthy stretches hold 4 to ``stretch_max`` adds.

    Each rule is a method taking plain values; :meth:`enabled` says whether its precondition
    holds; :meth:`check_between_rules` is the check that runs after every rule."""

    def __init__(
        self,
        opener: Callable[..., Bookie] = Bookie.open,
        *,
        stretch_max: int = STRETCH_MAX,
        seen: Callable[[str], None] = lambda _text: None,
        fixed: Mapping[str, str] | None = None,
    ) -> None:
        """``fixed``: settings every run of this workload has, over the drawn knobs (e.g.
        entryLogPerLedgerEnabled for the refinement test of that manager)."""
        self.opener = opener
        self.stretch_max = stretch_max
        self.seen = seen
        self.fixed = dict(fixed or {})
        self.settings = {**SMALL_SETTINGS, **self.fixed}
        self.sut = InProcessBookie(self.settings, opener=opener)
        self.harness = Refinement(self.sut, self.settings)
        #: The live ledgers, and the next entry id of each: ids are never reused.
        self.live: list[int] = list(LEDGERS)
        self.next_entry = dict.fromkeys(LEDGERS, 0)
        #: Entries added, with their data, so an add can be sent again (a retry).
        self.sent: dict[tuple[int, int], bytes] = {}
        self.logs_seen = 0
        self.journal_seen = 0
        #: The entry-log manager's event counts (Bookie.entry_log_events) last recorded, and
        #: the run they were read from.
        self.events_seen: Mapping[str, int] = {}
        self.events_of: Bookie | None = None

    def configure(self, drawn: dict[str, str], wall_ms: int) -> None:
        """Start this run's bookie with its drawn knobs (:data:`KNOBS`) and wall clock
        (:data:`WALL_CLOCKS`)."""
        self.settings = {**SMALL_SETTINGS, **HALF_FULL_THRESHOLDS, **drawn, **self.fixed}
        self.sut = InProcessBookie(self.settings, opener=self.opener, wall_ms=wall_ms)
        self.harness = Refinement(self.sut, self.settings)
        self.seen(f"logSizeLimit {drawn['logSizeLimit']}")

    def enabled(self, rule: Rule) -> bool:
        """Whether ``rule``'s precondition holds now."""
        return WHEN[rule.when](self)

    def check_between_rules(self) -> None:
        """The harness judges each step's state as it runs it (RefinementFailure on a
        difference). Between rules, the bookie is left alone: the state it reports now
        must be the one the last step recorded and the model judged (a bookie that changes
        by itself between steps, or a step whose state was not recorded, fails here), and
        the model's and the property monitor's invariants hold."""
        self.harness.judge.check_invariants()
        if self.is_up() and self.harness.steps:
            recorded = self.harness.steps[-1].state
            assert recorded is not None, "the last step's state was not recorded"
            # (durable_last_mark and ledgers_maps are the harness's reading of the
            # disk, not the bookie's.)
            reported = attrs.evolve(recorded, durable_last_mark=None, ledgers_maps=None)
            assert self.sut.inspect() == reported, "the bookie changed between steps"

    # --- helpers --------------------------------------------------------------------

    def is_up(self) -> bool:
        """Whether the bookie is running (the model's view). A method, not a property: a
        rule asks again after every step that may have crashed it."""
        return self.harness.model.up

    def _run(self, op: Operation, crash_after_ops: int | None = None) -> Step:
        step = self.harness.run(op, crash_after_ops=crash_after_ops)
        if step.result.crashed:
            self.seen(f"crash during {op.name}")
        if step.state is not None and len(step.state.entry_logs) > self.logs_seen:
            if self.logs_seen:
                self.seen("entry log rotated")
            self.logs_seen = len(step.state.entry_logs)
        if step.state is not None:
            journal = step.state.journal_mark[0]
            if not isinstance(op, Restart) and journal != self.journal_seen:
                self.seen("journal rolled over")
            self.journal_seen = journal
        if step.state is not None and step.state.journal_mark[0] > 0xFFFFFFFFFFF:
            self.seen("a journal id with one more hex digit")
        for fault in step.faults:
            self.seen(f"a fault fired: {fault.op} of {fault.file}")
        self._see_manager_events()
        partly_full = self.harness.model.disk_full == "active_log_dir"
        if isinstance(op, Add) and partly_full and (step.result.ok or step.result.pending):
            self.seen("an add taken while the active log's directory is full")
        if isinstance(op, Restart) and step.result.replayed:
            self.seen("restart replayed journal records")
            recovery = self.sut.bookie.recovery if self.sut.bookie else None
            if recovery is not None and recovery.fences_set:
                self.seen("replay with fence records")
        return step

    def _see_manager_events(self) -> None:
        """Each eviction, write-close seal and move off a full directory of the entry-log
        manager since the last step (a new run counts from zero)."""
        bookie = self.sut.bookie
        if bookie is None:
            return
        events = bookie.entry_log_events
        before = self.events_seen if bookie is self.events_of else {}
        for event, count in sorted(events.items()):
            for _ in range(count - before.get(event, 0)):
                self.seen(event)
        self.events_seen, self.events_of = events, bookie

    def _crash_and_restart(self, plan: CrashPlan, restart_crash: int | None) -> None:
        if any(p.kind == "fence" for p in self.harness.model.pending.values()):
            self.seen("crash between a fence and its ack")
        if self.harness.model.pending:
            self.seen("crash with adds waiting for the journal")
        self._run(Crash(plan))
        if restart_crash is not None:
            self._run(Restart(), restart_crash)
            if not self.is_up():
                self._run(Crash(plan))
        if not self.is_up():
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
            if len(held) >= want or not self.is_up():
                break
            fresh = [led for led in self.live if led not in held]
            target = fresh[ledger % len(fresh)] if fresh else self._new_ledger_id()
            self._add(target, b"m")
        if self.is_up():
            logs = model.logs
            active = logs.logs.get(logs.current) if logs.current is not None else None
            count = len(active.written) if active is not None else 0
            if count and count % MAP_BATCH in (0, 1, MAP_BATCH - 1):
                self.seen("a log sealed with its ledgers at a map batch boundary")
            self._run(Rotate())

    def _see_gc(self, op: Operation, step: Step) -> None:
        """Coverage of the GC steps (tests/refinement/test_coverage.py)."""
        phase = step.result.phase
        if phase is not None and phase.phase == "copy" and phase.new_log is not None:
            if phase.new_log >= 16:
                self.seen("a compaction log id >= 16")
            if phase.source_log is not None and phase.source_log >= 16:
                self.seen("a compaction of a log id >= 16")
        if phase is not None and phase.phase == "index":
            self.seen("a compaction finished")
        if step.result.gc is not None and step.result.gc.logs_deleted:
            self.seen("a GC deleted dead logs")
        if step.result.gc is not None and step.result.gc.logs_compacted:
            self.seen("a whole gc compacted logs")
        if step.faults and isinstance(op, GC_STEP_OPS):
            self.seen(f"a fault in {op.name}")

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
            if not self.is_up():
                return
            self._add(self._ledger(ledger + number % 3), data)
        if self.is_up():
            self._run(JournalForce())
        if self.is_up():
            self._run(Rotate())
        if self.is_up():
            self._run(Checkpoint())
        for number in range(deletes):
            if not self.is_up() or len(self.live) <= 1:
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
            self.seen(f"crash inside compaction {inside}")
        self._run(Crash(plan))
        self._run(Restart(), None)
        return True

    def _new_ledger_id(self) -> int:
        ledger = max([*self.next_entry, *LEDGERS]) + 1
        self.live.append(ledger)
        self.next_entry[ledger] = 0
        return ledger

    # --- requests -------------------------------------------------------------------

    def add(self, ledger: int, data: bytes, count: int, gap: int) -> None:
        target = self._ledger(ledger)
        for _ in range(count):
            self._add(target, data, gap)

    def healthy_stretch(self, ledger: int, data: bytes, count: int, read_back: bool) -> None:
        """Adds to a few ledgers, their group commit, and reads of them: the long healthy
        stretches between faults that real bookies see (a rule mix drawn uniformly spent
        a quarter of its steps crashing and restarting)."""
        for number in range(count):
            self._add(self._ledger(ledger + number % 3), data)
        self._run(JournalForce())
        if read_back and self.is_up():
            target = self._ledger(ledger)
            if self.next_entry.get(target, 0):
                self._run(Read(target, self.next_entry[target] - 1))

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
            self.seen("an add as large as the write buffer")
            self._add(self._ledger(ledger), b"w" * max(0, size))
            return
        logs = self.harness.model.logs
        active = logs.logs.get(logs.current) if logs.current is not None else None
        used = active.size_bytes() if active is not None else 1024
        room = int(self.settings["logSizeLimit"]) - used - RECORD_OVERHEAD_BYTES + delta
        if room >= 0:
            self.seen("an add at the rotation boundary")
            self._add(self._ledger(ledger), b"b" * min(room, 4096))

    def add_again(self, pick: int) -> None:
        """A client retrying an add: the same entry id, the same data."""
        (ledger, entry), data = sorted(self.sent.items())[pick % len(self.sent)]
        self.seen("an add sent again")
        self._run(Add(ledger, entry, key_of(ledger), data))

    def new_ledger(self, data: bytes) -> None:
        """A new ledger comes into use: its first add creates it."""
        self._add(self._new_ledger_id(), data)

    def add_then_crash(self, ledger: int, data: bytes, at: int, plan: CrashPlan) -> None:
        """An add the machine dies in when it touches the disk (a write-buffer flush, a
        rotation: an add that only fills the buffer issues no operation to die in)."""
        self._add(self._ledger(ledger), data, at=at)
        self._maybe_crashed(plan)

    def add_with_wrong_key(self, ledger: int) -> None:
        target = self._ledger(ledger)
        self._run(Add(target, self._next_id(target), b"wrong", b"intruder"))

    def read(self, ledger: int, back: int) -> None:
        target = self._ledger(ledger)
        self._run(Read(target, max(0, self.next_entry.get(target, 0) - 1 - back)))

    def fence(self, ledger: int, wrong: bool) -> None:
        target = self._ledger(ledger)
        self._run(Fence(target, b"wrong" if wrong else key_of(target)))

    def advance_clock(self, seconds: int, ledger: int, then: str, data: bytes) -> None:
        """ADVANCE_CLOCK_RULE: the clock moves on ``seconds``, then ``then``."""
        self._run(AdvanceClock(seconds))
        if then == "add" and self.is_up():
            self._add(self._ledger(ledger), data)
        elif then == "checkpoint" and self.is_up():
            self._run(Checkpoint())

    def write_close(self, ledger: int, wrong: bool, then: str, data: bytes) -> None:
        """WRITE_CLOSE_RULE: a write close of a live ledger (with its key, or a wrong one),
        then ``then``. Before a checkpoint the ledger first takes an add, so that its log
        is active when it is write-closed (with at most two active logs, a ledger's log is
        most often evicted already): the checkpoint must then seal it (R-WRITE-CLOSE)."""
        target = self._ledger(ledger)
        if then in ("checkpoint", "delete_and_gc") and target in self.live:
            self._add(target, data)
            if not self.is_up():
                return
        step = self._run(WriteClose(target, b"wrong" if wrong else key_of(target)))
        if not step.result.ok or not self.is_up():
            return
        if then == "add":
            self._add(target, data)
        elif then in ("checkpoint", "delete_and_gc"):
            self._run(Checkpoint())
            if then == "delete_and_gc" and self.is_up():
                # (Workload's own method: in the Hypothesis machine ``self.delete`` is the
                # rule, which takes only drawn keyword arguments.)
                Workload.delete(self, ledger, None, LoseUnsynced())
                if self.is_up():
                    self._run(Gc(False))

    def delete(self, ledger: int, at: int | None, plan: CrashPlan) -> None:
        """Deletes take the ledger out of use (the machine never adds to it again: ids
        are not reused; bkref refuses an add to a deleted ledger)."""
        target = self._ledger(ledger)
        if target in self.live:
            self.live.remove(target)
        self.sent = {key: data for key, data in self.sent.items() if key[0] != target}
        step = self._run(Delete(target), at)
        self._maybe_crashed(plan)
        if step.result.ok and self.is_up():
            # Read it at once, with no crash between: a delete the bookie acknowledged must
            # already hide the ledger (the promise "resurrection" after no crash, which the
            # reads of live ledgers never observe).
            self._run(Read(target, 0))

    def checkpoint(self, at: int | None, plan: CrashPlan) -> None:
        self._run(Checkpoint(), at)
        self._maybe_crashed(plan)

    def checkpoint_then_crash(self, plan: CrashPlan, restart_crash: int | None) -> None:
        """A whole checkpoint, then a crash: everything it claimed durable (the rotated
        logs, the index, lastMark) must survive any crash plan. Without this rule the
        crash has to come from a later step of the same run."""
        self._run(Checkpoint())
        if self.is_up():
            self.seen("crash right after a checkpoint")
            self._crash_and_restart(plan, restart_crash)

    # --- background steps -----------------------------------------------------------

    def journal_force(self, at: int | None, plan: CrashPlan) -> None:
        self._run(JournalForce(), at)
        self._maybe_crashed(plan)

    def rotate(self, at: int | None, plan: CrashPlan) -> None:
        self._run(Rotate(), at)
        self._maybe_crashed(plan)

    def preallocate(self) -> None:
        """The maintenance thread creates the next entry log ahead of need."""
        self._run(Preallocate())

    def check_dirs(self) -> None:
        """The disk check runs (it also runs whenever a directory fills or gets room)."""
        self._run(CheckDirs())

    # --- garbage collection and compaction -------------------------------------------
    # GC steps as a bookie's GC thread runs them, with requests between the phases (the
    # locks are free between them, on purpose), crashes at a drawn file-system operation
    # inside each, and faults aimed at a compaction's files. Deletes and rotations are
    # frequent enough (the composite rules below make logs dead or compactable first)
    # that most GC cycles delete or compact something.

    def gc(self, force: bool, at: int | None, plan: CrashPlan) -> None:
        """A whole GC cycle (the adapter's gc), maybe cut by a crash."""
        self._gc_step(Gc(force), at, plan, inside="gc")

    def gc_begin(self, force: bool, at: int | None, plan: CrashPlan) -> None:
        self._gc_step(GcBegin(force), at, plan)

    def compact_copy(self, at: int | None, plan: CrashPlan) -> None:
        self._gc_step(CompactCopy(), at, plan)

    def compact_flush(self, at: int | None, plan: CrashPlan) -> None:
        self._gc_step(CompactFlush(), at, plan)

    def compact_index(self, at: int | None, plan: CrashPlan) -> None:
        self._gc_step(CompactIndex(), at, plan)

    def rotate_many(self, count: int, data: bytes, ledger: int) -> None:
        """Rotations with an add or none between them: entry log ids climb past 16 in
        some runs (BookKeeper #4804, a recovered log named in decimal, shows only for
        ids >= 10), and the sealed logs, once checkpointed, are GC candidates."""
        for number in range(count):
            if not self.is_up():
                return
            if number % 2:
                self._add(self._ledger(ledger + number), data)
            if self.is_up():
                self._run(Rotate())

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
        if not self.is_up():
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
                if not self.is_up():
                    return
                died = self._gc_step(op, at if crash_in == phase else None, plan, inside=phase)
                if died:
                    return
                if phase == "copy" and self._compaction_in_flight() is None:
                    return  # idle, or nothing live: the cycle is over (or moved on)
                if todo and self.is_up():
                    self._between(todo.pop(0), ledger, data, phase)
            if crash_in == "recovery" and self.is_up():
                self.seen("crash inside recovery after a compaction")
                self._crash_and_restart(plan, at)
                return

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
        if not self.is_up() or self._gc_step(GcBegin(True), begin_at, plan, inside="gc_begin"):
            return
        for name, op in (
            ("copy", CompactCopy()),
            ("flush", CompactFlush()),
            ("index", CompactIndex()),
        ):
            if not self.is_up():
                return
            in_flight = self._compaction_in_flight()
            self._add(self._ledger(ledger), data)
            if in_flight is not None and self.is_up():
                self.seen(f"an add between compaction phases ({in_flight})")
            if in_flight == "copied" and delete_between and self.is_up():
                # A ledger the copy found live is deleted before the index phase.
                self._between("delete", ledger, data, name)
            if not self.is_up():
                return
            if self._gc_step(op, at if name == phase else None, plan, inside=name):
                return
            if self._compaction_in_flight() is None and name != "index":
                return  # nothing live, or idle: no compaction to step

    def crash_inside_recovery_of_a_compaction(
        self, ledger: int, data: bytes, flushed: bool, plan: CrashPlan, at: int
    ) -> None:
        """A compaction copied (and maybe flushed: its .compacted durable), then a power
        cut, and a recovery that dies at a drawn file-system operation while it removes
        the .compacting or finishes the .compacted, then a recovery again: recovery must
        cope with its own half-done work (every step idempotent)."""
        self._make_logs_compactable(ledger, data, 1)
        if not self.is_up() or self._gc_step(GcBegin(True), None, plan):
            return
        if self._gc_step(CompactCopy(), None, plan) or self._compaction_in_flight() is None:
            return
        if flushed and self._gc_step(CompactFlush(), None, plan):
            return
        self.seen("crash inside recovery after a compaction")
        self._crash_and_restart(plan, at)

    def _between(self, what: str, ledger: int, data: bytes, phase: str) -> None:
        """One request between two compaction phases."""
        in_flight = self._compaction_in_flight()
        if in_flight is not None:
            self.seen(f"a {what} while a compaction is {in_flight}")
        if what == "add":
            self._add(self._ledger(ledger), data)
        elif what == "delete" and len(self.live) > 1:
            target = self._ledger(ledger + 1)
            self.live.remove(target)
            self.sent = {key: d for key, d in self.sent.items() if key[0] != target}
            if in_flight == "copied":
                self.seen("a delete between copy and index")
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
            if not self.is_up():
                return
            self._gc_step(GcBegin(True), None, plan)
            if not self.is_up():
                return
            if phase in ("flush", "index"):
                self._gc_step(CompactCopy(), None, plan)
                if not self.is_up() or self._compaction_in_flight() is None:
                    continue
            if phase == "index":
                self._gc_step(CompactFlush(), None, plan)
                if not self.is_up() or self._compaction_in_flight() != "flushed":
                    continue
            self._run(fault)
            phases_ops: dict[str, Operation] = {"copy": CompactCopy(), "flush": CompactFlush()}
            op = phases_ops.get(phase, CompactIndex())
            step = self._run(op)
            self._see_gc(op, step)
            if step.result.error is not None:
                self.seen(f"compaction {phase} failed")
            if isinstance(fault, DiskFull) and self.is_up():
                self._run(DiskWritable())
            if phase == "index" and step.result.error is not None and self.is_up():
                self._crash_and_restart(plan, None)  # the bookie failed: restart it
        if self.is_up():
            self._run(Read(self._ledger(ledger), 0))
        if crash and self.is_up():
            self._crash_and_restart(plan, None)

    # --- the phases of the group commit and the checkpoint ----------------------------
    # A bookie's request threads add, fence, read and delete while its journal thread
    # writes and fsyncs a group and while its maintenance thread checkpoints (the locks
    # are free then, on purpose). Each phase is a step of its own, so Hypothesis
    # interleaves every other rule between them and a race shrinks like any failure.

    def journal_write(self) -> None:
        self._run(JournalWrite())

    def journal_sync(self) -> None:
        self._run(JournalSync())

    def journal_ack(self) -> None:
        self._run(JournalAck())

    def checkpoint_flush(self) -> None:
        self._run(CheckpointFlush())

    def checkpoint_persist(self) -> None:
        self._run(CheckpointPersist())

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
            self.seen("crash inside a group commit's fsync, adds appended during it")
            self._maybe_crashed(plan)
            return
        for number in range(during):
            self._add(self._ledger(ledger + number % 2), data)
        self._run(JournalAck())
        if crash_after and self.is_up():
            self.seen("crash after a group commit with adds between its phases")
            self._crash_and_restart(plan, None)

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
        if force and self.is_up():
            self._run(JournalForce())
        if rotate and self.is_up():
            self._run(Rotate())
        if not self.is_up():
            return
        self._run(CheckpointPersist(), at)
        if self.harness.model.interrupted is not None:
            self.seen("crash inside a checkpoint's persist, adds made durable after its flush")
            self._maybe_crashed(plan)
        elif crash_after and self.is_up():
            self.seen("crash after a checkpoint with adds between its phases")
            self._crash_and_restart(plan, None)

    # --- the environment ------------------------------------------------------------

    def crash(self, plan: CrashPlan, restart_crash: int | None) -> None:
        self._crash_and_restart(plan, restart_crash)

    def process_killed_then_power_cut(self, plan: CrashPlan) -> None:
        """The process is killed (the machine keeps its page cache), restarts, and then
        the power goes: whatever the restarted bookie relied on from the dead process's
        unsynced writes (an entry that read back, so replay skipped its record) must
        have been made durable by its recovery."""
        self.seen("a power cut after a process kill and a restart")
        self._run(Crash(KillProcess()))
        self._run(Restart())
        if self.is_up():
            self._run(Crash(plan))
            self._run(Restart())

    def shutdown_and_restart(self, at: int | None, plan: CrashPlan, power_cut: bool) -> None:
        """A shutdown (maybe cut by a crash), maybe a power cut right after it (everything
        a clean shutdown did must be on the disk already), and a restart."""
        self._run(Shutdown(), at)
        if self.harness.model.interrupted is not None or power_cut:
            if power_cut and self.harness.model.interrupted is None:
                self.seen("a power cut right after a shutdown")
            self._run(Crash(plan))
        self._run(Restart())

    def disk_full(self, where: str, ledger: int, data: bytes) -> None:
        """A place runs out of space: every ledger directory, the one holding the active
        entry log (the bookie must carry on in the other), or the journal directory; and
        the clients' next add meets it (with the GC rules the machine drew too few adds
        right after the active log's directory filled for BookKeeper #3329 to show)."""
        target = self._ledger(ledger)
        if where == "active_log_dir" and many_active_logs(self.settings):
            # With many active logs only the ledgers of the log in that directory meet it:
            # an add first makes the ledger's log active and current (its directory is
            # the one that fills), the add after must move it to the other.
            self._add(target, data)
            if not self.is_up():
                return
        self._run(DiskFull(where))
        if self.is_up():
            self._add(target, data)

    def disk_writable(self) -> None:
        self._run(DiskWritable())

    def inject_fault(self, fault: FailFsync | FailWrite | FailRead, ledger: int, back: int) -> None:
        """Arm a failed fsync, write or read aimed at one kind of file (one rule for all,
        so that faults do not crowd out the healthy stretches); a read fault is followed
        by a read that may meet it, of one of the ledger's first entries (the newest are
        in the write buffer, and a read of them meets no file): the bookie may answer
        io_error for that read only, and nothing durable may change."""
        self._run(fault)
        if isinstance(fault, FailRead) and self.is_up():
            target = self._ledger(ledger)
            self._run(Read(target, min(back, max(0, self.next_entry.get(target, 0) - 1))))

    def fsync_failure_in_checkpoint(self, plan: CrashPlan, retry: bool) -> None:
        """fsyncgate: a checkpoint whose fsync fails (its unsynced bytes are gone), maybe
        a second checkpoint, then a crash. Nothing acknowledged may be lost, and no
        checkpoint may claim durable what the failed fsync dropped."""
        self._run(FailFsync())
        self._run(Checkpoint())
        if retry and self.is_up():
            self._run(Checkpoint())
        if self.is_up():
            self.seen("crash after a failed fsync in a checkpoint")
            self._crash_and_restart(plan, None)

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
        steps: dict[str, Callable[[], Operation]] = {
            "checkpoint": Checkpoint,
            "checkpoint_flush": CheckpointFlush,
        }
        background = steps.get(step, Preallocate)
        answered = self._run(background()).result.error
        if not self.is_up():
            return
        if answered == "no_space":
            self.seen(f"{step} found no room")
        self._run(Read(target, max(0, self.next_entry.get(target, 1) - 1)))
        self._add(target, data)
        self._run(DiskWritable())
        self._run(background())
        if self.is_up():
            self._add(target, data)
            if answered == "no_space":
                self.seen(f"service resumed after {step} found no room")
        if crash and self.is_up():
            self._crash_and_restart(plan, None)


#: Preconditions, by name: the bookie is up; and there is an add to send again; and no
#: directory is full; and one is.
WHEN: Mapping[str, Callable[[Workload], bool]] = {
    "up": lambda w: w.is_up(),
    "up_with_sent": lambda w: w.is_up() and bool(w.sent),
    "up_not_full": lambda w: w.is_up() and not w.harness.model.disk_full,
    "up_full": lambda w: w.is_up() and bool(w.harness.model.disk_full),
}


#: The GC steps (for coverage).
GC_STEP_OPS = (Gc, GcBegin, CompactCopy, CompactFlush, CompactIndex)


#: The rules that run each operation (a crash and a restart also follow every rule with a
#: crash point when the step died; the harness adds reads after every restart). A newly
#: declared operation that no rule draws fails the import of this module, naming it;
#: tests/unit/proofs/harness/test_registry_tables.py checks the claims (each rule named runs
#: that operation) and that every rule is named.
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
        WriteClose: ("write_close",),
        AdvanceClock: ("advance_clock",),
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
            "crash_inside_a_compaction_phase",
        ),
        CompactIndex: (
            "compact_index",
            "compaction_with_requests_between_its_phases",
            "fault_in_a_compaction",
            "crash_inside_a_compaction_phase",
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
    "the refinement workload (proofs/harness/workload.py PRODUCERS)",
)
