"""Crash the bookie at every file-system operation and check the properties of spec/properties.md.

A scripted workload (adds across ledgers with tiny entry logs so they rotate, a fence, a
wrong-key attempt, journal forces, checkpoints, a clean shutdown) runs once on the
simulated disk through the Bookie's explicit steps. Before every operation the disk is copied
with the oracle's knowledge (proofs/crash/explorer.py); each copy is crashed under every
plan, the bookie is opened again on it (recovery: index, lastMark, journal replay), and the
properties are checked:

1. Durability: every acknowledged add reads back with the same bytes.
2. Fence durability: after an acknowledged fence, an add to that ledger is refused (Fenced).
3. Auth: for every ledger with an acknowledged operation, a wrong master key is refused
   (Unauthorized) for adds and fences, and nothing is added.
6. Forward progress: lastMark after recovery is never behind the mark of the last completed
   checkpoint, and recovery leaves a mark at least as far as the one it started from.

The oracle is independent of the bookie's internals: an add or a fence is acknowledged when
its Ack completed without error, and a checkpoint's mark is read from the lastMark files it
wrote (through the FileSystem, not from the bookie's memory).

Not checked here: no resurrection (deletes are not in this workload), compaction, the
threaded driver (its acks are the same Acks; tests/unit/impl/bookie/test_driver.py covers it).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import ServerConfig, load_config
from impl.journal.last_mark import LogMark, read_last_mark
from models.fs.simdisk import SimDisk
from proofs.crash.explorer import CrashPoint, Report, explore, record_points, thin
from spec.errors import BkrefError, BookieError, Fenced, Unauthorized
from spec.ids import EntryId, LedgerId

JOURNAL_DIR = "/journal"
LEDGER_DIRS = ("/ledgers0", "/ledgers1")
KEY = b"secret"
WRONG_KEY = b"not-the-key"


def crash_config() -> ServerConfig:
    """Tiny limits so entry logs rotate every few entries."""
    overrides = [
        f"journalDirectories={JOURNAL_DIR}",
        f"ledgerDirectories={','.join(LEDGER_DIRS)}",
        "logSizeLimit=2048",
        "writeBufferSizeBytes=512",
        "journalMaxGroupWaitMSec=0",
    ]
    return load_config(None, "bookie crash check", overrides)


@attrs.frozen
class Oracle:
    """What the client side knows at a crash point."""

    acked_adds: tuple[tuple[int, int, bytes], ...]
    acked_fences: frozenset[int]
    acked_ledgers: frozenset[int]
    checkpoint_mark: LogMark


@attrs.define
class _Client:
    acked_adds: list[tuple[int, int, bytes]] = attrs.Factory(list)
    acked_fences: set[int] = attrs.Factory(set)
    acked_ledgers: set[int] = attrs.Factory(set)
    checkpoint_mark: LogMark = attrs.Factory(lambda: LogMark(0, 0))

    def snapshot(self) -> Oracle:
        return Oracle(
            tuple(self.acked_adds),
            frozenset(self.acked_fences),
            frozenset(self.acked_ledgers),
            self.checkpoint_mark,
        )


def fresh_disk() -> SimDisk:
    disk = SimDisk()
    for path in (JOURNAL_DIR, *LEDGER_DIRS):
        disk.mkdir(path)
    disk.fsync_dir("/")
    return disk


def _workload(
    bookie_box: list[Bookie], disk: SimDisk, client: _Client, seed: int, adds: int
) -> Callable[[], None]:
    rng = random.Random(seed)
    config = crash_config()

    def add(bookie: Bookie, ledger: int, entry: int) -> None:
        data = rng.randbytes(rng.randrange(0, 200))
        ack = bookie.add_entry(LedgerId(ledger), EntryId(entry), KEY, data)

        def done(_: object = None) -> None:
            if ack.error is None:
                client.acked_adds.append((ledger, entry, data))
                client.acked_ledgers.add(ledger)

        ack.add_done_callback(done)

    def fence(bookie: Bookie, ledger: int) -> None:
        ack = bookie.fence(LedgerId(ledger), KEY)

        def done(_: object = None) -> None:
            if ack.error is None:
                client.acked_fences.add(ledger)
                client.acked_ledgers.add(ledger)

        ack.add_done_callback(done)

    def run() -> None:
        bookie = Bookie.open(disk, config, clock=ManualClock(), rng=random.Random(seed))
        bookie_box.append(bookie)
        next_entry = {1: 0, 2: 0, 3: 0}
        for number in range(1, adds + 1):
            ledger = 1 + number % 3 if number < adds // 2 else 1 + number % 2
            add(bookie, ledger, next_entry[ledger])
            next_entry[ledger] += 1
            if number % 3 == 0:
                bookie.journal_force()
            if number == adds // 2:
                fence(bookie, 3)
                bookie.journal_force()
            if number % 8 == 0:
                bookie.journal_force()
                bookie.checkpoint()
                client.checkpoint_mark = read_last_mark(disk, _current(LEDGER_DIRS))
        bookie.journal_force()
        bookie.shutdown()
        client.checkpoint_mark = read_last_mark(disk, _current(LEDGER_DIRS))

    return run


def _current(dirs: tuple[str, ...]) -> list[str]:
    return [f"{d}/current" for d in dirs]


def check_recovered(disk: SimDisk, oracle: Oracle, seed: int) -> tuple[int, list[str]]:
    """Recover a bookie on the crashed disk and check properties 1, 2, 3 and 6."""
    problems: list[str] = []
    try:
        bookie = Bookie.open(disk, crash_config(), clock=ManualClock(), rng=random.Random(seed))
    except BkrefError as exc:
        return 0, [f"recovery failed: {type(exc).__name__}: {exc}"]
    for ledger, entry, data in oracle.acked_adds:
        try:
            got = bookie.read_entry(LedgerId(ledger), EntryId(entry))
        except BookieError as exc:
            problems.append(f"acknowledged add {ledger}:{entry} lost ({exc.code})")
            continue
        if got != data:
            problems.append(f"acknowledged add {ledger}:{entry} reads back other bytes")
    problems += _check_fences_and_keys(bookie, oracle)
    mark = read_last_mark(disk, _current(LEDGER_DIRS))
    if mark < oracle.checkpoint_mark:
        problems.append(f"lastMark moved backwards: {mark} < {oracle.checkpoint_mark}")
    return len(oracle.acked_adds), problems


def _check_fences_and_keys(bookie: Bookie, oracle: Oracle) -> list[str]:
    problems: list[str] = []
    for ledger in sorted(oracle.acked_fences):
        try:
            ack = bookie.add_entry(LedgerId(ledger), EntryId(10_000), KEY, b"after fence")
        except Fenced:
            continue
        except BookieError as exc:
            problems.append(f"add to fenced ledger {ledger}: {exc.code}, expected fenced")
            continue
        bookie.journal_force()
        problems.append(f"add to fenced ledger {ledger} accepted (ack error: {ack.error})")
    for ledger in sorted(oracle.acked_ledgers):
        for op in ("add", "fence"):
            try:
                if op == "add":
                    bookie.add_entry(LedgerId(ledger), EntryId(20_000), WRONG_KEY, b"x")
                else:
                    bookie.fence(LedgerId(ledger), WRONG_KEY)
            except Unauthorized:
                continue
            except BookieError as exc:
                if op == "add" and isinstance(exc, Fenced):
                    continue  # a fenced ledger may answer fenced first; nothing was added
                problems.append(f"{op} with a wrong key on ledger {ledger}: {exc.code}")
                continue
            problems.append(f"{op} with a wrong key on ledger {ledger} was accepted")
    return problems


def record(seed: int, adds: int) -> list[CrashPoint[Oracle]]:
    """Run the workload once and return its crash points."""
    disk = fresh_disk()
    client = _Client()
    box: list[Bookie] = []
    return record_points(disk, client.snapshot, _workload(box, disk, client, seed, adds))


def run_bookie_check(
    *,
    seed: int = 1,
    adds: int = 24,
    max_points: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Crash the workload at every operation (or ``max_points`` of them) under every plan."""
    points = thin(record(seed, adds), max_points)
    return explore(points, lambda disk, oracle: check_recovered(disk, oracle, seed), progress)
