"""The bookie crash check (issue 3, item 9): a scripted workload crashed before every
file-system operation under every plan of proofs/crash/plans.py, recovered, and checked for
durability, fence durability, auth and forward progress. The same slice fails on the
known-bad variants in tests/quality/test_bookie_crash_catches.py."""

from __future__ import annotations

import pytest

from proofs.crash.bookie_check import record, run_bookie_check


def test_every_crash_state_of_the_ci_slice_keeps_the_properties() -> None:
    report = run_bookie_check(seed=1, adds=24)
    assert [f.message for f in report.failures] == []
    # Not vacuous: every operation is a crash point, with many states and acked adds each.
    assert report.crash_points > 100
    assert report.crash_states > 2000
    assert report.checked_items > 20_000


def test_the_workload_acknowledges_fences_and_checkpoints() -> None:
    points = record(seed=1, adds=24)
    last = points[-1].oracle
    assert last.acked_fences == frozenset({3})
    assert len(last.acked_adds) >= 20
    assert last.checkpoint_mark.journal_id > 0
    kinds = {point.op_kind for point in points}
    assert {"fsync", "fsync_dir", "rename"} <= kinds


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 6))
def test_deeper_workloads(seed: int) -> None:
    report = run_bookie_check(seed=seed, adds=60)
    assert [f.message for f in report.failures] == []
