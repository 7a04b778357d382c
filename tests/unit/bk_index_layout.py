"""An independent writer of BookKeeper's ledger metadata, built from spec/format/bk_index.md.

It does not import impl/ (nor the codec): a second reading of the page, with struct, so the
reader is checked against the page rather than against itself. It writes ``.idx`` files
(V0 and V1 headers, with or without a key, fenced or not, with or without an explicit LAC,
positions) the way FileInfo.writeHeader and FileInfo.write lay them out, their paths as
IndexPersistenceMgr.getLedgerName names them, and DbLedgerStorage's LedgerData values as
protobuf encodes them. It can also write what crashes and damage leave: short headers, zeros.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

# The page's constants, restated.
SIGNATURE = b"BKLE"
START_OF_DATA = 1024
FENCED_BIT = 1
LAC_METADATA_LENGTH = 16


def idx_path(ledger_id: int) -> str:
    """``<hex (id >> 8) & 0xff>/<hex id & 0xff>/<hex id>.idx``, no leading zeros."""
    return f"{format((ledger_id >> 8) & 0xFF, 'x')}/{format(ledger_id & 0xFF, 'x')}/" + (
        format(ledger_id, "x") + ".idx"
    )


def lac_buffer(ledger_id: int, lac: int, digest: bytes = b"\xde\xad\xbe\xef") -> bytes:
    """What a client sends as an explicit LAC: int64 ledger id, int64 LAC, digest."""
    return struct.pack(">qq", ledger_id, lac) + digest


def header(
    key: bytes = b"",
    *,
    version: int = 1,
    fenced: bool = False,
    state_bits: int | None = None,
    lac: bytes | None = None,
    signature: bytes = SIGNATURE,
    key_len: int | None = None,
    lac_len: int | None = None,
) -> bytes:
    """The 1024-byte header: signature, version, key length, key, state bits, and in V1 the
    LAC length (0 without one) and the LAC, zero-filled. ``key_len``/``lac_len`` override the
    lengths written (for damaged headers); fields past 1024 bytes are cut."""
    bits = (FENCED_BIT if fenced else 0) if state_bits is None else state_bits
    out = signature + struct.pack(">i", version)
    out += struct.pack(">i", len(key) if key_len is None else key_len) + key
    out += struct.pack(">i", bits)
    if version >= 1:
        if lac is None:
            out += struct.pack(">i", 0 if lac_len is None else lac_len)
        else:
            out += struct.pack(">i", len(lac) if lac_len is None else lac_len) + lac
    return out[:START_OF_DATA].ljust(START_OF_DATA, b"\0")


def body(positions: Mapping[int, int], page_size: int | None = None) -> bytes:
    """Positions as int64 at 8 * entry, zeros elsewhere; padded to whole pages if asked."""
    if not positions:
        return b""
    out = bytearray(8 * (max(positions) + 1))
    for entry, location in positions.items():
        struct.pack_into(">q", out, 8 * entry, location)
    if page_size:
        out += bytes(-len(out) % page_size)
    return bytes(out)


def idx_file(
    key: bytes = b"",
    positions: Mapping[int, int] | None = None,
    *,
    page_size: int | None = 8192,
    **header_args: object,
) -> bytes:
    """A whole index file: header, then the positions in whole pages."""
    return header(key, **header_args) + body(positions or {}, page_size)  # type: ignore[arg-type]


def location(log_id: int, offset: int) -> int:
    return (log_id << 32) | offset


# --- DbLedgerStorage ---------------------------------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def ledger_data(
    key: bytes,
    *,
    fenced: bool = False,
    exists: bool = True,
    lac: bytes | None = None,
    limbo: bool | None = None,
    extra: bytes = b"",
) -> bytes:
    """LedgerData: field 1 exists (varint), 2 fenced (varint), 3 masterKey (bytes), 4
    explicitLac (bytes, optional), 5 limbo (varint, optional); ``extra`` appended as is."""
    out = b"\x08" + varint(int(exists)) + b"\x10" + varint(int(fenced))
    out += b"\x1a" + varint(len(key)) + key
    if lac is not None:
        out += b"\x22" + varint(len(lac)) + lac
    if limbo is not None:
        out += b"\x28" + varint(int(limbo))
    return out + extra


def ledger_key(ledger_id: int) -> bytes:
    """The ``ledgers`` database key: the id, 8 bytes big endian."""
    return struct.pack(">q", ledger_id)
