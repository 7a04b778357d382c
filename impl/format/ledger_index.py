"""Ledger index codec: segment files and the deleted-ledgers file, bkref's own format.

Normative page: spec/format/ledger_index.md. tests/unit/impl/format/test_ledger_index.py keeps
every constant here equal to the value the page states and checks the page's worked examples
against these functions.

Grammar (big endian throughout; the page has every field's offset)::

    segment        = header ledger_block{ledger_count}
    header         = "BKIX" version kind ledger_count seq entry_count body_bytes body_crc
                     header_crc                        ; 48 bytes, two CRC32s
    ledger_block   = int64 ledger_id uint16 flags uint16 key_len uint32 count
                     key (int64 entry_id int64 location){count}
    deleted_file   = ("BKDL" int64 ledger_id uint32 crc)* torn_remains?

Why a module of its own (beside impl/format/entry_log.py and impl/format/journal.py): the
bytes are the contract between runs of the bookie, so they are defined apart from the index's
behaviour (impl/index/ledger_index.py: what is kept in memory, when a segment is written or
merged, how a load chains segments). This module is pure: bytes in, bytes or values out;
decoders return the reason (a string, or a DeletedFileDamage with its offset) instead of
raising, and the index turns it into a RecoveryError naming the file. File names are
impl/format/names.py.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from typing import Final

import attrs

from spec.ids import INT64_MAX, EntryId, LedgerId, Location

# --- constants (spec/format/ledger_index.md, "Constants") -------------------------------------

SEGMENT_MAGIC: Final = b"BKIX"
SEGMENT_VERSION: Final = 1
SEGMENT_HEADER_SIZE: Final = 48
#: Offset of the header's own CRC32 (it covers bytes 0 up to here).
SEGMENT_HEADER_CRC_POSITION: Final = 44
SEGMENT_KIND_DELTA: Final = 0
SEGMENT_KIND_FULL: Final = 1
LEDGER_HEAD_SIZE: Final = 16
ENTRY_PAIR_SIZE: Final = 16
FLAG_HAS_KEY: Final = 1
FLAG_FENCED: Final = 2
MASTER_KEY_MAX_BYTES: Final = 1024
DELETED_RECORD_MAGIC: Final = b"BKDL"
DELETED_RECORD_SIZE: Final = 16

_HEADER = struct.Struct(">4sIIIQQQII")
_LEDGER_HEAD = struct.Struct(">qHHI")
_DELETED = struct.Struct(">4sqI")
_FLAGS_KNOWN = FLAG_HAS_KEY | FLAG_FENCED
_UINT32_MAX = 2**32 - 1
assert _HEADER.size == SEGMENT_HEADER_SIZE
assert _LEDGER_HEAD.size == LEDGER_HEAD_SIZE
assert _DELETED.size == DELETED_RECORD_SIZE
assert SEGMENT_HEADER_CRC_POSITION == SEGMENT_HEADER_SIZE - 4
assert MASTER_KEY_MAX_BYTES <= 0xFFFF


# --- decoded segments -------------------------------------------------------------------------


@attrs.frozen(hash=False)
class SegmentBlock:
    """One ledger block of a segment, decoded."""

    ledger_id: LedgerId
    key: bytes | None
    fenced: bool
    entries: dict[EntryId, Location]


@attrs.frozen(hash=False)
class Segment:
    """A decoded segment file."""

    kind: int
    seq: int
    blocks: tuple[SegmentBlock, ...]
    entry_count: int


# --- segments ---------------------------------------------------------------------------------


def encode_ledger_block(
    ledger_id: int, key: bytes | None, fenced: bool, entries: Iterable[tuple[int, int]]
) -> tuple[bytes, int]:
    """One ledger block and its entry count. ``entries`` as (entry id, location) pairs."""
    assert 0 <= ledger_id <= INT64_MAX, ledger_id
    flat = [value for pair in entries for value in pair]
    count = len(flat) // 2
    assert count <= _UINT32_MAX, count
    flags = (FLAG_HAS_KEY if key is not None else 0) | (FLAG_FENCED if fenced else 0)
    key_bytes = key if key is not None else b""
    assert len(key_bytes) <= MASTER_KEY_MAX_BYTES, len(key_bytes)
    assert flags or count, f"ledger {ledger_id}: a block needs a key, a fence or an entry"
    head = _LEDGER_HEAD.pack(ledger_id, flags, len(key_bytes), count)
    return head + key_bytes + struct.pack(f">{len(flat)}q", *flat), count


def encode_segment(kind: int, seq: int, blocks: Iterable[tuple[bytes, int]]) -> bytes:
    """A whole segment: header, then the encoded ledger blocks (``encode_ledger_block``)."""
    assert kind in (SEGMENT_KIND_DELTA, SEGMENT_KIND_FULL), kind
    assert 1 <= seq <= 2**64 - 1, seq
    parts: list[bytes] = []
    entry_count = 0
    for block, count in blocks:
        parts.append(block)
        entry_count += count
    body = b"".join(parts)
    assert len(parts) <= _UINT32_MAX, len(parts)
    head = _HEADER.pack(
        SEGMENT_MAGIC,
        SEGMENT_VERSION,
        kind,
        len(parts),
        seq,
        entry_count,
        len(body),
        zlib.crc32(body),
        0,
    )[:SEGMENT_HEADER_CRC_POSITION]
    header = head + struct.pack(">I", zlib.crc32(head))
    assert len(header) == SEGMENT_HEADER_SIZE
    return header + body


def decode_segment_header(data: bytes) -> tuple[int, int, int, int, int] | str:
    """(kind, ledger_count, seq, entry_count, body_bytes), or why the header is bad."""
    if len(data) < SEGMENT_HEADER_SIZE:
        return f"{len(data)} bytes, fewer than the {SEGMENT_HEADER_SIZE} of a header"
    magic, version, kind, ledgers, seq, entries, body_bytes, body_crc, header_crc = (
        _HEADER.unpack_from(data, 0)
    )
    if magic != SEGMENT_MAGIC:
        return f"begins with {magic!r}, not {SEGMENT_MAGIC!r}: not an index segment"
    if zlib.crc32(data[:SEGMENT_HEADER_CRC_POSITION]) != header_crc:
        return "the header's CRC32 does not match its bytes"
    if version != SEGMENT_VERSION:
        return f"format version {version}, this bkref reads version {SEGMENT_VERSION} only"
    if kind not in (SEGMENT_KIND_DELTA, SEGMENT_KIND_FULL):
        return f"unknown segment kind {kind}"
    if body_bytes != len(data) - SEGMENT_HEADER_SIZE:
        held = len(data) - SEGMENT_HEADER_SIZE
        return f"the header says {body_bytes} body bytes, the file holds {held}"
    if zlib.crc32(memoryview(data)[SEGMENT_HEADER_SIZE:]) != body_crc:
        return "the body's CRC32 does not match its bytes"
    return int(kind), int(ledgers), int(seq), int(entries), int(body_bytes)


def decode_segment(data: bytes) -> Segment | str:
    """A whole segment file, checked (spec page, "Reading a segment"), or why it is bad."""
    header = decode_segment_header(data)
    if isinstance(header, str):
        return header
    kind, ledger_count, seq, entry_count, _ = header
    blocks: list[SegmentBlock] = []
    seen: set[int] = set()
    offset = SEGMENT_HEADER_SIZE
    for _ in range(ledger_count):
        found = _decode_block(data, offset)
        if isinstance(found, str):
            return f"ledger block at offset {offset}: {found}"
        block, offset = found
        if block.ledger_id in seen:
            return f"ledger {block.ledger_id} has two blocks"
        seen.add(block.ledger_id)
        blocks.append(block)
    if offset != len(data):
        return f"{len(data) - offset} bytes after the last of its {ledger_count} ledger blocks"
    total = sum(len(block.entries) for block in blocks)
    if total != entry_count:
        return f"the header counts {entry_count} entries, the blocks hold {total}"
    return Segment(kind=kind, seq=seq, blocks=tuple(blocks), entry_count=entry_count)


def _decode_block(data: bytes, offset: int) -> tuple[SegmentBlock, int] | str:
    if offset + LEDGER_HEAD_SIZE > len(data):
        return "cut by the end of the file"
    ledger_id, flags, key_len, count = _LEDGER_HEAD.unpack_from(data, offset)
    if ledger_id < 0:
        return f"negative ledger id {ledger_id}"
    if flags & ~_FLAGS_KNOWN:
        return f"unknown flag bits {flags:#x}"
    if key_len and not flags & FLAG_HAS_KEY:
        return f"a {key_len}-byte key without the has-key flag"
    if key_len > MASTER_KEY_MAX_BYTES:
        return f"a {key_len}-byte key, above {MASTER_KEY_MAX_BYTES}"
    if not flags and not count:
        return f"ledger {ledger_id} has no key, no fence and no entry"
    start = offset + LEDGER_HEAD_SIZE
    end = start + key_len + ENTRY_PAIR_SIZE * count
    if end > len(data):
        return f"ledger {ledger_id}: {count} entries run past the end of the file"
    key = data[start : start + key_len] if flags & FLAG_HAS_KEY else None
    values = struct.unpack_from(f">{2 * count}q", data, start + key_len)
    if values and min(values) < 0:
        return f"ledger {ledger_id}: a negative entry id or location"
    entries = dict(zip(values[0::2], values[1::2], strict=True))
    if len(entries) != count:
        return f"ledger {ledger_id}: an entry id appears twice"
    block = SegmentBlock(LedgerId(ledger_id), key, bool(flags & FLAG_FENCED), entries)
    return block, end


# --- the deleted-ledgers file ----------------------------------------------------------------


def encode_deleted_record(ledger_id: int) -> bytes:
    """One 16-byte record of the deleted-ledgers file: magic, ledger id, CRC32 of both."""
    assert 0 <= ledger_id <= INT64_MAX, ledger_id
    head = _DELETED.pack(DELETED_RECORD_MAGIC, ledger_id, 0)[:12]
    return head + struct.pack(">I", zlib.crc32(head))


@attrs.frozen
class DeletedFileDamage:
    """Why a deleted-ledgers file is damaged, and the offset of the damage."""

    offset: int
    problem: str


def decode_deleted_file(data: bytes) -> tuple[list[LedgerId], int] | DeletedFileDamage:
    """The deleted ledgers and the length of the intact prefix, or why the file is damaged.

    A crash leaves at most one record that is not intact, the last one, and only as what an
    interrupted 16-byte append leaves: zeros (the size reached the disk, the data did not) or
    a sector of garbage. Each append first cuts the file back to its intact prefix and is
    fsynced before the next one, and records never straddle a sector. So these are damage
    (spec page, "Damage"): an intact record after one that is not; more than one record that
    is not intact; a piece shorter than a record at the end; and a last record that is a
    real record with a flipped bit (its magic is "BKDL", or its CRC matches its ledger id
    under the right magic): that delete was acknowledged, and reading past it would
    resurrect the ledger.
    """
    ledgers: list[LedgerId] = []
    good_bytes: int | None = None
    written = False
    whole = len(data) - len(data) % DELETED_RECORD_SIZE
    for offset in range(0, whole, DELETED_RECORD_SIZE):
        magic, ledger_id, crc = _DELETED.unpack_from(data, offset)
        head = data[offset : offset + 12]
        intact = magic == DELETED_RECORD_MAGIC and ledger_id >= 0 and zlib.crc32(head) == crc
        if intact and good_bytes is not None:
            return DeletedFileDamage(
                good_bytes,
                f"the record at offset {good_bytes} is damaged but the intact record at "
                f"offset {offset} follows it: the file was corrupted, not torn by a crash",
            )
        if intact:
            ledgers.append(LedgerId(ledger_id))
            continue
        if good_bytes is not None:
            return DeletedFileDamage(
                good_bytes,
                f"the records at offsets {good_bytes} and {offset} are both not intact; a "
                "crash leaves at most the last record torn",
            )
        good_bytes = offset
        written = magic == DELETED_RECORD_MAGIC or (
            zlib.crc32(DELETED_RECORD_MAGIC + head[4:]) == crc
        )
    if good_bytes is not None and written:
        return DeletedFileDamage(
            good_bytes,
            f"the record at offset {good_bytes} was written whole (its magic or its CRC is "
            "right) and then damaged: an acknowledged delete, not a torn append",
        )
    if len(data) != whole:
        return DeletedFileDamage(
            whole,
            f"the file is {len(data)} bytes, not a multiple of the {DELETED_RECORD_SIZE}-byte "
            "record: no crash cuts a record short (records never straddle a sector)",
        )
    if good_bytes is None:
        good_bytes = len(ledgers) * DELETED_RECORD_SIZE
    return ledgers, good_bytes
