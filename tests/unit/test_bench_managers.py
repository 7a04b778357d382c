"""A tiny run of tests/bench/bench_managers.py, so the benchmark keeps working as the entry-log
managers and the GC change, and its figures stay consistent with each other: the same seeded
workload through the single manager, the per-ledger manager with its defaults and with
maximumNumberOfActiveEntryLogs=2, twice (the counts must repeat), on the real OS file system.
The timings are not looked at."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.bench.bench_managers import (
    Manager,
    Point,
    Workload,
    make_ticks,
    report,
    run_point,
    write_plots,
)

#: Six open ledgers, one of them long-lived; the five others written for one tick and deleted
#: in the next (young); a forced GC after every tick; logs of 8 kB, so the single log rotates.
TINY = Workload(
    ledgers=6,
    dirs=1,
    age="young",
    ticks=2,
    adds_per_tick=60,
    write_ticks=1,
    delete_age=1,
    group=16,
    gc_every=1,
    log_bytes=8000,
)
MANAGERS = [
    Manager("single", False),
    Manager("per-ledger", True),
    Manager("per-ledger-max", True, 2),
    Manager("slots", False, slots=2),
    Manager("per-ledger+wc", True, write_close=True),
]


@pytest.fixture(scope="module")
def point(tmp_path_factory: pytest.TempPathFactory) -> Point:
    directory = tmp_path_factory.mktemp("bench")
    return run_point(TINY, MANAGERS, rounds=2, directory=str(directory))


def test_the_managers_benchmark_runs_and_its_figures_agree(point: Point) -> None:
    single, per_ledger, small, slots, closing = (point.runs[m.name] for m in MANAGERS)
    adds = sum(op[0] == "add" for tick in make_ticks(TINY) for op in tick)
    for r in (single, per_ledger, small, slots, closing):
        assert r.adds == adds
        assert r.deletes == 10  # five short ledgers of each of the two ticks with adds
        assert r.added_bytes == single.added_bytes
        assert 0 < r.bytes_reclaimed <= r.entry_log_bytes + r.compaction_bytes
        assert r.compaction_bytes >= 0
        # Every live record is on disk after every GC, and the workload ends with live data.
        assert all(q.disk_bytes >= q.live_bytes for q in r.gc_points)
        assert r.gc_points[-1].live_bytes > 0
        assert [q.live_bytes for q in r.gc_points] == [q.live_bytes for q in single.gc_points]
        assert len(r.checkpoint_syncs) == r.checkpoints == len(make_ticks(TINY))
    # One active log at a time; per ledger, one for each open ledger (and the deleted
    # ledgers' logs, still active until they expire); never more than the maximum.
    assert single.max_active_logs == 1
    assert per_ledger.max_active_logs >= TINY.ledgers
    assert small.max_active_logs == 2
    assert 1 < slots.max_active_logs <= 2 * TINY.dirs  # two slots per directory
    assert small.max_open_log_files > small.max_active_logs  # evicted logs wait for a flush
    # The single log mixes the deleted ledgers with the long-lived one: GC copies the live
    # records out. A per-ledger log holds one ledger: the deleted ledgers' logs are dead
    # whole, deleted without a byte rewritten.
    assert single.entries_moved > 0 and single.compaction_bytes > 0
    for r in (per_ledger, small):
        assert r.compaction_bytes == 0 and r.entries_moved == 0 and r.logs_compacted == 0
        assert r.logs_deleted > 0
    # A checkpoint forces every active log: more fsyncs of entry logs per checkpoint.
    assert sum(per_ledger.checkpoint_log_syncs) > sum(single.checkpoint_log_syncs)
    # A write close when a writer is done seals its log at the next checkpoint, not at its
    # expiry: GC takes the deleted ledgers' logs sooner.
    closing_disk = [q.disk_bytes for q in closing.gc_points]
    assert all(
        a <= b
        for a, b in zip(closing_disk, [q.disk_bytes for q in per_ledger.gc_points], strict=True)
    )
    assert sum(closing_disk) < sum(q.disk_bytes for q in per_ledger.gc_points)
    # Slots share their logs between ledgers: GC compacts as with the single log.
    assert slots.logs_deleted + slots.logs_compacted > 0


def test_the_report_and_the_plots_are_written(point: Point, tmp_path: Path) -> None:
    text = report([point])
    assert "Compaction: MB written into compaction logs" in text
    assert "per-ledger-max" in text
    written = write_plots([point], str(tmp_path / "images"))
    assert len(written) == 6  # space over time of the point, and five charts over ledgers
    for path in written:
        root = ET.parse(path).getroot()
        assert root.tag.endswith("svg")
        assert root.findall(".//{http://www.w3.org/2000/svg}polyline")
