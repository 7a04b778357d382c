"""A bookie opened on a directory BookKeeper wrote keeps the master keys and fence flags of
BookKeeper's ``.idx`` headers (spec/format/bk_index.md; issue 10, "Real BookKeeper
directories": an add or a fence with any key used to be accepted on such a ledger).

The directory is test_bookie_interop's (entry logs by tests/unit/bk_layout.py, journals by
tests/unit/bk_journal_layout.py), plus ``.idx`` files written by tests/unit/bk_index_layout.py,
none of them by our writers. Ledgers 1 and 2 have their key records before lastMark, so only
the ``.idx`` headers hold their keys; ledger 4 is known only from its ``.idx`` (no entry in any
log, nothing in the journal after the mark); ledger 6 likewise, and fenced.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.fs.api import FileSystem, join
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk
from spec.errors import Fenced, RecoveryError, Unauthorized
from spec.ids import EntryId, LedgerId
from tests.unit import bk_index_layout as bki
from tests.unit import bk_layout
from tests.unit.impl.bookie.test_bookie import OTHER_KEY, make_config
from tests.unit.impl.bookie.test_bookie_interop import (
    KEY,
    BkDirectory,
    build_bk_directory,
    check_every_entry,
    open_on,
    write,
)

KEY4 = b"\x44" * 20
KEY6 = b"\x66" * 20


def add_idx_files(fs: FileSystem, built: BkDirectory) -> None:
    ledgers0 = join(built.root, "ledgers0", "current")
    ledgers1 = join(built.root, "ledgers1", "current")
    positions = {e: bki.location(0, 1028) for e in range(1)}
    write(fs, join(ledgers1, bki.idx_path(1)), bki.idx_file(KEY, positions))
    write(fs, join(ledgers0, bki.idx_path(2)), bki.idx_file(KEY, lac=bki.lac_buffer(2, 3)))
    write(fs, join(ledgers0, bki.idx_path(4)), bki.idx_file(KEY4, version=0))
    write(fs, join(ledgers1, bki.idx_path(6)), bki.idx_file(KEY6, fenced=True))


def check_bk_keys_and_fences(bookie: Bookie) -> None:
    for ledger in (1, 4):
        with pytest.raises(Unauthorized):
            bookie.add_entry(LedgerId(ledger), EntryId(100), OTHER_KEY, b"thief")
        with pytest.raises(Unauthorized):
            bookie.fence(LedgerId(ledger), OTHER_KEY)
        assert bookie.inspect() is not None
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(6), EntryId(0), KEY6, b"late")
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(6), EntryId(0), OTHER_KEY, b"late")
    with pytest.raises(Unauthorized):
        bookie.fence(LedgerId(6), OTHER_KEY)
    with pytest.raises(Fenced):  # fenced by the journal record after the mark, as before
        bookie.add_entry(LedgerId(2), EntryId(5), KEY, b"late")
    assert set(bookie.inspect().fenced_ledgers) == {LedgerId(2), LedgerId(6)}


def test_keys_and_fences_of_bookkeeper_index_files_hold_across_restarts(tmp_path: Path) -> None:
    fs = OsFileSystem()
    built = build_bk_directory(fs, str(tmp_path))
    add_idx_files(fs, built)
    lines: list[str] = []
    bookie = open_on(fs, built, lines)
    assert bookie.recovery.index_rebuilt
    assert any("BookKeeper index files: 4 ledgers read" in line for line in lines)
    assert any("1 with an explicit LAC, not carried over" in line for line in lines)
    check_every_entry(bookie, built)
    check_bk_keys_and_fences(bookie)
    # The right keys still work where the ledger is open.
    bookie.add_entry(LedgerId(1), EntryId(12), KEY, b"more").wait(5)
    bookie.add_entry(LedgerId(4), EntryId(0), KEY4, b"first").wait(5)
    built.entries[(1, 12)] = b"more"
    built.entries[(4, 0)] = b"first"
    bookie.shutdown()

    again = open_on(fs, built, [])
    assert not again.recovery.index_rebuilt
    check_every_entry(again, built)
    check_bk_keys_and_fences(again)
    again.shutdown()


def test_a_bookie_of_index_files_only_rebuilds_and_keeps_their_keys() -> None:
    # No entry log at all: the ledgers are known only from their .idx headers.
    disk = SimDisk()
    config = make_config()
    ledgers0 = "/bk/ledgers0/current"  # make_config's first ledger directory
    write(disk, join(ledgers0, bki.idx_path(4)), bki.idx_file(KEY4))
    write(disk, join(ledgers0, bki.idx_path(6)), bki.idx_file(KEY6, fenced=True))
    bookie = Bookie.open(
        disk, config, clock=ManualClock(), rng=random.Random(3), write_bookkeeper_dirs=True
    )
    assert bookie.recovery.index_rebuilt
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(4), EntryId(0), OTHER_KEY, b"thief")
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(6), EntryId(0), KEY6, b"late")
    bookie.shutdown()


def test_a_damaged_index_file_refuses_the_start_naming_file_and_offset(tmp_path: Path) -> None:
    fs = OsFileSystem()
    built = build_bk_directory(fs, str(tmp_path))
    path = join(str(tmp_path), "ledgers0", "current", bki.idx_path(1))
    write(fs, path, bki.idx_file(KEY, version=7))
    said = re.escape(f"{path} offset 4: header version 7")
    with pytest.raises(RecoveryError, match=said) as caught:
        open_on(fs, built, [])
    assert "restore the file from a backup" in str(caught.value)
    index_dir = tmp_path / "ledgers0" / "current" / "bkref-index"
    assert not index_dir.exists() or not list(index_dir.glob("*.seg"))  # nothing persisted


def test_a_torn_index_file_is_reported_and_the_journal_still_gives_the_key() -> None:
    disk = SimDisk()
    built = build_bk_directory(disk, "/bk")
    # Ledger 3's key record is after lastMark: a torn .idx (a crash leftover) loses nothing.
    path = join("/bk/ledgers0/current", bki.idx_path(3))
    write(disk, path, bytes(1024))
    lines: list[str] = []
    bookie = open_on(disk, built, lines)
    assert any(f"{path}: not carried over" in line for line in lines)
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(3), EntryId(3), OTHER_KEY, b"thief")
    check_every_entry(bookie, built)
    bookie.shutdown()


def test_a_dbledgerstorage_database_opened_in_place_is_said_not_read() -> None:
    disk = SimDisk()
    write(disk, "/bk/ledgers0/current/0.log", bk_layout.build_log([(1, 0, b"x")]).data)
    write(disk, "/bk/ledgers0/current/ledgers/CURRENT", b"MANIFEST-000004\n")
    lines: list[str] = []
    bookie = Bookie.open(
        disk,
        make_config(),
        clock=ManualClock(),
        rng=random.Random(3),
        progress=lines.append,
        write_bookkeeper_dirs=True,
    )
    assert any(
        "DbLedgerStorage ledger metadata /bk/ledgers0/current/ledgers" in line for line in lines
    )
    assert any("bkref import" in line for line in lines)
    bookie.shutdown()
