"""impl/entrylog/ids.py: the gap rule (LedgerDirUtil), file names, lastId, the allocator
(ports of TestEntryLogIds and CreateNewLogTest) and RecentEntryLogsStatus."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.entrylog.ids import (
    LogIdAllocator,
    RecentEntryLogsStatus,
    decode_last_id,
    encode_last_id,
    find_largest_gap,
    last_id_for_dir,
    log_ids_in_names,
    next_log_id,
    read_last_id,
    write_last_id,
)
from impl.format.names import compacting_file_name
from impl.fs.os_backend import OsFileSystem

MAX = 2**31 - 1


# --- the gap rule -------------------------------------------------------------------------


def test_gap_selection_matches_ledger_dir_util() -> None:
    # TestEntryLogIds.testGapSelection, value for value.
    assert find_largest_gap([]) == (0, MAX)
    assert find_largest_gap([0]) == (1, MAX)
    assert find_largest_gap([1, 2, 3, 4, 5, 6]) == (7, MAX)
    assert find_largest_gap([MAX]) == (0, MAX)
    assert find_largest_gap([MAX // 2]) == (0, MAX // 2)
    assert find_largest_gap([MAX // 2 - 1]) == (MAX // 2, MAX)


def test_gap_ignores_order_and_prefers_the_first_of_equal_gaps() -> None:
    assert find_largest_gap([6, 1, 3]) == (7, MAX)
    # Gaps [0, x) and [x+1, 2x+1) both have size x, the tail gap is smaller: the first wins.
    x = (MAX - 1) // 3
    assert MAX - (2 * x + 2) < x
    assert find_largest_gap([x, 2 * x + 1]) == (0, x)


def _reference_gap(ids: list[int]) -> int:
    """The size of the largest gap, computed differently: over sorted distinct boundaries."""
    bounds = sorted(set(ids))
    sizes = [bounds[0]] if bounds else [MAX]
    for index, value in enumerate(bounds):
        end = bounds[index + 1] if index + 1 < len(bounds) else MAX
        sizes.append(end - value - 1)
    return max(sizes)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=MAX), max_size=20))
def test_gap_is_free_bounded_and_largest(ids: list[int]) -> None:
    start, end = find_largest_gap(ids)
    taken = set(ids)
    assert 0 <= start <= end <= MAX
    assert not any(start <= i < end for i in taken)
    if taken:
        assert start == 0 or start - 1 in taken
        assert end == MAX or end in taken
        assert end - start == _reference_gap(ids)


# --- names ----------------------------------------------------------------------------------


# How each name parses is tests/unit/impl/format/test_names.py; here, which ids they take.


def test_compacted_names_count_their_new_id() -> None:
    names = ["7b.log", "81.log.7b.compacted", "85.log.compacting", "lastId", "junk"]
    assert log_ids_in_names(names) == [0x7B, 0x81]


# --- lastId ---------------------------------------------------------------------------------


def test_last_id_codec() -> None:
    assert encode_last_id(0x1F) == b"1f\n"
    assert decode_last_id(b"1f\n") == 0x1F
    assert decode_last_id(b"1F") == 0x1F  # the newline is optional, as readLine
    assert decode_last_id(b"1f\r\nrest") == 0x1F
    for garbage in [b"", b"\n", b"zz\n", b"-1\n", b"+1\n", b"80000000\n", b"\xff\n", b"1" * 100]:
        assert decode_last_id(garbage) is None, garbage


def test_read_and_write_last_id(tmp_path: Path) -> None:
    fs = OsFileSystem()
    directory = str(tmp_path)
    assert read_last_id(fs, directory) is None
    write_last_id(fs, directory, 0x123)
    assert (tmp_path / "lastId").read_bytes() == b"123\n"
    write_last_id(fs, directory, 5)  # shorter: the old digits are truncated away
    assert (tmp_path / "lastId").read_bytes() == b"5\n"
    assert read_last_id(fs, directory) == 5
    (tmp_path / "lastId").write_bytes(b"garbage")
    assert read_last_id(fs, directory) is None


def test_last_id_for_dir_takes_the_larger_of_file_and_gap() -> None:
    assert last_id_for_dir(None, []) == -1
    assert last_id_for_dir(None, ["0.log", "1.log", "2.log"]) == 2
    assert last_id_for_dir(9, ["0.log", "1.log"]) == 9
    assert last_id_for_dir(0, ["0.log", "1.log"]) == 1


def test_next_log_id_wraps() -> None:
    assert next_log_id(-1) == 0
    assert next_log_id(41) == 42
    assert next_log_id(MAX) == 0


# --- the allocator ----------------------------------------------------------------------------


def _dirs(tmp_path: Path, count: int) -> list[str]:
    out = []
    for index in range(count):
        directory = tmp_path / f"l{index}" / "current"
        directory.mkdir(parents=True)
        out.append(str(directory))
    return out


def _touch(directory: str, name: str) -> None:
    (Path(directory) / name).write_bytes(b"")


def test_wrap_around_after_max_minus_one(tmp_path: Path) -> None:
    # TestEntryLogIds.testWrapAround: an existing log MAX-1 and no lastId -> next is 0.
    (directory,) = _dirs(tmp_path, 1)
    _touch(directory, f"{MAX - 1:x}.log")
    assert LogIdAllocator(OsFileSystem(), [directory]).next_id() == 0


def test_compacting_logs_not_considered(tmp_path: Path) -> None:
    (directory,) = _dirs(tmp_path, 1)
    _touch(directory, f"{123:x}.log")
    _touch(directory, f"{129:x}.log.compacting")
    assert LogIdAllocator(OsFileSystem(), [directory]).next_id() == 124


def test_compacted_logs_considered(tmp_path: Path) -> None:
    (directory,) = _dirs(tmp_path, 1)
    _touch(directory, f"{123:x}.log")
    _touch(directory, f"{129:x}.log.{123:x}.compacted")
    assert LogIdAllocator(OsFileSystem(), [directory]).next_id() == 130


def test_ids_skip_files_existing_in_any_dir(tmp_path: Path) -> None:
    # CreateNewLogTest.testCreateNewLogWithGaps: 1 taken after 0 was allocated -> 2; then 3.
    dirs = _dirs(tmp_path, 3)
    allocator = LogIdAllocator(OsFileSystem(), dirs)
    assert allocator.next_id() == 0
    _touch(dirs[2], "1.log")
    assert allocator.next_id() == 2
    _touch(dirs[1], "3.log")
    assert allocator.next_id() == 4
    allocator.check_invariants()


def test_suffix_decides_what_counts_as_taken(tmp_path: Path) -> None:
    (directory,) = _dirs(tmp_path, 1)
    allocator = LogIdAllocator(OsFileSystem(), [directory])
    _touch(directory, "0.log.compacting")
    assert allocator.next_id(compacting_file_name) == 1
    _touch(directory, "2.log")
    assert allocator.next_id(compacting_file_name) == 2  # only the name asked for is checked


def test_last_id_is_the_max_over_dirs(tmp_path: Path) -> None:
    # CreateNewLogTest.testLastIdCompatibleBetweenDefaultAndDirectEntryLogger: logs 0..9 spread
    # over the dirs, then every lastId says 3: the gap rule still finds 9.
    fs = OsFileSystem()
    dirs = _dirs(tmp_path, 4)
    for log_id in range(10):
        _touch(dirs[log_id % 4], f"{log_id:x}.log")
    allocator = LogIdAllocator(fs, dirs)
    assert allocator.last_id == 9
    for directory in dirs:
        write_last_id(fs, directory, 3)
    assert LogIdAllocator(fs, dirs).last_id == 9
    assert LogIdAllocator(fs, dirs).next_id() == 10


def test_publish_writes_last_id_everywhere_and_a_restart_continues(tmp_path: Path) -> None:
    # TestEntryLogIds.testIdGenerator, case 1: ids continue across a restart.
    fs = OsFileSystem()
    dirs = _dirs(tmp_path, 2)
    first = LogIdAllocator(fs, dirs)
    for expected in range(10):
        log_id = first.next_id()
        assert log_id == expected
        _touch(dirs[0], f"{log_id:x}.log")
        assert first.publish(log_id) == []
    assert [read_last_id(fs, d) for d in dirs] == [9, 9]
    second = LogIdAllocator(fs, dirs)
    assert [second.next_id() for _ in range(10)] == list(range(10, 20))


def test_separate_dirs_have_separate_ids(tmp_path: Path) -> None:
    # TestEntryLogIds.testIdGenerator, case 2: allocators over disjoint dirs start at 0 each.
    fs = OsFileSystem()
    dir3, dir4 = _dirs(tmp_path, 2)
    third = LogIdAllocator(fs, [dir3])
    for expected in range(10):
        log_id = third.next_id()
        _touch(dir3, f"{log_id:x}.log")
        assert log_id == expected
    fourth = LogIdAllocator(fs, [dir4])
    assert [fourth.next_id() for _ in range(10)] == list(range(10))


def test_publish_reports_dirs_it_could_not_write(tmp_path: Path) -> None:
    fs = OsFileSystem()
    good, bad = _dirs(tmp_path, 2)
    allocator = LogIdAllocator(fs, [good, bad])
    (Path(bad) / "lastId").mkdir()  # a directory where the file should be
    assert allocator.publish(7) == [bad]
    assert read_last_id(fs, good) == 7


# --- RecentEntryLogsStatus ----------------------------------------------------------------


def test_recent_entry_logs_status_sequence() -> None:
    # DefaultEntryLogTest.testEntryLoggersRecentEntryLogsStatus, step by step.
    status = RecentEntryLogsStatus(0)

    def step(expected: int) -> None:
        status.check_invariants()
        assert status.least_unflushed_log_id == expected

    status.created(0)
    step(0)
    status.flushed(0)
    step(1)
    for log_id in (1, 2, 3, 4):
        status.created(log_id)
    step(1)
    status.flushed(1)
    step(2)
    status.flushed(3)
    step(2)
    assert status.is_flushed(3)
    assert not status.is_flushed(2)
    status.flushed(2)
    step(4)
    status.flushed(4)
    step(5)
    for log_id in (5, 7, 9):
        status.created(log_id)
    step(5)
    status.flushed(5)
    step(6)
    status.flushed(7)
    step(8)
    assert status.pending() == {9: False}


def test_status_starts_at_the_given_value_and_ignores_unknown_ids() -> None:
    status = RecentEntryLogsStatus(12)
    assert status.least_unflushed_log_id == 12
    assert status.is_flushed(11)
    assert not status.is_flushed(12)
    status.flushed(40)  # never created: ignored
    assert status.least_unflushed_log_id == 12
    assert status.pending() == {}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=15), max_size=20))
def test_status_least_unflushed_is_the_first_unflushed(order: list[int]) -> None:
    status = RecentEntryLogsStatus(0)
    created = list(range(16))
    for log_id in created:
        status.created(log_id)
    done: set[int] = set()
    for log_id in order:
        status.flushed(log_id)
        done.add(log_id)
        status.check_invariants()
        first_unflushed = min(set(created) - done, default=16)
        assert status.least_unflushed_log_id == first_unflushed
    with pytest.raises(AssertionError):
        status.created(-1)
