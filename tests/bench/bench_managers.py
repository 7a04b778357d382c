"""The entry-log managers (single, per-ledger, slots) on one seeded workload: compaction, space,
open logs, fsyncs, adds.

Run: ``.venv/bin/python -m tests.bench.bench_managers [--full] [--json PATH] [--plots DIR]``.
Not part of the test run (tests/unit/test_bench_managers.py runs a tiny one as a smoke test).
docs/entry-log-managers.md shows the figures of a default run and what they say.

BookKeeper issue #570 debated one shared active entry log against a log per ledger; its
authors chose per ledger partly because "there is no need of compaction" with it. This
benchmark replays the SAME workload (generated once from ``--seed``) through each manager:

- ``single``: one active log (impl/entrylog/manager.py SingleEntryLogManager, the default);
- ``per-ledger``: a log per ledger (impl/entrylog/per_ledger.py, entryLogPerLedgerEnabled=true)
  with BookKeeper's defaults (entrylogMapAccessExpiryTimeInSeconds=300,
  maximumNumberOfActiveEntryLogs=500);
- ``per-ledger-max``: the same with maximumNumberOfActiveEntryLogs at ``--small-max`` of the
  open ledgers (at least 2), so that the least recently written log is evicted all the time;
- ``slots``: bkref's own slots manager (impl/entrylog/slots.py, the design issue #570
  proposed), ``--slots`` active logs per ledger directory (entryLogSlotsPerLedgerDir, default
  4) shared by the ledgers, with the default expiry and map size;
- ``per-ledger+wc`` and ``slots+wc``: the same two, told by an advisory write close
  (spec/protocol/write_close.md, BP-32) when a short-lived ledger's writer is done, so that
  the checkpoint after it seals the ledger's log (the others wait for the expiry, or for
  logSizeLimit).

The workload, in ticks of ``--tick-s`` seconds of an injected clock (impl/clock.py
ManualClock, which also drives the per-ledger expiry): a point's number of ledgers are open
at once. A fifth of them (``--long``) are long-lived: written for the whole run, never
deleted. The others are short-lived: each is written for ``--write-ticks`` ticks, then closed
(no more adds), replaced by a new ledger, and deleted at the point's age: "young" in the tick
after its last add (its per-ledger log is still active), "old" two ticks after the expiry
sealed its per-ledger log (``--write-ticks`` + 300 s in ticks + 2 after its creation). Each
of the ``--ticks`` ticks with adds makes ``--adds`` adds (at least one per open ledger), each
to an open ledger drawn at random, of 256 to 1024 bytes; the deletes due in a tick are
interleaved at random places among its adds; the journal is forced every ``--group`` adds and
at the end of the tick, then the bookie checkpoints. Every ``--gc-every`` ticks a forced GC
cycle runs (``Bookie.gc(force=True)``: dead logs deleted, every log below the major threshold
compacted). After the last tick with adds, ticks with no adds go on (deletes due,
checkpoints, GC) until every delete is done and its per-ledger log expired, with a last GC at
the end.

The points (open ledgers, ledger directories, age at delete): by default 10 and 100 ledgers
young and old, 1,000 young, and 100 young over 4 directories (about a minute when an fsync
takes 0.5 ms, three when it takes 3 ms); ``--full`` adds 1,000 old, 10,000 young and old, and
100 and 1,000 young over 2, 3 and 4 directories (ten minutes to an hour); ``--points`` picks
any. Everything runs on the real OS file system (impl/fs/os_backend.py) in a temporary
directory under ``--dir``, through a file system wrapper that counts. Per manager and point:

- compaction: bytes written into compaction logs (``.log.compacting``) and entries moved;
- space over time: bytes of entry-log files on disk after each GC, beside the bytes of the
  live ledgers' records (what must stay);
- logs open at once: the most active logs (``Bookie.inspect``, at each tick's end, before the
  checkpoint: the peak, since within a tick the clock does not move) and the most entry-log
  files open for writing at once (counted at every open, by the wrapper);
- fsyncs per checkpoint: fsync/fdatasync of files and fsyncs of directories during each
  ``Bookie.checkpoint``, all and those of entry logs;
- durable adds/s: adds / the time of the adds, journal forces and checkpoints (deletes and GC
  not counted), beside a raw baseline run in the same round: the same record bytes appended
  to one file with one fdatasync per journal group (as tests/bench/bench_bookie.py).

The counts are the same in every round (the run is deterministic; the benchmark checks it);
the adds/s are the best of ``--rounds`` rounds, each beside its own raw baseline.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import ServerConfig, load_config
from impl.format.entry_log import RECORD_SIZE_PREFIX
from impl.fs.api import FileHandle, FileSystem
from impl.fs.os_backend import OsFileSystem
from spec.errors import NoLedger
from spec.ids import EntryId, LedgerId
from tests.unit.fs_wrappers import ForwardingFs, ForwardingHandle

MB = 1e6
KEY = b"bench-key"
#: compactionRateByEntries: high enough never to wait (as in bench_compaction).
UNTHROTTLED = 2**31 - 1
#: The bytes of a record in an entry log besides the entry's data: size prefix and ids.
RECORD_OVERHEAD = RECORD_SIZE_PREFIX + 16
#: BookKeeper's default entrylogMapAccessExpiryTimeInSeconds and maximumNumberOfActiveEntryLogs.
EXPIRY_S = 300
DEFAULT_MAX_ACTIVE = 500
#: The data every entry's bytes are cut from.
POOL = random.Random(1).randbytes(1 << 12)


# --- the workload --------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One workload point. ``delete_age`` is in ticks after the ledger's creation."""

    ledgers: int
    dirs: int
    age: str
    ticks: int
    adds_per_tick: int
    write_ticks: int
    delete_age: int
    long_fraction: float = 0.2
    group: int = 64
    gc_every: int = 2
    tick_s: int = 150
    #: logSizeLimit and majorCompactionThreshold (BookKeeper's default 0.8) of every manager.
    log_bytes: int = 256_000
    major_threshold: float = 0.8
    entry_min: int = 256
    entry_max: int = 1024
    seed: int = 42

    @property
    def name(self) -> str:
        return f"{self.ledgers} ledgers, {self.dirs} dir{'s' if self.dirs > 1 else ''}, {self.age}"

    @property
    def expiry_ticks(self) -> int:
        """Ticks after its last add at which a per-ledger log is expired (300 s)."""
        return math.ceil(EXPIRY_S / self.tick_s)


#: One step of a tick: ("add", ledger, entry, data bytes), ("delete", ledger, 0, 0),
#: ("close", ledger, 0, 0) (the writer is done: a write close for the managers that send it)
#: or ("force", 0, 0, 0) (a journal force).
Op = tuple[str, int, int, int]


def make_ticks(w: Workload) -> list[list[Op]]:
    """The workload's steps, tick by tick (module docstring), from ``w.seed`` only."""
    rng = random.Random(w.seed)
    long_slots = round(w.ledgers * w.long_fraction)
    next_id = 1
    # Per slot: its open ledger and the tick after which it closes (None: long-lived).
    slot_ledger: list[int] = []
    slot_closes: list[int | None] = []
    deletes: dict[int, list[int]] = {}
    for slot in range(w.ledgers):
        slot_ledger.append(next_id)
        if slot < long_slots:
            slot_closes.append(None)
        else:
            # Stagger the first generation so that the short ledgers do not all close at once.
            born = -(slot % w.write_ticks)
            slot_closes.append(born + w.write_ticks)
            deletes.setdefault(born + w.delete_age, []).append(next_id)
        next_id += 1
    entries: dict[int, int] = {}
    out: list[list[Op]] = []
    tick = 0
    while tick < w.ticks or any(t >= tick for t in deletes):
        ops: list[Op] = []
        # (Prepended after the deletes are placed, so that the draws are the ones of a
        # workload without them.)
        closes: list[Op] = []
        if tick < w.ticks:
            for slot in range(long_slots, w.ledgers):
                if slot_closes[slot] == tick:  # closed: a new ledger takes the slot
                    closes.append(("close", slot_ledger[slot], 0, 0))
                    slot_ledger[slot] = next_id
                    slot_closes[slot] = tick + w.write_ticks
                    deletes.setdefault(tick + w.delete_age, []).append(next_id)
                    next_id += 1
            for _ in range(w.adds_per_tick):
                ledger = slot_ledger[rng.randrange(w.ledgers)]
                entry = entries.get(ledger, 0)
                entries[ledger] = entry + 1
                ops.append(("add", ledger, entry, rng.randint(w.entry_min, w.entry_max)))
        for ledger in deletes.pop(tick, []):
            ops.insert(rng.randint(0, len(ops)), ("delete", ledger, 0, 0))
        ops = closes + ops
        grouped: list[Op] = []
        adds = 0
        for op in ops:
            grouped.append(op)
            if op[0] == "add":
                adds += 1
                if adds % w.group == 0:
                    grouped.append(("force", 0, 0, 0))
        out.append(grouped)
        tick += 1
    # Ticks with nothing due until the last deleted ledger's per-ledger log expired too.
    out.extend([] for _ in range(w.expiry_ticks + 1))
    return out


# --- the managers --------------------------------------------------------------------------


@dataclass(frozen=True)
class Manager:
    name: str
    per_ledger: bool
    max_active: int = DEFAULT_MAX_ACTIVE
    #: entryLogSlotsPerLedgerDir (0: not the slots manager).
    slots: int = 0
    #: Send an advisory write close when a ledger's writer is done (spec/protocol/
    #: write_close.md): its log is sealed at the next checkpoint instead of at its expiry.
    write_close: bool = False

    def settings(self) -> list[str]:
        if self.slots:
            return [
                f"entryLogSlotsPerLedgerDir={self.slots}",
                f"entrylogMapAccessExpiryTimeInSeconds={EXPIRY_S}",
                f"maximumNumberOfActiveEntryLogs={self.max_active}",
            ]
        if not self.per_ledger:
            return ["entryLogPerLedgerEnabled=false"]
        return [
            "entryLogPerLedgerEnabled=true",
            f"entrylogMapAccessExpiryTimeInSeconds={EXPIRY_S}",
            f"maximumNumberOfActiveEntryLogs={self.max_active}",
        ]


def managers_for(ledgers: int, small_max: float, slots: int = 4) -> list[Manager]:
    small = max(2, round(ledgers * small_max))
    return [
        Manager("single", False),
        Manager("per-ledger", True),
        Manager("per-ledger-max", True, small),
        Manager("slots", False, slots=slots),
        Manager("per-ledger+wc", True, write_close=True),
        Manager("slots+wc", False, slots=slots, write_close=True),
    ]


def bench_config(root: str, w: Workload, manager: Manager) -> ServerConfig:
    ledger_dirs = ",".join(f"{root}/ledgers{n}" for n in range(w.dirs))
    return load_config(
        None,
        "bench",
        [
            f"journalDirectories={root}/journal",
            f"ledgerDirectories={ledger_dirs}",
            "journalMaxGroupWaitMSec=0",
            f"logSizeLimit={w.log_bytes}",
            f"majorCompactionThreshold={w.major_threshold}",
            f"compactionRateByEntries={UNTHROTTLED}",
            *manager.settings(),
            # The forced cycles are major; minor must stay below major, else it is off.
            *(["minorCompactionThreshold=0"] if w.major_threshold <= 0.2 else []),
        ],
    )


# --- a file system that counts -------------------------------------------------------------


def kind_of(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if name.endswith(".log"):
        return "entry log"
    if ".log." in name:
        return "compaction log"
    if "/journal/" in path:
        return "journal"
    return "other"


class MeterHandle(ForwardingHandle):
    """Counts bytes written and syncs per kind of file; tells its file system when closed."""

    def __init__(self, inner: FileHandle, fs: MeterFs, kind: str, writable_log: bool) -> None:
        super().__init__(inner)
        self._fs = fs
        self._kind = kind
        self._writable_log = writable_log
        self._open = True

    def pwrite(self, offset: int, data: bytes) -> None:
        self.inner.pwrite(offset, data)
        self._fs.wrote(self._kind, len(data))

    def append(self, data: bytes) -> int:
        done = self.inner.append(data)
        self._fs.wrote(self._kind, len(data))
        return done

    def fsync(self) -> None:
        start = time.perf_counter()
        self.inner.fsync()
        self._fs.synced(self._kind, time.perf_counter() - start)

    def fdatasync(self) -> None:
        start = time.perf_counter()
        self.inner.fdatasync()
        self._fs.synced(self._kind, time.perf_counter() - start)

    def close(self) -> None:
        self.inner.close()
        if self._open:
            self._open = False
            if self._writable_log:
                self._fs.open_logs -= 1


class MeterFs(ForwardingFs):
    """Counts, per kind of file, the bytes written and the fsyncs (fsync, fdatasync and
    directory fsyncs, the latter as kind "directory") with the seconds they took, and the
    entry-log files open for writing (now and the most at once)."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.written: dict[str, int] = {}
        self.syncs: dict[str, int] = {}
        self.sync_s = 0.0
        self.open_logs = 0
        self.max_open_logs = 0

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> FileHandle:
        inner = self.inner.open(path, create=create, exclusive=exclusive, read_only=read_only)
        kind = kind_of(path)
        writable_log = not read_only and kind in ("entry log", "compaction log")
        if writable_log:
            self.open_logs += 1
            self.max_open_logs = max(self.max_open_logs, self.open_logs)
        return MeterHandle(inner, self, kind, writable_log)

    def fsync_dir(self, path: str) -> None:
        start = time.perf_counter()
        self.inner.fsync_dir(path)
        self.synced("directory", time.perf_counter() - start)

    def wrote(self, kind: str, n: int) -> None:
        self.written[kind] = self.written.get(kind, 0) + n

    def synced(self, kind: str, seconds: float) -> None:
        self.syncs[kind] = self.syncs.get(kind, 0) + 1
        self.sync_s += seconds


# --- one replay ------------------------------------------------------------------------------


@dataclass
class GcPoint:
    """The state after one GC cycle."""

    tick: int
    disk_bytes: int
    log_files: int
    live_bytes: int
    compaction_bytes: int
    gc_s: float


@dataclass
class Replay:
    """What one manager did on one workload point, in one round."""

    manager: str
    max_active: int
    adds: int
    deletes: int
    added_bytes: int = 0
    entry_log_bytes: int = 0
    compaction_bytes: int = 0
    journal_bytes: int = 0
    entries_moved: int = 0
    logs_compacted: int = 0
    logs_deleted: int = 0
    bytes_reclaimed: int = 0
    max_active_logs: int = 0
    max_open_log_files: int = 0
    syncs: dict[str, int] = field(default_factory=dict)
    checkpoints: int = 0
    checkpoint_syncs: list[int] = field(default_factory=list)
    checkpoint_log_syncs: list[int] = field(default_factory=list)
    gc_points: list[GcPoint] = field(default_factory=list)
    write_s: float = 0.0
    checkpoint_s: float = 0.0
    gc_s: float = 0.0
    sync_s: float = 0.0
    raw_s: float = 0.0

    @property
    def adds_per_s(self) -> float:
        return self.adds / self.write_s

    @property
    def adds_only_per_s(self) -> float:
        """Adds / the time of the adds and journal forces alone (no checkpoint)."""
        return self.adds / (self.write_s - self.checkpoint_s)

    @property
    def raw_per_s(self) -> float:
        return self.adds / self.raw_s

    def counts(self) -> dict[str, Any]:
        """Every figure but the timings: the same in every round."""
        out = asdict(self)
        for key in ("write_s", "checkpoint_s", "gc_s", "sync_s", "raw_s"):
            del out[key]
        for point in out["gc_points"]:
            del point["gc_s"]
        return out


def log_files(root: str, dirs: int) -> tuple[int, int]:
    """(bytes, number) of the entry-log files (compaction files included) on disk."""
    total = count = 0
    for n in range(dirs):
        current = f"{root}/ledgers{n}/current"
        for name in os.listdir(current):
            if ".log" in name:
                total += os.path.getsize(f"{current}/{name}")
                count += 1
    return total, count


def replay(w: Workload, ticks: list[list[Op]], manager: Manager, root: str) -> Replay:
    """Run ``ticks`` through a new bookie in ``root`` configured for ``manager``; then the raw
    baseline in the same directory. Checks what must hold whatever the manager (see
    ``check``)."""
    fs = MeterFs(OsFileSystem())
    clock = ManualClock()
    config = bench_config(root, w, manager)
    bookie = Bookie.open(fs, config, clock=clock, rng=random.Random(0))
    most = manager.slots * w.dirs if manager.slots else 1
    out = Replay(manager.name, manager.max_active if manager.per_ledger else most, 0, 0)
    live: dict[int, int] = {}
    deleted: list[int] = []
    groups: list[list[int]] = []  # the record sizes of each journal group, for the raw loop
    group: list[int] = []
    tick_ms = w.tick_s * 1000
    add, force, delete = bookie.add_entry, bookie.journal_force, bookie.delete_ledger
    for tick, ops in enumerate(ticks):
        clock.advance_ms(tick_ms)
        delete_s = 0.0
        start = time.perf_counter()
        for kind, ledger, entry, size in ops:
            if kind == "add":
                add(LedgerId(ledger), EntryId(entry), KEY, POOL[:size])
                record = RECORD_OVERHEAD + size
                live[ledger] = live.get(ledger, 0) + record
                group.append(record)
                out.adds += 1
                out.added_bytes += record
            elif kind == "force":
                force()
                groups.append(group)
                group = []
            elif kind == "close":
                if manager.write_close and ledger in live:  # (a ledger never added to: none)
                    bookie.write_close(LedgerId(ledger), KEY)
            else:
                began = time.perf_counter()
                delete(LedgerId(ledger))
                delete_s += time.perf_counter() - began
                live.pop(ledger, None)
                deleted.append(ledger)
                out.deletes += 1
        if group:
            force()
            groups.append(group)
            group = []
        out.write_s += time.perf_counter() - start - delete_s
        active = sum(info.state == "active" for info in bookie.inspect().entry_logs)
        out.max_active_logs = max(out.max_active_logs, active)
        syncs_before = dict(fs.syncs)
        start = time.perf_counter()
        bookie.checkpoint()
        took = time.perf_counter() - start
        out.write_s += took
        out.checkpoint_s += took
        out.checkpoints += 1
        out.checkpoint_syncs.append(sum(fs.syncs.values()) - sum(syncs_before.values()))
        out.checkpoint_log_syncs.append(
            fs.syncs.get("entry log", 0) - syncs_before.get("entry log", 0)
        )
        if (tick + 1) % w.gc_every == 0 or tick == len(ticks) - 1:
            start = time.perf_counter()
            stats = bookie.gc(force=True)
            took = time.perf_counter() - start
            out.gc_s += took
            out.entries_moved += stats.entries_moved
            out.logs_compacted += stats.logs_compacted
            out.logs_deleted += stats.logs_deleted
            out.bytes_reclaimed += stats.bytes_reclaimed
            disk, files = log_files(root, w.dirs)
            compaction = fs.written.get("compaction log", 0)
            out.gc_points.append(
                GcPoint(tick + 1, disk, files, sum(live.values()), compaction, took)
            )
    assert bookie.pending_acks() == 0 and not bookie.callback_errors
    out.entry_log_bytes = fs.written.get("entry log", 0)
    out.compaction_bytes = fs.written.get("compaction log", 0)
    out.journal_bytes = fs.written.get("journal", 0)
    out.max_open_log_files = fs.max_open_logs
    out.syncs = dict(sorted(fs.syncs.items()))
    out.sync_s = fs.sync_s
    reads_back(bookie, live, deleted)
    bookie.shutdown()
    out.raw_s = raw_group_commit(root, groups)
    check(out, manager)
    return out


def reads_back(bookie: Bookie, live: dict[int, int], deleted: list[int]) -> None:
    """The first entry of a few live ledgers reads back; a few deleted ledgers are gone."""
    for ledger in sorted(live)[:: max(1, len(live) // 8)]:
        assert len(bookie.read_entry(LedgerId(ledger), EntryId(0))) >= 256, ledger
    for ledger in deleted[:: max(1, len(deleted) // 8)]:
        try:
            bookie.read_entry(LedgerId(ledger), EntryId(0))
        except NoLedger:
            continue
        raise AssertionError(f"deleted ledger {ledger} still reads")


def raw_group_commit(root: str, groups: list[list[int]]) -> float:
    """Seconds to append the same records to one file, one fdatasync per journal group."""
    path = f"{root}/raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        start = time.perf_counter()
        for group in groups:
            os.write(fd, b"".join(POOL[: size - RECORD_OVERHEAD] + b"x" * 20 for size in group))
            os.fdatasync(fd)
        return time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)


def check(out: Replay, manager: Manager) -> None:
    """What must hold whatever the manager: every live record is on disk after each GC, the
    space reclaimed is at most what was written, no log over the maximum is active, an entry
    moved was written into a compaction log."""
    for point in out.gc_points:
        assert point.disk_bytes >= point.live_bytes, (manager.name, point)
    assert 0 <= out.bytes_reclaimed <= out.entry_log_bytes + out.compaction_bytes, out.counts()
    assert out.compaction_bytes >= 0
    assert out.entries_moved == 0 or out.compaction_bytes > out.entries_moved * RECORD_OVERHEAD
    assert out.max_active_logs <= out.max_active, (out.max_active_logs, out.max_active)
    if manager.per_ledger:
        # A per-ledger log holds one ledger: all live or all dead, never a candidate.
        assert out.logs_compacted == 0 and out.compaction_bytes == 0, out.counts()


# --- the sweep --------------------------------------------------------------------------------


@dataclass
class Point:
    workload: Workload
    runs: dict[str, Replay]


def workload(args: argparse.Namespace, ledgers: int, dirs: int, age: str) -> Workload:
    tick_s = args.tick_s
    expiry = math.ceil(EXPIRY_S / tick_s)
    delete_age = args.write_ticks if age == "young" else args.write_ticks + expiry + 2
    return Workload(
        ledgers=ledgers,
        dirs=dirs,
        age=age,
        ticks=args.ticks,
        adds_per_tick=max(args.adds, ledgers),
        write_ticks=args.write_ticks,
        delete_age=delete_age,
        long_fraction=args.long,
        group=args.group,
        gc_every=args.gc_every,
        tick_s=tick_s,
        log_bytes=args.log_kb * 1000,
        major_threshold=args.threshold,
        seed=args.seed,
    )


def run_point(
    w: Workload,
    managers: Sequence[Manager],
    rounds: int,
    directory: str | None,
) -> Point:
    ticks = make_ticks(w)
    best: dict[str, Replay] = {}
    for _ in range(rounds):
        for manager in managers:
            with tempfile.TemporaryDirectory(dir=directory) as root:
                found = replay(w, ticks, manager, root)
            kept = best.get(manager.name)
            if kept is None:
                best[manager.name] = found
                continue
            assert kept.counts() == found.counts(), f"{manager.name}: not deterministic"
            if found.adds_per_s / found.raw_per_s > kept.adds_per_s / kept.raw_per_s:
                best[manager.name] = found
    return Point(w, best)


def points_for(args: argparse.Namespace) -> list[tuple[int, int, str]]:
    """(ledgers, dirs, age) of every point of the sweep."""
    if args.points:
        out = []
        for word in args.points.split(","):
            ledgers, dirs, age = word.split(":")
            out.append((int(ledgers), int(dirs), age))
        return out
    if args.full:
        sweep = [(n, 1, age) for n in (10, 100, 1000, 10000) for age in ("young", "old")]
        return sweep + [(n, d, "young") for n in (100, 1000) for d in (2, 3, 4)]
    sweep = [(n, 1, age) for n in (10, 100) for age in ("young", "old")]
    return [*sweep, (1000, 1, "young"), (100, 4, "young")]


# --- reporting ---------------------------------------------------------------------------------


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table under its title (the first column left-aligned, the rest right)."""
    columns = list(zip(header, *rows, strict=True))
    widths = [max(len(cell) for cell in column) for column in columns]

    def line(cells: Sequence[str]) -> str:
        shown = [
            c.ljust(n) if i == 0 else c.rjust(n)
            for i, (c, n) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(shown) + " |"

    rule = "|" + "|".join(("-" * (n + 1)) + (":" if i else "-") for i, n in enumerate(widths)) + "|"
    return "\n".join([title, "", line(header), rule, *(line(row) for row in rows)])


def mb(n: float) -> str:
    return f"{n / MB:.2f}"


def space_ratio(w: Workload, r: Replay) -> float:
    """Entry-log bytes on disk / live bytes, averaged over the GC rounds of the ticks with
    adds."""
    adding = [q for q in r.gc_points if q.tick <= w.ticks and q.live_bytes]
    return sum(q.disk_bytes / q.live_bytes for q in adding) / len(adding)


def per_checkpoint(syncs: list[int]) -> str:
    return f"{sum(syncs) / len(syncs):.1f} ({max(syncs)})"


#: One table per metric: (title, the cell of one manager on one point).
METRICS: list[tuple[str, Any]] = [
    (
        "Compaction: MB written into compaction logs (entries moved)",
        lambda w, r: f"{mb(r.compaction_bytes)} ({r.entries_moved})",
    ),
    (
        "GC, all cycles: logs deleted whole / logs compacted / MB reclaimed",
        lambda w, r: f"{r.logs_deleted} / {r.logs_compacted} / {mb(r.bytes_reclaimed)}",
    ),
    (
        "Compaction per byte added (GC's write amplification)",
        lambda w, r: f"{r.compaction_bytes / r.added_bytes:.3f}",
    ),
    (
        "Space while adding: entry-log bytes on disk / live bytes, mean over the GC rounds",
        lambda w, r: f"{space_ratio(w, r):.2f}",
    ),
    (
        "Space at the end, after the last GC: entry-log MB on disk (files)",
        lambda w, r: f"{mb(r.gc_points[-1].disk_bytes)} ({r.gc_points[-1].log_files})",
    ),
    (
        "Logs open at once: most active logs / most entry-log files open for writing",
        lambda w, r: f"{r.max_active_logs} / {r.max_open_log_files}",
    ),
    (
        "fsyncs per checkpoint, all: mean (max)",
        lambda w, r: per_checkpoint(r.checkpoint_syncs),
    ),
    (
        "fsyncs per checkpoint, of entry logs: mean (max)",
        lambda w, r: per_checkpoint(r.checkpoint_log_syncs),
    ),
    (
        "Durable adds/s (adds + journal forces + checkpoints) | raw group commit | ratio",
        lambda w, r: f"{r.adds_per_s:.0f} | {r.raw_per_s:.0f} | {r.adds_per_s / r.raw_per_s:.2f}",
    ),
    (
        "Adds/s without the checkpoints (adds + journal forces) | ratio to the raw group commit",
        lambda w, r: f"{r.adds_only_per_s:.0f} | {r.adds_only_per_s / r.raw_per_s:.2f}",
    ),
    (
        "fsyncs in the whole run (adds, deletes, checkpoints, GC) per 1,000 adds",
        lambda w, r: f"{sum(r.syncs.values()) * 1000 / r.adds:.0f}",
    ),
    (
        "Seconds in checkpoints / in GC / in all fsyncs of the run",
        lambda w, r: f"{r.checkpoint_s:.2f} / {r.gc_s:.2f} / {r.sync_s:.2f}",
    ),
]


def report(points: Sequence[Point]) -> str:
    names = list(points[0].runs)
    first = [p.runs[names[0]] for p in points]
    parts = [
        table(
            "Workloads (the same for every manager)",
            ["workload", "adds", "deletes", "checkpoints", "MB added", "live MB at the end"],
            [
                [
                    p.workload.name,
                    str(r.adds),
                    str(r.deletes),
                    str(r.checkpoints),
                    mb(r.added_bytes),
                    mb(r.gc_points[-1].live_bytes),
                ]
                for p, r in zip(points, first, strict=True)
            ],
        )
    ]
    for title, cell in METRICS:
        rows = [[p.workload.name, *(cell(p.workload, p.runs[m]) for m in names)] for p in points]
        parts.append(table(title, ["workload", *names], rows))
    for p in points:
        gc_points = [p.runs[m].gc_points for m in names]
        rows = [
            [str(q.tick), mb(q.live_bytes), *(mb(series[i].disk_bytes) for series in gc_points)]
            for i, q in enumerate(gc_points[0])
        ]
        parts.append(
            table(
                f"Space over time, {p.workload.name}: MB after each GC",
                ["tick", "live", *names],
                rows,
            )
        )
    return "\n\n".join(parts)


def to_json(points: Sequence[Point], args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    return {
        "command": " ".join(sys.argv),
        "date": datetime.date.today().isoformat(),
        "cpus": os.cpu_count(),
        "seconds": seconds,
        "arguments": vars(args),
        "points": [
            {
                "workload": asdict(p.workload),
                "managers": {
                    name: {
                        **asdict(r),
                        "adds_per_s": r.adds_per_s,
                        "adds_only_per_s": r.adds_only_per_s,
                        "raw_per_s": r.raw_per_s,
                        "ratio": r.adds_per_s / r.raw_per_s,
                        "space_ratio": space_ratio(p.workload, r),
                    }
                    for name, r in p.runs.items()
                },
            }
            for p in points
        ],
    }


# --- SVG line charts (no plotting dependency) --------------------------------------------------

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round axis ticks covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= step * factor:
            step *= factor
            break
    first = math.floor(lo / step) * step
    return [first + i * step for i in range(math.ceil((hi - first) / step) + 1)]


def _label(value: float) -> str:
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-2):
        return f"{value:.0e}"
    return f"{value:g}"


def svg_chart(
    path: str,
    title: str,
    x_label: str,
    y_label: str,
    series: dict[str, list[tuple[float, float]]],
    *,
    log_x: bool = False,
    log_y: bool = False,
    styles: dict[str, tuple[str, str]] | None = None,
) -> None:
    """Write a line chart: one polyline with markers per series, axes with round ticks (or
    powers of ten on a log axis), a legend under the plot. ``styles``: (colour, dash) of a
    series by name; the others take the next colour."""
    width, height = 720, 420 + 18 * ((len(series) + 1) // 2)
    left, right, top, plot_h = 80, 20, 40, 320
    plot_w = width - left - right
    xs = [x for points in series.values() for x, _ in points]
    ys = [y for points in series.values() for _, y in points]

    def axis(values: list[float], log: bool) -> tuple[list[float], Callable[[float], float]]:
        if log:
            positive = [v for v in values if v > 0] or [1.0]
            lo = math.floor(math.log10(min(positive)))
            hi = math.ceil(math.log10(max(positive)))
            hi = max(hi, lo + 1)
            marks = [10.0**e for e in range(lo, hi + 1)]
            return marks, lambda v: (math.log10(max(v, 10.0**lo)) - lo) / (hi - lo)
        marks = _ticks(min(0.0, min(values)), max(values))
        lo_v, hi_v = marks[0], marks[-1]
        return marks, lambda v: (v - lo_v) / (hi_v - lo_v)

    x_marks, fx = axis(xs, log_x)
    y_marks, fy = axis(ys, log_y)

    def px(x: float) -> float:
        return left + fx(x) * plot_w

    def py(y: float) -> float:
        return top + plot_h - fy(y) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{_esc(title)}</text>',
    ]
    for x in x_marks:
        out.append(
            f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{top + plot_h}" '
            'stroke="#e5e5e5"/>'
        )
        out.append(
            f'<text x="{px(x):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_label(x)}</text>'
        )
    for y in y_marks:
        out.append(
            f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + plot_w}" y2="{py(y):.1f}" '
            'stroke="#e5e5e5"/>'
        )
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{_label(y)}</text>')
    out.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="black"/>'
    )
    out.append(
        f'<text x="{left + plot_w / 2}" y="{top + plot_h + 34}" text-anchor="middle">'
        f"{_esc(x_label)}</text>"
    )
    out.append(
        f'<text x="16" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + plot_h / 2})">{_esc(y_label)}</text>'
    )
    for n, (name, points) in enumerate(series.items()):
        colour, dash = (styles or {}).get(name, (COLOURS[n % len(COLOURS)], ""))
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        style = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{style}/>'
        )
        for x, y in points:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        lx = left + (n % 2) * (plot_w / 2)
        ly = top + plot_h + 56 + 18 * (n // 2)
        out.append(
            f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 28}" y2="{ly - 4}" stroke="{colour}" '
            f'stroke-width="2"{style}/>'
        )
        out.append(f'<text x="{lx + 34}" y="{ly}">{_esc(name)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_plots(points: Sequence[Point], directory: str) -> list[str]:
    """docs/images/managers-*.svg: space over time for each one-directory point, and per
    metric a line per manager and age over the number of open ledgers."""
    os.makedirs(directory, exist_ok=True)
    written = []
    names = list(points[0].runs)
    colour = {name: COLOURS[n % len(COLOURS)] for n, name in enumerate(names)}
    styles = {name: (colour[name], "") for name in names}
    styles["live ledgers"] = ("black", "2,3")
    styles["raw group commit"] = ("#7f7f7f", "8,3,2,3")
    for p in points:
        w = p.workload
        if w.dirs != 1:
            continue
        over_time = {
            "live ledgers": [(q.tick, q.live_bytes / MB) for q in p.runs[names[0]].gc_points]
        }
        for name in names:
            over_time[name] = [(q.tick, q.disk_bytes / MB) for q in p.runs[name].gc_points]
        path = f"{directory}/managers-space-{w.ledgers}-{w.age}.svg"
        svg_chart(
            path,
            f"Entry-log bytes on disk after each GC: {w.ledgers} open ledgers, deleted {w.age}",
            f"tick ({w.tick_s} s each; adds stop after tick {w.ticks})",
            "MB on disk",
            {name: [(float(x), y) for x, y in line] for name, line in over_time.items()},
            styles=styles,
        )
        written.append(path)
    one_dir = [p for p in points if p.workload.dirs == 1]
    ages = sorted({p.workload.age for p in one_dir}, reverse=True)
    charts: list[tuple[str, str, str, Any, bool]] = [
        (
            "compaction",
            "Bytes written by compaction per byte added",
            "compaction bytes / bytes added",
            lambda w, r: r.compaction_bytes / r.added_bytes,
            False,
        ),
        (
            "space",
            "Space while adding: bytes on disk / live bytes (mean over GC rounds)",
            "disk / live",
            space_ratio,
            False,
        ),
        (
            "fsyncs",
            "fsyncs per checkpoint (mean)",
            "fsyncs per checkpoint",
            lambda w, r: sum(r.checkpoint_syncs) / r.checkpoints,
            True,
        ),
        (
            "open-logs",
            "Most entry-log files open for writing at once",
            "files",
            lambda w, r: r.max_open_log_files,
            True,
        ),
        (
            "adds",
            "Durable adds/s (adds + journal forces + checkpoints)",
            "adds/s",
            lambda w, r: r.adds_per_s,
            True,
        ),
    ]
    for slug, title, y_label, value, log_y in charts:
        series: dict[str, list[tuple[float, float]]] = {}
        for name in names:
            for age in ages:
                at = sorted(
                    (p for p in one_dir if p.workload.age == age), key=lambda p: p.workload.ledgers
                )
                if at:
                    styles[f"{name}, deleted {age}"] = (
                        colour[name],
                        "" if age == "young" else "6,3",
                    )
                    series[f"{name}, deleted {age}"] = [
                        (float(p.workload.ledgers), float(value(p.workload, p.runs[name])))
                        for p in at
                    ]
        if slug == "adds":
            for age in ages[:1]:
                at = sorted(
                    (p for p in one_dir if p.workload.age == age), key=lambda p: p.workload.ledgers
                )
                series["raw group commit"] = [
                    (float(p.workload.ledgers), p.runs[names[0]].raw_per_s) for p in at
                ]
        path = f"{directory}/managers-{slug}.svg"
        svg_chart(
            path,
            title,
            "ledgers open at once",
            y_label,
            series,
            log_x=True,
            log_y=log_y,
            styles=styles,
        )
        written.append(path)
    return written


# --- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="10 to 10,000 ledgers, 1 to 4 dirs")
    parser.add_argument(
        "--points", default="", help="comma-separated LEDGERS:DIRS:young|old (overrides the sweep)"
    )
    parser.add_argument("--ticks", type=int, default=4, help="ticks with adds")
    parser.add_argument(
        "--adds", type=int, default=300, help="adds per tick (at least one per ledger)"
    )
    parser.add_argument("--tick-s", type=int, default=150, help="seconds of the clock per tick")
    parser.add_argument(
        "--write-ticks", type=int, default=2, help="ticks a short ledger is written"
    )
    parser.add_argument("--long", type=float, default=0.2, help="fraction of long-lived ledgers")
    parser.add_argument("--group", type=int, default=64, help="adds per journal force")
    parser.add_argument("--gc-every", type=int, default=2, help="ticks between forced GC cycles")
    parser.add_argument("--log-kb", type=int, default=256, help="logSizeLimit in KB")
    parser.add_argument(
        "--threshold", type=float, default=0.8, help="majorCompactionThreshold (forced GC)"
    )
    parser.add_argument(
        "--small-max", type=float, default=0.25,
        help="per-ledger-max: maximumNumberOfActiveEntryLogs as a fraction of the open ledgers",
    )  # fmt: skip
    parser.add_argument(
        "--slots",
        type=int,
        default=4,
        help="slots: entryLogSlotsPerLedgerDir (active logs per dir)",
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dir", default=None, help="where the temporary directories go")
    parser.add_argument("--json", default="", help="write every figure to this JSON file")
    parser.add_argument("--plots", default="", help="write managers-*.svg into this directory")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    points = []
    for ledgers, dirs, age in points_for(args):
        w = workload(args, ledgers, dirs, age)
        began = time.perf_counter()
        managers = managers_for(ledgers, args.small_max, args.slots)
        point = run_point(w, managers, args.rounds, args.dir)
        points.append(point)
        print(f"# {w.name}: {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - started
    print(report(points))
    print(f"\n{len(points)} points, {seconds:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(to_json(points, args, seconds), f, indent=1)
    if args.plots:
        for path in write_plots(points, args.plots):
            print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
