"""An independent writer of BookKeeper-layout journals and lastMark files, built from
spec/format/journal.md.

It does not import impl/ (nor the codec): a second reading of the page, with struct, so the
codec, the writer and replay are checked against the page rather than against themselves.
It also writes what BookKeeper and crashes leave behind: V1 to V6 headers, padding after each
flush, preallocated zero tails, junk, records cut short, negative lengths.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# The page's constants, restated.
MAGIC = b"BKLG"
V5_HEADER_BYTES = 512
OLD_HEADER_BYTES = 8
PADDING_MASK = -0x100
KEY_ID = -0x1000
FENCE_ID = -0x2000
FORCE_LEDGER_ID = -0x4000
LAC_ID = -0x8000


def header(version: int, magic: bytes = MAGIC) -> bytes:
    """V1: nothing. V2..V4: magic + int32 version. V5+: the same, zero-filled to 512."""
    if version == 1:
        return b""
    head = magic + struct.pack(">i", version)
    if version >= 5:
        return head.ljust(V5_HEADER_BYTES, b"\0")
    return head


def record(payload: bytes) -> bytes:
    """int32 length, then the payload."""
    return struct.pack(">i", len(payload)) + payload


def entry_payload(ledger: int, entry: int, body: bytes) -> bytes:
    """What a client sends: int64 ledger id, int64 entry id, body."""
    return struct.pack(">qq", ledger, entry) + body


def key_payload(ledger: int, key: bytes) -> bytes:
    """Ledger id, entry id -0x1000, int32 key length, key."""
    return struct.pack(">qqi", ledger, KEY_ID, len(key)) + key


def fence_payload(ledger: int) -> bytes:
    """Ledger id, entry id -0x2000, nothing else."""
    return struct.pack(">qq", ledger, FENCE_ID)


def lac_payload(ledger: int, lac: bytes) -> bytes:
    """Ledger id, entry id -0x8000, int32 LAC length, LAC bytes."""
    return struct.pack(">qqi", ledger, LAC_ID, len(lac)) + lac


def padding(position: int, alignment: int = 512) -> bytes:
    """The page's rule, written out case by case: nothing when aligned; else a padding record
    running to the next boundary, or to the one after when fewer than 8 bytes are left."""
    left = alignment - position % alignment
    if left == alignment:
        return b""
    zeros = left - 8 if left >= 8 else alignment - (8 - left)
    return struct.pack(">ii", PADDING_MASK, zeros) + b"\0" * zeros


def last_mark(journal_id: int, offset: int) -> bytes:
    """int64 journal id, int64 offset."""
    return struct.pack(">qq", journal_id, offset)


def junk() -> bytes:
    """BookieJournalTest.writeJunkJournal: "JunkJunkJunk" ten times, then zeros (the file is
    extended to 4 MiB + 512 there; a few KiB suffice here)."""
    return b"JunkJunkJunk" * 10 + bytes(4096)


@dataclass
class Written:
    """One record as it lands in the file."""

    kind: str  # data | key | fence | lac | other
    ledger: int
    entry: int
    payload: bytes  # data: the whole payload; key / lac: the bytes; fence: b""
    offset: int
    end: int


@dataclass
class JournalBuilder:
    """Appends records to a journal of one version; ``flush`` pads it (V5+) as a writer
    does before each sync."""

    version: int = 6
    alignment: int = 512
    data: bytearray = field(default_factory=bytearray)
    written: list[Written] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.data += header(self.version)

    def _add(self, kind: str, ledger: int, entry: int, body: bytes, payload: bytes) -> Written:
        start = len(self.data)
        self.data += record(payload)
        item = Written(kind, ledger, entry, body, start, len(self.data))
        self.written.append(item)
        return item

    def entry(self, ledger: int, entry: int, body: bytes) -> Written:
        payload = entry_payload(ledger, entry, body)
        return self._add("data", ledger, entry, payload, payload)

    def key(self, ledger: int, key: bytes) -> Written:
        return self._add("key", ledger, KEY_ID, key, key_payload(ledger, key))

    def fence(self, ledger: int) -> Written:
        return self._add("fence", ledger, FENCE_ID, b"", fence_payload(ledger))

    def lac(self, ledger: int, lac: bytes) -> Written:
        return self._add("lac", ledger, LAC_ID, lac, lac_payload(ledger, lac))

    def other(self, ledger: int, entry_id: int, body: bytes) -> Written:
        """A meta record of an id replay does not know (it must skip it)."""
        return self._add(
            "other", ledger, entry_id, body, struct.pack(">qq", ledger, entry_id) + body
        )

    def raw(self, data: bytes) -> None:
        """Bytes that are not a well-formed record (a corrupt length, junk)."""
        self.data += data

    def flush(self) -> int:
        """Pad to the alignment (V5+ only); return the offset after the padding."""
        if self.version >= 5:
            self.data += padding(len(self.data), self.alignment)
        return len(self.data)

    def file_bytes(self, zero_tail: int = 0) -> bytes:
        """The file, with ``zero_tail`` preallocated zero bytes after it."""
        return bytes(self.data) + bytes(zero_tail)

    def replayable(self) -> list[Written]:
        """What replay must yield: every record but the unknown meta ones."""
        return [item for item in self.written if item.kind != "other"]


def worked_example() -> JournalBuilder:
    """The page's worked example: V6, ledger 1 with key "pw", entry 0 "hello", a fence,
    one flush."""
    builder = JournalBuilder(version=6)
    builder.key(1, b"pw")
    builder.entry(1, 0, b"hello")
    builder.fence(1)
    builder.flush()
    return builder


def journal_name(journal_id: int) -> str:
    """``<lower-case hex id>.txn``."""
    return f"{journal_id:x}.txn"
