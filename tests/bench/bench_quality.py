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

import sys
import tempfile
from pathlib import Path

from tests.quality.test_refinement_catches import run_profile_in_a_fresh_interpreter

#: name -> (Bookie subclass of refinement_variants or None for bkref's, its apply_* or None).
VARIANTS: dict[str, tuple[str | None, str | None]] = {
    "ack after the journal write, before its fsync": ("AckBeforeJournalFsyncBookie", None),
    "ack when the record is queued": (None, "apply_ack_at_append"),
    "lastMark persisted before the logs are fsynced": ("LastMarkBeforeLogsBookie", None),
    "rotated logs marked flushed, never fsynced": (
        None,
        "apply_rotated_logs_marked_flushed_unsynced",
    ),
    "fence acked at once, no record": ("FenceAckedAtOnceBookie", None),
    "fence acked at the next force, no record": ("FenceAckedAtNextForceBookie", None),
    "stale checkpoint overwriting lastMark (#4740)": (
        "StaleCheckpointOverwritesLastMarkBookie",
        None,
    ),
    "replay not advancing the mark (#2087)": ("ReplayNotAdvancingMarkBookie", None),
    "leastUnflushedLogId past an unflushed log": (
        None,
        "apply_least_unflushed_past_unflushed",
    ),
    "recovery trusting unsynced bytes": (None, "apply_recovery_trusting_unsynced_bytes"),
    "checkpoint after a failed fsync": ("CheckpointAfterFailureBookie", None),
    "reads missing the write buffer": (None, "apply_reads_missing_the_write_buffer"),
    "part of a group acked before its fsync": ("AckPartOfAGroupBeforeFsyncBookie", None),
    "records echoed past a log's end": (None, "apply_flush_echoing_the_buffer"),
    "rotated logs left unsealed": (None, "apply_seal_without_header"),
    "acks for appends made during the fsync": ("AckAppendsDuringTheFsyncBookie", None),
    "checkpoint reading its mark after its flush": (
        "CheckpointCapturingItsMarkLateBookie",
        None,
    ),
    "adds refused while another ledger dir has room (#3329)": (
        "RefusingAddsWhenOneLedgerDirIsFullBookie",
        None,
    ),
    "a read error failing the whole bookie": ("FailingOnAReadErrorBookie", None),
    "lastMark's rename never made durable": (None, "apply_last_mark_rename_not_durable"),
    "a ledgers map counting the batch boundary twice": (
        None,
        "apply_map_counting_the_boundary_twice",
    ),
    "a background no-space failing the bookie for good": (
        "FailingForGoodOnABackgroundNoSpaceBookie",
        None,
    ),
    "serving on after a failed background fsync": (
        "ServingOnAfterAFailedBackgroundFsyncBookie",
        None,
    ),
    "an add answered ok after its ledger's delete": (
        None,
        "apply_adds_answered_ok_after_their_ledgers_delete",
    ),
    "the source removed before the index flush (#1534)": (
        "SourceRemovedBeforeIndexFlushBookie",
        None,
    ),
    "the recovered log named in decimal (#4804)": (None, "apply_recovered_log_named_in_decimal"),
    "a .compacting left after recovery": (None, "apply_compacting_left_after_recovery"),
    "the index updated before the compaction log is fsynced": (
        "IndexBeforeCompactionLogSyncedBookie",
        None,
    ),
    "a current log compacted": ("CompactingTheCurrentLogBookie", None),
    "a deleted ledger counted as live": ("DeletedLedgerCountedLiveBookie", None),
}


def measure(name: str) -> str:
    variant, apply = VARIANTS[name]
    with tempfile.TemporaryDirectory() as traces:
        caught = run_profile_in_a_fresh_interpreter(variant, apply, Path(traces))
    if caught is None:
        return "slipped"
    return f"{caught.examples}\t{caught.steps}\t{round(caught.seconds, 1)}\t{caught.message}"


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
