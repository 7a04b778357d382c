"""Ports of BookKeeper's IndexPersistenceMgrTest cases that fix what a reader of ``.idx`` files
must find (bookkeeper-server/src/test/java/org/apache/bookkeeper/bookie/
IndexPersistenceMgrTest.java, Apache License 2.0; the scenarios are restated, not copied).

BookKeeper's tests drive its own FileInfo and IndexPersistenceMgr; here the files those
classes leave are written by tests/unit/bk_index_layout.py (from spec/format/bk_index.md) and
read by impl/index/bk_metadata.py, which must then see what BookKeeper's own reopen sees.
"""

from __future__ import annotations

import zlib

from impl.index.bk_metadata import read_bk_metadata
from models.fs.simdisk import SimDisk
from spec.ids import LedgerId
from tests.unit import bk_index_layout as bk

DIR1 = "/bk/ledger1/current"
DIR2 = "/bk/ledger2/current"
MASTER_KEY = b"write"  # the test's masterKey
MAX_INT_LEDGER = 2**31 - 1  # Integer.MAX_VALUE, the relocation tests' ledger


def put(disk: SimDisk, path: str, data: bytes) -> None:
    disk.mkdir(path.rsplit("/", 1)[0])
    handle = disk.open(path, create=True)
    handle.pwrite(0, data)
    handle.close()


def crc32_lac(ledger_id: int, lac: int) -> bytes:
    """DigestManager.computeDigestAndPackageForSendingLac with a CRC32 digest: ledger id,
    LAC, then the CRC32 of those 16 bytes as an 8-byte long (CRC32DigestManager)."""
    head = bk.lac_buffer(ledger_id, lac, digest=b"")
    return head + zlib.crc32(head).to_bytes(8, "big")


def fresh() -> SimDisk:
    disk = SimDisk()
    disk.mkdir(DIR1)
    disk.mkdir(DIR2)
    return disk


def test_file_infos_of_various_header_versions() -> None:
    """testFileInfosOfVariousHeaderVersions: headers precreated with V0 (ledger 25) and V1
    (ledger 135), key "write", state 0 and (V1) LAC length 0, read with no explicit LAC; after
    setExplicitLac(22) and a close, the V1 header holds the LAC buffer and the V0 one none."""
    disk = fresh()
    put(disk, f"{DIR1}/{bk.idx_path(25)}", bk.header(MASTER_KEY, version=0))
    put(disk, f"{DIR1}/{bk.idx_path(135)}", bk.header(MASTER_KEY, version=1))
    precreated = {ledger.ledger_id: ledger for ledger in read_bk_metadata(disk, [DIR1]).ledgers}
    assert precreated[LedgerId(25)].explicit_lac is None
    assert precreated[LedgerId(135)].explicit_lac is None
    assert precreated[LedgerId(25)].master_key == MASTER_KEY == precreated[LedgerId(135)].master_key

    # What the close writes: writeHeader with the header version the file has.
    put(disk, f"{DIR1}/{bk.idx_path(25)}", bk.header(MASTER_KEY, version=0, lac=crc32_lac(25, 22)))
    put(
        disk, f"{DIR1}/{bk.idx_path(135)}", bk.header(MASTER_KEY, version=1, lac=crc32_lac(135, 22))
    )
    reopened = {ledger.ledger_id: ledger for ledger in read_bk_metadata(disk, [DIR1]).ledgers}
    assert reopened[LedgerId(25)].explicit_lac is None  # V0: the LAC is not persisted
    assert reopened[LedgerId(135)].explicit_lac == 22
    assert not reopened[LedgerId(135)].fenced


def test_index_file_relocation() -> None:
    """testIndexFileRelocation: once moved to the second directory, the file is found there
    after a clean restart."""
    disk = fresh()
    put(disk, f"{DIR2}/{bk.idx_path(MAX_INT_LEDGER)}", bk.header(MASTER_KEY))
    (ledger,) = read_bk_metadata(disk, [DIR1, DIR2]).ledgers
    assert ledger.path == f"{DIR2}/ff/ff/7fffffff.idx"


def test_index_file_relocation_crash_before_original_file_deleted() -> None:
    """testIndexFileRelocationCrashBeforeOriginalFileDeleted: the relocation copy exists (maybe
    partial) beside the original: the original, in the first directory, is the index."""
    disk = fresh()
    put(disk, f"{DIR1}/{bk.idx_path(MAX_INT_LEDGER)}", bk.header(MASTER_KEY, fenced=True))
    put(disk, f"{DIR2}/{bk.idx_path(MAX_INT_LEDGER)}.rloc", b"BKLE\0\0")  # a partial copy
    metadata = read_bk_metadata(disk, [DIR1, DIR2])
    (ledger,) = metadata.ledgers
    assert ledger.path == f"{DIR1}/ff/ff/7fffffff.idx"
    assert ledger.fenced
    assert metadata.torn == ()
    assert [path for path, _ in metadata.ignored] == [f"{DIR2}/ff/ff/7fffffff.idx.rloc"]


def test_index_file_relocation_crash_after_original_file_deleted() -> None:
    """testIndexFileRelocationCrashAfterOriginalFileDeleted: the copy was filled and synced,
    the original deleted, then the crash: the copy in the new directory is the index."""
    disk = fresh()
    put(disk, f"{DIR2}/{bk.idx_path(MAX_INT_LEDGER)}.rloc", bk.header(MASTER_KEY, fenced=True))
    (ledger,) = read_bk_metadata(disk, [DIR1, DIR2]).ledgers
    assert ledger.path == f"{DIR2}/ff/ff/7fffffff.idx.rloc"
    assert ledger.master_key == MASTER_KEY
    assert ledger.fenced
