"""An independent reader of the bookie's files on the simulated disk: what the entry logs, the
ledger index, lastMark and the journals hold, read from the bytes, in the current contents and
in the durable ones (what ``crash(LoseUnsynced())`` would leave).

Why it exists: the refinement harness compares the model with the bookie's abstract state,
which the bookie builds from its own in-memory counters. A record lost or doubled *below* those
counters (on its way from the write buffer to the file, or a ledgers map that disagrees with
the records) is invisible there. proofs/harness/disk_check.py relates what this module reads to
the model instead.

Why it is written again here: the parsers follow the spec pages alone
(spec/format/entry_log.md "The scan" and "The ledgers map", spec/format/ledger_index.md
"Loading" and "Reading a segment", spec/format/journal.md "Header", "Padding" and "The lastMark
file") and import nothing of impl/: a reader sharing the engine's codec would share its
mistakes. The file and directory names are those of the same pages.

Why it is incremental: the harness reads the disk after every step. Each file is re-read only
when its version changed (``SimDisk.directory_files``: a per-inode change count in each tree);
what was parsed is cached by version.
"""

from __future__ import annotations

import functools
import re
import struct
import zlib
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

import attrs

from models.fs.simdisk import FileVersion, SimDisk
from spec.state import MapView

# --- spec/format/entry_log.md -----------------------------------------------------------------

LOG_HEADER_BYTES: Final = 1024
LEDGERS_MAP_OFFSET_POSITION: Final = 8
INVALID_LID: Final = -1
LEDGERS_MAP_ENTRY_ID: Final = -2
LEDGERS_MAP_HEADER_BYTES: Final = 24
LEDGERS_MAP_PAIR_BYTES: Final = 16
MIN_SANE_ENTRY_SIZE: Final = 16
SIZE_PREFIX_BYTES: Final = 4
#: ``<hex id>.log``; hex digits in either case (Long.parseLong), at most a Java int.
_LOG_NAME: Final = re.compile(r"([0-9a-fA-F]+)\.log")
MAX_LOG_ID: Final = 2**31 - 1

# --- spec/format/journal.md -------------------------------------------------------------------

JOURNAL_MAGIC: Final = b"BKLG"
JOURNAL_V5: Final = 5
JOURNAL_HEADER_V5_BYTES: Final = 512
JOURNAL_VERSION_HEADER_BYTES: Final = 8
JOURNAL_PADDING_MASK: Final = -256
LAST_MARK_FILE: Final = "lastMark"
LAST_MARK_BYTES: Final = 16
_JOURNAL_NAME: Final = re.compile(r"([0-9a-fA-F]+)\.txn")

# --- spec/format/ledger_index.md --------------------------------------------------------------

INDEX_DIR_NAME: Final = "bkref-index"
SEGMENT_MAGIC: Final = b"BKIX"
SEGMENT_VERSION: Final = 1
SEGMENT_HEADER_BYTES: Final = 48
SEGMENT_KIND_DELTA: Final = 0
SEGMENT_KIND_FULL: Final = 1
DELETED_FILE: Final = "deleted-ledgers"
DELETED_MAGIC: Final = b"BKDL"
DELETED_RECORD_BYTES: Final = 16
_SEGMENT_NAME: Final = re.compile(r"([0-9a-f]{16})\.seg")

#: BookKeeper's ``current`` directory under every journal and ledger directory.
CURRENT: Final = "current"

# --- spec/protocol/compaction.md and the fixed files of a ledger directory -------------------

#: A compaction's files: ``<hex new>.log.compacting`` and ``<hex new>.log.<hex src>.compacted``.
COMPACTING_SUFFIX: Final = ".log.compacting"
COMPACTED_SUFFIX: Final = ".compacted"
#: The files every ledger directory's ``current`` holds besides its entry logs: lastId,
#: lastMark (spec/format/entry_log.md, spec/format/journal.md) and the identity stamp
#: (spec/format/identity.md); the index directory is a directory, not a file. The journal
#: directory's coverage record (spec/format/journal.md) is here too, for a directory that is
#: both, and every directory's reserve (spec/format/identity.md, "A full disk").
FIXED_LEDGER_FILES: Final = frozenset(
    {"lastId", "lastMark", "bkref-identity", "bkref-coverage", "bkref-reserve"}
)

_I32 = struct.Struct(">i")
_SIZE_AND_LEDGER = struct.Struct(">iq")
_RECORD_HEAD = struct.Struct(">iqq")
_MAP_HEAD = struct.Struct(">qqi")
_PAIR = struct.Struct(">qq")
_HEADER_MAP = struct.Struct(">iqi")  # version, ledgers map offset, ledgers count
_SEGMENT_HEAD = struct.Struct(">4sIIIQQQII")
_BLOCK_HEAD = struct.Struct(">qHHI")
_MARK = struct.Struct(">qq")

LedgerBytes = Mapping[int, int]
T = TypeVar("T")


# --- entry logs -------------------------------------------------------------------------------


def scan_ledger_bytes(data: bytes) -> dict[int, int]:
    """Per ledger, the bytes of its records (size prefix included), by the scan of
    spec/format/entry_log.md "The scan" with ``accepted(ledger_id) = ledger_id >= 0``: it
    stops at the first record that cannot be whole, skips padding a byte at a time and skips
    map records and records of negative ledger ids."""
    out: dict[int, int] = {}
    size_bytes = len(data)
    pos = LOG_HEADER_BYTES
    while pos < size_bytes:
        if size_bytes - pos < 12:
            break
        size, ledger = _SIZE_AND_LEDGER.unpack_from(data, pos)
        if size <= 0:
            pos += 1
            continue
        if ledger < 0:
            pos += SIZE_PREFIX_BYTES + size
            continue
        if size_bytes - pos - SIZE_PREFIX_BYTES < size:
            break
        out[ledger] = out.get(ledger, 0) + size + SIZE_PREFIX_BYTES
        pos += SIZE_PREFIX_BYTES + size
    return out


@attrs.frozen
class LedgersMap:
    """What the header says of the ledgers map, and the map read at its offset.

    ``sealed``: the header says a map is present (version >= 1 and a non-zero offset: the
    log was rotated). ``ledgers``: the map when it reads whole and agrees with the header's
    count (an empty map, count 0, reads as {}); ``problem`` says why it does not."""

    sealed: bool
    count: int
    ledgers: LedgerBytes | None
    problem: str | None


def read_ledgers_map(data: bytes) -> LedgersMap:
    """The ledgers map by the rules of spec/format/entry_log.md "Metadata": rules 1 to 5; an
    empty map (rule 6) is returned as {} so that the caller can hold it against the scan."""
    if len(data) < 20:
        return LedgersMap(False, 0, None, "the header is unreadable")
    version, offset, count = _HEADER_MAP.unpack_from(data, 4)
    if version < 1:
        return LedgersMap(False, count, None, "a version 0 header has no map")
    if offset == 0:
        return LedgersMap(False, count, None, "the header points to no map")
    if offset < 0:
        return LedgersMap(True, count, None, f"negative map offset {offset}")
    ledgers: dict[int, int] = {}
    pos = offset
    while pos < len(data):
        if len(data) - pos < SIZE_PREFIX_BYTES:
            return LedgersMap(True, count, None, f"short map record size at {pos}")
        (size,) = _I32.unpack_from(data, pos)
        if size <= 0:
            break
        body = data[pos + SIZE_PREFIX_BYTES : pos + SIZE_PREFIX_BYTES + size]
        if len(body) < LEDGERS_MAP_HEADER_BYTES - SIZE_PREFIX_BYTES:
            return LedgersMap(True, count, None, f"short map record at {pos}")
        ledger, entry, pairs = _MAP_HEAD.unpack_from(body, 0)
        if ledger != INVALID_LID or entry != LEDGERS_MAP_ENTRY_ID:
            return LedgersMap(True, count, None, f"not a map record at {pos}")
        need = LEDGERS_MAP_HEADER_BYTES - SIZE_PREFIX_BYTES + LEDGERS_MAP_PAIR_BYTES * pairs
        if pairs < 0 or len(body) != need:
            return LedgersMap(True, count, None, f"map record at {pos}: invalid entry size")
        at = LEDGERS_MAP_HEADER_BYTES - SIZE_PREFIX_BYTES
        for _ in range(pairs):
            ledger, size_of = _PAIR.unpack_from(body, at)
            at += LEDGERS_MAP_PAIR_BYTES
            total = ledgers.get(ledger, 0) + size_of
            if ledger < 0 or total < 0:
                return LedgersMap(True, count, None, f"map record at {pos}: bad pair")
            ledgers[ledger] = total
        pos += SIZE_PREFIX_BYTES + size
    if len(ledgers) != count:
        return LedgersMap(
            True, count, None, f"the map holds {len(ledgers)} ledgers, the header says {count}"
        )
    return LedgersMap(True, count, ledgers, None)


@attrs.frozen
class LogFile:
    """One entry log file as the disk holds it.

    ``current`` and ``durable``: per ledger, the bytes of its records by the scan of the
    current contents and of the durable ones (None when the file's name is not durable);
    ``ledgers_map``: the header and map of the current contents."""

    log_id: int
    path: str
    current: LedgerBytes
    durable: LedgerBytes | None
    ledgers_map: LedgersMap
    #: The header and map as the abstract state reports them (spec/state.py, MapView).
    map_view: MapView = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        found = self.ledgers_map
        pairs = None if found.ledgers is None else tuple(sorted(found.ledgers.items()))
        view = MapView(self.log_id, found.sealed, pairs if found.sealed else None)
        object.__setattr__(self, "map_view", view)

    @property
    def sealed(self) -> bool:
        return self.ledgers_map.sealed

    def map_problem(self) -> str | None:
        """Why a sealed log's map is not its scan (None when it is, or when not sealed)."""
        found = self.ledgers_map
        if not found.sealed:
            return None
        if found.ledgers is None:
            return f"its ledgers map is unreadable ({found.problem})"
        if dict(found.ledgers) != dict(self.current):
            return (
                f"its ledgers map says {_sizes(found.ledgers)}, its records {_sizes(self.current)}"
            )
        return None


def _sizes(sizes: LedgerBytes) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(sizes.items())) + "}"


# --- journal and lastMark ---------------------------------------------------------------------


def read_last_mark(data: bytes) -> tuple[int, int] | None:
    """A lastMark file's mark, or None when it counts as no mark (spec/format/journal.md "The
    lastMark file": fewer than 16 bytes or a negative field)."""
    if len(data) < LAST_MARK_BYTES:
        return None
    journal_id, offset = _MARK.unpack_from(data, 0)
    if journal_id < 0 or offset < 0:
        return None
    return journal_id, offset


def journal_boundaries(data: bytes) -> frozenset[int]:
    """The offsets where a record (or padding, or the end marker) may start in a journal:
    after the header and after each whole record or padding record (spec/format/journal.md
    "Grammar", "Header", "Padding"). The walk stops at an end marker, an invalid length or a
    record cut short."""
    if len(data) >= JOURNAL_VERSION_HEADER_BYTES and data[:4] == JOURNAL_MAGIC:
        (version,) = _I32.unpack_from(data, 4)
        start = JOURNAL_HEADER_V5_BYTES if version >= JOURNAL_V5 else JOURNAL_VERSION_HEADER_BYTES
    else:
        start = 0
    out = {start}
    pos = start
    while len(data) - pos >= SIZE_PREFIX_BYTES:
        (length,) = _I32.unpack_from(data, pos)
        if length == 0:
            break
        if length == JOURNAL_PADDING_MASK:
            if len(data) - pos < 8:
                break
            (zeros,) = _I32.unpack_from(data, pos + SIZE_PREFIX_BYTES)
            if zeros < 0:
                break
            pos += 8 + zeros
        elif length < 0:
            break
        else:
            pos += SIZE_PREFIX_BYTES + length
        if pos > len(data):
            break
        out.add(pos)
    return frozenset(out)


# --- the ledger index -------------------------------------------------------------------------


class IndexError_(Exception):
    """A durable index file that cannot be read as spec/format/ledger_index.md says."""


def read_segment(data: bytes, name_seq: int) -> tuple[int, dict[tuple[int, int], int]]:
    """A segment's kind and its entries ((ledger, entry) -> location); IndexError_ when it
    fails the checks of "Reading a segment" (the ones this reader needs)."""
    if len(data) < SEGMENT_HEADER_BYTES:
        raise IndexError_("shorter than its header")
    magic, version, kind, ledger_count, seq, entry_count, body_bytes, body_crc, head_crc = (
        _SEGMENT_HEAD.unpack_from(data, 0)
    )
    if magic != SEGMENT_MAGIC:
        raise IndexError_("bad magic")
    if zlib.crc32(data[:44]) != head_crc:
        raise IndexError_("bad header crc")
    if version != SEGMENT_VERSION or kind not in (SEGMENT_KIND_DELTA, SEGMENT_KIND_FULL):
        raise IndexError_(f"version {version}, kind {kind}")
    if body_bytes != len(data) - SEGMENT_HEADER_BYTES or zlib.crc32(data[48:]) != body_crc:
        raise IndexError_("bad body length or crc")
    if seq != name_seq:
        raise IndexError_(f"seq {seq} in a file named for {name_seq}")
    entries: dict[tuple[int, int], int] = {}
    pos = SEGMENT_HEADER_BYTES
    for _ in range(ledger_count):
        if len(data) - pos < _BLOCK_HEAD.size:
            raise IndexError_("a ledger block runs past the end")
        ledger, _flags, key_len, count = _BLOCK_HEAD.unpack_from(data, pos)
        pos += _BLOCK_HEAD.size + key_len
        if len(data) - pos < count * _PAIR.size:
            raise IndexError_("entry pairs run past the end")
        for _ in range(count):
            entry, location = _PAIR.unpack_from(data, pos)
            pos += _PAIR.size
            entries[(ledger, entry)] = location
    if pos != len(data) or len(entries) != entry_count:
        raise IndexError_("blocks do not end at the end of the file, or miscount")
    return kind, entries


def read_deleted(data: bytes) -> frozenset[int]:
    """The deleted ledgers: the intact records before the first one that is not."""
    out: set[int] = set()
    for pos in range(0, len(data) - DELETED_RECORD_BYTES + 1, DELETED_RECORD_BYTES):
        record = data[pos : pos + DELETED_RECORD_BYTES]
        (ledger,) = struct.unpack_from(">q", record, 4)
        (crc,) = struct.unpack_from(">I", record, 12)
        if record[:4] != DELETED_MAGIC or ledger < 0 or zlib.crc32(record[:12]) != crc:
            break
        out.add(ledger)
    return frozenset(out)


# --- file names -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _log_name_id(name: str) -> int | None:
    """The hex id in an entry log file's name ``<hex id>.log``, or None when ``name`` is not
    such a name (memoised: a pure function of the name, asked for every file of a directory
    at every step)."""
    match = _LOG_NAME.fullmatch(name)
    return None if match is None else int(match.group(1), 16)


def log_id_of(name: str) -> int | None:
    """The id of the entry log file named ``name``, or None when it is not one (the id must
    be at most a Java int)."""
    log_id = _log_name_id(name)
    return log_id if log_id is not None and log_id <= MAX_LOG_ID else None


@functools.lru_cache(maxsize=4096)
def _journal_id_of(name: str) -> int | None:
    match = _JOURNAL_NAME.fullmatch(name)
    return None if match is None else int(match.group(1), 16)


# --- parsing by content -----------------------------------------------------------------------

#: What the parsers made of some bytes, by (what, the bytes): shared by every view, so that a
#: view of a copied and crashed disk (the harness's shadow crashes) finds what a view of the
#: original already parsed. The parsers are pure functions of the bytes and what they return
#: is never changed (read-only mappings, frozen values), so a hit is the parse itself.
_BY_CONTENT: dict[tuple[str, bytes], object] = {}
_BY_CONTENT_MAX = 4096


def parsed_by_content(what: str, data: bytes, parse: Callable[[bytes], T]) -> T:
    """``parse(data)``, memoised by content (``what`` names the parser)."""
    key = (what, data)
    found = _BY_CONTENT.get(key)
    if found is None:
        found = parse(data)
        if len(_BY_CONTENT) >= _BY_CONTENT_MAX:
            _BY_CONTENT.clear()
        _BY_CONTENT[key] = found
    return found  # type: ignore[return-value]


# --- the view ---------------------------------------------------------------------------------


class DiskView:
    """The bookie's files on ``disk``, re-read only where they changed since the last call.

    ``ledger_dirs`` and ``journal_dir`` are the bookie's directories (their ``current``
    sub-directories hold the files); the index is under the first ledger directory."""

    def __init__(self, disk: SimDisk, ledger_dirs: tuple[str, ...], journal_dir: str) -> None:
        self.disk = disk
        self.ledger_dirs = ledger_dirs
        self.journal_dir = journal_dir
        self._cache: dict[tuple[str, bool, FileVersion], object] = {}
        self._used: set[tuple[str, bool, FileVersion]] = set()
        #: What the durable checks read: every ``current`` and the index directory.
        self.durable_directories = (
            *(f"{d}/{CURRENT}" for d in (*ledger_dirs, journal_dir)),
            f"{ledger_dirs[0]}/{CURRENT}/{INDEX_DIR_NAME}",
        )
        #: Per ledger directory: per log file name, its versions (current, durable) and
        #: what was read of it then.
        self._log_files: dict[str, dict[str, tuple[FileVersion, FileVersion | None, LogFile]]] = {}
        self._index_dir = f"{ledger_dirs[0]}/{CURRENT}/{INDEX_DIR_NAME}"
        #: The durable index's locations and the index directory's durable version then.
        self._index: tuple[object, Mapping[tuple[int, int], int]] | None = None
        #: The ledger directories' ``current`` sub-directories.
        self._ledger_currents = tuple(f"{d}/{CURRENT}" for d in ledger_dirs)
        #: The durable lastMark and the durable versions of ``_ledger_currents`` it was read at.
        self._last_mark: tuple[tuple[object, ...], tuple[int, int] | None] | None = None
        #: Per ledger directory: its versions (current, durable) and its log files then.
        self._dir_logs: dict[str, tuple[object, dict[int, LogFile]]] = {}

    def _parsed(
        self, what: str, version: FileVersion, durable: bool, parse: Callable[[bytes], T]
    ) -> T:
        """``parse`` of the bytes of ``version``, cached by version and by content: ``what``
        must name the parse completely (it is a function of the bytes alone)."""
        key = (what, durable, version)
        self._used.add(key)
        found = self._cache.get(key)
        if found is None:
            data = self.disk.version_bytes(version, durable=durable)
            found = parsed_by_content(what, data, parse)
            self._cache[key] = found
        return found  # type: ignore[return-value]

    def forget_unused(self) -> None:
        """Drop what the calls since the last ``forget_unused`` did not read (old versions)."""
        if len(self._cache) > len(self._used):
            self._cache = {key: value for key, value in self._cache.items() if key in self._used}
        self._used = set()

    def _files(self, directory: str, *, durable: bool) -> dict[str, FileVersion]:
        return self.disk.directory_files(f"{directory}/{CURRENT}", durable=durable)

    def version_key(self, directories: tuple[str, ...], *, durable: bool) -> tuple[object, ...]:
        """A value that changes whenever a file in one of ``directories`` (full paths)
        changes (its bytes, or its name), in the current or the durable tree."""
        return tuple(
            self.disk.directory_version(directory, durable=durable) for directory in directories
        )

    def logs(self) -> dict[int, LogFile]:
        """Every entry log file under the ledger directories' ``current``, by id."""
        out: dict[int, LogFile] = {}
        for directory in self.ledger_dirs:
            path = f"{directory}/{CURRENT}"
            key = (
                self.disk.directory_version(path),
                self.disk.directory_version(path, durable=True),
            )
            cached = self._dir_logs.get(directory)
            if cached is None or cached[0] != key:
                cached = key, self._read_logs(directory)
                self._dir_logs[directory] = cached
            for log_id, found in cached[1].items():
                assert log_id not in out, f"entry log {log_id} in two directories"
                out[log_id] = found
        return out

    def ledger_dir_files(self) -> dict[str, tuple[str, ...]]:
        """Per ledger directory's ``current``, the names of the files it holds now (reads'
        view; sub-directories are not listed)."""
        return {
            f"{directory}/{CURRENT}": tuple(sorted(self._files(directory, durable=False)))
            for directory in self.ledger_dirs
        }

    def ledgers_maps(self) -> tuple[MapView, ...]:
        """Each entry log's header and ledgers map, by log id (AbstractState.ledgers_maps)."""
        logs = self.logs()
        return tuple(logs[log_id].map_view for log_id in sorted(logs))

    def _read_logs(self, directory: str) -> dict[int, LogFile]:
        """The log files of one directory, re-parsing only the files whose current or
        durable version changed since the last read."""
        before = self._log_files.get(directory, {})
        now: dict[str, tuple[FileVersion, FileVersion | None, LogFile]] = {}
        durable_files = self._files(directory, durable=True)
        for name, version in self._files(directory, durable=False).items():
            log_id = log_id_of(name)
            if log_id is None:
                continue
            durable_version = durable_files.get(name)
            known = before.get(name)
            if known is not None and known[:2] == (version, durable_version):
                now[name] = known
                continue
            data = self.disk.version_bytes(version)
            if known is not None and known[1] == durable_version:
                durable = known[2].durable
            elif durable_version is None:
                durable = None
            else:
                durable_data = self.disk.version_bytes(durable_version, durable=True)
                durable = parsed_by_content("scan", durable_data, scan_ledger_bytes)
            found = LogFile(
                log_id,
                f"{directory}/{CURRENT}/{name}",
                parsed_by_content("scan", data, scan_ledger_bytes),
                durable,
                parsed_by_content("map", data, read_ledgers_map),
            )
            now[name] = (version, durable_version, found)
        self._log_files[directory] = now
        return {entry[2].log_id: entry[2] for entry in now.values()}

    def durable_last_mark(self) -> tuple[int, int] | None:
        """The largest durable lastMark over the ledger directories (None: no mark). Read
        again only when a durable file of a ledger directory's ``current`` changed."""
        key = self.version_key(self._ledger_currents, durable=True)
        if self._last_mark is not None and self._last_mark[0] == key:
            return self._last_mark[1]
        mark = self._read_durable_last_mark()
        self._last_mark = key, mark
        return mark

    def _read_durable_last_mark(self) -> tuple[int, int] | None:
        marks = []
        for directory in self.ledger_dirs:
            version = self._files(directory, durable=True).get(LAST_MARK_FILE)
            if version is not None:
                mark = self._parsed("mark", version, True, read_last_mark)
                if mark is not None:
                    marks.append(mark)
        return max(marks, default=None)

    def durable_journals(self) -> dict[int, FileVersion]:
        """The durable journal files by id."""
        out: dict[int, FileVersion] = {}
        for name, version in self._files(self.journal_dir, durable=True).items():
            journal_id = _journal_id_of(name)
            if journal_id is not None:
                out[journal_id] = version
        return out

    def journal_length_and_boundaries(self, version: FileVersion) -> tuple[int, frozenset[int]]:
        """A durable journal's length and its record boundaries."""

        def parse(data: bytes) -> tuple[int, frozenset[int]]:
            return len(data), journal_boundaries(data)

        return self._parsed("journal", version, True, parse)

    def durable_index(self) -> Mapping[tuple[int, int], int]:
        """The locations a load of the durable index would find ((ledger, entry) ->
        location), deleted ledgers dropped; IndexError_ when a segment it reads is bad. Read
        again only when the index directory's durable version moved (a failure is not kept:
        it is read again)."""
        key = self.disk.directory_version(self._index_dir, durable=True)
        if self._index is not None and self._index[0] == key:
            return self._index[1]
        locations = self._read_durable_index()
        self._index = key, locations
        return locations

    def _read_durable_index(self) -> dict[tuple[int, int], int]:
        directory = self._index_dir
        files = self.disk.directory_files(directory, durable=True)
        segments = {}
        for name, version in files.items():
            match = _SEGMENT_NAME.fullmatch(name)
            if match is not None:
                segments[int(match.group(1), 16)] = (name, version)
        deleted_version = files.get(DELETED_FILE)
        deleted = (
            frozenset()
            if deleted_version is None
            else self._parsed("deleted", deleted_version, True, read_deleted)
        )
        chain = []
        seq = max(segments, default=0)
        while seq > 0:
            if seq not in segments:
                raise IndexError_(f"segment {seq} is missing, yet a later one builds on it")
            name, version = segments[seq]

            def parse(data: bytes, seq: int = seq) -> tuple[int, dict[tuple[int, int], int]]:
                return read_segment(data, seq)

            try:
                kind, entries = self._parsed(f"segment {seq}", version, True, parse)
            except IndexError_ as exc:
                raise IndexError_(f"durable segment {name}: {exc}") from None
            chain.append(entries)
            if kind == SEGMENT_KIND_FULL:
                break
            if seq == 1:
                raise IndexError_("the first segment is a delta")
            seq -= 1
        out: dict[tuple[int, int], int] = {}
        for entries in reversed(chain):
            out.update(entries)
        return {key: loc for key, loc in out.items() if key[0] not in deleted}

    def durable_log_versions(self) -> dict[int, FileVersion]:
        """The durable entry log files by id."""
        out: dict[int, FileVersion] = {}
        for directory in self.ledger_dirs:
            for name, version in self._files(directory, durable=True).items():
                log_id = _log_name_id(name)
                if log_id is not None:
                    out[log_id] = version
        return out

    def durable_bytes(self, version: FileVersion) -> bytes:
        return self.disk.version_bytes(version, durable=True)


def record_at(data: bytes, payload_offset: int) -> tuple[int, int] | str:
    """The (ledger, entry) of the record whose payload starts at ``payload_offset``, read as
    spec/format/entry_log.md "Reading one entry" does, or why none is there."""
    at = payload_offset - SIZE_PREFIX_BYTES
    if at < LOG_HEADER_BYTES or len(data) - at < _RECORD_HEAD.size:
        return "past the end of the durable bytes"
    size, ledger, entry = _RECORD_HEAD.unpack_from(data, at)
    if size < MIN_SANE_ENTRY_SIZE:
        return f"a record of size {size}"
    if len(data) - payload_offset < size:
        return "a record cut short"
    return ledger, entry
