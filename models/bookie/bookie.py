"""The bookie model: what a bookie may answer at each step, and what a crash may leave.

Spec pages: spec/operations.py (the steps), spec/state.py (the abstract state compared after
every step), spec/adapter.md (the answers), docs/design.md "Data flow", spec/properties.md.

The model is built from three sub-models, each named after the implementation's module for
the same concept: models/index/ledger_index.py (keys, fences, entries, deletions),
models/entrylog/manager.py (entry logs, rotation, leastUnflushedLogId) and
models/journal/last_mark.py (the journal's durable mark and lastMark). Its state splits into
what is *persistent* (facts marked durable: they must survive any crash) and what is
*volatile* (pending facts, the active log's unflushed bytes, the queued journal records).

The request handlers carry the Bookie's method names, in the Bookie's order (``_add_entry``,
``_fence``, ``_read_entry``, ``_delete_ledger``, ``_checkpoint``), so the two read side by
side. Which handler takes which operation, and what else the model must know of it (whether
it forces the journal, what it may have done when a crash cut it short), is one table,
:data:`STEP_RULES`, checked against the operation registry (spec/operations.py) at import.

How it is used (proofs/harness/judge.py, for the live harness and the trace replay alike):
after the implementation ran a step, :meth:`step` gets the step and what the implementation
answered; if that answer is not one the model allows, it raises :class:`Divergence`. Then
:meth:`compare` gets the implementation's abstract state and checks it. Where the model
allows more than one outcome (an unacknowledged add may or may not survive a crash; a failed
disk may or may not have kept a write), the observation decides, and the model holds the
implementation to that choice from then on: nondeterminism is resolved by observation.

How strictly a history is judged is its profile (spec/profile.py, chosen in a trace's header;
docs/model.md "Profiles"): whether acks follow bkref's in-process schedule or arrive
asynchronously (an add answered ok at once, acks in any groups at any step), how much of the
abstract state is judged, and which answer is allowed where BookKeeper and bkref differ.

Choices a correct bookie may make differently, and so the model allows both: under
asynchronous acks a read may or may not see an add that is not yet acknowledged (in process,
bkref indexes an add before it answers, so a read must see it); while a fault is active (a
failed write or fsync, a full journal, until the next restart) any step may fail with
io_error; while the ledger directories have no room, a step that writes may answer no_space
(never io_error: a full disk is no failure, and once room is back every step must succeed
again, issue 10). What a read showed holds for the rest of the run. An unforced GC cycle may
choose any compaction kind the configuration can make due (its clock is not modelled); the
candidates are then checked exactly for the kind it reports. After a crash an interrupted
compaction may be finished or undone where the crash left both possible (CompactionOutcome).

Garbage collection and compaction (``_gc_begin``, ``_gc_whole``, ``_compact_copy``,
``_compact_flush``, ``_compact_index``) are computed from the model's own logs
(models/entrylog/manager.py): the dead logs, the candidates and their order, each new log's
id and bytes; docs/model.md, "Garbage collection and compaction".

Not modelled: explicit LAC, several journal directories, the bytes a GC cycle reports as
reclaimed; preallocated logs are only checked to be empty and new. The managers with many
active logs (a log per ledger, slots) are judged by the layout rules only
(models/entrylog/layout.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from models.entrylog.layout import (
    MANAGERS,
    Between,
    Layout,
    LayoutProblem,
    ManagerRules,
    RunHistory,
    check_active,
    check_ids,
    judge,
)
from models.entrylog.manager import (
    NO_MAP,
    RECORD_OVERHEAD_BYTES,
    CompactionOutcome,
    EntryLogManagerModel,
    LogConstraints,
    MapState,
    describe_map,
    record_bytes,
)
from models.index.ledger_index import BeyondModel, Dur, LedgerIndexModel, Sure
from models.journal.last_mark import LastMarkModel
from spec.crash import KeepAll, KillProcess
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
    FiredFault,
    Gc,
    GcBegin,
    GcReport,
    JournalAck,
    JournalForce,
    JournalSync,
    JournalWrite,
    Operation,
    PhaseReport,
    Preallocate,
    Read,
    Restart,
    Result,
    Rotate,
    Shutdown,
    WriteClose,
    acknowledgements,
    require_complete,
)
from spec.profile import DEFAULT_PROFILE, Profile
from spec.state import AbstractState, LogView, Mark

#: BookKeeper's default logSizeLimit (1 GiB).
DEFAULT_LOG_SIZE_LIMIT_BYTES = 1024 * 1024 * 1024
#: BookKeeper's default nettyMaxFrameSizeBytes (5 MiB).
DEFAULT_NETTY_MAX_FRAME_BYTES = 5 * 1024 * 1024
#: What a frame holds besides the entry (BookKeeper's maxSaneEntrySize is the frame size minus
#: this), and the entry's own ledger and entry ids: the data may be the rest.
FRAME_OVERHEAD_BYTES = 500
ENTRY_IDS_BYTES = 16


class Divergence(Exception):
    """The implementation did something the model does not allow: ``rule`` is the rule of
    spec/adapter.md ("Rules the model enforces") that decides it (empty only for the
    in-process harness's own disk check, which judges files, not answers)."""

    def __init__(self, step: int, message: str, *, rule: str = "") -> None:
        tag = f" [{rule}]" if rule else ""
        super().__init__(f"step {step}: {message}{tag}")
        self.step = step
        self.message = message
        self.rule = rule


class ModelUsageError(Exception):
    """A scenario the model cannot run (a request while the bookie is down, ...): a bug of
    the scenario, not of the implementation."""


@attrs.frozen
class ModelConfig:
    """The configuration the model needs (BookKeeper key in brackets)."""

    log_size_limit_bytes: int = DEFAULT_LOG_SIZE_LIMIT_BYTES  # logSizeLimit
    #: The largest entry data an add may carry (nettyMaxFrameSizeBytes - 500 - 16): a larger
    #: one is refused with bad_request, nothing written (spec/adapter.md, "Limits").
    max_data_bytes: int = DEFAULT_NETTY_MAX_FRAME_BYTES - FRAME_OVERHEAD_BYTES - ENTRY_IDS_BYTES
    #: How the trace is judged (spec/profile.py; docs/model.md, "Profiles").
    profile: Profile = DEFAULT_PROFILE
    #: The compaction settings (GarbageCollectorThread's): thresholds and intervals (seconds)
    #: of minor and major compaction, forceAllowCompaction, isForceGCAllowWhenNoSpace.
    minor_threshold: float = 0.2  # minorCompactionThreshold
    minor_interval_s: int = 3600  # minorCompactionInterval
    major_threshold: float = 0.8  # majorCompactionThreshold
    major_interval_s: int = 86400  # majorCompactionInterval
    force_allow_compaction: bool = False  # forceAllowCompaction
    force_gc_when_no_space: bool = False  # isForceGCAllowWhenNoSpace
    #: The entry-log manager (entryLogPerLedgerEnabled, bkref's entryLogSlotsPerLedgerDir):
    #: ``single``, ``per_ledger`` or ``slots`` (models/entrylog/layout.py ManagerRules).
    manager: str = attrs.field(default="single", validator=attrs.validators.in_(MANAGERS))
    #: ``slots``: ledger directories x entryLogSlotsPerLedgerDir (0: not known).
    slots_active_max: int = 0
    #: A compaction kind has a time limit (minor/majorCompactionMaxTimeMillis above 0): a
    #: GC cycle then depends on the clock, which the model does not time.
    compaction_timed: bool = False

    @classmethod
    def from_settings(
        cls, settings: Mapping[str, str], profile: Profile = DEFAULT_PROFILE
    ) -> ModelConfig:
        """From BookKeeper-named settings (a trace header's ``config``) and a profile."""
        limit = _int_setting(settings, "logSizeLimit", DEFAULT_LOG_SIZE_LIMIT_BYTES)
        frame = _int_setting(settings, "nettyMaxFrameSizeBytes", DEFAULT_NETTY_MAX_FRAME_BYTES)
        overhead = FRAME_OVERHEAD_BYTES + ENTRY_IDS_BYTES
        slots = _int_setting(settings, "entryLogSlotsPerLedgerDir", 0)
        if frame <= overhead:
            raise ModelUsageError(f"nettyMaxFrameSizeBytes must be above {overhead}, got {frame}")
        return cls(
            log_size_limit_bytes=limit,
            max_data_bytes=frame - overhead,
            profile=profile,
            minor_threshold=_float_setting(settings, "minorCompactionThreshold", 0.2),
            minor_interval_s=_int_setting(settings, "minorCompactionInterval", 3600),
            major_threshold=_float_setting(settings, "majorCompactionThreshold", 0.8),
            major_interval_s=_int_setting(settings, "majorCompactionInterval", 86400),
            force_allow_compaction=_bool_setting(settings, "forceAllowCompaction", False),
            force_gc_when_no_space=_bool_setting(settings, "isForceGCAllowWhenNoSpace", False),
            manager=(
                "per_ledger"
                if _bool_setting(settings, "entryLogPerLedgerEnabled", False)
                else "slots"
                if slots > 0
                else "single"
            ),
            slots_active_max=slots * len(settings.get("ledgerDirectories", "").split(","))
            if "ledgerDirectories" in settings
            else 0,
            compaction_timed=any(
                _int_setting(settings, f"{kind}CompactionMaxTimeMillis", -1) > 0
                for kind in ("minor", "major")
            ),
        )

    def threshold(self, kind: str) -> float:
        """The usage below which a log is compacted by a ``kind`` compaction (0: none)."""
        return {"major": self.major_threshold, "minor": self.minor_threshold}.get(kind, 0.0)

    def compaction_kinds(self, *, force: bool, pressure: bool) -> frozenset[str]:
        """The compaction kinds a GC cycle may choose (BookKeeper's runWithFlags): exactly one
        for a forced cycle with no disk pressure, whatever the clock says; for an unforced
        one, each kind the intervals could make due (time is not modelled); under disk
        pressure (a full or almost full ledger directory: suspensions, or a GC forced by
        isForceGCAllowWhenNoSpace) every kind those flags could give."""
        enable_major = self.major_interval_s > 0 and self.major_threshold > 0
        enable_minor = self.minor_interval_s > 0 and self.minor_threshold > 0
        allow_major = self.force_allow_compaction and 0 < self.major_threshold < 1
        allow_minor = self.force_allow_compaction and 0 < self.minor_threshold < 1
        kinds: set[str] = set()
        forces = (force, True) if pressure and self.force_gc_when_no_space else (force,)
        flags = (False, True)
        for forced in forces:
            for major_due in flags if not forced else (False,):
                for minor_due in flags if not forced else (False,):
                    for suspend_major in flags if pressure else (False,):
                        for suspend_minor in flags if pressure else (False,):
                            major = (allow_major and forced) or (
                                enable_major and (forced or major_due)
                            )
                            minor = (allow_minor and forced) or (
                                enable_minor and (forced or minor_due)
                            )
                            if major and not suspend_major:
                                kinds.add("major")
                            elif minor and not suspend_minor:
                                kinds.add("minor")
                            else:
                                kinds.add("none")
        return frozenset(kinds)


def _float_setting(settings: Mapping[str, str], key: str, default: float) -> float:
    raw = settings.get(key)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ModelUsageError(f"{key} must be a number, got {raw!r}") from None


def _bool_setting(settings: Mapping[str, str], key: str, default: bool) -> bool:
    raw = settings.get(key)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise ModelUsageError(f"{key} must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"


def _int_setting(settings: Mapping[str, str], key: str, default: int) -> int:
    raw = settings.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ModelUsageError(f"{key} must be an integer, got {raw!r}") from None


@attrs.frozen
class CrashOutcomes:
    """The acceptable observations after a crash, as constraints on the recovered bookie:
    entries that must read back (acknowledged) and that may (pending at the crash), likewise
    fences, ledgers (keys) and deletions; the entry logs (LogConstraints); and lastMark no
    less than ``min_last_mark``."""

    must_entries: tuple[tuple[int, int, bytes], ...]
    may_entries: tuple[tuple[int, int, bytes], ...]
    must_fenced: frozenset[int]
    may_fenced: frozenset[int]
    must_ledgers: frozenset[int]
    may_ledgers: frozenset[int]
    must_deleted: frozenset[int]
    may_deleted: frozenset[int]
    logs: LogConstraints
    min_last_mark: Mark | None

    def describe(self, *, internals: bool = True) -> list[str]:
        """The outcomes in words (``internals``: also what they mean for lastMark, for a
        bookie that claims its state; else only what a client can see)."""

        def ids(pairs: Sequence[tuple[int, int, bytes]]) -> str:
            return ", ".join(f"{led}:{ent}" for led, ent, _ in pairs) or "none"

        lines = [
            f"must survive (acknowledged): entries {ids(self.must_entries)}",
            f"may or may not survive (not acknowledged): entries {ids(self.may_entries)}",
        ]
        if self.must_fenced or self.may_fenced:
            lines.append(
                f"fences that must survive: {_ids(self.must_fenced)}; "
                f"that may: {_ids(self.may_fenced)}"
            )
        if self.may_ledgers:
            lines.append(
                f"ledgers that may vanish with their first, unacknowledged add: "
                f"{_ids(self.may_ledgers)}"
            )
        for compaction in self.logs.compactions:
            lines.append(compaction.describe())
        if self.min_last_mark is not None and internals:
            lines.append(f"recovery must leave lastMark at or after {self.min_last_mark}")
        return lines

    def problem(self, state: AbstractState, recreated: set[int]) -> str | None:
        """Why the first state after the restart breaks these outcomes, or None: checked on
        their own, before the model resolves its open facts against the same state (a second
        statement of the rules, so that the outcomes a crash explains are the ones judged).
        ``recreated``: ledgers not judged here: deleted ledgers an add or fence created again
        (either way is fine), and ledgers a request named since the restart (the state
        shows what that request did, which the ledger sub-model judges).
        The entry logs are checked against ``logs`` by the model's layout check, and lastMark
        against ``min_last_mark`` by the marks' own model (models/journal/last_mark.py), which
        knows when a fault makes that bound unsure."""
        ledgers = {view.ledger_id: view for view in state.ledgers}
        deleted = set(state.deleted_ledgers)
        gone = self.may_deleted | self.must_deleted | recreated
        for ledger in sorted(self.must_ledgers - ledgers.keys() - gone):
            return f"ledger {ledger}, whose key was durable, is missing"
        for ledger in sorted(self.must_deleted - deleted - recreated):
            return f"ledger {ledger}, durably deleted, is not deleted"
        for ledger in sorted((self.must_fenced & ledgers.keys()) - recreated):
            if not ledgers[ledger].fenced:
                return f"ledger {ledger}, durably fenced, is not fenced"
        extra = ledgers.keys() - self.must_ledgers - self.may_ledgers - recreated
        if extra:
            return f"ledgers {sorted(extra)} exist; no add or fence before the crash made them"
        extra = deleted - self.must_deleted - self.may_deleted - recreated
        if extra:
            return f"ledgers {sorted(extra)} are deleted; no delete before the crash named them"
        for ledger, entry, _ in self.must_entries:
            view = ledgers.get(ledger)
            if ledger in recreated:
                continue
            if view is not None and (view.last_entry is None or view.last_entry < entry):
                return (
                    f"ledger {ledger}'s last entry is {view.last_entry}; entry {entry} was "
                    "acknowledged, or shown after an earlier crash (R-RECOVERY-SHOWN)"
                )
        return None


@attrs.frozen
class _Pending:
    """An add or fence in flight: answered ``pending`` (or ``ok`` at once, acknowledged in
    the same step). ``op`` is the request; ``applied``: its effects on the journal and the
    entry logs are in the model (at once when every head admitted it, else once its answer
    says it was: models/index/ledger_index.py keeps what it did to the ledger)."""

    kind: str  # "add" or "fence"
    ledger: int
    entry: int
    op: Add | Fence
    applied: bool


@attrs.define
class _Compaction:
    """The compaction in flight: its source, its new log's id, the bytes per ledger it
    copied (the source's live ledgers at copy time) and how far it got (``copied``: phase 1
    returned; ``flushed``: phase 2 returned, from here recovery finishes it)."""

    source: int
    new_id: int
    moved: dict[int, int]
    entries: int
    phase: str = "copied"
    #: The source's map claimed records a crash may have lost: the live bytes it surely
    #: held, the least the copy holds (``moved`` is the most). None: it holds ``moved``.
    low: dict[int, int] | None = None
    #: With ``low``: the most bytes of garbage records (of other ledgers) it may also hold.
    slack: int = 0


@attrs.define
class _GcCycle:
    """A GC cycle begun by gc_begin: the compaction kind it chose, the candidates still to
    compact (in order) and the compaction in flight."""

    kind: str
    candidates: list[int]
    current: _Compaction | None = None


#: The GC steps: faults aimed at a compaction's own files, or any read fault, that fire in
#: one of them only excuse that step's answer (the compaction aborts, nothing else changes).
GC_STEPS = (Gc, GcBegin, CompactCopy, CompactFlush, CompactIndex)


class BookieModel:
    """See the module docstring."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.profile = config.profile
        #: Acks may arrive at any step, in any groups, or in an add's own answer.
        self.async_acks = config.profile.acks == "async"
        self.ledgers = LedgerIndexModel(config.profile.answers, async_acks=self.async_acks)
        #: The step of each ledger's last delete answered ok (which rule a late ok breaks).
        self.deleted_at: dict[int, int] = {}
        #: Notes speak of bkref's internals (the journal, entry logs, lastMark) only for a
        #: bookie that claims them (state full); else in the spec's terms (spec/adapter.md).
        self.internals = config.profile.state == "full"
        self.logs = EntryLogManagerModel(config.log_size_limit_bytes)
        self.logs.track_tentative = self.async_acks
        # A bookie on its own threads creates the next log ahead of need when it pleases
        # (BookKeeper's EntryLoggerAllocator): no preallocate step is ever recorded, so the
        # next id may always be a preallocated log's (and a compaction takes the one after).
        self.logs.preallocates_unseen = self.logs.preallocated = self.async_acks
        self.marks = LastMarkModel()
        self.pending: dict[int, _Pending] = {}
        #: Of the pending steps: those in the group a group commit's write phase took (its
        #: sync phase makes them durable), and those synced and not yet acknowledged (the
        #: ack phase acknowledges exactly them). The rest are queued for the next group.
        self.written: set[int] = set()
        self.synced: set[int] = set()
        #: A checkpoint's first phase ran and its second has not (nor a whole checkpoint).
        self.checkpoint_open = False
        #: "up", "crashed" (or died mid-step), "stopped" (a shutdown, clean or not: a crash may
        #: still follow it, a power cut after the process ended).
        self.status = "up"
        #: A fault that can break writes fired in this run (a failed write or fsync, a journal
        #: write that found no space): from that step on the bookie may fail, and what it
        #: predicts of lastMark is bounded rather than exact.
        self.faulted = False
        #: A write outside the journal found no space in this run (issue 10): the step it
        #: met answers no_space and applied nothing it cannot apply again, so the bookie does
        #: not fail for it (no io_error); but how far a background step got before it (a
        #: checkpoint's flush, one ledger directory's lastMark) is unknown, so lastMark and
        #: the layout are bounded rather than exact, as after a fault.
        self.short_of_space = False
        #: Since such a write, no room has come back (disk_writable): no_space is an answer
        #: of any step that writes. Once room is back the bookie serves again by itself:
        #: no_space is no answer any more.
        self.no_room = False
        #: A read failed with EIO in the current step (a fired read fault: only reads of
        #: this step may answer io_error because of it).
        self.read_fault = False
        #: Where the last disk_full took the space (DiskFull.where), until disk_writable or a
        #: restart; None while there is room.
        self.disk_full: str | None = None
        #: The step that a crash interrupted, until the crash step itself, and its index.
        self.interrupted: Operation | None = None
        self.interrupted_index = -1
        self.outcomes: CrashOutcomes | None = None
        #: Ledgers a request named since the last restart (CrashOutcomes.problem leaves them
        #: to the ledger sub-model).
        self.named_since_restart: set[int] = set()
        #: The next compare is the first after a restart. The first run starts on empty
        #: directories, which the model predicts exactly (no entry log yet, next id 0).
        self.fresh_run = False
        #: Since the last compared state: whether a step forced queued journal records, and
        #: whether a step persisted lastMark (a checkpoint, a restart). A trace may carry a
        #: state only now and then: the marks are judged over the steps since the last one.
        self._forced = False
        self._persisted = False
        #: The GC cycle begun (gc_begin) and not over, with its compaction in flight.
        self.gc: _GcCycle | None = None
        #: The error codes a fault that fired in the current GC step allows it (empty: none
        #: fired): io_error for a failed read, write or fsync, no_space for a full disk.
        self.gc_fault: set[str] = set()
        #: What a crash may have left of the GC: logs it may have deleted, and compactions
        #: cut short (filled by the interrupted rules and taken by crash_outcomes).
        self.gc_vanish: set[int] = set()
        self.gc_compactions: list[CompactionOutcome] = []
        #: Compactions a whole gc step finished whose new logs' ids the model could not
        #: know (a preallocated log may hold the next id): (source, bytes moved), in order;
        #: the next compared state shows them.
        self.unplaced: list[tuple[int, dict[int, int]]] = []
        #: Logs showing no record that a GC step may or may not have deleted: the next
        #: compared state shows which (see _gc_begin_checks).
        self.maybe_dead: set[int] = set()
        self.manager = ManagerRules(
            config.manager, config.log_size_limit_bytes, config.slots_active_max
        )
        self.logs.per_ledger = config.manager != "single"  # many active logs
        self.logs.shared_logs = config.manager == "slots"
        #: The layout the last compared state showed, and what happened since. The first run
        #: starts on empty directories.
        self.last_layout = Layout.of((), {}, 0, None)
        self.between = Between(unsure=self.async_acks)
        self.run = RunHistory()
        #: The ledgers surely write-closed (or fenced) since the last checkpoint: the next
        #: one seals their logs (R-WRITE-CLOSE). Memory only: a crash forgets them.
        self.write_closed: set[int] = set()
        #: A GC step ran since the last compared state (its layout is computed, not judged
        #: by rules: the GC's decisions follow from the layout before it).
        self.gc_since = False
        #: A directory filled up under the active log, and no state has shown it rotated.
        self.rotation_owed = False

    @property
    def up(self) -> bool:
        return self.status == "up"

    # --- one step -------------------------------------------------------------------------

    def step(
        self,
        index: int,
        op: Operation,
        result: Result,
        completed: Sequence[Completion],
        faults: Sequence[FiredFault] = (),
    ) -> list[str]:
        """Check and apply one step the implementation ran; return what it means, in words.
        ``faults``: the injected faults that fired while it ran. Raises Divergence when the
        answer (or a completion) is not allowed."""
        rule = STEP_RULES[type(op)]
        if isinstance(op, Add | Fence | Delete | Read):
            self.named_since_restart.add(op.ledger)
        fired = self._fired(faults, reading=isinstance(op, Read), gc=isinstance(op, GC_STEPS))
        if isinstance(op, GC_STEPS):
            self.gc_since = True
        notes = self._step(index, op, result, completed, rule)
        if self.async_acks and not rule.lifecycle and not result.pending and not result.crashed:
            # Answered: the bookie ran this request, and every one before it.
            self.logs.settle()
        if result.error is not None and rule.writes_logs and (self.faulted or self.short_of_space):
            # A step that writes entry logs failed under a fault: how much of it reached the
            # logs is the bookie's business. The layout is followed from here on.
            self.logs.relaxed = True
        return fired + notes

    def _fired(self, faults: Sequence[FiredFault], *, reading: bool, gc: bool = False) -> list[str]:
        """Faults that fired in this step: the model relaxes from here, for what they touched
        (a read fault that met a client's read excuses that read only; any other fault, a
        read fault in a write path too, may fail the bookie's writes until the next restart;
        a fault in an entry log, a directory or an unknown file also makes the entry-log
        layout unpredictable)."""
        self.read_fault = False
        self.gc_fault = set()
        notes = []
        for fault in faults:
            notes.append(f"fault: {fault.describe()}")
            if fault.op == "read" and reading:
                self.read_fault = True
                continue
            if gc and (fault.file == "compaction" or fault.op == "read"):
                # A compaction's own file, or the source it reads: the compaction aborts and
                # rolls back (spec/protocol/compaction.md); the bookie serves on.
                self.gc_fault.add("no_space" if fault.op == "no_space" else "io_error")
                if fault.op == "read" and fault.file == "index":
                    # Unless it met phase 3, whose index flush reads the index: a failure
                    # there fails the bookie, and the restart finishes the compaction.
                    self.faulted = True
                continue
            if fault.op == "no_space" and fault.file != "journal":
                self.short_of_space = True
                self.no_room = True
            else:
                self.faulted = True
            if fault.op == "unknown" or fault.file in LAYOUT_FILES:
                self.logs.relaxed = True
        return notes

    def _step(
        self,
        index: int,
        op: Operation,
        result: Result,
        completed: Sequence[Completion],
        rule: StepRule,
    ) -> list[str]:
        if rule.lifecycle:
            return rule.handle(self, index, op, result)
        self._require_not_interrupted(index)
        if not self.up:
            raise ModelUsageError(
                f"step {index}: {op.name} while the bookie is down: restart it first"
            )
        if result.crashed:
            notes = self._completions(index, op, completed, rule=rule, lenient=True)
            self.interrupted = op
            self.interrupted_index = index
            if rule.interrupted is not None:
                rule.interrupted(self, op)
            return [*notes, _died_in(op)]
        notes = rule.handle(self, index, op, result)
        # The acks this step carries, by the one definition (spec/operations.py): its
        # completions, then its own ack when an add or fence was answered ok at once (the
        # handler then recorded it as pending; an ok fence of a ledger already durably
        # fenced acknowledges nothing new).
        acks = [
            ack
            for ack in acknowledgements(index, op, result, completed)
            if ack.step != index or index in self.pending
        ]
        lenient = self.faulted or self.short_of_space or self.async_acks
        notes += self._completions(index, op, acks, rule=rule, lenient=lenient)
        if rule.forces and self.async_acks and result.ok and not self.faulted and self.pending:
            raise Divergence(
                index,
                f"{op.name} ended with the adds/fences of steps {sorted(self.pending)} never "
                "answered: a clean shutdown answers every request in flight (spec/adapter.md)",
                rule="R-SHUTDOWN",
            )
        if rule.then is not None:
            notes += rule.then(self, index, op, result)
        return notes

    def _require_not_interrupted(self, index: int) -> None:
        if self.interrupted is not None:
            raise ModelUsageError(
                f"step {index}: a step interrupted by a crash must be followed by the crash"
            )

    def _expect(
        self,
        index: int,
        op: Operation,
        result: Result,
        errors: set[str | None],
        rule: str = "R-FAULTS",
    ) -> None:
        """The step's answer is one of ``errors`` (None: ok). The rule that decides is, but for
        the ones that say otherwise, R-FAULTS: a step succeeds unless a fault fired."""
        if result.pending or result.data is not None or result.error not in errors:
            allowed = ", ".join(sorted("ok" if e is None else e for e in errors))
            raise Divergence(
                index, f"{op.name} answered {result.describe()}; allowed: {allowed}", rule=rule
            )

    # --- background steps ----------------------------------------------------------------

    def _background_failed(
        self, index: int, op: Operation, result: Result, fault_errors: set[str | None]
    ) -> list[str] | None:
        """Check a background step's answer: ok, or once a fault fired one of
        ``fault_errors``; no_space also while every ledger directory is full (refused before
        it wrote anything) or while a write found no room and room has not come back. A full
        disk is never io_error, and never stops the bookie: once room is back the step must
        succeed (issue 10: a checkpoint or a preallocation that met a full disk failed the
        bookie for good). The note of the failure, or None when it succeeded."""
        errors: set[str | None] = {None}
        if self.faulted:
            errors |= fault_errors
        elif self.disk_full == "ledger_dirs" or self.no_room:
            errors |= fault_errors & {"no_space"}  # nothing it cannot apply again
        self._expect(index, op, result, errors)
        if result.error is not None:
            return [f"{op.name} failed ({result.error}): the fault is in effect"]
        return None

    def _checkpoint_step(self, index: int, op: Checkpoint, result: Result) -> list[str]:
        failed = self._background_failed(index, op, result, {"io_error", "no_space"})
        if failed is not None:
            return failed
        self._persisted = True
        return self._checkpoint()

    def _rotate(self, index: int, op: Rotate, result: Result) -> list[str]:
        failed = self._background_failed(index, op, result, {"io_error", "no_space"})
        if failed is not None:
            return failed
        self.between.rotate = True
        if not self.logs.relaxed:
            log_id = self.logs.rotate()
            if log_id < 0:
                return [
                    "every active entry log was sealed; each ledger's next add starts a new one"
                ]
            return [f"the active entry log was sealed; entry log {log_id} is now active"]
        return []

    def _preallocate(self, index: int, op: Preallocate, result: Result) -> list[str]:
        failed = self._background_failed(index, op, result, {"io_error", "no_space"})
        if failed is not None:
            # It may have taken the next id before its file found no room (BookKeeper's
            # allocateNewLog does the same): the next log's id is learnt when it is seen.
            self.logs.forget_next_id()
            return failed
        self.logs.preallocated = True
        return [
            "the next entry log may be created ahead of need (when preallocation is on): "
            "the next rotation takes it, with the id it would have had"
        ]

    def _check_dirs(self, index: int, op: CheckDirs, result: Result) -> list[str]:
        self._expect(index, op, result, {None})
        return ["the disk check measured the ledger directories"]

    def _journal_force(self, index: int, op: JournalForce, result: Result) -> list[str]:
        failed = self._background_failed(index, op, result, {"io_error"})
        return failed if failed is not None else []  # its completions say what it did

    # The phases of the group commit and of the checkpoint, as steps of their own (requests
    # run between them as they run between a bookie's threads).

    def _journal_write(self, index: int, op: JournalWrite, result: Result) -> list[str]:
        failed = self._background_failed(index, op, result, {"io_error"})
        if failed is not None:
            return failed
        if self.written:
            return ["a group is still waiting for its fsync: nothing more is written"]
        self.written = {step for step in self.pending if step not in self.synced}
        self.marks.taken()
        if not self.written:
            return []
        return [
            f"the journal wrote the group of steps {sorted(self.written)} (not fsynced): what "
            "is added from now on belongs to the next group"
        ]

    def _journal_sync(self, index: int, op: JournalSync, result: Result) -> list[str]:
        failed = self._background_failed(index, op, result, {"io_error"})
        if failed is not None:
            return failed
        group, self.written = self.written, set()
        self.synced |= group
        if self.marks.synced():
            self._forced = True
        if not group:
            return []
        return [
            f"the journal fsynced the group of steps {sorted(group)}: durable now, "
            "acknowledged at the ack phase"
        ]

    def _journal_ack(self, index: int, op: JournalAck, result: Result) -> list[str]:
        failed = self._background_failed(index, op, result, {"io_error"})
        return failed if failed is not None else []  # its completions say what it did

    def _checkpoint_flush(self, index: int, op: CheckpointFlush, result: Result) -> list[str]:
        failed = self._background_failed(index, op, result, {"io_error", "no_space"})
        self.checkpoint_open = failed is None
        if failed is not None:
            return failed
        self._checkpoint_began()
        if not self.logs.relaxed:
            self.logs.checkpoint()
        self.marks.capture_mark()
        return [
            "checkpoint, first phase: the journal's durable mark captured, then the entry "
            "logs fsynced and the index flushed; lastMark does not move until the second phase"
        ]

    def _checkpoint_persist(self, index: int, op: CheckpointPersist, result: Result) -> list[str]:
        failed = self._background_failed(index, op, result, {"io_error", "no_space"})
        was_open, self.checkpoint_open = self.checkpoint_open, False
        if failed is not None:
            return failed
        if not was_open:
            return ["checkpoint, second phase, with no first phase pending: nothing to persist"]
        self._persisted = True
        self.marks.persist_captured()
        return [
            "checkpoint, second phase: lastMark persisted at the mark the first phase "
            "captured; journals before it may go"
        ]

    # --- garbage collection and compaction ----------------------------------------------
    #
    # The model computes a GC cycle from its own logs (spec/protocol/compaction.md, docs/
    # model.md "Garbage collection"): which logs it deletes, the candidates of the kind the
    # bookie chose and their order, each compaction's new id (the shared counter) and the
    # bytes it moves (the source's live ledgers at copy time). The kind of an unforced cycle
    # depends on time, which is not modelled: any kind the configuration enables is allowed,
    # and the rest is checked exactly for the kind reported.

    def _live(self) -> set[int]:
        """The ledgers a GC counts as live: every ledger in a log that is not deleted (bkref
        has no ledger manager: a delete is the only way a ledger stops being live)."""
        return {
            ledger
            for log in self.logs.logs.values()
            for ledger in log.written
            if not self.ledgers.durably_deleted(ledger)
        }

    def _gc_unseen(self) -> bool:
        """The layout a GC step starts from is not known: a log per ledger under
        asynchronous acks (adds ran since the last state, into logs the model has not
        seen)."""
        return self.async_acks and self.manager.kind != "single"

    def _gc_unpredictable(self) -> bool:
        """Whether the model cannot compute the GC now: the layout is followed (a fault), a
        fault fired in this step, or a delete's effect is unknown (failed, or cut short)."""
        return (
            self.logs.relaxed
            or bool(self.gc_fault)
            or self.ledgers.deletion_unsure()
            # The step's report is not computed; the next state is judged by the rules.
            or self._gc_unseen()
            # A compaction's new log holds what the next state shows (bounded only).
            or bool(self.logs.unresolved)
        )

    def _gc_errors(self) -> set[str | None]:
        """What a GC step may answer: ok; the error a fault that fired in it allows; after a
        fault, io_error or no_space; no_space while the ledger directories have no room."""
        errors: set[str | None] = {None, *self.gc_fault}
        if self.faulted:
            errors |= {"io_error", "no_space"}
        if self.disk_full == "ledger_dirs" or self.no_room:
            errors.add("no_space")
        return errors

    def _disk_pressure(self) -> bool:
        """A ledger directory is full or almost full: GC may be suspended, or forced."""
        return self.disk_full in ("ledger_dirs", "active_log_dir") or self.no_room

    def _abort_compaction(self, why: str) -> list[str]:
        """A gc, a gc_begin (or a clean shutdown) aborts the compaction in flight: its files
        are removed, the source and the index stay as they were."""
        cycle, self.gc = self.gc, None
        if cycle is None or cycle.current is None:
            return []
        current = cycle.current
        return [
            f"{why} aborted the compaction of entry log {current.source} into "
            f"{current.new_id} ({current.phase}): its files are removed, the source stays"
        ]

    def _gc_report(self, index: int, op: Gc | GcBegin, result: Result) -> GcReport | None:
        """The report of an ok gc or gc_begin (None when it failed)."""
        self._expect(index, op, result, self._gc_errors())
        if result.error is not None:
            return None
        if result.gc is None:
            raise Divergence(index, f"{op.name} answered ok without its statistics", rule="R-GC")
        return result.gc

    def _gc_begin_checks(
        self, index: int, op: Gc | GcBegin, report: GcReport
    ) -> tuple[list[int], list[int]]:
        """Steps 1 to 5 of a cycle as the model computes them: the dead logs (deleted now)
        and the candidates of the kind reported, in order; checks the kind."""
        kinds = self.config.compaction_kinds(force=op.force, pressure=self._disk_pressure())
        if report.compaction not in kinds:
            raise Divergence(
                index,
                f"{op.name} chose a {report.compaction} compaction; allowed: "
                f"{', '.join(sorted(kinds))} (forced: {op.force}; the configuration's "
                "thresholds, intervals and force flags decide)",
                rule="R-GC",
            )
        live = self._live()
        dead = self.logs.dead_logs(live)
        # A log that shows no record may be a file with no record (deleted) or one whose
        # header is damaged over bytes that may hold records (kept: never deleted on a
        # guess); the state shows both alike, so the next state says which.
        empty = [log_id for log_id in dead if not self.logs.logs[log_id].written]
        sure = [log_id for log_id in dead if log_id not in empty]
        if not len(sure) <= report.logs_deleted <= len(dead):
            raise Divergence(
                index,
                f"{op.name} deleted {report.logs_deleted} log(s); entry logs {sure} hold no "
                f"live ledger and are candidates, so all of them are deleted (and of the logs "
                f"that show no record, {empty}, any may be)",
                rule="R-GC",
            )
        for log_id in sure:
            self.logs.remove(log_id)
        self.maybe_dead |= set(empty)
        kind = report.compaction
        threshold = self.config.threshold(kind)
        candidates = self.logs.candidates(live, threshold) if kind != "none" else []
        return dead, candidates

    def _compaction_id_unknown(self) -> None:
        """A compaction may or may not have taken the next id (it failed, or found nothing
        live while a preallocated log may hold the next id): the next new log's id is known
        only to be new, and leastUnflushedLogId is followed from now on."""
        self.logs.forget_next_id()
        self.logs.least_followed = True

    def _gc_failed(self) -> None:
        """A gc or gc_begin failed: how many dead logs (and, for a whole cycle, which
        compactions) it finished first is not known; the layout is followed from here."""
        self.logs.relaxed = True
        self.logs.may_vanish |= {i for i, log in self.logs.logs.items() if log.state == "flushed"}

    def _gc_relaxed(self, op: Gc | GcBegin, report: GcReport) -> list[str]:
        """A GC the model cannot compute: every flushed log may vanish (deleted or compacted
        away), and the layout is followed until the next restart."""
        if isinstance(op, GcBegin):
            self.gc = _GcCycle(report.compaction, list(report.candidates))
        if self._gc_unseen() and not (self.faulted or self.gc_fault):
            # Not relaxed: the next state is judged by the rules for a GC step (flushed logs
            # may vanish, new flushed logs hold only what the removed ones held).
            return [
                f"{op.name}: with a log per ledger the model has not seen the logs it starts "
                "from; the next state shows what it deleted and compacted"
            ]
        self.logs.relaxed = True
        self.logs.may_vanish |= {i for i, log in self.logs.logs.items() if log.state == "flushed"}
        return [
            f"{op.name}: a fault fired or a delete's effect is unknown, so the model follows "
            "the layout from here (flushed logs may be deleted or compacted away)"
        ]

    def _gc_begin(self, index: int, op: GcBegin, result: Result) -> list[str]:
        notes = self._abort_compaction("a new GC cycle")
        report = self._gc_report(index, op, result)
        if report is None:
            self._gc_failed()
            return [*notes, f"gc_begin failed ({result.error}): no cycle begun"]
        self.gc_compactions = []  # its step 0 finished what a failed phase 3 left
        if self._gc_unpredictable():
            return notes + self._gc_relaxed(op, report)
        dead, candidates = self._gc_begin_checks(index, op, report)
        if report.logs_compacted or report.entries_moved:
            raise Divergence(
                index,
                f"gc_begin answered {report.describe()}; it deletes exactly the dead logs "
                f"{dead} and compacts nothing yet",
                rule="R-GC",
            )
        if report.candidates != tuple(candidates):
            raise Divergence(
                index,
                f"gc_begin named the candidates {list(report.candidates)}; for a "
                f"{report.compaction} compaction (threshold "
                f"{self.config.threshold(report.compaction)}) they are {candidates}: flushed "
                "logs with live bytes and usage below the threshold, lowest usage first",
                rule="R-GC",
            )
        self.gc = _GcCycle(report.compaction, candidates)
        return [
            *notes,
            f"GC cycle begun ({report.compaction}): dead entry logs {dead} deleted; "
            f"candidates {candidates}",
        ]

    def _gc_whole(self, index: int, op: Gc, result: Result) -> list[str]:
        notes = self._abort_compaction("a GC cycle")
        report = self._gc_report(index, op, result)
        if report is None:
            self._gc_failed()
            return [*notes, f"gc failed ({result.error})"]
        self.gc_compactions = []  # its step 0 finished what a failed phase 3 left
        if self._gc_unpredictable():
            return notes + self._gc_relaxed(op, report)
        dead, candidates = self._gc_begin_checks(index, op, report)
        live = self._live()
        if any(self.logs.unsure(source) for source in candidates):
            # A candidate's map claims records a crash may have lost: its compaction copies
            # what the file really holds (spec/protocol/compaction.md); the layout is
            # followed until the next restart.
            self.logs.relaxed = True
            self.logs.may_vanish |= {
                i for i, log in self.logs.logs.items() if log.state == "flushed"
            }
            return [
                *notes,
                f"GC cycle ({report.compaction}): dead entry logs {dead} deleted; of the "
                f"candidates {candidates}, some claim records a crash may have lost: what "
                "their compactions copied is followed",
            ]
        moved = [(source, self.logs.live_bytes(source, live)) for source in candidates]
        moved_bytes = sum(sum(m.values()) for _, m in moved)
        if report.logs_compacted != len(candidates) or not _entries_fit(
            report.entries_moved, moved_bytes
        ):
            raise Divergence(
                index,
                f"gc answered {report.describe()}; the model deletes {len(dead)} dead log(s) "
                f"{dead} and compacts {len(candidates)} ({candidates}), moving "
                f"{moved_bytes} bytes of records",
                rule="R-GC",
            )
        if any(copied for _, copied in moved):
            self.logs.checkpoint()  # each phase 3 forces the entry logs before its index flush
        ids = self.logs.next_compaction_ids()
        for source, copied in moved:
            if len(ids) == 1 and not self.unplaced:
                (new_id,) = ids
                self.logs.take_compaction_id(new_id)
                self.logs.compacted(source, new_id, copied)
                ids = self.logs.next_compaction_ids()
            else:
                self.logs.remove(source)
                self.unplaced.append((source, copied))
        if self.unplaced:
            # The next compared state shows their ids (_place_compacted), before any new log.
            self.logs.least_followed = True
        if not all(self._exact(source) for source, _ in moved):
            self.logs.relaxed = True  # a damaged source: as in _compact_index
        return [
            *notes,
            f"GC cycle ({report.compaction}): dead entry logs {dead} deleted, {candidates} "
            "compacted into new flushed logs holding their live ledgers",
        ]

    def _phase_report(
        self, index: int, op: Operation, result: Result, errors: set[str | None]
    ) -> PhaseReport | None:
        self._expect(index, op, result, errors)
        if result.error is not None:
            return None
        if result.phase is None:
            raise Divergence(
                index, f"{op.name} answered ok without saying what it did", rule="R-COMPACTION"
            )
        return result.phase

    def _idle_errors(self) -> set[str | None]:
        """A phase step with nothing to step writes nothing: ok, or io_error once the bookie
        may have failed (it refuses every GC step then)."""
        return {None, "io_error"} if self.faulted else {None}

    def _idle(self, index: int, op: Operation, report: PhaseReport | None) -> list[str]:
        if report is not None and report.phase != "idle":
            raise Divergence(
                index,
                f"{op.name} answered {report.describe()}; no compaction is in flight: idle",
                rule="R-COMPACTION",
            )
        return [f"{op.name}: no compaction to step"]

    def _check_phase(
        self, index: int, op: Operation, report: PhaseReport, expected: PhaseReport
    ) -> None:
        same = (report.phase, report.source_log, report.new_log) == (
            expected.phase,
            expected.source_log,
            expected.new_log,
        )
        if not same or report.entries_moved != expected.entries_moved:
            raise Divergence(
                index,
                f"{op.name} answered {report.describe()}; expected {expected.describe()}",
                rule="R-COMPACTION",
            )

    def _compact_copy(self, index: int, op: CompactCopy, result: Result) -> list[str]:
        cycle = self.gc
        if cycle is not None and cycle.current is not None:
            # A compaction is in flight: the copy waits for it (the bookie answers idle).
            return self._idle(index, op, self._phase_report(index, op, result, self._idle_errors()))
        if self.logs.relaxed and cycle is not None:
            report = self._phase_report(index, op, result, self._gc_errors())
            if report is not None and report.source_log in cycle.candidates:
                cycle.candidates.remove(report.source_log)  # copied, or deleted: not next
            if report is not None and report.new_log is not None:
                self.logs.taken.add(report.new_log)
                self.logs.may_vanish.add(report.new_log)
                source = report.source_log or 0
                cycle.current = _Compaction(source, report.new_log, {}, report.entries_moved)
            elif report is None:
                self.gc = None
            return ["compact_copy: the layout is followed (a fault fired earlier)"]
        if cycle is None or not cycle.candidates:
            self.gc = None  # the cycle ends
            return self._idle(index, op, self._phase_report(index, op, result, self._idle_errors()))
        errors = self._gc_errors()
        source = cycle.candidates[0]
        report = self._phase_report(index, op, result, errors)
        cycle.candidates.pop(0)
        if report is None:
            # Aborted: the source and the index stay; the compaction log, if it was made,
            # is removed, and its id may or may not be used up. The cycle is dropped.
            self._compaction_id_unknown()
            self.gc = None
            return [
                f"compact_copy of entry log {source} failed ({result.error}): rolled back, "
                "the rest of the cycle dropped"
            ]
        live = self._live()
        moved = self.logs.live_bytes(source, live)
        low = self.logs.sure_live_bytes(source, live) if self.logs.unsure(source) else None
        if moved and low is not None and report.new_log is None:
            # The map claimed live records a crash may have lost: the copy found no live
            # record, so it deleted the source (spec/protocol/compaction.md, "A map that
            # claims records a crash lost"); not when some live bytes were surely held.
            if low:
                raise Divergence(
                    index,
                    f"compact_copy of entry log {source} found nothing live and made no new "
                    f"log; it surely holds the live bytes {low} (fsynced before the crash)",
                    rule="R-COMPACTION",
                )
            moved = {}
        if not moved:
            self._check_phase(index, op, report, PhaseReport("copy", source, None, 0))
            ids = self.logs.next_compaction_ids()
            if len(ids) == 1:
                self.logs.take_compaction_id(ids.pop())
            else:
                self._compaction_id_unknown()
            self.logs.remove(source)
            return [f"compact_copy: entry log {source} holds nothing live any more: deleted"]
        if report.new_log is None and not self._exact(source) and report.source_log == source:
            # A damaged source whose live bytes were only undersized or garbled records: no
            # record to copy, so it is deleted like a log with nothing live.
            self._compaction_id_unknown()
            self.logs.remove(source)
            return [f"compact_copy: entry log {source} (damaged) held no whole live record"]
        ids = self.logs.next_compaction_ids()
        new_id = report.new_log
        if new_id is None or (ids and new_id not in ids) or new_id in self.logs.taken:
            want = f"one of {sorted(ids)}" if ids else "an id never used"
            raise Divergence(
                index,
                f"compact_copy of entry log {source} answered new log {new_id}; the shared "
                f"id counter gives {want}",
                rule="R-LOG-IDS",
            )
        reused = self.logs.reusable(new_id)  # a GC removed its log, or none held it
        if not ids and (
            new_id in self.logs.logs or (new_id <= self.logs.max_seen_id and not reused)
        ):
            raise Divergence(
                index, f"compact_copy took entry log id {new_id}, used before", rule="R-LOG-IDS"
            )
        if report.source_log != source or report.phase != "copy":
            raise Divergence(
                index,
                f"compact_copy answered {report.describe()}; the next candidate is {source}",
                rule="R-COMPACTION",
            )
        garbage = self.logs.unsure_bytes(source) if low is not None else 0
        if not _entries_fit(report.entries_moved, sum(moved.values()) + garbage):
            sure = "" if low is None else f" (surely held: {low})"
            raise Divergence(
                index,
                f"compact_copy moved {report.entries_moved} entries; the live ledgers of entry "
                f"log {source} hold {dict(moved)} bytes{sure}",
                rule="R-COMPACTION",
            )
        self.logs.take_compaction_id(new_id)
        slack = self.logs.unsure_bytes(source) if low is not None else 0
        cycle.current = _Compaction(
            source, new_id, moved, report.entries_moved, low=low, slack=slack
        )
        return [
            f"compaction phase 1: the live ledgers {sorted(moved)} of entry log {source} "
            f"copied into {new_id}.log.compacting (not durable; a crash now undoes it)"
        ]

    def _compact_flush(self, index: int, op: CompactFlush, result: Result) -> list[str]:
        cycle = self.gc
        current = cycle.current if cycle is not None else None
        if current is None or current.phase != "copied":
            return self._idle(index, op, self._phase_report(index, op, result, self._idle_errors()))
        report = self._phase_report(index, op, result, self._gc_errors())
        if report is None:
            self.gc = None
            return [
                f"compact_flush of entry log {current.source} failed ({result.error}): "
                "rolled back, the source and the index untouched, the rest of the cycle dropped"
            ]
        if not self.logs.relaxed:
            self._check_phase(
                index,
                op,
                report,
                PhaseReport("flush", current.source, current.new_id, current.entries),
            )
        current.phase = "flushed"
        return [
            f"compaction phase 2: {current.new_id}.log.{current.source:x}.compacted is durable; "
            "from now on recovery finishes this compaction whatever happens"
        ]

    def _compact_index(self, index: int, op: CompactIndex, result: Result) -> list[str]:
        cycle = self.gc
        current = cycle.current if cycle is not None else None
        if current is None or current.phase != "flushed":
            return self._idle(index, op, self._phase_report(index, op, result, self._idle_errors()))
        assert cycle is not None
        errors: set[str | None] = {None}
        if self.faulted:
            errors |= {"io_error", "no_space"}
        if self.disk_full == "ledger_dirs" or self.no_room:
            errors.add("no_space")  # the index found no room: the next cycle finishes it
        report = self._phase_report(index, op, result, errors)
        if report is None:
            self.gc = None
            moved = tuple(sorted(current.moved.items()))
            self.gc_compactions.append(
                CompactionOutcome(
                    current.source,
                    current.new_id,
                    moved,
                    "yes",
                    self._copy_exact(current),
                    current.slack,
                )
            )
            # Phase 3 failed: the bookie fails, as after a failed checkpoint; recovery
            # finishes the compaction. How far it got is for the next states to show.
            self.faulted = True
            self.logs.relaxed = True
            self.logs.may_vanish.add(current.source)
            return [
                f"compact_index of entry log {current.source} failed ({result.error}): the "
                "bookie fails; the restart finishes the compaction from its .compacted file"
            ]
        cycle.current = None
        if self.logs.relaxed:
            self.logs.may_vanish.add(current.source)
            return ["compaction phase 3 (the layout is followed: a fault fired earlier)"]
        self._check_phase(
            index,
            op,
            report,
            PhaseReport("index", current.source, current.new_id, current.entries),
        )
        # Its index flush forces the entry logs first, as a checkpoint's first half does:
        # the rotated logs become flushed, the active log's bytes durable.
        self.logs.checkpoint()
        exact = self._exact(current.source)
        self.logs.compacted(
            current.source, current.new_id, current.moved, current.low, current.slack
        )
        if not exact:
            # A damaged source: the new log holds what its records really held (the read-backs
            # check every durable entry); the layout is followed until the next restart.
            self.logs.relaxed = True
            self.logs.may_vanish.add(current.new_id)
        return [
            f"compaction phase 3: entry log {current.new_id} holds the live entries of "
            f"{current.source}, the index points at it, the source is removed"
        ]

    def _exact(self, source: int) -> bool:
        """Whether the model knows the bytes a compaction of ``source`` moves (manager's
        ``suspect``: not for a log whose contents came from a damaged tail)."""
        return source not in self.logs.suspect

    def _copy_exact(self, current: _Compaction) -> bool:
        """Whether the new log of the compaction ``current`` holds exactly its ``moved``
        bytes (not when the source was damaged, or its map claimed records a crash may have
        lost: it then holds at most them)."""
        return self._exact(current.source) and current.low is None

    def _source_exact(self, source: int) -> bool:
        """As :meth:`_copy_exact`, for a compaction of ``source`` not begun yet."""
        return self._exact(source) and not (source in self.logs.logs and self.logs.unsure(source))

    # What a crash in the middle of a GC step may have left (see crash_outcomes).

    def _interrupted_gc_begin(self, op: Gc | GcBegin) -> None:
        cycle = self.gc
        if cycle is not None and cycle.current is not None:
            current = cycle.current
            finish = "maybe" if current.phase == "flushed" else "no"
            self.gc_compactions.append(
                CompactionOutcome(
                    current.source,
                    current.new_id,
                    tuple(sorted(current.moved.items())),
                    finish,
                    self._copy_exact(current),
                    current.slack,
                )
            )
        self.gc = None
        live = self._live()
        self.gc_vanish |= set(self.logs.dead_logs(live))
        if isinstance(op, Gc) or self._gc_unpredictable():
            pressure = self._disk_pressure()
            for kind in self.config.compaction_kinds(force=op.force, pressure=pressure):
                threshold = self.config.threshold(kind)
                for source in self.logs.candidates(live, threshold) if kind != "none" else []:
                    if all(c.source != source for c in self.gc_compactions):
                        moved = tuple(sorted(self.logs.live_bytes(source, live).items()))
                        unsure = self.logs.unsure(source)
                        self.gc_compactions.append(
                            CompactionOutcome(
                                source,
                                None,
                                moved,
                                "maybe",
                                self._source_exact(source),
                                self.logs.unsure_bytes(source) if unsure else 0,
                                unsure and not self.logs.sure_live_bytes(source, live),
                            )
                        )

    def _interrupted_compact_copy(self, _op: CompactCopy) -> None:
        cycle = self.gc
        if cycle is None or cycle.current is not None or not cycle.candidates:
            return
        source = cycle.candidates[0]
        if source not in self.logs.logs:
            return  # followed, not predicted (a fault): the layout shows what is left
        if not self.logs.sure_live_bytes(source, self._live()):
            # Nothing (surely) live: the copy deletes the source, or may (spec/protocol/
            # compaction.md: a map may claim records a crash lost).
            self.gc_vanish.add(source)

    def _outcome(self, current: _Compaction, finish: str) -> CompactionOutcome:
        """What a crash may leave of the compaction in flight, ``finish`` being whether the
        restart finishes it (yes, no, maybe)."""
        moved = tuple(sorted(current.moved.items()))
        return CompactionOutcome(
            current.source, current.new_id, moved, finish, self._copy_exact(current), current.slack
        )

    def _interrupted_phase(self, finish: str) -> None:
        cycle = self.gc
        if cycle is None or cycle.current is None:
            return
        self.gc_compactions.append(self._outcome(cycle.current, finish))
        cycle.current = None

    def _interrupted_compact_flush(self, _op: CompactFlush) -> None:
        self._interrupted_phase("maybe")

    def _interrupted_compact_index(self, _op: CompactIndex) -> None:
        self._interrupted_phase("yes")

    def _interrupted_shutdown(self, _op: Shutdown) -> None:
        """A shutdown aborts the compaction in flight: cut short, a flushed one may or may
        not be finished by the restart."""
        cycle = self.gc
        if cycle is not None and cycle.current is not None:
            self._interrupted_phase("maybe" if cycle.current.phase == "flushed" else "no")

    def _gc_crash_constraints(self, constraints: LogConstraints) -> LogConstraints:
        """The crash constraints with what the GC may have left: the compaction in flight
        (undone if only copied, finished once flushed) and what the interrupted rules
        recorded."""
        compactions = list(self.gc_compactions)
        cycle = self.gc
        if cycle is not None and cycle.current is not None:
            finish = "yes" if cycle.current.phase == "flushed" else "no"
            compactions.append(self._outcome(cycle.current, finish))
        vanish = frozenset(self.gc_vanish | self.logs.may_vanish | self.maybe_dead)
        if not compactions and not vanish:
            return constraints
        return attrs.evolve(constraints, may_vanish=vanish, compactions=tuple(compactions))

    # --- requests ------------------------------------------------------------------------

    def _decisions(self, op: Add | Fence) -> set[str | None]:
        """What the bookie may decide for an add or fence, in any of the ledger's possible
        heads (models/index/ledger_index.py, R-ADMIT-ORDER): None admits it, else the
        refusal's code."""
        try:
            return self.ledgers.admissions(op.ledger, op.key, add=isinstance(op, Add))
        except BeyondModel as exc:
            raise ModelUsageError(str(exc)) from None

    def _send(
        self, index: int, op: Add | Fence, *, records: bool = True, apply: bool = True
    ) -> bool:
        """Hand an add or fence to the ledger sub-model; whether every head admitted it.
        ``records``: it queues journal records of its own (a fence joining a fence in flight
        shares its record); ``apply``: an admitted one reaches the journal's queue and the
        entry log now (not for one answered io_error at once: how far it got is unknown)."""
        new_key = not self.ledgers.exists_surely(op.ledger)
        try:
            if isinstance(op, Add):
                made = self.ledgers.send(index, op.ledger, op.key, entry=op.entry, data=op.data)
            else:
                made = self.ledgers.send(index, op.ledger, op.key)
        except BeyondModel as exc:
            raise ModelUsageError(str(exc)) from None
        entry = op.entry if isinstance(op, Add) else -1
        admitted = made == {None}
        self.pending[index] = _Pending(op.name, op.ledger, entry, op, applied=False)
        if admitted and apply:
            self._apply(index, new_key, records=records)
        return admitted

    def _apply(self, index: int, new_key: bool, *, records: bool = True) -> None:
        """An admitted add or fence reaches the journal's queue (and an add the entry log)."""
        pending = self.pending[index]
        self.pending[index] = attrs.evolve(pending, applied=True)
        if records:
            self.marks.appended(2 if new_key else 1)
        op = pending.op
        if isinstance(op, Add):
            self.between.records.append((op.ledger, record_bytes(len(op.data))))
        if isinstance(op, Add) and not self.logs.relaxed:
            self.logs.add_entry(op.ledger, len(op.data))

    def _answer_request(self, index: int, op: Add | Fence, answer: str | None) -> None:
        """An add's or fence's answer at once: refused (the heads that refuse it stay),
        admitted (bkref's in-process ``pending``), or io_error."""
        ledger_entry = op.entry if isinstance(op, Add) else None
        assert self.ledgers.settle(index, op.ledger, answer, entry=ledger_entry)
        if answer not in ("admitted", None):
            self.pending.pop(index, None)

    def _request_allowed(self, made: set[str | None], *, fence_ok: bool = False) -> set[str]:
        allowed = {code for code in made if code is not None}
        if None in made:
            allowed |= {"pending", "ok"} if self.async_acks or fence_ok else {"pending"}
        if self.async_acks:
            allowed.add("pending")  # answered later, whatever the answer (R-ACK-ASYNC)
        return allowed

    def _add_entry(self, index: int, op: Add, result: Result) -> list[str]:
        what = f"add {op.ledger}:{op.entry}"
        if len(op.data) > self.config.max_data_bytes:
            _check_answer(
                index, what, _answer(result), {"bad_request"}, result.describe(), rule="R-SIZE"
            )
            return [
                f"{what} refused: its {len(op.data)} bytes are above the entry size limit "
                f"({self.config.max_data_bytes} bytes); nothing was written"
            ]
        made = self._decisions(op)
        allowed = self._request_allowed(made)
        if self.disk_full == "ledger_dirs" or self.faulted or self.no_room:
            allowed.add("no_space")
        if self.faulted:
            allowed.add("io_error")
        observed = _answer(result)
        _check_answer(
            index,
            what,
            observed,
            allowed,
            result.describe(),
            rule=self.ledgers.admission_rule(op.ledger, observed),
        )
        if observed == "no_space":
            return [f"{what} refused: no_space; nothing was written"]
        new_key = not self.ledgers.exists_surely(op.ledger)
        again = op.entry in self.ledgers.entries_of(op.ledger)
        self._send(index, op, apply=observed in ("pending", "ok"))
        if observed == "pending" and not self.async_acks:
            self._answer_request(index, op, "admitted")
            if not self.pending[index].applied:
                self._apply(index, new_key)
        elif observed not in ("pending", "ok"):
            self._answer_request(index, op, observed)
            if observed == "io_error":
                return [f"{what} failed with io_error: it may or may not have been kept"]
            return [f"{what} refused: {observed}; nothing was written"]
        if not self.pending[index].applied:
            return [f"{what} in flight: its answer says whether the bookie admitted it"]
        resent = " The entry id was added before: this is a re-send." if again else ""
        if not self.internals:
            new = " It creates the ledger, with this key." if new_key else ""
            return [
                f"{what} admitted: not durable yet, and the client has no ack; a crash now "
                f"may lose it.{new}{resent}"
            ]
        key = " Its key record goes first: the ledger is new." if new_key else ""
        return [
            f"{what} accepted: written (not fsynced) and "
            f"indexed, and queued for the journal. Not durable yet: a crash now may lose "
            f"it, and the client has no ack.{key}{resent}"
        ]

    def _fence(self, index: int, op: Fence, result: Result) -> list[str]:
        made = self._decisions(op)
        ledger = self.ledgers.ledgers.get(op.ledger)
        already = (
            made == {None}
            and ledger is not None
            and ledger.every(lambda h: h.fence_dur is Dur.YES and h.exists)
        )
        allowed = self._request_allowed(made, fence_ok=already)
        if self.faulted:
            allowed.add("io_error")
        observed = _answer(result)
        _check_answer(
            index,
            f"fence {op.ledger}",
            observed,
            allowed,
            result.describe(),
            rule=self.ledgers.admission_rule(op.ledger, observed),
        )
        # A fence of a ledger whose fence is still in flight shares that fence's record and
        # ack (no new record): it joins its group.
        joined = next(
            (
                step
                for step, pending in self.pending.items()
                if pending.kind == "fence" and pending.ledger == op.ledger
            ),
            None,
        )
        if already and observed == "ok" and not self.async_acks:
            self.write_closed.add(op.ledger)
            self.ledgers.send(index, op.ledger, op.key)
            self.ledgers.settle(index, op.ledger, None, entry=None)
            return []  # durably fenced already: nothing new to acknowledge
        shares = joined is not None and not self.async_acks
        admitted = self._send(index, op, records=not shares, apply=observed in ("pending", "ok"))
        if admitted and joined is not None and not self.async_acks:
            if joined in self.written:
                self.written.add(index)
            if joined in self.synced:
                self.synced.add(index)
        if observed == "pending" and not self.async_acks:
            self._answer_request(index, op, "admitted")
        elif observed not in ("pending", "ok"):
            self._answer_request(index, op, observed)
            return []
        if not self.async_acks:
            self.write_closed.add(op.ledger)  # a fence write-closes its ledger too
        durable = "the fence record is queued for the journal" if self.internals else "it is"
        return [
            f"fence {op.ledger} accepted: adds to it are refused from now on; {durable} "
            "not durable yet"
        ]

    def _write_close(self, index: int, op: WriteClose, result: Result) -> list[str]:
        """An advisory write close (spec/protocol/write_close.md): answered by the ledger's
        heads; remembered until the next checkpoint, which then seals its log
        (R-WRITE-CLOSE, judged with the layout)."""
        allowed = self.ledgers.write_close_answers(op.ledger, op.key)
        self._expect(index, op, result, allowed, rule="R-ADMIT-ORDER")
        if result.error is not None:
            return [f"write close of ledger {op.ledger} refused: {result.error}; nothing done"]
        self.write_closed.add(op.ledger)
        sealed = (
            "its entry log is sealed at the next checkpoint"
            if self.config.manager != "single"
            else "with a single entry log nothing is sealed"
        )
        return [
            f"ledger {op.ledger} write-closed: a hint, adds are still taken; {sealed}; a crash "
            "forgets it"
        ]

    def _read_entry(self, index: int, op: Read, result: Result) -> list[str]:
        allowed = self.ledgers.read_answers(op.ledger, op.entry)
        if self.faulted or self.read_fault:
            allowed.add("io_error")
        observed = _answer(result)
        ledger = self.ledgers.ledgers.get(op.ledger)
        if observed == "data" and not (
            ledger is not None
            and result.data is not None
            and ledger.readable(op.entry, result.data)
        ):
            observed, shown = "other bytes", "other bytes"
        else:
            shown = result.describe()
        _check_answer(
            index,
            f"read {op.ledger}:{op.entry}",
            observed,
            allowed,
            shown,
            rule=self.ledgers.read_rule(op.ledger, op.entry, observed),
        )
        return self.ledgers.observe_read(op.ledger, op.entry, observed)

    def _delete_ledger(self, index: int, op: Delete, result: Result) -> list[str]:
        allowed: set[str | None] = {None, "io_error"} if self.faulted else {None}
        if self.no_room or self.faulted:
            allowed.add("no_space")  # the tombstone found no room: not deleted
        self._expect(index, op, result, allowed)
        if result.error == "no_space":
            return [f"delete of ledger {op.ledger} refused: no room for its tombstone"]
        if result.error is None:
            self.deleted_at[op.ledger] = index
            self.ledgers.delete(op.ledger, "ok")
            return [f"ledger {op.ledger} deleted: durable now, its entries unreadable forever"]
        self.ledgers.delete(op.ledger, "failed")
        return [
            f"delete of ledger {op.ledger} failed: it may or may not be deleted (this run's "
            "answers show which, until a crash)"
        ]

    def _checkpoint_began(self) -> None:
        """A checkpoint (or its flush phase) returned: the logs of the ledgers write-closed
        before it are sealed now (R-WRITE-CLOSE)."""
        self.between.checkpoint = True
        self.between.write_closed = frozenset(self.write_closed)
        self.write_closed.clear()

    def _checkpoint(self) -> list[str]:
        covered = self.marks.journal_only
        self.checkpoint_open = False  # a whole checkpoint overtakes a phased one
        self._checkpoint_began()
        if not self.logs.relaxed:
            self.logs.checkpoint()
        self.marks.checkpointed()
        return [
            f"checkpoint: entry logs fsynced, index flushed, lastMark persisted at the "
            f"journal's durable mark. {covered} add(s)/fence(s) acknowledged since the last "
            "checkpoint no longer need the journal; journals before lastMark may go"
        ]

    # --- completions ---------------------------------------------------------------------

    def _completions(
        self,
        index: int,
        op: Operation,
        completed: Sequence[Completion],
        *,
        rule: StepRule,
        lenient: bool,
    ) -> list[str]:
        """Acks that completed during a step. Normally exactly the forcing steps (``forces``:
        a journal force, a shutdown) complete every pending ack, and the ack phase of a
        group commit run as steps exactly the synced ones, all ok; after a fault, or in a
        step a crash interrupted, any of them may complete (with io_error only after a
        fault)."""
        forces = rule.forces
        seen = [done.step for done in completed]
        if len(set(seen)) != len(seen):
            raise Divergence(index, f"an ack completed twice: {seen}", rule="R-ACK-ONCE")
        unknown = [step for step in seen if step not in self.pending]
        if unknown:
            raise Divergence(
                index, f"acks of steps {unknown}, which were not pending", rule="R-ACK-ONCE"
            )
        errors = [
            done.error
            for done in completed
            if done.error is not None and not self._refusal(done.step, done.error)
        ]
        if not lenient:
            due = set(self.pending) if forces else self.synced if rule.acks_synced else set()
            expected = sorted(due)
            if sorted(seen) != expected or errors:
                raise Divergence(
                    index,
                    f"{op.name} completed acks {sorted(seen)} (errors: "
                    f"{errors}); expected exactly {expected}, all ok",
                    rule="R-ACK-GROUP",
                )
            self._forced = self._forced or (forces and self.marks.unforced() > 0)
        elif errors and not self.faulted:
            raise Divergence(
                index, f"acks failed ({errors}) though no fault was injected", rule="R-FAULTS"
            )
        acked = 0
        for done in completed:
            pending = self.pending.pop(done.step)
            self.written.discard(done.step)
            self.synced.discard(done.step)
            answer = done.error
            if answer == "no_space":
                answer = "io_error"  # nothing written, or so the bookie says: not judged
            entry = pending.entry if pending.kind == "add" else None
            if not self.ledgers.settle(done.step, pending.ledger, answer, entry=entry):
                message, decides = self._late_answer_refused(done, pending)
                raise Divergence(index, message, rule=decides)
            if done.error is None:
                if not pending.applied and self._admitted_now(done.step, pending):
                    self.pending[done.step] = pending
                    self._apply(done.step, new_key=False)
                    self.pending.pop(done.step)
                acked += 1
        if forces or (completed and not rule.acks_synced):
            self.marks.forced(acked)
        else:
            self.marks.acknowledged(acked)
        if acked and not self.internals:
            return [f"{acked} add(s)/fence(s) acknowledged: durable now, no crash may lose them"]
        if acked:
            return [
                f"the journal fsync made {acked} add(s)/fence(s) durable and they are "
                "acknowledged now; a crash can no longer lose them (replay from lastMark "
                "brings them back)"
            ]
        return []

    def _refusal(self, step: int, error: str) -> bool:
        """Whether ``error`` is an answer some head gives the request of ``step`` (a
        refusal answered later, R-ACK-ASYNC; an add in flight at its ledger's delete,
        R-DELETE-INFLIGHT), rather than a failure."""
        ledger = self.ledgers.ledgers.get(self.pending[step].ledger)
        if ledger is None:
            return False
        return any(
            head.outcome(step) == error or (head.outcome(step) == "either" and error == "no_ledger")
            for head in ledger.heads.values()
            if step in dict(head.flights)
        )

    def _admitted_now(self, _step: int, pending: _Pending) -> bool:
        """An ok answer of a request whose admission the model did not know: the ledger
        sub-model kept the heads that admitted it (unless its ledger was deleted since)."""
        return pending.ledger in self.ledgers.ledgers

    def _late_answer_refused(self, done: Completion, pending: _Pending) -> tuple[str, str]:
        ledger = self.ledgers.ledgers[pending.ledger]
        outcomes = sorted(
            {
                "ok" if o is None else "ok or no_ledger" if o == "either" else o
                for head in ledger.heads.values()
                for s, o in head.flights
                if s == done.step
            }
        )
        what = f"the {pending.kind} of step {done.step}"
        if pending.kind == "add":
            what = f"the add {pending.ledger}:{pending.entry} of step {done.step}"
        got = done.error or "ok"
        deleted_at = self.deleted_at.get(pending.ledger, -1)
        if got == "ok" and outcomes == ["no_ledger"] and done.step > deleted_at >= 0:
            return (
                f"{what} was answered ok; its ledger was deleted at step {deleted_at}, before "
                "it was sent, and a deleted ledger refuses adds (no_ledger)",
                "R-DELETE-DURABLE",
            )
        if got == "ok" and outcomes == ["no_ledger"]:
            return (
                f"{what} was answered ok after its ledger's delete was answered ok: its entry "
                "is not readable; an add in flight at a delete must be refused (no_ledger)",
                "R-DELETE-INFLIGHT",
            )
        return f"{what} was answered {got} later; allowed: {', '.join(outcomes)}", "R-ADMIT-ORDER"

    def _shutdown(self, index: int, op: Shutdown, result: Result) -> list[str]:
        allowed: set[str | None] = {None}
        if self.faulted:
            allowed |= {"io_error", "no_space"}
        elif self.no_room:
            allowed.add("no_space")  # its checkpoint found no room
        self._expect(index, op, result, allowed)
        return []  # applied after its completions (it forces the journal): _after_shutdown

    def _after_shutdown(self, _index: int, op: Shutdown, result: Result) -> list[str]:
        clean = result.error is None and not self.faulted and not self.short_of_space
        if not clean:
            # A shutdown aborts the compaction in flight, failed or not: how far the abort
            # got is for the restart to show (a flushed one may yet be finished).
            self._interrupted_shutdown(op)
        return self._stop(clean=clean)

    def _stop(self, *, clean: bool) -> list[str]:
        self.checkpoint_open = False
        if clean:
            self.logs.checkpoint()
            self.marks.checkpointed()
        self._die(clean=clean)
        self.status = "stopped"  # the process ended by itself: a power cut may still follow
        return [
            (
                "clean shutdown: journal forced, checkpoint taken; a restart replays nothing"
                if self.internals
                else "clean shutdown: every request answered; nothing may be lost"
            )
            if clean
            else "shutdown after a fault: what was not acknowledged may be lost"
        ]

    # --- the environment -----------------------------------------------------------------

    def _disk_full(self, index: int, op: DiskFull, result: Result) -> list[str]:
        self._expect(index, op, result, {None})
        self.disk_full = op.where
        notes = []
        if self.logs.preallocated and op.where != "journal_dir":
            # A preallocated log whose directory fills up is dropped, its id used up.
            self.logs.forget_next_id()
            notes.append(
                "a preallocated entry log may be dropped with its directory full: the next "
                "log's id is known only to be new"
            )
        if op.where == "journal_dir":
            return [
                "the journal directory is full: the next journal write finds no space, and "
                "nothing it held may be acknowledged"
            ]
        if self.logs.current is not None:
            # The disk listener moves the active log off its full directory: the next add
            # that is taken starts a new log (until one is, the request stands, room or not).
            self.logs.rotate_requested = True
            self.rotation_owed = True
        if op.where == "ledger_dirs":
            return [
                "the ledger directories are full: adds may be refused with no_space (nothing "
                "written), and nothing acknowledged may be lost; the next add taken starts a "
                "new entry log",
                *notes,
            ]
        return [
            "the active entry log's directory is above the disk usage threshold and another "
            "has room: adds must go on, and the next one starts a new entry log elsewhere",
            *notes,
        ]

    def _advance_clock(self, index: int, op: AdvanceClock, result: Result) -> list[str]:
        """Time drives nothing a client sees: the entry-log managers' access expiry lets a
        ledger's log go (a rotation the layout rules allow with many active logs, their
        "manager's own eviction"), GC's intervals choose among compaction kinds the model
        already allows all of, and group-commit waits are the driver's. A GC cycle with a
        compaction time limit is the exception: the clock may end it, which is not
        modelled."""
        if self.gc is not None and self.config.compaction_timed:
            raise ModelUsageError(
                f"step {index}: advance_clock inside a GC cycle with a compaction time limit "
                "(minor/majorCompactionMaxTimeMillis): the model does not time a GC cycle"
            )
        self._expect(index, op, result, {None})
        return [f"the clock moved on {op.seconds} s: what the bookie times may fall due"]

    def _disk_writable(self, index: int, op: DiskWritable, result: Result) -> list[str]:
        self._expect(index, op, result, {None})
        self.disk_full = None
        if not self.no_room:
            return ["every directory has room again"]
        self.no_room = False
        return [
            "every directory has room again, and the disk check saw it: what found no room "
            "(adds, a checkpoint, a preallocation) must succeed again, never no_space"
        ]

    def _fail_fsync(self, index: int, op: FailFsync, result: Result) -> list[str]:
        self._expect(index, op, result, {None})
        what = "a directory" if op.file == "directory" else _file_words(op.file)
        return [
            f"armed: the next fsync of {what} will fail with EIO. From the step it fires in, "
            "the bookie must not acknowledge anything that relied on it"
        ]

    def _fail_write(self, index: int, op: FailWrite, result: Result) -> list[str]:
        self._expect(index, op, result, {None})
        return [
            f"armed: the next write to {_file_words(op.file)} will fail with EIO. From the "
            "step it fires in, the bookie may fail what relied on it"
        ]

    def _fail_read(self, index: int, op: FailRead, result: Result) -> list[str]:
        self._expect(index, op, result, {None})
        return [
            f"armed: the next read of {_file_words(op.file)} will fail with EIO. The read "
            "that meets it may answer io_error; nothing durable may change"
        ]

    # What a crash in the middle of a step may have done: every effect it may have had is
    # possible (see StepRule.interrupted).

    def _interrupted_add(self, op: Add) -> None:
        """(The add may have gone to the active log or to a new one: the crash constraints
        allow new logs, so only the active log's upper bound grows.)"""
        if None in self._decisions(op):
            self.ledgers.send(
                self.interrupted_index, op.ledger, op.key, entry=op.entry, data=op.data
            )
            for current in self.logs.logs_an_add_may_reach(op.ledger):
                log = self.logs.logs[current]
                written = log.written.get(op.ledger, 0)
                log.written[op.ledger] = written + record_bytes(len(op.data))

    def _interrupted_fence(self, op: Fence) -> None:
        if None in self._decisions(op):
            self.ledgers.send(self.interrupted_index, op.ledger, op.key)

    def _interrupted_delete(self, op: Delete) -> None:
        self.ledgers.delete(op.ledger, "failed")

    def _crash(self, _index: int, op: Crash, _result: Result) -> list[str]:
        if self.status == "crashed" and self.interrupted is None:
            # A crash while down only means something when recovery was interrupted.
            raise ModelUsageError("a crash while the bookie is down: restart first")
        self.interrupted = None
        if not isinstance(op.plan, KeepAll | KillProcess):
            self.logs.lost_unsynced()  # what was never fsynced may be gone
        if self.status == "up":
            self._die(clean=False)
        elif self.status == "stopped":
            # A power cut right after a shutdown: the shutdown's outcomes stand (after a
            # clean one everything was durable; a restart still replays nothing).
            self.status = "crashed"
        return [
            f"crash ({op.plan.describe()}). Possible after recovery:",
            *(self.outcomes.describe(internals=self.internals) if self.outcomes else []),
        ]

    def _die(self, *, clean: bool) -> None:
        """The bookie stopped (a crash, or a shutdown, clean or not): what was pending may or
        may not survive, and the outcomes a restart is checked against are taken now."""
        self.ledgers.crash()
        self.write_closed.clear()
        self.pending.clear()
        self.written.clear()
        self.synced.clear()
        self.checkpoint_open = False
        if clean:
            self.logs.settle()  # a clean shutdown ran every request before it
            self.gc = None  # and aborted the compaction in flight
        else:
            self.logs.forget_tentative()
        self.outcomes = self.crash_outcomes()
        self.gc = None
        self.gc_vanish = set()
        self.gc_compactions = []
        self.unplaced = []
        self.maybe_dead = set()
        self.marks.stopped(clean=clean)
        self.status = "stopped" if clean else "crashed"

    def _restart(self, index: int, _op: Restart, result: Result) -> list[str]:
        self._require_not_interrupted(index)
        if self.up:
            raise ModelUsageError(f"step {index}: restart while the bookie is up")
        if result.error is not None or result.pending or result.data is not None:
            raise Divergence(
                index, f"recovery failed: {result.describe()}", rule="R-RECOVERY-STARTS"
            )
        if result.crashed:
            self.interrupted = Restart()
            return [
                "the machine died during recovery; recovery must cope with its own half-done work"
            ]
        if self.marks.clean_stop and result.replayed not in (None, 0):
            raise Divergence(
                index,
                f"a restart after a clean shutdown replayed "
                f"{result.replayed} journal records; expected none",
                rule="R-SHUTDOWN",
            )
        self.status = "up"
        self.gc = None
        self.rotation_owed = False
        self.faulted = False
        self.short_of_space = False
        self.no_room = False
        self.disk_full = None
        self.fresh_run = True
        self.named_since_restart = set()
        self._persisted = True
        self.logs.restarted()
        self.marks.checkpointed()  # recovery ends with a checkpoint
        count = result.replayed
        replayed = "" if count is None else f" ({count} record{'' if count == 1 else 's'} replayed)"
        if not self.internals:
            return [
                "restart: every acknowledged request must be there; what was in flight at "
                "the crash may or may not be, and what the bookie shows of it now stays"
            ]
        return [
            f"restart: recovery read lastMark and replayed the journal after it{replayed}; "
            "the recovered state is checked against what the crash could leave"
        ]

    # --- crash outcomes ------------------------------------------------------------------

    def crash_outcomes(self) -> CrashOutcomes:
        """What may be observed after a crash now (see CrashOutcomes), from the ledgers'
        possible heads after the crash (models/index/ledger_index.py)."""
        must: list[tuple[int, int, bytes]] = []
        may: list[tuple[int, int, bytes]] = []
        sets: dict[str, set[int]] = {
            name: set()
            for name in (
                "must_fenced",
                "may_fenced",
                "must_ledgers",
                "may_ledgers",
                "must_deleted",
                "may_deleted",
            )
        }
        for ledger_id, ledger in sorted(self.ledgers.ledgers.items()):
            for entry_id, entry in sorted(ledger.entries.items()):
                sure = entry.sure is Sure.DURABLE and entry.heads is None
                (must if sure else may).append((ledger_id, entry_id, entry.data))
            for name, test in (
                ("fenced", lambda h: h.exists and h.fence_mem),
                ("ledgers", lambda h: h.exists),
                ("deleted", lambda h: h.deleted),
            ):
                if ledger.every(test):
                    sets[f"must_{name}"].add(ledger_id)
                elif ledger.one(test):
                    sets[f"may_{name}"].add(ledger_id)
        return CrashOutcomes(
            must_entries=tuple(must),
            may_entries=tuple(may),
            **{name: frozenset(ids) for name, ids in sets.items()},
            logs=self._gc_crash_constraints(self.logs.crash_constraints()),
            min_last_mark=self.marks.journal_mark or self.marks.last_mark,
        )

    def uncertain_entries(self) -> list[tuple[int, int]]:
        """Entries whose survival is not yet known: a harness reads them after a restart."""
        return self.ledgers.marked_entries(Sure.MAYBE)

    def durable_entries(self) -> list[tuple[int, int]]:
        """Entries that must read back: a harness reads them after a restart, so that no
        acknowledged entry can go missing unseen."""
        return self.ledgers.marked_entries(Sure.DURABLE)

    # --- the abstract state --------------------------------------------------------------

    def compare(self, index: int, observed: AbstractState, step: str) -> list[str]:
        """Check the implementation's abstract state after step ``index`` (named ``step``),
        resolving what the model left open; raises Divergence. The ``state`` profile says
        how much of it is judged (spec/profile.py): all of it, the ledgers and deletions a
        client can learn through the protocol, or nothing."""
        if self.profile.state == "none":
            return []
        if self.fresh_run and self.outcomes is not None:
            problem = self.outcomes.problem(observed, self._recreated() | self.named_since_restart)
            if problem is not None:
                raise Divergence(index, f"after the crash: {problem}", rule="R-CRASH-SUBSET")
        notes = self._compare_ledgers(index, observed)
        if self.profile.state == "protocol":
            self._compared()
            return notes
        logs = self._real_logs(index, observed)
        maps = _observed_maps(index, observed)
        layout = Layout.of(
            observed.entry_logs, maps, observed.least_unflushed_log_id, observed.current_log_id
        )
        if self.fresh_run or self.logs.relaxed:
            _check_least_unflushed(index, observed)
            try:
                check_active(layout, self.manager)
            except LayoutProblem as exc:
                raise Divergence(index, exc.message, rule=exc.rule) from None
        if self.fresh_run:
            self._check_logs_after_stop(index, observed, logs)
            if maps is not None:
                self._check_maps_after_stop(index, maps)
            self.logs.adopt(
                logs,
                observed.current_log_id,
                observed.least_unflushed_log_id,
                maps,
                after_restart=True,
            )
            self.run.restarted(observed.least_unflushed_log_id, layout)
            self._follow(observed, logs, maps)
        elif self.logs.relaxed:
            self._check_logs_relaxed(index, observed, logs)
            if maps is not None:
                self._check_durable_maps(index, maps)
            self.logs.adopt(logs, observed.current_log_id, observed.least_unflushed_log_id, maps)
        elif self._gc_unseen() or not (self.gc_since or self.maybe_dead or self.unplaced):
            # A GC step is computed from the layout before it, when that is known exactly (in
            # process, a state after every step; with a single log, predicted between
            # states); with a log per ledger under asynchronous acks, requests ran between
            # into logs the model has not seen, and the GC is judged by the rules for it
            # (models/entrylog/layout.py).
            self.between.gc = self.gc_since
            self._judge_layout(index, observed, layout, logs, maps)
            self.maybe_dead = set()
            self.unplaced = []
        else:
            if self.maybe_dead:
                self._resolve_maybe_dead(logs)
            if self.unplaced:
                self._place_compacted(index, logs)
            self._compare_logs(index, observed, logs)
            if maps is not None:
                self._compare_maps(index, maps)
            try:
                check_ids(self.last_layout, layout, self.between, self.run)
            except LayoutProblem as exc:
                raise Divergence(index, exc.message, rule=exc.rule) from None
            self._follow(observed, logs, maps)
        self.run.learn(layout)
        if layout.current != self.last_layout.current:
            self.rotation_owed = False
        self.last_layout = layout
        self.between = Between(unsure=self.async_acks)
        self.gc_since = False
        problems = self.marks.check(
            step,
            last_mark=observed.last_mark,
            journal_mark=observed.journal_mark,
            strict=not (self.faulted or self.short_of_space or self.fresh_run or self.async_acks),
            forced=self._forced,
            persisted=self._persisted,
        )
        if problems:
            raise Divergence(index, "; ".join(problems), rule="R-MARKS")
        durable = observed.durable_last_mark
        bounded = self.faulted or self.short_of_space
        if durable is not None and not bounded and durable != observed.last_mark:
            raise Divergence(
                index,
                f"the lastMark the disk holds durably is {durable}, the bookie's is "
                f"{observed.last_mark}: a power cut now would recover from {durable} (a "
                "lastMark persisted without its fsync, or its rename never made durable)",
                rule="R-MARKS",
            )
        self._compared()
        return notes

    def _judge_layout(
        self,
        index: int,
        observed: AbstractState,
        layout: Layout,
        logs: tuple[LogView, ...],
        maps: dict[int, MapState] | None,
    ) -> None:
        """The layout against the one before, by the rules every manager keeps
        (models/entrylog/layout.py), then followed."""
        self.between.dir_full |= self.rotation_owed
        try:
            judge(self.last_layout, layout, self.between, self.manager, self.run)
        except LayoutProblem as exc:
            raise Divergence(index, exc.message, rule=exc.rule) from None
        if self.between.checkpoint:
            # A write-closed ledger whose records an active log still holds (a slot's log
            # shared with a ledger still writing) stays write-closed: its log is sealed at
            # the checkpoint after every ledger in it is (spec/protocol/write_close.md).
            active = (v for v in layout.logs.values() if v.state == "active")
            self.write_closed |= self.between.write_closed & {
                led for v in active for led in v.ledgers
            }
        self._follow(observed, logs, maps)

    def _follow(
        self, observed: AbstractState, logs: tuple[LogView, ...], maps: dict[int, MapState] | None
    ) -> None:
        waiting = tuple(v.log_id for v in observed.entry_logs if v.state == "preallocated")
        self.logs.follow(
            logs, waiting, observed.current_log_id, observed.least_unflushed_log_id, maps
        )

    def _compared(self) -> None:
        """A state was compared: the next one is judged over the steps after this one (and
        the logs it showed are settled)."""
        self.logs.settle()
        self.fresh_run = False
        self._forced = False
        self._persisted = False

    def _real_logs(self, index: int, observed: AbstractState) -> tuple[LogView, ...]:
        """The observed entry logs without the preallocated ones, which are checked here: a
        preallocated log holds no entry yet (BookKeeper's EntryLoggerAllocator creates the
        next log ahead of time; its id is judged by R-LOG-IDS, models/entrylog/layout.py)."""
        for view in observed.entry_logs:
            if view.state == "preallocated" and view.ledger_bytes:
                raise Divergence(
                    index,
                    f"entry log {view.log_id} is preallocated but holds entries",
                    rule="R-PREALLOC",
                )
        return tuple(view for view in observed.entry_logs if view.state != "preallocated")

    def _recreated(self) -> set[int]:
        """Deleted ledgers an add or fence created again (BookKeeper's answers): a state may
        list them as deleted or not."""
        return {
            ledger_id
            for ledger_id, ledger in self.ledgers.ledgers.items()
            if ledger.one(lambda h: h.recreated)
        }

    def _compare_ledgers(self, index: int, observed: AbstractState) -> list[str]:
        """The live ledgers (last entry, fence) and the deleted ones, against the ledgers'
        possible heads (models/index/ledger_index.py observe_state, R-STATE-MEMORY): the
        heads and entries that agree stay."""
        views = {view.ledger_id: view for view in observed.ledgers}
        deleted = set(observed.deleted_ledgers)
        extra = set(views) - set(self.ledgers.ledgers)
        if extra:
            raise Divergence(
                index, f"ledgers {sorted(extra)} exist; nobody wrote them", rule="R-STATE-MEMORY"
            )
        extra = deleted - set(self.ledgers.ledgers)
        if extra:
            raise Divergence(
                index,
                f"ledgers {sorted(extra)} are deleted; nobody deleted them",
                rule="R-STATE-MEMORY",
            )
        for ledger_id in sorted(self.ledgers.ledgers):
            view = views.get(ledger_id)
            listed = None if view is None else (view.last_entry, view.fenced)
            problem = self.ledgers.observe_state(ledger_id, listed, ledger_id in deleted)
            if problem is not None:
                raise Divergence(index, problem, rule="R-STATE-MEMORY")
        notes = list(self.ledgers.notes)
        self.ledgers.notes.clear()
        return notes

    def _compare_logs(
        self, index: int, observed: AbstractState, views: tuple[LogView, ...]
    ) -> None:
        """After a GC step, the layout the model computed: exactly, under in-process acks;
        under asynchronous acks the bookie's own threads flush when they please, so a rotated
        log may be seen flushed (the model learns it) and leastUnflushedLogId is followed,
        not predicted (its meaning is checked, and that it never moves back)."""
        logs = self.logs
        if logs.provisional:
            self._resolve_new_logs(index, views)
        problem = logs.resolve_copy(views, set(observed.deleted_ledgers))
        if problem is not None:
            raise Divergence(index, problem, rule="R-COMPACTION")
        if self.async_acks:
            for view in views:
                log = logs.logs.get(view.log_id)
                if log is not None and log.state == "rotated" and view.state == "flushed":
                    logs.observed_flushed(view.log_id)
        expected = tuple(log.view() for _, log in sorted(logs.logs.items()))
        if views != expected:
            raise Divergence(
                index,
                f"entry logs are {_logs(views)}; the model has {_logs(expected)}",
                rule="R-LOG-LAYOUT",
            )
        if observed.current_log_id != logs.current:
            raise Divergence(
                index,
                f"the active entry log is {observed.current_log_id}; the model has {logs.current}",
                rule="R-LOG-LAYOUT",
            )
        least = observed.least_unflushed_log_id
        if self.async_acks or logs.least_followed:
            # Followed, not predicted: never below what a state showed before (the model's
            # own count may run ahead, past ids a compaction took).
            _check_least_unflushed(index, observed)
            before = logs.least_seen if logs.least_followed else logs.least_unflushed
            if least < before:
                raise Divergence(
                    index,
                    f"leastUnflushedLogId moved backwards: {before} -> {least}",
                    rule="R-LEAST-UNFLUSHED",
                )
            logs.least_unflushed = least
        elif least != logs.least_unflushed:
            raise Divergence(
                index,
                f"leastUnflushedLogId is {least}; the model has {logs.least_unflushed}",
                rule="R-LEAST-UNFLUSHED",
            )
        logs.least_seen = least

    def _compare_maps(self, index: int, maps: dict[int, MapState]) -> None:
        """Each log's ledgers map as the model predicts it: none on the active log, exactly
        the records written before sealing on a rotated or flushed one, and on a log of an
        earlier run the map it was adopted with (or the first one seen, when no state before
        reported maps)."""
        for log_id, log in self.logs.logs.items():
            found = maps[log_id]
            if log.ledgers_map is None:
                log.ledgers_map = found
            elif found != log.ledgers_map:
                why = (
                    "an active log has no map yet"
                    if log.state == "active"
                    else "sealing writes a map of exactly the log's records, and it never changes"
                )
                raise Divergence(
                    index,
                    f"entry log {log_id} ({log.state}) has {describe_map(found)}; the model has "
                    f"{describe_map(log.ledgers_map)} ({why})",
                    rule="R-LOG-MAP",
                )

    def _check_durable_maps(self, index: int, maps: dict[int, MapState]) -> None:
        """While a fault relaxes the layout: a ledgers map that was durable never changes."""
        for log_id, log in self.logs.logs.items():
            found = maps.get(log_id)
            known = log.ledgers_map if log.map_durable else None
            if known is not None and found is not None and found != known:
                raise Divergence(
                    index,
                    f"entry log {log_id} has {describe_map(found)}; {describe_map(known)} was "
                    "durable (a sealed log's map never changes)",
                    rule="R-LOG-MAP",
                )

    def _check_maps_after_stop(self, index: int, maps: dict[int, MapState]) -> None:
        """After a restart: each ledgers map within what the crash could leave of it
        (LogConstraints.map_problem)."""
        if self.outcomes is None:
            return
        for log_id, found in sorted(maps.items()):
            problem = self.outcomes.logs.map_problem(log_id, found)
            if problem is not None:
                raise Divergence(
                    index, f"after the crash: entry log {log_id} {problem}", rule="R-LOG-CRASH"
                )

    def _resolve_maybe_dead(self, views: tuple[LogView, ...]) -> None:
        """The logs showing no record a GC step may have deleted: gone, or still there."""
        seen = {view.log_id for view in views}
        for log_id in sorted(self.maybe_dead):
            if log_id not in seen and log_id in self.logs.logs:
                self.logs.remove(log_id)
        self.maybe_dead = set()

    def _place_compacted(self, index: int, views: tuple[LogView, ...]) -> None:
        """The new logs of a whole gc step whose ids the model could not know: flushed logs
        it does not have, holding exactly the bytes each compaction moved, in order of id."""
        logs = self.logs
        new = sorted(
            view.log_id
            for view in views
            if view.log_id not in logs.logs and view.state == "flushed"
        )
        byid = {view.log_id: view for view in views}
        placed: list[int] = []
        for source, moved in self.unplaced:
            want = tuple(sorted(moved.items()))
            found = next((i for i in new if i not in placed and byid[i].ledger_bytes == want), None)
            if found is None or (placed and found < placed[-1]):
                raise Divergence(
                    index,
                    f"entry log {source} was compacted away, but no new flushed log holds "
                    f"exactly {dict(moved)} (the source's live ledgers), in compaction order",
                    rule="R-COMPACTION",
                )
            placed.append(found)
        for (_, moved), new_id in zip(self.unplaced, placed, strict=True):
            logs.take_compaction_id(new_id)
            logs.add_compacted(new_id, moved)
        self.unplaced = []

    def _resolve_new_logs(self, index: int, views: tuple[LogView, ...]) -> None:
        """The logs created since a restart, whose ids the model could not know: the
        observed logs it does not have must be as many, in increasing order, above every id
        used before."""
        logs = self.logs
        known = set(logs.logs) - set(logs.provisional)
        new = sorted(view.log_id for view in views if view.log_id not in known)
        # Above every id seen before the run's first new log (a compaction may have taken a
        # higher id since: a preallocated log still holds the lower one).
        before = logs.max_before_provisional
        reused = [log_id for log_id in new if log_id <= before and not logs.reusable(log_id)]
        reused += [log_id for log_id in new if log_id in logs.taken]
        if len(new) != len(logs.provisional) or reused:
            raise Divergence(
                index,
                f"the entry logs created since the restart have ids {new}; the model created "
                f"{len(logs.provisional)}, with ids above {before} (ids are never reused, but "
                "for those of logs a GC removed and those no log held: lastId is a hint, "
                "docs/model.md)",
                rule="R-LOG-IDS",
            )
        logs.resolve_provisional(new)

    def _check_logs_relaxed(
        self, index: int, observed: AbstractState, views: tuple[LogView, ...]
    ) -> None:
        """While a fault is active: logs never vanish, their bytes never shrink, new logs have
        new ids and hold only ledgers someone wrote, leastUnflushedLogId never moves back."""
        seen = {view.log_id: view for view in views}
        for log_id, log in self.logs.logs.items():
            view = seen.get(log_id)
            if view is None and log_id in self.logs.may_vanish:
                continue  # a GC step may have deleted it or compacted it away
            if view is None:
                raise Divergence(index, f"entry log {log_id} vanished", rule="R-LOG-LAYOUT")
            have = dict(view.ledger_bytes)
            # With a log per ledger the model's ``written`` may count records the bookie put
            # in a log the model has not seen: what the last state showed is the floor.
            floor = log.seen if self.logs.per_ledger and log.seen is not None else log.written
            for ledger, size in floor.items():
                if have.get(ledger, 0) < size:
                    raise Divergence(
                        index,
                        f"entry log {log_id} lost bytes of ledger {ledger}",
                        rule="R-LOG-LAYOUT",
                    )
        for log_id, view in seen.items():
            if log_id in self.logs.logs:
                continue
            if (
                log_id <= self.logs.max_seen_id
                and log_id not in self.logs.taken
                and not self.logs.reusable(log_id)
            ):
                raise Divergence(
                    index, f"entry log {log_id} appeared; its id was used before", rule="R-LOG-IDS"
                )
            self._check_known_ledgers(index, view)
        if observed.least_unflushed_log_id < self.logs.least_unflushed:
            raise Divergence(
                index,
                "leastUnflushedLogId moved backwards: "
                f"{self.logs.least_unflushed} -> "
                f"{observed.least_unflushed_log_id}",
                rule="R-LEAST-UNFLUSHED",
            )

    def _check_known_ledgers(self, index: int, view: LogView) -> None:
        """A log the model did not predict holds only ledgers some add named: no bytes from
        nowhere."""
        known = set(self.ledgers.ledgers)
        known |= {ledger for log in self.logs.logs.values() for ledger in log.written}
        stray = sorted(set(view.ledgers) - known)
        if stray:
            raise Divergence(
                index,
                f"entry log {view.log_id} holds bytes of ledgers {stray}, which no add wrote",
                rule="R-LOG-LAYOUT",
            )

    def _check_logs_after_stop(
        self, index: int, observed: AbstractState, views: tuple[LogView, ...]
    ) -> None:
        """After a restart, before the model adopts the recovered layout: every log the crash
        had to keep is there with at least its fsynced bytes (exactly its bytes if it was
        fsynced whole), new logs have ids never used and hold only ledgers some add wrote."""
        outcomes = self.outcomes
        if outcomes is None:
            return  # the first run: nothing came before
        constraints = outcomes.logs
        seen = {view.log_id: view for view in views}
        listed = set()
        for log_id, durable, written in constraints.logs:
            listed.add(log_id)
            view = seen.get(log_id)
            if view is None and constraints.may_be_gone(log_id):
                continue  # deleted by a GC, or compacted away: checked below
            if view is None:
                raise Divergence(
                    index, f"entry log {log_id} vanished in the crash", rule="R-LOG-CRASH"
                )
            problem = constraints.log_problem(durable, written, dict(view.ledger_bytes))
            if problem is not None:
                raise Divergence(index, f"entry log {log_id} {problem}", rule="R-LOG-CRASH")
        unlisted = set(seen) - listed
        for compaction in constraints.compactions:
            problem = compaction.problem(seen, unlisted, constraints.may_vanish)
            if problem is not None:
                raise Divergence(index, f"after the crash: {problem}", rule="R-LOG-CRASH")
        compacted_ids = constraints.compaction_ids()
        for log_id in unlisted:
            # A log the model never saw, with an id below the highest it knows: one the bookie
            # created while a fault was active and never reported (a failed creation) may be
            # found again, empty. Holding entries, it would be bytes from nowhere or an id
            # used twice (a finished compaction's new log is checked above).
            if (
                log_id <= constraints.max_known_id
                and seen[log_id].ledger_bytes
                and log_id not in compacted_ids
                and not self.logs.freed(log_id)
            ):
                raise Divergence(
                    index,
                    f"entry log {log_id} appeared holding entries; its id was used before",
                    rule="R-LOG-IDS",
                )
            self._check_known_ledgers(index, seen[log_id])
        current = observed.current_log_id
        if (
            current is not None
            and current <= constraints.max_known_id
            and not self.logs.freed(current)
        ):
            raise Divergence(
                index,
                f"the active log after recovery is {current}, an id used before the crash",
                rule="R-LOG-IDS",
            )

    def check_invariants(self) -> None:
        self.ledgers.check_invariants()
        self.logs.check_invariants()
        self.marks.check_invariants()
        assert self.status in ("up", "crashed", "stopped"), self.status
        if not self.up:
            assert not self.pending and not self.checkpoint_open
        assert self.written <= set(self.pending), (self.written, sorted(self.pending))
        assert self.synced <= set(self.pending), (self.synced, sorted(self.pending))
        assert not self.written & self.synced, (self.written, self.synced)
        for step, pending in self.pending.items():
            ledger = self.ledgers.ledgers.get(pending.ledger)
            assert ledger is not None, (step, pending)
            assert all(step in dict(head.flights) for head in ledger.heads.values()), step
        assert self.interrupted is None or self.up or isinstance(self.interrupted, Restart)


_Handle = Callable[[BookieModel, int, Any, Result], list[str]]


@attrs.frozen
class StepRule:
    """How the model takes a step of one operation (see BookieModel.step).

    - ``handle(model, index, op, result)``: check the step's answer and apply it;
    - ``lifecycle``: the step starts or ends a run on its own terms (a crash, a restart):
      ``handle`` runs whatever the bookie's status, and nothing else runs;
    - ``forces``: the step forces the journal, so it completes every pending ack, all ok,
      unless a fault is active (a journal force, a clean shutdown);
    - ``acks_synced``: the step completes exactly the acks of the groups synced (the ack
      phase of a group commit run as steps);
    - ``interrupted(model, op)``: what the step may have done when a crash cut it short
      (None: nothing that outlives the crash);
    - ``then(model, index, op, result)``: applied after the step's completions (a shutdown
      stops the bookie once its journal is forced);
    - ``writes_logs``: the step may write entry logs, so when it fails under a fault the
      model follows the layout from then on (it cannot know how far the step got).
    """

    handle: _Handle
    lifecycle: bool = False
    forces: bool = False
    acks_synced: bool = False
    interrupted: Callable[[BookieModel, Any], None] | None = None
    then: _Handle | None = None
    writes_logs: bool = False


#: Every operation's rule, checked against the registry (spec/operations.py) at import.
STEP_RULES: Mapping[type[Any], StepRule] = require_complete(
    {
        Add: StepRule(
            BookieModel._add_entry, interrupted=BookieModel._interrupted_add, writes_logs=True
        ),
        Read: StepRule(BookieModel._read_entry),
        Fence: StepRule(BookieModel._fence, interrupted=BookieModel._interrupted_fence),
        WriteClose: StepRule(BookieModel._write_close),
        Delete: StepRule(BookieModel._delete_ledger, interrupted=BookieModel._interrupted_delete),
        Checkpoint: StepRule(BookieModel._checkpoint_step, writes_logs=True),
        JournalForce: StepRule(BookieModel._journal_force, forces=True),
        JournalWrite: StepRule(BookieModel._journal_write),
        JournalSync: StepRule(BookieModel._journal_sync),
        JournalAck: StepRule(BookieModel._journal_ack, acks_synced=True),
        CheckpointFlush: StepRule(BookieModel._checkpoint_flush, writes_logs=True),
        CheckpointPersist: StepRule(BookieModel._checkpoint_persist),
        Rotate: StepRule(BookieModel._rotate, writes_logs=True),
        Preallocate: StepRule(BookieModel._preallocate, writes_logs=True),
        CheckDirs: StepRule(BookieModel._check_dirs),
        Gc: StepRule(
            BookieModel._gc_whole, interrupted=BookieModel._interrupted_gc_begin, writes_logs=True
        ),
        GcBegin: StepRule(
            BookieModel._gc_begin, interrupted=BookieModel._interrupted_gc_begin, writes_logs=True
        ),
        CompactCopy: StepRule(
            BookieModel._compact_copy,
            interrupted=BookieModel._interrupted_compact_copy,
            writes_logs=True,
        ),
        CompactFlush: StepRule(
            BookieModel._compact_flush,
            interrupted=BookieModel._interrupted_compact_flush,
            writes_logs=True,
        ),
        CompactIndex: StepRule(
            BookieModel._compact_index,
            interrupted=BookieModel._interrupted_compact_index,
            writes_logs=True,
        ),
        Crash: StepRule(BookieModel._crash, lifecycle=True),
        Restart: StepRule(BookieModel._restart, lifecycle=True),
        Shutdown: StepRule(
            BookieModel._shutdown,
            forces=True,
            interrupted=BookieModel._interrupted_shutdown,
            then=BookieModel._after_shutdown,
            writes_logs=True,
        ),
        DiskFull: StepRule(BookieModel._disk_full),
        DiskWritable: StepRule(BookieModel._disk_writable),
        AdvanceClock: StepRule(BookieModel._advance_clock),
        FailFsync: StepRule(BookieModel._fail_fsync),
        FailWrite: StepRule(BookieModel._fail_write),
        FailRead: StepRule(BookieModel._fail_read),
    },
    "the model's step rules (models/bookie/bookie.py STEP_RULES)",
)


#: The kinds of file whose faults make the entry-log layout unpredictable (a directory:
#: a new log's name may or may not have been made durable; other: a file the model does not
#: know).
LAYOUT_FILES = ("entry_log", "directory", "other")


def _file_words(kind: str) -> str:
    """A fault's aim (spec.operations.FAULT_AIMS) in words."""
    return "any file" if kind == "any" else f"a {kind.replace('_', ' ')} file"


def _died_in(op: Operation) -> str:
    return f"the machine died in the middle of {op.name}: any part of it may have reached the disk"


def _entries_fit(entries: int, record_bytes_moved: int) -> bool:
    """Whether ``entries`` records can hold ``record_bytes_moved`` bytes: none for none, and
    each record is at least its size prefix and ids (so at most those bytes: a copy of fewer
    bytes fits too)."""
    if record_bytes_moved == 0:
        return entries == 0
    return 0 < entries * RECORD_OVERHEAD_BYTES <= record_bytes_moved


def _answer(result: Result) -> str:
    """A step's answer as one word: pending, data, ok, or the error code."""
    if result.pending:
        return "pending"
    if result.error is not None:
        return result.error
    return "data" if result.data is not None else "ok"


def _check_answer(
    index: int, what: str, observed: str, allowed: set[str], shown: str, *, rule: str
) -> None:
    """Raise Divergence unless ``observed`` is one of the ``allowed`` answers; ``rule``: the
    rule of spec/adapter.md that decides it."""
    if observed not in allowed:
        raise Divergence(
            index, f"{what} answered {shown}; allowed: {', '.join(sorted(allowed))}", rule=rule
        )


def _observed_maps(index: int, observed: AbstractState) -> dict[int, MapState] | None:
    """The reported ledgers maps of the entry logs, by log id (None when the state reports
    none): one for each entry log, and none on a preallocated log. A map reported for a file
    the state does not list as an entry log is not judged (a log whose creation failed under
    a fault may be left behind, empty, and is not the bookie's)."""
    if observed.ledgers_maps is None:
        return None
    logs = {view.log_id: view for view in observed.entry_logs}
    maps: dict[int, MapState] = {
        view.log_id: (view.sealed, view.ledger_bytes)
        for view in observed.ledgers_maps
        if view.log_id in logs
    }
    if set(maps) != set(logs):
        raise Divergence(
            index,
            f"no ledgers map is reported for entry logs {sorted(set(logs) - set(maps))}",
            rule="R-LOG-MAP",
        )
    for log_id, view in logs.items():
        if view.state == "preallocated" and maps[log_id] != NO_MAP:
            raise Divergence(
                index,
                f"entry log {log_id} is preallocated but has {describe_map(maps[log_id])}",
                rule="R-PREALLOC",
            )
    return maps


def _check_least_unflushed(index: int, observed: AbstractState) -> None:
    """What leastUnflushedLogId means, whatever the model predicted: no log below it is
    still unflushed (active or rotated), or a checkpoint would count it as durable."""
    least = observed.least_unflushed_log_id
    below = [
        view.log_id
        for view in observed.entry_logs
        if view.state in ("active", "rotated") and view.log_id < least
    ]
    if below:
        raise Divergence(
            index,
            f"leastUnflushedLogId is {least}, but entry logs {below} below it are not flushed",
            rule="R-LEAST-UNFLUSHED",
        )


def _ids(ids: frozenset[int]) -> str:
    return ", ".join(str(i) for i in sorted(ids)) or "none"


def _logs(views: Sequence[object]) -> str:
    return "[" + "; ".join(str(view) for view in views) + "]"
