"""``bkref crash-check``: crash an entry-log workload at every file-system operation.

The workload (adds across ledgers with a tiny logSizeLimit so logs rotate, checkpoints,
flushes, preallocation) runs once on the simulated disk. Before every mutating operation
and every fsync the disk is copied, together with what the oracle knows to be durable at that
moment. Each copy is then crashed under every plan from proofs.crash.plans, a fresh
EntryLogger opens the recovered directories, and the checks below run.

The oracle is independent of the implementation's internal state. An entry is *durable*
once a flush() that started after it has returned, or a checkpoint() has returned while the
entry's log was no longer the active one (a later add went to another log): those are the
promises BookKeeper's entry logger makes (EntryLogManagerBase.flush, flushRotatedLogs).

Checks after each crash (spec/properties.md, at the entry-log level):
1. durability: every durable entry reads back, same bytes, at its location;
2. format validity: every log that was checkpointed keeps a ledgers map equal to its scan;
3. typed failures only: every ``*.log`` left on disk, durable or not, reads and scans with
   no error other than bkref's typed ones;
4. no stomping: a new log created after recovery takes an id no existing file has, and every
   durable entry still reads back after an add to it.

Not checked here: the journal (acknowledgement is the journal's job, next issue), index
persistence, compaction.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable

import attrs

from impl.entrylog.logger import EntryLogger, EntryLoggerSettings
from impl.format.entry_log import encode_payload
from impl.fs.api import join
from models.fs.simdisk import SimDisk
from proofs.crash.explorer import CrashPoint, Report, explore, record_points, thin
from spec.errors import BkrefError
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id

LEDGER_DIRS = ("/ledgers0/current", "/ledgers1/current")


@attrs.frozen
class Add:
    ledger_id: LedgerId
    entry_id: EntryId
    payload: bytes


@attrs.frozen
class Step:
    """One workload step: an add, or a background step by name."""

    kind: str  # "add" | "checkpoint" | "flush" | "preallocate" | "close"
    add: Add | None = None


@attrs.frozen
class Written:
    """An add that returned, with the location the entry logger gave it."""

    add: Add
    location: Location


@attrs.frozen
class Oracle:
    """What the oracle knows at a crash point."""

    durable: tuple[Written, ...]
    checkpointed_logs: frozenset[EntryLogId]


def make_workload(seed: int, entries: int, ledgers: int) -> list[Step]:
    """A deterministic workload: adds over a few ledgers with background steps mixed in."""
    rng = random.Random(seed)
    next_entry = dict.fromkeys(range(1, ledgers + 1), 0)
    steps: list[Step] = []
    for number in range(1, entries + 1):
        ledger = rng.randrange(1, ledgers + 1)
        body = rng.randbytes(rng.randrange(0, 300))
        steps.append(Step("add", Add(LedgerId(ledger), EntryId(next_entry[ledger]), body)))
        next_entry[ledger] += 1
        # Background steps on a rough schedule (so every workload has them) with jitter
        # (so different seeds interleave them differently with rotation).
        roll = rng.random()
        if number % 7 == 0 or roll < 0.06:
            steps.append(Step("checkpoint"))
        if number % 11 == 0 or 0.06 <= roll < 0.09:
            steps.append(Step("flush"))
        if number % 5 == 0 or 0.09 <= roll < 0.12:
            steps.append(Step("preallocate"))
    steps.append(Step("checkpoint"))
    steps.append(Step("close"))
    return steps


def settings_for_check(flush_entrylog_bytes: int) -> EntryLoggerSettings:
    """Tiny limits so that a few entries fill a log and buffers flush mid-log."""
    return EntryLoggerSettings(
        log_size_limit_bytes=2048,
        flush_entrylog_bytes=flush_entrylog_bytes,
        write_buffer_bytes=512,
        preallocation_enabled=True,
    )


def fresh_disk() -> SimDisk:
    disk = SimDisk()
    for path in LEDGER_DIRS:
        disk.mkdir(path)
    for path in ("/", "/ledgers0", "/ledgers1", *LEDGER_DIRS):
        disk.fsync_dir(path)
    return disk


def record_crash_points(
    steps: list[Step], settings: EntryLoggerSettings, seed: int
) -> tuple[list[CrashPoint[Oracle]], list[Written]]:
    """Run the workload once, with a crash point before every operation."""
    disk = fresh_disk()
    written: list[Written] = []
    durable: list[Written] = []
    checkpointed: set[EntryLogId] = set()

    def oracle() -> Oracle:
        return Oracle(tuple(durable), frozenset(checkpointed))

    def run() -> None:
        logger = EntryLogger(disk, LEDGER_DIRS, settings, random.Random(seed))
        for step in steps:
            _apply(logger, step, written, durable, checkpointed)

    points = record_points(disk, oracle, run)
    return points, written


def _apply(
    logger: EntryLogger,
    step: Step,
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


def check_recovered(
    disk: SimDisk, point: Oracle, settings: EntryLoggerSettings, seed: int
) -> tuple[int, list[str]]:
    """Open the crashed disk afresh and run the four checks. Returns (entries read, problems)."""
    problems: list[str] = []
    try:
        logger = EntryLogger(disk, LEDGER_DIRS, settings, random.Random(seed + 1))
    except BkrefError as exc:
        return 0, [f"recovery failed to open the entry logger: {exc}"]
    problems += _check_durable(logger, point.durable, "after recovery")
    problems += _check_logs(disk, logger, point.checkpointed_logs)
    existing = _existing_log_ids(disk)
    try:
        location = logger.add_entry(LedgerId(999), encode_payload(999, 0, b"after-recovery"))
    except BkrefError as exc:
        problems.append(f"an add after recovery failed: {exc}")
    else:
        if location_log_id(location) in existing:
            problems.append(
                f"the log written after recovery reused id {location_log_id(location):x}, "
                "which an existing file already has"
            )
    problems += _check_durable(logger, point.durable, "after a new add")
    return len(point.durable), problems


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
    for directory in LEDGER_DIRS:
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
                for d in LEDGER_DIRS
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
    """Record the crash points of one workload and check every plan at each of them."""
    settings = settings_for_check(flush_entrylog_bytes)
    steps = make_workload(seed, entries, ledgers)
    points, _ = record_crash_points(steps, settings, seed)
    return explore(
        thin(points, max_points),
        lambda disk, oracle: check_recovered(disk, oracle, settings, seed),
        progress,
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        choices=("entry-log", "bookie", "all"),
        default="all",
        help="what to crash: the entry logger, the whole bookie, or both (default all)",
    )
    parser.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    parser.add_argument(
        "--entries", type=int, default=60, help="adds in the entry-log workload (default 60)"
    )
    parser.add_argument(
        "--ledgers", type=int, default=3, help="ledgers in the entry-log workload (default 3)"
    )
    parser.add_argument(
        "--adds", type=int, default=24, help="adds in the bookie workload (default 24)"
    )
    parser.add_argument(
        "--max-failures", type=int, default=10, help="failures to print (default 10)"
    )
    parser.epilog = (
        "entry-log: the workload runs twice, with flushEntrylogBytes 0 and 1536 "
        "(docs/crash-check.md). bookie: adds, a fence, checkpoints and a clean shutdown "
        "through the Bookie, checked for durability, fence durability, auth and lastMark "
        "progress. Exit status: 0 when every crash state passes every check, 1 when any "
        "fails, 2 on bad arguments."
    )


def _say(line: str) -> None:
    print(line, flush=True)


def _entry_log_runs(args: argparse.Namespace) -> Report:
    total = Report()
    for flush_bytes in (0, 1536):
        _say(
            f"crash-check entry-log: seed {args.seed}, {args.entries} adds over "
            f"{args.ledgers} ledgers, logSizeLimit 2048, flushEntrylogBytes {flush_bytes}"
        )
        report = run_check(
            seed=args.seed,
            entries=args.entries,
            ledgers=args.ledgers,
            flush_entrylog_bytes=flush_bytes,
            progress=_say,
        )
        _say(
            f"  {report.crash_points} crash points, {report.crash_states} crash states, "
            f"{report.checked_items} durable-entry reads, {len(report.failures)} failures"
        )
        total.merge(report)
    return total


def _bookie_run(args: argparse.Namespace) -> Report:
    from proofs.crash.bookie_check import run_bookie_check  # the bookie is only loaded if asked

    _say(
        f"crash-check bookie: seed {args.seed}, {args.adds} adds over 3 ledgers, a fence, "
        "checkpoints, shutdown; logSizeLimit 2048"
    )
    report = run_bookie_check(seed=args.seed, adds=args.adds, progress=_say)
    _say(
        f"  {report.crash_points} crash points, {report.crash_states} crash states, "
        f"{report.checked_items} acknowledged-add reads, {len(report.failures)} failures"
    )
    return report


def run(args: argparse.Namespace) -> int:
    if args.entries < 1 or args.ledgers < 1 or args.adds < 1:
        print(
            "bkref crash-check: --entries, --ledgers and --adds must be at least 1",
            file=sys.stderr,
        )
        return 2
    started = time.monotonic()
    total = Report()
    if args.target in ("entry-log", "all"):
        total.merge(_entry_log_runs(args))
    if args.target in ("bookie", "all"):
        total.merge(_bookie_run(args))
    elapsed = time.monotonic() - started
    rate = total.crash_states / elapsed if elapsed > 0 else 0.0
    for failure in total.failures[: args.max_failures]:
        print(
            f"FAIL before operation {failure.op_index} ({failure.op_kind}), plan "
            f"{failure.plan.describe()}: {failure.message}"
        )
    verdict = "PASS" if not total.failures else "FAIL"
    print(
        f"{verdict}: {total.crash_states} crash states checked in {elapsed:.1f} s "
        f"({rate:.0f} states/s), {len(total.failures)} failures"
    )
    return 0 if not total.failures else 1
