"""impl/format/bk_index.py, the reader of BookKeeper's ledger metadata, against
spec/format/bk_index.md.

The files are written by tests/unit/bk_index_layout.py, a second reading of the page that does
not import the codec. The page's constant table must equal the codec's (and the names'), its
worked examples must decode to what the page says, every row of its damage table is a test
here (the directory-level rows are tests/unit/impl/index/test_bk_metadata.py), and no bytes
make the decoders raise anything but their typed errors.
"""

from __future__ import annotations

import contextlib
import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import impl.format.bk_index as codec
from impl.format import names
from spec.errors import BkIndexDamaged, BkIndexError, BkIndexTorn
from tests.unit import bk_index_layout as bk
from tests.unit import format_page

PAGE = format_page.page_path("bk_index.md")
KEY = bytes(range(20))


def test_the_constant_table_is_the_codecs() -> None:
    page = format_page.page_constants(PAGE)
    ours: dict[str, int | bytes | str] = {
        name: value
        for name, value in vars(codec).items()
        if name.startswith("IDX_") and isinstance(value, int | bytes)
    }
    ours |= {
        "IDX_SUFFIX": names.IDX_SUFFIX,
        "RLOC_SUFFIX": names.RLOC_SUFFIX,
        "DB_LEDGERS_DIR_NAME": names.DB_LEDGERS_DIR_NAME,
    }
    assert page == ours


def _example_blocks() -> list[str]:
    return re.findall(r"```hex\n(.*?)```", format_page.section(PAGE, "Worked example"), re.S)


def test_the_worked_example_is_what_the_page_and_the_writer_say() -> None:
    (block,) = _example_blocks()
    data = format_page.parse_page_hex(block)
    data += bytes(1048 - len(data))
    lac = bk.lac_buffer(300, 7)
    positions = {0: bk.location(1, 1028), 2: bk.location(1, 2048)}
    assert data == bk.idx_file(b"abc", positions, page_size=None, fenced=True, lac=lac)
    decoded = codec.decode_idx_file(data, "1/2c/12c.idx")
    assert decoded.header == codec.IdxHeader(
        version=1,
        master_key=b"abc",
        state_bits=1,
        explicit_lac=lac,
        header_end=43,
        slack_nonzero=False,
    )
    assert decoded.header.fenced
    assert decoded.header.lac == 7
    assert decoded.positions == ((0, (1 << 32) | 1028), (2, (1 << 32) | 2048))
    assert decoded.tail_bytes == 0
    assert "/".join(names.bk_index_path_parts(300)) == "1/2c/12c.idx" == bk.idx_path(300)


def test_the_v0_example_and_the_ledgers_value_example() -> None:
    text = format_page.section(PAGE, "Worked example")
    v0 = re.search(r"V0 header: `([0-9a-f ]+)`", text.replace("\n", " "))
    assert v0 is not None
    head = bytes.fromhex(v0.group(1))
    assert head.ljust(1024, b"\0") == bk.header(b"abc", version=0)
    decoded = codec.decode_idx_header(head.ljust(1024, b"\0"))
    assert (decoded.version, decoded.master_key, decoded.fenced, decoded.lac) == (
        0,
        b"abc",
        False,
        None,
    )
    value = re.search(r"the value `([0-9a-f ]+)`", text.replace("\n", " "))
    assert value is not None
    lac = bk.lac_buffer(300, 7)
    raw = bytes.fromhex(value.group(1)) + lac
    assert raw == bk.ledger_data(b"abc", fenced=True, lac=lac)
    assert codec.decode_ledger_data(raw) == codec.LedgerData(True, True, b"abc", lac, False)
    assert bk.ledger_key(300) == bytes.fromhex("000000000000012c")


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("key", [b"", b"k", KEY, b"\0" * 20])
@pytest.mark.parametrize("fenced", [False, True])
@pytest.mark.parametrize("with_lac", [False, True])
def test_headers_round_trip(version: int, key: bytes, fenced: bool, with_lac: bool) -> None:
    lac = bk.lac_buffer(9, 41) if with_lac else None
    data = bk.idx_file(key, {0: bk.location(3, 1100)}, version=version, fenced=fenced, lac=lac)
    decoded = codec.decode_idx_file(data)
    assert decoded.header.version == version
    assert decoded.header.master_key == key
    assert decoded.header.fenced is fenced
    if version == 1 and with_lac:
        assert decoded.header.explicit_lac == lac
        assert decoded.header.lac == 41
    else:  # a V0 header has no LAC field, whatever the writer was given
        assert decoded.header.lac is None
    assert decoded.positions == ((0, bk.location(3, 1100)),)
    assert not decoded.header.slack_nonzero


def test_the_largest_keys_that_fit_and_a_header_only_file() -> None:
    v0 = bk.header(b"x" * 1008, version=0)
    assert codec.decode_idx_header(v0).master_key == b"x" * 1008
    v1 = bk.header(b"x" * 984, lac=bk.lac_buffer(1, 2))  # 984 + 20 = 1004
    assert codec.decode_idx_header(v1).lac == 2
    # A file holding only the fields of its header (shorter than 1024) is read as BookKeeper
    # reads it: min(size, 1024) bytes.
    short = bk.header(KEY, fenced=True)[: 12 + 20 + 8]
    assert codec.decode_idx_header(short).fenced
    assert codec.decode_idx_file(short).positions == ()


def test_only_bit_0_is_the_fence_and_other_bits_are_kept() -> None:
    decoded = codec.decode_idx_header(bk.header(KEY, state_bits=0b110))
    assert not decoded.fenced
    assert decoded.state_bits == 0b110
    assert codec.decode_idx_header(bk.header(KEY, state_bits=-1)).fenced


# --- the damage table, row by row ---------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 3, 4, 7, 11])
def test_row_0_to_11_bytes_is_torn(size: int) -> None:
    data = bk.header(KEY)[:size]
    with pytest.raises(BkIndexTorn) as caught:
        codec.decode_idx_header(data, "/d/current/0/5/5.idx")
    assert caught.value.path == "/d/current/0/5/5.idx"
    assert "/d/current/0/5/5.idx" in str(caught.value)


@pytest.mark.parametrize("size", [1024, 8192])
def test_row_an_all_zero_header_is_torn(size: int) -> None:
    with pytest.raises(BkIndexTorn, match="all zeros"):
        codec.decode_idx_file(bytes(size))


@pytest.mark.parametrize(
    ("cut", "offset"), [(20, 12), (31, 12), (32, 32), (35, 32), (36, 36), (40, 40), (50, 40)]
)
def test_row_a_header_cut_inside_its_fields_is_torn_at_the_offset(cut: int, offset: int) -> None:
    # key 20 bytes: 12..31, state 32..35, LAC length 36..39, LAC 40..59
    data = bk.header(KEY, lac=bk.lac_buffer(5, 1))[:cut]
    with pytest.raises(BkIndexTorn) as caught:
        codec.decode_idx_header(data)
    assert caught.value.offset == offset


def test_row_another_signature_is_damage() -> None:
    with pytest.raises(BkIndexDamaged, match="not 'BKLE'") as caught:
        codec.decode_idx_header(bk.header(KEY, signature=b"BKLO"))
    assert caught.value.offset == 0
    assert "restore the file" in str(caught.value)
    assert "do not delete it" in str(caught.value)
    with pytest.raises(BkIndexDamaged):
        codec.decode_idx_header(b"XY")  # not a prefix of the signature


def test_row_a_newer_or_negative_version_is_damage() -> None:
    with pytest.raises(BkIndexDamaged, match="newer BookKeeper") as caught:
        codec.decode_idx_header(bk.header(KEY, version=2))
    assert caught.value.offset == 4
    with pytest.raises(BkIndexDamaged) as caught:
        codec.decode_idx_header(bk.header(KEY, version=-1))
    assert caught.value.offset == 4


def test_row_a_negative_key_length_is_damage() -> None:
    with pytest.raises(BkIndexDamaged, match="negative") as caught:
        codec.decode_idx_header(bk.header(KEY, key_len=-1))
    assert caught.value.offset == 8


def test_row_a_key_past_the_header_in_a_whole_header_is_damage() -> None:
    data = bk.header(KEY, key_len=1013)  # 12 + 1013 > 1024
    with pytest.raises(BkIndexDamaged, match="past the 1024-byte header") as caught:
        codec.decode_idx_header(data)
    assert caught.value.offset == 12
    # The same length in a file cut short of 1024 bytes is a tear, not damage.
    with pytest.raises(BkIndexTorn):
        codec.decode_idx_header(data[:600])


@pytest.mark.parametrize("lac_len", [1, 8, 15, -1, -16])
def test_row_a_lac_length_from_1_to_15_or_negative_is_damage(lac_len: int) -> None:
    data = bk.header(KEY, lac_len=lac_len)
    with pytest.raises(BkIndexDamaged, match="explicit LAC length") as caught:
        codec.decode_idx_header(data)
    assert caught.value.offset == 12 + 20 + 4


def test_row_a_lac_length_is_not_read_in_a_v0_header() -> None:
    # In V0 the bytes after the state bits are slack: whatever they hold is ignored.
    data = bytearray(bk.header(KEY, version=0))
    struct.pack_into(">i", data, 36, 7)
    decoded = codec.decode_idx_header(bytes(data))
    assert decoded.lac is None
    assert decoded.slack_nonzero


def test_row_nonzero_slack_is_ignored_and_reported() -> None:
    data = bytearray(bk.header(KEY, fenced=True))
    data[1000] = 0x55
    decoded = codec.decode_idx_header(bytes(data))
    assert decoded.fenced
    assert decoded.master_key == KEY
    assert decoded.slack_nonzero
    assert codec.describe_idx(1, bytes(data))["header_slack_nonzero"] is True


@pytest.mark.parametrize("tail", [1, 7])
def test_row_a_partial_last_position_is_ignored(tail: int) -> None:
    data = bk.idx_file(KEY, {0: bk.location(1, 1028), 1: bk.location(1, 2000)}, page_size=None)
    decoded = codec.decode_idx_file(data[: len(data) - 8 + tail])
    assert decoded.positions == ((0, bk.location(1, 1028)),)
    assert decoded.tail_bytes == tail


def test_row_a_negative_position_is_damage_at_its_offset() -> None:
    data = bk.idx_file(KEY, {0: bk.location(1, 1028), 3: -5}, page_size=None)
    with pytest.raises(BkIndexDamaged, match="entry 3") as caught:
        codec.decode_idx_file(data)
    assert caught.value.offset == 1024 + 3 * 8


def test_positions_skip_zeros_over_pages() -> None:
    positions = {0: bk.location(0, 1028), 1023: bk.location(1, 5000), 1500: bk.location(2, 9)}
    decoded = codec.decode_idx_file(bk.idx_file(KEY, positions))
    assert dict(decoded.positions) == positions
    assert list(dict(decoded.positions)) == sorted(positions)


def test_describe_summarises_a_file_and_never_raises() -> None:
    lac = bk.lac_buffer(4, 3)
    data = bk.idx_file(KEY, {0: 1, 5: 2}, fenced=True, lac=lac)
    summary = codec.describe_idx(4, data, "/x/0/4/4.idx")
    assert summary["ledger_id"] == 4
    assert summary["master_key_present"] is True
    assert summary["master_key_bytes"] == 20
    assert summary["fenced"] is True
    assert summary["explicit_lac"] == 3
    assert summary["positions"] == 2
    assert summary["last_entry"] == 5
    assert summary["header_version"] == 1
    no_key = codec.describe_idx(4, bk.idx_file(b""))
    assert no_key["master_key_bytes"] == 0
    assert no_key["fenced"] is False
    assert no_key["explicit_lac"] is None
    assert no_key["positions"] == 0
    torn = codec.describe_idx(None, b"")
    assert torn["torn"] is True
    assert "error" in torn
    damaged = codec.describe_idx(None, bk.header(KEY, version=9))
    assert damaged["torn"] is False


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=1100))
def test_no_bytes_make_the_idx_decoder_raise_an_untyped_error(data: bytes) -> None:
    with contextlib.suppress(BkIndexError):
        codec.decode_idx_file(data)
    codec.describe_idx(None, data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_no_bytes_make_the_ledger_data_decoder_raise_an_untyped_error(data: bytes) -> None:
    with contextlib.suppress(BkIndexDamaged):
        codec.decode_ledger_data(data)


# --- DbLedgerStorage's LedgerData --------------------------------------------------------------


@pytest.mark.parametrize("key", [b"", KEY, b"\0" * 20, b"x" * 300])
@pytest.mark.parametrize("fenced", [False, True])
@pytest.mark.parametrize("lac", [None, bk.lac_buffer(2, 99)])
@pytest.mark.parametrize("limbo", [None, False, True])
def test_ledger_data_round_trips(
    key: bytes, fenced: bool, lac: bytes | None, limbo: bool | None
) -> None:
    decoded = codec.decode_ledger_data(bk.ledger_data(key, fenced=fenced, lac=lac, limbo=limbo))
    assert decoded == codec.LedgerData(True, fenced, key, lac, bool(limbo))
    assert decoded.lac == (None if lac is None else 99)


def test_ledger_data_skips_unknown_fields_and_takes_the_last_repeated_value() -> None:
    extra = b"\x30\x96\x01" + b"\x3a\x02hi" + b"\x41" + bytes(8) + b"\x4d" + bytes(4)
    extra += b"\x10\x01"  # fenced again, now true: the last value wins
    decoded = codec.decode_ledger_data(bk.ledger_data(KEY, extra=extra))
    assert decoded.fenced
    assert decoded.master_key == KEY


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"\x08\x01\x10\x00", "lacks masterKey"),
        (b"\x1a\x00", "lacks exists, fenced"),
        (b"\x08\x01\x10\x00\x1a\x05ab", "past the value's end"),
        (b"\x08", "inside a varint"),
        (b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "longer than 10 bytes"),
        (b"\x0b", "wire type 3"),
        (b"\x00\x01", "field number 0"),
        (b"\x08\x01\x10\x00\x18\x01", "not length-delimited"),
        (b"\x08\x01\x10\x00\x1a\x00\x41\x00", "ends past"),
    ],
)
def test_damaged_ledger_data_is_refused(data: bytes, match: str) -> None:
    with pytest.raises(BkIndexDamaged, match=match):
        codec.decode_ledger_data(data, "ledgers")
