"""The entry-log crash check: crash an entry-log workload at every file-system operation.

The workload (adds across ledgers with a tiny logSizeLimit so logs rotate, checkpoints,
flushes, preallocation) runs once on the simulated disk. Before every mutating operation
and every fsync the disk is imaged, together with what the oracle knows to be durable at
that moment (proofs/crash/explorer.py). Each image is then crashed under every plan from
proofs.crash.plans, a fresh EntryLogger opens the recovered directories, and the checks
below run.

Two entry-log managers (``manager``, ``bkref crash-check --manager``): ``single``, one
active log for every ledger (impl/entrylog/manager.py), and ``per-ledger``, an active log per
ledger (entryLogPerLedgerEnabled=true, impl/entrylog/per_ledger.py) with
maximumNumberOfActiveEntryLogs 2 and entrylogMapAccessExpiryTimeInSeconds 4 while the
workload's clock moves one second before every add. The adds pick their ledger at random, so
ledgers interleave: with three ledgers two logs are active at once most of the time, the
third ledger's add evicts the least recently added-to one, and a ledger whose last add was
four adds ago is evicted by expiry, at the next add or checkpoint (with the default 60 adds
over three ledgers, seed 1: 25 logs, 17 evicted for room, 4 expired, 2 rotated by size).
A third, ``slots`` (bkref's own entryLogSlotsPerLedgerDir, impl/entrylog/slots.py), keeps one
slot per ledger directory (two active logs) shared by the ledgers, at most two ledgers mapped
to a slot and the same expiry and clock: the map forgets ledgers (by room and by expiry)
without sealing anything, the ledger takes the next slot in round robin, and a slot's log is
sealed only when it passes logSizeLimit. Same workload, same checks, and the single manager's
runs are exactly what they were; what differs is what the oracle may promise, and the
no-stomping check (below).

The oracle is independent of the implementation's internal state: it knows the adds, the
locations they returned, the steps that returned, and the rules the manager documents. An
entry is *durable* once a flush() (or close()) that started after it has returned; with the
single manager also once a checkpoint() has returned while the entry's log was no longer the
active one (a later add went to another log), and with per-ledger logs once any checkpoint()
that started after it has returned (the per-ledger manager's checkpoint is its flush: it
forces every active log). Those are the promises BookKeeper's entry logger makes
(EntryLogManagerBase.flush, flushRotatedLogs; EntryLogManagerForEntryLogPerLedger.checkpoint).
A log is *checkpointed* once a checkpoint returned while the log was sealed: with the single
manager every log but the one of the last add; with per-ledger logs (many active at once,
so "the active log" means nothing) every log the oracle knows sealed from the locations and
the manager's rules alone: a ledger's log whose next add went to another log (rotation), and
a ledger's log evicted, the least recently added-to first, when a new ledger's log would make
more than maximumNumberOfActiveEntryLogs, or when it took no add for the expiry time at an
add or a checkpoint (:class:`ActiveLogs`); with slots, a slot's log whose slot's next add
went to another log, the oracle following the round robin and the map itself. With per-ledger
logs and slots a flush is the same step as a checkpoint, and close() flushes the sealed logs
too, so both also make the sealed logs checkpointed. The workload run itself is checked
against those rules before any crash: a log taking a second ledger's entries (per-ledger), an
add going to a log the rules sealed or (slots) to another slot's log, is a failure of the
workload (crash point -1) and says the oracle's premise broke.

Checks after each crash (spec/properties.md at the entry-log level: 1 durability of forced
entries, 7 format validity):
1. durability: every durable entry reads back, same bytes, at its location;
2. format validity: every log that was checkpointed keeps a ledgers map equal to its scan
   (per-ledger: and holds one ledger's records);
3. typed failures only: every ``*.log`` left on disk, durable or not, reads and scans with
   no error other than bkref's typed ones;
4. no stomping: a new log created after recovery takes an id no existing file has, and every
   durable entry still reads back after an add to it. With per-ledger logs "the first log
   written after recovery" is not the whole story, since every ledger gets its own: one
   entry goes to each of three new ledgers (one more than may be active, so the last add
   evicts and seals the first's log), each must land in a log of its own whose id no file
   had before, and each reads back, before the durable entries are read again. With slots
   the same three adds (the third shares the first's slot): each goes to a log whose id no
   file had before, and reads back.

What the per-ledger runs cannot check: preallocation (the per-ledger manager preallocates
nothing, so the workload's preallocate steps do nothing there; the summary line says "no
preallocation"), and expiry in the bookie target (proofs/crash/bookie_check.py: its clock
does not move). Every check above applies to both managers.

Why a component check and not a trace (spec/trace.md): it works below the bookie, on the
EntryLogger directly (adds that return a location, flush, checkpoint, preallocate), which
the trace vocabulary (spec/operations.py: requests a client sends a bookie) does not express,
and its oracle is deliberately its own (it parses log names itself rather than trust
impl.entrylog.ids). A failure is replayable all the same: it names the workload (seed,
entries, ledgers, flushEntrylogBytes, manager), the crash point and the plan, and
``bkref crash-check --target entry-log ... --point N --plan P`` (:func:`replay_state`)
re-runs exactly that state and says what it checked (docs/crash-check.md).

Not checked here: the journal and acknowledgement (the bookie target,
proofs/crash/bookie_check.py), index persistence, compaction.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable

import attrs

from impl.clock import ManualClock
from impl.entrylog.logger import EntryLogger, EntryLoggerSettings
from impl.format.entry_log import encode_payload
from impl.fs.api import join
from models.fs.simdisk import SimDisk
from proofs.crash.explorer import (
    CrashFailure,
    CrashPoint,
    Report,
    explore,
    plans_at,
    record_points,
    restore_disk,
    thin,
)
from spec.crash import CrashPlan
from spec.errors import BkrefError
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id

CURRENT_DIRS = ("/ledgers0/current", "/ledgers1/current")

#: What the entry-log target checks, for progress lines and the summary.
PROPERTIES = (
    "durability of forced entries (property 1), format validity (property 7), "
    "typed failures only, no stomping on existing log ids"
)
#: The same, in a few words for the summary line.
SUMMARY = "properties 1 and 7 at the entry-log level"
#: What the per-ledger runs check, for progress lines and the summary: the same, with the
#: checks generalised to many active logs (module docstring).
PER_LEDGER_PROPERTIES = (
    f"{PROPERTIES} (with a log per ledger: each checkpointed log holds one ledger's records, "
    "and new ledgers after recovery each get a new log of their own)"
)


#: What the slots runs check.
SLOTS_PROPERTIES = (
    f"{PROPERTIES} (with slots: logs shared by ledgers, sealed by the oracle's own round "
    "robin, and new ledgers after recovery get logs with new ids)"
)


def properties_for(manager: str) -> str:
    """What a run with ``manager`` checks, in words."""
    return {"single": PROPERTIES, "slots": SLOTS_PROPERTIES}.get(manager, PER_LEDGER_PROPERTIES)


#: What check_recovered's count counts; each recovered state also has every log on disk
#: scanned, the checkpointed logs' maps compared with their scans and a new log id taken.
ITEMS = "durable entries read back intact"

#: The entry-log managers the check runs (``bkref crash-check --manager``).
MANAGERS = ("single", "per-ledger", "slots")
#: The per-ledger runs' maximumNumberOfActiveEntryLogs: fewer than the workload's ledgers,
#: so a new ledger's log evicts another inside the workload.
PER_LEDGER_MAX_ACTIVE = 2
#: The per-ledger runs' entrylogMapAccessExpiryTimeInSeconds, and how far the workload's
#: clock moves before each add: a ledger whose last add was four adds ago expires.
PER_LEDGER_EXPIRY_S = 4
CLOCK_MS_PER_ADD = 1000
#: Fresh ledgers written after recovery in a per-ledger run (no-stomping check): one more
#: than may be active at once.
NEW_LEDGERS_AFTER_RECOVERY = tuple(LedgerId(999 + i) for i in range(PER_LEDGER_MAX_ACTIVE + 1))
#: The slots runs' entryLogSlotsPerLedgerDir: one slot per directory, two over CURRENT_DIRS,
#: fewer than the workload's ledgers, so ledgers share slots' logs. The map holds at most
#: PER_LEDGER_MAX_ACTIVE ledgers and expires as the per-ledger cache does.
SLOTS_PER_DIR = 1


def describe_manager(manager: str) -> str:
    """The manager, in words, for the header and summary lines."""
    if manager == "single":
        return "manager single (one active log, entryLogPerLedgerEnabled=false)"
    if manager == "slots":
        return (
            f"manager slots (bkref's entryLogSlotsPerLedgerDir={SLOTS_PER_DIR}: "
            f"{SLOTS_PER_DIR * len(CURRENT_DIRS)} slots shared by the ledgers, at most "
            f"{PER_LEDGER_MAX_ACTIVE} ledgers mapped, entrylogMapAccessExpiryTimeInSeconds "
            f"{PER_LEDGER_EXPIRY_S} with the clock moving {CLOCK_MS_PER_ADD // 1000} s before "
            "each add; no preallocation)"
        )
    assert manager == "per-ledger", manager
    return (
        "manager per-ledger (an active log per ledger, entryLogPerLedgerEnabled=true, "
        f"maximumNumberOfActiveEntryLogs {PER_LEDGER_MAX_ACTIVE}, "
        f"entrylogMapAccessExpiryTimeInSeconds {PER_LEDGER_EXPIRY_S} with the clock moving "
        f"{CLOCK_MS_PER_ADD // 1000} s before each add; no preallocation)"
    )


@attrs.frozen
class LogAdd:
    ledger_id: LedgerId
    entry_id: EntryId
    payload: bytes


@attrs.frozen
class WorkloadStep:
    """One workload step: an add, or a background step by name."""

    kind: str  # "add" | "checkpoint" | "flush" | "preallocate" | "close"
    add: LogAdd | None = None


@attrs.frozen
class Written:
    """An add that returned, with the location the entry logger gave it."""

    add: LogAdd
    location: Location


@attrs.frozen
class Expected:
    """What the oracle knows at a crash point: the adds that must read back, and the logs a
    checkpoint covered."""

    durable: tuple[Written, ...]
    checkpointed_logs: frozenset[EntryLogId]


def make_workload(seed: int, entries: int, ledgers: int) -> list[WorkloadStep]:
    """A deterministic workload: adds over a few ledgers with background steps mixed in."""
    rng = random.Random(seed)
    next_entry = dict.fromkeys(range(1, ledgers + 1), 0)
    steps: list[WorkloadStep] = []
    for number in range(1, entries + 1):
        ledger = rng.randrange(1, ledgers + 1)
        body = rng.randbytes(rng.randrange(0, 300))
        steps.append(
            WorkloadStep("add", LogAdd(LedgerId(ledger), EntryId(next_entry[ledger]), body))
        )
        next_entry[ledger] += 1
        # Background steps on a rough schedule (so every workload has them) with jitter
        # (so different seeds interleave them differently with rotation).
        roll = rng.random()
        if number % 7 == 0 or roll < 0.06:
            steps.append(WorkloadStep("checkpoint"))
        if number % 11 == 0 or 0.06 <= roll < 0.09:
            steps.append(WorkloadStep("flush"))
        if number % 5 == 0 or 0.09 <= roll < 0.12:
            steps.append(WorkloadStep("preallocate"))
    steps.append(WorkloadStep("checkpoint"))
    steps.append(WorkloadStep("close"))
    return steps


def settings_for_check(flush_entrylog_bytes: int, manager: str = "single") -> EntryLoggerSettings:
    """Tiny limits so that a few entries fill a log and buffers flush mid-log; with
    ``manager`` per-ledger, an active log per ledger with a small cache (module docstring)."""
    assert manager in MANAGERS, manager
    settings = EntryLoggerSettings(
        log_size_limit_bytes=2048,
        flush_entrylog_bytes=flush_entrylog_bytes,
        write_buffer_bytes=512,
        preallocation_enabled=True,
    )
    if manager == "single":
        return settings
    return attrs.evolve(
        settings,
        per_ledger=manager == "per-ledger",
        slots_per_dir=SLOTS_PER_DIR if manager == "slots" else 0,
        entrylog_map_access_expiry_s=PER_LEDGER_EXPIRY_S,
        maximum_active_entry_logs=PER_LEDGER_MAX_ACTIVE,
    )


class ActiveLogs:
    """What the oracle knows of which logs are sealed, from the locations the adds returned
    and the rules the manager documents, never from the manager's state (module docstring).

    Single manager: every log but the one of the last add. Per-ledger: each ledger's log
    (the one its last add went to), least recently added-to first, as the cache of
    EntryLogManagerForEntryLogPerLedger keeps them; a log leaves it sealed when its ledger's
    next add goes to another log (rotation), when a new ledger's log would make more than
    ``max_active`` (the least recently added-to is evicted), or when it took no add for
    ``expiry_ns`` at an add or a checkpoint. Slots (``slot_count`` of them): each ledger's
    slot as the manager documents it (a ledger with none takes the next in round robin; the
    map holds at most ``max_active`` ledgers, least recently added-to forgotten first, and
    forgets one that took no add for ``expiry_ns``; forgetting seals nothing); a slot's log
    is sealed when the slot's next add goes to another log. ``surprises`` are adds that
    break those rules: a log taking a second ledger's entries (per-ledger), another slot's
    log (slots), or an add to a log the rules sealed.
    """

    def __init__(self, manager: str, max_active: int, expiry_ns: int, slot_count: int = 0) -> None:
        assert manager in MANAGERS, manager
        assert (manager == "slots") == (slot_count > 0), (manager, slot_count)
        self.per_ledger = manager == "per-ledger"
        self.slots = manager == "slots"
        #: Many active logs: a checkpoint is a flush, forcing every one.
        self.many = manager != "single"
        self._max_active = max_active
        self._expiry_ns = expiry_ns
        self._slot_count = slot_count
        #: Slots: the slot the next unmapped ledger takes, and each slot's log.
        self._next_slot = 0
        self._slot_log: dict[int, EntryLogId] = {}
        self._log_slot: dict[EntryLogId, int] = {}
        self.forgotten = 0
        #: Per-ledger: ledger -> (its log, the time of its last add), least recent first.
        self._current: collections.OrderedDict[LedgerId, tuple[EntryLogId, int]] = (
            collections.OrderedDict()
        )
        #: Single: the log of the last add.
        self._last: EntryLogId | None = None
        #: Every log an add went to, with the ledger whose entries it took first.
        self._holder: dict[EntryLogId, LedgerId] = {}
        #: The logs that took more than one ledger's entries.
        self._holders_many: set[EntryLogId] = set()
        self.sealed: set[EntryLogId] = set()
        self.surprises: list[str] = []
        #: What happened, for the report: logs sealed by rotation, by the maximum number of
        #: active logs, by expiry; the most logs active at once.
        self.rotations = 0
        self.evicted_for_room = 0
        self.evicted_expired = 0
        self.most_active = 0

    def expire(self, now_ns: int) -> None:
        """Evict every ledger whose log took no add for the expiry time (per-ledger); with
        slots forget its slot, sealing nothing (``_current`` then maps ledger -> (slot,
        time))."""
        while self.many and self._current:
            ledger, (log_id, last_ns) = next(iter(self._current.items()))
            if now_ns - last_ns < self._expiry_ns:
                return
            del self._current[ledger]
            if self.slots:
                self.forgotten += 1
                continue
            self.sealed.add(log_id)
            self.evicted_expired += 1

    def _added_to_slot(self, where: str, ledger: LedgerId, log_id: EntryLogId, now: int) -> None:
        mapped = self._current.get(ledger)
        if mapped is None:
            slot = self._next_slot
            self._next_slot = (slot + 1) % self._slot_count
        else:
            slot = mapped[0]
        owner = self._log_slot.setdefault(log_id, slot)
        if owner != slot:
            self.surprises.append(f"{where}, slot {owner}'s log; its slot is {slot}")
        if log_id in self.sealed:
            self.surprises.append(f"{where}, which the manager's rules had sealed")
        previous = self._slot_log.get(slot)
        if previous is not None and previous != log_id:
            self.sealed.add(previous)
            self.rotations += 1
        self._slot_log[slot] = log_id
        self._current[ledger] = (EntryLogId(slot), now)
        self._current.move_to_end(ledger)
        while len(self._current) > self._max_active:
            self._current.popitem(last=False)
            self.forgotten += 1
        self.most_active = max(self.most_active, len(self._slot_log))

    def added(self, number: int, ledger: LedgerId, log_id: EntryLogId, now_ns: int) -> None:
        """Add number ``number`` of ``ledger`` went to ``log_id`` at ``now_ns`` (expired
        ledgers already evicted with :meth:`expire`)."""
        holder = self._holder.setdefault(log_id, ledger)
        if holder != ledger:
            self._holders_many.add(log_id)
        if not self.many:
            if self._last is not None and self._last != log_id:
                self.sealed.add(self._last)
                self.rotations += 1
            self._last = log_id
            return
        where = f"add {number} (ledger {ledger}) went to log {log_id:x}"
        if self.slots:
            self._added_to_slot(where, ledger, log_id, now_ns)
            return
        if holder != ledger:
            self.surprises.append(f"{where}, which holds ledger {holder}'s entries")
        if log_id in self.sealed:
            self.surprises.append(f"{where}, which the manager's rules had sealed")
        mine = self._current.get(ledger)
        if mine is not None and mine[0] != log_id:
            self.sealed.add(mine[0])
            self.rotations += 1
        elif mine is None:
            while len(self._current) >= self._max_active:
                _, (evicted, _) = self._current.popitem(last=False)
                self.sealed.add(evicted)
                self.evicted_for_room += 1
        self._current[ledger] = (log_id, now_ns)
        self._current.move_to_end(ledger)
        self.most_active = max(self.most_active, len(self._current))

    def describe(self) -> str:
        """What the workload did to its logs, in words."""
        text = f"wrote {len(self._holder)} logs: {self.rotations} sealed by rotation"
        if self.slots:
            shared = sum(1 for log_id in self._log_slot if log_id in self._holders_many)
            return (
                f"{text}, {shared} shared by several ledgers, {self.forgotten} ledgers' slots "
                f"forgotten (by room, at most {self._max_active} mapped, and by expiry); up "
                f"to {self.most_active} logs active at once over {self._slot_count} slots"
            )
        if not self.per_ledger:
            return text
        return (
            f"{text}, {self.evicted_for_room} evicted for a new ledger's log (at most "
            f"{self._max_active} active), {self.evicted_expired} evicted by expiry; up to "
            f"{self.most_active} logs active at once"
        )


def fresh_log_disk() -> SimDisk:
    disk = SimDisk()
    for path in CURRENT_DIRS:
        disk.mkdir(path)
    for path in ("/", "/ledgers0", "/ledgers1", *CURRENT_DIRS):
        disk.fsync_dir(path)
    return disk


def active_logs_for(settings: EntryLoggerSettings) -> ActiveLogs:
    """The oracle's view of the sealed logs, for a run with ``settings``."""
    if settings.slots_per_dir > 0:
        manager = "slots"
    else:
        manager = "per-ledger" if settings.per_ledger else "single"
    return ActiveLogs(
        manager,
        settings.maximum_active_entry_logs,
        settings.entrylog_map_access_expiry_s * 1_000_000_000,
        settings.slots_per_dir * len(CURRENT_DIRS),
    )


def record_crash_points(
    steps: list[WorkloadStep], settings: EntryLoggerSettings, seed: int
) -> tuple[list[CrashPoint[Expected]], list[Written], ActiveLogs]:
    """Run the workload once, with a crash point before every operation. Also returns the
    oracle's view of the logs at the end (what the workload did to them, and any add that
    broke the manager's rules)."""
    disk = fresh_log_disk()
    written: list[Written] = []
    durable: list[Written] = []
    checkpointed: set[EntryLogId] = set()
    logs = active_logs_for(settings)
    clock = ManualClock()

    def oracle() -> Expected:
        return Expected(tuple(durable), frozenset(checkpointed))

    def run() -> None:
        logger = EntryLogger(disk, CURRENT_DIRS, settings, random.Random(seed), clock=clock)
        for step in steps:
            _apply(logger, clock, step, written, durable, checkpointed, logs)

    points = record_points(disk, oracle, run)
    return points, written, logs


def _apply(
    logger: EntryLogger,
    clock: ManualClock,
    step: WorkloadStep,
    written: list[Written],
    durable: list[Written],
    checkpointed: set[EntryLogId],
    logs: ActiveLogs,
) -> None:
    """Carry out one step and update the oracle's knowledge once it has returned."""
    if step.kind == "add":
        assert step.add is not None
        if logs.many:
            clock.advance_ms(CLOCK_MS_PER_ADD)
        now = clock.monotonic_ns()
        payload = encode_payload(step.add.ledger_id, step.add.entry_id, step.add.payload)
        location = logger.add_entry(step.add.ledger_id, payload)
        written.append(Written(step.add, location))
        logs.expire(now)  # the manager evicts the expired ledgers before the add
        logs.added(len(written) - 1, step.add.ledger_id, location_log_id(location), now)
    elif not logs.many and step.kind == "checkpoint":
        active = location_log_id(written[-1].location) if written else None
        logger.checkpoint()
        done = [w for w in written if location_log_id(w.location) != active]
        durable.extend(w for w in done if w not in durable)
        checkpointed.update(location_log_id(w.location) for w in done)
    elif step.kind in ("checkpoint", "flush", "close"):
        # close() flushes as DefaultEntryLogger.close does: everything becomes durable. With
        # per-ledger logs a checkpoint is a flush (it forces every active log), and all three
        # fsync the sealed logs, their ledgers maps included (module docstring).
        if step.kind == "close":
            logger.close()
        else:
            now = clock.monotonic_ns()
            if step.kind == "checkpoint":
                logger.checkpoint()
            else:
                logger.flush()
            logs.expire(now)  # the checkpoint (or flush) evicts the expired ledgers first
        durable.extend(w for w in written if w not in durable)
        if logs.many:
            checkpointed.update(logs.sealed)
    else:
        logger.preallocate()


@attrs.frozen
class Workload:
    """One entry-log run: what a failure must name to be re-run exactly."""

    seed: int
    entries: int
    ledgers: int
    flush_entrylog_bytes: int
    manager: str = attrs.field(default="single", validator=attrs.validators.in_(MANAGERS))

    def describe(self) -> str:
        return (
            f"seed {self.seed}, {self.entries} adds over {self.ledgers} ledgers, "
            f"logSizeLimit 2048, flushEntrylogBytes {self.flush_entrylog_bytes}, "
            f"{describe_manager(self.manager)}"
        )

    @property
    def label(self) -> str:
        """The run in a few words, for progress lines."""
        manager = "" if self.manager == "single" else f" {self.manager}"
        return f"entry-log{manager} (flushEntrylogBytes {self.flush_entrylog_bytes})"

    def command(self, point: int, plan: int | None = None) -> str:
        """The bkref command that re-runs crash point ``point`` (under plan ``plan``)."""
        manager = "" if self.manager == "single" else f" --manager {self.manager}"
        text = (
            f"bkref crash-check --target entry-log{manager} --seed {self.seed} --entries "
            f"{self.entries} --ledgers {self.ledgers} --flush-entrylog-bytes "
            f"{self.flush_entrylog_bytes} --point {point}"
        )
        return text if plan is None else f"{text} --plan {plan}"

    def settings(self) -> EntryLoggerSettings:
        return settings_for_check(self.flush_entrylog_bytes, self.manager)

    def record(self) -> list[CrashPoint[Expected]]:
        """Run the workload once; its crash points, numbered from 0."""
        return self.record_with_logs()[0]

    def record_with_logs(self) -> tuple[list[CrashPoint[Expected]], ActiveLogs]:
        """Run the workload once; its crash points, and the oracle's view of its logs."""
        steps = make_workload(self.seed, self.entries, self.ledgers)
        points, _, logs = record_crash_points(steps, self.settings(), self.seed)
        return points, logs


def check_recovered(
    disk: SimDisk,
    point: Expected,
    settings: EntryLoggerSettings,
    seed: int,
    account: list[str] | None = None,
) -> tuple[int, list[str]]:
    """Open the crashed disk afresh and run the four checks. Returns (entries read,
    problems); with ``account``, appends what was checked, in words, one line per check."""
    try:
        logger = EntryLogger(
            disk, CURRENT_DIRS, settings, random.Random(seed + 1), clock=ManualClock()
        )
    except BkrefError as exc:
        return 0, [f"recovery failed to open the entry logger: {exc}"]
    durable = len(point.durable)
    logs_before = _existing_log_ids(disk) if account is not None else set()
    many = settings.per_ledger or settings.slots_per_dir > 0
    if settings.per_ledger:
        one_ledger = "; each holds one ledger's records"
        new_logs = (
            f"added one entry to each of {len(NEW_LEDGERS_AFTER_RECOVERY)} new ledgers: each "
            "went to a log of its own with an id that no existing file has, and reads back"
        )
    elif many:
        one_ledger = ""
        new_logs = (
            f"added one entry to each of {len(NEW_LEDGERS_AFTER_RECOVERY)} new ledgers: each "
            "went to a log with an id that no existing file has (slots: shared), and reads back"
        )
    else:
        one_ledger = ""
        new_logs = "added one entry: it went to a log id that no existing file has"
    adds = "those adds" if many else "that add"
    checks = [
        (
            f"read back {durable} durable entries at their locations",
            _check_durable(logger, point.durable, "after recovery"),
        ),
        (
            f"scanned the logs on disk ({_ids(logs_before)}) for untyped errors; ledgers "
            f"map equal to the scan in checkpointed logs ({_ids(point.checkpointed_logs)})"
            f"{one_ledger}",
            _check_logs(disk, logger, point.checkpointed_logs, one_ledger=settings.per_ledger),
        ),
        (
            new_logs,
            _check_new_logs(disk, logger, own_logs=settings.per_ledger)
            if many
            else _check_no_stomping(disk, logger),
        ),
        (
            f"read back the {durable} durable entries again after {adds}",
            _check_durable(
                logger,
                point.durable,
                "after the new ledgers' adds" if many else "after a new add",
            ),
        ),
    ]
    if account is not None:
        account.append("opened a fresh entry logger on the recovered ledger directories")
        account += [f"{what}: " + ("; ".join(found) or "ok") for what, found in checks]
    return durable, [problem for _, found in checks for problem in found]


def _ids(log_ids: frozenset[EntryLogId] | set[EntryLogId]) -> str:
    return ", ".join(f"{log_id:x}" for log_id in sorted(log_ids)) or "none"


def _check_no_stomping(disk: SimDisk, logger: EntryLogger) -> list[str]:
    existing = _existing_log_ids(disk)
    try:
        location = logger.add_entry(LedgerId(999), encode_payload(999, 0, b"after-recovery"))
    except BkrefError as exc:
        return [f"an add after recovery failed: {exc}"]
    if location_log_id(location) in existing:
        return [
            f"the log written after recovery reused id {location_log_id(location):x}, "
            "which an existing file already has"
        ]
    return []


def _check_new_logs(disk: SimDisk, logger: EntryLogger, *, own_logs: bool = True) -> list[str]:
    """The no-stomping check with many active logs: an entry to each of a few new ledgers,
    more than may be active at once; each goes to a log whose id no file had before the adds
    (with ``own_logs``, a log per ledger: a log of its own), and reads back."""
    existing = _existing_log_ids(disk)
    problems: list[str] = []
    taken: dict[EntryLogId, LedgerId] = {}
    for ledger in NEW_LEDGERS_AFTER_RECOVERY:
        payload = encode_payload(ledger, 0, b"after-recovery")
        try:
            location = logger.add_entry(ledger, payload)
        except BkrefError as exc:
            return [*problems, f"an add to ledger {ledger} after recovery failed: {exc}"]
        log_id = location_log_id(location)
        if log_id in existing:
            problems.append(
                f"ledger {ledger}'s log written after recovery reused id {log_id:x}, which an "
                "existing file already has"
            )
        if own_logs and log_id in taken:
            problems.append(
                f"ledger {ledger}'s entry after recovery went to log {log_id:x}, which "
                f"ledger {taken[log_id]}'s entry went to"
            )
        taken.setdefault(log_id, ledger)
        try:
            got = logger.read_entry(ledger, EntryId(0), location)
        except BkrefError as exc:
            problems.append(f"ledger {ledger}'s entry added after recovery does not read: {exc}")
            continue
        if got != payload:
            problems.append(f"ledger {ledger}'s entry added after recovery reads other bytes")
    return problems


def _check_durable(logger: EntryLogger, durable: tuple[Written, ...], when: str) -> list[str]:
    problems = []
    for item in durable:
        add = item.add
        expected = encode_payload(add.ledger_id, add.entry_id, add.payload)
        try:
            got = logger.read_entry(add.ledger_id, add.entry_id, item.location)
        except BkrefError as exc:
            problems.append(f"{when}: durable entry {add.ledger_id}:{add.entry_id} lost: {exc}")
            continue
        if got != expected:
            problems.append(f"{when}: durable entry {add.ledger_id}:{add.entry_id} has other bytes")
    return problems


def _existing_log_ids(disk: SimDisk) -> set[EntryLogId]:
    """Ids of the ``<hex>.log`` files on disk, parsed here rather than with
    impl.entrylog.ids so the no-stomping check does not trust the code it checks."""
    ids: set[EntryLogId] = set()
    for directory in CURRENT_DIRS:
        for name in disk.listdir(directory):
            head = name.split(".")[0]
            if name.endswith(".log") and all(c in "0123456789abcdef" for c in head):
                ids.add(EntryLogId(int(head, 16)))
    return ids


def _check_logs(
    disk: SimDisk,
    logger: EntryLogger,
    checkpointed: frozenset[EntryLogId],
    *,
    one_ledger: bool = False,
) -> list[str]:
    """Every log on disk scans with typed failures only; every checkpointed log keeps a
    ledgers map equal to its scan, and with ``one_ledger`` (per-ledger logs) holds the records
    of one ledger."""
    from impl.entrylog.reader import scan  # the reader is the unit under check here

    problems = []
    for log_id in sorted(_existing_log_ids(disk)):
        try:
            result = logger.extract_metadata(log_id)
            path = next(
                join(d, f"{log_id:x}.log")
                for d in CURRENT_DIRS
                if disk.exists(join(d, f"{log_id:x}.log"))
            )
            handle = disk.open(path)
            scanned = scan(handle, log_id)
            handle.close()
        except BkrefError:
            continue  # a typed failure on a non-durable log is allowed
        except Exception as exc:  # the check is that nothing untyped escapes
            problems.append(f"log {log_id:x}: untyped {type(exc).__name__}: {exc}")
            continue
        if log_id in checkpointed:
            sums: dict[int, int] = {}
            for record in scanned.records:
                sums[record.ledger_id] = sums.get(record.ledger_id, 0) + record.size + 4
            if result.source != "map":
                problems.append(
                    f"checkpointed log {log_id:x} lost its ledgers map ({result.fallback_reason})"
                )
            elif dict(result.metadata.ledgers) != sums:
                problems.append(f"checkpointed log {log_id:x}: ledgers map differs from its scan")
            if one_ledger and len(sums) > 1:
                problems.append(
                    f"checkpointed log {log_id:x} holds the records of ledgers "
                    f"{', '.join(map(str, sorted(sums)))}: a per-ledger log holds one ledger's"
                )
    return problems


def run_check(
    *,
    seed: int,
    entries: int,
    ledgers: int,
    flush_entrylog_bytes: int,
    manager: str = "single",
    progress: Callable[[str], None] | None = None,
    max_points: int | None = None,
) -> Report:
    """Record the crash points of one workload and check every plan at each of them. Each
    failure carries the command that re-runs its state. With per-ledger logs, a progress
    line says what the workload did to its logs (rotations, evictions, logs active at once),
    and an add of the workload that broke the manager's rules is a failure at crash point -1
    (module docstring)."""
    workload = Workload(seed, entries, ledgers, flush_entrylog_bytes, manager)
    settings = workload.settings()
    points, logs = workload.record_with_logs()
    if progress is not None and logs.many:
        progress(f"  {workload.label}: the workload {logs.describe()}")
    report = explore(
        thin(points, max_points),
        lambda disk, oracle: check_recovered(disk, oracle, settings, seed),
        progress,
        label=f"{workload.label}: ",
        command=workload.command,
        items=ITEMS,
    )
    where = "the workload without a crash"
    surprises = [CrashFailure(-1, "none", None, s, where=where) for s in logs.surprises]
    report.failures[:0] = surprises
    return report


class NoSuchState(BkrefError):
    """A crash point or plan index that the workload does not have."""


@attrs.frozen
class StateCheck:
    """What re-running one crash state found: the plan, the problems, and what was
    checked, in words."""

    plan_index: int
    plan: CrashPlan
    problems: tuple[str, ...]
    account: tuple[str, ...]


def replay_state(
    workload: Workload, point_index: int, plan_index: int | None = None
) -> tuple[CrashPoint[Expected], list[StateCheck]]:
    """Re-run crash point ``point_index`` of ``workload`` under plan ``plan_index`` (every
    plan at that point when None), exactly as :func:`run_check` does, with an account of
    each check. Raises NoSuchState for an index the workload does not have."""
    points = workload.record()
    if not 0 <= point_index < len(points):
        raise NoSuchState(
            f"crash point {point_index} does not exist: this workload has points 0 to "
            f"{len(points) - 1}"
        )
    point = points[point_index]
    plans = list(plans_at(point.disk))
    if plan_index is not None and not 0 <= plan_index < len(plans):
        raise NoSuchState(
            f"plan {plan_index} does not exist at crash point {point_index}: it has plans "
            f"0 to {len(plans) - 1}"
        )
    checks = []
    for index, plan in enumerate(plans):
        if plan_index is not None and index != plan_index:
            continue
        crashed = restore_disk(point.image)
        crashed.crash(plan)
        account: list[str] = []
        _, problems = check_recovered(
            crashed, point.oracle, workload.settings(), workload.seed, account
        )
        checks.append(StateCheck(index, plan, tuple(problems), tuple(account)))
    return point, checks
