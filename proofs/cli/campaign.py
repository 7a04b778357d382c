"""``bkref campaign``: a verification campaign on Spark (embedded local Spark by default, any
Spark cluster with ``--master``).

Spec pages: docs/campaign.md (the guide this command is the subject of).

Why a thin command: the engine is proofs/campaign/campaign.py; this module reads the
options, picks the output directory (a new one per run: a campaign never writes into
another's), prints the progress and the verdict, and turns the summary into the exit status.
pyspark is imported only once the options are good (proofs/campaign/spark.py, through the
engine), so ``bkref campaign --help`` and a usage error start no JVM.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable

import attrs

from proofs.campaign.campaign import Campaign, Request, default_second_pass
from proofs.campaign.errors import CampaignError
from proofs.campaign.output import new_output_dir
from proofs.campaign.scenario import DEFAULT_SHRINK_RUNS, DEFAULT_STEPS
from proofs.campaign.summary import EXIT_COVERAGE, EXIT_ERROR, EXIT_FAIL, EXIT_PASS
from proofs.cli.check_trace import whole_number
from proofs.harness.refinement import MANAGER_SETTINGS
from proofs.harness.workload import STRETCH_MAX

PREFIX = "bkref campaign: "
SEED_MAX = 2**31 - 1
#: Scenarios of a campaign unless told: about a minute on an idle 2-core machine, Spark's
#: start-up included (docs/benchmarks.md, "The main job's run time").
DEFAULT_SCENARIOS = 800
#: Where campaigns go unless told: a new directory per run under it, and ``latest``.
DEFAULT_ROOT = "bkref-campaign"

EPILOG = f"""\
Each scenario is the refinement workload (adds, reads, fences, deletes, checkpoints, group
commits, rotations, GC and each compaction phase, faults and full disks, crashes before and
inside every step under every crash plan) drawn from (seed, index) alone, run against bkref's
Bookie on the simulated disk and judged step by step by the model and the properties of
spec/properties.md. With --adapter, the conformance kit's scenarios run against any bookie
that speaks the adapter protocol instead. The first pass draws as the refinement test does;
the second (the last --second-pass scenarios) favours what the first missed.

Output (--out, default {DEFAULT_ROOT}/<time>-seed<S>, and {DEFAULT_ROOT}/latest): scenarios/
(the Parquet dataset, one row per scenario: docs/campaign.md "Rows"), report.html,
summary.json, failures/ (each failing scenario's shrunk trace, for bkref check-trace and
bkref explain) and spark.log. Any row runs again locally with its replay command.

Needs Java 17+ for Spark. The guide, and how to run on a cluster: docs/campaign.md.

exit codes:
  {EXIT_PASS}  every scenario passed and every coverage probe met its minimum
  {EXIT_FAIL}  a scenario failed: its shrunk trace and replay command are printed
  {EXIT_ERROR}  the campaign could not run (bad options, no Java, Spark failed), a scenario
     could not be judged (the checker broke), or rows came from other code
  {EXIT_COVERAGE}  every scenario passed, but a coverage probe stayed under its minimum
"""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``bkref campaign``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--scenarios",
        metavar="N",
        type=_positive,
        default=DEFAULT_SCENARIOS,
        help=f"scenarios in all, both passes (default {DEFAULT_SCENARIOS})",
    )
    parser.add_argument(
        "--steps",
        metavar="K",
        type=_positive,
        default=DEFAULT_STEPS,
        help=f"steps each scenario runs to (default {DEFAULT_STEPS}; with --adapter: "
        "requests per scenario)",
    )
    parser.add_argument("--seed", type=whole_number, default=None, help="default: random")
    parser.add_argument(
        "--master",
        metavar="URL",
        default="local[*]",
        help="Spark master: local[*] (default, embedded), local[N], spark://HOST:PORT",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="a new directory for the output (default: see below)"
    )
    parser.add_argument(
        "--second-pass",
        metavar="M",
        type=whole_number,
        default=None,
        help="scenarios of the steered second pass, out of N (default N/5; 0: none)",
    )
    parser.add_argument(
        "--adapter",
        metavar="CMD",
        help="check a bookie that speaks the adapter protocol (as bkref conform does)",
    )
    parser.add_argument(
        "--lazy-disk",
        action="store_true",
        help="with --adapter: power losses through the FUSE lazy disk (needs fuse3)",
    )
    parser.add_argument(
        "--variant",
        metavar="MODULE:NAME",
        default="",
        help="check this Bookie subclass (or opener) instead of bkref's: a known-bad variant "
        "or a fork; importable on every executor",
    )
    parser.add_argument(
        "--shrink-runs",
        metavar="N",
        type=whole_number,
        default=DEFAULT_SHRINK_RUNS,
        help=f"re-runs a failure's shrinking may spend (default {DEFAULT_SHRINK_RUNS})",
    )
    parser.add_argument(
        "--stretch-max",
        metavar="M",
        type=_at_least(4),
        default=STRETCH_MAX,
        help=f"the longest healthy stretch of adds (default {STRETCH_MAX}; deeper: 180)",
    )
    parser.add_argument(
        "--manager",
        choices=sorted(MANAGER_SETTINGS),
        default="single",
        help="the entry-log manager of bkref's bookie: single (default), per-ledger "
        "(entryLogPerLedgerEnabled, at most 2 active logs so that short scenarios evict) or "
        "slots (bkref's entryLogSlotsPerLedgerDir=2, at most 2 ledgers mapped so that slots "
        "are forgotten and shared); with many active logs the scenarios also draw write closes",
    )


def _positive(text: str) -> int:
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = whole_number(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more")
        return value

    return parse


def say(line: str) -> None:
    print(PREFIX + line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from proofs.campaign import report

    seed: int = args.seed if args.seed is not None else random.SystemRandom().randint(0, SEED_MAX)
    second = args.second_pass
    if second is None:
        second = default_second_pass(args.scenarios)
    try:
        request = Request(
            scenarios=args.scenarios,
            steps=args.steps,
            seed=seed,
            master=args.master,
            out_dir="",
            second_pass=second,
            shrink_runs=args.shrink_runs,
            stretch_max=args.stretch_max,
            variant=args.variant,
            manager=args.manager,
            adapter=args.adapter,
            lazy_disk=args.lazy_disk,
        )
        from proofs.campaign.campaign import check_request

        check_request(request)
        request = attrs.evolve(
            request, out_dir=new_output_dir(args.out, DEFAULT_ROOT, f"-seed{seed}")
        )
        say(f"seed {seed} (repeat with --seed {seed}); output in {request.out_dir}")
        campaign = Campaign(request, say=say, progress=sys.stderr)
        summary = campaign.run()
    except CampaignError as exc:  # SparkUnavailable too
        say(str(exc))
        return EXIT_ERROR
    print(report.terminal_summary(summary), flush=True)
    return summary.exit_code
