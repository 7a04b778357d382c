"""``bkref crash-check``: crash workloads before every file-system operation, recover, check.

Two targets (docs/crash-check.md):

- ``entry-log``: the entry logger alone (proofs/crash/entry_log_check.py), a component check
  of durability of forced entries and format validity (properties 1 and 7 at the entry-log
  level), run twice, with flushEntrylogBytes 0 and 1536. A failure names its workload, crash
  point and plan, and the command that re-runs exactly that state (``--point``, ``--plan``),
  which then prints what it checked.
- ``bookie``: the whole bookie through the refinement harness (proofs/crash/bookie_check.py):
  every crash state is a trace judged by the model and the properties of
  spec/properties.md; a failure's trace is saved and replays with ``bkref check-trace``.

``--manager`` picks the entry-log manager both targets run: ``single`` (one active log, the
default: today's run time), ``per-ledger`` (an active log per ledger,
entryLogPerLedgerEnabled=true, with maximumNumberOfActiveEntryLogs 2 so logs are evicted
inside the workloads; about ten times the run time), ``slots`` (bkref's own
entryLogSlotsPerLedgerDir=1: two slots shared by the ledgers, at most two mapped), or ``all``
(the three, one after the other). Each run's header and summary lines name its manager; a
per-ledger run's lines are labelled ``entry-log per-ledger`` and ``bookie per-ledger``, a
slots run's ``entry-log slots`` and ``bookie slots``.

Progress lines (every two seconds) name the target and the crash point, and say what the
checks did so far: crash states, how many were recovered and checked, and what those checks
verified (durable entries read back intact; restarts with lastMark checked, entries read
back, fence and wrong-key probes). A summary ends the run: per target what was crashed, how
many states were recovered and checked, which properties held, then the verdict line.
``--quiet`` prints only the failures and the summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import attrs

from proofs.crash.entry_log_check import (
    MANAGERS,
    NoSuchState,
    Workload,
    describe_manager,
    properties_for,
    replay_state,
    run_check,
)
from proofs.crash.entry_log_check import SUMMARY as ENTRY_LOG_SUMMARY
from proofs.crash.explorer import CrashFailure, Report

#: The two entry-log runs of a full check (docs/crash-check.md).
FLUSH_ENTRYLOG_BYTES = (0, 1536)

EPILOG = """\
entry-log: adds, checkpoints, flushes and preallocation through the entry logger, run with
flushEntrylogBytes 0 and 1536 (or the one --flush-entrylog-bytes names); checks durability
of forced entries, format validity, typed failures and no stomping on log ids. A failure
prints the command that re-runs its state: --point N (and --plan P) re-runs crash point N
(under plan P) of one entry-log run and prints what it checked.

bookie: adds, a fence, a wrong-key add and fence, a write close, the clock moved past the
entry-log managers' access expiry, journal forces and checkpoints (some phase
by phase, with adds between the phases), rotations and a clean shutdown through the Bookie;
every crash state is a trace judged by the model and properties 1, 2, 3 and 6 of
spec/properties.md. A failure prints where its trace was saved: replay it with bkref
check-trace PATH, tell it with bkref explain PATH.

--manager: which entry-log manager the entry logger and the bookie run. single (the default)
keeps one active log (entryLogPerLedgerEnabled=false). per-ledger keeps an active log per
ledger (entryLogPerLedgerEnabled=true) with maximumNumberOfActiveEntryLogs 2, so logs are
evicted inside the workloads; in the entry-log target also
entrylogMapAccessExpiryTimeInSeconds 4 with the clock moving 1 s before each add, so idle
ledgers expire (the bookie's clock does not move: no expiry there). The same checks run,
generalised to many active logs: with per-ledger logs a checkpoint is a flush (every entry
added before it is durable), checkpointed logs must each hold one ledger's records, and after
recovery three new ledgers must each get a new log of their own; the per-ledger manager
preallocates nothing, so the preallocate steps do nothing there. per-ledger takes about ten
times as long as single (several logs unsynced at once: more crash points, more plans each).
slots (bkref's own entryLogSlotsPerLedgerDir=1: one slot per ledger directory, two active
logs shared by the ledgers, at most two ledgers mapped, the same expiry and clock) checks
the same, a checkpoint being a flush there too; its logs hold several ledgers, the oracle
follows the round robin to know which logs are sealed, and after recovery the three new
ledgers' logs must have new ids. all runs the three, single first. A per-ledger or slots
failure's re-run command names its --manager.

Exit status: 0 when every crash state passes every check, 1 when any fails, 2 on bad
arguments."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        choices=("entry-log", "bookie", "all"),
        default="all",
        help="what to crash: the entry logger, the whole bookie, or both (default all)",
    )
    parser.add_argument(
        "--manager",
        choices=(*MANAGERS, "all"),
        default="single",
        help=(
            "the entry-log manager to crash: single (one active log; the default), "
            "per-ledger (entryLogPerLedgerEnabled=true, maximumNumberOfActiveEntryLogs 2; "
            "about ten times as long), slots (bkref's entryLogSlotsPerLedgerDir=1), or all "
            "(the three)"
        ),
    )
    parser.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    parser.add_argument(
        "--entries", type=int, default=60, help="adds in the entry-log workload (default 60)"
    )
    parser.add_argument(
        "--ledgers", type=int, default=3, help="ledgers in the entry-log workload (default 3)"
    )
    parser.add_argument(
        "--flush-entrylog-bytes",
        type=int,
        default=None,
        metavar="B",
        help="entry-log: run only with this flushEntrylogBytes (default: 0, then 1536)",
    )
    parser.add_argument(
        "--point",
        type=int,
        default=None,
        metavar="N",
        help="entry-log: re-run crash point N only, and print what was checked",
    )
    parser.add_argument(
        "--plan",
        type=int,
        default=None,
        metavar="P",
        help="with --point: only the P-th crash plan at that point (default: every plan)",
    )
    parser.add_argument(
        "--adds", type=int, default=24, help="adds in the bookie workload (default 24)"
    )
    parser.add_argument(
        "--max-failures", type=int, default=10, help="failures to print (default 10)"
    )
    parser.add_argument(
        "--quiet", action="store_true", help="print only the summary and the failures"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG


def _argument_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, or None."""
    if args.entries < 1 or args.ledgers < 1 or args.adds < 1:
        return "--entries, --ledgers and --adds must be at least 1"
    if args.flush_entrylog_bytes is not None and args.flush_entrylog_bytes < 0:
        return "--flush-entrylog-bytes must be at least 0"
    if args.plan is not None and args.point is None:
        return "--plan needs --point"
    if args.point is not None:
        if args.target != "entry-log":
            return (
                "--point re-runs an entry-log crash state: give --target entry-log (a bookie "
                "failure replays from its saved trace with bkref check-trace)"
            )
        if args.flush_entrylog_bytes is None:
            return "--point needs --flush-entrylog-bytes (the failure's re-run command names it)"
        if args.manager == "all":
            return (
                "--point re-runs one run's crash state: give --manager single, per-ledger or slots "
                "(the failure's re-run command names it)"
            )
        if args.point < 0 or (args.plan is not None and args.plan < 0):
            return "--point and --plan must be at least 0"
    return None


@attrs.frozen
class Part:
    """One target's run: its report and how to say what it crashed and what it checked."""

    name: str
    report: Report
    #: What was crashed, in words ("the entry logger (2 runs: ...)").
    crashed: str
    #: The properties checked, in words (the header line's).
    properties: str
    #: The same, in a few words for the last line.
    short: str


def run(args: argparse.Namespace) -> int:
    problem = _argument_error(args)
    if problem is not None:
        print(f"bkref crash-check: {problem}", file=sys.stderr)
        return 2
    if args.point is not None:
        return _replay(args)
    say: Callable[[str], None] = _quiet if args.quiet else _say
    started = time.monotonic()
    managers = MANAGERS if args.manager == "all" else (args.manager,)
    parts: list[Part] = []
    if args.target in ("entry-log", "all"):
        parts += [_entry_log_runs(args, say, manager) for manager in managers]
    if args.target in ("bookie", "all"):
        parts += [_bookie_run(args, say, manager) for manager in managers]
    total = Report()
    for part in parts:
        total.merge(part.report)
    for failure in total.failures[: args.max_failures]:
        _print_failure(failure)
    if len(total.failures) > args.max_failures:
        print(f"... and {len(total.failures) - args.max_failures} more failures")
    elapsed = time.monotonic() - started
    for line in summary_lines(args.seed, total, parts, elapsed, managers):
        print(line)
    return 0 if not total.failures else 1


def _say(line: str) -> None:
    print(line, flush=True)


def _quiet(_line: str) -> None:
    pass


def _part_name(target: str, manager: str) -> str:
    """A target's name in the lines of one manager's run: ``entry-log``, ``bookie`` for the
    single manager, ``entry-log per-ledger``, ``bookie slots`` ... for the others."""
    return target if manager == "single" else f"{target} {manager}"


def _entry_log_runs(args: argparse.Namespace, say: Callable[[str], None], manager: str) -> Part:
    total = Report()
    name = _part_name("entry-log", manager)
    properties = properties_for(manager)
    runs = (
        FLUSH_ENTRYLOG_BYTES if args.flush_entrylog_bytes is None else (args.flush_entrylog_bytes,)
    )
    for flush_bytes in runs:
        workload = Workload(args.seed, args.entries, args.ledgers, flush_bytes, manager)
        say(f"crash-check {name}: {workload.describe()}; checks {properties}")
        report = run_check(
            seed=args.seed,
            entries=args.entries,
            ledgers=args.ledgers,
            flush_entrylog_bytes=flush_bytes,
            manager=manager,
            progress=say,
        )
        say(
            f"  {workload.label} done: {report.crash_points} crash points, "
            f"{report.describe_states()}"
        )
        total.merge(report)
    settings = " and ".join(str(flush_bytes) for flush_bytes in runs)
    crashed = (
        f"the entry logger ({args.entries} adds over {args.ledgers} ledgers, seed {args.seed}; "
        f"{len(runs)} run(s), flushEntrylogBytes {settings}; {describe_manager(manager)})"
    )
    return Part(name, total, crashed, properties, ENTRY_LOG_SUMMARY)


def _bookie_run(args: argparse.Namespace, say: Callable[[str], None], manager: str) -> Part:
    # The bookie and the harness are loaded only when asked for.
    from proofs.crash.bookie_check import (
        PROPERTIES,
        SUMMARY,
        BookieRun,
        run_bookie_check,
    )
    from proofs.crash.bookie_check import describe_manager as describe_bookie_manager

    name = _part_name("bookie", manager)
    run = BookieRun(args.seed, args.adds, manager)
    say(f"crash-check {name}: {run.describe()}; {PROPERTIES}")
    report = run_bookie_check(seed=args.seed, adds=args.adds, manager=manager, progress=say)
    say(
        f"  {name} done: {report.crash_points} crash points, {report.describe_states()}, "
        f"{report.checked_items} steps judged by the model after the crashes"
    )
    crashed = (
        f"the whole bookie ({args.adds} adds over 3 ledgers, a fence, seed {args.seed}; "
        f"{describe_bookie_manager(manager)})"
    )
    return Part(name, report, crashed, PROPERTIES, SUMMARY)


def _print_failure(failure: CrashFailure) -> None:
    where = failure.where or f"crash point {failure.op_index} (before a {failure.op_kind})"
    plan = "" if failure.plan is None else f", plan: {failure.plan.describe()}"
    print(f"FAIL {where}{plan}: {failure.message}")
    for line in failure.replay_lines():
        print(f"  {line}")


def summary_lines(
    seed: int,
    total: Report,
    parts: list[Part],
    elapsed: float,
    managers: tuple[str, ...] = ("single",),
) -> list[str]:
    """The summary: per target (and manager) what was crashed, how many states were
    recovered and checked and what the checks did, which properties held; then the verdict
    line (verdict, states, time, rate, the managers), which stays last."""
    lines = [f"summary (seed {seed}):"]
    for part in parts:
        report = part.report
        held = (
            f"held: {part.properties}"
            if not report.failures
            else f"checked: {part.properties}; {len(report.failures)} failures (above)"
        )
        lines.append(
            f"  {part.name}: crashed {part.crashed} before each of {report.crash_points} "
            f"file-system operations, under every crash plan; "
            f"{report.describe_states()}; {held}"
        )
    rate = total.crash_states / elapsed if elapsed > 0 else 0.0
    verdict = "PASS" if not total.failures else "FAIL"
    detail = ", ".join(f"{part.name} {part.report.crash_states} ({part.short})" for part in parts)
    named = " and ".join([", ".join(managers[:-1]), managers[-1]] if managers[:-1] else managers)
    lines.append(
        f"{verdict}: {total.crash_states} crash states checked in {elapsed:.1f} s "
        f"({rate:.0f} states/s; {total.recovered_states} recovered, the rest identical to a "
        f"passing disk at the same point), {len(total.failures)} failures; entry-log "
        f"manager{'s' if len(managers) > 1 else ''} {named}. {detail}"
    )
    return lines


def _replay(args: argparse.Namespace) -> int:
    """``--point``: re-run one entry-log crash state (or every plan at one point) and say
    what was checked."""
    workload = Workload(
        args.seed, args.entries, args.ledgers, args.flush_entrylog_bytes, args.manager
    )
    try:
        point, checks = replay_state(workload, args.point, args.plan)
    except NoSuchState as exc:
        print(f"bkref crash-check: {exc}", file=sys.stderr)
        return 2
    durable = len(point.oracle.durable)
    print(
        f"crash-check {_part_name('entry-log', args.manager)}: {workload.describe()}; crash "
        f"point {args.point} (before a "
        f"{point.op_kind}): the oracle holds {durable} durable entries and "
        f"{len(point.oracle.checkpointed_logs)} checkpointed logs; {len(checks)} plan(s)"
    )
    failed = 0
    for check in checks:
        status = "FAIL" if check.problems else "ok"
        print(f"  plan {check.plan_index} ({check.plan.describe()}): {status}")
        for line in check.account:
            print(f"    {line}")
        failed += bool(check.problems)
    verdict = "PASS" if not failed else "FAIL"
    print(f"{verdict}: {len(checks)} crash state(s) re-run, {failed} failed")
    return 0 if not failed else 1
