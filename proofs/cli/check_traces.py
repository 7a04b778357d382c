"""``bkref check-traces DIR``: judge every recorded trace under a directory, in parallel on
Spark, one verdict row per trace.

Spec pages: spec/trace.md, docs/campaign.md ("Checking many traces").

Why a thin command: each file is judged by proofs/campaign/traces.py (as ``bkref
check-trace`` judges one), the job and the dataset are proofs/campaign/spark.py's; this
module finds the files, picks the output directory, prints a line per trace that did not
pass and the totals, and turns them into the exit status. A file that cannot be read or is
not a trace is an ``error`` row; the run goes on.
"""

from __future__ import annotations

import argparse
import os
import sys

from proofs.campaign.errors import CampaignError
from proofs.campaign.output import new_output_dir
from proofs.campaign.progress import ProgressLine
from proofs.campaign.rows import TRACE_FIELDS
from proofs.campaign.traces import DEFAULT_GLOB, find_traces, judge_file

PREFIX = "bkref check-traces: "
DEFAULT_ROOT = "bkref-check-traces"
EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
#: Lines of traces that did not pass, printed at most.
SHOWN_MAX = 50

EPILOG = f"""\
Every file under DIR whose name matches --glob (default {DEFAULT_GLOB}), in every
subdirectory, is read and replayed against the model as bkref check-trace does. The verdicts
are written as a Parquet dataset (--out, default {DEFAULT_ROOT}/<time>/traces/; columns:
docs/campaign.md "Rows"). Needs Java 17+ for Spark.

exit codes:
  {EXIT_PASS}  every trace passed
  {EXIT_FAIL}  a trace failed: the model or a property refused a step
  {EXIT_ERROR}  no trace failed, but one could not be judged (unreadable, not a trace, a history
     the model cannot run), or the run itself could not be made (no such directory, Spark)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("directory", metavar="DIR", help="a directory of trace files")
    parser.add_argument(
        "--glob", default=DEFAULT_GLOB, help=f"which file names (default {DEFAULT_GLOB})"
    )
    parser.add_argument(
        "--master", metavar="URL", default="local[*]", help="Spark master (default local[*])"
    )
    parser.add_argument("--out", metavar="DIR", help="a new directory for the output")


def say(line: str) -> None:
    print(PREFIX + line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    directory: str = args.directory
    if not os.path.isdir(directory):
        say(f"{directory} is not a directory")
        return EXIT_ERROR
    files = [(os.path.abspath(path), name) for path, name in find_traces(directory, args.glob)]
    if not files:
        say(f"no file under {directory} matches {args.glob}: nothing to check")
        return EXIT_ERROR
    from proofs.campaign import spark  # here: nothing before needs a JVM

    try:
        out = new_output_dir(args.out, DEFAULT_ROOT)
        dataset = os.path.join(out, "traces")
        say(f"{len(files):,} trace(s) under {directory}; output in {out}")
        with spark.session(args.master, out, app_name="bkref check-traces") as session:
            line = ProgressLine("traces", len(files), sys.stderr)
            try:
                spark.run_job(
                    session, files, judge_file, TRACE_FIELDS, dataset, progress=line.update
                )
            finally:
                line.finish()
            rows = spark.trace_rows(session, dataset)
    except CampaignError as exc:  # SparkUnavailable too
        say(str(exc))
        return EXIT_ERROR
    return _report(rows, dataset)


def _report(rows: list[dict[str, object]], dataset: str) -> int:
    counts = {verdict: 0 for verdict in ("pass", "fail", "error")}
    shown = 0
    for row in rows:
        verdict = str(row["verdict"])
        counts[verdict] += 1
        if verdict != "pass" and shown < SHOWN_MAX:
            shown += 1
            step = f" (step {row['failing_step']})" if row["failing_step"] is not None else ""
            print(f"{verdict.upper()} {row['path']}{step}: {row['message']}")
    if counts["fail"] + counts["error"] > shown:
        print(f"... and {counts['fail'] + counts['error'] - shown} more: see the dataset")
    print(
        f"bkref check-traces: {counts['pass']} passed, {counts['fail']} failed, "
        f"{counts['error']} could not be judged, of {len(rows)} trace(s); rows in {dataset}"
    )
    if counts["fail"]:
        return EXIT_FAIL
    return EXIT_ERROR if counts["error"] else EXIT_PASS
