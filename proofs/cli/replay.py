"""``bkref replay --seed S --index I``: run one campaign scenario again, locally, without
Spark, and print its trace.

Spec pages: docs/campaign.md ("Replaying a row"), spec/trace.md (what is printed).

Why it exists: a campaign row is (seed, index) and the options it was run with, so the
scenario it judged can be drawn and run again anywhere at the same commit; the row's
``replay`` column is this command, whole. The trace goes to standard output (or ``--trace
FILE``) so that it can be kept and handed to ``bkref check-trace`` and ``bkref explain``; the
verdict, with the failure and the commands that replay the trace, goes to standard error.
By default the whole run is printed; ``--shrink`` prints the shrunk failing trace instead,
the one the campaign stored.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from proofs.campaign import external
from proofs.campaign.errors import CampaignError
from proofs.campaign.scenario import (
    DEFAULT_SHRINK_RUNS,
    DEFAULT_STEPS,
    Focus,
    ScenarioSpec,
    load_opener,
    run_drawn,
    shrink,
)
from proofs.cli.check_trace import whole_number
from proofs.harness.refinement import MANAGER_SETTINGS
from proofs.harness.workload import STRETCH_MAX
from spec.trace import Trace, write_trace

PREFIX = "bkref replay: "
EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2

EPILOG = f"""\
Give the options the campaign ran with (a row's replay column has them all): --steps,
--stretch-max, --focus, --variant and --manager for bkref's in-process bookie; --adapter,
--steps and --lazy-disk for a bookie behind an adapter. The same commit draws the same
scenario.

exit codes:
  {EXIT_PASS}  the scenario passed
  {EXIT_FAIL}  it failed (the trace printed is the one that fails)
  {EXIT_ERROR}  it could not be judged, or the options are wrong
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--seed", type=whole_number, required=True, help="the campaign's seed (its row's seed)"
    )
    parser.add_argument(
        "--index",
        type=whole_number,
        required=True,
        help="the scenario's index in the campaign (its row's index)",
    )
    parser.add_argument(
        "--steps",
        metavar="K",
        type=whole_number,
        default=DEFAULT_STEPS,
        help=f"steps per scenario, as the campaign's --steps (default {DEFAULT_STEPS})",
    )
    parser.add_argument(
        "--stretch-max",
        metavar="M",
        type=whole_number,
        default=STRETCH_MAX,
        help=f"the most adds in a healthy stretch (between faults), as the campaign's "
        f"--stretch-max (default {STRETCH_MAX})",
    )
    parser.add_argument("--focus", default="", help="the row's focus (second pass)")
    parser.add_argument(
        "--manager",
        choices=sorted(MANAGER_SETTINGS),
        default="single",
        help="the entry-log manager, as the campaign's --manager (default single)",
    )
    parser.add_argument(
        "--variant",
        metavar="MODULE:NAME",
        default="",
        help="a known-bad bookie class instead of bkref's, as the campaign's --variant",
    )
    parser.add_argument("--adapter", metavar="CMD", help="the bookie of an adapter campaign")
    parser.add_argument(
        "--lazy-disk",
        action="store_true",
        help="the adapter campaign ran with --lazy-disk (power loss through FUSE)",
    )
    parser.add_argument(
        "--shrink", action="store_true", help="print the shrunk failing trace instead"
    )
    parser.add_argument("--trace", metavar="FILE", help="write the trace there, not to stdout")


def say(line: str) -> None:
    print(PREFIX + line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        if args.adapter is not None:
            if args.manager != "single":
                raise CampaignError(
                    "--manager is for bkref's in-process bookie; not with --adapter"
                )
            return _adapter(args)
        return _in_process(args)
    except CampaignError as exc:
        say(str(exc))
        return EXIT_ERROR


def _in_process(args: argparse.Namespace) -> int:
    if args.lazy_disk:
        raise CampaignError("--lazy-disk is for a bookie behind --adapter")
    if args.steps < 1:
        raise CampaignError("--steps must be at least 1")
    spec = ScenarioSpec(
        seed=args.seed,
        index=args.index,
        steps=args.steps,
        focus=Focus.parse(args.focus),
        variant=args.variant,
        stretch_max=args.stretch_max,
        manager=args.manager,
    )
    opener = load_opener(spec.variant)
    run_ = run_drawn(spec, opener)
    shown = run_
    problem = run_.problem
    if problem is not None and problem.verdict == "fail" and args.shrink:
        shown, spent = shrink(run_, opener, spec.stretch_max, DEFAULT_SHRINK_RUNS)
        assert shown.problem is not None
        say(f"shrunk from {len(run_.steps)} to {len(shown.steps)} steps ({spent} re-runs)")
        say(f"the shrunk trace fails so: {shown.problem.message}")
    path = _emit(shown.trace, args.trace)
    name = f"scenario {spec.index} of seed {spec.seed}"
    if problem is None:
        say(f"{name}: PASS, {len(run_.steps)} steps, {len(run_.calls)} rules")
        return EXIT_PASS
    say(f"{name}: {problem.verdict.upper()}: {problem.message}")
    _commands(path)
    return EXIT_FAIL if problem.verdict == "fail" else EXIT_ERROR


def _adapter(args: argparse.Namespace) -> int:
    if args.focus or args.variant:
        raise CampaignError("--focus and --variant are for bkref's in-process bookie")
    problem = external.adapter_problem(args.adapter)
    if problem is not None:
        raise CampaignError(problem)
    spec = external.AdapterSpec(args.adapter, args.seed, args.index, args.steps, args.lazy_disk)
    with tempfile.TemporaryDirectory(prefix="bkref-replay-") as work:
        runner = external.conformance(spec, work, DEFAULT_SHRINK_RUNS if args.shrink else 0)
        try:
            if args.shrink:
                result = runner.run_one(spec.index)
                failure = result.failure
                trace_text = None
                if failure is not None and failure.trace_path:
                    with open(failure.trace_path, encoding="utf-8") as handle:
                        trace_text = handle.read()
                path = _emit_text(trace_text, args.trace)
            else:
                result, trace = runner.run_once(spec.index)
                path = _emit(trace, args.trace) if trace is not None else None
        except Exception as exc:
            raise CampaignError(f"the bookie could not be run: {exc}") from None
    name = f"scenario {spec.index} of seed {spec.seed} against {spec.adapter}"
    if result.failure is None:
        say(f"{name}: PASS, {result.steps} steps, {result.crashes} crash(es)")
        return EXIT_PASS
    say(f"{name}: {result.verdict.upper()}: {result.failure.message}")
    if path is not None:
        _commands(path)
    return EXIT_FAIL if result.verdict == "fail" else EXIT_ERROR


def _emit(trace: Trace, where: str | None) -> str | None:
    return _emit_text(write_trace(trace), where)


def _emit_text(text: str | None, where: str | None) -> str | None:
    """Write the trace to ``where`` (returning it) or to stdout (returning None)."""
    if text is None:
        return None
    if where is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    try:
        with open(where, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise CampaignError(f"--trace {where}: {exc.strerror or exc}") from None
    return where


def _commands(path: str | None) -> None:
    where = path or "<the trace, saved with --trace FILE>"
    say(f"replay it: bkref check-trace {where}")
    say(f"tell it:   bkref explain {where}")
