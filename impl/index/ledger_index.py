"""The ledger index: (ledger, entry) -> location, and per ledger its key, fence and last entry.

Implements spec/format/ledger_index.md (the format is ours; BookKeeper keeps the same facts in
its ``.idx`` files and LedgerCache): the bytes are impl/format/ledger_index.py, the file names
impl/format/names.py; this module is the behaviour (memory, flush and merge, load). Why it
exists: a read needs the location of an entry in the entry logs, and the add path needs the
first master key and the fence flag of a ledger.

Durability contract, which the bookie builds its checkpoint on:
- ``put_entry``, ``set_master_key`` and ``set_fenced`` change memory only. ``flush`` (the
  checkpoint step) makes everything changed so far durable at once, as one new segment file
  written crash-consistently (write ``.tmp``, fsync, rename, fsync the directory). What a
  crash takes from the index before ``flush`` returns, the journal still holds: the bookie
  replays it from the mark it captured BEFORE calling ``flush``.
- ``delete_ledger`` is durable on return: one CRC'd record appended to the deleted-ledgers
  file and fsynced. Deleted ids stay deleted forever (BookKeeper never reuses a ledger id),
  so the journal replay and the index rebuild can skip them.

Single-threaded: the bookie holds its own lock around every call. ``put_entry`` and
``get_location`` are the hot path (two dict operations each, no allocation beyond the dicts').

Not verified here: that a location points at the right bytes (the entry logger checks the
ledger and entry ids on every read), concurrent writers of one index directory (excluded by
the bookie's directory locks, impl/bookie/identity.py: a second process on the same ledger
directory is refused before it reads anything), and a disk that corrupts durable bytes
silently (the CRCs catch most of it; the result is then a RecoveryError, not a repair).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from impl.format.ledger_index import (
    DELETED_RECORD_SIZE,
    MASTER_KEY_MAX_BYTES,
    SEGMENT_HEADER_SIZE,
    SEGMENT_KIND_DELTA,
    SEGMENT_KIND_FULL,
    DeletedFileDamage,
    Segment,
    decode_deleted_file,
    decode_segment,
    encode_deleted_record,
    encode_ledger_block,
    encode_segment,
)
from impl.format.names import (
    DELETED_FILE_NAME,
    is_tmp_file_name,
    parse_segment_file_name,
    segment_file_name,
    tmp_file_name,
)
from impl.fs.api import FileSystem, join, parent
from impl.limits import LIMITS, Limits
from spec.errors import REPLICA_ADVICE, DamagedFile, FsError, FsNoSpace
from spec.ids import INT64_MAX, EntryId, LedgerId, Location

# --- value objects ----------------------------------------------------------------------------


class TombstoneUncertain(FsError):
    """A deleted-ledgers record was written, or partly, and a later step of its write failed
    (its fsync, the read-back, the directory's fsync): the deletion may or may not survive a
    crash, and nothing in memory says it happened. Until the next start reads the file, the
    ledger must be neither served for writes as live nor taken as deleted."""

    def __init__(self, ledger_id: int, cause: FsError) -> None:
        super().__init__(
            cause.path, f"the tombstone of ledger {ledger_id} was written, then: {cause}"
        )
        self.ledger_id = ledger_id


@attrs.frozen
class LedgerRecord:
    """What the index knows of one ledger (for tests, inspect and the model)."""

    key: bytes | None
    fenced: bool
    entries: tuple[tuple[EntryId, Location], ...]


@attrs.frozen
class IndexState:
    """The abstract state of an index: its ledgers (sorted by id) and the deleted ids."""

    ledgers: tuple[tuple[LedgerId, LedgerRecord], ...]
    deleted: frozenset[LedgerId]


# --- the index ----------------------------------------------------------------------------------


class _Ledger:
    """Per-ledger state. ``dirty`` holds the entries put since the last flush."""

    __slots__ = ("dirty", "entries", "fenced", "key", "last")

    def __init__(self) -> None:
        self.entries: dict[EntryId, Location] = {}
        self.dirty: dict[EntryId, Location] = {}
        self.last: int = -1
        self.key: bytes | None = None
        self.fenced = False


def _recovery_error(path: str, what: str) -> DamagedFile:
    return DamagedFile(
        path,
        None,
        f"{what}; segments are renamed into place only once durable and never "
        "modified, so this is damage, not a crash leftover",
        "restore the index directory (all of it: the segments and deleted-ledgers) from a "
        "backup taken while the bookie was stopped. Do not move it aside: a rebuild from the "
        f"entry logs loses every master key, fence and delete not in the journal. {REPLICA_ADVICE}",
    )


class LedgerIndex:
    """The index of one bookie (spec/format/ledger_index.md). Build it with ``load``.

    The merge policy (spec page, "Writing") takes its bounds from ``limits``
    (impl/limits.py): ``index_segments_max`` (the page's SEGMENTS_MAX) and
    ``index_merge_min_bytes`` (MERGE_MIN_BYTES).
    """

    def __init__(self, fs: FileSystem, index_dir: str, *, limits: Limits = LIMITS) -> None:
        self._fs = fs
        self._dir = index_dir
        self._segments_max = limits.index_segments_max
        self._merge_min_bytes = limits.index_merge_min_bytes
        self._ledgers: dict[LedgerId, _Ledger] = {}
        self._dirty: dict[LedgerId, _Ledger] = {}
        self._deleted: set[LedgerId] = set()
        #: Bytes of the intact prefix of the deleted-ledgers file (the next record goes there).
        self._deleted_bytes = 0
        #: The segments a load would read now: seq -> size in bytes; the lowest is full.
        self._live: dict[int, int] = {}
        self._base_seq = 0
        self._last_seq = 0
        #: Names superseded by a merge, or leftover ``.tmp`` files, to unlink at a flush.
        self._obsolete: list[str] = []
        self._dir_durable = False
        #: Whether the deleted-ledgers file's name is known durable (found at load, or its
        #: directory fsynced since this process wrote it).
        self._deleted_name_durable = False
        self._persisted = False

    # --- loading ------------------------------------------------------------------------

    @classmethod
    def load(cls, fs: FileSystem, index_dir: str, *, limits: Limits = LIMITS) -> LedgerIndex:
        """The index persisted in ``index_dir`` (which need not exist yet).

        Raises DamagedFile (a RecoveryError) when a segment or the deleted-ledgers file is
        damaged, before anything is written. Makes
        durable what it found (an fsync of the deleted-ledgers file and of the directory), so
        nothing this process acts on can vanish in a later crash.
        """
        index = cls(fs, index_dir, limits=limits)
        if not fs.exists(index_dir):
            return index
        names = fs.listdir(index_dir)
        if DELETED_FILE_NAME in names:
            index._load_deleted()
        chain = index._read_chain(names)
        for segment, size_bytes in chain:
            index._apply(segment)
            index._live[segment.seq] = size_bytes
        if chain:
            index._base_seq = chain[0][0].seq
            index._last_seq = chain[-1][0].seq
        index._persisted = bool(chain)
        index._obsolete = [name for name in names if index._is_leftover(name)]
        index._make_found_durable(DELETED_FILE_NAME in names)
        return index

    def _is_leftover(self, name: str) -> bool:
        """A ``.tmp`` file, or a segment older than the full one a load starts from."""
        seq = parse_segment_file_name(name)
        return is_tmp_file_name(name) or (seq is not None and seq < self._base_seq)

    def _load_deleted(self) -> None:
        path = join(self._dir, DELETED_FILE_NAME)
        handle = self._fs.open(path, read_only=True)
        try:
            decoded = decode_deleted_file(handle.pread(0, handle.size()))
        finally:
            handle.close()
        if isinstance(decoded, DeletedFileDamage):
            raise DamagedFile(
                path,
                decoded.offset,
                decoded.problem,
                "do not delete or truncate the file: every ledger it names would come back, "
                "and every fenced ledger among them would take writes again. Restore it from "
                "a backup taken while the bookie was stopped, or repair the record at this "
                "offset by hand (16 bytes: 'BKDL', int64 ledger id, CRC32 of those 12 bytes) "
                f"if you know which ledger it deleted. {REPLICA_ADVICE}",
            )
        ledgers, self._deleted_bytes = decoded
        self._deleted.update(ledgers)

    def _read_chain(self, names: list[str]) -> list[tuple[Segment, int]]:
        """The newest full segment and the deltas after it, in sequence order."""
        seqs = {seq for seq in map(parse_segment_file_name, names) if seq is not None}
        chain: list[tuple[Segment, int]] = []
        seq = max(seqs, default=0)
        while seq:
            path = join(self._dir, segment_file_name(seq))
            if seq not in seqs:
                raise _recovery_error(
                    path, f"is missing, yet segment {seq + 1:016x} is there and builds on it"
                )
            segment, size_bytes = self._read_segment(path, seq)
            chain.append((segment, size_bytes))
            if segment.kind == SEGMENT_KIND_DELTA and seq == 1:
                raise _recovery_error(path, "is a delta, yet no full segment comes before it")
            seq = 0 if segment.kind == SEGMENT_KIND_FULL else seq - 1
        chain.reverse()
        assert not chain or chain[0][0].kind == SEGMENT_KIND_FULL
        return chain

    def _read_segment(self, path: str, seq: int) -> tuple[Segment, int]:
        handle = self._fs.open(path, read_only=True)
        try:
            data = handle.pread(0, handle.size())
        finally:
            handle.close()
        segment = decode_segment(data)
        if isinstance(segment, str):
            raise _recovery_error(path, segment)
        if segment.seq != seq:
            raise _recovery_error(path, f"its header says sequence {segment.seq:016x}")
        return segment, len(data)

    def _apply(self, segment: Segment) -> None:
        for block in segment.blocks:
            if block.ledger_id in self._deleted:
                continue
            ledger = self._ledgers.get(block.ledger_id)
            if ledger is None:
                ledger = self._ledgers[block.ledger_id] = _Ledger()
            if block.key is not None:
                if ledger.key is not None and ledger.key != block.key:
                    raise _recovery_error(
                        join(self._dir, segment_file_name(segment.seq)),
                        f"ledger {block.ledger_id} has another master key than before",
                    )
                ledger.key = block.key
            ledger.fenced = ledger.fenced or block.fenced
            if block.entries:
                ledger.entries.update(block.entries)
                ledger.last = max(ledger.last, max(block.entries))

    def _make_found_durable(self, has_deleted_file: bool) -> None:
        """A name or byte seen here may be one a killed process wrote but never synced."""
        if has_deleted_file:
            handle = self._fs.open(join(self._dir, DELETED_FILE_NAME))
            try:
                handle.fsync()
            finally:
                handle.close()
        self._fs.fsync_dir(self._dir)
        self._fs.fsync_dir(parent(self._dir))
        self._dir_durable = True
        self._deleted_name_durable = has_deleted_file

    # --- the hot path ---------------------------------------------------------------------

    def put_entry(self, ledger_id: LedgerId, entry_id: EntryId, location: Location) -> None:
        """Record where an entry is. A later put of the same entry replaces the location."""
        assert entry_id >= 0, entry_id
        assert location >= 0, location
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            ledger = self._new_ledger(ledger_id)
        ledger.entries[entry_id] = location
        ledger.dirty[entry_id] = location
        if entry_id > ledger.last:
            ledger.last = entry_id
        self._dirty[ledger_id] = ledger

    def get_location(self, ledger_id: LedgerId, entry_id: EntryId) -> Location | None:
        """The location of an entry, None if the index has none."""
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            return None
        return ledger.entries.get(entry_id)

    def _new_ledger(self, ledger_id: LedgerId) -> _Ledger:
        assert 0 <= ledger_id <= INT64_MAX, ledger_id
        assert ledger_id not in self._deleted, f"ledger {ledger_id} is deleted: check first"
        ledger = self._ledgers[ledger_id] = _Ledger()
        return ledger

    # --- per-ledger facts -------------------------------------------------------------------

    def last_entry(self, ledger_id: LedgerId) -> EntryId | None:
        """The largest entry id the index holds for the ledger, None if it holds none."""
        ledger = self._ledgers.get(ledger_id)
        if ledger is None or ledger.last < 0:
            return None
        return EntryId(ledger.last)

    def has_ledger(self, ledger_id: LedgerId) -> bool:
        """Whether the ledger has a key, a fence or an entry (and is not deleted)."""
        return ledger_id in self._ledgers

    def ledgers(self) -> list[LedgerId]:
        """Every ledger the index knows, in id order."""
        return sorted(self._ledgers)

    def entries(self, ledger_id: LedgerId) -> list[tuple[EntryId, Location]]:
        """The ledger's (entry id, location) pairs in entry id order."""
        ledger = self._ledgers.get(ledger_id)
        return [] if ledger is None else sorted(ledger.entries.items())

    def set_master_key(self, ledger_id: LedgerId, key: bytes) -> None:
        """Set the ledger's key if it has none. The first key sticks: the caller compares
        (``master_key``) and refuses a different one; passing one here is a bug."""
        assert len(key) <= MASTER_KEY_MAX_BYTES, len(key)
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            ledger = self._new_ledger(ledger_id)
        if ledger.key is None:
            ledger.key = bytes(key)
            self._dirty[ledger_id] = ledger
        assert ledger.key == key, f"ledger {ledger_id}: the key differs from the first one"

    def master_key(self, ledger_id: LedgerId) -> bytes | None:
        ledger = self._ledgers.get(ledger_id)
        return None if ledger is None else ledger.key

    def set_fenced(self, ledger_id: LedgerId) -> None:
        """Fence the ledger (in memory; the journal's fence record is what makes it durable
        before the next flush)."""
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            ledger = self._new_ledger(ledger_id)
        if not ledger.fenced:
            ledger.fenced = True
            self._dirty[ledger_id] = ledger

    def is_fenced(self, ledger_id: LedgerId) -> bool:
        ledger = self._ledgers.get(ledger_id)
        return ledger is not None and ledger.fenced

    def is_deleted(self, ledger_id: LedgerId) -> bool:
        return ledger_id in self._deleted

    def writable_key(self, ledger_id: LedgerId) -> bytes | None:
        """The ledger's key when an add may go in with that key: the ledger has a key, is
        not fenced and (being indexed) not deleted. None otherwise: the caller then asks
        ``is_deleted``, ``master_key`` and ``is_fenced`` to learn why. One dict lookup for
        the add path's common case."""
        ledger = self._ledgers.get(ledger_id)
        if ledger is None or ledger.fenced:
            return None
        return ledger.key

    def deleted_ledgers(self) -> frozenset[LedgerId]:
        return frozenset(self._deleted)

    # --- deletion -------------------------------------------------------------------------

    def delete_ledger(self, ledger_id: LedgerId) -> None:
        """Delete the ledger, durably before returning: its entries, key and fence vanish and
        its id is refused forever. Deleting a deleted ledger does nothing. On an FsError
        nothing changed in memory: raised as is when nothing of the record reached the file
        (the deletion is not in effect, now or after a crash), as :class:`TombstoneUncertain`
        once the record's write was issued (the deletion may survive a crash, so the ledger
        must not be written to as if it had not happened)."""
        assert 0 <= ledger_id <= INT64_MAX, ledger_id
        if ledger_id in self._deleted:
            return
        self._append_deleted(ledger_id)
        self._deleted.add(ledger_id)
        self._ledgers.pop(ledger_id, None)
        self._dirty.pop(ledger_id, None)

    def _append_deleted(self, ledger_id: LedgerId) -> None:
        """Write the record at the end of the intact prefix (over any torn remains), fsync
        the file, and the directory until the file's name is known durable."""
        self._ensure_dir()
        path = join(self._dir, DELETED_FILE_NAME)
        record = encode_deleted_record(ledger_id)
        handle = self._fs.open(path, create=True)
        written = False
        try:
            if handle.size() != self._deleted_bytes:
                handle.truncate(self._deleted_bytes)
            written = True
            handle.pwrite(self._deleted_bytes, record)
            handle.fsync()
            assert handle.pread(self._deleted_bytes, DELETED_RECORD_SIZE) == record
        except FsNoSpace:
            raise  # the write was refused whole: nothing of the record is in the file
        except FsError as exc:
            if written:
                raise TombstoneUncertain(ledger_id, exc) from exc
            raise
        finally:
            handle.close()
        if not self._deleted_name_durable:
            try:
                self._fs.fsync_dir(self._dir)
            except FsError as exc:
                raise TombstoneUncertain(ledger_id, exc) from exc
            self._deleted_name_durable = True
        self._deleted_bytes += DELETED_RECORD_SIZE

    def _ensure_dir(self) -> None:
        """Create the index directory and make its name durable, once per process."""
        if self._dir_durable:
            return
        self._fs.mkdir(self._dir)
        self._fs.fsync_dir(parent(self._dir))
        self._dir_durable = True

    # --- flush (the checkpoint step) ----------------------------------------------------------

    def flush(self) -> None:
        """Make every put, key and fence so far durable: one new segment, written to a
        ``.tmp`` name, fsynced, renamed into place, directory fsynced. Writes a delta of what
        changed; a merged full segment when the deltas grow past ``index_segments_max`` files or
        the full segment's size. On an FsError nothing is lost: the changes stay pending."""
        if not self._dirty and self._live:
            return
        self._ensure_dir()
        seq = self._last_seq + 1
        kind = SEGMENT_KIND_DELTA
        data = b""
        if self._live:
            data = encode_segment(kind, seq, self._blocks(self._dirty.items(), delta=True))
        if self._should_merge(len(data)):
            kind = SEGMENT_KIND_FULL
            data = encode_segment(kind, seq, self._blocks(sorted(self._ledgers.items())))
        self._write_segment(seq, data)
        self._commit(seq, kind, len(data))
        self._remove_obsolete()

    def _blocks(
        self, ledgers: Iterable[tuple[LedgerId, _Ledger]], *, delta: bool = False
    ) -> Iterable[tuple[bytes, int]]:
        for ledger_id, ledger in ledgers:
            entries = ledger.dirty if delta else ledger.entries
            yield encode_ledger_block(ledger_id, ledger.key, ledger.fenced, sorted(entries.items()))

    def _should_merge(self, delta_bytes: int) -> bool:
        """Merge when there is no full segment yet, when one more file would exceed
        ``index_segments_max``, or when the deltas reach the full segment's size (so merging
        costs at most twice the bytes the deltas cost: amortised, a flush is O(changes))."""
        if not self._live:
            return True
        if len(self._live) + 1 > self._segments_max:
            return True
        full_bytes = self._live[self._base_seq]
        deltas_bytes = sum(self._live.values()) - full_bytes + delta_bytes
        return deltas_bytes >= max(full_bytes, self._merge_min_bytes)

    def _write_segment(self, seq: int, data: bytes) -> None:
        final = join(self._dir, segment_file_name(seq))
        tmp = join(self._dir, tmp_file_name(segment_file_name(seq)))
        handle = self._fs.open(tmp, create=True)
        try:
            handle.truncate(0)
            handle.pwrite(0, data)
            handle.fsync()
            assert handle.size() == len(data), (handle.size(), len(data))
            assert handle.pread(0, SEGMENT_HEADER_SIZE) == data[:SEGMENT_HEADER_SIZE]
        finally:
            handle.close()
        self._fs.rename(tmp, final)
        self._fs.fsync_dir(self._dir)

    def _commit(self, seq: int, kind: int, size_bytes: int) -> None:
        if kind == SEGMENT_KIND_FULL:
            self._obsolete.extend(segment_file_name(old) for old in self._live)
            self._live = {}
            self._base_seq = seq
        self._live[seq] = size_bytes
        self._last_seq = seq
        for ledger in self._dirty.values():
            ledger.dirty = {}
        self._dirty.clear()

    def _remove_obsolete(self) -> None:
        """Unlink superseded segments and ``.tmp`` leftovers. No directory fsync: a load
        ignores them whether or not a crash brings them back (spec page, "Crash states")."""
        while self._obsolete:
            path = join(self._dir, self._obsolete[-1])
            if self._fs.exists(path):
                self._fs.unlink(path)
            self._obsolete.pop()

    # --- description --------------------------------------------------------------------------

    @property
    def persisted(self) -> bool:
        """Whether ``load`` found a segment on disk. When it did not, the bookie rebuilds the
        index from the entry logs (impl/index/rebuild.py)."""
        return self._persisted

    def log_extents(self) -> dict[int, tuple[int, int]]:
        """Per entry log id, how many entries the index places in it and the largest payload
        offset among them (recovery checks the logs hold them)."""
        extents: dict[int, tuple[int, int]] = {}
        for ledger in self._ledgers.values():
            for location in ledger.entries.values():
                log_id, offset = location >> 32, location & 0xFFFFFFFF
                count, largest = extents.get(log_id, (0, 0))
                extents[log_id] = (count + 1, max(largest, offset))
        return extents

    @property
    def newest_segment_seq(self) -> int:
        """The newest segment a load would read now (0: none), durable once ``flush``
        returned: what lastMark records as the index's coverage."""
        return self._last_seq

    @property
    def deleted_records(self) -> int:
        """How many records the deleted-ledgers file holds, each durable (fsynced before
        ``delete_ledger`` returned)."""
        return self._deleted_bytes // DELETED_RECORD_SIZE

    @property
    def index_dir(self) -> str:
        return self._dir

    def segment_seqs(self) -> list[int]:
        """The segments a load would read now, in order (the first is full)."""
        return sorted(self._live)

    def state(self) -> IndexState:
        """The abstract state: what a load after a clean flush must give back."""
        ledgers = tuple(
            (
                ledger_id,
                LedgerRecord(ledger.key, ledger.fenced, tuple(sorted(ledger.entries.items()))),
            )
            for ledger_id, ledger in sorted(self._ledgers.items())
        )
        return IndexState(ledgers=ledgers, deleted=frozenset(self._deleted))

    def check_invariants(self) -> None:
        """Assert every internal relation. O(size of the index): meant for tests."""
        assert not self._ledgers.keys() & self._deleted, "a deleted ledger is still indexed"
        for ledger_id, ledger in self._ledgers.items():
            _check_ledger(ledger_id, ledger)
            assert (ledger_id in self._dirty) == (self._dirty.get(ledger_id) is ledger)
            if ledger.dirty:
                assert self._dirty.get(ledger_id) is ledger, ledger_id
        for ledger_id, ledger in self._dirty.items():
            assert self._ledgers.get(ledger_id) is ledger, ledger_id
        assert self._deleted_bytes >= len(self._deleted) * DELETED_RECORD_SIZE
        assert self._deleted_bytes % DELETED_RECORD_SIZE == 0, self._deleted_bytes
        if self._live:
            assert min(self._live) == self._base_seq, (self._live, self._base_seq)
            assert max(self._live) == self._last_seq, (self._live, self._last_seq)
            assert sorted(self._live) == list(range(self._base_seq, self._last_seq + 1))
        else:
            assert self._base_seq == 0, self._base_seq
        assert not self._persisted or self._live, "persisted without a segment"


def _check_ledger(ledger_id: LedgerId, ledger: _Ledger) -> None:
    assert 0 <= ledger_id <= INT64_MAX, ledger_id
    assert ledger.key is not None or ledger.fenced or ledger.entries, f"empty ledger {ledger_id}"
    assert ledger.key is None or len(ledger.key) <= MASTER_KEY_MAX_BYTES, ledger_id
    assert ledger.last == max(ledger.entries, default=-1), (ledger_id, ledger.last)
    for entry_id, location in ledger.dirty.items():
        assert ledger.entries.get(entry_id) == location, (ledger_id, entry_id)
    assert all(entry_id >= 0 for entry_id in ledger.entries), ledger_id
    assert all(location >= 0 for location in ledger.entries.values()), ledger_id
