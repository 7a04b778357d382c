"""The entry-log crash check: crash an entry-log workload at every file-system operation.

The workload (adds across ledgers with a tiny logSizeLimit so logs rotate, checkpoints,
flushes, preallocation) runs once on the simulated disk. Before every mutating operation
and every fsync the disk is imaged, together with what the oracle knows to be durable at
that moment (proofs/crash/explorer.py). Each image is then crashed under every plan from
proofs.crash.plans, a fresh EntryLogger opens the recovered directories, and the checks
below run.

The oracle is independent of the implementation's internal state. An entry is *durable*
once a flush() that started after it has returned, or a checkpoint() has returned while the
entry's log was no longer the active one (a later add went to another log): those are the
promises BookKeeper's entry logger makes (EntryLogManagerBase.flush, flushRotatedLogs).

Checks after each crash (spec/properties.md at the entry-log level: 1 durability of forced
entries, 7 format validity):
1. durability: every durable entry reads back, same bytes, at its location;
2. format validity: every log that was checkpointed keeps a ledgers map equal to its scan;
3. typed failures only: every ``*.log`` left on disk, durable or not, reads and scans with
   no error other than bkref's typed ones;
4. no stomping: a new log created after recovery takes an id no existing file has, and every
   durable entry still reads back after an add to it.

Why a component check and not a trace (spec/trace.md): it works below the bookie, on the
EntryLogger directly (adds that return a location, flush, checkpoint, preallocate), which
the trace vocabulary (spec/operations.py: requests a client sends a bookie) does not express,
and its oracle is deliberately its own (it parses log names itself rather than trust
impl.entrylog.ids). A failure is replayable all the same: it names the workload (seed,
entries, ledgers, flushEntrylogBytes), the crash point and the plan, and
``bkref crash-check --target entry-log ... --point N --plan P`` (:func:`replay_state`)
re-runs exactly that state and says what it checked (docs/crash-check.md).

Not checked here: the journal and acknowledgement (the bookie target,
proofs/crash/bookie_check.py), index persistence, compaction.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs

from impl.entrylog.logger import EntryLogger, EntryLoggerSettings
from impl.format.entry_log import encode_payload
from impl.fs.api import join
from models.fs.simdisk import SimDisk
from proofs.crash.explorer import (
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
#: What check_recovered's count counts; each recovered state also has every log on disk
#: scanned, the checkpointed logs' maps compared with their scans and a new log id taken.
ITEMS = "durable entries read back intact"


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


def settings_for_check(flush_entrylog_bytes: int) -> EntryLoggerSettings:
    """Tiny limits so that a few entries fill a log and buffers flush mid-log."""
    return EntryLoggerSettings(
        log_size_limit_bytes=2048,
        flush_entrylog_bytes=flush_entrylog_bytes,
        write_buffer_bytes=512,
        preallocation_enabled=True,
    )


def fresh_log_disk() -> SimDisk:
    disk = SimDisk()
    for path in CURRENT_DIRS:
        disk.mkdir(path)
    for path in ("/", "/ledgers0", "/ledgers1", *CURRENT_DIRS):
        disk.fsync_dir(path)
    return disk


def record_crash_points(
    steps: list[WorkloadStep], settings: EntryLoggerSettings, seed: int
) -> tuple[list[CrashPoint[Expected]], list[Written]]:
    """Run the workload once, with a crash point before every operation."""
    disk = fresh_log_disk()
    written: list[Written] = []
    durable: list[Written] = []
    checkpointed: set[EntryLogId] = set()

    def oracle() -> Expected:
        return Expected(tuple(durable), frozenset(checkpointed))

    def run() -> None:
        logger = EntryLogger(disk, CURRENT_DIRS, settings, random.Random(seed))
        for step in steps:
            _apply(logger, step, written, durable, checkpointed)

    points = record_points(disk, oracle, run)
    return points, written


def _apply(
    logger: EntryLogger,
    step: WorkloadStep,
    written: list[Written],
    durable: list[Written],
    checkpointed: set[EntryLogId],
) -> None:
    """Carry out one step and update the oracle's knowledge once it has returned."""
    if step.kind == "add":
        assert step.add is not None
        payload = encode_payload(step.add.ledger_id, step.add.entry_id, step.add.payload)
        location = logger.add_entry(step.add.ledger_id, payload)
        written.append(Written(step.add, location))
    elif step.kind == "checkpoint":
        active = location_log_id(written[-1].location) if written else None
        logger.checkpoint()
        done = [w for w in written if location_log_id(w.location) != active]
        durable.extend(w for w in done if w not in durable)
        checkpointed.update(location_log_id(w.location) for w in done)
    elif step.kind in ("flush", "close"):
        # close() flushes as DefaultEntryLogger.close does: everything becomes durable.
        if step.kind == "flush":
            logger.flush()
        else:
            logger.close()
        durable.extend(w for w in written if w not in durable)
    else:
        logger.preallocate()


@attrs.frozen
class Workload:
    """One entry-log run: what a failure must name to be re-run exactly."""

    seed: int
    entries: int
    ledgers: int
    flush_entrylog_bytes: int

    def describe(self) -> str:
        return (
            f"seed {self.seed}, {self.entries} adds over {self.ledgers} ledgers, "
            f"logSizeLimit 2048, flushEntrylogBytes {self.flush_entrylog_bytes}"
        )

    def command(self, point: int, plan: int | None = None) -> str:
        """The bkref command that re-runs crash point ``point`` (under plan ``plan``)."""
        text = (
            f"bkref crash-check --target entry-log --seed {self.seed} --entries "
            f"{self.entries} --ledgers {self.ledgers} --flush-entrylog-bytes "
            f"{self.flush_entrylog_bytes} --point {point}"
        )
        return text if plan is None else f"{text} --plan {plan}"

    def settings(self) -> EntryLoggerSettings:
        return settings_for_check(self.flush_entrylog_bytes)

    def record(self) -> list[CrashPoint[Expected]]:
        """Run the workload once; its crash points, numbered from 0."""
        steps = make_workload(self.seed, self.entries, self.ledgers)
        points, _ = record_crash_points(steps, self.settings(), self.seed)
        return points


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
        logger = EntryLogger(disk, CURRENT_DIRS, settings, random.Random(seed + 1))
    except BkrefError as exc:
        return 0, [f"recovery failed to open the entry logger: {exc}"]
    durable = len(point.durable)
    logs_before = _existing_log_ids(disk) if account is not None else set()
    checks = [
        (
            f"read back {durable} durable entries at their locations",
            _check_durable(logger, point.durable, "after recovery"),
        ),
        (
            f"scanned the logs on disk ({_ids(logs_before)}) for untyped errors; ledgers "
            f"map equal to the scan in checkpointed logs ({_ids(point.checkpointed_logs)})",
            _check_logs(disk, logger, point.checkpointed_logs),
        ),
        (
            "added one entry: it went to a log id that no existing file has",
            _check_no_stomping(disk, logger),
        ),
        (
            f"read back the {durable} durable entries again after that add",
            _check_durable(logger, point.durable, "after a new add"),
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
    disk: SimDisk, logger: EntryLogger, checkpointed: frozenset[EntryLogId]
) -> list[str]:
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
    return problems


def run_check(
    *,
    seed: int,
    entries: int,
    ledgers: int,
    flush_entrylog_bytes: int,
    progress: Callable[[str], None] | None = None,
    max_points: int | None = None,
) -> Report:
    """Record the crash points of one workload and check every plan at each of them. Each
    failure carries the command that re-runs its state."""
    workload = Workload(seed, entries, ledgers, flush_entrylog_bytes)
    settings = workload.settings()
    return explore(
        thin(workload.record(), max_points),
        lambda disk, oracle: check_recovered(disk, oracle, settings, seed),
        progress,
        label=f"entry-log (flushEntrylogBytes {flush_entrylog_bytes}): ",
        command=workload.command,
        items=ITEMS,
    )


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
