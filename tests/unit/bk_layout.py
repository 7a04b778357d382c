"""An independent writer of BookKeeper-layout entry logs, built from spec/format/entry_log.md.

It does not import impl/ (nor the codec): a second reading of the page, with struct, so the
codec and the reader are checked against the page rather than against themselves. It also
writes what BookKeeper can leave behind after a crash or a fault: v0 headers, a map with the
header not yet updated, padding, torn tails.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# The page's constant table, restated.
HEADER_BYTES = 1024
MAP_BATCH_MAX = 10000
MAP_LEDGER_ID = -1
MAP_ENTRY_ID = -2


def header(
    version: int = 1, map_offset: int = 0, ledgers_count: int = 0, magic: bytes = b"BKLO"
) -> bytes:
    """The 1024-byte header: magic, int32 version, int64 map offset, int32 count, zeros."""
    fields = magic + struct.pack(">i", version) + struct.pack(">q", map_offset)
    fields += struct.pack(">i", ledgers_count)
    return fields + bytes(HEADER_BYTES - len(fields))


def payload(ledger_id: int, entry_id: int, body: bytes) -> bytes:
    """What a client sends: int64 ledger id, int64 entry id, body."""
    return struct.pack(">qq", ledger_id, entry_id) + body


def record(data: bytes) -> bytes:
    """int32 size, then the payload."""
    return struct.pack(">i", len(data)) + data


def map_records(pairs: Sequence[tuple[int, int]], batch_max: int = MAP_BATCH_MAX) -> bytes:
    """The ledgers map: records of ledger id -1, entry id -2, n, then n (ledger, bytes) pairs."""
    out = b""
    for start in range(0, len(pairs), batch_max):
        batch = pairs[start : start + batch_max]
        body = struct.pack(">qqi", MAP_LEDGER_ID, MAP_ENTRY_ID, len(batch))
        body += b"".join(struct.pack(">qq", lid, size) for lid, size in batch)
        out += record(body)
    return out


@dataclass
class Entry:
    """An entry as it lands in the log: payload offset and payload length."""

    ledger: int
    entry: int
    offset: int
    size: int


@dataclass
class BuiltLog:
    """The bytes of a log and what a correct reader must find in them."""

    data: bytes
    entries: list[Entry] = field(default_factory=list)
    #: Per ledger, size + 4 summed over its records (what the map says).
    ledgers: dict[int, int] = field(default_factory=dict)
    #: Where the map starts; None when the log was not rotated.
    map_offset: int | None = None
    #: Where the last entry record ends (the map starts there when there is one).
    entries_end: int = HEADER_BYTES
    #: Where each record ends, entries and map records alike, in file order.
    record_ends: list[int] = field(default_factory=list)

    def as_inspect_json(
        self, log_id: int, version: int = 1, source: str = "map"
    ) -> dict[str, object]:
        """The keys ``bkref inspect --json`` must print for this log (spec of the brief)."""
        return {
            "log_id": log_id,
            "version": version,
            "ledgers_map": {str(k): v for k, v in self.ledgers.items()},
            "ledgers_map_source": source,
            "entries": [
                {"ledger": e.ledger, "entry": e.entry, "offset": e.offset, "size": e.size}
                for e in self.entries
            ],
            "torn_tail_bytes": 0,
        }


def build_log(
    entries: Iterable[tuple[int, int, bytes]],
    *,
    rotated: bool = True,
    header_updated: bool = True,
    version: int = 1,
    batch_max: int = MAP_BATCH_MAX,
    padding_before: dict[int, int] | None = None,
) -> BuiltLog:
    """A log holding ``entries`` (ledger, entry, body) in order.

    ``rotated`` appends the map; ``header_updated=False`` leaves the header at offset 0 and
    count 0 as after a crash between writing the map and updating the header.
    ``padding_before`` maps an entry's index to a number of zero bytes written before it.
    """
    padding = padding_before or {}
    body = bytearray()
    built = BuiltLog(data=b"")
    for index, (ledger, entry, data) in enumerate(entries):
        body += bytes(padding.get(index, 0))
        data_offset = HEADER_BYTES + len(body) + 4
        rec = record(payload(ledger, entry, data))
        body += rec
        built.entries.append(Entry(ledger, entry, data_offset, len(rec) - 4))
        built.ledgers[ledger] = built.ledgers.get(ledger, 0) + len(rec)
        built.record_ends.append(HEADER_BYTES + len(body))
    built.entries_end = HEADER_BYTES + len(body)
    map_offset = count = 0
    if rotated:
        built.map_offset = map_offset = built.entries_end
        count = len(built.ledgers)
        pairs = sorted(built.ledgers.items())
        for start in range(0, len(pairs), batch_max):
            body += map_records(pairs[start : start + batch_max], batch_max)
            built.record_ends.append(HEADER_BYTES + len(body))
    if not header_updated:
        map_offset = count = 0
    built.data = header(version, map_offset, count) + bytes(body)
    return built


class BytesSource:
    """Bytes in memory, read like a file (the reader's ByteSource protocol)."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.reads = 0

    def pread(self, offset: int, length: int) -> bytes:
        assert offset >= 0, offset
        assert length >= 0, length
        self.reads += 1
        return self.data[offset : offset + length]

    def size(self) -> int:
        return len(self.data)


# --- what BookKeeper's compaction leaves (TransactionalEntryLogCompactor, BP-6) ---------------
# The names restated from spec/format/entry_log.md ("File names") and spec/protocol/compaction.md:
# lower-case hex, as Long.toHexString writes them.


def log_name(log_id: int) -> str:
    """``<hex id>.log``."""
    return f"{log_id:x}.log"


def compacting_name(new_id: int) -> str:
    """``<hex new>.log.compacting``: a compaction log still being written (phase 1)."""
    return f"{new_id:x}.log.compacting"


def compacted_name(new_id: int, src_id: int) -> str:
    """``<hex new>.log.<hex src>.compacted``: a flushed compaction log (phase 2 done)."""
    return f"{new_id:x}.log.{src_id:x}.compacted"


def build_compacting_log(entries: Iterable[tuple[int, int, bytes]], tail_bytes: int) -> bytes:
    """A compaction log BookKeeper was still writing: header (map offset 0), the records it
    had flushed, then the first ``tail_bytes`` of one more record (its buffer was being
    written out when the bookie died). No map: only phase 2 appends one."""
    listed = list(entries)
    assert listed, "at least the record that is cut"
    whole = build_log(listed[:-1], rotated=False).data
    ledger, entry, body = listed[-1]
    last = record(payload(ledger, entry, body))
    assert 0 < tail_bytes < len(last), tail_bytes
    return whole + last[:tail_bytes]
