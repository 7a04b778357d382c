"""``bkref conform --adapter CMD``: check any bookie that speaks the adapter protocol.

Spec pages: spec/adapter.md, docs/conformance.md (the guide this command is the subject of).

Why a thin command: the engine is proofs/conform/runner.py (also driven by the pytest
plugin), so this module only reads the options, prints the terminal summary on standard
error while the run goes (a line per scenario, then the verdict), writes the reports when
asked, and turns the run into an exit status: 0 every scenario passed, 1 a scenario failed
(its shrunk trace, how to replay it and how to run it again are printed), 2 the bookie could
not be run (its stderr tail printed), its ready line is not a consistent claim, or
``--lazy-disk`` cannot mount here (what to install is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import signal
import sys
from collections.abc import Iterator, Sequence

from proofs.cli.check_trace import whole_number
from proofs.conform.process import DEFAULT_START_TIMEOUT_S, kill_all
from proofs.conform.report import terminal_summary, write_reports
from proofs.conform.results import EXIT_CANNOT_RUN, EXIT_DIVERGENCE, EXIT_PASS
from proofs.conform.runner import (
    DEFAULT_SHRINK_RUNS,
    Conformance,
    lazy_disk_unavailable,
)
from proofs.conform.scenario import PROFILES
from proofs.conform.session import DEFAULT_RESPONSE_TIMEOUT_S

PREFIX = "bkref conform: "
SEED_MAX = 2**31 - 1

EPILOG = f"""\
CMD is one string, split like a shell's words; {{data_dir}} in it is replaced by the
scenario's data directory (new and empty for each scenario), also given as the environment
variable BKREF_DATA_DIR. The bookie's ready line says what it supports (spec/adapter.md,
version 2 "Capabilities"); it is held to exactly that. The guide: docs/conformance.md.

profiles (scenarios x requests x crashes): {
    ", ".join(f"{name} {s}x{r}x{c}" for name, (s, r, c) in PROFILES.items())
}

exit codes:
  {EXIT_PASS}  every scenario passed
  {EXIT_DIVERGENCE}  a scenario failed: its shrunk trace is written and the commands that
     replay it (bkref check-trace, bkref explain) and run it again are printed
  {EXIT_CANNOT_RUN}  the bookie cannot be run (its standard error is shown: it did not start, or
     wrote its ready line and then answered nothing), its ready line is not a consistent
     claim, or --lazy-disk cannot mount here
  128+N  stopped by signal N (SIGTERM 143, SIGINT 130): the bookie under test is killed
     (its process group) and its lazy disk unmounted before the exit
"""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``bkref conform``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--adapter", metavar="CMD", required=True, help="the command that starts the bookie"
    )
    parser.add_argument(
        "--profile",
        choices=tuple(PROFILES),
        default="quick",
        help="how many scenarios and how long each (default quick; docs/conformance.md)",
    )
    parser.add_argument(
        "--lazy-disk",
        action="store_true",
        help="put the data directory on a FUSE mount that loses what was not fsynced at a "
        "power loss (needs fuse3 and /dev/fuse)",
    )
    parser.add_argument(
        "--seed", type=whole_number, default=None, help="the run's seed (default: random)"
    )
    parser.add_argument(
        "--scenario",
        metavar="I",
        type=whole_number,
        action="append",
        default=None,
        help="run only scenario I (repeatable)",
    )
    parser.add_argument("--report", metavar="DIR", help="write junit.xml and report.html there")
    parser.add_argument(
        "--work-dir", metavar="DIR", help="where scenario directories go (default: a temp dir)"
    )
    parser.add_argument(
        "--shrink-runs",
        metavar="N",
        type=whole_number,
        default=DEFAULT_SHRINK_RUNS,
        help=f"re-runs a failure's shrinking may spend (default {DEFAULT_SHRINK_RUNS}; 0: none)",
    )
    parser.add_argument(
        "--response-timeout",
        metavar="S",
        type=float,
        default=DEFAULT_RESPONSE_TIMEOUT_S,
        help=f"seconds the bookie may take to answer a request (default "
        f"{DEFAULT_RESPONSE_TIMEOUT_S:g}); a bookie that answers nothing is found within it",
    )
    parser.add_argument(
        "--start-timeout",
        metavar="S",
        type=float,
        default=DEFAULT_START_TIMEOUT_S,
        help=f"seconds the bookie may take to write its ready line "
        f"(default {DEFAULT_START_TIMEOUT_S:g})",
    )


class _Signalled(BaseException):
    """SIGTERM or SIGINT arrived while scenarios ran (raised in the main thread by the
    handler, so that each scenario's ``finally`` unmounts its lazy disk on the way out)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGINT kill every bookie the run started (their process groups:
    proofs/conform/process.py ``kill_all``) before anything else, then unwind the run (issue
    26: SIGTERM left the bookie under test running and its lazy disk mounted)."""

    def handler(signum: int, _frame: object) -> None:
        kill_all()
        raise _Signalled(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        kill_all()  # whatever a scenario left, however it ended


def say(line: str) -> None:
    print(PREFIX + line if line and not line.startswith(" ") else line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.lazy_disk:
        why = lazy_disk_unavailable()
        if why is not None:
            say(f"--lazy-disk cannot be used here: {why}")
            return EXIT_CANNOT_RUN
    seed: int = args.seed if args.seed is not None else random.SystemRandom().randint(0, SEED_MAX)
    say(f"seed {seed} (repeat with --seed {seed}); profile {args.profile}")
    conformance = Conformance(
        args.adapter,
        profile=args.profile,
        seed=seed,
        lazy_disk=args.lazy_disk,
        report_dir=args.report,
        work_dir=args.work_dir,
        progress=say,
        shrink=args.shrink_runs > 0,
        shrink_runs=args.shrink_runs,
        start_timeout=args.start_timeout,
        response_timeout=args.response_timeout,
    )
    indices: Sequence[int] | None = args.scenario
    if indices is not None:
        bad = [i for i in indices if i >= conformance.scenario_count()]
        if bad:
            say(
                f"--scenario {bad[0]}: the {args.profile} profile has scenarios 0 to "
                f"{conformance.scenario_count() - 1}"
            )
            return EXIT_CANNOT_RUN
    try:
        with _stopped_by_signals():
            result = conformance.run(indices)
    except _Signalled as stop:
        say(
            f"stopped by {signal.Signals(stop.signum).name}: the bookie under test was killed "
            "(its process group) and its lazy disk, if any, unmounted; no verdict"
        )
        return 128 + stop.signum
    if args.report:
        try:
            write_reports(result, args.report)
        except OSError as exc:
            say(f"--report: cannot write to {args.report}: {exc.strerror or exc}")
    print(terminal_summary(result, args.report), file=sys.stderr, flush=True)
    return result.exit_code
