"""The simulated disk's faults beyond the basic ones: a failed fsync that keeps the bytes
(ext4/XFS), torn writes that keep any subset of sectors with garbage, and failed reads."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.fs.simdisk import SimDisk
from spec.crash import (
    SECTOR_BYTES,
    KeepAll,
    KeepPrefix,
    KeepSubset,
    KillProcess,
    LoseUnsynced,
    TornSectors,
    TornWrite,
)
from spec.errors import FsError, FsIOError
from spec.fs import FsyncFailure
from tests.unit.models.fs.test_simdisk import (
    BASE,
    NAMES,
    SLOTS,
    TORN_DATA,
    WORK_DIRS,
    _run_step,
    crashed,
    durable_file,
    step,
)


def keep_disk(*dirs: str) -> SimDisk:
    disk = SimDisk(fsync_failure="keep")
    for path in dirs:
        disk.mkdir(path)
    disk.fsync_dir("/")
    for path in dirs:
        disk.fsync_dir(path)
    return disk


# --- fsync failure: keep ------------------------------------------------------------------


def test_the_mode_is_chosen_at_construction_and_checked() -> None:
    assert SimDisk().fsync_failure is FsyncFailure.REVERT
    assert SimDisk(fsync_failure=FsyncFailure.KEEP).fsync_failure is FsyncFailure.KEEP
    assert SimDisk(fsync_failure="keep").fsync_failure is FsyncFailure.KEEP
    with pytest.raises(ValueError, match="FsyncFailure"):
        SimDisk(fsync_failure="sometimes")


def test_keep_a_failed_fsync_keeps_the_bytes_readable_but_never_durable() -> None:
    disk = keep_disk("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    handle.append(b"def")
    handle.pwrite(0, b"X")
    disk.fail_next("fsync")
    with pytest.raises(FsIOError):
        handle.fsync()
    disk.check_invariants()
    assert handle.pread(0, 100) == b"Xbcdef"  # the page cache still has them
    assert disk.pending_operations() == ()  # ... but nothing will write them back
    assert disk.durable_snapshot()["/d/f"] == b"abc"
    # Every plan, even the one keeping every pending operation, shows the old content.
    for plan in (LoseUnsynced(), KeepPrefix(10), KeepAll(), KeepSubset(frozenset({0}))):
        assert crashed(disk, plan).read_file("/d/f") == b"abc", plan
    # The retry succeeds, and still the lost bytes are not durable.
    handle.fsync()
    disk.check_invariants()
    assert crashed(disk, LoseUnsynced()).read_file("/d/f") == b"abc"


def test_keep_writes_after_the_failure_are_durable_on_their_own() -> None:
    disk = keep_disk("/d")
    handle = durable_file(disk, "/d/f", b"0123456789")
    handle.pwrite(2, b"AB")  # lost
    disk.fail_next("fsync")
    with pytest.raises(FsIOError):
        handle.fdatasync()
    handle.pwrite(6, b"CD")  # pending as usual
    handle.append(b"!!")  # lands past the lost bytes' end, at 10
    disk.check_invariants()
    assert [op.kind for op in disk.pending_operations()] == ["write", "write"]
    assert crashed(disk, KeepPrefix(1)).read_file("/d/f") == b"012345CD89"
    handle.fsync()
    disk.check_invariants()
    assert handle.pread(0, 100) == b"01AB45CD89!!"
    assert crashed(disk, LoseUnsynced()).read_file("/d/f") == b"012345CD89!!"


def test_keep_a_lost_extension_reads_as_zeros_under_a_later_durable_write() -> None:
    disk = keep_disk("/d")
    handle = durable_file(disk, "/d/f", b"ab")
    handle.append(b"cd")
    disk.fail_next("fsync")
    with pytest.raises(FsIOError):
        handle.fsync()
    assert handle.append(b"ef") == 4
    handle.fsync()
    disk.check_invariants()
    assert crashed(disk, LoseUnsynced()).read_file("/d/f") == b"ab\0\0ef"


def test_revert_a_failed_fsync_shows_the_durable_content_at_once() -> None:
    disk = SimDisk()
    disk.mkdir("/d")
    disk.fsync_dir("/")
    handle = durable_file(disk, "/d/f", b"abc")
    handle.append(b"def")
    disk.fail_next("fsync")
    with pytest.raises(FsIOError):
        handle.fsync()
    assert handle.pread(0, 100) == b"abc"
    disk.check_invariants()


def test_keep_check_invariants_catches_bytes_that_no_write_explains() -> None:
    disk = keep_disk("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    handle.append(b"def")
    disk.fail_next("fsync")
    with pytest.raises(FsIOError):
        handle.fsync()
    disk.check_invariants()
    handle.append(b"g")
    disk._cur.files[handle.ino][0] = ord("Z")  # corrupt what reads see
    with pytest.raises(AssertionError, match="durable"):
        disk.check_invariants()


keep_step = st.one_of(
    step,
    st.tuples(st.just("fail_fsync"), st.sampled_from(WORK_DIRS)),
    st.tuples(st.just("fsync"), st.integers(0, SLOTS - 1)),
)


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(keep_step, max_size=30), data=st.data())
def test_keep_fsynced_data_survives_and_lost_bytes_never_do(
    steps: list[tuple[object, ...]], data: st.DataObject
) -> None:
    """With failed fsyncs among the steps: what was fsynced before a crash survives every
    plan, invariants hold after each step, and a crash keeping everything pending gives the
    current content except for the files a failed fsync dropped writes of."""
    disk = keep_disk("/p", *WORK_DIRS)
    for number, path in enumerate(f"{d}/{n}" for d in WORK_DIRS for n in NAMES):
        durable_file(disk, path, bytes([65 + number]) * (300 * number)).close()
    handles = {slot: disk.open(f"{WORK_DIRS[slot % 2]}/{NAMES[slot]}") for slot in range(SLOTS)}
    protected: dict[str, bytes] = {}
    for number, (kind, *args) in enumerate(steps):
        try:
            if kind == "fail_fsync":
                disk.fail_next("fsync", str(args[0]))
            elif kind == "protect":
                directory, content = str(args[0]), args[1]
                assert isinstance(content, bytes)
                handle = disk.open(f"{directory}/k{number}", create=True, exclusive=True)
                handle.append(content)
                handle.fsync()
                for synced in (directory,) if directory == "/p" else WORK_DIRS:
                    disk.fsync_dir(synced)
                protected[f"{directory}/k{number}"] = content
            else:
                _run_step(disk, handles, str(kind), args)
        except FsError:
            pass
        disk.check_invariants()
    count = len(disk.pending_operations())
    plan = data.draw(
        st.one_of(
            st.just(LoseUnsynced()),
            st.builds(KeepPrefix, st.integers(0, count + 1)),
            st.builds(
                TornSectors,
                st.integers(0, count + 1),
                st.frozensets(st.integers(0, 3)),
                st.integers(0, 9),
            ),
        ),
        label="plan",
    )
    after = crashed(disk, plan)
    for path, content in protected.items():
        assert after.read_file(path) == content, (path, plan)
    assert crashed(disk, LoseUnsynced()).current_snapshot() == disk.durable_snapshot()
    everything = crashed(disk, KeepPrefix(count)).current_snapshot()
    unwritten = set(disk._cache_base)
    for path, content in disk.current_snapshot().items():
        if disk._lookup(tuple(path.strip("/").split("/")), path) not in unwritten:
            assert everything.get(path) == content, path


# --- torn sectors ---------------------------------------------------------------------------


def garbage(seed: int, length: int) -> bytes:
    return random.Random(seed).randbytes(length)


@pytest.mark.parametrize("kept", [frozenset(), frozenset({0}), frozenset({1, 3}), frozenset({2})])
def test_torn_sectors_keep_exactly_the_chosen_sectors_and_garble_the_rest(
    kept: frozenset[int],
) -> None:
    # The 1500-byte write at 100 spans the file sectors [0,512) .. [1536,2048): within the
    # write, sector 0 is bytes 0..411, 1 is 412..923, 2 is 924..1435, 3 is 1436..1499.
    disk = keep_disk("/d")
    handle = durable_file(disk, "/d/f", BASE)
    handle.pwrite(100, TORN_DATA)
    after = crashed(disk, TornSectors(keep=0, sectors=kept, garbage=7))
    noise = garbage(7, len(TORN_DATA))
    bounds = [(0, 412), (412, 924), (924, 1436), (1436, 1500)]
    expected = bytearray(BASE)
    for index, (start, end) in enumerate(bounds):
        source = TORN_DATA if index in kept else noise
        expected[100 + start : 100 + end] = source[start:end]
    assert after.read_file("/d/f") == bytes(expected)
    assert all((100 + start) % SECTOR_BYTES == 0 for start, _ in bounds[1:])


def test_torn_sectors_all_kept_is_the_whole_write_and_garbage_is_deterministic() -> None:
    disk = keep_disk("/d")
    handle = durable_file(disk, "/d/f", b"")
    handle.append(b"first")
    handle.append(TORN_DATA)
    handle.append(b"last")
    whole = crashed(disk, TornSectors(1, frozenset(range(9)), 3)).read_file("/d/f")
    assert whole == b"first" + TORN_DATA
    one = crashed(disk, TornSectors(1, frozenset(), 3)).read_file("/d/f")
    assert one == crashed(disk, TornSectors(1, frozenset(), 3)).read_file("/d/f")
    assert len(one) == 5 + len(TORN_DATA) and one[:5] == b"first"
    assert one[5:] == garbage(3, len(TORN_DATA))
    assert one != crashed(disk, TornSectors(1, frozenset(), 4)).read_file("/d/f")


def test_torn_sectors_on_a_non_write_is_keep_prefix() -> None:
    disk = keep_disk("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    handle.append(b"def")
    handle.truncate(1)
    handle.append(b"zz")
    torn = crashed(disk, TornSectors(1, frozenset({0}), 1)).current_snapshot()
    assert torn == crashed(disk, KeepPrefix(1)).current_snapshot() == {"/d/f": b"abcdef"}
    assert crashed(disk, TornSectors(9, frozenset({0}), 1)).current_snapshot() == (
        crashed(disk, KeepPrefix(9)).current_snapshot()
    )


def test_torn_sectors_refuses_negative_fields() -> None:
    with pytest.raises(ValueError, match="sector"):
        TornSectors(0, frozenset({-1}), 0)
    with pytest.raises(ValueError, match="garbage"):
        TornSectors(0, frozenset(), -1)
    with pytest.raises(ValueError, match="keep"):
        TornSectors(-1, frozenset(), 0)


def test_torn_write_is_not_changed_by_the_new_plan() -> None:
    disk = keep_disk("/d")
    handle = durable_file(disk, "/d/f", b"")
    handle.pwrite(100, TORN_DATA)
    assert crashed(disk, TornWrite(0, 1)).read_file("/d/f") == bytes(100) + TORN_DATA[:412]


# --- failed reads ---------------------------------------------------------------------------


def test_a_failed_read_raises_once_and_changes_nothing() -> None:
    disk = keep_disk("/d")
    handle = durable_file(disk, "/d/f", b"abc")
    other = durable_file(disk, "/d/g", b"xyz")
    disk.fail_next("read", "/d/f", count=2)
    count = disk.operation_count
    assert other.pread(0, 3) == b"xyz"  # another path is not affected
    for _ in range(2):
        with pytest.raises(FsIOError, match="read"):
            handle.pread(0, 3)
    assert handle.pread(0, 3) == b"abc"  # the rule was used up
    assert disk.operation_count == count  # reads are not operations of the crash explorer
    assert disk.pending_operations() == ()
    disk.check_invariants()


def test_a_failed_read_hits_every_handle_of_the_path() -> None:
    disk = keep_disk("/d")
    durable_file(disk, "/d/f", b"abc").close()
    disk.fail_next("read", "/d")
    reader = disk.open("/d/f", read_only=True)
    with pytest.raises(FsError):
        reader.pread(0, 1)
    assert reader.pread(0, 1) == b"a"


def test_names_of_the_shared_test_module_are_as_expected() -> None:
    # The property test above builds on these: a change there must not silently weaken it.
    assert len(NAMES) == SLOTS and len(WORK_DIRS) == 2


# --- a process kill that keeps the page cache ---------------------------------------------------


def test_a_process_kill_keeps_the_page_cache_for_a_later_crash_to_keep_or_lose() -> None:
    disk = SimDisk()
    disk.mkdir("/d")
    disk.fsync_dir("/")
    handle = durable_file(disk, "/d/f", b"abc")
    handle.append(b"def")  # not fsynced
    created = disk.open("/d/new", create=True)  # neither the file nor its name durable
    created.pwrite(0, b"new")
    unlinked = disk.open("/d/gone", create=True)
    disk.unlink("/d/gone")  # alive only through its handle
    disk.crash(KillProcess())
    disk.check_invariants()
    with pytest.raises(FsError):
        handle.pread(0, 10)  # every old handle died with the process
    with pytest.raises(FsError):
        unlinked.pread(0, 1)
    assert not disk.exists("/d/gone")
    # The restarted process reads what the dead one wrote ...
    assert disk.read_file("/d/f") == b"abcdef" and disk.read_file("/d/new") == b"new"
    # ... which a power cut now would still lose,
    assert crashed(disk, LoseUnsynced()).read_file("/d/f") == b"abc"
    assert not crashed(disk, LoseUnsynced()).exists("/d/new")
    # until the new process fsyncs it.
    again = disk.open("/d/f")
    again.fsync()
    assert crashed(disk, LoseUnsynced()).read_file("/d/f") == b"abcdef"
    disk.check_invariants()
