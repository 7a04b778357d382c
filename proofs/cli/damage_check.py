"""``bkref damage-check``: generated damage on crash states, judged by one oracle.

Runs proofs/damage/check.py (docs/crash-check.md, "Generated damage"): the bookie crash
check's workload, with an acknowledged delete, crashed at ``--states`` points spread over
its run; each crashed disk damaged ``--damages`` times (every class of the format pages'
"Damage" tables, aimed at sector boundaries and lastMark's offset); a bookie started on each
damaged disk must refuse it with a typed error naming a file and change nothing, or start
with every acknowledged add, fence, key and delete intact; ``bkref inspect`` must say the
same. A line per crash state, then a table of verdicts by damage and by file, then the
verdict line. ``--keep DIR`` writes each violation as a regression directory, and
``--replay DIR`` judges one again. Exit 0: no violation; 1: violations; 2: bad arguments
or a check that could not run.
"""

from __future__ import annotations

import argparse
import sys

from proofs.crash.bookie_check import MANAGERS
from proofs.damage.check import (
    DamageCheckError,
    describe_failure,
    read_kept,
    replay_kept,
    run_damage_check,
)

EPILOG = """\
verdicts: refused (a typed error naming a file, nothing changed), intact (started, everything
acknowledged reads back, fences and keys hold, deletes stay), detected at a read (started; an
acknowledged entry's read answered io_error: damage met where the format has no checksum,
spec/format/entry_log.md e3), undetectable (a loss the format pages' tables say no reader can
see: rows e4/j7, j6, j12/j14/j20/j21), violation (anything else: a silent loss, a
resurrection, a traceback, a refusal naming no file or changing files, inspect disagreeing).

exit status: 0 no violation; 1 violations (or, with --replay, the kept state is still one);
2 bad arguments, a directory that is not a kept state, or a check that could not run.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=1, help="the run's seed (default 1)")
    parser.add_argument(
        "--states", type=int, default=8, help="crash states to damage (default 8, at least 2)"
    )
    parser.add_argument(
        "--damages", type=int, default=100, help="damaged starts per crash state (default 100)"
    )
    parser.add_argument("--adds", type=int, default=40, help="adds in the workload (default 40)")
    parser.add_argument(
        "--manager",
        choices=MANAGERS,
        default="single",
        help="the entry-log manager of the bookie (default single)",
    )
    parser.add_argument(
        "--no-inspect",
        action="store_true",
        help="do not hold bkref inspect to recovery's verdict (faster: no files written)",
    )
    parser.add_argument(
        "--keep", metavar="DIR", help="write each violation as a regression directory in DIR"
    )
    parser.add_argument(
        "--replay", metavar="DIR", help="judge one regression directory again, and nothing else"
    )
    parser.add_argument(
        "--max-failures", type=int, default=10, help="violations to print (default 10)"
    )
    parser.add_argument(
        "--quiet", action="store_true", help="print only the summary and the violations"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG


def run(args: argparse.Namespace) -> int:
    if args.replay is not None:
        return _replay(args.replay, inspect=not args.no_inspect)
    if args.states < 2 or args.damages < 1 or args.adds < 8:
        print(
            "bkref damage-check: --states must be at least 2, --damages at least 1 and --adds "
            "at least 8",
            file=sys.stderr,
        )
        return 2
    say = _quiet if args.quiet else _say
    say(
        f"bkref damage-check: seed {args.seed}, manager {args.manager}, {args.states} crash "
        f"states x {args.damages} damages, {args.adds} adds"
        + ("" if args.no_inspect else "; bkref inspect held to recovery's verdict")
    )
    try:
        report = run_damage_check(
            seed=args.seed,
            states=args.states,
            damages=args.damages,
            adds=args.adds,
            manager=args.manager,
            keep=args.keep,
            inspect=not args.no_inspect,
            progress=say,
        )
    except DamageCheckError as exc:
        print(f"bkref damage-check: {exc}", file=sys.stderr)
        return 2
    for failure in report.failures[: max(0, args.max_failures)]:
        print(f"VIOLATION {describe_failure(failure)}")
    hidden = len(report.failures) - max(0, args.max_failures)
    if hidden > 0:
        print(f"... and {hidden} more violations")
    for line in report.summary_lines():
        print(line)
    return 0 if report.ok else 1


def _say(line: str) -> None:
    print(line, flush=True)


def _quiet(_line: str) -> None:
    pass


def _replay(directory: str, *, inspect: bool) -> int:
    try:
        kept = read_kept(directory)
        verdict = replay_kept(directory, inspect=inspect)
    except DamageCheckError as exc:
        print(f"bkref damage-check: {exc}", file=sys.stderr)
        return 2
    print(f"{directory}: {kept.described}")
    print(f"verdict: {verdict.verdict}" + (f" ({verdict.row})" if verdict.row else ""))
    for problem in verdict.problems:
        print(f"  {problem}")
    if verdict.refusal:
        print(f"  refusal: {verdict.refusal}")
    return 1 if verdict.verdict == "violation" else 0
