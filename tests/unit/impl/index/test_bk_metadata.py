"""impl/index/bk_metadata.py and the rebuild's use of it: BookKeeper's ``.idx`` files found
where IndexPersistenceMgr puts them, the directory-level rows of spec/format/bk_index.md's
damage table (``.rloc`` leftovers, a ledger in two directories, misplaced and foreign files,
torn and damaged headers), and keys and fences given to bkref's index by ``rebuild_index``.

Files are written by tests/unit/bk_index_layout.py (the page's second reader), entry logs by
tests/unit/bk_layout.py, on the simulated disk.
"""

from __future__ import annotations

import pytest

from impl.index.bk_metadata import describe_idx_file, find_idx_files, read_bk_metadata
from impl.index.ledger_index import LedgerIndex
from impl.index.rebuild import rebuild_index
from models.fs.simdisk import SimDisk
from spec.errors import BkIndexDamaged
from spec.ids import EntryId, LedgerId
from tests.unit import bk_index_layout as bk
from tests.unit import bk_layout

DIRS = ("/bk/l0/current", "/bk/l1/current")
INDEX_DIR = "/bk/l0/current/bkref-index"
KEY = b"\x9f" * 20
OTHER = b"\x01" * 20


def fresh_disk() -> SimDisk:
    disk = SimDisk()
    for directory in DIRS:
        disk.mkdir(directory)
    return disk


def put(disk: SimDisk, path: str, data: bytes) -> None:
    disk.mkdir(path.rsplit("/", 1)[0])
    handle = disk.open(path, create=True)
    handle.pwrite(0, data)
    handle.close()


def put_idx(disk: SimDisk, directory: str, ledger_id: int, data: bytes, suffix: str = "") -> str:
    path = f"{directory}/{bk.idx_path(ledger_id)}{suffix}"
    put(disk, path, data)
    return path


def test_index_files_are_found_at_their_derived_paths_in_every_directory() -> None:
    disk = fresh_disk()
    for ledger_id, directory in [
        (0, DIRS[0]),
        (300, DIRS[1]),
        (0x10203, DIRS[0]),
        (2**40, DIRS[1]),
    ]:
        put_idx(disk, directory, ledger_id, bk.idx_file(KEY))
    refs, ignored = find_idx_files(disk, DIRS)
    assert [(ref.ledger_id, ref.path) for ref in refs] == [
        (0, "/bk/l0/current/0/0/0.idx"),
        (300, "/bk/l1/current/1/2c/12c.idx"),
        (0x10203, "/bk/l0/current/2/3/10203.idx"),
        (2**40, "/bk/l1/current/0/0/10000000000.idx"),
    ]
    assert ignored == []


def test_row_an_rloc_beside_an_idx_is_ignored_and_an_rloc_alone_is_read() -> None:
    disk = fresh_disk()
    put_idx(disk, DIRS[0], 5, bk.idx_file(KEY))
    put_idx(disk, DIRS[1], 5, bk.idx_file(OTHER), ".rloc")  # copy not finished
    put_idx(disk, DIRS[1], 6, bk.idx_file(OTHER, fenced=True), ".rloc")  # old file deleted
    metadata = read_bk_metadata(disk, DIRS)
    by_id = {ledger.ledger_id: ledger for ledger in metadata.ledgers}
    assert by_id[LedgerId(5)].master_key == KEY
    assert by_id[LedgerId(6)].master_key == OTHER
    assert by_id[LedgerId(6)].fenced
    assert [path for path, _ in metadata.ignored] == ["/bk/l1/current/0/5/5.idx.rloc"]


def test_row_a_ledger_in_two_directories_is_read_from_the_first() -> None:
    disk = fresh_disk()
    put_idx(disk, DIRS[1], 7, bk.idx_file(OTHER))
    put_idx(disk, DIRS[0], 7, bk.idx_file(KEY))
    metadata = read_bk_metadata(disk, DIRS)
    assert [ledger.master_key for ledger in metadata.ledgers] == [KEY]
    assert metadata.ignored[0][0] == "/bk/l1/current/0/7/7.idx"
    assert "first wins" in metadata.ignored[0][1]


@pytest.mark.parametrize(
    "relative",
    [
        "0/8/07.idx",  # leading zero: not the derived name
        "0/8/8.IDX",  # not the suffix
        "0/9/8.idx",  # wrong parent
        "1/8/8.idx",  # wrong grand parent
        "0/8/zz.idx",  # not hex
        "0/0/10000000000000000.idx",  # above 2**63-1
        "0/8/notes.txt",
    ],
)
def test_row_misplaced_and_foreign_files_are_reported_not_read(relative: str) -> None:
    disk = fresh_disk()
    put(disk, f"{DIRS[0]}/{relative}", bk.idx_file(KEY))
    metadata = read_bk_metadata(disk, DIRS)
    assert metadata.ledgers == ()
    assert [path for path, _ in metadata.ignored] == [f"{DIRS[0]}/{relative}"]


def test_upper_case_hex_names_are_not_the_files_bookkeeper_opens() -> None:
    disk = fresh_disk()
    put(disk, f"{DIRS[0]}/1/2c/12C.idx", bk.idx_file(KEY))
    refs, ignored = find_idx_files(disk, DIRS)
    assert refs == []
    assert "would be 1/2c/12c.idx" in ignored[0][1]


def test_row_torn_headers_are_collected_and_damaged_ones_raise() -> None:
    disk = fresh_disk()
    put_idx(disk, DIRS[0], 1, b"")
    put_idx(disk, DIRS[0], 2, bytes(1024))
    put_idx(disk, DIRS[0], 3, bk.idx_file(KEY)[:20])
    put_idx(disk, DIRS[0], 4, bk.idx_file(KEY))
    metadata = read_bk_metadata(disk, DIRS)
    assert [ledger.ledger_id for ledger in metadata.ledgers] == [4]
    assert [path for path, _ in metadata.torn] == [
        f"{DIRS[0]}/0/1/1.idx",
        f"{DIRS[0]}/0/2/2.idx",
        f"{DIRS[0]}/0/3/3.idx",
    ]
    put_idx(disk, DIRS[1], 9, bk.idx_file(KEY, version=5))
    with pytest.raises(BkIndexDamaged, match=r"/bk/l1/current/0/9/9\.idx offset 4"):
        read_bk_metadata(disk, DIRS)


def test_a_dbledgerstorage_database_is_noticed() -> None:
    disk = fresh_disk()
    put(disk, f"{DIRS[1]}/ledgers/CURRENT", b"MANIFEST-000001\n")
    metadata = read_bk_metadata(disk, DIRS)
    assert metadata.db_ledgers_dirs == (f"{DIRS[1]}/ledgers",)
    assert metadata.found_anything
    assert not read_bk_metadata(fresh_disk(), DIRS).found_anything


def test_describe_idx_file_names_the_ledger_from_the_path() -> None:
    disk = fresh_disk()
    path = put_idx(disk, DIRS[0], 300, bk.idx_file(KEY, {0: 5, 1: 6}, fenced=True))
    summary = describe_idx_file(disk, path)
    assert summary["ledger_id"] == 300
    assert summary["path"] == path
    assert summary["fenced"] is True
    assert summary["positions"] == 2
    assert summary["relocation_copy"] is False


# --- the rebuild ----------------------------------------------------------------------------------


def test_rebuild_gives_ledgers_their_keys_and_fences_from_the_idx_headers() -> None:
    disk = fresh_disk()
    log = bk_layout.build_log([(1, 0, b"a"), (2, 0, b"b"), (3, 0, b"c")])
    put(disk, f"{DIRS[0]}/0.log", log.data)
    put_idx(disk, DIRS[0], 1, bk.idx_file(KEY, {0: bk.location(0, 1028)}))
    put_idx(disk, DIRS[1], 2, bk.idx_file(b"", fenced=True, lac=bk.lac_buffer(2, 0)))
    put_idx(disk, DIRS[1], 4, bk.idx_file(OTHER, version=0))  # no entry in any log
    put_idx(disk, DIRS[0], 5, bk.idx_file(KEY, fenced=True))  # deleted in bkref's index
    index = LedgerIndex.load(disk, INDEX_DIR)
    index.delete_ledger(LedgerId(5))
    lines: list[str] = []
    stats = rebuild_index(disk, DIRS, index, lines.append)

    assert index.master_key(LedgerId(1)) == KEY
    assert not index.is_fenced(LedgerId(1))
    assert index.master_key(LedgerId(2)) == b""  # an empty key is a key
    assert index.is_fenced(LedgerId(2))
    assert index.master_key(LedgerId(3)) is None  # no .idx: only the journal can tell
    assert index.master_key(LedgerId(4)) == OTHER
    assert index.last_entry(LedgerId(4)) is None
    assert index.is_deleted(LedgerId(5))
    assert not index.has_ledger(LedgerId(5))
    assert index.get_location(LedgerId(1), EntryId(0)) == bk.location(0, log.entries[0].offset)
    assert (stats.bk_keys, stats.bk_fences) == (3, 1)
    assert stats.entries_indexed == 3
    assert any("1 with an explicit LAC, not carried over" in line for line in lines)
    index.check_invariants()

    index.flush()  # what the recovery checkpoint does: the keys and fences are durable
    again = LedgerIndex.load(disk, INDEX_DIR)
    assert again.master_key(LedgerId(4)) == OTHER
    assert again.is_fenced(LedgerId(2))


def test_rebuild_reports_torn_headers_and_refuses_damaged_ones_before_putting_anything() -> None:
    disk = fresh_disk()
    put(disk, f"{DIRS[0]}/0.log", bk_layout.build_log([(1, 0, b"a")]).data)
    put_idx(disk, DIRS[0], 1, b"BKLE")
    lines: list[str] = []
    index = LedgerIndex.load(disk, INDEX_DIR)
    rebuild_index(disk, DIRS, index, lines.append)
    assert index.master_key(LedgerId(1)) is None
    assert any("0/1/1.idx: not carried over" in line for line in lines)

    put_idx(disk, DIRS[0], 2, bk.idx_file(KEY, key_len=-3))
    fresh = LedgerIndex.load(disk, INDEX_DIR)
    with pytest.raises(BkIndexDamaged):
        rebuild_index(disk, DIRS, fresh)
    assert fresh.ledgers() == []
