"""``bkref check-traces``'s work on one file: read a recorded trace and judge it against the
model, as ``bkref check-trace`` does, and make a row of the verdict (schema:
proofs/campaign/rows.py TRACE_FIELDS).

Spec pages: spec/trace.md (what a valid trace is), docs/campaign.md ("Checking many traces").

Why it is shaped so: a directory of traces from ``bkref record`` runs of many bookies is
judged in parallel on Spark, one file per item, and no file may stop the run: a file that
cannot be read, is not UTF-8, is not a trace, or holds a history the model cannot run is a
row with verdict ``error`` and the reason, like ``bkref check-trace``'s exit status 2; a
trace the model or a property refuses is ``fail`` with the first failing step; the rest
``pass``. An exception of the checker itself is an ``error`` row too, naming it.
"""

from __future__ import annotations

import fnmatch
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from impl.limits import LIMITS
from proofs.campaign.scenario import commit
from proofs.cli.input_file import InputError, read_input
from proofs.harness.replay import ReplayError, replay_trace
from spec.errors import TraceError
from spec.operations import Crash
from spec.trace import read_trace_bytes

#: The files ``bkref check-traces`` takes from a directory unless told.
DEFAULT_GLOB = "*.jsonl"


def find_traces(directory: str, glob: str = DEFAULT_GLOB) -> list[tuple[str, str]]:
    """Every file under ``directory`` (recursively, hidden directories skipped) whose name
    matches ``glob``, as (path, path relative to ``directory``), sorted."""
    found: list[tuple[str, str]] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if fnmatch.fnmatch(name, glob):
                path = os.path.join(root, name)
                found.append((path, os.path.relpath(path, directory)))
    return found


def judge_file(item: Sequence[Any]) -> dict[str, Any]:
    """The row of one trace file: ``item`` is (path, name)."""
    path, name = item
    began = time.perf_counter()
    row: dict[str, Any] = {
        "path": name,
        "verdict": "error",
        "message": None,
        "failing_step": None,
        "steps": 0,
        "adds_acked": 0,
        "crashes": 0,
        "source": None,
        "bytes": 0,
        "seconds": 0.0,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        "commit": commit(),
    }
    try:  # bounded, and never waiting for ever on a FIFO (proofs/cli/input_file.py)
        data = read_input(
            path,
            what="a trace file (spec/trace.md)",
            max_bytes=LIMITS.trace_file_max_bytes,
            field="trace_file_max_bytes",
        )
    except InputError as exc:
        row["message"] = f"cannot read it: {exc}"
        return _timed(row, began)
    row["bytes"] = len(data)
    try:
        trace = read_trace_bytes(data, name)
        row["source"] = trace.header.source
        row["steps"] = len(trace.steps)
        row["crashes"] = sum(isinstance(step.op, Crash) for step in trace.steps)
        verdict = replay_trace(trace)
    except (TraceError, ReplayError) as exc:
        row["message"] = str(exc)
        return _timed(row, began)
    except Exception as exc:  # the checker broke on this file: say so, carry on
        row["message"] = f"the checker failed on it ({type(exc).__name__}: {exc})"
        return _timed(row, began)
    row["adds_acked"] = verdict.summary().adds_acknowledged
    failure = verdict.failure
    if failure is None:
        row["verdict"] = "pass"
    else:
        row["verdict"] = "fail"
        row["message"] = failure.describe()
        row["failing_step"] = failure.step
    return _timed(row, began)


def _timed(row: dict[str, Any], began: float) -> dict[str, Any]:
    row["seconds"] = time.perf_counter() - began
    return row
