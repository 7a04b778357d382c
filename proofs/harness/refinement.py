"""The refinement harness: run one scenario against an implementation and the model, step by
step, and stop at the first difference.

For every step the harness

1. runs it on the system under test (SUT) and records what it answered, which earlier adds
   and fences got their ack during it, and the SUT's abstract state after it (its
   abstraction function: ``inspect``);
2. judges the step (proofs/harness/judge.py, the same judge the trace replay uses): the model
   (models/bookie/bookie.py) raises Divergence when the answer is not one it allows, and
   otherwise commits to it (nondeterminism is resolved by observation: an unacknowledged add
   that survived a crash must stay from then on), then compares the abstract state with
   its own; the properties of spec/properties.md are checked over the whole history so far
   (spec/properties.py); the invariants of the model and of the property monitor hold;
3. checks the invariants of the SUT.

After every restart the harness reads back each entry whose survival the crash left open,
so the model learns what survived, and each entry that must have survived (the reads are
ordinary steps of the trace).

The SUT is reached through :class:`SystemUnderTest`, narrow on purpose: ``run`` one
operation, ``inspect`` the abstract state. :class:`InProcessBookie` is bkref's own Bookie on
the simulated disk (models/fs/simdisk.py), which can also crash in the middle of a step; a
bookie in another process, speaking spec/adapter.md, fits the same protocol (without
crashes in the middle of a step). How InProcessBookie runs each operation is one table,
:data:`IN_PROCESS`, checked against the operation registry (spec/operations.py) at import.

The verdict is a :class:`RefinementFailure` carrying the trace up to the failing step
(spec/trace.md): ``bkref check-trace`` replays it against the model, ``bkref explain`` tells
it in words.
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import pickle
import random
import tempfile
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs

from impl.bookie.bookie import Ack, Bookie, BookieState
from impl.bookie.gc import GcStats, PhaseResult
from impl.bookie.state import EntryLogInfo
from impl.clock import ManualClock
from impl.config.config import ServerConfig, load_config
from impl.format.names import (
    COMPACTED_SUFFIX,
    COMPACTING_SUFFIX,
    DELETED_FILE_NAME,
    INDEX_DIR_NAME,
    JOURNAL_FILE_SUFFIX,
    LAST_ID_FILE_NAME,
    LAST_MARK_FILE_NAME,
    LOG_SUFFIX,
    TMP_SUFFIX,
    log_file_name,
)
from impl.limits import TEST_LIMITS, TEST_SETTINGS, Limits
from models.bookie.bookie import BookieModel, Divergence, ModelConfig
from models.fs.simdisk import SimDisk
from proofs.harness.disk_check import DiskCheck
from proofs.harness.disk_view import DiskView
from proofs.harness.judge import Judge
from spec.crash import LoseUnsynced
from spec.errors import BkrefError, BookieError
from spec.fs import FsyncFailure
from spec.ids import EntryId, LedgerId
from spec.operations import (
    CRASHED,
    OK,
    PENDING,
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
    failed,
    require_complete,
)
from spec.properties import PropertyMonitor
from spec.state import AbstractState, LedgerView, LogView
from spec.trace import Step, Trace, TraceHeader, write_trace

#: Where the bookie's directories are on the simulated disk (the bookie crash check runs on
#: the same layout).
JOURNAL_DIR = "/journal"
LEDGER_DIRS = ("/ledgers0", "/ledgers1")


def fresh_disk(fsync_failure: FsyncFailure | str = FsyncFailure.REVERT) -> SimDisk:
    """The empty disk a bookie first starts on: the journal and ledger directories, durable.
    ``fsync_failure`` says what a failed fsync leaves (SimDisk, spec.fs.FsyncFailure)."""
    disk = SimDisk(fsync_failure=fsync_failure)
    for path in (JOURNAL_DIR, *LEDGER_DIRS):
        disk.mkdir(path)
    disk.fsync_dir("/")
    return disk


#: The configuration of the refinement runs: the checks' TEST_SETTINGS (impl/limits.py: tiny
#: entry logs so they rotate every few adds, no group-commit wait, the scenario decides when
#: the journal is forced) on the simulated disk's directories.
SMALL_SETTINGS: Mapping[str, str] = {
    "journalDirectories": JOURNAL_DIR,
    "ledgerDirectories": ",".join(LEDGER_DIRS),
    **TEST_SETTINGS,
}


#: Disk usage thresholds at one half, for runs that fill one ledger directory (DiskFull
#: ``active_log_dir``): the directory the disk check calls full then has as much room left
#: as it uses, enough to seal the active log there (at BookKeeper's 0.95 a directory of a
#: few KiB has a few dozen bytes left, and sealing finds no space).
#: The entry-log managers a run may be fixed to, as settings over the drawn knobs
#: (``bkref campaign --manager``, ``bkref replay --manager``, the per-ledger and slots
#: refinement tests).
#: ``per-ledger``: BookKeeper's entry log per ledger, with at most two logs active at once so
#: that short runs evict (a third ledger's first add seals the least recently used one).
#: ``slots``: bkref's own slots manager (impl/entrylog/slots.py), two slots per ledger
#: directory (four active logs over LEDGER_DIRS) and at most two ledgers mapped, so that
#: short runs forget mappings (a third ledger's add makes the least recent one take the next
#: slot at its next add) and ledgers share slots' logs.
MANAGER_SETTINGS: Mapping[str, Mapping[str, str]] = {
    "single": {},
    "per-ledger": {"entryLogPerLedgerEnabled": "true", "maximumNumberOfActiveEntryLogs": "2"},
    "slots": {"entryLogSlotsPerLedgerDir": "2", "maximumNumberOfActiveEntryLogs": "2"},
}
HALF_FULL_THRESHOLDS: Mapping[str, str] = {
    "diskUsageThreshold": "0.5",
    "diskUsageWarnThreshold": "0.5",
    "diskUsageLwmThreshold": "0.5",
}

#: The wall clock an InProcessBookie's runs read unless told otherwise (ManualClock's).
DEFAULT_WALL_MS = 1_700_000_000_000

#: Refinement crashes a copy of the disk every this many steps (Refinement.shadow_crash).
SHADOW_CRASH_EVERY = 25

#: A shadow crash reads back, of the entries that must have survived, the newest this many
#: of each ledger (every uncertain one too): the entries a loss window can hold are the
#: recent ones, and the real restarts read back every one.
SHADOW_PROBE_PER_LEDGER = 8

#: The simulated disk checks its own invariants every this many steps (and while the bookie
#: is down): its check reads every byte on the disk.
DISK_CHECK_EVERY = 16


class SystemUnderTest(Protocol):
    """What the harness needs of an implementation."""

    def run(
        self, index: int, op: Operation, crash_after_ops: int | None
    ) -> tuple[Result, tuple[Completion, ...]]:
        """Run step ``index``; return its answer and the acks completed meanwhile.
        ``crash_after_ops``: let the step issue that many durable-state operations, then
        die (the answer is then ``crashed``); None runs it whole."""
        ...

    def inspect(self) -> AbstractState | None:
        """The abstract state, or None while the bookie is down."""
        ...

    def fired_faults(self) -> tuple[FiredFault, ...]:
        """The injected faults that took effect since the last call (() for a system that
        injects none)."""
        ...

    def check_invariants(self) -> None: ...


class RefinementFailure(AssertionError):
    """The implementation and the model (or a property) disagree. ``trace`` holds every step
    up to and including the failing one.

    Printed, it shows the message, the last steps of the trace, and where the whole trace was
    saved (``$BKREF_TRACE_DIR``, or ``bkref-traces`` in the temporary directory) so that it
    can be replayed with ``bkref check-trace`` and told with ``bkref explain``."""

    #: Trace lines shown in the message (the saved file has them all).
    SHOWN_LINES = 30

    def __init__(self, message: str, trace: Trace, *, replayable: bool = False) -> None:
        """``replayable``: the model or a property refused a step, so the trace alone fails
        ``bkref check-trace`` the same way (not so for the disk check, which reads the files,
        or an assertion of the implementation)."""
        super().__init__(message)
        self.message = message
        self.trace = trace
        self.replayable = replayable
        self._saved: str | None = None

    def save(self) -> str:
        """Write the trace to a file named after its content; return the path."""
        if self._saved is None:
            text = write_trace(self.trace)
            directory = os.environ.get("BKREF_TRACE_DIR") or os.path.join(
                tempfile.gettempdir(), "bkref-traces"
            )
            os.makedirs(directory, exist_ok=True)
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
            path = os.path.join(directory, f"refinement-{digest}.jsonl")
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
            self._saved = path
        return self._saved

    def __str__(self) -> str:
        lines = write_trace(self.trace).splitlines()
        shown = lines[-self.SHOWN_LINES :]
        cut = "" if len(shown) == len(lines) else f"(the last {len(shown)} lines)\n"
        path = self.save()
        return (
            f"{self.message}\n\ntrace {cut}" + "\n".join(shown) + f"\n\nwhole trace: {path}\n"
            f"replay: bkref check-trace {path}\nexplain: bkref explain {path}"
        )


# --- bkref's own bookie on the simulated disk ----------------------------------------------


class _CrashNow(BaseException):
    """The machine dies here. A BaseException, so that no cleanup handler of the bookie
    (``except Exception``) can swallow it and carry on writing after the crash."""


def log_view(info: EntryLogInfo) -> LogView:
    """One entry log of the Bookie's ``inspect`` in the shared vocabulary."""
    return LogView(info.log_id, info.state, tuple((int(k), v) for k, v in info.ledger_bytes))


def abstract_state(
    state: BookieState, views: dict[int, tuple[EntryLogInfo, LogView]] | None = None
) -> AbstractState:
    """The abstraction function: the Bookie's ``inspect`` in the shared vocabulary.
    ``views``: the LogView made of each log's info last time, reused while the bookie
    reports the very same (immutable) info object; updated here."""
    if views is None:
        entry_logs = tuple(log_view(info) for info in state.entry_logs)
    else:
        made = []
        for info in state.entry_logs:
            known = views.get(info.log_id)
            if known is None or known[0] is not info:
                known = views[info.log_id] = info, log_view(info)
            made.append(known[1])
        entry_logs = tuple(made)
    return AbstractState(
        entry_logs=entry_logs,
        least_unflushed_log_id=state.least_unflushed_log_id,
        last_mark=(state.last_mark.journal_id, state.last_mark.offset),
        journal_mark=(state.journal_mark.journal_id, state.journal_mark.offset),
        current_log_id=state.current_log_id,
        ledgers=tuple(
            LedgerView(info.ledger_id, info.last_entry, info.fenced) for info in state.ledgers
        ),
        deleted_ledgers=tuple(state.deleted_ledgers),
    )


def file_kind(path: str) -> str:
    """The kind of bookie file (spec.operations.FILE_KINDS) at normalised ``path`` on the
    simulated disk: by its name, a temporary file by the name it replaces; the files of the
    ledger index and the deleted-ledgers list are the index."""
    parts = path.split("/")
    name = parts[-1]
    if name.endswith(TMP_SUFFIX):
        name = name[: -len(TMP_SUFFIX)]
    if INDEX_DIR_NAME in parts[:-1] or name == DELETED_FILE_NAME:
        return "index"
    if name.endswith(JOURNAL_FILE_SUFFIX):
        return "journal"
    if name == LAST_MARK_FILE_NAME:
        return "last_mark"
    if name == LAST_ID_FILE_NAME:
        return "last_id"
    if name.endswith((COMPACTING_SUFFIX, COMPACTED_SUFFIX)):
        return "compaction"
    if LOG_SUFFIX in name:
        return "entry_log"
    return "other"


@attrs.frozen
class _OfKind:
    """A path filter: the files of one kind (a class, not a closure: the simulated disk that
    holds it is copied by pickling for the shadow crashes)."""

    kind: str

    def __call__(self, path: str) -> bool:
        return file_kind(path) == self.kind


def _aimed_at(kind: str) -> Callable[[str], bool] | None:
    """The paths a fault aimed at ``kind`` (spec.operations.FAULT_AIMS) fires on."""
    return None if kind == "any" else _OfKind(kind)


class InProcessBookie:
    """bkref's Bookie on a SimDisk, driven one explicit step at a time (no threads). It is
    opened with TEST_LIMITS (impl/limits.py) by default, so that the bounds of the engine
    (read handles, scan and replay windows, index merges, ack pruning) are reached within a
    few steps of a scenario."""

    def __init__(
        self,
        settings: Mapping[str, str],
        *,
        seed: int = 0,
        opener: Callable[..., Bookie] = Bookie.open,
        limits: Limits = TEST_LIMITS,
        fsync_failure: FsyncFailure | str = FsyncFailure.REVERT,
        disk: SimDisk | None = None,
        wall_ms: int = DEFAULT_WALL_MS,
    ) -> None:
        """``disk``: start down on that disk (a machine that just died: its next step is a
        crash) instead of opening a bookie on a fresh disk (whose ``fsync_failure`` mode is
        the one given). ``wall_ms``: the wall clock every run of the bookie reads (journal
        ids start from it)."""
        self.wall_ms = wall_ms
        self.disk = fresh_disk(fsync_failure) if disk is None else disk
        self.settings = dict(settings)
        self.config: ServerConfig = load_config(
            None, "refinement", [f"{key}={value}" for key, value in settings.items()]
        )
        self._seed = seed
        self._opener = opener
        self.limits = limits
        self._acks: dict[int, Ack] = {}
        self._crash_budget: int | None = None
        #: The steps whose acks were done when the machine died: code that runs after the
        #: crash point (cleanup handlers) completes nothing a client could see.
        self._done_at_crash: set[int] | None = None
        self._steps_since_disk_check = 0
        #: Per entry log: the info the bookie last reported and its LogView (abstract_state).
        self._log_views: dict[int, tuple[EntryLogInfo, LogView]] = {}
        #: Why the last restart failed (a RecoveryError's message), for the failure message.
        self.last_error: str | None = None
        self.bookie: Bookie | None = self._open() if disk is None else None

    def shadow(self) -> InProcessBookie:
        """A second machine on a copy of this one's disk, down, as if it had died now: the
        harness crashes and recovers it to see what a crash here would leave, and this
        machine carries on untouched."""
        return InProcessBookie(
            self.settings,
            seed=self._seed,
            opener=self._opener,
            limits=self.limits,
            disk=self.disk.copy(),
            wall_ms=self.wall_ms,
        )

    def disk_view(self) -> DiskView:
        """The independent reader of this machine's bookie files
        (proofs/harness/disk_view.py)."""
        journals = self.config.journal_directories
        return DiskView(self.disk, self.config.ledger_directories, journals[0])

    def _open(self) -> Bookie:
        #: The clock of this run (advance_clock moves it).
        self.clock = ManualClock(wall_ms=self.wall_ms)
        return self._opener(
            self.disk,
            self.config,
            clock=self.clock,
            rng=random.Random(self._seed),
            limits=self.limits,
        )

    # --- SystemUnderTest ----------------------------------------------------------------

    def run(
        self, index: int, op: Operation, crash_after_ops: int | None
    ) -> tuple[Result, tuple[Completion, ...]]:
        if crash_after_ops is not None:
            self._arm(crash_after_ops)
        try:
            result = self._dispatch(index, op)
        except _CrashNow:
            result = CRASHED
        finally:
            if crash_after_ops is not None and self.disk.on_operation is not None:
                self.disk.on_operation = None
                self._crash_budget = None
        completed = self._completions(self._done_at_crash if result.crashed else None)
        if result.crashed:
            self.bookie = None
            self._acks.clear()
        self._done_at_crash = None
        return result, completed

    def inspect(self) -> AbstractState | None:
        if self.bookie is None:
            return None
        with self.disk.faults_paused():  # the observer's reads use up no fault
            return abstract_state(self.bookie.inspect(), self._log_views)

    def fired_faults(self) -> tuple[FiredFault, ...]:
        fired: list[FiredFault] = []
        for op, path in self.disk.take_fired():
            if op == "fsync_dir":
                fault = FiredFault("fsync", "directory")
            else:
                fault = FiredFault(op, file_kind(path))
            if fault not in fired:
                fired.append(fault)
        return tuple(fired)

    def check_invariants(self) -> None:
        """The bookie's invariants after every step; the simulated disk's (which cost time
        in proportion to every byte on it) every DISK_CHECK_EVERY steps and around crashes."""
        if self.bookie is not None:
            with self.disk.faults_paused():
                self.bookie.check_invariants()
        self._steps_since_disk_check += 1
        if self._steps_since_disk_check >= DISK_CHECK_EVERY or self.bookie is None:
            self.disk.check_invariants()
            self._steps_since_disk_check = 0

    # --- the steps ----------------------------------------------------------------------

    def _arm(self, after_ops: int) -> None:
        self._crash_budget = after_ops

        def hook(_kind: str) -> None:
            assert self._crash_budget is not None
            if self._crash_budget <= 0:
                if self._done_at_crash is None:
                    self._done_at_crash = {s for s, ack in self._acks.items() if ack.done}
                raise _CrashNow  # and again for every later operation: the machine is dead
            self._crash_budget -= 1

        self.disk.on_operation = hook

    def _dispatch(self, index: int, op: Operation) -> Result:
        run = IN_PROCESS[type(op)]
        if not run.needs_bookie:
            return run.do(self, index, op)
        assert self.bookie is not None, f"{op.name} while the bookie is down"
        try:
            return run.do(self, index, op)
        except BookieError as exc:
            return failed(exc.code)

    def _bookie(self) -> Bookie:
        """The running bookie (_dispatch checked that there is one)."""
        assert self.bookie is not None
        return self.bookie

    def _crash(self, _index: int, op: Crash) -> Result:
        self.disk.on_operation = None
        self.disk.crash(op.plan)
        self.disk.clear_failures()
        self.bookie = None
        self._acks.clear()
        return OK

    def _restart(self, _index: int, _op: Restart) -> Result:
        # A restart comes up on a healthy disk with room: the faults were of the last run.
        self.disk.clear_failures()
        for directory in (JOURNAL_DIR, *LEDGER_DIRS):
            self.disk.set_capacity(directory, None)
        try:
            self.bookie = self._open()
        except BkrefError as exc:
            # Recovery refused the disk: an answer like any other (the model judges it; the
            # trace records it, so the verdict replays), with the reason kept for the message.
            self.last_error = f"{type(exc).__name__}: {exc}"
            return failed("io_error")
        return attrs.evolve(OK, replayed=self.bookie.recovery.records_replayed)

    def _add(self, index: int, op: Add) -> Result:
        ack = self._bookie().add_entry(LedgerId(op.ledger), EntryId(op.entry), op.key, op.data)
        return self._track(index, ack)

    def _fence(self, index: int, op: Fence) -> Result:
        return self._track(index, self._bookie().fence(LedgerId(op.ledger), op.key))

    def _read(self, _index: int, op: Read) -> Result:
        return Result(data=self._bookie().read_entry(LedgerId(op.ledger), EntryId(op.entry)))

    def _write_close(self, _index: int, op: WriteClose) -> Result:
        self._bookie().write_close(LedgerId(op.ledger), op.key)
        return OK

    def _delete(self, _index: int, op: Delete) -> Result:
        self._bookie().delete_ledger(LedgerId(op.ledger))
        return OK

    def _shutdown(self, _index: int, _op: Shutdown) -> Result:
        try:
            self._bookie().shutdown()
        finally:
            self.bookie = None
        return OK

    def _checkpoint(self, _index: int, _op: Checkpoint) -> Result:
        self._bookie().checkpoint()
        return OK

    def _journal_force(self, _index: int, _op: JournalForce) -> Result:
        self._bookie().journal_force()
        return OK

    def _journal_write(self, _index: int, _op: JournalWrite) -> Result:
        self._bookie().journal_write()
        return OK

    def _journal_sync(self, _index: int, _op: JournalSync) -> Result:
        self._bookie().journal_sync()
        return OK

    def _journal_ack(self, _index: int, _op: JournalAck) -> Result:
        self._bookie().journal_release_acks()
        return OK

    def _checkpoint_flush(self, _index: int, _op: CheckpointFlush) -> Result:
        self._bookie().checkpoint_flush()
        return OK

    def _checkpoint_persist(self, _index: int, _op: CheckpointPersist) -> Result:
        self._bookie().checkpoint_persist()
        return OK

    def _rotate(self, _index: int, _op: Rotate) -> Result:
        self._bookie().rotate_log()
        return OK

    def _preallocate(self, _index: int, _op: Preallocate) -> Result:
        self._bookie().preallocate()
        return OK

    def _check_dirs(self, _index: int, _op: CheckDirs) -> Result:
        self._bookie().check_dirs()
        return OK

    def _gc(self, _index: int, op: Gc) -> Result:
        return Result(gc=_gc_report(self._bookie().gc(op.force), candidates=False))

    def _gc_begin(self, _index: int, op: GcBegin) -> Result:
        return Result(gc=_gc_report(self._bookie().gc_begin(op.force), candidates=True))

    def _compact_copy(self, _index: int, _op: CompactCopy) -> Result:
        return Result(phase=_phase_report(self._bookie().compact_copy()))

    def _compact_flush(self, _index: int, _op: CompactFlush) -> Result:
        return Result(phase=_phase_report(self._bookie().compact_flush()))

    def _compact_index(self, _index: int, _op: CompactIndex) -> Result:
        return Result(phase=_phase_report(self._bookie().compact_index()))

    def _fail_fsync(self, _index: int, op: FailFsync) -> Result:
        if op.file == "directory":
            self.disk.fail_next("fsync_dir")
        elif op.file == "any":
            self.disk.fail_next("fsync")
            self.disk.fail_next("fsync_dir")
        else:
            self.disk.fail_next("fsync", match=_aimed_at(op.file))
        return OK

    def _fail_write(self, _index: int, op: FailWrite) -> Result:
        self.disk.fail_next("write", match=_aimed_at(op.file))
        return OK

    def _fail_read(self, _index: int, op: FailRead) -> Result:
        self.disk.fail_next("read", match=_aimed_at(op.file))
        return OK

    def _used(self, directory: str) -> int:
        prefix = directory + "/"
        return sum(
            len(data)
            for path, data in self.disk.current_snapshot().items()
            if path.startswith(prefix)
        )

    def _disk_full(self, _index: int, op: DiskFull) -> Result:
        if op.where == "journal_dir":
            self.disk.set_capacity(JOURNAL_DIR, self._used(JOURNAL_DIR))
            return OK
        if op.where == "ledger_dirs":
            for directory in LEDGER_DIRS:
                self.disk.set_capacity(directory, self._used(directory))
        else:
            # The active log's directory crosses the disk usage threshold with a little room
            # left (a real disk is seldom full to the byte): what is written there already can
            # still be sealed, and the disk check moves new logs to the other directory.
            directory = self._active_log_dir()
            used = self._used(directory)
            # Strictly above the threshold, as the check compares; a nearly empty directory
            # gets no room at all.
            room = math.ceil(used / self.config.disk_usage_threshold) - 1
            self.disk.set_capacity(directory, max(used, room))
        self._bookie().check_dirs()  # the disk checker notices
        return OK

    def _active_log_dir(self) -> str:
        """The ledger directory of the active entry log (the first one when there is none)."""
        current = self._bookie().inspect().current_log_id
        if current is not None:
            name = log_file_name(current)
            for directory in LEDGER_DIRS:
                if self.disk.exists(f"{directory}/current/{name}"):
                    return directory
        return LEDGER_DIRS[0]

    def _advance_clock(self, _index: int, op: AdvanceClock) -> Result:
        """The run's clock moves on, and so does the clock later runs start from."""
        self.clock.advance_ms(op.seconds * 1000)
        self.wall_ms += op.seconds * 1000
        return OK

    def _disk_writable(self, _index: int, _op: DiskWritable) -> Result:
        for directory in (JOURNAL_DIR, *LEDGER_DIRS):
            self.disk.set_capacity(directory, None)
        self._bookie().check_dirs()  # the disk checker notices
        return OK

    def _track(self, index: int, ack: Ack) -> Result:
        if ack.done:
            error = ack.error
            return OK if error is None else failed(error.code)
        self._acks[index] = ack
        return PENDING

    def _completions(self, only: set[int] | None) -> tuple[Completion, ...]:
        done = [
            (step, ack)
            for step, ack in sorted(self._acks.items())
            if ack.done and (only is None or step in only)
        ]
        for step, _ in done:
            del self._acks[step]
        return tuple(
            Completion(step, None if ack.error is None else ack.error.code) for step, ack in done
        )


def _gc_report(stats: GcStats, *, candidates: bool) -> GcReport:
    """The Bookie's GcStats in the trace's terms (spec/operations.py GcReport)."""
    return GcReport(
        stats.compaction,
        stats.logs_deleted,
        stats.logs_compacted,
        stats.entries_moved,
        stats.bytes_reclaimed,
        tuple(int(log_id) for log_id in stats.candidates) if candidates else (),
    )


def _phase_report(result: PhaseResult) -> PhaseReport:
    """The Bookie's PhaseResult in the trace's terms (spec/operations.py PhaseReport)."""
    return PhaseReport(
        result.phase,
        None if result.source_log is None else int(result.source_log),
        None if result.new_log is None else int(result.new_log),
        result.entries_moved,
    )


@attrs.frozen
class InProcessRun:
    """How InProcessBookie runs one operation: ``do(sut, index, op)`` returns the answer;
    ``needs_bookie``: the operation goes to the running bookie, and a typed failure of the
    bookie (spec.errors.BookieError) is its answer (a crash and a restart act on the machine
    and its disk instead)."""

    do: Callable[[InProcessBookie, int, Any], Result]
    needs_bookie: bool = True


#: Every operation as InProcessBookie runs it, checked against the registry at import.
IN_PROCESS: Mapping[type[Any], InProcessRun] = require_complete(
    {
        Add: InProcessRun(InProcessBookie._add),
        Read: InProcessRun(InProcessBookie._read),
        Fence: InProcessRun(InProcessBookie._fence),
        WriteClose: InProcessRun(InProcessBookie._write_close),
        Delete: InProcessRun(InProcessBookie._delete),
        Checkpoint: InProcessRun(InProcessBookie._checkpoint),
        JournalForce: InProcessRun(InProcessBookie._journal_force),
        JournalWrite: InProcessRun(InProcessBookie._journal_write),
        JournalSync: InProcessRun(InProcessBookie._journal_sync),
        JournalAck: InProcessRun(InProcessBookie._journal_ack),
        CheckpointFlush: InProcessRun(InProcessBookie._checkpoint_flush),
        CheckpointPersist: InProcessRun(InProcessBookie._checkpoint_persist),
        Rotate: InProcessRun(InProcessBookie._rotate),
        Preallocate: InProcessRun(InProcessBookie._preallocate),
        CheckDirs: InProcessRun(InProcessBookie._check_dirs),
        Gc: InProcessRun(InProcessBookie._gc),
        GcBegin: InProcessRun(InProcessBookie._gc_begin),
        CompactCopy: InProcessRun(InProcessBookie._compact_copy),
        CompactFlush: InProcessRun(InProcessBookie._compact_flush),
        CompactIndex: InProcessRun(InProcessBookie._compact_index),
        Crash: InProcessRun(InProcessBookie._crash, needs_bookie=False),
        Restart: InProcessRun(InProcessBookie._restart, needs_bookie=False),
        Shutdown: InProcessRun(InProcessBookie._shutdown),
        DiskFull: InProcessRun(InProcessBookie._disk_full),
        DiskWritable: InProcessRun(InProcessBookie._disk_writable),
        AdvanceClock: InProcessRun(InProcessBookie._advance_clock),
        FailFsync: InProcessRun(InProcessBookie._fail_fsync),
        FailWrite: InProcessRun(InProcessBookie._fail_write),
        FailRead: InProcessRun(InProcessBookie._fail_read),
    },
    "the in-process system under test (proofs/harness/refinement.py IN_PROCESS)",
)


# --- the harness ---------------------------------------------------------------------------


def _deep_copy(judge: Judge) -> Judge:
    """A deep copy of the judge (its model and property monitor): a pickle round trip, the
    same copy ``copy.deepcopy`` makes of these plain data objects (enum members and shared
    references kept as they are), three times faster."""
    twin = pickle.loads(pickle.dumps(judge, protocol=pickle.HIGHEST_PROTOCOL))
    assert isinstance(twin, Judge), type(twin)
    return twin


def _newest_of_each_ledger(entries: list[tuple[int, int]], count: int) -> list[tuple[int, int]]:
    """Of (ledger, entry) pairs, the ``count`` with the highest entry ids of each ledger, in
    the order given."""
    by_ledger: dict[int, list[int]] = {}
    for ledger, entry in entries:
        by_ledger.setdefault(ledger, []).append(entry)
    kept = {(ledger, entry) for ledger, ids in by_ledger.items() for entry in sorted(ids)[-count:]}
    return [pair for pair in entries if pair in kept]


class Refinement:
    """One scenario: the SUT, the model, the property monitor and the trace so far."""

    def __init__(
        self,
        sut: SystemUnderTest,
        settings: Mapping[str, str],
        *,
        source: str = "bkref in-process Bookie on the simulated disk",
        probe_after_restart: bool = True,
        probe_durable: bool = True,
        disk_check: bool = True,
        shadow_crash_every: int = SHADOW_CRASH_EVERY,
    ) -> None:
        """``disk_check``: for an InProcessBookie, check its files after every step
        (proofs/harness/disk_check.py); ``shadow_crash_every``: every this many steps, crash
        a copy of its disk and check the recovery (:meth:`shadow_crash`; 0: never)."""
        assert shadow_crash_every >= 0, shadow_crash_every
        self.sut = sut
        self.model = BookieModel(ModelConfig.from_settings(settings))
        self.monitor = PropertyMonitor()
        self.judge = Judge(self.model, self.monitor)
        self.header = TraceHeader(config=tuple(sorted(settings.items())), source=source)
        self.steps: list[Step] = []
        self.probe_after_restart = probe_after_restart
        #: Also read back every entry that must have survived (off for short teaching
        #: traces that read back by hand).
        self.probe_durable = probe_durable
        self.notes: list[list[str]] = []
        in_process = isinstance(sut, InProcessBookie)
        self.disk_check: DiskCheck | None = None
        if disk_check and isinstance(sut, InProcessBookie):
            self.disk_check = DiskCheck(sut.disk_view())
        self.shadow_crash_every = shadow_crash_every if in_process else 0
        self._since_shadow = 0
        #: Shadow crashes run so far: crash states recovered and judged beside the real ones.
        self.shadow_crashes = 0
        #: Of the durable entries, probe only the newest this many of each ledger (None: all).
        self.probe_per_ledger: int | None = None
        self._check_first_state()

    def _check_first_state(self) -> None:
        state = self.sut.inspect()
        if state is not None:
            try:
                self.model.compare(-1, state, "restart")
            except Divergence as exc:
                raise RefinementFailure(
                    f"before the first step: {exc.message}", self.trace()
                ) from exc
        if self.disk_check is not None:
            try:
                self.disk_check.check_first_state(self.model)
            except Divergence as exc:
                raise RefinementFailure(
                    f"before the first step: {exc.message}", self.trace()
                ) from exc

    def trace(self) -> Trace:
        return Trace(self.header, tuple(self.steps))

    def run(
        self,
        op: Operation,
        *,
        crash_after_ops: int | None = None,
        inspect: bool = True,
        probing: bool = False,
    ) -> Step:
        """Run one step everywhere and check it; raises RefinementFailure. ``inspect=False``
        skips the abstract state for this step (the post-restart reads: the state is
        compared once after the last of them). ``probing``: a read of :meth:`probe`; reads
        change nothing on the disk, so the invariants of the model, the monitor, the bookie
        and its files are checked after the probe's last read (``inspect``) only, and the
        reads do not count towards the next shadow crash."""
        index = len(self.steps)
        try:
            result, completed = self.sut.run(index, op, crash_after_ops)
            faults = self.sut.fired_faults()
            state = None if result.crashed or not inspect else self.sut.inspect()
            if state is not None and self.disk_check is not None:
                # What a power cut now would leave of lastMark, by the harness's own reader.
                # and each entry log's ledgers map as its file holds it.
                view = self.disk_check.view
                durable = view.durable_last_mark() or (0, 0)
                state = attrs.evolve(
                    state, durable_last_mark=durable, ledgers_maps=view.ledgers_maps()
                )
        except AssertionError as exc:
            raise self._own_assertion(index, op, exc) from exc
        step = Step(index, op, result, completed, state, faults)
        self.steps.append(step)
        light = probing and not inspect
        judgement = self.judge.judge(step, check_invariants=not light)
        divergence = judgement.divergence
        if divergence is not None:
            reason = getattr(self.sut, "last_error", None) if isinstance(op, Restart) else None
            tag = f" [{divergence.rule}]" if divergence.rule else ""
            raise RefinementFailure(
                f"step {index} ({op.name}): {divergence.message}{tag}"
                + (f" ({reason})" if reason else ""),
                self.trace(),
                replayable=True,
            ) from divergence
        self.notes.append(list(judgement.notes))
        if judgement.violations:
            text = "; ".join(
                f"property {v.prop} at step {v.step}: {v.message}" for v in judgement.violations
            )
            raise RefinementFailure(text, self.trace(), replayable=True)
        if light:
            return step
        try:
            self.sut.check_invariants()
        except AssertionError as exc:
            raise self._own_assertion(index, op, exc) from exc
        if self.disk_check is not None:
            try:
                self.disk_check.check(index, op, result, self.model)
            except Divergence as exc:
                raise RefinementFailure(
                    f"step {index} ({op.name}): {exc.message}", self.trace()
                ) from exc
        if isinstance(op, Restart) and result.ok and self.probe_after_restart:
            self.probe()
        if probing:
            return step
        self._since_shadow += 1
        if self.shadow_crash_every and self._since_shadow >= self.shadow_crash_every:
            self.shadow_crash()
        return step

    def shadow_crash(self) -> None:
        """Crash a copy of the disk now (LoseUnsynced), recover a bookie on it and check it
        against the model's crash outcomes, with copies of the model and the monitor, and
        read back every entry that may have survived and the newest of those that must have
        (SHADOW_PROBE_PER_LEDGER of each ledger); then carry on with the real
        run, undisturbed. Skipped while the bookie is down or a crash is due. A failure is a
        RefinementFailure whose trace is this run's so far plus the shadow crash, restart and
        reads: it replays like any trace."""
        sut = self.sut
        if not isinstance(sut, InProcessBookie) or sut.bookie is None:
            return
        if not self.model.up or self.model.interrupted is not None:
            return
        self._since_shadow = 0
        self.shadow_crashes += 1
        twin = copy.copy(self)
        twin.sut = sut.shadow()
        twin.judge = _deep_copy(self.judge)
        twin.model, twin.monitor = twin.judge.model, twin.judge.monitor
        twin.judge.promises.counts.clear()  # what the copy's reads observe, counted below
        twin.steps = list(self.steps)
        twin.notes = list(self.notes)
        twin.shadow_crash_every = 0
        twin.probe_per_ledger = SHADOW_PROBE_PER_LEDGER
        if self.disk_check is not None:
            twin.disk_check = DiskCheck(twin.sut.disk_view())
            twin.disk_check.named = set(self.disk_check.named)
            twin.disk_check.inherited = dict(self.disk_check.inherited)
        after = len(self.steps) - 1
        try:
            twin.run(Crash(LoseUnsynced()))
            twin.run(Restart())
        except RefinementFailure as failure:
            raise RefinementFailure(
                f"shadow crash after step {after}: {failure.message}",
                failure.trace,
                replayable=failure.replayable,
            ) from failure
        self.judge.promises.counts.update(twin.judge.promises.counts)

    def _own_assertion(self, index: int, op: Operation, exc: AssertionError) -> RefinementFailure:
        """The implementation's own assertion (or the simulated disk's) failed in step
        ``index``: a failure like any other, with the trace up to the step before."""
        frames = traceback.extract_tb(exc.__traceback__)
        where = "?"
        if frames:
            last = frames[-1]
            parts = last.filename.replace(os.sep, "/").rsplit("/", 2)
            where = f"{'/'.join(parts[-2:])} {last.name}"
        return RefinementFailure(
            f"step {index} ({op.name}): the implementation's own assertion failed in {where}: "
            f"{exc}",
            self.trace(),
        )

    def probe(self) -> None:
        """After a restart: read every entry whose survival is still open, so the model
        learns which did, and every entry that must have survived, so that a lost one is
        seen at once (property 1 over every acknowledged add, not only the ones a scenario
        happens to read)."""
        durable = self.model.durable_entries() if self.probe_durable else []
        if self.probe_per_ledger is not None:
            durable = _newest_of_each_ledger(durable, self.probe_per_ledger)
        reads = self.model.uncertain_entries() + durable
        for number, (ledger, entry) in enumerate(reads, start=1):
            self.run(Read(ledger, entry), inspect=number == len(reads), probing=True)

    def run_all(self, ops: Iterable[Operation]) -> Trace:
        for op in ops:
            self.run(op)
        return self.trace()
