"""impl/entrylog/reader.py against BookKeeper's behaviour and against tests/unit/bk_layout.py.

The first tests port DefaultEntryLogTest (testCorruptEntryLog, testRecoverFromLedgersMap,
testLedgersMapIsEmpty, testRecoverFromLedgersMapOnV0EntryLog) with the same entries and the
same expected numbers. Then each rule of spec/format/entry_log.md ("Metadata", "The scan"),
then properties: codec round trips, arbitrary bytes raise only typed errors, and a sealed log
cut anywhere scans back to a prefix of its entries.
"""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import impl.format.entry_log as fmt
from impl.entrylog.reader import (
    ByteSource,
    EntryLogMetadata,
    ScannedRecord,
    extract_metadata,
    iter_records,
    peek_header,
    read_entry,
    read_entry_unchecked,
    read_header,
    read_ledgers_map,
    scan,
)
from impl.fs.os_backend import OsFileSystem
from spec.errors import (
    BadEntryLength,
    BadLedgersMap,
    BkrefError,
    EntryLogError,
    NotAnEntryLog,
    ShortRead,
    WrongEntry,
)
from spec.ids import INT32_MAX, INT64_MAX, INT64_MIN, EntryLogId
from tests.unit import bk_layout
from tests.unit.bk_layout import BytesSource

LOG = EntryLogId(0)


def entry(ledger: int, entry_id: int) -> tuple[int, int, bytes]:
    """DefaultEntryLogTest.generateEntry: the body is "ledger-L-E"."""
    return (ledger, entry_id, f"ledger-{ledger}-{entry_id}".encode())


FOUR_ADDS = [entry(1, 1), entry(3, 1), entry(2, 1), entry(1, 2)]


def with_header(data: bytes, version: int, map_offset: int, count: int) -> bytes:
    """``data`` with its header fields rewritten (what the Java tests do with RandomAccessFile)."""
    fields = struct.pack(">iqi", version, map_offset, count)
    return data[:4] + fields + data[20:]


def metadata_of(data: bytes) -> tuple[str, dict[int, int]]:
    result = extract_metadata(BytesSource(data), LOG)
    return result.source, dict(result.metadata.ledgers)


# --- ported from DefaultEntryLogTest --------------------------------------------------------


def test_truncated_log_keeps_ledgers_1_and_3_by_scan() -> None:
    built = bk_layout.build_log([entry(1, 1), entry(3, 1), entry(2, 1)], rotated=False)
    assert [e.size for e in built.entries] == [26, 26, 26]
    data = built.data[:-10]
    result = extract_metadata(BytesSource(data), LOG)
    assert result.source == "scan"
    assert result.fallback_reason is not None and "offset is 0" in result.fallback_reason
    assert dict(result.metadata.ledgers) == {1: 30, 3: 30}
    assert result.metadata.total_bytes == 60
    assert result.scan is not None and result.scan.torn_tail_bytes == 30 - 10


def test_recover_from_ledgers_map() -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    header = read_header(BytesSource(built.data), LOG)
    ledgers = read_ledgers_map(BytesSource(built.data), LOG, header)
    assert ledgers == {1: 60, 2: 30, 3: 30}
    result = extract_metadata(BytesSource(built.data), LOG)
    assert result.source == "map"
    assert result.fallback_reason is None
    assert result.metadata.total_bytes == 120
    assert result.metadata.remaining_bytes(lambda ledger: True) == 120


def test_empty_map_falls_back_to_the_scan() -> None:
    data = with_header(bk_layout.build_log(FOUR_ADDS).data, 1, 40, 0)
    header = read_header(BytesSource(data), LOG)
    with pytest.raises(BadLedgersMap, match="count is 0"):
        read_ledgers_map(BytesSource(data), LOG, header)
    assert metadata_of(data) == ("scan", {1: 60, 2: 30, 3: 30})


def test_v0_header_falls_back_to_the_scan() -> None:
    data = with_header(bk_layout.build_log(FOUR_ADDS).data, 0, 0, 0)
    header = read_header(BytesSource(data), LOG)
    with pytest.raises(BadLedgersMap, match="version 0"):
        read_ledgers_map(BytesSource(data), LOG, header)
    assert metadata_of(data) == ("scan", {1: 60, 2: 30, 3: 30})


# --- the header and one entry ---------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 19])
def test_a_file_shorter_than_the_header_fields_is_not_an_entry_log(size: int) -> None:
    data = bk_layout.header()[:size]
    assert peek_header(BytesSource(data)) is None
    with pytest.raises(NotAnEntryLog, match="fewer than the 20"):
        read_header(BytesSource(data), LOG)
    with pytest.raises(NotAnEntryLog):
        extract_metadata(BytesSource(data), LOG)


def test_without_the_magic_check_a_headerless_file_scans_empty_like_bookkeeper() -> None:
    result = extract_metadata(BytesSource(b"\x00" * 7), LOG, check_magic=False)
    assert result.source == "scan"
    assert result.fallback_reason is not None and "unreadable" in result.fallback_reason
    assert dict(result.metadata.ledgers) == {}


def test_a_foreign_magic_is_not_an_entry_log_but_peek_shows_it() -> None:
    data = bk_layout.header(magic=b"BKLG") + bk_layout.record(bk_layout.payload(1, 0, b"x"))
    with pytest.raises(NotAnEntryLog, match="BKLG"):
        read_header(BytesSource(data), LOG)
    peeked = peek_header(BytesSource(data))
    assert peeked is not None and peeked.magic == b"BKLG"
    # BookKeeper never checks the magic: without the check the entry is found.
    result = extract_metadata(BytesSource(data), LOG, check_magic=False)
    assert dict(result.metadata.ledgers) == {1: 21}


def test_a_torn_header_of_20_bytes_or_more_reads_and_scans_empty() -> None:
    data = bk_layout.header()[:512]
    assert read_header(BytesSource(data), LOG).version == 1
    result = scan(BytesSource(data), LOG)
    assert result.records == ()
    assert (result.end_offset, result.torn_tail_bytes) == (512, 0)


def test_read_entry_returns_the_payload_with_its_ids() -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    src = BytesSource(built.data)
    for (ledger, entry_id, body), placed in zip(FOUR_ADDS, built.entries, strict=True):
        payload = read_entry(src, LOG, placed.offset, ledger, entry_id)
        assert payload == bk_layout.payload(ledger, entry_id, body)
        assert read_entry_unchecked(src, LOG, placed.offset) == payload


def test_read_entry_of_another_entry_is_wrong_entry() -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    with pytest.raises(WrongEntry) as info:
        read_entry(BytesSource(built.data), LOG, built.entries[1].offset, 1, 1)
    assert info.value.found == (3, 1)
    assert info.value.expected == (1, 1)


def test_read_entry_below_16_bytes_is_bad_entry_length() -> None:
    data = bk_layout.header() + struct.pack(">i", 15) + bk_layout.payload(1, 0, b"")
    with pytest.raises(BadEntryLength) as info:
        read_entry(BytesSource(data), LOG, 1028, 1, 0)
    assert info.value.size == 15
    with pytest.raises(BadEntryLength):
        read_entry_unchecked(BytesSource(data), LOG, 1028)


def test_read_entry_of_a_torn_record_is_a_short_read() -> None:
    built = bk_layout.build_log([entry(1, 1)], rotated=False)
    cut = built.data[:-3]
    with pytest.raises(ShortRead, match="wanted 26 bytes, got 23"):
        read_entry(BytesSource(cut), LOG, 1028, 1, 1)
    with pytest.raises(ShortRead, match="wanted 20 bytes"):
        read_entry(BytesSource(built.data[:1030]), LOG, 1028, 1, 1)
    with pytest.raises(ShortRead):
        read_entry(BytesSource(built.data), LOG, 10_000, 1, 1)


def test_read_entry_at_an_offset_below_4_is_a_typed_error() -> None:
    with pytest.raises(EntryLogError, match="bad location"):
        read_entry(BytesSource(bk_layout.header()), LOG, 3, 1, 1)


# --- the ledgers map: each rejection rule -------------------------------------------------


def map_reason(data: bytes) -> str:
    result = extract_metadata(BytesSource(data), LOG)
    assert result.source == "scan"
    assert result.fallback_reason is not None
    return result.fallback_reason


def test_a_map_written_before_the_header_update_is_ignored_and_the_scan_finds_all() -> None:
    built = bk_layout.build_log(FOUR_ADDS, header_updated=False)
    assert "offset is 0" in map_reason(built.data)
    assert metadata_of(built.data) == ("scan", built.ledgers)
    result = scan(BytesSource(built.data), LOG)
    assert result.map_records == 1
    assert result.torn_tail_bytes == 0


def test_header_updated_but_map_lost_falls_back_to_the_scan() -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    assert built.map_offset is not None
    zeroed = built.data[: built.map_offset] + bytes(len(built.data) - built.map_offset)
    assert "lists 0 ledgers, the header says 3" in map_reason(zeroed)
    assert metadata_of(zeroed) == ("scan", built.ledgers)
    torn = built.data[:-5]
    assert "torn" in map_reason(torn)
    assert metadata_of(torn) == ("scan", built.ledgers)


def test_a_negative_map_offset_is_rejected() -> None:
    data = with_header(bk_layout.build_log(FOUR_ADDS).data, 1, -5, 3)
    assert "negative" in map_reason(data)


def test_a_map_offset_pointing_at_an_entry_is_rejected() -> None:
    data = with_header(bk_layout.build_log(FOUR_ADDS).data, 1, 1024, 3)
    assert "ledger id 1, not -1" in map_reason(data)


def test_a_map_record_with_the_wrong_entry_id_is_rejected() -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    assert built.map_offset is not None
    at = built.map_offset + 12
    data = built.data[:at] + struct.pack(">q", -3) + built.data[at + 8 :]
    assert "entry id -3" in map_reason(data)


def test_a_count_that_disagrees_with_the_header_is_rejected() -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    assert built.map_offset is not None
    data = with_header(built.data, 1, built.map_offset, 4)
    assert "lists 3 ledgers, the header says 4" in map_reason(data)


def test_a_version_above_1_still_uses_the_map() -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    assert built.map_offset is not None
    data = with_header(built.data, 7, built.map_offset, 3)
    assert metadata_of(data) == ("map", {1: 60, 2: 30, 3: 30})


def map_log(pairs: list[tuple[int, int]], count: int, extra: bytes = b"") -> bytes:
    """A header pointing at a hand-made map record (no entries)."""
    body = struct.pack(">qqi", -1, -2, len(pairs)) + b"".join(
        struct.pack(">qq", lid, size) for lid, size in pairs
    )
    body += extra
    return bk_layout.header(1, 1024, count) + bk_layout.record(body)


def test_a_ledger_listed_twice_adds_up_and_counts_once() -> None:
    assert metadata_of(map_log([(5, 10), (5, 7)], count=1)) == ("map", {5: 17})


def test_a_negative_ledger_id_or_size_in_the_map_is_rejected() -> None:
    assert "ledger id -4 is negative" in map_reason(map_log([(-4, 10)], count=1))
    assert "negative size" in map_reason(map_log([(4, -10)], count=1))
    # A negative delta that keeps the running total >= 0 is accepted, as in Java.
    assert metadata_of(map_log([(4, 10), (4, -3)], count=1)) == ("map", {4: 7})


def test_a_running_total_past_int64_is_rejected_like_a_java_overflow() -> None:
    assert "negative size" in map_reason(map_log([(4, INT64_MAX), (4, 1)], count=1))


def test_bytes_left_over_in_a_map_record_are_rejected() -> None:
    assert "left over" in map_reason(map_log([(4, 10)], count=1, extra=b"\x00" * 3))


def test_a_map_record_with_a_zero_size_ends_the_map() -> None:
    data = map_log([(4, 10)], count=1) + bytes(8)
    assert metadata_of(data) == ("map", {4: 10})


def test_a_map_record_size_near_int32_max_is_rejected() -> None:
    data = bk_layout.header(1, 1024, 1) + struct.pack(">i", INT32_MAX - 1) + bytes(30)
    assert "overflows" in map_reason(data)


def test_a_map_in_several_batches_reads_back() -> None:
    entries = [entry(ledger, 0) for ledger in range(7)]
    built = bk_layout.build_log(entries, batch_max=3)
    result = scan(BytesSource(built.data), LOG)
    assert result.map_records == 3
    assert metadata_of(built.data) == ("map", built.ledgers)


# --- the scan ------------------------------------------------------------------------------


def test_padding_is_skipped_one_byte_at_a_time() -> None:
    built = bk_layout.build_log(FOUR_ADDS, padding_before={2: 7})
    result = scan(BytesSource(built.data), LOG)
    assert result.padding_bytes == 7
    assert [(r.ledger_id, r.entry_id, r.offset, r.size) for r in result.records] == [
        (e.ledger, e.entry, e.offset, e.size) for e in built.entries
    ]


def test_trailing_zeros_are_padding_until_fewer_than_12_bytes_remain() -> None:
    built = bk_layout.build_log(FOUR_ADDS, rotated=False)
    result = scan(BytesSource(built.data + bytes(30)), LOG)
    assert result.padding_bytes == 30 - 11
    assert result.torn_tail_bytes == 11
    assert result.ledgers() == built.ledgers


def test_after_zeros_a_record_of_256_bytes_or_more_is_misparsed_as_bookkeeper_does() -> None:
    small = bk_layout.build_log([(1, 0, b"x" * 200)], rotated=False, padding_before={0: 5})
    assert scan(BytesSource(small.data), LOG).ledgers() == {1: 220}
    big = bk_layout.build_log([(1, 0, b"x" * 300)], rotated=False, padding_before={0: 5})
    result = scan(BytesSource(big.data), LOG)
    # One byte before the size field 00 00 01 3c the scan reads 00 00 00 01: a 1-byte record.
    assert result.undersized_records[0].size == 1
    assert 1 not in result.ledgers()


def test_a_record_of_size_1_to_15_counts_for_its_ledger() -> None:
    data = (
        bk_layout.header()
        + struct.pack(">iq", 8, 9)
        + bk_layout.record(bk_layout.payload(2, 0, b""))
    )
    result = scan(BytesSource(data), LOG)
    assert [(r.ledger_id, r.size) for r in result.undersized_records] == [(9, 8)]
    assert result.ledgers() == {9: 12, 2: 20}
    assert [r.ledger_id for r in result.records] == [2]


def test_records_of_negative_ledgers_are_skipped() -> None:
    data = bk_layout.header() + bk_layout.record(bk_layout.payload(-7, 0, b"abc"))
    data += bk_layout.record(bk_layout.payload(-2, 0, b""))
    data += bk_layout.record(bk_layout.payload(3, 0, b""))
    result = scan(BytesSource(data), LOG)
    assert result.skipped_records == 2
    assert result.map_records == 0
    assert result.ledgers() == {3: 20}


def test_a_skipped_record_running_past_the_end_ends_the_scan_as_torn() -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    assert built.map_offset is not None
    data = built.data[:-1]
    result = scan(BytesSource(data), LOG)
    assert result.map_records == 0
    assert result.end_offset == built.map_offset
    assert result.torn_tail_bytes == len(data) - built.map_offset


def test_the_scan_reads_in_chunks_not_record_by_record() -> None:
    built = bk_layout.build_log([entry(i % 5, i) for i in range(2000)])
    src = BytesSource(built.data)
    result = scan(src, LOG)
    assert len(result.records) == 2000
    assert src.reads <= 2


def test_iter_records_yields_what_scan_collects() -> None:
    built = bk_layout.build_log(FOUR_ADDS, padding_before={1: 3})
    src = BytesSource(built.data)
    assert tuple(iter_records(src, LOG)) == scan(src, LOG).records


# --- value objects ------------------------------------------------------------------------


def test_metadata_totals_and_remaining_bytes() -> None:
    meta = EntryLogMetadata(log_id=EntryLogId(3), ledgers={1: 60, 2: 30, 3: 30})
    assert meta.total_bytes == 120
    assert meta.remaining_bytes(lambda ledger: ledger != 1) == 60
    assert meta.remaining_bytes(lambda ledger: False) == 0
    assert meta == EntryLogMetadata(log_id=EntryLogId(3), ledgers={3: 30, 2: 30, 1: 60})


def test_metadata_rejects_negative_ledgers_sizes_and_log_ids() -> None:
    with pytest.raises(ValueError, match="negative"):
        EntryLogMetadata(log_id=LOG, ledgers={-1: 3})
    with pytest.raises(ValueError, match="out of range"):
        EntryLogMetadata(log_id=LOG, ledgers={1: -3})
    with pytest.raises(ValueError, match="outside"):
        EntryLogMetadata(log_id=EntryLogId(2**31), ledgers={})


def test_metadata_ledgers_cannot_be_changed_through_the_object() -> None:
    source = {1: 10}
    meta = EntryLogMetadata(log_id=LOG, ledgers=source)
    source[2] = 5
    assert dict(meta.ledgers) == {1: 10}
    with pytest.raises(TypeError):
        meta.ledgers[3] = 1  # type: ignore[index]


# --- properties ---------------------------------------------------------------------------

int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(INT64_MIN, INT64_MAX)
bodies = st.binary(max_size=40)
entry_lists = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 50), bodies), min_size=0, max_size=12
)


@settings(max_examples=100, deadline=None)
@given(version=int32s, offset=int64s, count=int32s)
def test_header_round_trips_and_matches_the_page(version: int, offset: int, count: int) -> None:
    block = fmt.encode_header(version, offset, count)
    assert block == bk_layout.header(version, offset, count)
    assert fmt.decode_header(block) == fmt.Header(b"BKLO", version, offset, count)
    assert peek_header(BytesSource(block)) == fmt.decode_header(block)


@settings(max_examples=100, deadline=None)
@given(ledger=int64s, entry_id=int64s, body=bodies)
def test_record_round_trips_and_matches_the_page(ledger: int, entry_id: int, body: bytes) -> None:
    payload = fmt.encode_payload(ledger, entry_id, body)
    assert fmt.encode_record(payload) == bk_layout.record(bk_layout.payload(ledger, entry_id, body))
    data = bk_layout.header() + fmt.encode_record(payload)
    assert read_entry(BytesSource(data), LOG, 1028, ledger, entry_id) == payload


@settings(max_examples=60, deadline=None)
@given(entries=entry_lists, batch_max=st.integers(1, 4))
def test_a_built_log_reads_back_by_map_and_by_scan(
    entries: list[tuple[int, int, bytes]], batch_max: int
) -> None:
    built = bk_layout.build_log(entries, batch_max=batch_max)
    pairs = sorted(built.ledgers.items())
    assert fmt.encode_ledgers_map(pairs) == bk_layout.map_records(pairs)
    result = extract_metadata(BytesSource(built.data), LOG)
    expected_source = "map" if built.ledgers else "scan"  # an empty map is never trusted
    assert (result.source, dict(result.metadata.ledgers)) == (expected_source, built.ledgers)
    scanned = scan(BytesSource(built.data), LOG, chunk_bytes=64)
    assert scanned.records == tuple(
        ScannedRecord(e.ledger, e.entry, e.offset, e.size) for e in built.entries
    )
    assert scanned.ledgers() == built.ledgers
    assert scanned.torn_tail_bytes == 0


@settings(max_examples=3, deadline=None)
@given(
    ledgers=st.integers(10_001, 25_000),
    stride=st.integers(1, 2**40),
    base_bytes=st.integers(20, 2**40),
)
def test_a_map_of_more_than_10000_ledgers_is_batched_and_reads_back(
    ledgers: int, stride: int, base_bytes: int
) -> None:
    pairs = [(ledger * stride, base_bytes + ledger % 7) for ledger in range(ledgers)]
    encoded = fmt.encode_ledgers_map(pairs)
    assert encoded == bk_layout.map_records(pairs)
    data = bk_layout.header(1, 1024, ledgers) + encoded
    result = scan(BytesSource(data), LOG)
    assert result.map_records == -(-ledgers // 10_000)
    header = read_header(BytesSource(data), LOG)
    assert read_ledgers_map(BytesSource(data), LOG, header) == dict(pairs)


@settings(max_examples=30, deadline=None)
@given(entries=entry_lists, chunk_bytes=st.integers(20, 200))
def test_the_scan_does_not_depend_on_the_chunk_size(
    entries: list[tuple[int, int, bytes]], chunk_bytes: int
) -> None:
    built = bk_layout.build_log(entries, padding_before={0: 3})
    src = BytesSource(built.data)
    assert scan(src, LOG, chunk_bytes=chunk_bytes) == scan(src, LOG)


def _exercise_every_reader(data: bytes, offset: int) -> None:
    src = BytesSource(data)
    for call in (
        lambda: read_header(src, LOG),
        lambda: extract_metadata(src, LOG),
        lambda: extract_metadata(src, LOG, check_magic=False, chunk_bytes=32),
        lambda: scan(src, LOG, chunk_bytes=24),
        lambda: list(iter_records(src, LOG)),
        lambda: read_entry(src, LOG, offset, 1, 0),
        lambda: read_entry_unchecked(src, LOG, offset),
    ):
        with contextlib.suppress(BkrefError):
            call()
    header = peek_header(src)
    if header is not None:
        with contextlib.suppress(BadLedgersMap):
            read_ledgers_map(src, LOG, header)


@st.composite
def hostile_logs(draw: st.DrawFn) -> bytes:
    """Arbitrary bytes, or a real log with a hostile header and some bytes overwritten."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=1400))
    built = bk_layout.build_log(draw(entry_lists), batch_max=draw(st.integers(1, 3)))
    data = bytearray(built.data)
    if draw(st.booleans()):
        fields = struct.pack(">iqi", draw(int32s), draw(st.integers(-10, len(data) + 10)), 3)
        data[4:20] = fields
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, max(0, len(data) - 1)))
        data[at : at + 4] = draw(st.binary(min_size=1, max_size=4))
    return bytes(data[: draw(st.integers(0, len(data)))])


@settings(max_examples=300, deadline=None)
@given(data=hostile_logs(), offset=st.integers(-2, 1500))
def test_any_bytes_raise_only_typed_errors(data: bytes, offset: int) -> None:
    _exercise_every_reader(data, offset)


@settings(max_examples=100, deadline=None)
@given(entries=entry_lists, batch_max=st.integers(1, 3), data=st.data())
def test_any_truncation_of_a_sealed_log_scans_to_a_prefix(
    entries: list[tuple[int, int, bytes]], batch_max: int, data: st.DataObject
) -> None:
    built = bk_layout.build_log(entries, batch_max=batch_max)
    cut = data.draw(st.integers(0, len(built.data)), label="cut")
    src = BytesSource(built.data[:cut])
    result = scan(src, LOG)
    whole = [e for e in built.entries if e.offset + e.size <= cut]
    assert [(r.ledger_id, r.entry_id, r.offset) for r in result.records] == [
        (e.ledger, e.entry, e.offset) for e in whole
    ]
    ends = [end for end in [fmt.LOGFILE_HEADER_SIZE, *built.record_ends] if end <= cut]
    expected_end = max(ends) if ends else cut
    assert result.end_offset == expected_end
    assert result.torn_tail_bytes == cut - expected_end
    if cut < 20:
        with pytest.raises(NotAnEntryLog):
            extract_metadata(src, LOG)
    else:
        meta = extract_metadata(src, LOG)
        assert meta.source == ("map" if cut == len(built.data) and built.ledgers else "scan")
        prefix: dict[int, int] = {}
        for e in whole:
            prefix[e.ledger] = prefix.get(e.ledger, 0) + e.size + 4
        assert dict(meta.metadata.ledgers) == prefix


def test_a_real_file_handle_is_a_byte_source(tmp_path: Path) -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    handle = OsFileSystem().open(f"{tmp_path}/0.log", create=True)
    try:
        handle.append(built.data)
        src: ByteSource = handle  # mypy checks that FileHandle satisfies the protocol
        assert extract_metadata(src, LOG).source == "map"
        assert len(scan(src, LOG, chunk_bytes=64).records) == 4
    finally:
        handle.close()


def reference_scan(data: bytes) -> tuple[object, ...]:
    """The spec page's walk ("The scan") written plainly, one position at a time over the
    whole bytes: the oracle for the bulk scan's chunks, tight loop and skipped zero runs."""
    records, undersized, padding, maps, skipped = [], [], 0, 0, 0
    pos = fmt.LOGFILE_HEADER_SIZE
    while pos < len(data):
        if len(data) - pos < 12:
            break
        size = struct.unpack_from(">i", data, pos)[0]
        if size <= 0:
            padding, pos = padding + 1, pos + 1
            continue
        if pos + 4 + size > len(data):
            break
        ledger_id = struct.unpack_from(">q", data, pos + 4)[0]
        if ledger_id == -1:
            maps += 1
        elif ledger_id < 0:
            skipped += 1
        elif size < 16:
            undersized.append((ledger_id, pos + 4, size))
        else:
            entry_id = struct.unpack_from(">q", data, pos + 12)[0]
            records.append((ledger_id, entry_id, pos + 4, size))
        pos += 4 + size
    end = min(pos, len(data))
    return records, undersized, padding, maps, skipped, end, len(data) - end


def bulk_scan(data: bytes, chunk_bytes: int) -> tuple[object, ...]:
    result = scan(BytesSource(data), LOG, chunk_bytes=chunk_bytes)
    return (
        [tuple(r) for r in result.records],
        [(r.ledger_id, r.offset, r.size) for r in result.undersized_records],
        result.padding_bytes,
        result.map_records,
        result.skipped_records,
        result.end_offset,
        result.torn_tail_bytes,
    )


@st.composite
def messy_logs(draw: st.DrawFn) -> bytes:
    """A header, then entries, zero runs, bytes of negative sizes, map records, records of
    negative ledgers and undersized records in any order, cut anywhere."""
    data = bytearray(bk_layout.header())
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["entry", "zeros", "negative", "map", "skip", "small", "raw"]))
        if kind == "entry":
            ledger, entry_id, body = draw(st.tuples(st.integers(0, 6), int64s, bodies))
            data += bk_layout.record(bk_layout.payload(ledger, entry_id, body))
        elif kind == "zeros":
            data += bytes(draw(st.integers(1, 90)))
        elif kind == "negative":
            data += bytes([draw(st.integers(0x80, 0xFF))]) * draw(st.integers(1, 5))
        elif kind in ("map", "skip"):
            ledger = -1 if kind == "map" else draw(st.integers(INT64_MIN, -2))
            data += bk_layout.record(bk_layout.payload(ledger, 0, draw(bodies)))
        elif kind == "small":
            size = draw(st.integers(1, 15))
            data += struct.pack(">i", size) + draw(st.binary(min_size=size, max_size=size))
        else:
            data += draw(st.binary(max_size=30))
    return bytes(data[: draw(st.integers(0, len(data)))])


@settings(max_examples=400, deadline=None)
@given(data=st.one_of(messy_logs(), hostile_logs()), chunk_bytes=st.integers(20, 300))
def test_the_bulk_scan_walks_as_the_plain_reference_does(data: bytes, chunk_bytes: int) -> None:
    expected = reference_scan(data)
    assert bulk_scan(data, chunk_bytes) == expected
    assert bulk_scan(data, 1 << 20) == expected
    assert [tuple(r) for r in iter_records(BytesSource(data), LOG, chunk_bytes=chunk_bytes)] == (
        expected[0]
    )


def test_a_long_run_of_zeros_is_padding_read_in_one_chunk() -> None:
    built = bk_layout.build_log(FOUR_ADDS, rotated=False)
    zeros = 100_000
    data = built.data + bytes(zeros) + bk_layout.record(bk_layout.payload(5, 1, b"after"))
    src = BytesSource(data)
    result = scan(src, LOG)
    assert result.padding_bytes == zeros
    assert [r.ledger_id for r in result.records][-1] == 5
    assert src.reads <= 2
    assert bulk_scan(data, 64) == reference_scan(data)


@pytest.mark.parametrize("chunk_bytes", [20, 57, 1 << 20])
def test_every_cut_of_a_messy_log_scans_as_the_reference(chunk_bytes: int) -> None:
    records = [
        bk_layout.record(bk_layout.payload(ledger, ledger * 3, b"x" * ledger))
        for ledger in range(6)
    ]
    data = bk_layout.header() + records[0] + bytes(9) + records[1] + b"\xff\x80"
    data += bk_layout.record(bk_layout.payload(-1, 0, b"map")) + records[2]
    data += struct.pack(">iq", 8, 4) + records[3] + bk_layout.record(bk_layout.payload(-5, 0, b""))
    data += records[4] + bytes(15) + records[5]
    for cut in range(fmt.LOGFILE_HEADER_SIZE - 1, len(data) + 1):
        assert bulk_scan(data[:cut], chunk_bytes) == reference_scan(data[:cut]), cut
