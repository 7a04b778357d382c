"""Journal replay speed beside a raw sequential read of the same file, in the same run.

Run: ``.venv/bin/python -m tests.bench.bench_journal_replay [--mb 100] [--rounds 5]``.
Not part of the test run (these machines are noisy; a ratio from one run is what counts).

A journal of 1 KiB entries (about ``--mb`` MB, written by impl.journal.journal.Journal on real files
in groups of 64 records, so with a padding record per group as BookKeeper writes it) is
replayed with impl.journal.replay.replay from (0, 0), every record taken out of the iterator; the
baseline reads the same file with ``os.read`` in 1 MiB chunks. Both are measured twice:
warm (the file in the page cache, so the baseline is a memory copy) and cold (the file's
pages dropped with posix_fadvise(DONTNEED) before each round, so the baseline reads the
disk). Reports the best of R rounds in MB/s and the ratio bkref / raw (target: >= 0.30).
``--profile`` prints where replay spends its time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import struct
import tempfile
import time
from collections.abc import Callable

from impl.clock import SystemClock
from impl.format.journal import encode_data_record
from impl.fs.os_backend import OsFileSystem
from impl.journal.journal import Journal, JournalSettings
from impl.journal.last_mark import NO_MARK
from impl.journal.replay import replay

ENTRY_BODY_BYTES = 1024
GROUP_RECORDS = 64
MB = 1e6


def write_journal(directory: str, size_mb: int) -> tuple[str, int]:
    """A journal of about ``size_mb`` MB of 1 KiB entries; returns (path, records)."""
    journal = Journal(
        OsFileSystem(), directory, JournalSettings(max_size_bytes=1 << 40), SystemClock()
    )
    journal_id = journal.open_new_file()
    body = random.Random(1).randbytes(ENTRY_BODY_BYTES)
    records = size_mb * 1_000_000 // (ENTRY_BODY_BYTES + 20)
    for entry in range(records):
        journal.append(encode_data_record(struct.pack(">qq", 1 + entry % 4, entry) + body))
        if entry % GROUP_RECORDS == GROUP_RECORDS - 1:
            journal.flush()
    journal.close()
    return f"{directory}/{journal_id:x}.txn", records


def drop_from_page_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def time_replay(directory: str, records: int) -> float:
    start = time.perf_counter()
    count = 0
    for _record in replay(OsFileSystem(), directory, NO_MARK, skip_invalid=False):
        count += 1
    elapsed = time.perf_counter() - start
    assert count == records, (count, records)
    return elapsed


def time_raw_read(path: str) -> float:
    fd = os.open(path, os.O_RDONLY)
    start = time.perf_counter()
    while os.read(fd, 1 << 20):
        pass
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def best(rounds: int, fn: Callable[[], float], before: Callable[[], None]) -> float:
    times = []
    for _ in range(rounds):
        before()
        times.append(fn())
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        directory = f"{root}/current"
        os.makedirs(directory)
        path, records = write_journal(directory, args.mb)
        size = os.path.getsize(path)
        print(f"journal: {size / MB:.1f} MB, {records} records of {ENTRY_BODY_BYTES} B bodies")
        for label, before in (("warm", lambda: None), ("cold", lambda: drop_from_page_cache(path))):
            ours = best(args.rounds, lambda: time_replay(directory, records), before)
            raw = best(args.rounds, lambda: time_raw_read(path), before)
            print(
                f"{label}: replay {size / ours / MB:8.1f} MB/s "
                f"({ours / records * 1e9:6.0f} ns/record), raw read {size / raw / MB:8.1f} MB/s, "
                f"ratio {raw / ours:.2f} (target 0.30)"
            )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(time_replay, directory, records)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(8)


if __name__ == "__main__":
    main()
