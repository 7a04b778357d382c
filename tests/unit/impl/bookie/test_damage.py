"""Damage is refused, never silently repaired (issue 10, Build item 2): one test per row of the
"Damage" tables of spec/format/journal.md (journals and lastMark), spec/format/entry_log.md
(entry logs and lastId) and spec/format/ledger_index.md (segments and deleted-ledgers).

Each test builds a bookie on the simulated disk, stops it (a crash that loses nothing
acknowledged, or a clean shutdown), does to one file what an operator or a bad disk does, and
starts again. A row a crash can leave must start; a row no crash leaves must stop with
DamagedFile naming the file (and the offset where one applies), and with the disk exactly as
it was: nothing written, so the recovery checkpoint never made the damage permanent. The test
ids are the rows' ids on the pages (tests/unit/impl/bookie/test_damage.py::ROWS keeps them
in step).

Every row also runs through ``bkref inspect`` (issue 26, item 1): ``refused`` and ``starts``
write the damaged disk to real directories first and inspect them as an operator would (the
journal directory with ``--ledger-dir`` for each ledger directory, and each ledger directory
with the others), and both recovery and inspect must agree with the row's verdict on its
page: "refuses" is a refused start and a problem in inspect's report (exit 1), "accepts" a
start and no problem (warnings allowed).
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from impl.bookie.bookie import Bookie
from impl.format import names
from impl.format.journal import HEADER_SIZE, SECTOR_SIZE
from impl.fs.api import join
from impl.fs.os_backend import OsFileSystem
from impl.journal.last_mark import LogMark
from impl.limits import Limits
from models.fs.simdisk import SimDisk
from proofs.cli.inspect import inspect_dir
from proofs.damage.inspect_verdict import materialize
from spec.crash import LoseUnsynced
from spec.errors import BookieIOError, DamagedFile, NoEntry, NoLedger
from spec.ids import EntryId, LedgerId
from tests.paths import ROOT
from tests.unit.impl.bookie.test_bookie import (
    JOURNAL,
    KEY,
    LEDGERS,
    add_and_ack,
    body,
    journal_files,
    make_config,
    open_bookie,
)

JOURNAL_DIR = join(JOURNAL, "current")
LEDGER0 = join(LEDGERS[0], "current")
INDEX_DIR = join(LEDGER0, names.INDEX_DIR_NAME)
DELETED = join(INDEX_DIR, names.DELETED_FILE_NAME)
LAST_MARKS = tuple(join(d, "current", "lastMark") for d in LEDGERS)

# --- helpers --------------------------------------------------------------------------------------


def overwrite(disk: SimDisk, path: str, data: bytes) -> None:
    """Replace a file's bytes durably: damage done by someone else, not by a crash."""
    handle = disk.open(path, create=True)
    handle.truncate(0)
    handle.pwrite(0, data)
    handle.fsync()
    handle.close()


def patch(disk: SimDisk, path: str, offset: int, data: bytes) -> None:
    raw = disk.read_file(path)
    overwrite(disk, path, raw[:offset] + data + raw[offset + len(data) :])


def flip(disk: SimDisk, path: str, offset: int) -> None:
    raw = disk.read_file(path)
    patch(disk, path, offset, bytes([raw[offset] ^ 0x10]))


def newest_journal(disk: SimDisk) -> str:
    return join(JOURNAL_DIR, max(journal_files(disk), key=lambda n: int(n[:-4], 16)))


def record_offsets(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of every data or meta record of a V5+ journal, padding skipped."""
    found, position = [], HEADER_SIZE
    while position + 4 <= len(data):
        (length,) = struct.unpack_from(">i", data, position)
        if length == 0:
            break
        if length == -0x100:
            (zeros,) = struct.unpack_from(">i", data, position + 4)
            position += 8 + zeros
            continue
        found.append((position, length))
        position += 4 + length
    return found


def groups_after_mark(entries: int = 6) -> tuple[SimDisk, str]:
    """A bookie whose newest journal holds ``entries`` acknowledged adds after lastMark, one
    group (one flush, padded to 512) each, and a fence; then a crash that loses nothing
    acknowledged. Returns the disk and the journal."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(entries):
        add_and_ack(bookie, 1, entry, body(1, entry, size=300))
    bookie.fence(LedgerId(1), KEY)
    bookie.journal_force()
    disk.crash(LoseUnsynced())
    return disk, newest_journal(disk)


def checkpointed(*, deletes: int = 2) -> tuple[SimDisk, Bookie]:
    """A bookie with two ledgers, a fence and ``deletes`` deleted ledgers, checkpointed and
    shut down cleanly: every lastMark records the index's coverage."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    for ledger in (1, 2):
        for entry in range(3):
            add_and_ack(bookie, ledger, entry, body(ledger, entry))
    for ledger in range(10, 10 + deletes):
        add_and_ack(bookie, ledger, 0, body(ledger, 0))
        bookie.delete_ledger(LedgerId(ledger))
    bookie.fence(LedgerId(1), KEY)
    bookie.journal_force()
    bookie.checkpoint()
    add_and_ack(bookie, 2, 3, body(2, 3))  # a second segment at shutdown
    bookie.shutdown()
    return disk, bookie


def _table_verdicts() -> dict[str, str]:
    """Row id -> "refuses" or "accepts", from the "what recovery does" column of each page's
    Damage table."""
    verdicts: dict[str, str] = {}
    for page in PAGES:
        text = (ROOT / "spec" / "format" / page).read_text(encoding="utf-8")
        section = text.split("\n## Damage\n", 1)[1].split("\n## ", 1)[0]
        for row, does in re.findall(
            r"^\| ([a-z]\d+) \|(?:[^|]*\|){2} *([a-z]+)", section, flags=re.MULTILINE
        ):
            verdicts[row] = does
    return verdicts


#: The row the running test checks (set by the autouse fixture below), and the rows checked
#: through both recovery and inspect so far.
_ROW: list[str] = []
AGREED: set[str] = set()


@pytest.fixture(autouse=True)
def _row_under_test(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    name = request.node.originalname
    row = name.split("_")[1] if name.startswith("test_") else ""
    _ROW[:] = [row, str(tmp_path)]
    yield
    _ROW.clear()
    if row in _table_verdicts():
        assert row in AGREED, f"row {row}'s test never ran the disk through recovery and inspect"


def inspect_problems(disk: SimDisk, under: Path | None = None) -> list[str]:
    """What ``bkref inspect`` calls damage in the bookie on ``disk``: the journal directory
    with every ledger directory's lastMark, and each ledger directory with the others. The
    disk is written to a new directory under ``under`` (the running row's own by default)."""
    base = under if under is not None else Path(_ROW[1])
    root = base / f"inspect-{len(list(base.glob('inspect-*')))}"
    materialize(disk, root)
    ledgers = [str(root / d.lstrip("/")) for d in LEDGERS]
    fs = OsFileSystem()
    problems = inspect_dir(fs, str(root / JOURNAL.lstrip("/")), ledgers).problems
    for ledger in ledgers:
        others = [other for other in ledgers if other != ledger]
        problems += inspect_dir(fs, ledger, others).problems
    return problems


def agree(disk: SimDisk, recovery: str) -> None:
    """Recovery did ``recovery`` ("refuses" or "accepts") with the disk as it is now (before
    recovery wrote anything): the row's table verdict must say the same, and so must
    inspect."""
    row = _ROW[0] if _ROW else ""
    expected = _table_verdicts().get(row)
    if expected is None:
        return  # a helper used by a test that is no row of a table
    assert recovery == expected, f"row {row}: the table says {expected}, recovery {recovery}"
    problems = inspect_problems(disk)
    said = "refuses" if problems else "accepts"
    assert said == expected, f"row {row}: the table says {expected}, inspect: {problems}"
    AGREED.add(row)


def refused(disk: SimDisk, path: str, offset: int | None = None, *, text: str = "") -> DamagedFile:
    """Starting refuses the disk with DamagedFile naming ``path`` (and ``offset``), and
    writes nothing; inspect agrees (``agree``)."""
    before = disk.current_snapshot()
    with pytest.raises(DamagedFile) as caught:
        open_bookie(disk)
    error = caught.value
    assert error.path == path, str(error)
    if offset is not None:
        assert error.offset == offset, str(error)
    assert text in str(error)
    assert "What to do:" in str(error)
    assert disk.current_snapshot() == before, "recovery wrote before it refused"
    agree(disk, "refuses")
    return error


def starts(disk: SimDisk) -> Bookie:
    """Starting accepts the disk; inspect, run on the disk as it was before, agrees."""
    pending_inspect = inspect_problems(disk) if _ROW and _ROW[0] in _table_verdicts() else None
    bookie = open_bookie(disk)
    bookie.check_invariants()
    if pending_inspect is not None:
        expected = _table_verdicts()[_ROW[0]]
        assert expected == "accepts", f"row {_ROW[0]}: the table says {expected}, recovery accepts"
        assert not pending_inspect, (
            f"row {_ROW[0]}: the table says accepts, inspect: {pending_inspect}"
        )
        AGREED.add(_ROW[0])
    return bookie


# --- journal (spec/format/journal.md, "Damage") ---------------------------------------------------


def test_j1_the_last_group_cut_short_is_a_crash_state() -> None:
    disk, journal = groups_after_mark()
    raw = disk.read_file(journal)
    last, _length = record_offsets(raw)[-1]
    overwrite(disk, journal, raw[: last + 10])  # the fence record's group, torn
    bookie = starts(disk)
    assert bookie.read_entry(LedgerId(1), EntryId(5)) == body(1, 5, size=300)


def test_j2_the_last_group_zeroed_in_whole_sectors_is_a_crash_state() -> None:
    disk, journal = groups_after_mark()
    raw = disk.read_file(journal)
    last_group = len(raw) - SECTOR_SIZE  # the fence's group: one sector
    overwrite(disk, journal, raw[:last_group] + bytes(SECTOR_SIZE))
    bookie = starts(disk)
    assert bookie.read_entry(LedgerId(1), EntryId(5)) == body(1, 5, size=300)


def test_j3_four_zero_bytes_in_the_middle_are_refused() -> None:
    disk, journal = groups_after_mark()
    second, _length = record_offsets(disk.read_file(journal))[1]
    patch(disk, journal, second, bytes(4))
    error = refused(disk, journal, second, text="zero length")
    assert "skipReplayJournalInvalidRecord=true starts without" in str(error)


def test_j4_an_earlier_group_zeroed_in_whole_sectors_is_refused() -> None:
    disk, journal = groups_after_mark()
    offsets = record_offsets(disk.read_file(journal))
    second = next(offset for offset, _length in offsets[1:] if offset % SECTOR_SIZE == 0)
    patch(disk, journal, second, bytes(SECTOR_SIZE))  # the second group's first sector
    refused(disk, journal, second, text="a later group of records starts")


@pytest.mark.parametrize("length", [-5, 3, 0x7FFFFFFF], ids=["negative", "too short", "too long"])
def test_j5_a_length_turned_invalid_is_refused(length: int) -> None:
    disk, journal = groups_after_mark()
    second, _length = record_offsets(disk.read_file(journal))[1]
    patch(disk, journal, second, struct.pack(">i", length))
    refused(disk, journal, second, text="invalid record")


def test_j6_a_length_turned_into_another_legal_one_is_refused() -> None:
    disk, journal = groups_after_mark()
    second, length = record_offsets(disk.read_file(journal))[1]
    patch(disk, journal, second, struct.pack(">i", length + 40))  # misparses from there
    refused(disk, journal)


def test_j7_a_flipped_payload_byte_is_not_detectable() -> None:
    """The journal format (BookKeeper's) has no checksum: a changed body byte replays as it
    is. BookKeeper's clients check every entry's digest on read."""
    disk, journal = groups_after_mark()
    entry0, _length = record_offsets(disk.read_file(journal))[1]  # after the key record
    flip(disk, journal, entry0 + 4 + 16 + 5)
    bookie = starts(disk)
    assert bookie.read_entry(LedgerId(1), EntryId(0)) != body(1, 0, size=300)


def test_j8_the_journal_lastmark_names_missing_is_refused() -> None:
    disk, _bookie = checkpointed()
    mark_journal = join(JOURNAL_DIR, names.journal_file_name(_bookie.last_mark.journal_id))
    disk.unlink(mark_journal)
    error = refused(disk, mark_journal, text="is missing")
    assert "Do not move the lastMark files aside" in str(error)


def test_j9_a_foreign_file_named_like_a_journal_is_refused() -> None:
    disk, journal = groups_after_mark()
    foreign = join(
        JOURNAL_DIR, names.journal_file_name(int(journal.rsplit("/", 1)[1][:-4], 16) + 1)
    )
    overwrite(disk, foreign, b"JunkJunkJunkJunk" * 40)
    refused(disk, foreign, 0, text="invalid record")


def test_j10_a_flipped_magic_reads_as_junk_and_is_refused() -> None:
    disk, journal = groups_after_mark()
    flip(disk, journal, 0)
    refused(disk, journal, 0, text="read as a version 1 journal")


def test_j11_an_empty_or_header_only_newest_journal_is_a_crash_state() -> None:
    disk, journal = groups_after_mark()
    newer = names.journal_file_name(int(journal.rsplit("/", 1)[1][:-4], 16) + 1)
    overwrite(disk, join(JOURNAL_DIR, newer), b"")
    starts(disk)


def test_j12_a_journal_between_the_mark_and_the_newest_deleted_is_not_detectable() -> None:
    """Journal ids are not consecutive (clock milliseconds), so a missing middle journal
    cannot be told from one never written: its records are lost without a word."""
    disk = SimDisk()
    bookie = open_bookie(disk, limits=Limits(journal_file_max_bytes=2048))
    for ledger in (1, 2, 3):  # each ledger in its own journal: they roll over at 2 KiB
        for entry in range(3):
            add_and_ack(bookie, ledger, entry, body(ledger, entry, size=600))
    disk.crash(LoseUnsynced())
    journals = sorted(journal_files(disk), key=lambda n: int(n[:-4], 16))
    assert len(journals) >= 3
    mark_journal = names.journal_file_name(bookie.last_mark.journal_id)
    middle = journals[len(journals) // 2]
    assert middle not in (mark_journal, journals[-1])
    disk.unlink(join(JOURNAL_DIR, middle))
    bookie = starts(disk)
    assert bookie.read_entry(LedgerId(1), EntryId(0)) == body(1, 0, size=600)
    assert bookie.read_entry(LedgerId(3), EntryId(2)) == body(3, 2, size=600)


def test_j13_a_version_outside_1_to_6_is_refused() -> None:
    disk, journal = groups_after_mark()
    patch(disk, journal, 4, struct.pack(">i", 9))
    error = refused(disk, journal, 4, text="format version 9")
    assert "Do not move it away" in error.advice


def test_j14_a_journal_cut_inside_an_earlier_group_is_not_detectable() -> None:
    """With nothing after the cut, it cannot be told from a last group torn by a crash: the
    groups after it are lost without a word."""
    disk, journal = groups_after_mark()
    second = next(o for o, _n in record_offsets(disk.read_file(journal))[1:] if o % 512 == 0)
    overwrite(disk, journal, disk.read_file(journal)[: second + 10])
    bookie = starts(disk)
    with pytest.raises(NoEntry):
        bookie.read_entry(LedgerId(1), EntryId(5))


def groups_after_checkpoint() -> tuple[SimDisk, str, LogMark]:
    """Issue 26, item 1: adds, a checkpoint, a fence and a delete, then ten adds each in a
    group of its own after lastMark, and a crash that loses nothing acknowledged. Returns
    the disk, the journal and lastMark (the end of a group)."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(3):
        add_and_ack(bookie, 1, entry, body(1, entry))
    bookie.checkpoint()
    mark = bookie.last_mark
    bookie.fence(LedgerId(1), KEY)
    add_and_ack(bookie, 5, 0, body(5, 0))
    bookie.delete_ledger(LedgerId(5))
    for entry in range(10):
        add_and_ack(bookie, 2, entry, body(2, entry))
    disk.crash(LoseUnsynced())
    journal = join(JOURNAL_DIR, names.journal_file_name(mark.journal_id))
    assert len(disk.read_file(journal)) > mark.offset + 9 * SECTOR_SIZE
    return disk, journal, mark


def test_j15_the_group_at_lastmarks_offset_zeroed_with_groups_after_it_is_refused() -> None:
    """The issue's silent loss: the later-group check was skipped at the mark itself, so the
    start replayed nothing after it and lost ten acknowledged adds for good (the recovery
    checkpoint moved lastMark past them)."""
    disk, journal, mark = groups_after_checkpoint()
    patch(disk, journal, mark.offset, bytes(SECTOR_SIZE))
    refused(disk, journal, mark.offset, text="a later group of records starts")


@pytest.mark.parametrize("whole", [False, True], ids=["header", "whole journal"])
def test_j19_a_later_journals_header_zeroed_with_records_after_it_is_refused(whole: bool) -> None:
    """Found by generated damage (proofs/damage/): a journal after lastMark's, its header
    zeroed (or the whole of it), was read as version 1, its first length zero taken for a
    torn last group (or for a header that never reached the disk), and every acknowledged
    add in it lost without a word. bkref writes only versions 4 to 6,
    each with its header synced before the first record."""
    disk = SimDisk()
    limits = Limits(journal_file_max_bytes=4 * SECTOR_SIZE)
    bookie = open_bookie(disk, limits=limits)
    for entry in range(8):
        add_and_ack(bookie, 1, entry, body(1, entry, size=300))
    disk.crash(LoseUnsynced())
    mark = names.journal_file_name(bookie.last_mark.journal_id)
    journals = sorted(journal_files(disk))
    after = [name for name in journals if name > mark]
    later = join(JOURNAL_DIR, after[0])  # records in it, and a header-only journal after it
    assert len(disk.read_file(later)) > HEADER_SIZE, journals
    size = len(disk.read_file(later)) if whole else HEADER_SIZE
    patch(disk, later, 0, bytes(size))
    refused(disk, later, 0, text="no BKLG header")


def test_j20_two_journals_swapped_is_not_detectable() -> None:
    """A journal does not carry its id: with lastMark inside the older journal, on a group
    boundary that is a group boundary of the newer one's bytes too (every V5+ group ends on a
    sector), the swapped files replay without a complaint, and the acknowledged adds that only
    the newer journal's first groups held are gone. Counted as undetectable by the damage
    check (proofs/damage/oracle.py)."""
    disk = SimDisk()
    bookie = open_bookie(disk, limits=Limits(journal_file_max_bytes=6 * SECTOR_SIZE))
    for entry in range(2):
        add_and_ack(bookie, 1, entry, body(1, entry, size=300))
    bookie.checkpoint()
    mark = bookie.last_mark
    for entry in range(2, 10):
        add_and_ack(bookie, 1, entry, body(1, entry, size=300))
    disk.crash(LoseUnsynced())
    older = join(JOURNAL_DIR, names.journal_file_name(mark.journal_id))
    newer = join(
        JOURNAL_DIR, sorted(n for n in journal_files(disk) if n > older.rsplit("/")[-1])[0]
    )
    first, second = disk.read_file(older), disk.read_file(newer)
    assert mark.offset % SECTOR_SIZE == 0 and len(second) > mark.offset
    overwrite(disk, older, second)
    overwrite(disk, newer, first)
    bookie = starts(disk)
    lost = []
    for entry in range(10):
        try:
            bookie.read_entry(LedgerId(1), EntryId(entry))
        except NoEntry:
            lost.append(entry)
    assert lost, "every add survived: the swap was harmless here, and the row shows nothing"


def test_j21_every_group_but_the_last_zeroed_is_not_detectable() -> None:
    """Found by generated damage (proofs/damage/): with every group between lastMark and the
    last one zeroed, padding and all, the bytes after the mark are those of a last group
    whose first sectors never reached the disk (j16): accepted, and the zeroed groups'
    acknowledged adds are gone. Counted as undetectable by the damage check."""
    disk, journal = groups_after_mark()
    raw = disk.read_file(journal)
    last = record_offsets(raw)[-1][0]
    assert last % SECTOR_SIZE == 0 and last > HEADER_SIZE
    patch(disk, journal, HEADER_SIZE, bytes(last - HEADER_SIZE))
    bookie = starts(disk)
    with pytest.raises((NoEntry, NoLedger)):  # the key record was in a zeroed group too
        bookie.read_entry(LedgerId(1), EntryId(0))


def test_j16_the_last_groups_first_sector_zeroed_and_a_later_one_written_is_a_crash_state() -> None:
    """A group's sectors reach the disk in any order: its first may be zeros (the size
    durable, the data not) while a later one holds data. Nothing of it was acknowledged."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(3):
        add_and_ack(bookie, 1, entry, body(1, entry, size=300))
    last = bookie.add_entry(LedgerId(1), EntryId(3), KEY, body(1, 3, size=900))
    bookie.journal_force()
    assert last.wait(5)
    disk.crash(LoseUnsynced())
    journal = newest_journal(disk)
    raw = disk.read_file(journal)
    group = record_offsets(raw)[-1][0]
    assert group % SECTOR_SIZE == 0 and len(raw) - group == 2 * SECTOR_SIZE
    patch(disk, journal, group, bytes(SECTOR_SIZE))
    bookie = starts(disk)
    assert bookie.read_entry(LedgerId(1), EntryId(2)) == body(1, 2, size=300)


def test_j17_zeros_inside_a_v4_journal_are_an_end() -> None:
    """Without padding a group does not start on a sector: a crash can leave zeros anywhere
    in the last group of a V4 journal, so a zero length there is an end."""
    disk = SimDisk()
    bookie = open_bookie(disk, make_config("journalFormatVersionToWrite=4"))
    for entry in range(4):
        add_and_ack(bookie, 1, entry, body(1, entry))
    disk.crash(LoseUnsynced())
    journal = newest_journal(disk)
    raw = disk.read_file(journal)
    assert raw[4:8] == struct.pack(">i", 4)
    third = [offset for offset, _length in _v4_records(raw)][2]
    patch(disk, journal, third, bytes(4))
    bookie = starts(disk)
    assert bookie.read_entry(LedgerId(1), EntryId(0)) == body(1, 0)


def _v4_records(data: bytes) -> list[tuple[int, int]]:
    found, position = [], 8
    while position + 4 <= len(data):
        (length,) = struct.unpack_from(">i", data, position)
        if length <= 0:
            break
        found.append((position, length))
        position += 4 + length
    return found


def test_j18_an_earlier_group_zeroed_after_a_bookkeeper_lastmark_is_an_end() -> None:
    """BookKeeper may have several groups in flight when it crashes, so after its own
    lastMark (16 bytes, no index coverage) a hole with a group after it is a crash state."""
    disk, journal = groups_after_mark()
    journal_id = int(journal.rsplit("/", 1)[1][:-4], 16)
    _bookkeeper_mark(disk, LogMark(journal_id, HEADER_SIZE))
    offsets = record_offsets(disk.read_file(journal))
    second = next(offset for offset, _length in offsets[1:] if offset % SECTOR_SIZE == 0)
    patch(disk, journal, second, bytes(SECTOR_SIZE))
    bookie = starts(disk)
    assert bookie.read_entry(LedgerId(1), EntryId(0)) == body(1, 0, size=300)


# --- lastMark (spec/format/journal.md, "Damage") --------------------------------------------------


def test_m1_no_lastmark_anywhere_replays_every_journal() -> None:
    disk, _bookie = checkpointed()
    for path in LAST_MARKS:
        disk.unlink(path)
    bookie = starts(disk)
    assert bookie.read_entry(LedgerId(2), EntryId(3)) == body(2, 3)


def test_m2_an_empty_lastmark_is_bookkeepers_crash_state() -> None:
    disk, _bookie = checkpointed()
    overwrite(disk, LAST_MARKS[0], b"")
    starts(disk)


@pytest.mark.parametrize("size", [1, 15, 17, 39, 41], ids=lambda n: f"{n} bytes")
def test_m3_a_lastmark_of_a_wrong_size_is_refused(size: int) -> None:
    disk, _bookie = checkpointed()
    raw = disk.read_file(LAST_MARKS[1])
    overwrite(disk, LAST_MARKS[1], (raw + bytes(64))[:size])
    refused(disk, LAST_MARKS[1], text="lastMark holds 16")


def test_m4_a_negative_field_is_refused() -> None:
    disk, _bookie = checkpointed()
    overwrite(disk, LAST_MARKS[0], struct.pack(">qq", -1, 5))
    refused(disk, LAST_MARKS[0], text="negative field")


@pytest.mark.parametrize("offset", [3, 12, 18, 25, 37], ids=lambda n: f"byte {n}")
def test_m5_a_flipped_byte_of_a_bkref_lastmark_is_refused(offset: int) -> None:
    disk, _bookie = checkpointed()
    flip(disk, LAST_MARKS[0], offset)
    refused(disk, LAST_MARKS[0], text="CRC")


def _bookkeeper_mark(disk: SimDisk, mark: LogMark) -> None:
    """lastMark as BookKeeper writes it (16 bytes, no coverage) in every directory."""
    for path in LAST_MARKS:
        overwrite(disk, path, struct.pack(">qq", mark.journal_id, mark.offset))


@pytest.mark.parametrize("coverage", [True, False], ids=["bkref", "bookkeeper"])
def test_m6_a_mark_past_the_end_of_its_journal_is_refused(coverage: bool) -> None:
    disk, journal = groups_after_mark()
    size = len(disk.read_file(journal))
    journal_id = int(journal.rsplit("/", 1)[1][:-4], 16)
    if coverage:
        raw = disk.read_file(LAST_MARKS[0])
        mark = struct.pack(">qq", journal_id, size + SECTOR_SIZE)
        fixed = mark + raw[16:36]
        for path in LAST_MARKS:
            overwrite(disk, path, fixed + struct.pack(">I", zlib.crc32(fixed)))
    else:
        _bookkeeper_mark(disk, LogMark(journal_id, size + SECTOR_SIZE))
    refused(disk, LAST_MARKS[0], text="points past the end of journal")


@pytest.mark.parametrize("where", ["inside a record", "past the records"])
def test_m7_a_mark_off_a_record_boundary_is_refused(where: str) -> None:
    disk, journal = groups_after_mark()
    raw = disk.read_file(journal)
    journal_id = int(journal.rsplit("/", 1)[1][:-4], 16)
    second, _length = record_offsets(raw)[1]
    if where == "inside a record":
        offset = second + 20
    else:  # zeros appended (a crash state of their own), and the mark among them
        overwrite(disk, journal, raw + bytes(2 * SECTOR_SIZE))
        offset = len(raw) + SECTOR_SIZE
    _bookkeeper_mark(disk, LogMark(journal_id, offset))
    refused(disk, LAST_MARKS[0], text="record")


def test_m10_an_older_lastmark_off_a_record_boundary_in_another_directory_is_refused() -> None:
    """Recovery reads the largest mark, yet an older one no crash leaves is damage too: it
    becomes the mark the day the larger one is deleted (the advice of m3 to m7)."""
    disk, bookie = checkpointed()
    mark = bookie.last_mark
    assert mark.offset > HEADER_SIZE + 8
    overwrite(disk, LAST_MARKS[1], struct.pack(">qq", mark.journal_id, HEADER_SIZE + 8))
    refused(disk, LAST_MARKS[1], text="record")


def test_m8_an_older_lastmark_in_one_directory_is_a_crash_state() -> None:
    disk, _bookie = checkpointed()
    overwrite(disk, LAST_MARKS[1], disk.read_file(LAST_MARKS[1])[:16])  # BookKeeper's, older
    _bookie_after = starts(disk)
    assert _bookie_after.last_mark >= _bookie.last_mark


def test_m9_a_lastmark_tmp_leftover_is_ignored() -> None:
    disk, _bookie = checkpointed()
    overwrite(disk, LAST_MARKS[0] + ".tmp", b"garbage")
    starts(disk)


# --- entry logs and lastId (spec/format/entry_log.md, "Damage") -----------------------------------


def _logs(disk: SimDisk) -> list[str]:
    return sorted(
        join(d, "current", n)
        for d in LEDGERS
        for n in disk.listdir(join(d, "current"))
        if names.parse_log_file_name(n) is not None
    )


def _indexed_log(disk: SimDisk) -> str:
    """The largest entry log: it holds entries the index places."""
    return max(_logs(disk), key=lambda path: len(disk.read_file(path)))


def test_e1_an_indexed_entry_log_deleted_is_refused() -> None:
    disk, _bookie = checkpointed()
    log = _indexed_log(disk)
    disk.unlink(log)
    refused(disk, log.rsplit("/", 1)[1], text="in no ledger directory")


def test_e2_an_indexed_entry_log_truncated_is_refused() -> None:
    disk, _bookie = checkpointed()
    log = _indexed_log(disk)
    overwrite(disk, log, disk.read_file(log)[:1030])
    refused(disk, log, 1030, text="truncated")


def test_e2_an_indexed_entry_log_cut_inside_its_last_entry_is_refused() -> None:
    """Found by generated damage (proofs/damage/): a cut after the last indexed entry's ids
    but inside its body passed the size check and failed that read (io_error) instead."""
    disk, _bookie = checkpointed()
    log = _indexed_log(disk)
    raw = disk.read_file(log)
    cut = _last_record_start(raw) + 4 + 16 + 3  # past its size and ids, inside its body
    overwrite(disk, log, raw[:cut])
    refused(disk, log, cut, text="inside the last entry")


def _last_record_start(raw: bytes) -> int:
    """Where the last record of an entry log starts (its size field), walking from the
    header (spec/format/entry_log.md); the ledgers map, if any, ends the walk."""
    offset, last = 1024, 1024
    while offset + 4 <= len(raw):
        size = int.from_bytes(raw[offset : offset + 4], "big", signed=True)
        if (
            size < 16
            or offset + 4 + size > len(raw)
            or raw[offset + 4 : offset + 12] == b"\xff" * 8
        ):
            break
        last, offset = offset, offset + 4 + size
    return last


def _two_logs() -> SimDisk:
    """A bookie with entries in several rotated logs of one size (each add fills one),
    checkpointed, then a crash that loses nothing acknowledged."""
    disk = SimDisk()
    bookie = open_bookie(disk, make_config("logSizeLimit=1400"))
    for entry in range(4):
        add_and_ack(bookie, 1, entry, body(1, entry, size=300))
    bookie.checkpoint()
    disk.crash(LoseUnsynced())
    return disk


def test_e8_two_entry_logs_swapped_fail_their_reads() -> None:
    """A log's header does not carry its id: swapped logs start, and each read of an entry
    the index places in them finds another record (io_error, naming the log)."""
    disk = _two_logs()
    logs = [path for path in _logs(disk) if len(disk.read_file(path)) > 1024][:2]
    assert len(logs) == 2, _logs(disk)
    first, second = (disk.read_file(path) for path in logs)
    overwrite(disk, logs[0], second)
    overwrite(disk, logs[1], first)
    bookie = starts(disk)
    failed = 0
    for entry in range(4):
        try:
            bookie.read_entry(LedgerId(1), EntryId(entry))
        except BookieIOError as exc:
            assert ".log: at offset" in str(exc), str(exc)
            failed += 1
    assert failed, "every read found its record: the swap changed nothing here"


def test_e9_an_indexed_entry_log_in_two_ledger_directories_is_refused() -> None:
    disk = _two_logs()
    log = _indexed_log(disk)
    directory, name = log.rsplit("/", 1)
    other = next(join(d, "current") for d in LEDGERS if join(d, "current") != directory)
    copy = join(other, name)
    foreign = next(path for path in _logs(disk) if path != log)
    overwrite(disk, copy, disk.read_file(foreign))
    # The refusal names the copy a read would not take: the later ledger directory's.
    later = max((log, copy), key=lambda path: LEDGERS.index(path.split("/current/")[0]))
    error = refused(disk, later)
    assert "in 2 ledger directories" in str(error) and log in str(error) and copy in str(error)


def test_e3_a_flipped_id_in_an_entry_log_record_fails_that_read_only() -> None:
    """Recovery does not read what the index holds; the read checks the record's ids and
    answers a typed error naming the log and offset (io_error)."""
    disk, bookie = checkpointed()
    log = _indexed_log(disk)
    flip(disk, log, 1024 + 4 + 7)  # the first record's ledger id
    again = starts(disk)
    with pytest.raises(BookieIOError, match=r"\.log: at offset \d+ found ledger"):
        for ledger in (1, 2):
            for entry in range(3):
                again.read_entry(LedgerId(ledger), EntryId(entry))
    del bookie


def test_e4_a_flipped_body_byte_in_an_entry_log_is_not_detectable() -> None:
    """The entry log format (BookKeeper's) has no checksum; clients check digests."""
    disk, _bookie = checkpointed()
    log = _indexed_log(disk)
    raw = disk.read_file(log)
    flip(disk, log, len(raw) - 3 if len(raw) < 1200 else 1024 + 4 + 16 + 2)
    starts(disk)


def test_e5_a_torn_tail_after_the_indexed_entries_is_a_crash_state() -> None:
    disk, _bookie = checkpointed()
    log = _indexed_log(disk)
    overwrite(disk, log, disk.read_file(log) + b"\x00\x00\x01\x00" + b"torn")
    starts(disk)


def test_e6_a_foreign_or_empty_file_named_like_an_entry_log_is_left_alone() -> None:
    disk, _bookie = checkpointed()
    highest = max(names.parse_log_file_name(p.rsplit("/", 1)[1]) or 0 for p in _logs(disk))
    foreign = join(LEDGERS[1], "current", names.log_file_name(highest + 5))
    overwrite(disk, foreign, b"")  # BookKeeper's preallocated log after a clean close
    bookie = starts(disk)
    add_and_ack(bookie, 3, 0, body(3, 0))
    assert disk.read_file(foreign) == b""  # never written over


@pytest.mark.parametrize("content", [b"", b"zz\n", b"0\n", b"7fffffff\n"], ids=repr)
def test_e7_lastid_is_a_hint_any_content_is_a_crash_state(content: bytes) -> None:
    disk, _bookie = checkpointed()
    before = {path: disk.read_file(path) for path in _logs(disk)}
    overwrite(disk, join(LEDGER0, "lastId"), content)
    bookie = starts(disk)
    for entry in range(4):
        add_and_ack(bookie, 3, entry, body(3, entry, size=900))
    bookie.checkpoint()
    for path, data in before.items():  # no log was written over
        assert disk.read_file(path)[: len(data)] == data, path
    assert bookie.read_entry(LedgerId(2), EntryId(3)) == body(2, 3)


# --- ledger index (spec/format/ledger_index.md, "Damage") -----------------------------------------


def _segments(disk: SimDisk) -> list[str]:
    return sorted(n for n in disk.listdir(INDEX_DIR) if n.endswith(".seg"))


def test_i1_the_newest_segment_deleted_is_refused() -> None:
    disk, _bookie = checkpointed()
    newest = join(INDEX_DIR, _segments(disk)[-1])
    disk.unlink(newest)
    refused(disk, newest, text="segments were deleted")


def test_i2_the_newest_segment_of_an_interrupted_flush_missing_is_a_crash_state() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 1, 0, body(1, 0))
    bookie.checkpoint_flush()  # a segment lastMark does not cover yet
    newest = join(INDEX_DIR, _segments(disk)[-1])
    disk.crash(LoseUnsynced())
    disk.unlink(newest)  # its rename did not survive
    again = starts(disk)
    assert again.read_entry(LedgerId(1), EntryId(0)) == body(1, 0)


def test_i3_the_index_directory_emptied_is_refused() -> None:
    """Not rebuilt from the entry logs: that would lose master keys, fences and deletes."""
    disk, _bookie = checkpointed()
    newest = join(INDEX_DIR, _segments(disk)[-1])
    for name in disk.listdir(INDEX_DIR):
        disk.unlink(join(INDEX_DIR, name))
    refused(disk, newest, text="holds no segment")


def test_i4_an_older_segment_of_the_chain_deleted_is_refused() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(3):
        add_and_ack(bookie, 1, entry, body(1, entry))
        bookie.checkpoint()
    bookie.shutdown()
    segments = _segments(disk)
    assert len(segments) >= 3
    middle = join(INDEX_DIR, segments[-2])
    disk.unlink(middle)
    refused(disk, middle, text="is missing")


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "appended bytes"])
def test_i5_a_segment_changed_is_refused(damage: str) -> None:
    disk, _bookie = checkpointed()
    segment = max(
        (join(INDEX_DIR, n) for n in _segments(disk)), key=lambda p: len(disk.read_file(p))
    )
    raw = disk.read_file(segment)
    middle = len(raw) // 2
    spoiled = {
        "flipped byte": raw[:middle] + bytes([raw[middle] ^ 1]) + raw[middle + 1 :],
        "cut short": raw[:-5],
        "appended bytes": raw + b"\0" * 8,
    }[damage]
    overwrite(disk, segment, spoiled)
    refused(disk, segment, text="Do not move it aside")


def test_i6_a_tmp_segment_or_a_foreign_file_in_the_index_directory_is_ignored() -> None:
    disk, _bookie = checkpointed()
    overwrite(disk, join(INDEX_DIR, "0000000000000099.seg.tmp"), b"half a segment")
    overwrite(disk, join(INDEX_DIR, "README"), b"an operator's note")
    starts(disk)


def test_d1_the_deleted_ledgers_file_removed_is_refused() -> None:
    disk, _bookie = checkpointed()
    disk.unlink(DELETED)
    error = refused(disk, DELETED, 0, text="would come back")
    assert "move" not in error.advice.split("Do not")[0]


def test_d2_the_deleted_ledgers_file_cut_by_whole_records_is_refused() -> None:
    disk, _bookie = checkpointed(deletes=3)
    overwrite(disk, DELETED, disk.read_file(DELETED)[:16])
    refused(disk, DELETED, 16, text="3 durable deletes")


@pytest.mark.parametrize("offset", [2, 7, 13], ids=["magic", "ledger id", "crc"])
def test_d3_a_flipped_byte_in_the_last_record_is_refused(offset: int) -> None:
    disk, _bookie = checkpointed(deletes=2)
    flip(disk, DELETED, 16 + offset)
    error = refused(disk, DELETED, 16)
    assert "every ledger it names would come back" in error.advice


def test_d4_a_flipped_byte_in_an_earlier_record_is_refused() -> None:
    disk, _bookie = checkpointed(deletes=3)
    flip(disk, DELETED, 16 + 6)
    refused(disk, DELETED, 16, text="intact record at offset 32 follows")


def test_d5_a_piece_shorter_than_a_record_at_the_end_is_refused() -> None:
    disk, _bookie = checkpointed(deletes=2)
    overwrite(disk, DELETED, disk.read_file(DELETED)[:-5])
    refused(disk, DELETED, 16)


@pytest.mark.parametrize(
    "tail", [bytes(16), bytes(range(100, 116))], ids=["zeros", "a sector's garbage"]
)
def test_d6_an_interrupted_append_is_a_crash_state(tail: bytes) -> None:
    """What a crash leaves of a delete that never returned: zeros (the size reached the disk,
    the data did not) or a torn sector's garbage. The delete was not acknowledged."""
    disk, _bookie = checkpointed(deletes=2)
    overwrite(disk, DELETED, disk.read_file(DELETED) + tail)
    bookie = starts(disk)
    assert bookie.inspect() is not None


def test_d7_two_damaged_records_at_the_end_are_refused() -> None:
    disk, _bookie = checkpointed(deletes=2)
    overwrite(disk, DELETED, disk.read_file(DELETED) + bytes(32))
    refused(disk, DELETED, 32, text="both not intact")


def test_d8_a_delete_after_the_last_checkpoint_removed_is_refused() -> None:
    """lastMark counts the deletes durable at the last checkpoint; the coverage record in the
    journal directory counts every delete when it is acknowledged (issue 26, item 2), so a
    delete after the last checkpoint, its record cut away, is refused too."""
    disk, bookie = checkpointed(deletes=2)
    again = open_bookie(disk)
    add_and_ack(again, 20, 0, body(20, 0))
    again.delete_ledger(LedgerId(20))
    disk.crash(LoseUnsynced())
    overwrite(disk, DELETED, disk.read_file(DELETED)[:-16])
    error = refused(disk, join(JOURNAL_DIR, names.COVERAGE_FILE_NAME), text="older copy")
    assert "1 ledger deleted after" in error.problem
    del bookie


ROWS: dict[str, Callable[..., None]] = {
    name.split("_")[1]: test
    for name, test in dict(globals()).items()
    if name.startswith("test_") and callable(test) and name.split("_")[1][1:].isdigit()
}

PAGES = ("journal.md", "entry_log.md", "ledger_index.md")


def test_every_row_of_the_damage_tables_has_its_test_and_every_test_its_row() -> None:
    rows: set[str] = set()
    for page in PAGES:
        text = (ROOT / "spec" / "format" / page).read_text(encoding="utf-8")
        section = text.split("\n## Damage\n", 1)[1].split("\n## ", 1)[0]
        rows.update(re.findall(r"^\| ([a-z]\d+) \|", section, flags=re.MULTILINE))
    assert rows, "no Damage table found"
    assert rows == set(ROWS), (sorted(rows - set(ROWS)), sorted(set(ROWS) - rows))
