"""bkref opens a BookKeeper ledger directory left by an interrupted compaction.

BookKeeper's TransactionalEntryLogCompactor (BP-6) leaves one of three states when a bookie
dies in the middle of a compaction; each is built here from the format pages with the
independent writer tests/unit/bk_layout.py (never with bkref's compactor or codec):

- phase 1 cut: ``<new>.log.compacting`` with an unflushed, torn tail beside its source;
- phase 2 done: ``<new>.log.<src>.compacted`` (sealed, with its ledgers map) beside its source;
- phase 3 cut by a failed index flush: ``<new>.log`` and ``.compacted`` (the same bytes: a
  hard link) beside the source.

What BookKeeper's recovery (cleanUpAndRecover: incompleteCompactionLogs, then
UpdateIndexPhase in recovery mode) reaches from each, and what bkref must reach too: the
``.compacting`` is deleted and the source kept; a ``.compacted`` is finished: ``<new>.log``
exists, the index names it, ``.compacted`` and the source are gone. Every entry the
compaction kept (the live ledgers') reads back with its bytes; the entries BookKeeper's
compaction dropped (a deleted ledger's) are gone with the source, as in BookKeeper. The ids are
above 9, so a log named in decimal (BookKeeper #4804) would be another file.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.fs.api import FileSystem, join
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk
from spec.crash import KeepAll, LoseUnsynced
from spec.errors import NoEntry, NoLedger
from spec.ids import EntryId, LedgerId
from tests.unit import bk_layout
from tests.unit.impl.bookie.test_bookie import make_config
from tests.unit.impl.bookie.test_bookie_interop import bk_body, write

LIVE = 7  # a ledger BookKeeper's compaction kept
DEAD = 8  # a ledger deleted in BookKeeper's ledger manager: the compaction dropped it
SOURCE = 0xB
OTHER = 0xC  # a log that is not compacted
NEW = 0x1A
LAST_ID = b"1a\n"


def source_entries() -> list[tuple[int, int, bytes]]:
    out: list[tuple[int, int, bytes]] = []
    for entry in range(5):
        out.append((LIVE, entry, bk_body(LIVE, entry)))
        out.append((DEAD, entry, bk_body(DEAD, entry)))
    return out


def live_entries() -> list[tuple[int, int, bytes]]:
    return [e for e in source_entries() if e[0] == LIVE]


def other_entries() -> list[tuple[int, int, bytes]]:
    return [(9, entry, bk_body(9, entry)) for entry in range(3)]


def build(fs: FileSystem, root: str, state: str) -> tuple[str, list[str]]:
    """A BookKeeper ledger directory in ``state``; returns it and its ledger directories."""
    ledger_dir = join(root, "ledgers0", "current")
    for log_id, entries in ((SOURCE, source_entries()), (OTHER, other_entries())):
        write(fs, join(ledger_dir, bk_layout.log_name(log_id)), bk_layout.build_log(entries).data)
    write(fs, join(ledger_dir, "lastId"), LAST_ID)
    fs.mkdir(join(root, "ledgers1"))
    fs.mkdir(join(root, "ledgers1", "current"))
    write(fs, join(root, "ledgers1", "current", "lastId"), LAST_ID)
    compacted = bk_layout.build_log(live_entries()).data
    if state == "compacting":
        data = bk_layout.build_compacting_log(live_entries(), tail_bytes=30)
        write(fs, join(ledger_dir, bk_layout.compacting_name(NEW)), data)
    elif state == "compacted":
        write(fs, join(ledger_dir, bk_layout.compacted_name(NEW, SOURCE)), compacted)
    else:
        assert state == "index_flush_failed"
        write(fs, join(ledger_dir, bk_layout.compacted_name(NEW, SOURCE)), compacted)
        fs.link(
            join(ledger_dir, bk_layout.compacted_name(NEW, SOURCE)),
            join(ledger_dir, bk_layout.log_name(NEW)),
        )
    fs.mkdir(join(root, "journal"))
    fs.mkdir(join(root, "journal", "current"))
    return ledger_dir, [ledger_dir, join(root, "ledgers1", "current")]


def open_bk(fs: FileSystem, root: str, lines: list[str]) -> Bookie:
    config = make_config(
        "logSizeLimit=1048576",
        journal=join(root, "journal"),
        ledgers=(join(root, "ledgers0"), join(root, "ledgers1")),
    )
    bookie = Bookie.open(
        fs,
        config,
        clock=ManualClock(),
        rng=random.Random(5),
        progress=lines.append,
        write_bookkeeper_dirs=True,
    )
    bookie.check_invariants()
    return bookie


def log_files(fs: FileSystem, ledger_dir: str) -> list[str]:
    return sorted(n for n in fs.listdir(ledger_dir) if ".log" in n)


def check_reads(bookie: Bookie, *, dead_kept: bool) -> None:
    for ledger, entry, data in live_entries() + other_entries():
        assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == data, (ledger, entry)
    for _ledger, entry, data in [e for e in source_entries() if e[0] == DEAD]:
        if dead_kept:
            assert bookie.read_entry(LedgerId(DEAD), EntryId(entry)) == data
        else:
            with pytest.raises((NoLedger, NoEntry)):
                bookie.read_entry(LedgerId(DEAD), EntryId(entry))


@pytest.mark.parametrize("state", ["compacting", "compacted", "index_flush_failed"])
def test_a_bookkeeper_directory_left_mid_compaction_recovers_as_bookkeeper_does(
    tmp_path: Path, state: str
) -> None:
    fs = OsFileSystem()
    ledger_dir, _dirs = build(fs, str(tmp_path), state)
    lines: list[str] = []
    bookie = open_bk(fs, str(tmp_path), lines)
    if state == "compacting":
        # BookKeeper deletes the .compacting and keeps the source: nothing moved.
        assert log_files(fs, ledger_dir) == sorted(
            [bk_layout.log_name(SOURCE), bk_layout.log_name(OTHER)]
        )
        assert any(".log.compacting" in line and "removed" in line for line in lines)
        check_reads(bookie, dead_kept=True)
    else:
        # BookKeeper finishes it: <new>.log (hex), the source and .compacted gone.
        assert log_files(fs, ledger_dir) == sorted(
            [bk_layout.log_name(NEW), bk_layout.log_name(OTHER)]
        )
        assert f"{NEW}.log" not in fs.listdir(ledger_dir)  # not decimal (#4804)
        finished = "finished the compaction of entry log b.log into 1a.log"
        assert any(finished in line for line in lines)
        check_reads(bookie, dead_kept=False)
    assert bookie.recovery.index_rebuilt
    bookie.shutdown()
    # A second start finds nothing left to do and the same entries.
    again = open_bk(fs, str(tmp_path), lines := [])
    assert not any("compaction" in line for line in lines)
    check_reads(again, dead_kept=state == "compacting")
    again.shutdown()


def test_a_bookkeeper_compacted_log_is_finished_on_the_simulated_disk_through_crashes() -> None:
    """The same directory on the simulated disk: a crash at every operation of bkref's
    recovery of the ``.compacted`` state, under every kept prefix, then a restart."""
    disk = SimDisk()
    build(disk, "/bk", "compacted")
    for path in ("/", "/bk", "/bk/ledgers0", "/bk/ledgers1", "/bk/journal"):
        disk.fsync_dir(path)
        disk.fsync_dir(path + "/current" if path.count("/") == 2 else path)
    images: list[SimDisk] = []
    disk.on_operation = lambda _kind: images.append(disk.copy())
    try:
        open_bk(disk, "/bk", []).shutdown()
    finally:
        disk.on_operation = None
    assert len(images) > 10

    for point, image in enumerate(images):
        for plan in (LoseUnsynced(), KeepAll()):
            crashed = image.copy()
            crashed.crash(plan)
            bookie = open_bk(crashed, "/bk", [])
            ledger_dir = "/bk/ledgers0/current"
            names = log_files(crashed, ledger_dir)
            assert names == sorted([bk_layout.log_name(NEW), bk_layout.log_name(OTHER)]), (
                point,
                plan,
                names,
            )
            check_reads(bookie, dead_kept=False)
            bookie.shutdown()
