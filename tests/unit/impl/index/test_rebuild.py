"""impl/index/rebuild.py: the ledger index rebuilt from entry logs.

Two sources of logs: our EntryLogger (rotated logs with maps, the current one without), and
logs built independently from spec/format/entry_log.md by tests/unit/bk_layout.py in
BookKeeper's layout, including what BookKeeper leaves after a crash (no map, a map the header
does not point to, torn tails, padding, v0 headers). The rebuilt locations must be the ones
the writer reported, a later log must win over an earlier one, deleted ledgers must stay out,
and unreadable logs must be reported and skipped with a typed message, never a traceback.
"""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.entrylog.ledger_dirs import LedgerDirs
from impl.entrylog.logger import EntryLogger, EntryLoggerSettings
from impl.format.entry_log import encode_payload
from impl.index.ledger_index import LedgerIndex
from impl.index.rebuild import rebuild_index
from impl.limits import LIMITS, Limits
from models.fs.simdisk import SimDisk
from spec.errors import FsIOError
from spec.ids import EntryId, EntryLogId, LedgerId, Location, location_log_id, make_location
from tests.unit import bk_layout

DIRS = ("/bk/l0/current", "/bk/l1/current")
INDEX_DIR = "/bk/l0/current/bkref-index"


def fresh_disk() -> SimDisk:
    disk = SimDisk()
    for directory in DIRS:
        disk.mkdir(directory)
    return disk


def put_log(disk: SimDisk, directory: str, log_id: int, data: bytes) -> None:
    """A file ``<hex id>.log`` with ``data``, named as the entry-log page says."""
    handle = disk.open(f"{directory}/{log_id:x}.log", create=True)
    handle.pwrite(0, data)
    handle.close()


def empty_index(disk: SimDisk) -> LedgerIndex:
    return LedgerIndex.load(disk, INDEX_DIR)


def at(log_id: int, offset: int) -> Location:
    return make_location(EntryLogId(log_id), offset)


def indexed(index: LedgerIndex) -> dict[tuple[int, int], int]:
    return {
        (ledger_id, entry_id): location
        for ledger_id in index.ledgers()
        for entry_id, location in index.entries(ledger_id)
    }


# --- logs written by our entry logger -------------------------------------------------------------


def test_logs_of_our_entry_logger_rebuild_to_the_locations_it_returned() -> None:
    disk = fresh_disk()
    settings_ = EntryLoggerSettings(
        log_size_limit_bytes=1400, write_buffer_bytes=64, preallocation_enabled=False
    )
    logger = EntryLogger(disk, DIRS, settings_, random.Random(3))
    expected: dict[tuple[int, int], Location] = {}
    for step in range(60):
        ledger_id, entry_id = step % 4, step // 4
        body = bytes([step]) * (10 + step % 7)
        location = logger.add_entry(LedgerId(ledger_id), encode_payload(ledger_id, entry_id, body))
        expected[(ledger_id, entry_id)] = location
    logger.flush()  # the current log's records reach its file; it has no map yet
    index = empty_index(disk)
    stats = rebuild_index(disk, LedgerDirs(disk, DIRS), index)
    index.check_invariants()
    assert indexed(index) == expected
    assert stats.entries_indexed == len(expected)
    assert stats.logs == len({location_log_id(x) for x in expected.values()})
    assert stats.logs_from_map >= 2  # rotated logs: ledgers from their maps
    assert stats.logs_from_scan >= 1  # the current log: no map, scanned
    assert stats.map_mismatches == ()
    assert stats.failures == ()
    for (ledger_id, entry_id), location in expected.items():
        payload = logger.read_entry(LedgerId(ledger_id), EntryId(entry_id), location)
        assert payload[:16] == struct.pack(">qq", ledger_id, entry_id)


# --- logs in BookKeeper's layout, built independently ---------------------------------------------


def test_bookkeeper_logs_of_every_shape_give_the_page_locations() -> None:
    disk = fresh_disk()
    shapes = {
        1: bk_layout.build_log([(1, 0, b"a"), (2, 0, b"bb"), (1, 1, b"ccc")]),
        2: bk_layout.build_log([(1, 2, b"d"), (3, 0, b"e")], rotated=False),
        3: bk_layout.build_log([(3, 1, b"f"), (3, 2, b"g")], header_updated=False),
        4: bk_layout.build_log([(4, 0, b"h"), (4, 1, b"i")], version=0),
        5: bk_layout.build_log([(5, 0, b"j"), (5, 1, b"k")], padding_before={1: 7}),
    }
    for log_id, built in shapes.items():
        put_log(disk, DIRS[log_id % 2], log_id, built.data)
    index = empty_index(disk)
    stats = rebuild_index(disk, DIRS, index)
    expected = {
        (entry.ledger, entry.entry): at(log_id, entry.offset)
        for log_id, built in shapes.items()
        for entry in built.entries
    }
    assert indexed(index) == expected
    # Logs 1 and 5 were rotated with their header updated; 2, 3 and 4 have no usable map.
    assert (stats.logs, stats.logs_from_map, stats.logs_from_scan) == (5, 2, 3)
    assert stats.failures == ()


def test_a_torn_tail_keeps_every_whole_record_before_it() -> None:
    built = bk_layout.build_log([(1, 0, b"x" * 30), (1, 1, b"y" * 30), (1, 2, b"z" * 30)])
    cut = built.record_ends[1] + 9  # inside the third record
    disk = fresh_disk()
    put_log(disk, DIRS[0], 1, built.data[:cut])
    index = empty_index(disk)
    stats = rebuild_index(disk, DIRS, index)
    assert indexed(index) == {(1, e.entry): at(1, e.offset) for e in built.entries[:2]}
    assert stats.torn_tail_bytes == 9
    assert stats.logs_from_scan == 1


def test_a_later_log_wins_and_a_later_record_wins_inside_a_log() -> None:
    disk = fresh_disk()
    old = bk_layout.build_log([(1, 0, b"old"), (1, 1, b"old")])
    new = bk_layout.build_log([(1, 0, b"copy"), (2, 5, b"first"), (2, 5, b"second")])
    put_log(disk, DIRS[1], 0x10, new.data)  # listed in the other dir, yet read in id order
    put_log(disk, DIRS[0], 0x9, old.data)
    index = empty_index(disk)
    rebuild_index(disk, DIRS, index)
    assert index.get_location(LedgerId(1), EntryId(0)) == at(0x10, new.entries[0].offset)
    assert index.get_location(LedgerId(1), EntryId(1)) == at(0x9, old.entries[1].offset)
    assert index.get_location(LedgerId(2), EntryId(5)) == at(0x10, new.entries[2].offset)


def test_deleted_ledgers_stay_out_and_all_deleted_logs_are_not_scanned() -> None:
    disk = fresh_disk()
    put_log(disk, DIRS[0], 1, bk_layout.build_log([(7, 0, b"a"), (7, 1, b"b")]).data)
    put_log(disk, DIRS[0], 2, bk_layout.build_log([(7, 2, b"c"), (8, 0, b"d")]).data)
    index = empty_index(disk)
    index.delete_ledger(LedgerId(7))
    stats = rebuild_index(disk, DIRS, index)
    assert index.ledgers() == [8]
    assert not index.has_ledger(LedgerId(7))
    assert stats.logs_all_deleted == 1  # log 1 holds ledger 7 only
    assert stats.entries_skipped_deleted == 1  # log 2 was scanned: entry 7/2 was skipped
    assert stats.entries_indexed == 1
    index.check_invariants()


def test_a_map_that_disagrees_with_the_scan_is_reported() -> None:
    built = bk_layout.build_log([(1, 0, b"a")], rotated=False)
    ledgers_map = bk_layout.map_records([(1, 21), (9, 100)])
    data = bk_layout.header(1, len(built.data), 2) + built.data[1024:] + ledgers_map
    disk = fresh_disk()
    put_log(disk, DIRS[0], 3, data)
    index = empty_index(disk)
    stats = rebuild_index(disk, DIRS, index)
    assert stats.map_mismatches == (3,)
    assert indexed(index) == {(1, 0): at(3, built.entries[0].offset)}


def test_unreadable_logs_are_reported_and_skipped() -> None:
    disk = fresh_disk()
    lines: list[str] = []
    put_log(disk, DIRS[0], 1, b"NOPE" + bytes(2000))  # a foreign file
    put_log(disk, DIRS[0], 2, b"")  # created, never written: no record
    put_log(disk, DIRS[0], 3, bk_layout.build_log([(4, 0, b"ok")]).data)
    index = empty_index(disk)
    stats = rebuild_index(disk, [*DIRS, "/bk/missing/current"], index, progress=lines.append)
    assert indexed(index) == {(4, 0): at(3, 1028)}
    assert [(f.path, f.log_id) for f in stats.failures] == [
        ("/bk/missing/current", None),
        (f"{DIRS[0]}/1.log", 1),
    ]
    assert "not an entry log" in stats.failures[1].message
    assert stats.logs_empty == 1
    assert any(line.startswith(f"index rebuild: skipped {DIRS[0]}/1.log") for line in lines)
    assert "2 unreadable (skipped)" in lines[-1]


def test_a_log_id_in_two_directories_is_read_from_the_first() -> None:
    disk = fresh_disk()
    first = bk_layout.build_log([(1, 0, b"first")])
    put_log(disk, DIRS[0], 5, first.data)
    put_log(disk, DIRS[1], 5, bk_layout.build_log([(1, 0, b"xx"), (2, 0, b"y")]).data)
    index = empty_index(disk)
    stats = rebuild_index(disk, DIRS, index)
    assert indexed(index) == {(1, 0): at(5, first.entries[0].offset)}
    assert stats.duplicate_logs == (f"{DIRS[1]}/5.log",)


def test_negative_entry_ids_are_not_indexed() -> None:
    disk = fresh_disk()
    put_log(disk, DIRS[0], 1, bk_layout.build_log([(1, -5, b"meta"), (1, 0, b"a")]).data)
    index = empty_index(disk)
    stats = rebuild_index(disk, DIRS, index)
    assert index.entries(LedgerId(1)) == [(EntryId(0), at(1, 1024 + 4 + 20 + 4))]
    assert stats.entries_skipped_invalid == 1


def test_progress_lines_on_large_directories() -> None:
    disk = fresh_disk()
    count = 2 * LIMITS.rebuild_progress_every_logs + 3
    for log_id in range(count):
        put_log(disk, DIRS[log_id % 2], log_id, bk_layout.build_log([(log_id, 0, b"e")]).data)
    lines: list[str] = []
    stats = rebuild_index(disk, DIRS, empty_index(disk), progress=lines.append)
    assert lines == [
        f"index rebuild: 16/{count} entry logs read, 16 entries indexed",
        f"index rebuild: 32/{count} entry logs read, 32 entries indexed",
        stats.summary(),
    ]
    assert stats.entries_indexed == count


def test_progress_lines_follow_the_limits_given() -> None:
    disk = fresh_disk()
    for log_id in range(7):
        put_log(disk, DIRS[log_id % 2], log_id, bk_layout.build_log([(log_id, 0, b"e")]).data)
    lines: list[str] = []
    limits = Limits(rebuild_progress_every_logs=3, scan_chunk_bytes=24)
    stats = rebuild_index(disk, DIRS, empty_index(disk), progress=lines.append, limits=limits)
    assert lines == [
        "index rebuild: 3/7 entry logs read, 3 entries indexed",
        "index rebuild: 6/7 entry logs read, 6 entries indexed",
        stats.summary(),
    ]
    # Under the production limits 7 logs are too few for any line.
    quiet: list[str] = []
    assert rebuild_index(disk, DIRS, empty_index(disk), progress=quiet.append) == stats
    assert quiet == []


def test_no_progress_line_on_a_small_directory() -> None:
    disk = fresh_disk()
    put_log(disk, DIRS[0], 1, bk_layout.build_log([(1, 0, b"e")]).data)
    lines: list[str] = []
    rebuild_index(disk, DIRS, empty_index(disk), progress=lines.append)
    assert lines == []


# --- a property over random BookKeeper directories ------------------------------------------------

entry_lists = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 5), st.binary(min_size=0, max_size=40)),
    max_size=8,
)
log_shapes = st.fixed_dictionaries(
    {
        "entries": entry_lists,
        "rotated": st.booleans(),
        "header_updated": st.booleans(),
        "cut": st.one_of(st.none(), st.integers(0, 120)),
    }
)


@given(logs=st.lists(log_shapes, min_size=1, max_size=5), deleted=st.sets(st.integers(0, 3)))
@settings(max_examples=60, deadline=None)
def test_rebuild_finds_the_last_whole_copy_of_every_entry(
    logs: list[dict[str, object]], deleted: set[int]
) -> None:
    disk = fresh_disk()
    expected: dict[tuple[int, int], int] = {}
    for log_id, shape in enumerate(logs, start=1):
        built = bk_layout.build_log(
            shape["entries"],  # type: ignore[arg-type]
            rotated=bool(shape["rotated"]),
            header_updated=bool(shape["header_updated"]),
        )
        cut = shape["cut"]
        data = built.data if cut is None else built.data[: built.entries_end - int(cut)]  # type: ignore[call-overload]
        put_log(disk, DIRS[log_id % 2], log_id, data)
        for entry, end in zip(built.entries, built.record_ends, strict=False):
            if end <= len(data) and entry.ledger not in deleted:
                expected[(entry.ledger, entry.entry)] = at(log_id, entry.offset)
    index = empty_index(disk)
    for ledger_id in deleted:
        index.delete_ledger(LedgerId(ledger_id))
    stats = rebuild_index(disk, DIRS, index)
    index.check_invariants()
    assert indexed(index) == expected
    assert stats.failures == ()


def test_a_read_error_is_not_an_unreadable_log() -> None:
    disk = fresh_disk()
    put_log(disk, DIRS[0], 3, bk_layout.build_log([(4, 0, b"ok")]).data)
    disk.fail_next("read", f"{DIRS[0]}/3.log")
    with pytest.raises(FsIOError, match="read"):
        rebuild_index(disk, DIRS, empty_index(disk))
    stats = rebuild_index(disk, DIRS, index := empty_index(disk))
    assert stats.failures == ()
    assert indexed(index) == {(4, 0): at(3, 1028)}
