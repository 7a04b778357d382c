"""The journal codec (impl/format/journal.py) against spec/format/journal.md and against the
independent builder tests/unit/bk_journal_layout.py."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import impl.format.journal as fmt
from tests.unit import bk_journal_layout as bk

ids = st.integers(min_value=0, max_value=2**63 - 1)
alignments = st.integers(min_value=1, max_value=16).map(lambda n: n * 512)


@pytest.mark.parametrize(("version", "size"), [(1, 0), (2, 8), (3, 8), (4, 8), (5, 512), (6, 512)])
def test_header_size_per_version(version: int, size: int) -> None:
    assert fmt.header_size(version) == size
    assert len(bk.header(version)) == size


@pytest.mark.parametrize("version", [4, 5, 6])
def test_encode_header_is_the_page_header(version: int) -> None:
    assert fmt.encode_header(version) == bk.header(version)
    assert fmt.decode_version(fmt.encode_header(version)[:8]) == version


@pytest.mark.parametrize("version", [1, 2, 3, 7])
def test_writers_refuse_versions_they_do_not_write(version: int) -> None:
    with pytest.raises(AssertionError):
        fmt.encode_header(version)


def test_decode_version_reads_short_or_foreign_files_as_v1() -> None:
    assert fmt.decode_version(b"") == fmt.V1
    assert fmt.decode_version(b"BKLG\x00\x00") == fmt.V1  # fewer than 8 bytes
    assert fmt.decode_version(b"JunkJunk") == fmt.V1
    assert fmt.decode_version(b"BKLG" + struct.pack(">i", 99)) == 99  # the caller refuses it
    assert fmt.decode_version(b"BKLG" + struct.pack(">i", -1)) == -1


@given(ledger=ids, entry=ids, body=st.binary(max_size=64))
@settings(max_examples=50, deadline=None)
def test_data_record_is_length_and_payload(ledger: int, entry: int, body: bytes) -> None:
    payload = bk.entry_payload(ledger, entry, body)
    encoded = fmt.encode_data_record(payload)
    assert encoded == bk.record(payload)
    assert struct.unpack(">i", encoded[:4])[0] == len(encoded) - 4
    assert fmt.record_entry_id(encoded) == entry


@given(ledger=ids, key=st.binary(max_size=40))
@settings(max_examples=50, deadline=None)
def test_meta_records_match_the_page(ledger: int, key: bytes) -> None:
    assert fmt.encode_key_record(ledger, key) == bk.record(bk.key_payload(ledger, key))
    assert fmt.encode_fence_record(ledger) == bk.record(bk.fence_payload(ledger))
    assert fmt.encode_lac_record(ledger, key) == bk.record(bk.lac_payload(ledger, key))
    assert fmt.record_entry_id(fmt.encode_key_record(ledger, key)) == fmt.METAENTRY_ID_LEDGER_KEY


def test_data_records_refuse_negative_ids() -> None:
    with pytest.raises(AssertionError):
        fmt.encode_data_record(bk.entry_payload(1, -1, b""))
    with pytest.raises(AssertionError):
        fmt.encode_data_record(bk.entry_payload(-1, 0, b""))
    with pytest.raises(AssertionError):
        fmt.encode_record(b"short")


@given(offset=st.integers(min_value=0, max_value=10**7), alignment=alignments)
@settings(max_examples=300, deadline=None)
def test_padding_ends_on_a_boundary_and_matches_the_page(offset: int, alignment: int) -> None:
    padding = fmt.encode_padding(offset, alignment)
    assert padding == bk.padding(offset, alignment)
    assert (offset + len(padding)) % alignment == 0
    assert len(padding) == fmt.padding_length(offset, alignment)
    if offset % alignment == 0:
        assert padding == b""
        return
    assert 8 <= len(padding) < alignment + 8
    mask, zeros = struct.unpack(">ii", padding[:8])
    assert mask == fmt.PADDING_MASK
    assert zeros == len(padding) - 8
    assert padding[8:] == bytes(zeros)


@pytest.mark.parametrize(("offset", "total"), [(512, 0), (583, 441), (1016, 8), (1020, 516)])
def test_padding_small_gap_cases(offset: int, total: int) -> None:
    # 1020: 4 bytes left cannot hold the 8-byte padding header, so it runs a whole
    # alignment further (Journal.writePaddingBytes).
    assert fmt.padding_length(offset, 512) == total


def test_decode_meta_records_by_version() -> None:
    key = bk.key_payload(3, b"secret")
    assert fmt.decode_meta_record(3, 3, fmt.METAENTRY_ID_LEDGER_KEY, key) == ("key", b"secret")
    assert fmt.decode_meta_record(4, 3, fmt.METAENTRY_ID_FENCE_KEY, bk.fence_payload(3)) == (
        "fence",
        b"",
    )
    lac = bk.lac_payload(3, b"\x01\x02")
    assert fmt.decode_meta_record(6, 3, fmt.METAENTRY_ID_LEDGER_EXPLICITLAC, lac) == (
        "lac",
        b"\x01\x02",
    )
    assert fmt.decode_meta_record(6, 3, fmt.METAENTRY_ID_FORCE_LEDGER, bk.fence_payload(3)) is None
    assert fmt.decode_meta_record(6, 3, -7, bk.fence_payload(3)) is None


@pytest.mark.parametrize(
    ("version", "entry_id", "payload"),
    [
        (2, -0x1000, bk.key_payload(1, b"k")),  # keys exist from V3
        (3, -0x2000, bk.fence_payload(1)),  # fences from V4
        (5, -0x8000, bk.lac_payload(1, b"l")),  # explicit LACs from V6
    ],
)
def test_meta_records_older_than_their_version_are_invalid(
    version: int, entry_id: int, payload: bytes
) -> None:
    with pytest.raises(fmt.InvalidRecord, match="from version"):
        fmt.decode_meta_record(version, 1, entry_id, payload)


def test_meta_bodies_that_overrun_their_record_are_invalid() -> None:
    bad_length = struct.pack(">qqi", 1, fmt.METAENTRY_ID_LEDGER_KEY, 10) + b"abc"
    with pytest.raises(fmt.InvalidRecord, match="10 bytes follow but holds 3"):
        fmt.decode_meta_record(6, 1, fmt.METAENTRY_ID_LEDGER_KEY, bad_length)
    negative = struct.pack(">qqi", 1, fmt.METAENTRY_ID_LEDGER_KEY, -1)
    with pytest.raises(fmt.InvalidRecord):
        fmt.decode_meta_record(6, 1, fmt.METAENTRY_ID_LEDGER_KEY, negative)
    no_length = struct.pack(">qq", 1, fmt.METAENTRY_ID_LEDGER_EXPLICITLAC)
    with pytest.raises(fmt.InvalidRecord, match="no length field"):
        fmt.decode_meta_record(6, 1, fmt.METAENTRY_ID_LEDGER_EXPLICITLAC, no_length)
    trailing = bk.key_payload(1, b"k") + b"ignored"
    assert fmt.decode_meta_record(6, 1, fmt.METAENTRY_ID_LEDGER_KEY, trailing) == ("key", b"k")
