"""Entry log codec: BookKeeper's DefaultEntryLogger format, byte for byte.

Normative page: spec/format/entry_log.md. tests/unit/impl/format/test_entry_log_page.py keeps
every constant here equal to the value the page states.

Grammar (big endian throughout)::

    entry_log   = header record* ledgers_map?
    header      = "BKLO" int32 version int64 ledgers_map_offset int32 ledgers_count
                  zero-padding to 1024 bytes
    record      = int32 size payload            ; size = len(payload) >= 16
    payload     = int64 ledger_id int64 entry_id body
    ledgers_map = map_record+                  ; appended at rotation only
    map_record  = int32 len int64 -1 int64 -2 int32 n (int64 ledger_id int64 bytes){n}

This module is pure: bytes in, bytes or values out. Reading logs is impl/entrylog/reader.py.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import attrs

from spec.ids import INT32_MAX

#: Fingerprint at offset 0 of every entry log.
MAGIC = b"BKLO"
#: Size of the header block at the start of every entry log.
LOGFILE_HEADER_SIZE = 1024
#: Offset of the int32 header version.
HEADER_VERSION_POSITION = 4
#: Offset of the int64 ledgers-map offset (followed by the int32 ledgers count at 16).
LEDGERS_MAP_OFFSET_POSITION = 8
#: Offset of the int32 ledgers count.
LEDGERS_COUNT_POSITION = 16
#: Version 0: no ledgers map. Version 1: ledgers map at rotation.
HEADER_V0 = 0
HEADER_V1 = 1
HEADER_CURRENT_VERSION = HEADER_V1
#: Bytes before the (ledger id, bytes) pairs of one map record: len, ledger id, entry id, n.
LEDGERS_MAP_HEADER_SIZE = 4 + 8 + 8 + 4
#: Bytes of one (ledger id, bytes) pair in a map record.
LEDGERS_MAP_ENTRY_SIZE = 8 + 8
#: At most this many ledgers per map record.
LEDGERS_MAP_MAX_BATCH_SIZE = 10000
#: Ledger id of map records.
INVALID_LID = -1
#: Entry id of map records.
LEDGERS_MAP_ENTRY_ID = -2
#: A record payload holds at least the ledger id and the entry id.
MIN_SANE_ENTRY_SIZE = 8 + 8
#: Size of the int32 length prefix of each record.
RECORD_SIZE_PREFIX = 4
#: Entry log ids are Java ints; after INT32_MAX the allocator wraps to 0.
MAX_LOG_ID = INT32_MAX

_HEADER = struct.Struct(">4siqi")
_SIZE = struct.Struct(">i")
_IDS = struct.Struct(">qq")
_RECORD_HEAD = struct.Struct(">iqq")
_MAP_HEAD = struct.Struct(">iqqi")
_MAP_PAIR = struct.Struct(">qq")


@attrs.frozen
class Header:
    """The decoded fields of the 1024-byte header."""

    magic: bytes
    version: int
    ledgers_map_offset: int
    ledgers_count: int


def encode_header(
    version: int = HEADER_CURRENT_VERSION, ledgers_map_offset: int = 0, ledgers_count: int = 0
) -> bytes:
    """The full 1024-byte header block. A new log is written with offset 0 and count 0."""
    head = _HEADER.pack(MAGIC, version, ledgers_map_offset, ledgers_count)
    block = head + bytes(LOGFILE_HEADER_SIZE - len(head))
    assert len(block) == LOGFILE_HEADER_SIZE
    return block


def decode_header(block: bytes) -> Header:
    """Decode the first 20 bytes of a header. The caller checks the length and the magic."""
    assert len(block) >= _HEADER.size, len(block)
    magic, version, offset, count = _HEADER.unpack_from(block, 0)
    return Header(magic=magic, version=version, ledgers_map_offset=offset, ledgers_count=count)


def encode_map_location(ledgers_map_offset: int, ledgers_count: int) -> bytes:
    """The 12 bytes written in place at LEDGERS_MAP_OFFSET_POSITION after the map."""
    return struct.pack(">qi", ledgers_map_offset, ledgers_count)


def encode_record(payload: bytes) -> bytes:
    """``int32 size`` + payload. The payload already begins with ledger id and entry id."""
    assert len(payload) >= MIN_SANE_ENTRY_SIZE, len(payload)
    assert len(payload) <= INT32_MAX, len(payload)
    return _SIZE.pack(len(payload)) + payload


def encode_entry_record(ledger_id: int, entry_id: int, body: bytes) -> bytes:
    """``encode_record(encode_payload(ledger_id, entry_id, body))`` with one copy of the
    body: the add path's record. It is also, byte for byte, the journal's data record
    (spec/format/journal.md: int32 len + the same payload), so the bookie builds it once."""
    size = MIN_SANE_ENTRY_SIZE + len(body)
    assert size <= INT32_MAX, size
    return _RECORD_HEAD.pack(size, ledger_id, entry_id) + body


def encode_payload(ledger_id: int, entry_id: int, body: bytes) -> bytes:
    """An entry payload as a BookKeeper client sends it: ledger id, entry id, body."""
    return _IDS.pack(ledger_id, entry_id) + body


def decode_size(four: bytes) -> int:
    """The int32 size prefix of a record."""
    return int(_SIZE.unpack(four)[0])


def decode_ids(payload_head: bytes) -> tuple[int, int]:
    """(ledger id, entry id) from the first 16 bytes of a payload."""
    ledger_id, entry_id = _IDS.unpack_from(payload_head, 0)
    return int(ledger_id), int(entry_id)


def encode_ledgers_map(
    ledgers: Iterable[tuple[int, int]], batch_max: int = LEDGERS_MAP_MAX_BATCH_SIZE
) -> bytes:
    """The map records for (ledger id, bytes) pairs, in batches of at most ``batch_max``
    ledgers (BookKeeper's writer: 10000; its reader takes records of any count, so a smaller
    batch, which the checks use to reach the boundary, writes a map it reads the same way).

    ``bytes`` counts size + 4 for each record of the ledger (EntryLogMetadata.addLedgerSize).
    An empty map encodes to no bytes: BookKeeper writes no record when there is no ledger.
    """
    assert 0 < batch_max <= LEDGERS_MAP_MAX_BATCH_SIZE, batch_max
    pairs = list(ledgers)
    out = bytearray()
    for start in range(0, len(pairs), batch_max):
        batch = pairs[start : start + batch_max]
        record_size = LEDGERS_MAP_HEADER_SIZE + LEDGERS_MAP_ENTRY_SIZE * len(batch)
        out += _MAP_HEAD.pack(record_size - 4, INVALID_LID, LEDGERS_MAP_ENTRY_ID, len(batch))
        for ledger_id, size in batch:
            out += _MAP_PAIR.pack(ledger_id, size)
    return bytes(out)
