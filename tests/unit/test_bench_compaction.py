"""A tiny run of tests/bench/bench_compaction.py, so the benchmark keeps working as the
compactor and the GC change: its own checks (every source compacted, every live entry moved
and read back, no compaction file left, the metadata from maps and from scans) run here on
the real OS file system; the timings are not looked at."""

from __future__ import annotations

from tests.bench.bench_compaction import bench_compaction, bench_gc_cycle


def test_the_compaction_benchmark_runs_and_its_checks_hold() -> None:
    found = bench_compaction(mb=1, ledgers=4, live=0.5, log_mb=0.3, entry_bytes=200)
    assert found["sources"] >= 3
    assert found["entries_moved"] > 0
    assert found["raw_bytes"] > 0
    # The cycle wrote the compaction logs (about the live bytes) and the index.
    assert found["written entry logs"] >= found["live_bytes"]
    assert found["written"] < 2 * found["live_bytes"]


def test_the_gc_cycle_benchmark_runs_over_many_logs() -> None:
    found = bench_gc_cycle(logs=12, entries_per_log=3, entry_bytes=100, rounds=1)
    assert found["candidates"] > 0
    assert found["map_s"] > 0 and found["scan_s"] > 0
