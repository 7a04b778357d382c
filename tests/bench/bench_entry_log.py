"""Entry log benchmarks, each beside its raw baseline in the same run.

Run: ``.venv/bin/python -m tests.bench.bench_entry_log [--entries N] [--rounds R]``.
Not part of the test run (these machines are noisy; a ratio from one run is what counts).

1. append: N entries of 1 KiB through EntryLogger.add_entry on real files, then one flush
   (fsync), beside a raw loop that builds the same records into a 64 KiB buffer, os.write()s
   it when full and fsyncs once at the end. Same bytes, same disk.
2. scan: impl.entrylog.reader.scan over the resulting log, beside a raw sequential read of
   the same file in 1 MiB chunks; and extract_metadata of the same log (it has no ledgers
   map, so the metadata comes from a scan: what GC does for a log without a map).
3. read: EntryLogger.read_entry of every entry by location, beside raw os.pread of each
   record at the same offsets.
Reports the best of R rounds for each, in MB/s, and the ratio bkref / raw.
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import tempfile
import time
from collections.abc import Callable

from impl.entrylog.logger import EntryLogger, EntryLoggerSettings
from impl.entrylog.reader import extract_metadata, scan
from impl.format.entry_log import encode_payload
from impl.fs.os_backend import OsFileSystem
from spec.ids import EntryId, EntryLogId, LedgerId, Location

ENTRY_BODY_BYTES = 1024


def _logger(root: str) -> EntryLogger:
    """An entry logger on real files under ``root/current`` (which must exist)."""
    return EntryLogger(
        OsFileSystem(),
        [f"{root}/current"],
        EntryLoggerSettings(preallocation_enabled=False),
        random.Random(0),
    )


def _best(rounds: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(rounds))


def bench_append(entries: int, rounds: int) -> tuple[float, float, int]:
    body = random.Random(1).randbytes(ENTRY_BODY_BYTES)
    payloads = [encode_payload(1 + i % 4, i, body) for i in range(entries)]
    total_bytes = sum(len(p) + 4 for p in payloads)

    def ours() -> float:
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(f"{root}/current")
            logger = _logger(root)
            start = time.perf_counter()
            for i, payload in enumerate(payloads):
                logger.add_entry(LedgerId(1 + i % 4), payload)
            logger.flush()
            elapsed = time.perf_counter() - start
            logger.close()
            return elapsed

    def raw() -> float:
        with tempfile.TemporaryDirectory() as root:
            fd = os.open(f"{root}/raw.log", os.O_RDWR | os.O_CREAT)
            start = time.perf_counter()
            buffer = bytearray(bytes(1024))
            for payload in payloads:
                buffer += struct.pack(">i", len(payload))
                buffer += payload
                if len(buffer) >= 65536:
                    os.write(fd, buffer)
                    buffer.clear()
            os.write(fd, buffer)
            os.fsync(fd)
            elapsed = time.perf_counter() - start
            os.close(fd)
            return elapsed

    return _best(rounds, ours), _best(rounds, raw), total_bytes


def bench_read(entries: int, rounds: int) -> tuple[float, float, float, float, float, int]:
    body = random.Random(2).randbytes(ENTRY_BODY_BYTES)
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(f"{root}/current")
        logger = _logger(root)
        locations: list[Location] = []
        for i in range(entries):
            locations.append(logger.add_entry(LedgerId(1), encode_payload(1, i, body)))
        log_id = EntryLogId(locations[0] >> 32)
        logger.close()
        path = f"{root}/current/{log_id:x}.log"
        size = os.path.getsize(path)
        reader = _logger(root)

        def ours_scan() -> float:
            handle = OsFileSystem().open(path)
            start = time.perf_counter()
            result = scan(handle, log_id)
            elapsed = time.perf_counter() - start
            handle.close()
            assert len(result.records) == entries
            return elapsed

        def ours_metadata() -> float:
            handle = OsFileSystem().open(path)
            start = time.perf_counter()
            found = extract_metadata(handle, log_id)
            elapsed = time.perf_counter() - start
            handle.close()
            assert found.source == "scan", found.fallback_reason
            assert found.metadata.total_bytes == size - 1024
            return elapsed

        def raw_scan() -> float:
            fd = os.open(path, os.O_RDONLY)
            start = time.perf_counter()
            while os.read(fd, 1 << 20):
                pass
            elapsed = time.perf_counter() - start
            os.close(fd)
            return elapsed

        def ours_read() -> float:
            start = time.perf_counter()
            for i, location in enumerate(locations):
                reader.read_entry(LedgerId(1), EntryId(i), location)
            return time.perf_counter() - start

        def raw_read() -> float:
            fd = os.open(path, os.O_RDONLY)
            start = time.perf_counter()
            for location in locations:
                offset = location & 0xFFFFFFFF
                os.pread(fd, 4 + 16 + ENTRY_BODY_BYTES, offset - 4)
            elapsed = time.perf_counter() - start
            os.close(fd)
            return elapsed

        results = (
            _best(rounds, ours_scan),
            _best(rounds, raw_scan),
            _best(rounds, ours_read),
            _best(rounds, raw_read),
            _best(rounds, ours_metadata),
        )
        reader.close()
        return (*results, size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    mb = 1e6
    ours, raw, total = bench_append(args.entries, args.rounds)
    print(
        f"append {args.entries} x 1 KiB + fsync: bkref {total / ours / mb:7.1f} MB/s, "
        f"raw {total / raw / mb:7.1f} MB/s, ratio {raw / ours:.2f}"
    )
    scan_ours, scan_raw, read_ours, read_raw, meta_ours, size = bench_read(
        args.entries, args.rounds
    )
    print(
        f"scan of the log ({size / mb:.1f} MB): bkref {size / scan_ours / mb:7.1f} MB/s, "
        f"raw read {size / scan_raw / mb:7.1f} MB/s, ratio {scan_raw / scan_ours:.2f}"
    )
    print(
        f"extract_metadata by scan: bkref {size / meta_ours / mb:7.1f} MB/s, "
        f"raw read {size / scan_raw / mb:7.1f} MB/s, ratio {scan_raw / meta_ours:.2f}"
    )
    print(
        f"read_entry by location: bkref {args.entries / read_ours:9.0f} entries/s, "
        f"raw pread {args.entries / read_raw:9.0f} entries/s, ratio {read_raw / read_ours:.2f}"
    )


if __name__ == "__main__":
    main()
