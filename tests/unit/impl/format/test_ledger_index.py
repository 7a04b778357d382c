"""impl/format/ledger_index.py, the ledger index codec, against spec/format/ledger_index.md.

The page is normative: its constant table must equal the codec's constants (with the index's
file names, impl/format/names.py, and the merge policy's bounds, impl/limits.py), and its
worked examples must be the bytes the codec writes and reads. Every kind of damaged ledger
block is refused with its reason, and no bytes at all make a decoder raise. The index's
behaviour on disk is tests/unit/impl/index/test_ledger_index.py.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import impl.format.ledger_index as codec
import spec.ids
from impl.format import names
from impl.limits import LIMITS
from spec.ids import Location, make_location
from tests.unit import format_page

PAGE = format_page.page_path("ledger_index.md")


def loc(log_id: int, offset: int) -> Location:
    return make_location(log_id, offset)  # type: ignore[arg-type]


# --- damaged blocks -------------------------------------------------------------------------------


def _block(key: bytes = b"k") -> bytes:
    """Ledger 1, key ``key``, entries 0 and 1: head 0..15, key 16.., then the pairs."""
    block, _ = codec.encode_ledger_block(1, key, False, [(0, 5), (1, 6)])
    return block


def _splice(data: bytes, offset: int, new: bytes) -> bytes:
    return data[:offset] + new + data[offset + len(new) :]


BAD_BLOCKS: dict[str, tuple[Callable[[], bytes], str]] = {
    "negative ledger id": (lambda: _splice(_block(), 0, b"\xff"), "negative ledger id"),
    "unknown flag": (lambda: _splice(_block(), 8, b"\x00\x05"), "unknown flag bits"),
    "key without flag": (lambda: _splice(_block(), 8, b"\x00\x00"), "without the has-key"),
    "key too long": (lambda: _splice(_block(), 10, b"\x07\xd0"), "above 1024"),
    "negative entry": (lambda: _splice(_block(), 17, b"\xff" * 8), "negative entry id"),
    "entry twice": (lambda: _splice(_block(), 33, _block()[17:25]), "appears twice"),
    "too many entries": (lambda: _splice(_block(), 12, b"\x00\x00\x00\x03"), "past the end"),
    "empty block": (lambda: struct.pack(">qHHI", 1, 0, 0, 0), "no key, no fence and no entry"),
    "ledger twice": (lambda: _block() + _block(), "ledger 1 has two blocks"),
}


@pytest.mark.parametrize("case", sorted(BAD_BLOCKS))
def test_a_damaged_block_is_refused_with_its_reason(case: str) -> None:
    build, reason = BAD_BLOCKS[case]
    body = build()
    ledgers = 2 if case == "ledger twice" else 1
    entries = 4 if case == "ledger twice" else 2
    head = struct.pack(
        ">4sIIIQQQI",
        b"BKIX",
        1,
        codec.SEGMENT_KIND_FULL,
        ledgers,
        1,
        entries,
        len(body),
        zlib.crc32(body),
    )
    found = codec.decode_segment(head + struct.pack(">I", zlib.crc32(head)) + body)
    assert isinstance(found, str)
    assert reason in found


def test_the_intact_block_the_damage_cases_start_from_decodes() -> None:
    # Guards the table above: without damage, the same construction is accepted.
    body = _block()
    found = codec.decode_segment(codec.encode_segment(codec.SEGMENT_KIND_FULL, 1, [(body, 2)]))
    assert isinstance(found, codec.Segment)
    assert found.blocks[0].key == b"k"
    assert found.blocks[0].entries == {0: 5, 1: 6}


@given(st.binary(max_size=200))
@settings(max_examples=200, deadline=None)
def test_decoding_arbitrary_bytes_never_raises(data: bytes) -> None:
    for candidate in (data, codec.SEGMENT_MAGIC + data, _reencoded_any(data)):
        assert isinstance(codec.decode_segment(candidate), codec.Segment | str)
    assert isinstance(codec.decode_deleted_file(data), tuple | codec.DeletedFileDamage)


def _reencoded_any(data: bytes) -> bytes:
    """Arbitrary bytes as a body behind a header with right CRCs (so the body is parsed)."""
    head = struct.pack(
        ">4sIIIQQQI", b"BKIX", 1, 0, len(data) % 4, 1, 0, len(data), zlib.crc32(data)
    )
    return head + struct.pack(">I", zlib.crc32(head)) + data


# --- the page -------------------------------------------------------------------------------------


#: The index's file names (impl/format/names.py), which the page's table lists too.
NAME_CONSTANTS = ("INDEX_DIR_NAME", "SEGMENT_SUFFIX", "TMP_SUFFIX", "DELETED_FILE_NAME")


#: The merge policy's bounds, under the names the page's table gives them: fields of the
#: production Limits (impl/limits.py), which the index is opened with by default.
POLICY_CONSTANTS = {
    "SEGMENTS_MAX": LIMITS.index_segments_max,
    "MERGE_MIN_BYTES": LIMITS.index_merge_min_bytes,
}


def module_constants() -> dict[str, object]:
    """The codec's own constants, the index's file names and the merge policy's bounds:
    what the page's table lists."""
    own = format_page.codec_constants(codec, spec.ids, (int, bytes, str))
    return own | {name: getattr(names, name) for name in NAME_CONSTANTS} | POLICY_CONSTANTS


def test_the_page_constant_table_equals_the_module() -> None:
    constants = format_page.page_constants(PAGE)
    assert len(constants) >= 19  # guards against a misread table
    assert constants == module_constants()


def _hex_blocks() -> list[bytes]:
    section = format_page.section(PAGE, "Worked example")
    blocks = re.findall(r"```hex\n(.*?)```", section, flags=re.S)
    return [format_page.parse_page_hex(block) for block in blocks]


def test_the_worked_segment_is_what_the_codec_writes_and_reads() -> None:
    segment_bytes, _ = _hex_blocks()
    assert len(segment_bytes) == 130
    blocks = [
        codec.encode_ledger_block(5, b"k1", True, [(0, loc(1, 1028)), (1, loc(1, 1053))]),
        codec.encode_ledger_block(9, None, False, [(3, loc(2, 1028))]),
    ]
    assert codec.encode_segment(codec.SEGMENT_KIND_FULL, 1, blocks) == segment_bytes
    decoded = codec.decode_segment(segment_bytes)
    assert isinstance(decoded, codec.Segment)
    assert (decoded.kind, decoded.seq, decoded.entry_count) == (codec.SEGMENT_KIND_FULL, 1, 3)
    assert [(b.ledger_id, b.key, b.fenced) for b in decoded.blocks] == [
        (5, b"k1", True),
        (9, None, False),
    ]
    assert decoded.blocks[0].entries == {0: 4294968324, 1: 4294968349}
    assert decoded.blocks[1].entries == {3: (2 << 32) | 1028}


def test_the_worked_deleted_record_is_what_the_codec_writes_and_reads() -> None:
    _, deleted_bytes = _hex_blocks()
    assert codec.encode_deleted_record(7) == deleted_bytes
    assert codec.decode_deleted_file(deleted_bytes) == ([7], 16)
