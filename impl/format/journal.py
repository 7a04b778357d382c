"""Journal codec: BookKeeper's journal format (Journal.java, JournalChannel.java), byte for byte.

Normative page: spec/format/journal.md. tests/unit/impl/format/test_journal_page.py keeps every
constant here (and the journal's file names, impl/format/names.py) equal to the value the page
states, and checks the page's worked example against these functions and against
tests/unit/bk_journal_layout.py (a second writer built from the page alone).

Grammar (big endian throughout)::

    journal  = header record* end?
    header   = "BKLG" int32 version zeros         ; 512 bytes for V5+, 8 bytes for V2..V4
    record   = int32 len payload                  ; len > 0
             | int32 -0x100 int32 n n*%x00        ; padding (V5+), aligns the next record
    payload  = int64 ledger_id int64 entry_id rest
    end      = int32 0 | end of file | a record cut short

This module is pure: bytes in, bytes or values out. Writing journals is impl/journal/journal.py,
reading them (replay) impl/journal/replay.py, with the decoding helpers below.

Not verified here: that a key record's key or an explicit-LAC body means anything; the
bookie decides what to do with them.
"""

from __future__ import annotations

import struct
from typing import Literal

import attrs

#: Fingerprint at offset 0 of every journal written since V2.
MAGIC = b"BKLG"
#: Format versions. V1: no header. V2: "BKLG" + version. V3: ledger key records.
#: V4: fence records. V5: 512-byte header and padding. V6: explicit-LAC records.
V1 = 1
V2 = 2
V3 = 3
V4 = 4
V5 = 5
V6 = 6
#: BookKeeper reads V1..V6 and writes V4..V6 (journalFormatVersionToWrite).
MIN_COMPAT_VERSION = V1
CURRENT_VERSION = V6
MIN_WRITE_VERSION = V4
#: "BKLG" + int32 version.
VERSION_HEADER_SIZE = 8
#: The V5+ header is padded with zeros to one sector.
HEADER_SIZE = 512
SECTOR_SIZE = 512
#: Size of the int32 length before each record's payload.
RECORD_SIZE_PREFIX = 4
#: A payload holds at least the ledger id and the entry id.
MIN_PAYLOAD_SIZE = 16
#: The length field of a padding record (Journal.PADDING_MASK).
PADDING_MASK = -0x100
#: PADDING_MASK + int32 number of zero bytes that follow.
PADDING_HEADER_SIZE = 8
#: A length of 0 ends the journal (the preallocated zero tail).
END_OF_JOURNAL = 0
#: Entry ids of meta records (BookieImpl.METAENTRY_ID_*).
METAENTRY_ID_LEDGER_KEY = -0x1000
METAENTRY_ID_FENCE_KEY = -0x2000
#: Never written to the journal (a force-ledger request only waits for a flush).
METAENTRY_ID_FORCE_LEDGER = -0x4000
METAENTRY_ID_LEDGER_EXPLICITLAC = -0x8000
#: bkref refuses a record longer than this on replay (nettyMaxFrameSizeBytes' default);
#: the bookie passes its configured frame size instead.
DEFAULT_MAX_RECORD_BYTES = 5 * 1024 * 1024
#: lastMark: int64 journal id + int64 offset.
LAST_MARK_SIZE = 16

_LEN = struct.Struct(">i")
_IDS = struct.Struct(">qq")
_META_HEAD = struct.Struct(">qqi")
_PADDING_HEAD = struct.Struct(">ii")

RecordKind = Literal["data", "key", "fence", "lac"]


@attrs.frozen(slots=False)
class JournalRecord:
    """One record found by replay, with where it lies.

    ``payload``: for ``data`` the whole stored payload (ledger id and entry id included, as
    the entry log stores it); for ``key`` the master key; for ``lac`` the explicit-LAC bytes;
    for ``fence`` empty. ``offset`` is the offset of the record's length field and
    ``end_offset`` the offset just after the record, both in journal ``journal_id``.
    """

    kind: RecordKind
    ledger_id: int
    entry_id: int
    payload: bytes
    journal_id: int
    offset: int
    end_offset: int


class InvalidRecord(Exception):
    """A record that cannot be replayed (BookKeeper: an IOException in scanJournal, or a
    runtime error while applying it). ``reason`` says what is wrong with it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --- header -------------------------------------------------------------------------------


def header_size(version: int) -> int:
    """Where the first record starts (JournalChannel, START_OF_FILE)."""
    assert MIN_COMPAT_VERSION <= version <= CURRENT_VERSION, version
    if version >= V5:
        return HEADER_SIZE
    if version >= V2:
        return VERSION_HEADER_SIZE
    return 0


def encode_header(version: int = CURRENT_VERSION) -> bytes:
    """The header of a new journal: 8 bytes for V4, 512 for V5 and V6."""
    assert MIN_WRITE_VERSION <= version <= CURRENT_VERSION, version
    head = MAGIC + _LEN.pack(version)
    block = head + bytes(header_size(version) - len(head))
    assert len(block) == header_size(version)
    return block


def decode_version(first_bytes: bytes) -> int:
    """The format version from the first 8 bytes of a file, as JournalChannel reads it:
    fewer than 8 bytes or no "BKLG" means V1. The result may be out of range (the caller
    refuses it)."""
    if len(first_bytes) < VERSION_HEADER_SIZE or first_bytes[:4] != MAGIC:
        return V1
    return int(_LEN.unpack_from(first_bytes, 4)[0])


# --- records ------------------------------------------------------------------------------


def encode_record(payload: bytes) -> bytes:
    """``int32 len`` + payload."""
    assert len(payload) >= MIN_PAYLOAD_SIZE, len(payload)
    assert len(payload) <= 2**31 - 1, len(payload)
    return _LEN.pack(len(payload)) + payload


def encode_data_record(payload: bytes) -> bytes:
    """An add: the payload exactly as the client sent it (ledger id, entry id, body)."""
    ledger_id, entry_id = _IDS.unpack_from(payload, 0)
    assert ledger_id >= 0, ledger_id
    assert entry_id >= 0, entry_id
    return encode_record(payload)


def encode_key_record(ledger_id: int, key: bytes) -> bytes:
    """The master key of a ledger (BookieImpl.createMasterKeyEntry)."""
    assert ledger_id >= 0, ledger_id
    return encode_record(_META_HEAD.pack(ledger_id, METAENTRY_ID_LEDGER_KEY, len(key)) + key)


def encode_fence_record(ledger_id: int) -> bytes:
    """A fence (LedgerDescriptor.createLedgerFenceEntry): the two ids and nothing else."""
    assert ledger_id >= 0, ledger_id
    return encode_record(_IDS.pack(ledger_id, METAENTRY_ID_FENCE_KEY))


def encode_lac_record(ledger_id: int, lac: bytes) -> bytes:
    """An explicit LAC (BookieImpl.createExplicitLACEntry): int32 length + the LAC bytes."""
    assert ledger_id >= 0, ledger_id
    head = _META_HEAD.pack(ledger_id, METAENTRY_ID_LEDGER_EXPLICITLAC, len(lac))
    return encode_record(head + lac)


def record_entry_id(record: bytes) -> int:
    """The entry id of an encoded record (length field included)."""
    return int(_IDS.unpack_from(record, RECORD_SIZE_PREFIX)[1])


def padding_length(offset: int, alignment: int) -> int:
    """How many bytes of padding Journal.writePaddingBytes writes at ``offset``: 0 when
    aligned, else enough to reach the next boundary at least 8 bytes away."""
    assert offset >= 0, offset
    assert alignment > 0 and alignment % SECTOR_SIZE == 0, alignment
    gap = (alignment - offset % alignment) % alignment
    if gap == 0:
        return 0
    if gap < PADDING_HEADER_SIZE:
        gap += alignment
    assert (offset + gap) % alignment == 0
    assert gap >= PADDING_HEADER_SIZE
    return gap


def encode_padding(offset: int, alignment: int) -> bytes:
    """The padding record written at ``offset`` before a flush: PADDING_MASK, the number of
    zero bytes that follow, the zeros. Empty when ``offset`` is aligned."""
    total = padding_length(offset, alignment)
    if total == 0:
        return b""
    zeros = total - PADDING_HEADER_SIZE
    return _PADDING_HEAD.pack(PADDING_MASK, zeros) + bytes(zeros)


def decode_meta_body(payload: bytes | memoryview, what: str) -> bytes:
    """The ``int32 n`` + n bytes after the ids of a key or explicit-LAC record. Bytes after
    them are ignored, as BookKeeper ignores them."""
    if len(payload) < MIN_PAYLOAD_SIZE + 4:
        raise InvalidRecord(f"{what} record of {len(payload)} bytes has no length field")
    length = int(_LEN.unpack_from(payload, MIN_PAYLOAD_SIZE)[0])
    start = MIN_PAYLOAD_SIZE + 4
    if length < 0 or start + length > len(payload):
        raise InvalidRecord(
            f"{what} record says {length} bytes follow but holds {len(payload) - start}"
        )
    return bytes(payload[start : start + length])


def decode_meta_record(
    version: int, ledger_id: int, entry_id: int, payload: bytes | memoryview
) -> tuple[RecordKind, bytes] | None:
    """Kind and body of a record with a negative entry id, as BookieImpl's replay scanner
    reads it; None for a meta record it skips (an entry id it does not know). Raises
    InvalidRecord for a meta record the journal's version cannot hold or that is cut short."""
    assert entry_id < 0, entry_id
    if entry_id == METAENTRY_ID_LEDGER_KEY:
        _check_version(version, V3, "ledger key", ledger_id)
        return "key", decode_meta_body(payload, "ledger key")
    if entry_id == METAENTRY_ID_FENCE_KEY:
        _check_version(version, V4, "fence", ledger_id)
        return "fence", b""
    if entry_id == METAENTRY_ID_LEDGER_EXPLICITLAC:
        _check_version(version, V6, "explicit LAC", ledger_id)
        return "lac", decode_meta_body(payload, "explicit LAC")
    return None


def _check_version(version: int, needed: int, what: str, ledger_id: int) -> None:
    if version < needed:
        raise InvalidRecord(
            f"a {what} record (ledger {ledger_id}) in a version {version} journal; "
            f"{what} records exist from version {needed}"
        )
