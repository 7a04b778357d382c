"""BookKeeper's ledger metadata: the ``.idx`` header and positions, and DbLedgerStorage's
``LedgerData`` message. Pure codec: bytes in, typed values out, typed errors for damage.

Spec page: spec/format/bk_index.md. BookKeeper's sources: FileInfo (readHeader, writeHeader),
IndexPersistenceMgr, LedgerEntryPage, DigestManager.LAC_METADATA_LENGTH, and
DbLedgerStorageDataFormats.proto (LedgerData).

Why: once lastMark has passed a ledger's key and fence records, BookKeeper keeps them only in
its ledger storage. bkref rebuilds its own index from a directory BookKeeper wrote
(impl/index/rebuild.py), and without these headers every such ledger would take any key and
forget its fence. The decoder splits what it cannot read into two errors because they call
for opposite actions: a torn header (short, or all zeros) is what a crash leaves of a header
BookKeeper had not forced yet, so the start goes on with the journal's records; anything
else is damage, and recovery refuses it (spec page, "Which states are possible").

The DbLedgerStorage value is decoded by hand (varints and length-delimited fields, unknown
fields skipped by wire type): five fields do not justify a protobuf dependency.

Differences from BookKeeper's reader (spec page, "Where bkref's reader differs"): a negative
header version is refused, and torn and damaged headers are told apart.
"""

from __future__ import annotations

import struct
from typing import Final

import attrs

from spec.errors import BkIndexDamaged, BkIndexTorn

__all__ = [
    "IDX_DEFAULT_PAGE_SIZE",
    "IDX_HEADER_CURRENT_VERSION",
    "IDX_HEADER_V0",
    "IDX_HEADER_V1",
    "IDX_LAC_METADATA_LENGTH",
    "IDX_POSITION_BYTES",
    "IDX_SIGNATURE",
    "IDX_START_OF_DATA",
    "IDX_STATE_FENCED_BIT",
    "IdxFile",
    "IdxHeader",
    "LedgerData",
    "decode_idx_file",
    "decode_idx_header",
    "decode_ledger_data",
    "describe_idx",
    "explicit_lac_value",
]

IDX_SIGNATURE: Final = b"BKLE"
IDX_HEADER_V0: Final = 0
IDX_HEADER_V1: Final = 1
IDX_HEADER_CURRENT_VERSION: Final = 1
IDX_START_OF_DATA: Final = 1024
IDX_STATE_FENCED_BIT: Final = 1
IDX_POSITION_BYTES: Final = 8
IDX_LAC_METADATA_LENGTH: Final = 16
IDX_DEFAULT_PAGE_SIZE: Final = 8192

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


@attrs.frozen
class IdxHeader:
    """A decoded ``.idx`` header. ``explicit_lac`` is the whole buffer the client sent (None
    when the header has none, always None in V0); ``header_end`` is where its fields end;
    ``slack_nonzero`` whether a byte between there and 1024 is not zero (ignored, reported)."""

    version: int
    master_key: bytes
    state_bits: int
    explicit_lac: bytes | None
    header_end: int
    slack_nonzero: bool

    @property
    def fenced(self) -> bool:
        return bool(self.state_bits & IDX_STATE_FENCED_BIT)

    @property
    def lac(self) -> int | None:
        """The explicit LAC value (the int64 at offset 8 of the buffer), None without one."""
        return None if self.explicit_lac is None else explicit_lac_value(self.explicit_lac)


@attrs.frozen
class IdxFile:
    """A whole ``.idx`` file: its header, the positions (entry id -> location, zeros left
    out, in entry order), and ``tail_bytes``, the bytes of a partial last position."""

    header: IdxHeader
    positions: tuple[tuple[int, int], ...]
    tail_bytes: int


def explicit_lac_value(buffer: bytes) -> int:
    """The LAC an explicit-LAC buffer carries: ledger id (8 bytes), then the LAC (8 bytes)."""
    assert len(buffer) >= IDX_LAC_METADATA_LENGTH, len(buffer)
    value: int = _LONG.unpack_from(buffer, 8)[0]
    return value


class _Header:
    """A cursor over the header bytes that knows whether running out is a tear or damage."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.size = len(data)
        # BookKeeper reads min(size, START_OF_DATA) bytes; the fields must fit in them.
        self.data = data[:IDX_START_OF_DATA]
        self.pos = 0

    def need(self, count: int, what: str) -> None:
        end = self.pos + count
        if end <= len(self.data):
            return
        if self.size < IDX_START_OF_DATA:
            raise BkIndexTorn(
                self.path,
                self.pos,
                f"the file ends ({self.size} bytes) inside the header's {what}: a header "
                "BookKeeper had not yet written back when it stopped",
            )
        raise BkIndexDamaged(
            self.path,
            self.pos,
            f"the header's {what} would end at offset {end}, past the {IDX_START_OF_DATA}-byte "
            "header BookKeeper writes: damaged. Restore the file from a backup",
        )

    def int32(self, what: str) -> int:
        self.need(4, what)
        value: int = _INT.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return value

    def raw(self, count: int, what: str) -> bytes:
        self.need(count, what)
        value = self.data[self.pos : self.pos + count]
        self.pos += count
        return value


def _damaged(path: str, offset: int, problem: str) -> BkIndexDamaged:
    return BkIndexDamaged(
        path,
        offset,
        f"{problem}. BookKeeper cannot open this ledger's index either: restore the file "
        "from a backup (do not delete it: the ledger's key and fence flag would be lost)",
    )


def decode_idx_header(data: bytes, path: str = "<idx>") -> IdxHeader:
    """The header of an ``.idx`` file from the file's first bytes (at least the first 1024,
    or the whole file when it is shorter). Raises BkIndexTorn for a short or all-zero header
    and BkIndexDamaged for any other header BookKeeper would not read (FileInfo.readHeader)."""
    head = data[:IDX_START_OF_DATA]
    if not any(head):
        raise BkIndexTorn(
            path,
            0,
            f"the header is {'all zeros' if head else 'empty'} ({len(data)} bytes): a file "
            "created but not yet written back when BookKeeper stopped",
        )
    if len(head) < len(IDX_SIGNATURE) and IDX_SIGNATURE.startswith(head):
        raise BkIndexTorn(path, 0, f"the file is {len(data)} bytes, cut inside the signature")
    if head[: len(IDX_SIGNATURE)] != IDX_SIGNATURE:
        raise _damaged(path, 0, f"signature {head[:4].hex()} is not 'BKLE' ({IDX_SIGNATURE.hex()})")
    cursor = _Header(path, data)
    cursor.pos = len(IDX_SIGNATURE)
    version = cursor.int32("version")
    if not IDX_HEADER_V0 <= version <= IDX_HEADER_CURRENT_VERSION:
        raise _damaged(
            path,
            4,
            f"header version {version}: BookKeeper writes 0 or 1"
            + (" (a newer BookKeeper's format?)" if version > IDX_HEADER_CURRENT_VERSION else ""),
        )
    key_len = cursor.int32("master key length")
    if key_len < 0:
        raise _damaged(path, 8, f"master key length {key_len} is negative")
    key = cursor.raw(key_len, f"master key ({key_len} bytes)")
    state_bits = cursor.int32("state bits")
    explicit_lac: bytes | None = None
    if version >= IDX_HEADER_V1:
        lac_at = cursor.pos
        lac_len = cursor.int32("explicit LAC length")
        if lac_len != 0 and lac_len < IDX_LAC_METADATA_LENGTH:
            raise _damaged(
                path,
                lac_at,
                f"explicit LAC length {lac_len}: it is 0 (none) or at least "
                f"{IDX_LAC_METADATA_LENGTH} (ledger id and LAC)",
            )
        if lac_len:
            explicit_lac = cursor.raw(lac_len, f"explicit LAC ({lac_len} bytes)")
    end = cursor.pos
    return IdxHeader(
        version=version,
        master_key=bytes(key),
        state_bits=state_bits,
        explicit_lac=None if explicit_lac is None else bytes(explicit_lac),
        header_end=end,
        slack_nonzero=any(head[end:]),
    )


def decode_idx_file(data: bytes, path: str = "<idx>") -> IdxFile:
    """A whole ``.idx`` file: the header (``decode_idx_header``'s errors), then every non-zero
    position of the body. A negative position is damage (BkIndexDamaged at its offset); a
    partial last position is ignored as BookKeeper ignores it (``tail_bytes``)."""
    header = decode_idx_header(data, path)
    body = data[IDX_START_OF_DATA:]
    whole = len(body) - len(body) % IDX_POSITION_BYTES
    positions: list[tuple[int, int]] = []
    for entry_id, (location,) in enumerate(struct.iter_unpack(">q", body[:whole])):
        if location == 0:
            continue
        if location < 0:
            raise _damaged(
                path,
                IDX_START_OF_DATA + entry_id * IDX_POSITION_BYTES,
                f"the position of entry {entry_id} is negative ({location})",
            )
        positions.append((entry_id, location))
    return IdxFile(header=header, positions=tuple(positions), tail_bytes=len(body) - whole)


def describe_idx(ledger_id: int | None, data: bytes, path: str = "<idx>") -> dict[str, object]:
    """A short summary of one ``.idx`` file for ``bkref inspect`` (JSON-ready): the ledger
    id (from the file name, None when unknown), key present and length, fenced, explicit LAC,
    number of positions, the largest entry id; or ``error`` and ``torn`` when the header
    cannot be read. Never raises for any bytes."""
    out: dict[str, object] = {"ledger_id": ledger_id, "size_bytes": len(data)}
    try:
        decoded = decode_idx_file(data, path)
    except BkIndexTorn as exc:
        return {**out, "error": str(exc), "torn": True}
    except BkIndexDamaged as exc:
        return {**out, "error": str(exc), "torn": False}
    header = decoded.header
    return {
        **out,
        "header_version": header.version,
        "master_key_present": True,
        "master_key_bytes": len(header.master_key),
        "fenced": header.fenced,
        "state_bits": header.state_bits,
        "explicit_lac": header.lac,
        "positions": len(decoded.positions),
        "last_entry": decoded.positions[-1][0] if decoded.positions else None,
        "tail_bytes": decoded.tail_bytes,
        "header_slack_nonzero": header.slack_nonzero,
    }


# --- DbLedgerStorage: the LedgerData message ----------------------------------------------------


@attrs.frozen
class LedgerData:
    """DbLedgerStorageDataFormats.LedgerData: what DbLedgerStorage knows of one ledger."""

    exists: bool
    fenced: bool
    master_key: bytes
    explicit_lac: bytes | None = None
    limbo: bool = False

    @property
    def lac(self) -> int | None:
        if self.explicit_lac is None or len(self.explicit_lac) < IDX_LAC_METADATA_LENGTH:
            return None
        return explicit_lac_value(self.explicit_lac)


_WIRE_VARINT = 0
_WIRE_I64 = 1
_WIRE_LEN = 2
_WIRE_I32 = 5
_VARINT_MAX_BYTES = 10


def _varint(data: bytes, pos: int, path: str) -> tuple[int, int]:
    value = shift = 0
    for count in range(_VARINT_MAX_BYTES):
        if pos + count >= len(data):
            raise BkIndexDamaged(path, pos, "the LedgerData value ends inside a varint")
        byte = data[pos + count]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value & 0xFFFF_FFFF_FFFF_FFFF, pos + count + 1
    raise BkIndexDamaged(path, pos, "a varint of the LedgerData value is longer than 10 bytes")


def decode_ledger_data(data: bytes, path: str = "<ledgers>") -> LedgerData:
    """Decode a LedgerData value (proto2). Unknown fields are skipped by their wire type, a
    repeated field's last value wins (protobuf's rule). Raises BkIndexDamaged when the bytes
    are no valid message or a required field (exists, fenced, masterKey) is missing."""
    fields: dict[int, int | bytes] = {}
    pos = 0
    while pos < len(data):
        at = pos
        tag, pos = _varint(data, pos, path)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise BkIndexDamaged(path, at, "field number 0 in the LedgerData value")
        if wire == _WIRE_VARINT:
            value, pos = _varint(data, pos, path)
            fields[number] = value
        elif wire == _WIRE_LEN:
            length, pos = _varint(data, pos, path)
            if pos + length > len(data):
                raise BkIndexDamaged(
                    path, at, f"field {number} claims {length} bytes past the value's end"
                )
            fields[number] = data[pos : pos + length]
            pos += length
        elif wire in (_WIRE_I64, _WIRE_I32):
            width = 8 if wire == _WIRE_I64 else 4
            if pos + width > len(data):
                raise BkIndexDamaged(path, at, f"field {number} ends past the value's end")
            pos += width
        else:
            raise BkIndexDamaged(path, at, f"field {number} has wire type {wire}, unknown here")
    missing = [
        name
        for name, number in (("exists", 1), ("fenced", 2), ("masterKey", 3))
        if number not in fields
    ]
    if missing:
        raise BkIndexDamaged(path, 0, f"the LedgerData value lacks {', '.join(missing)}")
    key, lac = fields[3], fields.get(4)
    exists, fenced, limbo = fields[1], fields[2], fields.get(5, 0)
    if not isinstance(key, bytes) or not (lac is None or isinstance(lac, bytes)):
        raise BkIndexDamaged(path, 0, "masterKey or explicitLac is not length-delimited")
    if not isinstance(exists, int) or not isinstance(fenced, int) or not isinstance(limbo, int):
        raise BkIndexDamaged(path, 0, "exists, fenced or limbo is not a varint")
    return LedgerData(
        exists=bool(exists),
        fenced=bool(fenced),
        master_key=bytes(key),
        explicit_lac=None if lac is None else bytes(lac),
        limbo=bool(limbo),
    )
