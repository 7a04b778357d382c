"""lastMark (impl/journal/last_mark.py, spec/format/journal.md "The lastMark file"): 16 bytes per
ledger directory, the largest wins, durable on return, never backwards, and a crash in the
middle of a write leaves each directory with the old mark or the new one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.fs.api import join
from impl.journal.last_mark import (
    NO_MARK,
    LogMark,
    decode_last_mark,
    encode_last_mark,
    read_dir_mark,
    read_last_mark,
    read_last_marks,
    write_last_mark,
)
from models.fs.simdisk import SimDisk
from proofs.crash.explorer import copy_disk, explore, record_points
from spec.crash import KeepSubset, LoseUnsynced
from tests.unit import bk_journal_layout as bk

DIRS = ["/l0/current", "/l1/current"]
marks = st.builds(LogMark, st.integers(min_value=0, max_value=2**63 - 1), st.integers(0, 2**63 - 1))


def _disk() -> SimDisk:
    disk = SimDisk()
    for directory in DIRS:
        disk.mkdir(directory)
    disk.fsync_dir("/")
    for directory in DIRS:
        disk.fsync_dir(directory.rsplit("/", 1)[0])
    return disk


def _put(disk: SimDisk, path: str, data: bytes) -> None:
    handle = disk.open(path, create=True)
    handle.truncate(0)
    handle.pwrite(0, data)
    handle.fsync()
    handle.close()


@given(mark=marks)
@settings(max_examples=100, deadline=None)
def test_encoding_is_two_big_endian_longs(mark: LogMark) -> None:
    data = encode_last_mark(mark)
    assert data == bk.last_mark(mark.journal_id, mark.offset)
    assert decode_last_mark(data) == mark
    assert decode_last_mark(data + b"trailing bytes are ignored") == mark


@given(a=marks, b=marks)
@settings(max_examples=100, deadline=None)
def test_marks_order_by_journal_then_offset(a: LogMark, b: LogMark) -> None:
    assert (a < b) == ((a.journal_id, a.offset) < (b.journal_id, b.offset))
    assert a >= NO_MARK


def test_negative_fields_are_not_marks() -> None:
    with pytest.raises(ValueError, match="negative"):
        decode_last_mark(bk.last_mark(-1, 5))
    with pytest.raises(ValueError, match="16"):
        decode_last_mark(b"\x00" * 15)
    with pytest.raises(ValueError):
        LogMark(-1, 0)


def test_missing_short_or_garbage_files_count_as_no_mark_with_a_reason() -> None:
    disk = _disk()
    _put(disk, join(DIRS[1], "lastMark"), b"\x01\x02\x03")
    missing, short = read_last_marks(disk, DIRS)
    assert missing.mark is None and "does not exist" in missing.reason
    assert short.mark is None and "3 bytes" in short.reason
    _put(disk, join(DIRS[1], "lastMark"), bk.last_mark(-5, 0))
    garbage = read_dir_mark(disk, DIRS[1])
    assert garbage.mark is None and "negative" in garbage.reason
    assert read_last_mark(disk, DIRS) == NO_MARK


def test_the_largest_mark_over_the_directories_wins() -> None:
    disk = _disk()
    _put(disk, join(DIRS[0], "lastMark"), bk.last_mark(7, 900))
    _put(disk, join(DIRS[1], "lastMark"), bk.last_mark(7, 1024))
    assert read_last_mark(disk, DIRS) == LogMark(7, 1024)
    _put(disk, join(DIRS[0], "lastMark"), bk.last_mark(8, 512))
    assert read_last_mark(disk, DIRS) == LogMark(8, 512)
    _put(disk, join(DIRS[1], "lastMark"), b"")  # an empty file in one directory: the other's
    assert read_last_mark(disk, DIRS) == LogMark(8, 512)


def test_a_mark_written_by_bookkeeper_is_read() -> None:
    disk = _disk()
    _put(disk, join(DIRS[0], "lastMark"), bk.last_mark(0x18BCFE56800, 1024))
    assert read_last_mark(disk, DIRS[:1]) == LogMark(1700000000000, 1024)


def test_write_is_durable_in_every_directory_on_return() -> None:
    disk = _disk()
    write_last_mark(disk, DIRS, LogMark(5, 512))
    disk.crash(LoseUnsynced())
    assert [m.mark for m in read_last_marks(disk, DIRS)] == [LogMark(5, 512)] * 2
    snapshot = disk.durable_snapshot()
    assert snapshot["/l0/current/lastMark"] == bk.last_mark(5, 512)
    assert "/l0/current/lastMark.tmp" not in snapshot


def test_write_never_moves_backwards() -> None:
    disk = _disk()
    write_last_mark(disk, DIRS, LogMark(5, 1024))
    write_last_mark(disk, DIRS, LogMark(5, 1024))  # the same mark again is fine
    with pytest.raises(AssertionError, match="backwards"):
        write_last_mark(disk, DIRS, LogMark(5, 512))
    with pytest.raises(AssertionError, match="backwards"):
        write_last_mark(disk, DIRS[1:], LogMark(4, 4096))
    assert read_last_mark(disk, DIRS) == LogMark(5, 1024)


def test_a_leftover_tmp_file_is_replaced() -> None:
    disk = _disk()
    _put(disk, join(DIRS[0], "lastMark.tmp"), b"leftover of a crash, longer than 16 bytes")
    write_last_mark(disk, DIRS[:1], LogMark(3, 512))
    assert disk.read_file(join(DIRS[0], "lastMark")) == bk.last_mark(3, 512)
    assert not disk.exists(join(DIRS[0], "lastMark.tmp"))


@pytest.mark.parametrize("old", [None, LogMark(5, 512)])
def test_a_crash_during_the_write_leaves_the_old_mark_or_the_new_one(old: LogMark | None) -> None:
    disk = _disk()
    if old is not None:
        write_last_mark(disk, DIRS, old)
    new = LogMark(6, 1024)
    allowed = {old, new}
    points = record_points(disk, lambda: None, lambda: write_last_mark(disk, DIRS, new))
    assert len(points) >= 10  # 5 operations per directory at least

    def check(crashed: SimDisk, _oracle: None) -> tuple[int, list[str]]:
        found = [dir_mark.mark for dir_mark in read_last_marks(crashed, DIRS)]
        return len(found), [
            f"{mark} is neither {old} nor {new}" for mark in found if mark not in allowed
        ]

    report = explore(points, check)
    assert report.crash_states > len(points)
    assert report.failures == []


def test_any_subset_of_pending_operations_leaves_old_or_new() -> None:
    # ALICE-style: every subset of the operations pending just before the directory fsync.
    disk = _disk()
    write_last_mark(disk, DIRS[:1], LogMark(5, 512))
    points = record_points(
        disk, lambda: None, lambda: write_last_mark(disk, DIRS[:1], LogMark(6, 0))
    )
    fsync_dir = next(point for point in points if point.op_kind == "fsync_dir")
    pending = len(fsync_dir.disk.pending_operations())
    assert pending >= 2
    for bits in range(2**pending):
        crashed = copy_disk(fsync_dir.disk)
        crashed.crash(KeepSubset({i for i in range(pending) if bits >> i & 1}))
        assert read_last_mark(crashed, DIRS[:1]) in {LogMark(5, 512), LogMark(6, 0)}
