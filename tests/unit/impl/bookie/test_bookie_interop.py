"""bkref opens a directory written by BookKeeper itself.

The directory is built independently of our writers, from the format pages: entry logs with
tests/unit/bk_layout.py (sealed logs with a ledgers map, and an active log without one, spread
over two ledger directories, with ``lastId``), journals with tests/unit/bk_journal_layout.py
(V6 header, key / data / fence / explicit-LAC records, padding after each group, a
preallocated zero tail, an older journal wholly before the mark) and ``lastMark`` files
written with struct (a different mark in each ledger directory: the largest wins).

Checks: the index is rebuilt from the logs (maps first, scan for the active log) with a
progress line; replay starts at BookKeeper's lastMark (records before it are not replayed);
every entry, whether in the logs, in the journal only, or in both, reads back its bytes; the
fence and the keys in the journal after the mark hold; the mark advances, and a clean restart
replays nothing. Runs on real files, and once more on the simulated disk for a large directory
(the progress lines).
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import attrs
import pytest

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import ServerConfig
from impl.fs.api import FileSystem, join
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk
from spec.errors import Fenced, NoEntry, RecoveryError, Unauthorized
from spec.ids import EntryId, LedgerId
from tests.unit import bk_journal_layout as bkj
from tests.unit import bk_layout
from tests.unit.impl.bookie.test_bookie import OTHER_KEY, make_config

KEY = b"\x9f" * 20  # BookKeeper's master keys are SHA-1 digests of the password
OLD_JOURNAL_ID = 0x18B0F3C2A00
JOURNAL_ID = OLD_JOURNAL_ID + 86_400_000


def bk_body(ledger: int, entry: int) -> bytes:
    return f"bk ledger {ledger} entry {entry} ".encode() * (1 + entry % 4)


@attrs.define
class BkDirectory:
    """What the built directory holds, for the checks."""

    root: str
    config: ServerConfig
    #: (ledger, entry) -> bytes of every entry a reader must find.
    entries: dict[tuple[int, int], bytes] = attrs.Factory(dict)
    in_logs: int = 0
    after_mark: int = 0
    mark: tuple[int, int] = (0, 0)


def write(fs: FileSystem, path: str, data: bytes) -> None:
    fs.mkdir(path.rsplit("/", 1)[0])
    handle = fs.open(path, create=True)
    handle.pwrite(0, data)
    handle.fsync()
    handle.close()


def build_bk_directory(fs: FileSystem, root: str) -> BkDirectory:
    """Three ledgers: 1 and 2 written before the mark (in sealed logs), more entries of 1 and
    2 after it (in the active log and the journal, some in the journal only: an unflushed
    log buffer), ledger 3 created after the mark (journal only), then ledger 2 fenced."""
    journal_dir = join(root, "journal", "current")
    ledger_dirs = [join(root, "ledgers0", "current"), join(root, "ledgers1", "current")]
    config = make_config(
        "logSizeLimit=1048576",
        journal=join(root, "journal"),
        ledgers=(join(root, "ledgers0"), join(root, "ledgers1")),
    )
    built = BkDirectory(root, config)
    sealed = {
        0: [(1, e, bk_body(1, e)) for e in range(6)],
        1: [(2, e, bk_body(2, e)) for e in range(4)],
    }
    active = [(1, e, bk_body(1, e)) for e in range(6, 9)] + [(2, 4, bk_body(2, 4))]
    for log_id, entries in sealed.items():
        log = bk_layout.build_log(entries, rotated=True)
        write(fs, join(ledger_dirs[log_id], f"{log_id:x}.log"), log.data)
    write(fs, join(ledger_dirs[0], "2.log"), bk_layout.build_log(active, rotated=False).data)
    for directory in ledger_dirs:
        write(fs, join(directory, "lastId"), b"2\n")
    for ledger, entry, data in [*sealed[0], *sealed[1], *active]:
        built.entries[(ledger, entry)] = data
    built.in_logs = len(built.entries)

    old = bkj.JournalBuilder(version=6)
    old.key(1, KEY)
    for ledger, entry, data in sealed[0]:
        old.entry(ledger, entry, data)
    old.flush()
    write(fs, join(journal_dir, bkj.journal_name(OLD_JOURNAL_ID)), old.file_bytes())

    current = bkj.JournalBuilder(version=6)
    current.key(2, KEY)
    for ledger, entry, data in sealed[1]:
        current.entry(ledger, entry, data)
    mark_offset = current.flush()
    after = 0
    for ledger, entry, data in active:  # in the active log and in the journal
        current.entry(ledger, entry, data)
        after += 1
    current.flush()
    for entry in range(9, 12):  # in the journal only
        built.entries[(1, entry)] = bk_body(1, entry)
        current.entry(1, entry, bk_body(1, entry))
        after += 1
    current.key(3, KEY)
    for entry in range(3):
        built.entries[(3, entry)] = bk_body(3, entry)
        current.entry(3, entry, bk_body(3, entry))
        after += 1
    current.flush()
    current.lac(1, struct.pack(">q", 10))
    current.fence(2)
    current.flush()
    write(fs, join(journal_dir, bkj.journal_name(JOURNAL_ID)), current.file_bytes(65536))
    built.after_mark = after
    built.mark = (JOURNAL_ID, mark_offset)

    write(fs, join(ledger_dirs[0], "lastMark"), bkj.last_mark(JOURNAL_ID, mark_offset))
    write(fs, join(ledger_dirs[1], "lastMark"), bkj.last_mark(OLD_JOURNAL_ID, 512))
    return built


def open_on(fs: FileSystem, built: BkDirectory, lines: list[str]) -> Bookie:
    bookie = Bookie.open(
        fs,
        built.config,
        clock=ManualClock(),
        rng=random.Random(5),
        progress=lines.append,
        write_bookkeeper_dirs=True,
    )
    bookie.check_invariants()
    return bookie


def check_every_entry(bookie: Bookie, built: BkDirectory) -> None:
    for (ledger, entry), data in sorted(built.entries.items()):
        assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == data, (ledger, entry)
    last: dict[int, int] = {}
    for ledger, entry in built.entries:
        last[ledger] = max(entry, last.get(ledger, -1))
    for ledger, last_entry in last.items():
        with pytest.raises(NoEntry):
            bookie.read_entry(LedgerId(ledger), EntryId(last_entry + 1))


def test_bkref_opens_a_bookkeeper_directory_on_real_files(tmp_path: Path) -> None:
    fs = OsFileSystem()
    built = build_bk_directory(fs, str(tmp_path))
    lines: list[str] = []
    bookie = open_on(fs, built, lines)

    report = bookie.recovery
    assert report.index_rebuilt
    assert report.entries_rebuilt == built.in_logs
    assert any("rebuilding it from entry logs" in line for line in lines)
    assert any(line.startswith("index rebuild: 3 entry logs") for line in lines)
    # Replay started at the largest lastMark: nothing before it (keys of 1 and 2, the
    # entries of the sealed logs) was replayed.
    assert report.start_mark.journal_id == built.mark[0]
    assert report.start_mark.offset == built.mark[1]
    assert report.entries_present + report.entries_re_added == built.after_mark
    assert report.entries_present == 4  # the active log's entries, also in the journal
    assert report.keys_set == 1  # ledger 3
    assert report.fences_set == 1
    assert report.ignored == 1  # the explicit-LAC record
    assert report.end_mark > report.start_mark
    check_every_entry(bookie, built)

    state = bookie.inspect()
    assert state.fenced_ledgers == (LedgerId(2),)
    assert {info.ledger_id for info in state.ledgers} == {1, 2, 3}
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(2), EntryId(5), KEY, b"late")
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(3), EntryId(3), OTHER_KEY, b"thief")
    # Ledger 1's key record lies before the mark and this directory has no BookKeeper index
    # file holding it: the next caller's key sticks (test_bookie_bk_metadata.py has them).
    bookie.add_entry(LedgerId(1), EntryId(12), KEY, b"more")
    built.entries[(1, 12)] = b"more"
    bookie.shutdown()

    again = open_on(fs, built, [])
    assert again.recovery.records_replayed == 0
    assert not again.recovery.index_rebuilt
    assert again.last_mark > report.start_mark
    check_every_entry(again, built)
    with pytest.raises(Unauthorized):
        again.add_entry(LedgerId(1), EntryId(13), OTHER_KEY, b"thief")
    again.shutdown()
    for directory in ("ledgers0", "ledgers1"):
        raw = (tmp_path / directory / "current" / "lastMark").read_bytes()
        assert struct.unpack_from(">qq", raw) == (
            again.last_mark.journal_id,
            again.last_mark.offset,
        )


def test_a_missing_marked_journal_is_a_clear_startup_error(tmp_path: Path) -> None:
    fs = OsFileSystem()
    built = build_bk_directory(fs, str(tmp_path))
    (tmp_path / "journal" / "current" / bkj.journal_name(JOURNAL_ID)).unlink()
    with pytest.raises(RecoveryError, match=f"Recovery log {JOURNAL_ID} is missing"):
        open_on(fs, built, [])


def test_a_large_bookkeeper_directory_reports_progress() -> None:
    disk = SimDisk()
    ledger_dir = "/bk/ledgers0/current"
    for log_id in range(20):
        log = bk_layout.build_log([(log_id + 1, e, bk_body(log_id + 1, e)) for e in range(3)])
        write(disk, join(ledger_dir, f"{log_id:x}.log"), log.data)
    disk.mkdir("/bk/ledgers1/current")
    lines: list[str] = []
    bookie = Bookie.open(
        disk,
        make_config(),
        clock=ManualClock(),
        rng=random.Random(1),
        progress=lines.append,
        write_bookkeeper_dirs=True,
    )
    assert any("index rebuild: 16/20 entry logs read" in line for line in lines)
    assert bookie.recovery.entries_rebuilt == 60
    for log_id in range(20):
        assert bookie.read_entry(LedgerId(log_id + 1), EntryId(2)) == bk_body(log_id + 1, 2)


def test_a_read_error_during_the_index_rebuild_fails_the_start_and_loses_nothing() -> None:
    # A log skipped for a read error would leave its entries out of the index that recovery
    # then checkpoints: once persisted, the index is never rebuilt, so they would be gone.
    disk = SimDisk()
    built = build_bk_directory(disk, "/bk")
    disk.fail_next("read", "/bk/ledgers1/current/1.log")
    with pytest.raises(RecoveryError, match="rebuilding the ledger index"):
        open_on(disk, built, [])
    bookie = open_on(disk, built, [])
    assert bookie.recovery.index_rebuilt
    check_every_entry(bookie, built)


# --- a directory BookKeeper wrote with entryLogPerLedgerEnabled ---------------------------


def build_bk_per_ledger_directory(fs: FileSystem, root: str, *, per_ledger: bool) -> BkDirectory:
    """What BookKeeper's EntryLogManagerForEntryLogPerLedger leaves: a log per ledger, the
    first logs taking ids equal to their ledgers' (ledgers 0 to 3 created in order on a new
    bookie), then logs of the same ledgers sealed by eviction and rotation, and, at a crash,
    several active logs at once, one per ledger, none with a ledgers map; spread over two
    ledger directories, ``lastId`` at the highest id. No journal record after the mark: the
    entries are in the logs only, as after a checkpoint."""
    ledger_dirs = [join(root, "ledgers0", "current"), join(root, "ledgers1", "current")]
    config = make_config(
        "logSizeLimit=1048576",
        f"entryLogPerLedgerEnabled={str(per_ledger).lower()}",
        journal=join(root, "journal"),
        ledgers=(join(root, "ledgers0"), join(root, "ledgers1")),
    )
    built = BkDirectory(root, config)
    fs.mkdir(join(root, "journal"))
    fs.mkdir(join(root, "journal", "current"))
    logs: list[tuple[int, int, range, bool]] = [
        # (log id, ledger, entries, sealed)
        (0, 0, range(0, 5), True),
        (1, 1, range(0, 3), True),
        (2, 2, range(0, 4), True),
        (3, 3, range(0, 2), True),
        (4, 0, range(5, 9), True),  # ledger 0 evicted, then written again
        (5, 1, range(3, 6), False),  # active at the crash
        (6, 0, range(9, 12), False),
        (7, 2, range(4, 5), False),
    ]
    for log_id, ledger, entry_ids, sealed in logs:
        entries = [(ledger, e, bk_body(ledger, e)) for e in entry_ids]
        log = bk_layout.build_log(entries, rotated=sealed)
        write(fs, join(ledger_dirs[log_id % 2], f"{log_id:x}.log"), log.data)
        built.entries.update({(led, e): data for led, e, data in entries})
    for directory in ledger_dirs:
        write(fs, join(directory, "lastId"), b"7\n")
    built.in_logs = len(built.entries)
    return built


@pytest.mark.parametrize("per_ledger", [True, False], ids=["per-ledger", "single"])
def test_bkref_opens_a_bookkeeper_per_ledger_directory(tmp_path: Path, per_ledger: bool) -> None:
    """Either manager opens it (the format is the same): every entry reads back, new adds go
    to new logs with ids past BookKeeper's, and a restart finds everything."""
    fs = OsFileSystem()
    built = build_bk_per_ledger_directory(fs, str(tmp_path), per_ledger=per_ledger)
    bookie = open_on(fs, built, [])
    assert bookie.recovery.index_rebuilt
    assert bookie.recovery.entries_rebuilt == built.in_logs
    check_every_entry(bookie, built)
    for ledger in range(4):
        entry = max(e for led, e in built.entries if led == ledger) + 1
        data = bk_body(ledger, entry)
        bookie.add_entry(LedgerId(ledger), EntryId(entry), KEY, data)
        built.entries[(ledger, entry)] = data
    bookie.checkpoint()
    active = [log for log in bookie.inspect().entry_logs if log.state == "active"]
    assert len(active) == (4 if per_ledger else 1)
    assert min(log.log_id for log in active) > 7  # past every id BookKeeper used
    check_every_entry(bookie, built)
    bookie.shutdown()
    again = open_on(fs, built, [])
    assert again.recovery.records_replayed == 0
    check_every_entry(again, built)
    again.shutdown()
