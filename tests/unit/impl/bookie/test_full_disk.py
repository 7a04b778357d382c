"""A ledger disk full of the bookie's own data (issue 26, item 3): the bookie starts and serves
reads (it turns read-only, as BookKeeper does), replays into a directory that has room, and
every remedy its messages print works, one test per message.

The reproduction of the issue, on the simulated disk: one ledger directory with a capacity,
flushInterval=60000 (no checkpoint), 4000-byte adds until no_space, kill -9 (the page cache
survives, the process's write buffer does not), start. It was refused ("free space or add a
ledger directory"), and `bkref dirs accept` with an added empty directory failed too, because
it must first write bkref-identity.tmp into the full one.
"""

from __future__ import annotations

import re

import pytest

from impl.bookie.bookie import Bookie
from impl.bookie.identity import (
    apply_accept,
    lock_directories,
    plan_accept,
    release_locks,
)
from impl.bookie.layout import ensure_durable_dir
from impl.config.config import ServerConfig
from impl.format.names import CURRENT_DIR, RESERVE_FILE_NAME
from impl.fs.api import join
from impl.limits import Limits
from models.fs.simdisk import SimDisk
from spec.crash import KillProcess, LoseUnsynced
from spec.errors import BookieIOError, NoLedger, NoSpace
from spec.ids import EntryId, LedgerId
from tests.unit.impl.bookie.test_bookie import JOURNAL, KEY, make_config, open_bookie

FULL = "/bk/ledgers0"
ADDED = "/bk/ledgers1"
SIZE = 4000
CAPACITY = 3 * 1024 * 1024


def config(*ledgers: str) -> ServerConfig:
    return make_config(
        "flushInterval=60000",
        "logSizeLimit=1048576",
        "writeBufferSizeBytes=65536",
        ledgers=ledgers or (FULL,),
    )


def data(entry: int) -> bytes:
    return bytes([entry % 251]) * SIZE


def fill(bookie: Bookie) -> int:
    """Add 4000-byte entries to ledger 1, each acknowledged, until no_space; how many."""
    entry = 0
    while True:
        try:
            ack = bookie.add_entry(LedgerId(1), EntryId(entry), KEY, data(entry))
        except NoSpace:
            return entry
        bookie.journal_force()
        assert ack.wait(5) and ack.error is None, ack.error
        entry += 1


def full_bookie_killed() -> tuple[SimDisk, int]:
    """The issue's reproduction up to the kill -9: the disk and the acknowledged adds."""
    disk = SimDisk()
    bookie = open_bookie(disk, config())
    disk.set_capacity(FULL, CAPACITY)
    acked = fill(bookie)
    assert acked > 100
    disk.crash(KillProcess())
    return disk, acked


def reads_all(bookie: Bookie, acked: int) -> None:
    for entry in range(acked):
        assert bookie.read_entry(LedgerId(1), EntryId(entry)) == data(entry), entry


def test_a_full_ledger_disk_starts_read_only_and_serves_every_acknowledged_entry() -> None:
    disk, acked = full_bookie_killed()
    lines: list[str] = []
    bookie = open_bookie(disk, config(), progress=lines.append)
    reads_all(bookie, acked)
    with pytest.raises(NoSpace):  # read-only: adds are refused, nothing is written
        bookie.add_entry(LedgerId(1), EntryId(acked), KEY, data(acked))
    said = " ".join(lines)
    assert "read-only" in said and "from the journal" in said, lines
    assert "bkref dirs accept" in said, lines  # what to do, with the command
    # What the start could not replay stays in the journal: lastMark did not move past it.
    again = open_bookie_after_crash(disk)
    reads_all(again, acked)


def open_bookie_after_crash(disk: SimDisk) -> Bookie:
    disk.crash(KillProcess())
    return open_bookie(disk, config())


def test_remedy_free_space_the_bookie_resumes_by_itself() -> None:
    """The start's message: free space in the ledger directory; the next disk check sees it
    and the next checkpoint writes what was served from the journal. No restart."""
    disk, acked = full_bookie_killed()
    bookie = open_bookie(disk, config())
    disk.set_capacity(FULL, None)  # room again
    bookie.check_dirs()
    bookie.checkpoint()
    add = bookie.add_entry(LedgerId(1), EntryId(acked), KEY, data(acked))
    bookie.journal_force()
    assert add.wait(5) and add.error is None
    disk.crash(LoseUnsynced())  # a power cut: the checkpoint made it all durable
    again = open_bookie(disk, config())
    reads_all(again, acked + 1)
    assert again.recovery.records_replayed == 1  # only the add after the checkpoint


def accept(disk: SimDisk, *ledgers: str) -> None:
    """``bkref dirs accept`` with the bookie stopped (proofs/cli/dirs.py, on the disk)."""
    for directory in (JOURNAL, *ledgers):
        ensure_durable_dir(disk, join(directory, CURRENT_DIR))
    locks = lock_directories(disk, [JOURNAL, *ledgers])
    try:
        plan = plan_accept(disk, [JOURNAL], list(ledgers))
        assert not plan.refusals, plan.refusals
        apply_accept(disk, plan)
    finally:
        release_locks(locks)


def test_remedy_add_a_ledger_directory_replays_into_it_and_serves() -> None:
    """The start's other remedy: stop, `bkref dirs accept` with an added empty directory
    (it must work though the full directory has no room for a new stamp), start: replay goes
    to the directory that has room, and the bookie takes adds again."""
    disk, acked = full_bookie_killed()
    accept(disk, FULL, ADDED)
    lines: list[str] = []
    bookie = open_bookie(disk, config(FULL, ADDED), progress=lines.append)
    assert not any("read-only" in line for line in lines), lines
    reads_all(bookie, acked)
    add = bookie.add_entry(LedgerId(1), EntryId(acked), KEY, data(acked))
    bookie.journal_force()
    assert add.wait(5) and add.error is None
    bookie.checkpoint()
    disk.crash(LoseUnsynced())
    reads_all(open_bookie(disk, config(FULL, ADDED)), acked + 1)


def test_accept_works_on_a_disk_with_no_byte_free() -> None:
    disk, _acked = full_bookie_killed()
    disk.set_capacity(FULL, used(disk, FULL))  # not one byte free
    accept(disk, FULL, ADDED)
    bookie = open_bookie(disk, config(FULL, ADDED))
    bookie.check_invariants()


def test_the_start_lays_down_the_reserve_it_was_given() -> None:
    disk = SimDisk()
    open_bookie(disk, config(), limits=Limits(dir_reserve_bytes=5000)).shutdown()
    for directory in (JOURNAL, FULL):
        assert len(disk.read_file(join(directory, CURRENT_DIR, RESERVE_FILE_NAME))) == 5000


def test_a_journal_directory_full_to_the_byte_still_starts() -> None:
    """The new journal's header goes where the reserve was; reads are served. The first add
    then finds no room in the journal: the bookie fails it, and its message's remedy (free
    space, restart) works."""
    disk = SimDisk()
    bookie = open_bookie(disk, config())
    add_and_ack(bookie, 1, 0, data(0))
    disk.crash(KillProcess())
    disk.set_capacity(JOURNAL, used(disk, JOURNAL))
    bookie = open_bookie(disk, config())
    assert bookie.read_entry(LedgerId(1), EntryId(0)) == data(0)
    entry = 1
    with pytest.raises(BookieIOError, match="then restart the bookie"):
        while entry < 1000:  # the freed reserve takes a few groups, then no room
            ack = bookie.add_entry(LedgerId(1), EntryId(entry), KEY, data(entry))
            bookie.journal_force()
            assert ack.wait(5) and ack.error is None
            entry += 1
    disk.set_capacity(JOURNAL, None)  # the remedy: room, then a restart
    disk.crash(KillProcess())
    bookie = open_bookie(disk, config())
    reads_all(bookie, entry)
    add_and_ack(bookie, 1, entry, data(entry))


def used(disk: SimDisk, root: str) -> int:
    return sum(
        len(content) for path, content in disk.current_snapshot().items() if path.startswith(root)
    )


# --- every message a full disk prints, and its remedy --------------------------------------------


def test_an_add_with_no_room_says_free_space_or_add_a_directory_and_both_work() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk, config())
    disk.set_capacity(FULL, CAPACITY)
    acked = fill(bookie)
    with pytest.raises(NoSpace) as caught:
        bookie.add_entry(LedgerId(1), EntryId(acked), KEY, data(acked))
    message = str(caught.value)  # no room in the log, or for a new log: both say so
    assert re.search("Free (disk )?space", message) and "`bkref dirs accept`" in message
    # Remedy 1: free space; the next disk check sees it and the add goes through.
    disk.set_capacity(FULL, None)
    bookie.check_dirs()
    add_and_ack(bookie, 1, acked, data(acked))
    # Remedy 2 (the disk full again): stop, accept an added directory, start.
    disk.set_capacity(FULL, used(disk, FULL))
    more = acked + 1 + fill_from(bookie, acked + 1)
    disk.crash(KillProcess())
    accept(disk, FULL, ADDED)
    bookie = open_bookie(disk, config(FULL, ADDED))
    add_and_ack(bookie, 1, more, data(more))
    reads_all(bookie, more + 1)


def fill_from(bookie: Bookie, first: int) -> int:
    entry = first
    while True:
        try:
            ack = bookie.add_entry(LedgerId(1), EntryId(entry), KEY, data(entry))
        except NoSpace:
            return entry - first
        bookie.journal_force()
        assert ack.wait(5) and ack.error is None
        entry += 1


def add_and_ack(bookie: Bookie, ledger: int, entry: int, body: bytes) -> None:
    ack = bookie.add_entry(LedgerId(ledger), EntryId(entry), KEY, body)
    bookie.journal_force()
    assert ack.wait(5) and ack.error is None, ack.error


def test_no_writable_directory_for_a_new_log_says_what_to_do_and_it_works() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk, config(FULL, ADDED))
    add_and_ack(bookie, 1, 0, data(0))
    for directory in (FULL, ADDED):  # both above diskUsageThreshold, a little room left
        disk.set_capacity(directory, used(disk, directory) + 100)
    bookie.check_dirs()  # the active log's directory is full: the next add needs a new log
    with pytest.raises(NoSpace) as caught:
        bookie.add_entry(LedgerId(1), EntryId(1), KEY, data(1))
    message = str(caught.value)
    assert "no writable ledger directory" in message and "`bkref dirs accept`" in message
    for directory in (FULL, ADDED):
        disk.set_capacity(directory, None)
    bookie.check_dirs()  # "the next disk check sees it"
    add_and_ack(bookie, 1, 1, data(1))


def test_a_checkpoint_with_no_room_says_free_space_and_then_succeeds() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk, config())
    add_and_ack(bookie, 1, 0, data(0))
    disk.set_capacity(FULL, used(disk, FULL))
    with pytest.raises(NoSpace) as caught:
        bookie.checkpoint()
    assert "free space and it succeeds again" in str(caught.value)
    disk.set_capacity(FULL, None)
    bookie.checkpoint()
    disk.crash(LoseUnsynced())
    assert open_bookie(disk, config()).recovery.records_replayed == 0


def test_a_delete_with_no_room_names_the_index_directory_and_a_retry_works() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk, config())
    add_and_ack(bookie, 1, 0, data(0))
    bookie.checkpoint()
    disk.set_capacity(FULL, used(disk, FULL))
    with pytest.raises(NoSpace) as caught:
        bookie.delete_ledger(LedgerId(1))
    assert f"free space in {FULL}/current (it holds the ledger index)" in str(caught.value)
    disk.set_capacity(FULL, None)
    bookie.delete_ledger(LedgerId(1))
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(1), EntryId(0))
