"""Reading entry logs: the header, one entry, the ledgers map, the scan, and the metadata.

Implements spec/format/entry_log.md, sections "Reading one entry", "Metadata: the map first, a
scan as fallback" and "The scan". BookKeeper's DefaultEntryLogger is the authority: the map is
rejected, and the scan stops or skips, exactly where BookKeeper's does, so the metadata the
garbage collector sees is BookKeeper's.

Everything here is pure over a ``ByteSource`` (``pread`` and ``size``): an open file of the
FileSystem seam, the writer's buffered channel, or bytes in a test. Whatever the bytes, only
spec.errors types come out (a Hypothesis test feeds it arbitrary bytes).

Not verified here: that the bytes are durable (the simulated disk's job), that a location came
from a trusted index, and what a concurrent writer does to the file while it is read (the file
size is taken once per scan or map read, as BookKeeper's sealed read channel does).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Literal, NamedTuple, Protocol

import attrs

from impl.format.entry_log import (
    HEADER_V1,
    INVALID_LID,
    LEDGERS_MAP_ENTRY_ID,
    LEDGERS_MAP_ENTRY_SIZE,
    LEDGERS_MAP_HEADER_SIZE,
    LOGFILE_HEADER_SIZE,
    MAGIC,
    MAX_LOG_ID,
    MIN_SANE_ENTRY_SIZE,
    RECORD_SIZE_PREFIX,
    Header,
    decode_header,
)
from impl.limits import LIMITS
from spec.errors import (
    BadEntryLength,
    BadLedgersMap,
    EntryLogError,
    NotAnEntryLog,
    ShortRead,
    WrongEntry,
)
from spec.ids import INT32_MAX, INT64_MAX, EntryLogId

#: Bytes of the decoded header fields: magic, version, map offset, ledgers count.
HEADER_FIELDS_SIZE = 4 + 4 + 8 + 4
#: What ``read_entry`` reads first: size, ledger id, entry id (BookKeeper's sizeBuffer).
ENTRY_HEAD_SIZE = RECORD_SIZE_PREFIX + 8 + 8
#: What the scan needs at each position: size and ledger id.
SCAN_HEAD_SIZE = RECORD_SIZE_PREFIX + 8

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_MAP_RECORD_HEAD = struct.Struct(">qqi")
assert RECORD_SIZE_PREFIX + _MAP_RECORD_HEAD.size == LEDGERS_MAP_HEADER_SIZE


class ByteSource(Protocol):
    """Random-access bytes: impl.fs.api.FileHandle satisfies it, so does a buffered channel."""

    def pread(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset``; fewer only at the end."""
        ...

    def size(self) -> int:
        """The number of bytes there are."""
        ...


# --- value objects ------------------------------------------------------------------------


def _frozen_ledgers(ledgers: Mapping[int, int]) -> Mapping[int, int]:
    return MappingProxyType(dict(sorted(ledgers.items())))


def _check_ledgers(_: object, __: object, ledgers: Mapping[int, int]) -> None:
    for ledger_id, size_bytes in ledgers.items():
        if ledger_id < 0:
            raise ValueError(f"ledger id {ledger_id} is negative")
        if not 0 <= size_bytes <= INT64_MAX:
            raise ValueError(f"ledger {ledger_id} holds {size_bytes} bytes, out of range")


def _check_log_id(_: object, __: object, log_id: EntryLogId) -> None:
    if not 0 <= log_id <= MAX_LOG_ID:
        raise ValueError(f"log id {log_id} is outside 0..{MAX_LOG_ID}")


@attrs.frozen(eq=True, hash=False)
class EntryLogMetadata:
    """Per ledger, the bytes (``size + 4`` per record) it holds in one log (EntryLogMetadata)."""

    log_id: EntryLogId = attrs.field(validator=_check_log_id)
    ledgers: Mapping[int, int] = attrs.field(converter=_frozen_ledgers, validator=_check_ledgers)

    @property
    def total_bytes(self) -> int:
        """All bytes the log's entries take (BookKeeper's totalSize)."""
        return sum(self.ledgers.values())

    def remaining_bytes(self, is_live: Callable[[int], bool]) -> int:
        """Bytes of the ledgers still alive (remainingSize after removeLedgerIf(!is_live))."""
        return sum(size for ledger, size in self.ledgers.items() if is_live(ledger))


class ScannedRecord(NamedTuple):
    """One entry found by the scan: ``offset`` is the payload offset, ``size`` its length.

    A named tuple rather than an attrs class because a scan makes one per record: the bulk
    scan builds it with ``tuple.__new__`` in about a quarter of an attrs instance's time.
    """

    ledger_id: int
    entry_id: int
    offset: int
    size: int


@attrs.frozen
class UndersizedRecord:
    """A record of size 1..15 with a ledger id >= 0: BookKeeper's scan counts it anyway."""

    ledger_id: int
    offset: int
    size: int


@attrs.frozen
class ScanResult:
    """What a scan of a whole log found (spec/format/entry_log.md, "The scan")."""

    log_id: EntryLogId
    file_size_bytes: int
    records: tuple[ScannedRecord, ...]
    undersized_records: tuple[UndersizedRecord, ...]
    map_records: int
    skipped_records: int
    padding_bytes: int
    end_offset: int
    torn_tail_bytes: int

    def ledgers(self) -> dict[int, int]:
        """Per ledger ``size + 4`` summed over its records, as extractEntryLogMetadataByScanning."""
        out: dict[int, int] = {}
        get = out.get
        for ledger_id, _, _, size in self.records:  # a named tuple: unpacked, one per record
            out[ledger_id] = get(ledger_id, 0) + size + RECORD_SIZE_PREFIX
        for small in self.undersized_records:
            out[small.ledger_id] = get(small.ledger_id, 0) + small.size + RECORD_SIZE_PREFIX
        return out

    def metadata(self) -> EntryLogMetadata:
        """The metadata BookKeeper derives from this scan."""
        return EntryLogMetadata(log_id=self.log_id, ledgers=self.ledgers())


@attrs.frozen
class MetadataResult:
    """Metadata, where it came from, and why the map was not used when it was not."""

    metadata: EntryLogMetadata
    source: Literal["map", "scan"]
    fallback_reason: str | None
    #: The scan used when ``source == "scan"``.
    scan: ScanResult | None = None

    def __attrs_post_init__(self) -> None:
        from_scan = self.source == "scan"
        assert from_scan == (self.fallback_reason is not None), self
        assert from_scan == (self.scan is not None), self


# --- the header and one entry ---------------------------------------------------------------


def peek_header(src: ByteSource) -> Header | None:
    """The header fields as they are, unchecked; None if the source has fewer than 20 bytes."""
    block = src.pread(0, HEADER_FIELDS_SIZE)
    if len(block) < HEADER_FIELDS_SIZE:
        return None
    return decode_header(block)


def read_header(src: ByteSource, log_id: EntryLogId) -> Header:
    """The header of an entry log. Raises NotAnEntryLog for a short file or a foreign magic.

    BookKeeper does not check the magic; bkref does, so a foreign file is named as such.
    """
    header = peek_header(src)
    if header is None:
        raise NotAnEntryLog(
            log_id,
            f"the file has {src.size()} bytes, fewer than the {HEADER_FIELDS_SIZE} of the "
            "header fields: its header was never written, or it is not an entry log",
        )
    if header.magic != MAGIC:
        raise NotAnEntryLog(
            log_id,
            f"the file begins with {header.magic!r}, not {MAGIC!r}: it is not an entry log",
        )
    return header


def read_entry(
    src: ByteSource, log_id: EntryLogId, offset: int, ledger_id: int, entry_id: int
) -> bytes:
    """The payload at ``offset`` (a location's offset), checked to be (ledger_id, entry_id).

    The payload begins with the ledger id and the entry id, as BookKeeper returns it.
    Raises ShortRead, BadEntryLength or WrongEntry (DefaultEntryLogger.validateEntry).
    """
    size = _read_entry_size(src, log_id, offset, expect=(ledger_id, entry_id))
    payload = _read_payload(src, log_id, offset, size)
    assert _ids(payload) == (ledger_id, entry_id), (log_id, offset)
    return payload


def read_entry_unchecked(src: ByteSource, log_id: EntryLogId, offset: int) -> bytes:
    """The payload at ``offset`` without checking whose it is (readEntry(location)).

    Differs from BookKeeper: a size below 16 raises BadEntryLength here.
    """
    size = _read_entry_size(src, log_id, offset, expect=None)
    return _read_payload(src, log_id, offset, size)


def _read_entry_size(
    src: ByteSource, log_id: EntryLogId, offset: int, expect: tuple[int, int] | None
) -> int:
    if offset < RECORD_SIZE_PREFIX:
        raise EntryLogError(
            log_id, f"offset {offset} leaves no room for a record's size field: bad location"
        )
    head = src.pread(offset - RECORD_SIZE_PREFIX, ENTRY_HEAD_SIZE)
    if len(head) != ENTRY_HEAD_SIZE:
        raise ShortRead(log_id, offset - RECORD_SIZE_PREFIX, ENTRY_HEAD_SIZE, len(head))
    size = int(_INT32.unpack_from(head, 0)[0])
    if size < MIN_SANE_ENTRY_SIZE:
        raise BadEntryLength(log_id, offset, size)
    found = _ids(head[RECORD_SIZE_PREFIX:])
    if expect is not None and found != expect:
        raise WrongEntry(log_id, offset, expect, found)
    return size


def _read_payload(src: ByteSource, log_id: EntryLogId, offset: int, size: int) -> bytes:
    assert size >= MIN_SANE_ENTRY_SIZE, size
    available = max(0, src.size() - offset)
    if available < size:
        raise ShortRead(log_id, offset, size, available)
    payload = src.pread(offset, size)
    if len(payload) != size:
        raise ShortRead(log_id, offset, size, len(payload))
    return payload


def _ids(data: bytes) -> tuple[int, int]:
    assert len(data) >= 16, len(data)
    return int(_INT64.unpack_from(data, 0)[0]), int(_INT64.unpack_from(data, 8)[0])


# --- the ledgers map ----------------------------------------------------------------------


def read_ledgers_map(src: ByteSource, log_id: EntryLogId, header: Header) -> dict[int, int]:
    """The ledgers map the header points to, checked as extractEntryLogMetadataFromIndex does.

    Raises BadLedgersMap with the reason; the caller then scans (extract_metadata does).
    """
    found = _map_or_reason(src, header)
    if isinstance(found, str):
        raise BadLedgersMap(log_id, f"ledgers map unusable: {found}; scan the log instead")
    return found


def map_as_written(src: ByteSource) -> tuple[bool, dict[int, int] | None]:
    """What the header says of the ledgers map, and the map as it was written (the abstract
    state's ``ledgers_maps``, spec/state.py): (sealed, the map when it reads whole, else None).
    ``sealed``: a version 1 header with a non-zero map offset. Unlike :func:`read_ledgers_map`
    an empty map (count 0, rule 6) is returned as ``{}``: it is what sealing an empty log
    writes, though BookKeeper never trusts it."""
    header = peek_header(src)
    if header is None or header.version < HEADER_V1 or header.ledgers_map_offset == 0:
        return False, None
    found = _map_or_reason(src, header, trust_empty=True)
    return True, None if isinstance(found, str) else found


def _map_or_reason(
    src: ByteSource, header: Header, *, trust_empty: bool = False
) -> dict[int, int] | str:
    """The map, or why BookKeeper would reject it (spec page, rules 2 to 6; rule 6, an
    empty map, only without ``trust_empty``)."""
    if header.version < HEADER_V1:
        return f"header version {header.version} predates the ledgers map (version 1)"
    if header.ledgers_map_offset == 0:
        return (
            "the header's map offset is 0: the log was never rotated, "
            "or the header update did not survive a crash"
        )
    if header.ledgers_map_offset < 0:
        return f"the header's map offset {header.ledgers_map_offset} is negative"
    file_size = src.size()
    ledgers: dict[int, int] = {}
    offset = header.ledgers_map_offset
    while offset < file_size:
        size_field = src.pread(offset, RECORD_SIZE_PREFIX)
        if len(size_field) < RECORD_SIZE_PREFIX:
            return f"map record at offset {offset}: its size field is cut by the end of the file"
        record_size = int(_INT32.unpack(size_field)[0])
        if record_size <= 0:
            break
        if record_size > INT32_MAX - RECORD_SIZE_PREFIX:
            return f"map record at offset {offset}: size {record_size} overflows a Java int"
        available = min(record_size, file_size - offset - RECORD_SIZE_PREFIX)
        reason = _add_map_record(src, offset, record_size, available, ledgers)
        if reason is not None:
            return reason
        offset += RECORD_SIZE_PREFIX + record_size
    if len(ledgers) != header.ledgers_count:
        return f"the map lists {len(ledgers)} ledgers, the header says {header.ledgers_count}"
    if header.ledgers_count == 0 and not trust_empty:
        return "the header's ledgers count is 0: an empty map is never trusted"
    return ledgers


def _add_map_record(
    src: ByteSource, offset: int, record_size: int, available: int, ledgers: dict[int, int]
) -> str | None:
    """Add one map record's pairs to ``ledgers``; return why the record is bad, if it is.

    ``available`` is how many of the record's ``record_size`` bytes the file holds. The checks
    come in BookKeeper's order: ledger id, entry id, count, pairs, sums, leftover bytes.
    """
    torn = f"map record at offset {offset} is torn: {available} of its {record_size} bytes"
    body_offset = offset + RECORD_SIZE_PREFIX
    head = src.pread(body_offset, min(available, _MAP_RECORD_HEAD.size))
    if len(head) < 8:
        return torn
    lid = int(_INT64.unpack_from(head, 0)[0])
    if lid != INVALID_LID:
        return f"record at offset {offset} has ledger id {lid}, not {INVALID_LID}: not a map"
    if len(head) < 16:
        return torn
    eid = int(_INT64.unpack_from(head, 8)[0])
    if eid != LEDGERS_MAP_ENTRY_ID:
        return f"record at offset {offset} has entry id {eid}, not {LEDGERS_MAP_ENTRY_ID}"
    if len(head) < _MAP_RECORD_HEAD.size:
        return torn
    count = int(_INT32.unpack_from(head, 16)[0])
    pairs_bytes = LEDGERS_MAP_ENTRY_SIZE * max(count, 0)
    consumed = _MAP_RECORD_HEAD.size + pairs_bytes
    if consumed > available:
        return f"{torn}, too few for the {count} ledgers it lists"
    pairs = src.pread(body_offset + _MAP_RECORD_HEAD.size, pairs_bytes)
    if len(pairs) != pairs_bytes:
        return torn
    for ledger_id, size_bytes in struct.iter_unpack(">qq", pairs):
        reason = _add_ledger_size(ledgers, int(ledger_id), int(size_bytes))
        if reason is not None:
            return f"map record at offset {offset}: {reason}"
    if consumed != available:
        return (
            f"map record at offset {offset}: {available - consumed} bytes left over after "
            f"its {count} ledgers (invalid entry size)"
        )
    assert len(head) == _MAP_RECORD_HEAD.size, len(head)
    return None


def _add_ledger_size(ledgers: dict[int, int], ledger_id: int, size_bytes: int) -> str | None:
    """ConcurrentLongLongHashMap.addAndGet: keys >= 0, every running total >= 0 (Java long)."""
    if ledger_id < 0:
        return f"ledger id {ledger_id} is negative"
    total = _wrap_int64(ledgers.get(ledger_id, 0) + size_bytes)
    if total < 0:
        return f"ledger {ledger_id} would hold a negative size ({total} bytes)"
    ledgers[ledger_id] = total
    return None


def _wrap_int64(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


# --- the scan -----------------------------------------------------------------------------

#: What the scan unpacks in place at each record: size, ledger id, entry id.
_SCAN_HEAD = struct.Struct(">iqq")
assert _SCAN_HEAD.size == ENTRY_HEAD_SIZE
#: The first byte that is not zero (a run of zeros is padding, skipped in one step).
_NOT_ZERO = re.compile(rb"[^\x00]")


class RecordChunk(NamedTuple):
    """One chunk the scan read: ``data`` is the file from offset ``base`` on, ``records`` the
    entries whose heads lie in it (their bodies may run past its end)."""

    base: int
    data: bytes
    records: list[ScannedRecord]

    def holds(self, start: int, end: int) -> bool:
        """Whether the file's bytes ``start`` to ``end`` are all in this chunk."""
        return self.base <= start and end <= self.base + len(self.data)


class _ScanState:
    """scanEntryLog's position and counters, kept while the scan walks the log."""

    __slots__ = (
        "file_size",
        "map_records",
        "padding_bytes",
        "pos",
        "skipped_records",
        "undersized",
    )

    def __init__(self, file_size: int) -> None:
        self.file_size = file_size
        self.pos = LOGFILE_HEADER_SIZE
        self.padding_bytes = 0
        self.map_records = 0
        self.skipped_records = 0
        self.undersized: list[UndersizedRecord] = []

    @property
    def end_offset(self) -> int:
        """Where the last whole record (or padding byte) ends: the scan stops only at a record
        boundary, so this is the position, capped by a file shorter than its header."""
        return min(self.pos, self.file_size)

    def check_invariants(self) -> None:
        assert self.pos >= LOGFILE_HEADER_SIZE, self.pos
        assert self.end_offset <= self.file_size, (self.end_offset, self.file_size)
        assert self.padding_bytes <= self.pos - LOGFILE_HEADER_SIZE, self.padding_bytes
        assert self.map_records >= 0, self.map_records
        assert self.skipped_records >= 0, self.skipped_records
        assert all(r.offset + r.size <= self.pos for r in self.undersized[-1:]), self.pos


def _walk(src: ByteSource, state: _ScanState, chunk_bytes: int) -> Iterator[RecordChunk]:
    """scanEntryLog's walk over ``src``, yielding each chunk read with the entries whose
    heads it holds, in file order.

    Why it is shaped so: GC extracts the metadata of every new log and the compactor scans
    every source, so this loop is the scan's whole cost. It reads ``chunk_bytes`` (at least
    one record head) at a time with one ``pread``, never the records' bodies on their own,
    and unpacks each head in place from the chunk (no slice, no per-record read). The common
    record (a whole entry of a ledger id >= 0) takes the tight inner loop; everything else
    (padding, map records, negative ids, undersized records, a head cut by the end of the
    chunk or of the file) takes the general step below it, which applies the spec page's
    rules one position at a time, exactly as before. Undersized records go to
    ``state.undersized``; the counters to ``state``.
    """
    assert chunk_bytes >= ENTRY_HEAD_SIZE, chunk_bytes
    file_size = state.file_size
    pos = state.pos
    unpack = _SCAN_HEAD.unpack_from
    make = tuple.__new__
    min_size = MIN_SANE_ENTRY_SIZE
    buf = b""
    base = 0  # the file offset of buf[0]
    read_at = -1  # where the last read began: a short read there is not read again
    batch: list[ScannedRecord] = []
    append = batch.append
    while pos < file_size:
        rel = pos - base
        need = min(ENTRY_HEAD_SIZE, file_size - pos)
        if rel + need > len(buf) and read_at != pos:
            if batch:
                yield RecordChunk(base, buf, batch)
                batch = []
                append = batch.append
            buf = src.pread(pos, min(max(need, chunk_bytes), file_size - pos))
            base = read_at = pos
            rel = 0
        # The tight loop: whole heads inside the chunk, whole entries inside the file.
        limit = len(buf) - ENTRY_HEAD_SIZE
        bound = file_size - base - RECORD_SIZE_PREFIX  # rel + size past it: past the file
        payload_base = base + RECORD_SIZE_PREFIX
        while rel <= limit:
            size, ledger_id, entry_id = unpack(buf, rel)
            if size < min_size or ledger_id < 0 or rel + size > bound:
                break
            append(make(ScannedRecord, (ledger_id, entry_id, payload_base + rel, size)))
            rel += RECORD_SIZE_PREFIX + size
        pos = base + rel
        state.pos = pos
        if pos >= file_size:
            break
        if rel + min(ENTRY_HEAD_SIZE, file_size - pos) > len(buf) and read_at != pos:
            continue  # the head is cut by the chunk: read the next chunk first
        # The general step at pos, on the head as far as the chunk and the file hold it.
        head_bytes = min(len(buf) - rel, file_size - pos, ENTRY_HEAD_SIZE)
        if head_bytes < SCAN_HEAD_SIZE:
            break  # "Short read for entry size": fewer than 12 bytes remain.
        size = int(_INT32.unpack_from(buf, rel)[0])
        if size <= 0:
            skip = 1
            if size == 0:  # a run of zeros: every position whose size field is all zeros
                found = _NOT_ZERO.search(buf, rel)
                zeros_end = base + (found.start() if found is not None else len(buf))
                last = min(zeros_end - RECORD_SIZE_PREFIX, file_size - SCAN_HEAD_SIZE)
                skip = max(1, last - pos + 1)
            state.padding_bytes += skip
            pos = state.pos = pos + skip
            continue
        record_end = pos + RECORD_SIZE_PREFIX + size
        if record_end > file_size:
            break  # A torn record, skipped or not, ends the scan.
        ledger_id = int(_INT64.unpack_from(buf, rel + RECORD_SIZE_PREFIX)[0])
        if ledger_id == INVALID_LID:
            state.map_records += 1
        elif ledger_id < 0:
            state.skipped_records += 1
        elif size < MIN_SANE_ENTRY_SIZE:
            offset = pos + RECORD_SIZE_PREFIX
            state.undersized.append(UndersizedRecord(ledger_id=ledger_id, offset=offset, size=size))
        else:
            # The tight loop took every whole entry: only a head the file cut short by
            # shrinking under the scan gets here.
            assert head_bytes < ENTRY_HEAD_SIZE, (pos, size, ledger_id)
            break
        pos = state.pos = record_end
    if batch:
        yield RecordChunk(base, buf, batch)


def iter_records(
    src: ByteSource, log_id: EntryLogId, *, chunk_bytes: int = LIMITS.scan_chunk_bytes
) -> Iterator[ScannedRecord]:
    """The entries of a log in file order, lazily (map and undersized records left out)."""
    del log_id  # the records do not carry it; kept for the callers' symmetry with scan
    state = _ScanState(src.size())
    for chunk in _walk(src, state, chunk_bytes):
        yield from chunk.records
    state.check_invariants()


def iter_record_chunks(
    src: ByteSource, log_id: EntryLogId, *, chunk_bytes: int = LIMITS.scan_chunk_bytes
) -> Iterator[RecordChunk]:
    """The entries of a log as :func:`iter_records` finds them, chunk by chunk, each with the
    bytes the scan read: a caller that needs the records' bytes too (the compactor's copy)
    slices them out of the chunk instead of reading each record again. A record may run
    past the end of its chunk (``RecordChunk.holds``); read that one from the source."""
    del log_id
    state = _ScanState(src.size())
    yield from _walk(src, state, chunk_bytes)
    state.check_invariants()


def scan(
    src: ByteSource, log_id: EntryLogId, *, chunk_bytes: int = LIMITS.scan_chunk_bytes
) -> ScanResult:
    """Walk the whole log as BookKeeper's scanEntryLog does (spec page, "The scan")."""
    state = _ScanState(src.size())
    records: list[ScannedRecord] = []
    for chunk in _walk(src, state, chunk_bytes):
        records += chunk.records
    state.check_invariants()
    result = ScanResult(
        log_id=log_id,
        file_size_bytes=state.file_size,
        records=tuple(records),
        undersized_records=tuple(state.undersized),
        map_records=state.map_records,
        skipped_records=state.skipped_records,
        padding_bytes=state.padding_bytes,
        end_offset=state.end_offset,
        torn_tail_bytes=state.file_size - state.end_offset,
    )
    assert result.torn_tail_bytes >= 0, result.torn_tail_bytes
    assert all(r.offset + r.size <= result.end_offset for r in records[-1:]), result
    return result


# --- metadata -----------------------------------------------------------------------------


def extract_metadata(
    src: ByteSource,
    log_id: EntryLogId,
    *,
    check_magic: bool = True,
    chunk_bytes: int = LIMITS.scan_chunk_bytes,
) -> MetadataResult:
    """Per-ledger bytes of a log: from its ledgers map, else from a scan (getEntryLogMetadata).

    With ``check_magic`` (the default) a short or foreign file raises NotAnEntryLog; without
    it such a file is scanned as BookKeeper would (and usually yields no ledger).
    """
    header = read_header(src, log_id) if check_magic else peek_header(src)
    if header is None:
        reason = f"the header is unreadable: fewer than {HEADER_FIELDS_SIZE} bytes"
    else:
        found = _map_or_reason(src, header)
        if not isinstance(found, str):
            metadata = EntryLogMetadata(log_id=log_id, ledgers=found)
            return MetadataResult(metadata=metadata, source="map", fallback_reason=None)
        reason = found
    result = scan(src, log_id, chunk_bytes=chunk_bytes)
    return MetadataResult(
        metadata=result.metadata(), source="scan", fallback_reason=reason, scan=result
    )
