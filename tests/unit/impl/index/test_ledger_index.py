"""impl/index/ledger_index.py, the index's behaviour over spec/format/ledger_index.md.

Semantics (put/get/last entry, keys, fences, deletion), persistence (flush, merge, load),
damage (every corrupt segment or deleted-ledgers file is a RecoveryError naming the file),
injected I/O failures, the page's worked example loaded from disk, and a Hypothesis state
machine against a plain dict model that crashes the simulated disk under every kind of crash
plan, at every operation of a flush or a delete, and checks what a reload gives back: the
state of the last returned flush or of the interrupted one, never less, never a mix, with
every acknowledged deletion and no deleted ledger coming back. The codec alone, the page's
constants and its worked examples in bytes are tests/unit/impl/format/test_ledger_index.py.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

import impl.format.ledger_index as codec
from impl.format import names
from impl.fs.api import join
from impl.index.ledger_index import IndexState, LedgerIndex, LedgerRecord, TombstoneUncertain
from impl.limits import LIMITS, Limits
from models.fs.simdisk import SimDisk
from spec.crash import CrashPlan, KeepPrefix, KeepSubset, LoseUnsynced, TornWrite
from spec.errors import FsIOError, RecoveryError
from spec.ids import EntryId, LedgerId, Location, make_location
from tests.unit.format_page import page_path, parse_page_hex, section

INDEX_DIR = "/bk/l0/current/bkref-index"
PAGE = page_path("ledger_index.md")


# --- helpers ------------------------------------------------------------------------------------


def fresh_disk() -> SimDisk:
    """A simulated disk whose ledger directory ``/bk/l0/current`` is durable."""
    disk = SimDisk()
    disk.mkdir("/bk/l0/current")
    for path in ("/", "/bk", "/bk/l0", "/bk/l0/current"):
        disk.fsync_dir(path)
    return disk


def L(value: int) -> LedgerId:
    return LedgerId(value)


def E(value: int) -> EntryId:
    return EntryId(value)


def loc(log_id: int, offset: int) -> Location:
    return make_location(log_id, offset)  # type: ignore[arg-type]


def reload(disk: SimDisk, limits: Limits = LIMITS) -> LedgerIndex:
    index = LedgerIndex.load(disk, INDEX_DIR, limits=limits)
    index.check_invariants()
    return index


def segment_path(seq: int) -> str:
    return join(INDEX_DIR, names.segment_file_name(seq))


def write_file(disk: SimDisk, path: str, data: bytes) -> None:
    """Replace a file's content durably (damage done by someone else, not by a crash)."""
    handle = disk.open(path, create=True)
    handle.truncate(0)
    handle.pwrite(0, data)
    handle.fsync()
    handle.close()
    disk.fsync_dir(INDEX_DIR)


def small_index(disk: SimDisk) -> LedgerIndex:
    index = LedgerIndex.load(disk, INDEX_DIR)
    index.set_master_key(L(1), b"key-1")
    index.put_entry(L(1), E(0), loc(1, 1028))
    index.put_entry(L(1), E(1), loc(1, 1100))
    index.set_fenced(L(2))
    index.put_entry(L(3), E(7), loc(2, 1028))
    return index


# --- semantics ------------------------------------------------------------------------------------


def test_a_missing_directory_loads_as_an_empty_index_not_persisted() -> None:
    disk = fresh_disk()
    index = reload(disk)
    assert not index.persisted
    assert index.ledgers() == []
    assert index.get_location(L(1), E(0)) is None
    assert not disk.exists(INDEX_DIR)


def test_put_get_and_last_entry() -> None:
    index = LedgerIndex.load(fresh_disk(), INDEX_DIR)
    assert index.last_entry(L(1)) is None
    index.put_entry(L(1), E(5), loc(1, 2000))
    index.put_entry(L(1), E(2), loc(1, 3000))
    assert index.get_location(L(1), E(5)) == loc(1, 2000)
    assert index.get_location(L(1), E(2)) == loc(1, 3000)
    assert index.get_location(L(1), E(3)) is None
    assert index.last_entry(L(1)) == 5  # the largest id, not the latest put
    index.put_entry(L(1), E(5), loc(4, 1028))  # compaction moved it
    assert index.get_location(L(1), E(5)) == loc(4, 1028)
    assert index.get_location(L(2), E(5)) is None
    index.check_invariants()


def test_entries_and_ledgers_come_sorted() -> None:
    index = LedgerIndex.load(fresh_disk(), INDEX_DIR)
    for ledger_id, entry_id in [(9, 3), (2, 1), (9, 0), (5, 2), (9, 1)]:
        index.put_entry(L(ledger_id), E(entry_id), loc(1, 1028 + entry_id))
    assert index.ledgers() == [2, 5, 9]
    assert index.entries(L(9)) == [(0, loc(1, 1028)), (1, loc(1, 1029)), (3, loc(1, 1031))]
    assert index.entries(L(7)) == []


def test_the_first_master_key_sticks() -> None:
    index = LedgerIndex.load(fresh_disk(), INDEX_DIR)
    assert index.master_key(L(1)) is None
    index.set_master_key(L(1), b"first")
    index.set_master_key(L(1), b"first")  # the same key again is fine
    assert index.master_key(L(1)) == b"first"
    with pytest.raises(AssertionError, match="differs from the first"):
        index.set_master_key(L(1), b"second")
    assert index.master_key(L(1)) == b"first"


def test_a_key_or_a_fence_alone_makes_a_ledger() -> None:
    index = LedgerIndex.load(fresh_disk(), INDEX_DIR)
    index.set_master_key(L(1), b"")
    index.set_fenced(L(2))
    assert index.has_ledger(L(1))
    assert index.has_ledger(L(2))
    assert not index.has_ledger(L(3))
    assert index.master_key(L(1)) == b""  # an empty key is a key
    assert index.is_fenced(L(2))
    assert not index.is_fenced(L(1))
    assert index.last_entry(L(2)) is None
    index.check_invariants()


def test_keys_fences_and_entries_survive_flush_and_reload() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    index.flush()
    loaded = reload(disk)
    assert loaded.persisted
    assert loaded.state() == index.state()
    assert loaded.master_key(L(1)) == b"key-1"
    assert loaded.is_fenced(L(2))
    assert loaded.last_entry(L(3)) == 7


def test_delete_removes_everything_and_refuses_the_id_forever() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    index.flush()
    index.delete_ledger(L(1))
    assert index.is_deleted(L(1))
    assert not index.has_ledger(L(1))
    assert index.get_location(L(1), E(0)) is None
    assert index.master_key(L(1)) is None
    assert index.last_entry(L(1)) is None
    refusals: tuple[Callable[[], None], ...] = (
        lambda: index.put_entry(L(1), E(9), loc(1, 1028)),
        lambda: index.set_master_key(L(1), b"key-1"),
        lambda: index.set_fenced(L(1)),
    )
    for refused in refusals:
        with pytest.raises(AssertionError, match="deleted"):
            refused()
    index.check_invariants()


def test_a_deletion_is_durable_when_delete_ledger_returns() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    index.flush()  # the segment holds ledger 1 ...
    index.delete_ledger(L(1))  # ... and nothing is flushed after the deletion
    disk.crash(LoseUnsynced())
    loaded = reload(disk)
    assert loaded.is_deleted(L(1))
    assert not loaded.has_ledger(L(1))
    assert loaded.get_location(L(1), E(0)) is None
    assert loaded.ledgers() == [2, 3]


def test_deleting_twice_writes_once() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    index.delete_ledger(L(3))
    before = disk.operation_count
    index.delete_ledger(L(3))
    assert disk.operation_count == before


def test_a_ledger_never_seen_can_be_deleted() -> None:
    disk = fresh_disk()
    index = LedgerIndex.load(disk, INDEX_DIR)
    index.delete_ledger(L(42))
    assert reload(disk).deleted_ledgers() == {42}


# --- flush and merge ------------------------------------------------------------------------------


def test_the_first_flush_of_an_empty_index_marks_it_persisted() -> None:
    disk = fresh_disk()
    LedgerIndex.load(disk, INDEX_DIR).flush()
    loaded = reload(disk)
    assert loaded.persisted
    assert loaded.ledgers() == []


def test_a_flush_with_nothing_changed_does_nothing() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    index.flush()
    before = disk.operation_count
    index.flush()
    assert disk.operation_count == before
    assert index.segment_seqs() == [1]


def test_a_delta_costs_what_changed_not_the_whole_index() -> None:
    disk = fresh_disk()
    index = LedgerIndex.load(disk, INDEX_DIR)
    for entry_id in range(2000):
        index.put_entry(L(1), E(entry_id), loc(1, 1028 + entry_id))
    index.flush()
    index.put_entry(L(1), E(2000), loc(2, 1028))
    index.flush()
    assert index.segment_seqs() == [1, 2]
    full = len(disk.read_file(segment_path(1)))
    delta = len(disk.read_file(segment_path(2)))
    header = codec.SEGMENT_HEADER_SIZE + codec.LEDGER_HEAD_SIZE
    assert full == header + 2000 * codec.ENTRY_PAIR_SIZE
    assert delta == header + 1 * codec.ENTRY_PAIR_SIZE
    assert reload(disk).state() == index.state()


def test_merging_by_count_keeps_at_most_segments_max_files() -> None:
    disk = fresh_disk()
    index = LedgerIndex.load(disk, INDEX_DIR, limits=Limits(index_segments_max=3))
    for flush_number in range(1, 8):
        index.put_entry(L(flush_number % 3), E(flush_number), loc(1, 1028 + flush_number))
        index.flush()
        segments = [n for n in disk.listdir(INDEX_DIR) if n.endswith(names.SEGMENT_SUFFIX)]
        assert len(segments) <= 3, segments
        assert reload(disk, limits=Limits(index_segments_max=3)).state() == index.state()
    # Flushes 1, 4 and 7 were full (1 + 2 deltas, then a merge), so 7 is the only file.
    assert index.segment_seqs() == [7]
    assert disk.listdir(INDEX_DIR) == [names.segment_file_name(7)]


def test_merging_by_size_when_deltas_reach_the_full_segment() -> None:
    limits = Limits(index_merge_min_bytes=1)  # the full segment's size decides alone
    disk = fresh_disk()
    index = LedgerIndex.load(disk, INDEX_DIR, limits=limits)
    for entry_id in range(10):
        index.put_entry(L(1), E(entry_id), loc(1, 1028 + entry_id))
    index.flush()  # full: 10 entries
    for entry_id in range(10, 14):
        index.put_entry(L(1), E(entry_id), loc(1, 1028 + entry_id))
    index.flush()  # delta of 4 entries: smaller than the full one
    assert index.segment_seqs() == [1, 2]
    for entry_id in range(14, 24):
        index.put_entry(L(1), E(entry_id), loc(1, 1028 + entry_id))
    index.flush()  # the deltas would reach the full segment's size: merge
    assert index.segment_seqs() == [3]
    assert not disk.exists(segment_path(1))
    assert not disk.exists(segment_path(2))
    assert reload(disk).state() == index.state()


def test_merged_segments_drop_deleted_ledgers() -> None:
    disk = fresh_disk()
    index = LedgerIndex.load(disk, INDEX_DIR, limits=Limits(index_segments_max=1))
    index.put_entry(L(1), E(0), loc(1, 1028))
    index.put_entry(L(2), E(0), loc(1, 1100))
    index.flush()
    index.delete_ledger(L(1))
    index.put_entry(L(2), E(1), loc(1, 1200))
    index.flush()  # index_segments_max=1: every flush is a full one
    segment = codec.decode_segment(disk.read_file(segment_path(2)))
    assert isinstance(segment, codec.Segment)
    assert [block.ledger_id for block in segment.blocks] == [2]


def test_a_leftover_tmp_file_is_ignored_and_removed_after_the_next_flush() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    index.flush()
    write_file(disk, segment_path(2) + names.TMP_SUFFIX, b"half a segment")
    loaded = reload(disk)
    assert loaded.state() == index.state()
    loaded.put_entry(L(5), E(0), loc(3, 1028))
    loaded.flush()
    assert disk.listdir(INDEX_DIR) == [names.segment_file_name(1), names.segment_file_name(2)]
    assert reload(disk).state() == loaded.state()


def test_segments_older_than_the_newest_full_one_are_not_read() -> None:
    disk = fresh_disk()
    index = LedgerIndex.load(disk, INDEX_DIR, limits=Limits(index_segments_max=1))
    index.put_entry(L(1), E(0), loc(1, 1028))
    index.flush()
    index.put_entry(L(1), E(1), loc(1, 1100))
    index.flush()  # full segment 2; segment 1 unlinked
    write_file(disk, segment_path(1), b"garbage a crash brought back")
    loaded = reload(disk)
    assert loaded.state() == index.state()
    loaded.put_entry(L(1), E(2), loc(1, 1200))
    loaded.flush()
    assert not disk.exists(segment_path(1))


# --- damage ---------------------------------------------------------------------------------------


def _reencoded(data: bytes, **fields: int) -> bytes:
    """``data`` with header fields replaced and both CRCs made right again."""
    fields_in_order = ("magic", "version", "kind", "ledgers", "seq", "entries", "body_bytes")
    values = dict(zip(fields_in_order, struct.unpack_from(">4sIIIQQQ", data), strict=True))
    values.update(fields)
    body = data[codec.SEGMENT_HEADER_SIZE :]
    head = struct.pack(">4sIIIQQQI", *values.values(), zlib.crc32(body))
    return head + struct.pack(">I", zlib.crc32(head)) + body


def _flip(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0x01]) + data[offset + 1 :]


DAMAGE: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "flipped body byte": (lambda d: _flip(d, len(d) - 3), "body's CRC32"),
    "flipped header byte": (lambda d: _flip(d, 13), "header's CRC32"),
    "cut body": (lambda d: d[:-5], "body bytes"),
    "cut header": (lambda d: d[:30], "fewer than the 48"),
    "foreign magic": (lambda d: b"XXXX" + d[4:], "not an index segment"),
    "newer version": (lambda d: _reencoded(d, version=2), "version 1 only"),
    "unknown kind": (lambda d: _reencoded(d, kind=7), "unknown segment kind"),
    "wrong sequence": (lambda d: _reencoded(d, seq=5), "sequence 0000000000000005"),
    "wrong entry count": (lambda d: _reencoded(d, entries=99), "counts 99 entries"),
    "missing block": (lambda d: _reencoded(d, ledgers=4), "cut by the end of the file"),
    "trailing bytes": (
        lambda d: _reencoded(d + b"\0" * 3, body_bytes=len(d) - 45),
        "bytes after the last",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_segment_is_a_recovery_error_naming_the_file(damage: str) -> None:
    disk = fresh_disk()
    small_index(disk).flush()
    spoil, reason = DAMAGE[damage]
    write_file(disk, segment_path(1), spoil(disk.read_file(segment_path(1))))
    with pytest.raises(RecoveryError) as caught:
        LedgerIndex.load(disk, INDEX_DIR)
    message = str(caught.value)
    assert segment_path(1) in message
    assert reason in message
    assert "restore" in message.lower()
    assert "Do not move it aside" in message  # a rebuild would lose keys, fences and deletes


def test_a_missing_segment_below_a_delta_is_a_recovery_error() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    for entry_id in range(3):
        index.put_entry(L(9), E(entry_id), loc(5, 1028))
        index.flush()
    assert index.segment_seqs() == [1, 2, 3]
    disk.unlink(segment_path(2))
    with pytest.raises(RecoveryError, match=r"0000000000000002\.seg: is missing"):
        LedgerIndex.load(disk, INDEX_DIR)


def test_a_first_segment_that_is_a_delta_is_a_recovery_error() -> None:
    disk = fresh_disk()
    disk.mkdir(INDEX_DIR)
    block = codec.encode_ledger_block(1, None, True, [])
    write_file(disk, segment_path(1), codec.encode_segment(codec.SEGMENT_KIND_DELTA, 1, [block]))
    with pytest.raises(RecoveryError, match="no full segment comes before it"):
        LedgerIndex.load(disk, INDEX_DIR)


def test_a_different_key_in_a_later_segment_is_a_recovery_error() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    index.flush()
    index.put_entry(L(1), E(2), loc(1, 1200))
    index.flush()
    block, count = codec.encode_ledger_block(1, b"other", False, [(2, loc(1, 1200))])
    write_file(
        disk, segment_path(2), codec.encode_segment(codec.SEGMENT_KIND_DELTA, 2, [(block, count)])
    )
    with pytest.raises(RecoveryError, match="another master key"):
        LedgerIndex.load(disk, INDEX_DIR)


# --- the deleted-ledgers file ---------------------------------------------------------------------


DELETED_PATH = join(INDEX_DIR, names.DELETED_FILE_NAME)


def _records(*ledger_ids: int) -> bytes:
    return b"".join(codec.encode_deleted_record(ledger_id) for ledger_id in ledger_ids)


@pytest.mark.parametrize(
    "tail",
    [b"", b"\0" * 16, bytes(range(100, 116))],
    ids=["none", "zero record", "garbage sector"],
)
def test_a_damaged_last_record_is_an_unacknowledged_deletion(tail: bytes) -> None:
    """What a crash leaves of an interrupted 16-byte append: nothing, zeros (the size reached
    the disk, the data did not) or a sector's garbage (spec/crash.py TornSectors). The damage
    a crash cannot leave is refused: tests/unit/impl/index/test_damage.py."""
    disk = fresh_disk()
    disk.mkdir(INDEX_DIR)
    write_file(disk, DELETED_PATH, _records(3, 4) + tail)
    index = reload(disk)
    assert index.deleted_ledgers() == {3, 4}
    index.delete_ledger(L(5))  # overwrites the remains
    assert disk.read_file(DELETED_PATH) == _records(3, 4, 5)
    assert reload(disk).deleted_ledgers() == {3, 4, 5}


def test_an_intact_record_after_a_damaged_one_is_a_recovery_error() -> None:
    disk = fresh_disk()
    disk.mkdir(INDEX_DIR)
    write_file(disk, DELETED_PATH, _records(3) + _flip(_records(4), 6) + _records(5))
    with pytest.raises(RecoveryError, match=r"deleted-ledgers.*offset 16 is damaged"):
        LedgerIndex.load(disk, INDEX_DIR)


def test_load_makes_a_deletion_it_found_durable() -> None:
    # A killed process wrote the record but died before its fsync: the next process sees
    # it, so a power cut afterwards must not take it back.
    disk = fresh_disk()
    disk.mkdir(INDEX_DIR)
    disk.fsync_dir("/bk/l0/current")
    handle = disk.open(DELETED_PATH, create=True)
    handle.pwrite(0, _records(8))
    assert reload(disk).is_deleted(L(8))
    disk.crash(LoseUnsynced())
    assert reload(disk).is_deleted(L(8))


# --- injected failures ----------------------------------------------------------------------------


def test_a_failed_fsync_in_flush_keeps_every_change_pending() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    disk.fail_next("fsync", INDEX_DIR)
    with pytest.raises(FsIOError):
        index.flush()
    index.check_invariants()
    index.flush()
    index.check_invariants()
    disk.crash(LoseUnsynced())
    assert reload(disk).state() == index.state()


def test_a_failed_directory_fsync_in_flush_is_retried_with_the_same_sequence() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    index.flush()
    index.put_entry(L(1), E(9), loc(3, 1028))
    disk.fail_next("fsync_dir", INDEX_DIR)
    with pytest.raises(FsIOError):
        index.flush()
    assert index.segment_seqs() == [1]
    index.flush()
    assert index.segment_seqs() == [1, 2]
    disk.crash(LoseUnsynced())
    assert reload(disk).state() == index.state()


def test_a_failed_fsync_in_delete_changes_nothing_in_memory_and_says_it_may_be_durable() -> None:
    disk = fresh_disk()
    index = small_index(disk)
    index.delete_ledger(L(2))
    disk.fail_next("fsync", INDEX_DIR)
    with pytest.raises(TombstoneUncertain) as raised:  # written: a crash may keep it
        index.delete_ledger(L(1))
    assert raised.value.ledger_id == 1
    assert not index.is_deleted(L(1))
    assert index.has_ledger(L(1))
    index.check_invariants()
    index.delete_ledger(L(1))
    disk.crash(LoseUnsynced())
    assert reload(disk).deleted_ledgers() == {1, 2}


# --- the page -------------------------------------------------------------------------------------


def _hex_blocks() -> list[bytes]:
    blocks = re.findall(r"```hex\n(.*?)```", section(PAGE, "Worked example"), flags=re.S)
    return [parse_page_hex(block) for block in blocks]


def test_the_worked_example_loads_from_disk() -> None:
    segment_bytes, deleted_bytes = _hex_blocks()
    disk = fresh_disk()
    disk.mkdir(INDEX_DIR)
    write_file(disk, join(INDEX_DIR, "0000000000000001.seg"), segment_bytes)
    write_file(disk, DELETED_PATH, deleted_bytes)
    index = reload(disk)
    assert index.state() == IndexState(
        ledgers=(
            (L(5), LedgerRecord(b"k1", True, ((E(0), loc(1, 1028)), (E(1), loc(1, 1053))))),
            (L(9), LedgerRecord(None, False, ((E(3), loc(2, 1028)),))),
        ),
        deleted=frozenset({L(7)}),
    )


# --- the state machine: model vs index, with crashes ----------------------------------------------

KEYS = (b"", b"a", b"b")


@attrs.define
class ModelLedger:
    key: bytes | None = None
    fenced: bool = False
    entries: dict[int, int] = attrs.Factory(dict)


Ledgers = tuple[tuple[LedgerId, LedgerRecord], ...]


def model_ledgers(ledgers: dict[int, ModelLedger]) -> Ledgers:
    return tuple(
        (
            L(ledger_id),
            LedgerRecord(
                ledger.key,
                ledger.fenced,
                tuple((E(e), Location(x)) for e, x in sorted(ledger.entries.items())),
            ),
        )
        for ledger_id, ledger in sorted(ledgers.items())
    )


def without(ledgers: Ledgers, deleted: frozenset[LedgerId]) -> Ledgers:
    return tuple((ledger_id, record) for ledger_id, record in ledgers if ledger_id not in deleted)


class Die(Exception):
    """The process dies at an operation of the simulated disk."""


def crash_plans(pending: int) -> st.SearchStrategy[CrashPlan]:
    return st.one_of(
        st.just(LoseUnsynced()),
        st.builds(KeepPrefix, st.integers(0, pending)),
        st.builds(TornWrite, st.integers(0, pending), st.integers(0, 3)),
        st.builds(KeepSubset, st.frozensets(st.integers(0, max(0, pending - 1)))),
    )


ledger_ids = st.integers(0, 4)


class IndexMachine(RuleBasedStateMachine):
    """The index against a dict model; crashes compare a reload with what may survive."""

    def __init__(self) -> None:
        super().__init__()
        self.disk = fresh_disk()
        self.index = LedgerIndex.load(self.disk, INDEX_DIR, limits=Limits(index_segments_max=3))
        self.ledgers: dict[int, ModelLedger] = {}
        self.deleted: set[LedgerId] = set()
        self.flushed: Ledgers = ()

    # --- operations -------------------------------------------------------------------------

    @rule(
        ledger=ledger_ids,
        entry=st.integers(0, 12),
        log=st.integers(0, 3),
        offset=st.integers(1024, 9000),
    )
    def put(self, ledger: int, entry: int, log: int, offset: int) -> None:
        location = loc(log, offset)
        if L(ledger) in self.deleted:
            with pytest.raises(AssertionError, match="deleted"):
                self.index.put_entry(L(ledger), E(entry), location)
            return
        self.index.put_entry(L(ledger), E(entry), location)
        self.ledgers.setdefault(ledger, ModelLedger()).entries[entry] = location

    @rule(ledger=ledger_ids, key=st.sampled_from(KEYS))
    def set_key(self, ledger: int, key: bytes) -> None:
        model = self.ledgers.get(ledger)
        first = model.key if model is not None else None
        if L(ledger) in self.deleted or (first is not None and first != key):
            with pytest.raises(AssertionError):
                self.index.set_master_key(L(ledger), key)
            return
        self.index.set_master_key(L(ledger), key)
        self.ledgers.setdefault(ledger, ModelLedger()).key = key

    @rule(ledger=ledger_ids)
    def fence(self, ledger: int) -> None:
        if L(ledger) in self.deleted:
            return
        self.index.set_fenced(L(ledger))
        self.ledgers.setdefault(ledger, ModelLedger()).fenced = True

    @rule(ledger=ledger_ids)
    def delete(self, ledger: int) -> None:
        self.index.delete_ledger(L(ledger))
        self.deleted.add(L(ledger))
        self.ledgers.pop(ledger, None)

    @rule()
    def flush(self) -> None:
        self.index.flush()
        self.flushed = model_ledgers(self.ledgers)

    # --- crashes ----------------------------------------------------------------------------

    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        self._crash_and_check(data, [self.flushed], maybe_deleted=None)

    @rule(data=st.data(), die_at=st.integers(1, 12))
    def die_in_flush(self, data: st.DataObject, die_at: int) -> None:
        interrupted = model_ledgers(self.ledgers)
        if self._run_until(die_at, self.index.flush):
            self.flushed = interrupted
        self._crash_and_check(data, [self.flushed, interrupted], maybe_deleted=None)

    @rule(data=st.data(), die_at=st.integers(1, 6), ledger=ledger_ids)
    def die_in_delete(self, data: st.DataObject, die_at: int, ledger: int) -> None:
        if self._run_until(die_at, lambda: self.index.delete_ledger(L(ledger))):
            self.deleted.add(L(ledger))
            self.ledgers.pop(ledger, None)
        self._crash_and_check(data, [self.flushed], maybe_deleted=L(ledger))

    def _run_until(self, die_at: int, operation: Callable[[], None]) -> bool:
        """Run ``operation``, dying at its ``die_at``-th disk operation; True if it returned."""
        count = 0

        def hook(_kind: str) -> None:
            nonlocal count
            count += 1
            if count == die_at:
                raise Die

        self.disk.on_operation = hook
        try:
            operation()
        except Die:
            return False
        finally:
            self.disk.on_operation = None
        return True

    def _crash_and_check(
        self, data: st.DataObject, candidates: list[Ledgers], maybe_deleted: LedgerId | None
    ) -> None:
        plan = data.draw(crash_plans(len(self.disk.pending_operations())), label="plan")
        self.disk.crash(plan)
        self.disk.check_invariants()
        self.index = reload(self.disk, limits=Limits(index_segments_max=3))
        found = self.index.state()
        # Every acknowledged deletion survives; only an interrupted one may be added.
        assert self.deleted <= found.deleted
        assert found.deleted <= self.deleted | {maybe_deleted} - {None}
        # The last returned flush or the interrupted one, whole, minus deleted ledgers.
        allowed = [without(candidate, found.deleted) for candidate in candidates]
        assert found.ledgers in allowed, (found.ledgers, allowed)
        self.deleted = set(found.deleted)
        self.ledgers = {
            ledger_id: ModelLedger(record.key, record.fenced, dict(record.entries))
            for ledger_id, record in found.ledgers
        }
        self.flushed = found.ledgers

    # --- after every step -------------------------------------------------------------------

    @invariant()
    def index_matches_model(self) -> None:
        self.index.check_invariants()
        expected = IndexState(ledgers=model_ledgers(self.ledgers), deleted=frozenset(self.deleted))
        assert self.index.state() == expected
        for ledger_id, ledger in self.ledgers.items():
            assert self.index.last_entry(L(ledger_id)) == max(ledger.entries, default=None)
            for entry_id, location in ledger.entries.items():
                assert self.index.get_location(L(ledger_id), E(entry_id)) == location


IndexMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestIndexMachine = IndexMachine.TestCase


@pytest.mark.slow
def test_index_machine_deep() -> None:
    run_state_machine_as_test(  # type: ignore[no-untyped-call, unused-ignore]
        IndexMachine, settings=settings(max_examples=2000, stateful_step_count=60, deadline=None)
    )
