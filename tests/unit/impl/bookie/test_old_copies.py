"""Old copies of a bookie's directories put back (issue 26, item 2; spec/format/identity.md,
"Old copies"): property 4 (no resurrection) for every operator mistake a bookie can detect on
its own disks, and the ones it cannot, written down.

Each test builds a bookie on the simulated disk, copies a directory (every file and directory
under it, as ``cp -a`` of a stopped bookie would), goes on (deletes, checkpoints, a kill -9 or
a clean stop), puts the old copy back and starts again. A ledger deleted after the copy was
taken must not read back: the start is refused with the file and what to do, and every
remedy the refusal prints is followed and must work.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from impl.bookie.bookie import Bookie
from impl.format import names
from impl.fs.api import join
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import DamagedFile, DirectoryError, NoLedger
from spec.ids import EntryId, LedgerId
from tests.paths import ROOT
from tests.unit.impl.bookie.test_bookie import (
    JOURNAL,
    LEDGERS,
    add_and_ack,
    body,
    make_config,
    open_bookie,
)
from tests.unit.impl.bookie.test_damage import inspect_problems

Tree = dict[str, bytes | None]

COVERAGE = join(JOURNAL, "current", names.COVERAGE_FILE_NAME)


def copy_tree(disk: SimDisk, root: str) -> Tree:
    """Every directory (None) and file (its bytes) under ``root``."""
    out: Tree = {}
    pending = [root]
    while pending:
        directory = pending.pop()
        out[directory] = None
        for name in disk.listdir(directory):
            path = join(directory, name)
            if disk.is_dir(path):
                pending.append(path)
            else:
                out[path] = disk.read_file(path)
    return out


def put_back(disk: SimDisk, root: str, tree: Tree) -> None:
    """Replace everything under ``root`` with ``tree`` (durably)."""
    for path in sorted(copy_tree(disk, root), reverse=True):
        if not disk.is_dir(path):
            disk.unlink(path)
    for path, data in sorted(tree.items()):
        if data is None:
            if not disk.exists(path):
                disk.mkdir(path)
            continue
        handle = disk.open(path, create=True)
        handle.truncate(0)
        handle.pwrite(0, data)
        handle.fsync()
        handle.close()
    for path, data in tree.items():
        if data is None:
            disk.fsync_dir(path)


def bookie_with_ledgers() -> tuple[SimDisk, Bookie]:
    disk = SimDisk()
    bookie = open_bookie(disk)
    for ledger in (1, 2, 3):
        for entry in range(3):
            add_and_ack(bookie, ledger, entry, body(ledger, entry))
    bookie.checkpoint()
    return disk, bookie


def deleted_reads_back(disk: SimDisk, ledger: int) -> bool:
    """Whether a start reads ``ledger`` back (journals kept: the old copies need them)."""
    bookie = open_bookie(disk, make_config("journalMaxBackups=5"))
    try:
        bookie.read_entry(LedgerId(ledger), EntryId(0))
    except NoLedger:
        return False
    finally:
        bookie.shutdown()
    return True


@pytest.mark.parametrize("stop", ["clean shutdown", "kill -9"])
def test_o1_an_old_copy_of_the_ledger_directories_is_refused(stop: str, tmp_path: Path) -> None:
    """The issue's reproduction: stop, copy the ledger directories, restart, delete a ledger
    (answered ok), stop, put the old copy back, start. It started with no warning and the
    deleted ledger read back."""
    disk, bookie = bookie_with_ledgers()
    bookie.shutdown()
    old = {root: copy_tree(disk, root) for root in LEDGERS}
    bookie = open_bookie(disk)
    bookie.delete_ledger(LedgerId(2))
    if stop == "clean shutdown":
        bookie.shutdown()
    else:
        disk.crash(LoseUnsynced())
    for root, tree in old.items():
        put_back(disk, root, tree)
    before = disk.current_snapshot()
    with pytest.raises(DamagedFile) as caught:
        open_bookie(disk)
    error = caught.value
    assert error.path == COVERAGE, str(error)
    assert "older copy" in error.problem, error.problem
    assert disk.current_snapshot() == before, "the refused start wrote"
    # The first remedy it prints: put back the directories as the bookie left them.
    assert "put back the ledger directories as the bookie left them" in error.advice
    # bkref inspect says the same, by the same decision (recovery.coverage_record_damage).
    problems = inspect_problems(disk, tmp_path)
    assert any("older copy than the journal directory" in p for p in problems), problems


def test_o1_the_remedies_of_an_old_copy_work() -> None:
    """Both remedies the refusal prints: the newer copy put back starts with the delete kept;
    deleting the coverage record starts from the old copy (its journals kept), and the
    ledger the refusal counted comes back, as the message says."""
    disk, bookie = bookie_with_ledgers()
    bookie.shutdown()
    old = {root: copy_tree(disk, root) for root in LEDGERS}
    bookie = open_bookie(disk, make_config("journalMaxBackups=5"))
    bookie.delete_ledger(LedgerId(2))
    bookie.shutdown()
    new = {root: copy_tree(disk, root) for root in LEDGERS}
    for root, tree in old.items():
        put_back(disk, root, tree)
    with pytest.raises(DamagedFile) as caught:
        open_bookie(disk)
    assert "1 ledger deleted after" in caught.value.problem, caught.value.problem
    assert f"delete {COVERAGE}" in caught.value.advice
    for root, tree in new.items():  # remedy 1
        put_back(disk, root, tree)
    assert not deleted_reads_back(disk, 2)
    for root, tree in old.items():  # remedy 2, from the old copy again
        put_back(disk, root, tree)
    disk.unlink(COVERAGE)
    assert deleted_reads_back(disk, 2)  # as the advice warned


def test_o3_an_old_copy_of_the_index_directory_alone_is_refused() -> None:
    """lastMark in the ledger directory records what the index held (rows i1, d2)."""
    disk, bookie = bookie_with_ledgers()
    bookie.shutdown()
    index_dir = join(LEDGERS[0], "current", names.INDEX_DIR_NAME)
    old = copy_tree(disk, index_dir)
    bookie = open_bookie(disk)
    bookie.delete_ledger(LedgerId(2))
    bookie.checkpoint()
    bookie.shutdown()
    put_back(disk, index_dir, old)
    with pytest.raises(DamagedFile):
        open_bookie(disk)


def test_o1_a_delete_after_the_copy_with_no_checkpoint_since_is_refused() -> None:
    """The delete is counted in the journal directory when it is acknowledged, not at the
    next checkpoint: a kill -9 right after it changes nothing."""
    disk, bookie = bookie_with_ledgers()
    old = {root: copy_tree(disk, root) for root in LEDGERS}
    bookie.delete_ledger(LedgerId(3))
    disk.crash(LoseUnsynced())
    for root, tree in old.items():
        put_back(disk, root, tree)
    with pytest.raises(DamagedFile) as caught:
        open_bookie(disk)
    assert caught.value.path == COVERAGE


def test_o2_an_old_copy_whose_journal_was_trimmed_is_named_an_old_copy() -> None:
    """Before: "Recovery log ... is missing", with the advice to restore the journal."""
    disk, bookie = bookie_with_ledgers()
    bookie.shutdown()
    old = {root: copy_tree(disk, root) for root in LEDGERS}
    bookie = open_bookie(disk, make_config("journalMaxBackups=0"))
    for entry in range(3, 40):
        add_and_ack(bookie, 1, entry, body(1, entry, size=600))
        bookie.checkpoint()
    bookie.shutdown()
    for root, tree in old.items():
        put_back(disk, root, tree)
    with pytest.raises(DamagedFile) as caught:
        open_bookie(disk)
    assert caught.value.path == COVERAGE
    assert "older copy" in caught.value.problem
    # The journal the old lastMark names is gone: deleting the record is no remedy here.
    assert "cannot start at all" in caught.value.advice
    assert f"delete {COVERAGE}" not in caught.value.advice


def test_o7_an_old_copy_of_every_directory_cannot_be_told_and_brings_deletes_back() -> None:
    """Written down on spec/format/identity.md ("Old copies", what cannot be detected): with
    every directory from the same moment, the disks hold nothing newer to compare with."""
    disk, bookie = bookie_with_ledgers()
    bookie.shutdown()
    old = {root: copy_tree(disk, root) for root in (JOURNAL, *LEDGERS)}
    bookie = open_bookie(disk)
    bookie.delete_ledger(LedgerId(2))
    bookie.shutdown()
    for root, tree in old.items():
        put_back(disk, root, tree)
    assert deleted_reads_back(disk, 2)


def test_o4_an_old_copy_of_a_ledger_directory_without_the_index() -> None:
    """Nothing of the index is in it, so no delete comes back: it starts, unless the index
    places entries in a log the copy lacks (e1)."""
    disk, bookie = bookie_with_ledgers()
    bookie.shutdown()
    old = copy_tree(disk, LEDGERS[1])
    bookie = open_bookie(disk, make_config("logSizeLimit=1100"))
    for entry in range(3, 12):  # new entry logs, some of them in the second directory
        add_and_ack(bookie, 1, entry, body(1, entry, size=500))
    bookie.delete_ledger(LedgerId(2))
    bookie.shutdown()
    current = join(LEDGERS[1], "current")
    logs = [join(current, n) for n in disk.listdir(current) if n.endswith(".log")]
    new_logs = {path: disk.read_file(path) for path in logs if path not in old}
    assert new_logs, logs
    put_back(disk, LEDGERS[1], old)
    with pytest.raises(DamagedFile, match="in no ledger directory"):
        open_bookie(disk)
    put_back(disk, LEDGERS[1], {**old, **new_logs})  # its remedy: the logs put back
    assert not deleted_reads_back(disk, 2)


def test_o5_a_directory_dropped_by_an_accept_and_listed_again_is_refused() -> None:
    """The stamps (D3; tests/unit/impl/bookie/test_identity.py checks every case)."""
    disk, bookie = bookie_with_ledgers()
    bookie.shutdown()
    old = copy_tree(disk, LEDGERS[1])
    stamp = join(LEDGERS[1], "current", names.IDENTITY_FILE_NAME)
    text = disk.read_file(stamp).replace(b"generation=1", b"generation=0")
    put_back(disk, LEDGERS[1], {**old, stamp: text})
    with pytest.raises(DirectoryError):
        open_bookie(disk)


def test_o6_an_old_copy_of_the_journal_directory_is_refused_when_it_can_be_told() -> None:
    disk, bookie = bookie_with_ledgers()
    old = copy_tree(disk, JOURNAL)
    add_and_ack(bookie, 1, 3, body(1, 3))
    bookie.checkpoint()  # lastMark past what the old journal copy holds
    disk.crash(LoseUnsynced())
    put_back(disk, JOURNAL, old)
    with pytest.raises(DamagedFile, match=r"points past the end of journal|is missing"):
        open_bookie(disk)


def test_o8_the_coverage_record_deleted_with_the_old_copy_cannot_be_told() -> None:
    disk, bookie = bookie_with_ledgers()
    bookie.shutdown()
    old = {root: copy_tree(disk, root) for root in LEDGERS}
    bookie = open_bookie(disk, make_config("journalMaxBackups=5"))
    bookie.delete_ledger(LedgerId(2))
    bookie.shutdown()
    for root, tree in old.items():
        put_back(disk, root, tree)
    disk.unlink(COVERAGE)
    assert deleted_reads_back(disk, 2)


def test_every_row_of_the_old_copies_table_has_a_test() -> None:
    text = (ROOT / "spec" / "format" / "identity.md").read_text(encoding="utf-8")
    section = text.split("\n## Old copies\n", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| (O\d+) \|", section, flags=re.MULTILINE))
    tested = {
        name.split("_")[1].upper()
        for name in globals()
        if name.startswith("test_o") and name.split("_")[1][1:].isdigit()
    }
    assert rows and rows == tested, (sorted(rows - tested), sorted(tested - rows))


def test_a_damaged_coverage_record_is_refused_and_deleting_it_works() -> None:
    disk, bookie = bookie_with_ledgers()
    bookie.shutdown()
    data = disk.read_file(COVERAGE)
    handle = disk.open(COVERAGE)
    handle.pwrite(20, bytes([data[20] ^ 1]))
    handle.fsync()
    handle.close()
    with pytest.raises(DamagedFile) as caught:
        open_bookie(disk)
    assert caught.value.path == COVERAGE
    assert f"delete {COVERAGE}" in caught.value.advice
    disk.unlink(COVERAGE)
    bookie = open_bookie(disk)
    bookie.checkpoint()
    assert disk.exists(COVERAGE), "the next checkpoint writes it again"


def test_the_coverage_record_follows_every_checkpoint_and_every_delete() -> None:
    disk, bookie = bookie_with_ledgers()
    first = disk.read_file(COVERAGE)
    bookie.delete_ledger(LedgerId(1))
    second = disk.read_file(COVERAGE)
    assert second != first
    bookie.delete_ledger(LedgerId(1))  # deleted already: nothing new to count
    assert disk.read_file(COVERAGE) == second
    add_and_ack(bookie, 4, 0, body(4, 0))
    bookie.checkpoint()
    assert disk.read_file(COVERAGE) != second
