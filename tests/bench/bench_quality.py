"""The quality table: after how many examples the fixed profile of
tests/quality/test_refinement_catches.py catches each known-bad variant.

Run: ``.venv/bin/python -m tests.bench.bench_quality [NAME ...]``.

Each variant runs in a fresh interpreter (one measurement of docs/model.md depends on what ran
before it in the same process; a fresh one keeps every row comparable), with the unchanged
refinement machine and the fixed, derandomized profile (``PROFILE``: 300 examples of 40
steps). Prints one row per variant: the examples run until the failing one (included), the
steps of the failing example, the seconds, and the failure's first line; "slipped" when the
profile passes. Not a timed benchmark: the counts are the same on every machine for the same
code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from tests.paths import ROOT

#: name -> (opener expression, monkeypatching function of refinement_variants or None).
VARIANTS: dict[str, tuple[str, str | None]] = {
    "ack after the journal write, before its fsync": ("rv.AckBeforeJournalFsyncBookie.open", None),
    "ack when the record is queued": ("Bookie.open", "apply_ack_at_append"),
    "lastMark persisted before the logs are fsynced": ("rv.LastMarkBeforeLogsBookie.open", None),
    "rotated logs marked flushed, never fsynced": (
        "Bookie.open",
        "apply_rotated_logs_marked_flushed_unsynced",
    ),
    "fence acked at once, no record": ("rv.FenceAckedAtOnceBookie.open", None),
    "fence acked at the next force, no record": ("rv.FenceAckedAtNextForceBookie.open", None),
    "stale checkpoint overwriting lastMark (#4740)": (
        "rv.StaleCheckpointOverwritesLastMarkBookie.open",
        None,
    ),
    "replay not advancing the mark (#2087)": ("rv.ReplayNotAdvancingMarkBookie.open", None),
    "leastUnflushedLogId past an unflushed log": (
        "Bookie.open",
        "apply_least_unflushed_past_unflushed",
    ),
    "recovery trusting unsynced bytes": ("Bookie.open", "apply_recovery_trusting_unsynced_bytes"),
    "checkpoint after a failed fsync": ("rv.CheckpointAfterFailureBookie.open", None),
    "reads missing the write buffer": ("Bookie.open", "apply_reads_missing_the_write_buffer"),
    "part of a group acked before its fsync": ("rv.AckPartOfAGroupBeforeFsyncBookie.open", None),
    "records echoed past a log's end": ("Bookie.open", "apply_flush_echoing_the_buffer"),
    "rotated logs left unsealed": ("Bookie.open", "apply_seal_without_header"),
    "acks for appends made during the fsync": ("rv.AckAppendsDuringTheFsyncBookie.open", None),
    "checkpoint reading its mark after its flush": (
        "rv.CheckpointCapturingItsMarkLateBookie.open",
        None,
    ),
}

_RUN = """
import pytest
from impl.bookie.bookie import Bookie
from tests.quality import refinement_variants as rv
from tests.quality.test_refinement_catches import run_profile
patch = pytest.MonkeyPatch()
apply = {apply!r}
if apply:
    getattr(rv, apply)(patch)
caught = run_profile({opener})
if caught is None:
    print("slipped")
else:
    print(caught.examples, caught.steps, round(caught.seconds, 1), caught.message, sep="\\t")
"""


def measure(name: str) -> str:
    opener, apply = VARIANTS[name]
    with tempfile.TemporaryDirectory() as traces:
        env = {**os.environ, "BKREF_TRACE_DIR": traces, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _RUN.format(opener=opener, apply=apply)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=False,
            timeout=1800,
        )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return f"error\t{done.stderr.strip().splitlines()[-1:]}"
    return lines[-1]


def main(argv: list[str]) -> None:
    names = argv or list(VARIANTS)
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; known: {list(VARIANTS)}")
    print("variant\texamples\tsteps\tseconds\tcaught by")
    for name in names:
        print(f"{name}\t{measure(name)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
