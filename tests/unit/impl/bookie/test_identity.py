"""impl/bookie/identity.py on the simulated disk: the directory locks, the identity stamps a
first start writes, the refusals of an added, dropped, reordered, swapped or foreign
directory, ``plan_accept``/``apply_accept`` (the engine of ``bkref dirs accept``), the
ledger index found where the stamps say after each accepted change (fences, keys and deletes
hold, nothing acknowledged is lost), BookKeeper's directories with and without
``write_bookkeeper_dirs``, directories of bkref from before stamps, and a crash at every
file-system operation of a first start and of an accept (the next start or accept must
finish it, never refuse it). The same refusals through real processes and the OS backend are
tests/unit/proofs/cli/test_dirs.py.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from impl.bookie.bookie import Bookie
from impl.bookie.directories import DirKind, classify_dir
from impl.bookie.identity import (
    AcceptPlan,
    apply_accept,
    lock_directories,
    plan_accept,
    release_locks,
)
from impl.clock import ManualClock
from impl.format.identity import Stamp, decode_stamp, encode_stamp
from impl.format.names import IDENTITY_FILE_NAME, INDEX_DIR_NAME
from impl.fs.api import join
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk
from proofs.crash.explorer import plans_at
from spec.crash import KeepAll, LoseUnsynced
from spec.errors import DirectoryError, Fenced, NoLedger, Unauthorized
from spec.ids import EntryId, LedgerId
from tests.unit import bk_layout
from tests.unit.impl.bookie.test_bookie import (
    JOURNAL,
    KEY,
    OTHER_KEY,
    add_and_ack,
    body,
    make_config,
    open_bookie,
)

L0, L1, L2 = "/bk/ledgers0", "/bk/ledgers1", "/bk/ledgers2"


def stamp_of(disk: SimDisk, directory: str) -> str:
    return join(directory, "current", IDENTITY_FILE_NAME)


def open_on(disk: SimDisk, ledgers: Sequence[str], **kwargs: object) -> Bookie:
    return open_bookie(disk, make_config(ledgers=tuple(ledgers)), **kwargs)  # type: ignore[arg-type]


def accept(
    disk: SimDisk, ledgers: Sequence[str], *, journal: str = JOURNAL, forget: Sequence[str] = ()
) -> AcceptPlan:
    """What ``bkref dirs accept`` does, on the simulated disk."""
    for directory in (journal, *ledgers):
        disk.mkdir(join(directory, "current"))
    locks = lock_directories(disk, [journal, *ledgers])
    try:
        plan = plan_accept(disk, [journal], list(ledgers), forget=forget)
        if plan.template is not None and not plan.refusals:
            apply_accept(disk, plan)
        return plan
    finally:
        release_locks(locks)


# --- a workload whose every kind of fact must survive ------------------------------------------


def write_history(bookie: Bookie) -> None:
    """Entries (some only in the journal), a fence, a key, a delete, a checkpoint between."""
    for entry in range(6):
        add_and_ack(bookie, 1, entry, body(1, entry))
    add_and_ack(bookie, 2, 0, body(2, 0))
    fence = bookie.fence(LedgerId(2), KEY)
    bookie.journal_force()
    assert fence.wait(5) and fence.error is None
    add_and_ack(bookie, 3, 0, body(3, 0))
    add_and_ack(bookie, 4, 0, body(4, 0))
    bookie.delete_ledger(LedgerId(4))
    bookie.checkpoint()
    for entry in range(6, 9):  # after the checkpoint: in the journal only
        add_and_ack(bookie, 1, entry, body(1, entry))


def check_history(bookie: Bookie) -> None:
    """Nothing acknowledged lost, the fence and the key hold, the delete stays."""
    for entry in range(9):
        assert bookie.read_entry(LedgerId(1), EntryId(entry)) == body(1, entry), entry
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(2), EntryId(1), KEY, b"x")
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(3), EntryId(1), OTHER_KEY, b"x")
    with pytest.raises(Unauthorized):
        bookie.fence(LedgerId(3), OTHER_KEY)
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(4), EntryId(0))
    with pytest.raises(NoLedger):
        bookie.add_entry(LedgerId(4), EntryId(1), KEY, b"x")


def index_dirs(disk: SimDisk, ledgers: Sequence[str]) -> list[str]:
    return [d for d in ledgers if disk.is_dir(join(d, "current", INDEX_DIR_NAME))]


def stopped(disk: SimDisk, ledgers: Sequence[str] = (L0, L1)) -> SimDisk:
    """A bookie with the whole history, crashed (not shut down: the journal holds the tail)."""
    bookie = open_on(disk, ledgers)
    write_history(bookie)
    disk.crash(LoseUnsynced())
    return disk


# --- stamps and locks ----------------------------------------------------------------------------


def test_a_first_start_stamps_every_directory_sealed_with_one_instance() -> None:
    disk = SimDisk()
    open_on(disk, (L0, L1)).shutdown()
    stamps = [decode_stamp(disk.read_file(stamp_of(disk, d))) for d in (JOURNAL, L0, L1)]
    assert {s.instance for s in stamps} == {stamps[0].instance}
    assert [s.directory for s in stamps] == [JOURNAL, L0, L1]
    assert all(s.sealed and s.generation == 1 for s in stamps)
    assert all(s.index_dir == L0 and s.ledger_dirs == (L0, L1) for s in stamps)
    assert disk.durable_snapshot()[stamp_of(disk, L1)] == disk.read_file(stamp_of(disk, L1))


def test_a_second_bookie_on_the_same_directories_is_refused_while_the_first_serves() -> None:
    disk = SimDisk()
    first = open_on(disk, (L0, L1))
    with pytest.raises(DirectoryError, match="locked by another bkref process"):
        open_on(disk, (L0, L1))
    with pytest.raises(DirectoryError, match="locked"):  # one shared directory is enough
        open_bookie(disk, make_config(journal="/other/journal", ledgers=(L1,)))
    add_and_ack(first, 1, 0, b"still serving")
    first.shutdown()
    second = open_on(disk, (L0, L1))
    assert second.read_entry(LedgerId(1), EntryId(0)) == b"still serving"
    second.shutdown()


def test_a_crash_or_a_killed_process_drops_the_locks() -> None:
    disk = SimDisk()
    open_on(disk, (L0, L1))
    disk.crash(LoseUnsynced())
    open_on(disk, (L0, L1))
    disk.kill_process()
    open_on(disk, (L0, L1)).shutdown()


def test_a_refused_start_releases_its_locks_and_changes_nothing() -> None:
    disk = stopped(SimDisk())
    before = disk.current_snapshot()
    with pytest.raises(DirectoryError):
        open_on(disk, (L1, L0))
    assert disk.current_snapshot() == before
    check_history(open_on(disk, (L0, L1)))


def test_a_damaged_stamp_is_refused_naming_the_file() -> None:
    disk = SimDisk()
    open_on(disk, (L0, L1)).shutdown()
    path = stamp_of(disk, L1)
    handle = disk.open(path)
    handle.pwrite(40, b"#")
    handle.close()
    with pytest.raises(DirectoryError, match=f"{path}: the bkref identity stamp is damaged"):
        open_on(disk, (L0, L1))


# --- changed directory sets: refused, then accepted ---------------------------------------------


def test_reordered_ledger_directories_are_refused_then_accepted_with_the_index_kept() -> None:
    disk = stopped(SimDisk())
    with pytest.raises(DirectoryError) as refused:
        open_on(disk, (L1, L0))
    message = str(refused.value)
    assert "reordered" in message
    assert f"bkref dirs accept --set journalDirectories={JOURNAL} " in message
    assert f"--set ledgerDirectories={L1},{L0}" in message
    plan = accept(disk, (L1, L0))
    assert not plan.refusals, plan
    assert f"the ledger index stays in {L0}" in plan.changes
    bookie = open_on(disk, (L1, L0))
    check_history(bookie)
    assert index_dirs(disk, (L0, L1)) == [L0]
    bookie.shutdown()
    # Back again: refused, accepted, still whole.
    with pytest.raises(DirectoryError, match="reordered"):
        open_on(disk, (L0, L1))
    assert not accept(disk, (L0, L1)).refusals
    check_history(open_on(disk, (L0, L1)))


def test_a_directory_added_first_is_refused_then_accepted_and_the_index_stays() -> None:
    disk = stopped(SimDisk())
    with pytest.raises(DirectoryError, match=f"added {L2}"):
        open_on(disk, (L2, L0, L1))
    plan = accept(disk, (L2, L0, L1))
    assert not plan.refusals, plan
    assert any(line.startswith(f"ledger directory {L2}: added") for line in plan.changes)
    bookie = open_on(disk, (L2, L0, L1))
    check_history(bookie)
    for entry in range(9, 40):  # new logs may land in the new directory
        add_and_ack(bookie, 1, entry, body(1, entry, 300))
    bookie.checkpoint()
    assert index_dirs(disk, (L0, L1, L2)) == [L0]
    disk.crash(LoseUnsynced())
    check_history(open_on(disk, (L2, L0, L1)))


def swap(disk: SimDisk, a: str, b: str) -> None:
    """Swap two directories (what swapped mount points do)."""
    disk.rename(a, "/bk/swap")
    disk.rename(b, a)
    disk.rename("/bk/swap", b)
    disk.fsync_dir("/bk")


def test_swapped_directories_are_refused_and_the_index_follows_its_directory() -> None:
    disk = stopped(SimDisk())
    swap(disk, L0, L1)
    with pytest.raises(DirectoryError, match=f"{L0} holds the stamp of {L1}"):
        open_on(disk, (L0, L1))
    plan = accept(disk, (L0, L1))
    assert not plan.refusals, plan
    assert f"the ledger index is in {L1} (it moved with its directory)" in plan.changes
    bookie = open_on(disk, (L0, L1))
    check_history(bookie)
    bookie.shutdown()
    assert index_dirs(disk, (L0, L1)) == [L1]
    swap(disk, L0, L1)  # and back
    with pytest.raises(DirectoryError, match="swapped or moved"):
        open_on(disk, (L0, L1))
    assert not accept(disk, (L0, L1)).refusals
    check_history(open_on(disk, (L0, L1)))
    assert index_dirs(disk, (L0, L1)) == [L0]


def test_dropping_a_directory_with_data_is_refused_by_the_start_and_by_accept() -> None:
    disk = stopped(SimDisk())
    with pytest.raises(DirectoryError, match=f"dropped {L1}"):
        open_on(disk, (L0,))
    plan = accept(disk, (L0,))
    if classify_dir(disk, L1).data:
        assert any("dropping it would lose its data" in r for r in plan.refusals), plan
    with pytest.raises(DirectoryError, match=f"dropped {L0}"):
        open_on(disk, (L1,))
    plan = accept(disk, (L1,))
    assert any("holds (or held) the ledger index" in r for r in plan.refusals), plan
    check_history(open_on(disk, (L0, L1)))


def test_dropping_an_empty_directory_is_accepted_and_says_so() -> None:
    disk = stopped(SimDisk())
    assert not accept(disk, (L0, L1, L2)).refusals
    open_on(disk, (L0, L1, L2)).shutdown()  # L2 gets no log unless chosen: make sure
    if classify_dir(disk, L2).data:
        pytest.skip("the random choice put a log in the new directory")
    plan = accept(disk, (L0, L1))
    assert f"ledger directory {L2}: dropped (it holds no entry logs)" in plan.changes, plan
    check_history(open_on(disk, (L0, L1)))


def test_a_wiped_directory_is_refused_and_forgetting_it_states_the_loss() -> None:
    disk = stopped(SimDisk(), (L0, L1, L2))
    disk.rename(L2, "/gone")  # the disk of L2 died; an empty directory is mounted instead
    with pytest.raises(DirectoryError, match=f"ledger directory {L2} has no identity stamp"):
        open_on(disk, (L0, L1, L2))
    plan = accept(disk, (L0, L1, L2))
    assert any(f"{L2} of this bookie is not found" in r for r in plan.refusals), plan
    plan = accept(disk, (L0, L1, L2), forget=[L2])
    assert not plan.refusals, plan
    assert any("every entry in the entry logs it held is lost" in c for c in plan.changes)
    open_on(disk, (L0, L1, L2)).shutdown()


def test_a_foreign_directory_is_refused_and_not_taken_over_when_it_holds_data() -> None:
    disk = SimDisk()
    open_bookie(disk, make_config(ledgers=(L0,))).shutdown()
    other = make_config(journal="/y/journal", ledgers=("/y/ledgers",))
    open_bookie(disk, other, clock=ManualClock(wall_ms=1_800_000_000_000)).shutdown()
    with pytest.raises(DirectoryError, match="belong to bkref instance"):
        open_on(disk, (L0, "/y/ledgers"))
    plan = accept(disk, (L0, "/y/ledgers"))
    assert any("belongs to another bkref bookie" in r for r in plan.refusals), plan
    open_on(disk, (L0,)).shutdown()


def test_accept_with_nothing_changed_writes_nothing() -> None:
    disk = SimDisk()
    open_on(disk, (L0, L1)).shutdown()
    before = disk.current_snapshot()
    plan = accept(disk, (L0, L1))
    assert plan.nothing_to_do and disk.current_snapshot() == before


# --- BookKeeper's directories and bkref's from before stamps -------------------------------------


def bookkeeper_dirs(disk: SimDisk) -> None:
    """A BookKeeper bookie's ledger directory (one entry log, its VERSION cookie) and journal."""
    for directory in (JOURNAL, L0):
        disk.mkdir(join(directory, "current"))
    log = bk_layout.build_log([(7, e, body(7, e)) for e in range(3)])
    for path, data in (
        (join(L0, "current", "0.log"), log.data),
        (join(L0, "current", "VERSION"), b"4\nbookieHost: x\n"),
        (join(JOURNAL, "current", "VERSION"), b"4\nbookieHost: x\n"),
    ):
        handle = disk.open(path, create=True)
        handle.pwrite(0, data)
        handle.fsync()
        handle.close()


def test_a_bookkeeper_directory_is_refused_without_the_flag_and_left_untouched() -> None:
    disk = SimDisk()
    bookkeeper_dirs(disk)
    before = disk.current_snapshot()
    with pytest.raises(DirectoryError) as refused:
        open_on(disk, (L0,))
    message = str(refused.value)
    assert "a BookKeeper bookie's directory" in message and "VERSION" in message
    assert "`bkref import`" in message and "--write-bookkeeper-dirs" in message
    assert disk.current_snapshot() == before
    assert classify_dir(disk, L0).kind is DirKind.BOOKKEEPER


def test_with_the_flag_bkref_writes_into_a_bookkeeper_directory_and_says_so() -> None:
    disk = SimDisk()
    bookkeeper_dirs(disk)
    lines: list[str] = []
    bookie = open_on(disk, (L0,), write_bookkeeper_dirs=True, progress=lines.append)
    assert any("writing into a BookKeeper bookie's directories" in line for line in lines)
    assert bookie.read_entry(LedgerId(7), EntryId(2)) == body(7, 2)
    bookie.shutdown()
    assert classify_dir(disk, L0).kind is DirKind.BKREF
    open_on(disk, (L0,)).shutdown()  # stamped now: no flag needed


def unstamp(disk: SimDisk, directories: Sequence[str]) -> None:
    """What a bkref from before identity stamps left: the same files, no stamp."""
    for directory in directories:
        disk.unlink(stamp_of(disk, directory))


def test_bkref_directories_from_before_stamps_are_stamped_with_the_index_where_it_is() -> None:
    disk = stopped(SimDisk())
    unstamp(disk, (JOURNAL, L0, L1))
    assert classify_dir(disk, L0).kind is DirKind.BKREF_PRE_STAMP
    lines: list[str] = []
    bookie = open_on(disk, (L1, L0), progress=lines.append)  # reordered as well
    assert any(f"with the ledger index in {L0}" in line for line in lines), lines
    check_history(bookie)
    assert decode_stamp(disk.read_file(stamp_of(disk, L1))).index_dir == L0


def test_two_indexes_from_before_stamps_are_refused() -> None:
    disk = stopped(SimDisk())
    disk.mkdir(join(L1, "current", INDEX_DIR_NAME))
    unstamp(disk, (JOURNAL, L0, L1))
    with pytest.raises(DirectoryError, match="each hold a bkref ledger index"):
        open_on(disk, (L0, L1))


# --- crashes while stamping ----------------------------------------------------------------------


class _Die(Exception):
    pass


def _crashing_at(disk: SimDisk, k: int) -> None:
    count = itertools.count()

    def hook(_kind: str) -> None:
        if next(count) >= k:
            raise _Die

    disk.on_operation = hook


def crash_states(
    build: Callable[[], SimDisk], act: Callable[[SimDisk], object], plans: int = 6
) -> Iterator[SimDisk]:
    """Every disk a crash before each operation of ``act`` can leave (a few plans each, and a
    killed process that keeps the page cache)."""
    total_disk = build()
    start = total_disk.operation_count
    act(total_disk)
    total = total_disk.operation_count - start
    for k in range(total + 1):
        disk = build()
        _crashing_at(disk, k)
        with contextlib.suppress(_Die):
            act(disk)
        disk.on_operation = None
        for plan in itertools.islice(plans_at(disk.copy()), plans):
            crashed = disk.copy()
            crashed.crash(plan)
            yield crashed
        killed = disk.copy()
        killed.kill_process()
        yield killed


def test_a_crash_anywhere_in_a_first_start_leaves_a_state_the_next_start_accepts() -> None:
    states = 0
    for crashed in crash_states(SimDisk, lambda disk: open_on(disk, (L0, L1))):
        bookie = open_on(crashed, (L0, L1))
        add_and_ack(bookie, 1, 0, b"after")
        crashed.crash(LoseUnsynced())  # a killed process's unsynced stamps must not matter
        bookie = open_on(crashed, (L0, L1))
        assert bookie.read_entry(LedgerId(1), EntryId(0)) == b"after"
        stamps = [decode_stamp(crashed.read_file(stamp_of(crashed, d))) for d in (JOURNAL, L0, L1)]
        assert all(s.sealed for s in stamps) and len({s.instance for s in stamps}) == 1
        states += 1
    assert states > 100


def test_a_crash_anywhere_in_an_accept_leaves_a_state_the_next_start_finishes() -> None:
    base = stopped(SimDisk())

    def build() -> SimDisk:
        return base.copy()

    states = 0
    for crashed in crash_states(build, lambda disk: accept(disk, (L1, L0)), plans=3):
        crashed.crash(KeepAll())
        try:
            bookie = open_on(crashed, (L1, L0))
        except DirectoryError:
            # Only before the first new stamp is durable: the old set is still whole.
            for directory in (JOURNAL, L0, L1):
                assert decode_stamp(crashed.read_file(stamp_of(crashed, directory))).generation == 1
            bookie = open_on(crashed, (L0, L1))
            check_history(bookie)
            bookie.shutdown()
            assert not accept(crashed, (L1, L0)).refusals
            bookie = open_on(crashed, (L1, L0))
        check_history(bookie)
        states += 1
    assert states > 20


# --- the rows of spec/format/identity.md's table, one by one -----------------------------------


def write_stamp_file(
    disk: SimDisk, directory: str, data: bytes, name: str = IDENTITY_FILE_NAME
) -> None:
    path = join(directory, "current", name)
    if disk.exists(path):
        disk.unlink(path)
    handle = disk.open(path, create=True)
    handle.pwrite(0, data)
    handle.fsync()
    handle.close()
    disk.fsync_dir(join(directory, "current"))


def stamps(disk: SimDisk, directories: Sequence[str] = (JOURNAL, L0, L1)) -> list[Stamp]:
    return [decode_stamp(disk.read_file(stamp_of(disk, d))) for d in directories]


def test_row_c2_a_leftover_tmp_stamp_is_ignored_and_removed_by_the_next_stamp_write() -> None:
    disk = SimDisk()
    for directory in (JOURNAL, L0, L1):
        disk.mkdir(join(directory, "current"))
    write_stamp_file(disk, L1, b"bkref directory ident", name=IDENTITY_FILE_NAME + ".tmp")
    assert classify_dir(disk, L1).kind is DirKind.EMPTY
    open_on(disk, (L0, L1)).shutdown()
    assert not disk.exists(join(L1, "current", IDENTITY_FILE_NAME + ".tmp"))
    open_on(disk, (L0, L1)).shutdown()
    write_stamp_file(disk, L0, b"junk", name=IDENTITY_FILE_NAME + ".tmp")
    open_on(disk, (L0, L1)).shutdown()  # beside a sealed stamp: ignored


def test_rows_c3_and_c4_pending_stamps_are_finished_in_both_phases() -> None:
    disk = SimDisk()
    open_on(disk, (L0, L1)).shutdown()
    sealed = stamps(disk)
    # C4: all of generation 1, some pending.
    write_stamp_file(disk, L0, encode_stamp(attrs.evolve(sealed[1], sealed=False)))
    lines: list[str] = []
    open_on(disk, (L0, L1), progress=lines.append).shutdown()
    assert any("finishing the identity stamps" in line for line in lines)
    assert all(s.sealed for s in stamps(disk))
    # C3: pending in some directories, none in the others.
    for index, directory in enumerate((JOURNAL, L0)):
        write_stamp_file(disk, directory, encode_stamp(attrs.evolve(sealed[index], sealed=False)))
    disk.unlink(stamp_of(disk, L1))
    open_on(disk, (L0, L1)).shutdown()
    assert all(s.sealed and s.generation == 1 for s in stamps(disk))


def test_row_c5_an_interrupted_accept_is_refused_with_the_old_configuration() -> None:
    disk = stopped(SimDisk())
    old = stamps(disk)
    new = attrs.evolve(old[2], generation=2, sealed=False, ledger_dirs=(L1, L0))
    write_stamp_file(disk, L1, encode_stamp(new))
    with pytest.raises(DirectoryError, match=f"the stamps say {L1},{L0}") as refused:
        open_on(disk, (L0, L1))
    assert f"--set ledgerDirectories={L0},{L1}" in str(refused.value)
    check_history(open_on(disk, (L1, L0)))  # the accepted set: finished
    assert all(s.generation == 2 and s.sealed for s in stamps(disk))


def test_row_d3_an_older_stamp_beside_a_sealed_generation_is_refused() -> None:
    disk = stopped(SimDisk())
    before = disk.read_file(stamp_of(disk, L1))
    bookie = open_on(disk, (L0, L1))
    bookie.shutdown()
    assert not accept(disk, (L1, L0)).refusals
    write_stamp_file(disk, L1, before)  # an old copy of one directory's stamp comes back
    with pytest.raises(DirectoryError, match="holds an older stamp of this bookie"):
        open_on(disk, (L1, L0))


def test_row_d4_stamps_of_one_generation_with_different_sets_are_refused() -> None:
    disk = SimDisk()
    open_on(disk, (L0, L1)).shutdown()
    stamp = stamps(disk)[2]
    write_stamp_file(disk, L1, encode_stamp(attrs.evolve(stamp, ledger_dirs=(L1, L0))))
    with pytest.raises(DirectoryError, match="record different directory sets"):
        open_on(disk, (L0, L1))


# --- the same on real files (the OS backend, in this process) ------------------------------------


def test_on_real_files_every_change_is_refused_and_accepted_without_loss(tmp_path: Path) -> None:
    fs = OsFileSystem()
    journal, l0, l1, l2 = (str(tmp_path / n) for n in ("journal", "l0", "l1", "l2"))

    def opened(*ledgers: str, **kwargs: Any) -> Bookie:
        return open_bookie(fs, make_config(journal=journal, ledgers=ledgers), **kwargs)

    def accepted(*ledgers: str) -> AcceptPlan:
        for directory in (journal, *ledgers):
            fs.mkdir(join(directory, "current"))
        locks = lock_directories(fs, [journal, *ledgers])
        try:
            plan = plan_accept(fs, [journal], list(ledgers))
            assert not plan.refusals, plan
            apply_accept(fs, plan)
            return plan
        finally:
            release_locks(locks)

    bookie = opened(l0, l1)
    write_history(bookie)
    with pytest.raises(DirectoryError, match="locked by another bkref process"):
        opened(l0, l1)
    bookie.shutdown()
    for ledgers, change in (
        ((l1, l0), "reordered"),
        ((l2, l1, l0), f"added {l2}"),
        ((l0, l1), f"dropped {l2}"),
    ):
        with pytest.raises(DirectoryError, match=change):
            opened(*ledgers)
        accepted(*ledgers)
        bookie = opened(*ledgers)
        check_history(bookie)
        bookie.shutdown()
    (tmp_path / "l0").rename(tmp_path / "swap")
    (tmp_path / "l1").rename(tmp_path / "l0")
    (tmp_path / "swap").rename(tmp_path / "l1")
    with pytest.raises(DirectoryError, match=f"{l0} holds the stamp of {l1}"):
        opened(l0, l1)
    assert f"the ledger index is in {l1} (it moved with its directory)" in accepted(l0, l1).changes
    bookie = opened(l0, l1)
    check_history(bookie)
    bookie.shutdown()
    other = make_config(journal=str(tmp_path / "j2"), ledgers=(str(tmp_path / "m"),))
    open_bookie(fs, other, clock=ManualClock(wall_ms=1)).shutdown()
    with pytest.raises(DirectoryError, match="belong to bkref instance"):
        opened(l0, l1, str(tmp_path / "m"))
    assert sorted(p.name for p in (tmp_path / "l0" / "current").iterdir() if "lock" in p.name) == []


def test_on_real_files_a_bookkeeper_directory_needs_the_flag(tmp_path: Path) -> None:
    fs = OsFileSystem()
    for name in ("journal", "l0"):
        (tmp_path / name / "current").mkdir(parents=True)
        (tmp_path / name / "current" / "VERSION").write_text("4\n")
    config = make_config(journal=str(tmp_path / "journal"), ledgers=(str(tmp_path / "l0"),))
    with pytest.raises(DirectoryError, match="a BookKeeper bookie's directory"):
        open_bookie(fs, config)
    assert [p.name for p in (tmp_path / "l0" / "current").iterdir()] == ["VERSION"]
    lines: list[str] = []
    open_bookie(fs, config, write_bookkeeper_dirs=True, progress=lines.append).shutdown()
    assert any("writing into a BookKeeper bookie's directories" in line for line in lines)
