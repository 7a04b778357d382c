"""Compaction and GC benchmarks, each beside its raw baseline in the same run.

Run: ``.venv/bin/python -m tests.bench.bench_compaction [--mb MB] [--live F] [--logs N]``.
Not part of the test run (tests/unit/test_bench_compaction.py runs a tiny one as a smoke
test). Everything runs on the real OS file system (impl/fs/os_backend.py) in a temporary
directory; the files were just written, so reads come from the page cache on both sides.

1. compaction: a bookie whose ledger directory holds ``--mb`` MB of 1 KiB entries of
   ``--ledgers`` ledgers, interleaved, in sealed and checkpointed logs of ``--log-mb`` MB;
   the ledgers but a fraction ``--live`` of them are deleted, then one forced GC cycle
   (``Bookie.gc(force=True)``: metadata, every log compacted, index updated and flushed,
   sources removed) is timed. Throughput = live bytes moved / cycle time. Beside it, in the
   same round: a raw copy of the same number of bytes, log by log (``os.read`` of 1 MiB
   chunks of the source log, ``os.write`` to a new file, ``fsync`` per new file, as the
   compactor makes one new log per source). The raw copy reads the live bytes as one
   contiguous run, so it is the ceiling: the compaction also reads the heads of the dead
   records and picks the live ones out one by one.
2. write amplification: the same cycle on a file system that counts the bytes written
   (``pwrite``/``append``), per kind of file: bytes written by the cycle / live bytes moved.
3. a GC cycle over ``--logs`` logs of a few entries each: metadata of every log from its
   ledgers map (``extract_metadata``: open, header, map, close) and from a scan (the same
   logs with their maps cut off, as after a crash before sealing), each beside a raw read of
   the same files (open, ``os.read`` whole, close); the cycle's decision alone (gc.py's
   GarbageCollector: metadata in, dead logs, kind, candidates in order), and the whole
   ``Bookie.gc_begin`` (steps 0 to 4 on disk) on first sight of the logs and again once
   their metadata is known.
Reports the best of ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import struct
import tempfile
import time
from collections.abc import Callable

from impl.bookie.bookie import Bookie
from impl.bookie.gc import GarbageCollector, GcPolicy, GcStats, Suspension
from impl.clock import SystemClock
from impl.config.config import ServerConfig, load_config
from impl.entrylog.reader import extract_metadata, peek_header
from impl.format.entry_log import LEDGERS_MAP_OFFSET_POSITION, RECORD_SIZE_PREFIX
from impl.fs.api import FileHandle, FileSystem
from impl.fs.os_backend import OsFileSystem
from spec.ids import EntryId, EntryLogId, LedgerId
from tests.unit.fs_wrappers import ForwardingFs, ForwardingHandle

MB = 1e6
CHUNK = 1 << 20
KEY = b"bench-key"
#: compactionRateByEntries for every run here: high enough never to wait.
UNTHROTTLED = 2**31 - 1


# --- a bookie full of logs -----------------------------------------------------------------


def bench_config(root: str, log_bytes: int) -> ServerConfig:
    return load_config(
        None,
        "bench",
        [
            f"journalDirectories={root}/journal",
            f"ledgerDirectories={root}/ledgers",
            "journalMaxGroupWaitMSec=0",
            f"logSizeLimit={log_bytes}",
            "entryLogFilePreallocationEnabled=false",
            # BookKeeper's default (1,000 entries/s) would measure the throttle: lift it.
            f"compactionRateByEntries={UNTHROTTLED}",
        ],
    )


def open_bookie(root: str, log_bytes: int, fs: FileSystem | None = None) -> Bookie:
    return Bookie.open(
        fs or OsFileSystem(),
        bench_config(root, log_bytes),
        clock=SystemClock(),
        rng=random.Random(0),
    )


def fill(bookie: Bookie, ledgers: int, entries: int, entry_bytes: int) -> int:
    """Add ``entries`` entries of ``entry_bytes``, ledgers interleaved, journal forced every
    256 adds; seal the last log and checkpoint, so every log is flushed (a GC candidate).
    Returns the bytes of one record in a log (size prefix included)."""
    body = random.Random(1).randbytes(entry_bytes)
    for i in range(entries):
        bookie.add_entry(LedgerId(1 + i % ledgers), EntryId(i // ledgers), KEY, body)
        if i % 256 == 255:
            bookie.journal_force()
    bookie.journal_force()
    bookie.rotate_log()
    bookie.checkpoint()
    return RECORD_SIZE_PREFIX + 16 + entry_bytes


def log_paths(root: str) -> list[str]:
    current = f"{root}/ledgers/current"
    return sorted(f"{current}/{name}" for name in os.listdir(current) if name.endswith(".log"))


def non_empty_logs(root: str) -> list[str]:
    return [path for path in log_paths(root) if os.path.getsize(path) > 1024]


def raw_copy(sources: list[str], live_fraction: float, out_dir: str) -> tuple[float, int]:
    """Copy the first ``live_fraction`` of each source log's records to a new file, fsync
    each; returns (seconds, bytes copied)."""
    copied = 0
    start = time.perf_counter()
    for n, path in enumerate(sources):
        want = int((os.path.getsize(path) - 1024) * live_fraction)
        src = os.open(path, os.O_RDONLY)
        dst = os.open(f"{out_dir}/{n}.copy", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.lseek(src, 1024, os.SEEK_SET)
        while want > 0:
            data = os.read(src, min(CHUNK, want))
            if not data:
                break
            os.write(dst, data)
            want -= len(data)
            copied += len(data)
        os.fsync(dst)
        os.close(dst)
        os.close(src)
    return time.perf_counter() - start, copied


# --- counting bytes written ------------------------------------------------------------------


class CountingHandle(ForwardingHandle):
    """A FileHandle that adds the bytes written through it to its file system's tally."""

    def __init__(self, inner: FileHandle, fs: CountingFs) -> None:
        super().__init__(inner)
        self._fs = fs

    def pwrite(self, offset: int, data: bytes) -> None:
        self._fs.count(self.inner.path, len(data))
        self.inner.pwrite(offset, data)

    def append(self, data: bytes) -> int:
        self._fs.count(self.inner.path, len(data))
        return self.inner.append(data)


class CountingFs(ForwardingFs):
    """Counts bytes written per kind of file while ``counting`` is set."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.counting = False
        self.written: dict[str, int] = {}

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> FileHandle:
        inner = self.inner.open(path, create=create, exclusive=exclusive, read_only=read_only)
        return CountingHandle(inner, self)

    def count(self, path: str, n: int) -> None:
        if self.counting:
            kind = _kind(path)
            self.written[kind] = self.written.get(kind, 0) + n


def _kind(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if ".log" in name:
        return "entry logs"
    if "/journal" in path:
        return "journal"
    return "index and other"


# --- 1 and 2: compaction ---------------------------------------------------------------------


def bench_compaction(
    mb: int, ledgers: int, live: float, log_mb: float, entry_bytes: int
) -> dict[str, float]:
    live_ledgers = max(1, round(ledgers * live))
    record = RECORD_SIZE_PREFIX + 16 + entry_bytes
    entries = int(mb * MB) // record // ledgers * ledgers
    out: dict[str, float] = {}
    for counting in (False, True):
        with tempfile.TemporaryDirectory() as root:
            fs = CountingFs(OsFileSystem()) if counting else None
            bookie = open_bookie(root, int(log_mb * MB), fs)
            fill(bookie, ledgers, entries, entry_bytes)
            for ledger in range(live_ledgers + 1, ledgers + 1):
                bookie.delete_ledger(LedgerId(ledger))
            bookie.checkpoint()  # the deletes durable: as a GC would find them
            sources = non_empty_logs(root)
            live_bytes = entries // ledgers * live_ledgers * record
            if fs is None:
                os.mkdir(f"{root}/raw")
                raw_s, raw_bytes = raw_copy(sources, live_ledgers / ledgers, f"{root}/raw")
                shutil.rmtree(f"{root}/raw")
                out["raw_s"], out["raw_bytes"] = raw_s, raw_bytes
            else:
                fs.counting = True
            if fs is not None:
                stats = bookie.gc(force=True)
                fs.counting = False
                for kind, n in fs.written.items():
                    out[f"written {kind}"] = n
                out["written"] = sum(fs.written.values())
            else:
                stats, phases = stepped_cycle(bookie)
                out.update(phases)
                out["gc_s"] = sum(phases.values())
            _check(stats, bookie, entries // ledgers, live_ledgers, len(sources), root)
            bookie.shutdown()
            out["live_bytes"] = live_bytes
            out["sources"] = len(sources)
            out["entries_moved"] = stats.entries_moved
    return out


def stepped_cycle(bookie: Bookie) -> tuple[GcStats, dict[str, float]]:
    """``Bookie.gc(force=True)`` as its steps (what ``gc`` runs), each phase timed apart:
    the begin (steps 0 to 4), phase 1 copy, phase 2 flush, phase 3 index."""
    took = {"begin_s": 0.0, "copy_s": 0.0, "flush_s": 0.0, "index_s": 0.0}
    start = time.perf_counter()
    begun = bookie.gc_begin(force=True)
    took["begin_s"] += time.perf_counter() - start
    compacted = moved = 0
    while True:
        start = time.perf_counter()
        copied = bookie.compact_copy()
        took["copy_s"] += time.perf_counter() - start
        if copied.phase == "idle":
            break
        assert copied.new_log is not None, copied  # nothing live: not in this benchmark
        start = time.perf_counter()
        bookie.compact_flush()
        took["flush_s"] += time.perf_counter() - start
        start = time.perf_counter()
        indexed = bookie.compact_index()
        took["index_s"] += time.perf_counter() - start
        compacted += 1
        moved += indexed.entries_moved
    stats = GcStats(begun.compaction, begun.logs_deleted, compacted, moved, 0)
    return stats, took


def _check(
    stats: GcStats, bookie: Bookie, per_ledger: int, live_ledgers: int, sources: int, root: str
) -> None:
    """The cycle did what the benchmark claims: every source compacted, every live entry
    moved, the first and last entry of each live ledger read back, no compaction file left."""
    assert stats.compaction == "major", stats
    assert stats.logs_compacted == sources, (stats, sources)
    assert stats.entries_moved == per_ledger * live_ledgers, (stats, per_ledger, live_ledgers)
    for ledger in range(1, live_ledgers + 1):
        for entry in (0, per_ledger - 1):
            assert bookie.read_entry(LedgerId(ledger), EntryId(entry))
    leftovers = [p for p in os.listdir(f"{root}/ledgers/current") if ".compact" in p]
    assert not leftovers, leftovers


# --- 3: a GC cycle over many logs ------------------------------------------------------------


def many_logs(root: str, logs: int, entries_per_log: int, entry_bytes: int) -> Bookie:
    """A bookie with ``logs`` sealed, flushed logs of ``entries_per_log`` entries each,
    ledgers drawn from a pool of ``logs`` ledgers four to a log."""
    bookie = open_bookie(root, 1 << 30)
    body = random.Random(3).randbytes(entry_bytes)
    next_entry: dict[int, int] = {}
    for log in range(logs):
        for i in range(entries_per_log):
            ledger = 1 + (log * 4 + i % 4) % logs
            entry = next_entry.get(ledger, 0)
            next_entry[ledger] = entry + 1
            bookie.add_entry(LedgerId(ledger), EntryId(entry), KEY, body)
        bookie.journal_force()
        bookie.rotate_log()
    bookie.checkpoint()
    return bookie


def strip_maps(paths: list[str], out_dir: str) -> list[str]:
    """Copies of the logs without their ledgers maps (cut at the map, header offset 0), as
    a log the bookie never sealed: its metadata must come from a scan."""
    out = []
    for path in paths:
        with open(path, "rb") as f:
            data = bytearray(f.read())
        header = peek_header(_Bytes(bytes(data)))
        assert header is not None and header.ledgers_map_offset > 0, path
        del data[header.ledgers_map_offset :]
        struct.pack_into(">qi", data, LEDGERS_MAP_OFFSET_POSITION, 0, 0)
        target = f"{out_dir}/{os.path.basename(path)}"
        with open(target, "wb") as f:
            f.write(data)
        out.append(target)
    return out


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def pread(self, offset: int, length: int) -> bytes:
        return self.data[offset : offset + length]

    def size(self) -> int:
        return len(self.data)


def time_metadata(paths: list[str], source: str) -> float:
    fs = OsFileSystem()
    start = time.perf_counter()
    for path in paths:
        handle = fs.open(path, read_only=True)
        log_id = EntryLogId(int(os.path.basename(path).split(".")[0], 16))
        found = extract_metadata(handle, log_id)
        handle.close()
        assert found.source == source, (path, found.fallback_reason)
    return time.perf_counter() - start


def time_raw_reads(paths: list[str]) -> float:
    start = time.perf_counter()
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, CHUNK):
            pass
        os.close(fd)
    return time.perf_counter() - start


def time_decision(metadata: dict[EntryLogId, dict[int, int]], dead: set[int]) -> float:
    """gc.py's part of a cycle alone: metadata in, dead ledgers dropped, dead logs, kind and
    candidates in order, on the same metadata as the bookie read."""
    config = load_config(None, "bench", ["ledgerDirectories=/x", "journalDirectories=/y"])
    clock = SystemClock()

    def is_live(ledger: LedgerId) -> bool:
        return ledger not in dead

    start = time.perf_counter()
    collector = GarbageCollector(GcPolicy.from_config(config), clock)
    collector.extract_new(metadata, metadata.get, is_live)
    collector.drop_deleted(is_live)
    collector.dead_logs()
    kind = collector.decide(Suspension(), force=True)
    collector.candidates(kind)
    return time.perf_counter() - start


def bench_gc_cycle(
    logs: int, entries_per_log: int, entry_bytes: int, rounds: int
) -> dict[str, float]:
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        bookie = many_logs(root, logs, entries_per_log, entry_bytes)
        out["setup_s"] = time.perf_counter() - start
        paths = non_empty_logs(root)
        assert len(paths) == logs, (len(paths), logs)
        os.mkdir(f"{root}/nomap")
        stripped = strip_maps(paths, f"{root}/nomap")
        out["log_bytes"] = sum(map(os.path.getsize, paths)) / len(paths)
        out["map_s"] = _best(rounds, lambda: time_metadata(paths, "map"))
        out["map_raw_s"] = _best(rounds, lambda: time_raw_reads(paths))
        out["scan_s"] = _best(rounds, lambda: time_metadata(stripped, "scan"))
        out["scan_raw_s"] = _best(rounds, lambda: time_raw_reads(stripped))
        metadata = {}
        for path in paths:
            handle = OsFileSystem().open(path, read_only=True)
            log_id = EntryLogId(int(os.path.basename(path).split(".")[0], 16))
            metadata[log_id] = dict(extract_metadata(handle, log_id).metadata.ledgers)
            handle.close()
        dead = set(range(1, logs + 1, 10))  # one ledger in ten deleted
        out["decision_s"] = _best(rounds, lambda: time_decision(metadata, dead))
        for ledger in sorted(dead):
            bookie.delete_ledger(LedgerId(ledger))
        bookie.checkpoint()
        start = time.perf_counter()
        first = bookie.gc_begin(force=True)
        out["gc_begin_first_s"] = time.perf_counter() - start
        start = time.perf_counter()
        bookie.gc_begin(force=True)
        out["gc_begin_again_s"] = time.perf_counter() - start
        out["candidates"] = len(first.candidates)
        bookie.shutdown()
    return out


def _best(rounds: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="MB of entries to compact")
    parser.add_argument("--ledgers", type=int, default=8)
    parser.add_argument("--live", type=float, default=0.25, help="fraction of ledgers kept")
    parser.add_argument("--log-mb", type=float, default=16, help="logSizeLimit in MB")
    parser.add_argument("--entry-bytes", type=int, default=1024)
    parser.add_argument("--logs", type=int, default=1000, help="logs in the GC cycle")
    parser.add_argument("--entries-per-log", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    report(args)


def report(args: argparse.Namespace) -> None:
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        found = bench_compaction(args.mb, args.ledgers, args.live, args.log_mb, args.entry_bytes)
        ours = found["live_bytes"] / found["gc_s"]
        raw = found["raw_bytes"] / found["raw_s"]
        print(
            f"compaction of {found['sources']:.0f} logs, {found['live_bytes'] / MB:.1f} MB live "
            f"({found['entries_moved']:.0f} entries): {ours / MB:.1f} MB/s; "
            f"raw copy {raw / MB:.1f} MB/s; ratio {ours / raw:.2f}"
        )
        moving = found["live_bytes"] / (found["copy_s"] + found["flush_s"])
        phases = ", ".join(
            f"{k[:-2]} {found[k] * 1e3:.1f}" for k in ("begin_s", "copy_s", "flush_s", "index_s")
        )
        print(
            f"  phases (ms): {phases}; copy and flush alone {moving / MB:.1f} MB/s, "
            f"ratio {moving / raw:.2f}"
        )
        if not best or ours / raw > best["ratio"]:
            best = {**found, "ratio": ours / raw}
    kinds = {k: v for k, v in best.items() if k.startswith("written ")}
    parts = ", ".join(f"{k[8:]} {v / best['live_bytes']:.3f}" for k, v in sorted(kinds.items()))
    print(
        f"write amplification: {best['written'] / best['live_bytes']:.3f} "
        f"(bytes written by the cycle / live bytes moved; {parts})"
    )
    gc = bench_gc_cycle(args.logs, args.entries_per_log, args.entry_bytes, args.rounds)
    n = args.logs
    print(f"GC over {n} logs of {gc['log_bytes'] / 1e3:.1f} kB (setup {gc['setup_s']:.1f} s):")
    print(
        f"  metadata from ledgers maps: {gc['map_s'] * 1e3:.1f} ms ({gc['map_s'] / n * 1e6:.0f}"
        f" us/log); raw read of the same files {gc['map_raw_s'] * 1e3:.1f} ms; "
        f"ratio {gc['map_raw_s'] / gc['map_s']:.2f}"
    )
    print(
        f"  metadata from scans:        {gc['scan_s'] * 1e3:.1f} ms ({gc['scan_s'] / n * 1e6:.0f}"
        f" us/log); raw read of the same files {gc['scan_raw_s'] * 1e3:.1f} ms; "
        f"ratio {gc['scan_raw_s'] / gc['scan_s']:.2f}"
    )
    print(f"  the decision (gc.py, in memory): {gc['decision_s'] * 1e3:.1f} ms")
    print(
        f"  Bookie.gc_begin: {gc['gc_begin_first_s'] * 1e3:.1f} ms on first sight, "
        f"{gc['gc_begin_again_s'] * 1e3:.1f} ms with the metadata known "
        f"({gc['candidates']:.0f} candidates)"
    )


if __name__ == "__main__":
    main()
