"""The simulated disk (models/fs/simdisk.py): which bytes survive each crash plan, and why.

Each concrete test builds a state, crashes a copy under a plan and compares the surviving
bytes with bytes written out by hand. The property at the end drives random operation
sequences and random plans and checks that what was made durable (file fsynced, directory
fsynced) always survives, and that the two extreme plans give the durable and the current
snapshots.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.fs.simdisk import DEFAULT_TOTAL_BYTES, PendingOp, SimDisk, SimHandle
from spec.crash import SECTOR_BYTES, CrashPlan, KeepPrefix, KeepSubset, LoseUnsynced, TornWrite
from spec.errors import (
    FsClosed,
    FsError,
    FsExists,
    FsIOError,
    FsLocked,
    FsNoSpace,
    FsNotADirectory,
    FsNotFound,
)


def disk_with_dirs(*dirs: str) -> SimDisk:
    """A disk whose directories are durable (made and their parents fsynced)."""
    disk = SimDisk()
    for path in dirs:
        disk.mkdir(path)
    disk.fsync_dir("/")
    for path in dirs:
        disk.fsync_dir(path)
    disk.check_invariants()
    assert disk.pending_operations() == ()
    return disk


def durable_file(disk: SimDisk, path: str, content: bytes) -> SimHandle:
    """Create ``path`` with ``content``, fsync it and its directory."""
    handle = disk.open(path, create=True, exclusive=True)
    if content:
        handle.append(content)
    handle.fsync()
    disk.fsync_dir(path.rpartition("/")[0] or "/")
    assert disk.durable_snapshot()[path] == content
    return handle


def crashed(disk: SimDisk, plan: CrashPlan) -> SimDisk:
    """A crashed copy of ``disk`` (the original keeps its pending list)."""
    copied = copy.deepcopy(disk)
    copied.crash(plan)
    copied.check_invariants()
    assert copied.pending_operations() == ()
    assert copied.durable_snapshot() == copied.current_snapshot()
    return copied


# --- one example per plan ------------------------------------------------------------------


def test_lose_unsynced_keeps_exactly_the_fsynced_bytes() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    handle.append(b"def")
    handle.pwrite(0, b"X")
    assert disk.read_file("/d/f") == b"Xbcdef"
    after = crashed(disk, LoseUnsynced())
    assert after.current_snapshot() == {"/d/f": b"abc"}


def test_keep_prefix_over_interleaved_writes_to_two_files() -> None:
    disk = disk_with_dirs("/d")
    a = durable_file(disk, "/d/a", b"")
    b = durable_file(disk, "/d/b", b"")
    a.append(b"a1")
    b.append(b"b1")
    a.append(b"a2")
    b.append(b"b2")
    assert [op.path for op in disk.pending_operations()] == ["/d/a", "/d/b", "/d/a", "/d/b"]
    expected = [
        (b"", b""),
        (b"a1", b""),
        (b"a1", b"b1"),
        (b"a1a2", b"b1"),
        (b"a1a2", b"b1b2"),
    ]
    for count, (want_a, want_b) in enumerate(expected):
        after = crashed(disk, KeepPrefix(count))
        assert after.current_snapshot() == {"/d/a": want_a, "/d/b": want_b}, count


TORN_DATA = bytes(range(1, 251)) * 6  # 1500 bytes, no zero byte
BASE = b"." * 2048


@pytest.mark.parametrize(
    ("sectors", "kept_bytes"),
    [(0, 0), (1, 412), (2, 924), (3, 1436), (4, 1500), (9, 1500)],
)
def test_torn_write_keeps_whole_sectors_aligned_to_file_offsets(
    sectors: int, kept_bytes: int
) -> None:
    # A 1500-byte write at offset 100 spans file sectors [0,512), [512,1024), [1024,1536)
    # and [1536,2048): the first sector boundary after offset 100 is 512, so one sector keeps
    # 412 bytes of the write, two keep 924, three 1436, four the whole write.
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", BASE)
    handle.pwrite(100, TORN_DATA)
    after = crashed(disk, TornWrite(keep=0, sectors=sectors))
    expected = BASE[:100] + TORN_DATA[:kept_bytes] + BASE[100 + kept_bytes :]
    assert after.read_file("/d/f") == expected
    assert kept_bytes in (0, len(TORN_DATA)) or (100 + kept_bytes) % SECTOR_BYTES == 0


def test_torn_write_extends_the_file_only_by_the_sectors_kept() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"")
    handle.pwrite(100, TORN_DATA)
    assert crashed(disk, TornWrite(0, 0)).read_file("/d/f") == b""
    assert crashed(disk, TornWrite(0, 1)).read_file("/d/f") == bytes(100) + TORN_DATA[:412]


def test_torn_write_keeps_the_prefix_before_it_and_drops_what_follows() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"")
    handle.append(b"first")
    handle.append(TORN_DATA)
    handle.append(b"last")
    after = crashed(disk, TornWrite(keep=1, sectors=1))
    assert after.read_file("/d/f") == b"first" + TORN_DATA[: SECTOR_BYTES - 5]


def test_torn_write_on_a_non_write_is_keep_prefix() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    handle.append(b"def")
    handle.truncate(1)
    handle.append(b"zz")
    for sectors in (0, 1, 5):
        torn = crashed(disk, TornWrite(keep=1, sectors=sectors)).current_snapshot()
        assert torn == crashed(disk, KeepPrefix(1)).current_snapshot() == {"/d/f": b"abcdef"}


def test_keep_subset_keeps_a_later_write_without_an_earlier_one() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"aaaaaa")
    handle.pwrite(0, b"XX")
    handle.pwrite(3, b"YY")
    assert crashed(disk, KeepSubset({1})).read_file("/d/f") == b"aaaYYa"
    assert crashed(disk, KeepSubset({0})).read_file("/d/f") == b"XXaaaa"
    assert crashed(disk, KeepSubset({0, 1, 7})).read_file("/d/f") == b"XXaYYa"


def test_keep_subset_applies_survivors_in_issue_order() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"")
    handle.pwrite(0, b"11111")
    handle.pwrite(1, b"22")
    handle.truncate(2)
    assert crashed(disk, KeepSubset({0, 1, 2})).read_file("/d/f") == b"12"
    assert crashed(disk, KeepSubset({0, 2})).read_file("/d/f") == b"11"
    assert crashed(disk, KeepSubset({1})).read_file("/d/f") == b"\x0022"


# --- directory entries -----------------------------------------------------------------------


def test_create_without_fsync_dir_is_lost_even_if_the_file_is_fsynced() -> None:
    disk = disk_with_dirs("/d")
    handle = disk.open("/d/f", create=True)
    handle.append(b"data")
    handle.fsync()
    assert crashed(disk, LoseUnsynced()).exists("/d/f") is False
    assert disk.durable_snapshot() == {}


def test_create_with_fsync_dir_survives_with_only_its_durable_content() -> None:
    disk = disk_with_dirs("/d")
    handle = disk.open("/d/f", create=True)
    handle.append(b"data")
    disk.fsync_dir("/d")
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {"/d/f": b""}
    handle.fsync()
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {"/d/f": b"data"}


def test_mkdir_needs_the_parent_fsynced() -> None:
    disk = disk_with_dirs()
    disk.mkdir("/a/b")
    disk.fsync_dir("/a")
    assert crashed(disk, LoseUnsynced()).exists("/a") is False
    disk.fsync_dir("/")
    after = crashed(disk, LoseUnsynced())
    assert after.is_dir("/a/b")


def test_rename_is_durable_only_after_the_directory_fsync() -> None:
    disk = disk_with_dirs("/d")
    durable_file(disk, "/d/tmp", b"new")
    durable_file(disk, "/d/final", b"old")
    disk.rename("/d/tmp", "/d/final")
    assert disk.current_snapshot() == {"/d/final": b"new"}
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {
        "/d/final": b"old",
        "/d/tmp": b"new",
    }
    disk.fsync_dir("/d")
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {"/d/final": b"new"}


def test_rename_between_directories_needs_both_fsynced() -> None:
    disk = disk_with_dirs("/a", "/b")
    durable_file(disk, "/a/f", b"x")
    disk.rename("/a/f", "/b/g")
    disk.fsync_dir("/b")
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {"/a/f": b"x"}
    disk.fsync_dir("/a")
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {"/b/g": b"x"}


def test_a_later_entry_waits_for_a_half_synced_rename_in_its_directory() -> None:
    # Each directory's entries become durable as a prefix of its history: the create of
    # /b/h was issued after the rename into /b, which still waits for /a.
    disk = disk_with_dirs("/a", "/b")
    durable_file(disk, "/a/f", b"x")
    disk.rename("/a/f", "/b/g")
    disk.open("/b/h", create=True).close()
    disk.fsync_dir("/b")
    assert [op.kind for op in disk.pending_operations()] == ["rename", "create"]
    disk.fsync_dir("/a")
    assert disk.pending_operations() == ()
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {"/b/g": b"x", "/b/h": b""}


def test_a_directory_rename_whose_source_is_gone_is_skipped_on_replay() -> None:
    # Keeping the second of two renames of one directory must not give it a second name.
    disk = disk_with_dirs("/A")
    durable_file(disk, "/A/f", b"x")
    disk.rename("/A", "/X")
    disk.rename("/X", "/Y")
    assert disk.current_snapshot() == {"/Y/f": b"x"}
    assert crashed(disk, KeepSubset({1})).current_snapshot() == {"/A/f": b"x"}
    assert crashed(disk, KeepSubset({0})).current_snapshot() == {"/X/f": b"x"}
    assert crashed(disk, KeepPrefix(2)).current_snapshot() == {"/Y/f": b"x"}


def test_unlink_is_undone_by_a_crash_without_dir_fsync() -> None:
    disk = disk_with_dirs("/d")
    durable_file(disk, "/d/f", b"keep")
    disk.unlink("/d/f")
    assert not disk.exists("/d/f")
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {"/d/f": b"keep"}
    disk.fsync_dir("/d")
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {}


def test_link_shares_the_inode_and_needs_dir_fsync() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"ab")
    disk.link("/d/f", "/d/g")
    handle.append(b"cd")
    assert disk.read_file("/d/g") == b"abcd"
    handle.fsync()
    assert crashed(disk, LoseUnsynced()).current_snapshot() == {"/d/f": b"abcd"}
    disk.fsync_dir("/d")
    after = crashed(disk, LoseUnsynced())
    assert after.current_snapshot() == {"/d/f": b"abcd", "/d/g": b"abcd"}
    after.open("/d/g").append(b"!")
    assert after.read_file("/d/f") == b"abcd!"


def test_a_surviving_write_to_a_lost_name_is_unreachable() -> None:
    disk = disk_with_dirs("/d")
    handle = disk.open("/d/f", create=True)
    handle.append(b"orphan")
    assert [op.kind for op in disk.pending_operations()] == ["create", "write"]
    assert crashed(disk, KeepSubset({1})).current_snapshot() == {}
    assert crashed(disk, KeepSubset({0})).current_snapshot() == {"/d/f": b""}


def test_handles_follow_renames_and_outlive_unlink() -> None:
    disk = disk_with_dirs("/d")
    handle = disk.open("/d/f", create=True)
    handle.append(b"abc")
    disk.rename("/d/f", "/d/g")
    handle.append(b"def")
    assert disk.read_file("/d/g") == b"abcdef"
    disk.unlink("/d/g")
    assert handle.pread(0, 100) == b"abcdef"
    handle.pwrite(6, b"!")
    assert handle.size() == 7
    disk.fsync_dir("/d")
    disk.check_invariants()
    handle.close()
    disk.check_invariants()
    assert disk.pending_operations() == ()  # the dead file's writes were forgotten


# --- after a crash ---------------------------------------------------------------------------


def test_handles_are_invalid_after_a_crash_and_the_disk_is_usable() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    disk.crash(LoseUnsynced())
    calls: list[Callable[[], object]] = [
        lambda: handle.pread(0, 1),
        lambda: handle.pwrite(0, b"x"),
        lambda: handle.append(b"x"),
        handle.size,
        lambda: handle.truncate(0),
        handle.fsync,
        handle.fdatasync,
    ]
    for call in calls:
        with pytest.raises(FsClosed):
            call()
    handle.close()  # closing a dead handle is harmless
    fresh = disk.open("/d/f")
    assert fresh.pread(0, 10) == b"abc"
    fresh.append(b"d")
    fresh.fsync()
    disk.check_invariants()
    assert disk.durable_snapshot() == {"/d/f": b"abcd"}


def test_closed_handle_raises_fs_closed() -> None:
    disk = disk_with_dirs("/d")
    handle = disk.open("/d/f", create=True)
    handle.close()
    with pytest.raises(FsClosed):
        handle.append(b"x")
    disk.check_invariants()


# --- capacity, injected failures --------------------------------------------------------------


def test_capacity_refuses_a_write_that_does_not_fit_and_changes_nothing() -> None:
    disk = disk_with_dirs("/full", "/other")
    handle = durable_file(disk, "/full/f", b"x" * 600)
    disk.set_capacity("/full", 1000)
    handle.append(b"y" * 300)
    pending = disk.pending_operations()
    with pytest.raises(FsNoSpace):
        handle.append(b"z" * 101)
    with pytest.raises(FsNoSpace):
        handle.pwrite(2000, b"z")
    with pytest.raises(FsNoSpace):
        handle.truncate(1001)
    assert disk.pending_operations() == pending
    assert disk.read_file("/full/f") == b"x" * 600 + b"y" * 300
    handle.pwrite(0, b"w" * 900)  # an overwrite in place needs no space
    handle.append(b"z" * 100)  # exactly full
    assert disk.disk_space("/full") == disk.disk_space("/full/f")
    assert disk.disk_space("/full").free_bytes == 0
    assert disk.disk_space("/full").total_bytes == 1000
    other = disk.open("/other/g", create=True)
    other.append(b"q" * 5000)  # another directory is not limited
    disk.check_invariants()
    assert crashed(disk, LoseUnsynced()).read_file("/full/f") == b"x" * 600


def test_capacity_counts_hard_links_once_and_refuses_moving_data_in() -> None:
    disk = disk_with_dirs("/full", "/other")
    durable_file(disk, "/full/f", b"x" * 400)
    disk.link("/full/f", "/full/g")
    disk.set_capacity("/full", 500)
    assert disk.disk_space("/full").free_bytes == 100
    durable_file(disk, "/other/big", b"b" * 200)
    with pytest.raises(FsNoSpace):
        disk.rename("/other/big", "/full/big")
    with pytest.raises(FsNoSpace):
        disk.link("/other/big", "/full/big")
    assert disk.exists("/other/big") and not disk.exists("/full/big")
    disk.rename("/full/g", "/other/g")  # moving data out is always allowed
    disk.check_invariants()


def test_default_disk_space_is_one_tebibyte_minus_use() -> None:
    disk = disk_with_dirs("/d")
    durable_file(disk, "/d/f", b"x" * 10)
    space = disk.disk_space("/d")
    assert space.total_bytes == DEFAULT_TOTAL_BYTES == 2**40
    assert space.free_bytes == DEFAULT_TOTAL_BYTES - 10
    with pytest.raises(FsNotFound):
        disk.disk_space("/missing")


def test_failed_write_raises_and_changes_nothing() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    other = durable_file(disk, "/d/other", b"")
    disk.fail_next("write", "/d/f")
    other.append(b"fine")  # another path is not affected
    pending = disk.pending_operations()
    with pytest.raises(FsIOError):
        handle.append(b"def")
    assert disk.read_file("/d/f") == b"abc"
    assert disk.pending_operations() == pending
    assert handle.append(b"ghi") == 3  # the rule was used up
    assert disk.read_file("/d/f") == b"abcghi"
    disk.check_invariants()


def test_failed_fsync_loses_the_unsynced_data_but_keeps_the_durable_data() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    handle.append(b"def")
    handle.pwrite(0, b"X")
    disk.fail_next("fsync")
    with pytest.raises(FsIOError):
        handle.fsync()
    disk.check_invariants()
    assert handle.pread(0, 100) == b"abc"
    assert disk.pending_operations() == ()
    assert crashed(disk, KeepPrefix(10)).read_file("/d/f") == b"abc"
    handle.append(b"!")
    handle.fdatasync()
    assert crashed(disk, LoseUnsynced()).read_file("/d/f") == b"abc!"


def test_failed_fsync_dir_leaves_its_entries_pending() -> None:
    disk = disk_with_dirs("/d")
    disk.open("/d/f", create=True).close()
    pending = disk.pending_operations()
    disk.fail_next("fsync_dir", "/d", count=2)
    for _ in range(2):
        with pytest.raises(FsIOError):
            disk.fsync_dir("/d")
    assert disk.pending_operations() == pending
    assert crashed(disk, KeepPrefix(1)).exists("/d/f")
    assert not crashed(disk, LoseUnsynced()).exists("/d/f")
    disk.fsync_dir("/d")
    assert disk.pending_operations() == ()


def test_the_disk_records_each_fault_when_it_fires_not_when_it_is_armed() -> None:
    disk = disk_with_dirs("/d")
    journal = durable_file(disk, "/d/1.txn", b"")
    log = durable_file(disk, "/d/0.log", b"")
    disk.fail_next("fsync", match=lambda path: path.endswith(".log"))
    disk.fail_next("read", "/d/1.txn")
    assert disk.take_fired() == []  # armed only
    journal.append(b"j")
    journal.fsync()  # not a log: the rule waits
    assert disk.take_fired() == []
    log.append(b"l")
    with pytest.raises(FsIOError):
        log.fsync()
    with pytest.raises(FsIOError):
        journal.pread(0, 1)
    assert disk.take_fired() == [("fsync", "/d/0.log"), ("read", "/d/1.txn")]
    assert disk.take_fired() == []  # taken
    disk.set_capacity("/d", 2)
    with pytest.raises(FsNoSpace):
        log.append(b"too much")
    assert disk.take_fired() == [("no_space", "/d/0.log")]


def test_faults_paused_fire_for_nobody_and_stay_armed() -> None:
    disk = disk_with_dirs("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    disk.fail_next("read")
    with disk.faults_paused():
        assert handle.pread(0, 3) == b"abc"  # an observer's read
    assert disk.take_fired() == []
    with pytest.raises(FsIOError):
        handle.pread(0, 3)
    assert disk.take_fired() == [("read", "/d/f")]


def test_fail_next_rejects_unknown_operations() -> None:
    disk = SimDisk()
    with pytest.raises(ValueError, match="op must be one of"):
        disk.fail_next("rename")
    with pytest.raises(ValueError, match="count"):
        disk.fail_next("write", count=0)


# --- instrumentation -------------------------------------------------------------------------


def test_on_operation_sees_every_mutation_and_can_stop_it() -> None:
    disk = disk_with_dirs("/d")
    seen: list[str] = []
    disk.on_operation = seen.append
    start = disk.operation_count
    handle = disk.open("/d/f", create=True)
    handle.append(b"a")
    handle.pwrite(0, b"b")
    handle.truncate(1)
    handle.pread(0, 1)  # reads are not operations
    handle.fsync()
    handle.fdatasync()
    disk.link("/d/f", "/d/g")
    disk.rename("/d/g", "/d/h")
    disk.unlink("/d/h")
    disk.mkdir("/d/e")
    disk.fsync_dir("/d")
    disk.listdir("/d")
    expected = ["create", "append", "pwrite", "truncate", "fsync", "fdatasync"]
    expected += ["link", "rename", "unlink", "mkdir", "fsync_dir"]
    assert seen == expected
    assert disk.operation_count == start + len(expected)

    def die(kind: str) -> None:
        raise RuntimeError(f"died before {kind}")

    disk.on_operation = die
    with pytest.raises(RuntimeError, match="before append"):
        handle.append(b"never")
    assert disk.read_file("/d/f") == b"b"
    assert disk.operation_count == start + len(expected) + 1


def test_pending_operations_describe_each_operation() -> None:
    disk = disk_with_dirs("/a", "/b")
    handle = disk.open("a/f", create=True)
    handle.pwrite(10, b"xyz")
    handle.truncate(5)
    disk.rename("/a/f", "/b/g")
    assert disk.pending_operations() == (
        PendingOp("create", "/a/f", handle.ino, directories=("/a",)),
        PendingOp("write", "/a/f", handle.ino, offset=10, length=3),
        PendingOp("truncate", "/a/f", handle.ino, length=5),
        PendingOp("rename", "/a/f", handle.ino, new_path="/b/g", directories=("/a", "/b")),
    )


def test_paths_are_normalised() -> None:
    disk = disk_with_dirs("/d")
    disk.open("d//f/", create=True).append(b"1")
    assert disk.read_file("/d/./f") == b"1"
    assert disk.listdir("d") == ["f"]
    assert disk.exists("/x/../d/f")
    assert disk.is_dir("") and disk.is_dir("/")


def test_errors_are_typed() -> None:
    disk = disk_with_dirs("/d")
    durable_file(disk, "/d/f", b"")
    with pytest.raises(FsNotFound):
        disk.open("/d/missing")
    with pytest.raises(FsExists):
        disk.open("/d/f", create=True, exclusive=True)
    with pytest.raises(FsNotFound):
        disk.unlink("/d/missing")
    with pytest.raises(FsNotADirectory):
        disk.listdir("/d/f")
    with pytest.raises(FsNotADirectory):
        disk.open("/d/f/x", create=True)
    with pytest.raises(FsNotADirectory):
        disk.mkdir("/d/f")
    with pytest.raises(FsIOError):
        disk.open("/d")
    with pytest.raises(FsIOError):
        disk.unlink("/d")
    with pytest.raises(FsIOError):
        disk.rename("/d", "/d/sub")
    with pytest.raises(FsNotADirectory):
        disk.fsync_dir("/d/f")
    with pytest.raises(FsNotADirectory):
        disk.set_capacity("/d/f", 1)
    disk.check_invariants()


# --- the property -------------------------------------------------------------------------

WORK_DIRS = ("/w1", "/w2")
NAMES = ("a", "b", "c")
SLOTS = 3

work_path = st.builds(lambda d, n: f"{d}/{n}", st.sampled_from(WORK_DIRS), st.sampled_from(NAMES))
small_bytes = st.binary(min_size=0, max_size=1100)
step = st.one_of(
    st.tuples(st.just("open"), st.integers(0, SLOTS - 1), work_path),
    st.tuples(st.just("pwrite"), st.integers(0, SLOTS - 1), st.integers(0, 1500), small_bytes),
    st.tuples(st.just("append"), st.integers(0, SLOTS - 1), small_bytes),
    st.tuples(st.just("truncate"), st.integers(0, SLOTS - 1), st.integers(0, 1200)),
    st.tuples(st.just("fsync"), st.integers(0, SLOTS - 1)),
    st.tuples(st.just("close"), st.integers(0, SLOTS - 1)),
    st.tuples(st.just("fsync_dir"), st.sampled_from(("/", *WORK_DIRS))),
    st.tuples(st.just("rename"), work_path, work_path),
    st.tuples(st.just("link"), work_path, work_path),
    st.tuples(st.just("unlink"), work_path),
    st.tuples(st.just("protect"), st.sampled_from(("/p", *WORK_DIRS)), small_bytes),
)


def run_steps(disk: SimDisk, steps: list[tuple[object, ...]]) -> dict[str, bytes]:
    """Run ``steps``, checking invariants after each; return the protected files.

    Every work name starts out durable with some bytes, and every slot holds a handle, so
    most steps do something."""
    for number, path in enumerate(f"{d}/{n}" for d in WORK_DIRS for n in NAMES):
        durable_file(disk, path, bytes([65 + number]) * (300 * number)).close()
    handles = {slot: disk.open(f"{WORK_DIRS[slot % 2]}/{NAMES[slot]}") for slot in range(SLOTS)}
    protected: dict[str, bytes] = {}
    for number, (kind, *args) in enumerate(steps):
        try:
            if kind == "protect":
                directory, data = args
                assert isinstance(directory, str) and isinstance(data, bytes)
                path = f"{directory}/k{number}"
                handle = disk.open(path, create=True, exclusive=True)
                handle.append(data)
                handle.fsync()
                handle.close()
                # A pending rename between the work directories holds back later entries
                # of both (the strict rule), so a protected file there syncs both.
                for synced in (directory,) if directory == "/p" else WORK_DIRS:
                    disk.fsync_dir(synced)
                protected[path] = data
            else:
                _run_step(disk, handles, str(kind), args)
        except FsError:
            pass
        disk.check_invariants()
    return protected


def _run_step(disk: SimDisk, handles: dict[int, SimHandle], kind: str, args: list[object]) -> None:
    if kind == "open":
        slot, path = args
        assert isinstance(slot, int) and isinstance(path, str)
        handles[slot] = disk.open(path, create=True)
    elif kind in ("fsync_dir", "unlink"):
        assert isinstance(args[0], str)
        getattr(disk, kind)(args[0])
    elif kind in ("rename", "link"):
        getattr(disk, kind)(args[0], args[1])
    elif args[0] in handles:
        handle = handles[int(str(args[0]))]
        getattr(handle, kind)(*args[1:])


def plan_strategy(count: int) -> st.SearchStrategy[CrashPlan]:
    return st.one_of(
        st.just(LoseUnsynced()),
        st.builds(KeepPrefix, st.integers(0, count + 1)),
        st.builds(TornWrite, st.integers(0, count + 1), st.integers(0, 4)),
        st.builds(KeepSubset, st.frozensets(st.integers(0, count + 1), max_size=count + 2)),
    )


def setup_property_disk() -> SimDisk:
    return disk_with_dirs("/p", *WORK_DIRS)


@settings(max_examples=120, deadline=None)
@given(steps=st.lists(step, max_size=30), data=st.data())
def test_fsynced_data_survives_every_plan(
    steps: list[tuple[object, ...]], data: st.DataObject
) -> None:
    disk = setup_property_disk()
    protected = run_steps(disk, steps)
    count = len(disk.pending_operations())
    plan = data.draw(plan_strategy(count), label="plan")
    after = crashed(disk, plan)
    for path, content in protected.items():
        assert after.read_file(path) == content, (path, plan)
    assert crashed(disk, LoseUnsynced()).current_snapshot() == disk.durable_snapshot()
    assert crashed(disk, KeepPrefix(count)).current_snapshot() == disk.current_snapshot()
    # The crashed disk keeps working: a full round trip on it is durable.
    handle = after.open("/p/after", create=True)
    handle.append(b"ok")
    handle.fsync()
    after.fsync_dir("/p")
    after.check_invariants()
    assert crashed(after, LoseUnsynced()).read_file("/p/after") == b"ok"


def test_a_read_only_handle_reads_and_refuses_writes() -> None:
    disk = SimDisk()
    writer = disk.open("/f", create=True)
    writer.pwrite(0, b"abc")
    handle = disk.open("/f", read_only=True)
    assert handle.pread(0, 10) == b"abc"
    with pytest.raises(FsIOError, match="read-only"):
        handle.pwrite(0, b"x")
    with pytest.raises(FsIOError, match="read-only"):
        handle.append(b"x")
    with pytest.raises(FsIOError, match="read-only"):
        handle.truncate(0)
    assert disk.read_file("/f") == b"abc"
    assert len(disk.pending_operations()) == 2  # the create and the write, nothing more
    disk.check_invariants()


# --- directory locks ------------------------------------------------------------------------------


def test_a_directory_lock_excludes_a_second_holder_and_a_crash_or_kill_drops_it() -> None:
    disk = SimDisk()
    disk.mkdir("/d/current")
    disk.fsync_dir("/")
    disk.fsync_dir("/d")
    held = disk.lock_dir("/d/current")
    with pytest.raises(FsLocked):
        disk.lock_dir("/d/current")
    disk.lock_dir("/d").release()  # another directory: its own lock
    held.release()
    held = disk.lock_dir("/d/current")
    count = disk.operation_count
    assert disk.pending_operations() == disk.copy().pending_operations()
    disk.crash(LoseUnsynced())
    again = disk.lock_dir("/d/current")  # the crash dropped the holder's lock
    held.release()  # a handle from before the crash releases nothing
    with pytest.raises(FsLocked):
        disk.lock_dir("/d/current")
    disk.kill_process()
    disk.lock_dir("/d/current")
    del again
    assert disk.operation_count == count  # locks are no operations and touch no file
    with pytest.raises(FsNotFound):
        disk.lock_dir("/missing")


def test_stat_counts_names_sizes_and_follows_an_open_file_past_its_unlink() -> None:
    disk = SimDisk()
    disk.mkdir("/d/sub")
    handle = disk.open("/d/f", create=True)
    handle.pwrite(0, b"abcde")
    disk.link("/d/f", "/d/g")
    assert disk.stat("/d/f") == disk.stat("/d/g") == handle.stat()
    assert (handle.stat().size, handle.stat().links, handle.stat().is_dir) == (5, 2, False)
    assert disk.stat("/d").is_dir and disk.stat("/d").links == 3
    assert disk.stat("/d/sub").links == 2 and disk.stat("/").links == 3
    disk.unlink("/d/f")
    disk.unlink("/d/g")
    assert handle.stat().links == 0 and handle.stat().size == 5
    with pytest.raises(FsNotFound):
        disk.stat("/d/f")
    disk.open("/d/h", create=True).close()
    with pytest.raises(FsNotADirectory):
        disk.stat("/d/h/x")
    handle.close()
    with pytest.raises(FsClosed):
        handle.stat()
