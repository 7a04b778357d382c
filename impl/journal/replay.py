"""Journal replay: every record after a mark, in order, over the journals from the marked one on.

Spec page: spec/format/journal.md ("Replay", "Invalid records", "Crash states"). Codec:
impl/format/journal.py. The writer is impl/journal/journal.py; the bookie applies what replay
yields (impl/bookie/recovery.py).

Why a module of its own: the writer and the reader of the journal share only the format and
the directory listing, and are used at different times (replay runs once, at start, before
the writer opens its first file). Replay is also a hot loop of its own
(tests/bench/bench_journal_replay.py): it reads the files in chunks of ``replay_chunk_bytes``
(impl/limits.py) and
takes the data records out of a chunk in one tight loop (``_data_run``), falling back to one
record at a time only at a chunk boundary, padding, a meta record or the end.

Damage (spec/format/journal.md, "Damage"): before it yields the first record, a replay checks
that lastMark lies on a record boundary of its journal (``mark_problem``) and, for every
journal it will read, that a crash can leave the place its scan will stop (``_survey``), so a
refused start has written nothing. Both raise DamagedFile. The facts are read here
(``walk_lengths``, ``stop_facts``) and judged by impl/journal/damage.py, the decisions
``bkref inspect`` makes too.

Where this differs from BookKeeper is listed on :class:`JournalReplay`.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Generator, Iterator

from impl.format.journal import (
    CURRENT_VERSION,
    DEFAULT_MAX_RECORD_BYTES,
    MIN_COMPAT_VERSION,
    MIN_PAYLOAD_SIZE,
    PADDING_HEADER_SIZE,
    PADDING_MASK,
    RECORD_SIZE_PREFIX,
    SECTOR_SIZE,
    V5,
    VERSION_HEADER_SIZE,
    InvalidRecord,
    JournalRecord,
    decode_meta_record,
    decode_version,
    header_size,
)
from impl.format.names import journal_file_name
from impl.fs.api import FileHandle, FileSystem, join
from impl.journal.damage import StopFacts, StopReason, WalkStop, judge_mark, judge_stop
from impl.journal.journal import list_journal_files
from impl.journal.last_mark import LogMark
from impl.limits import LIMITS, Limits
from spec.errors import REPLICA_ADVICE, DamagedFile, FsError, RecoveryError

#: Receives one human-readable line per replay event (journal started, record skipped, ...).
Progress = Callable[[str], None]

_LEN = struct.Struct(">i")
_IDS = struct.Struct(">qq")
#: A record's length and ids at once (the replay's common case).
_HEAD = struct.Struct(">iqq")
#: The length field of a padding record, as bytes (searched for after a stop).
_PADDING_HEAD = _LEN.pack(PADDING_MASK)


def journals_to_replay(ids: list[int], mark: LogMark, journal_dir: str) -> list[int]:
    """BookieImpl.replay: the journals with id >= the mark's, ascending. Raises RecoveryError
    when the mark names a journal that is not there."""
    chosen = sorted(journal_id for journal_id in ids if journal_id >= mark.journal_id)
    if mark.journal_id > 0 and (not chosen or chosen[0] != mark.journal_id):
        present = ", ".join(journal_file_name(jid) for jid in sorted(ids)[-5:]) or "none"
        raise DamagedFile(
            join(journal_dir, journal_file_name(mark.journal_id)),
            None,
            f"Recovery log {mark.journal_id} is missing at {journal_dir}: lastMark {mark} names "
            f"this journal, which is not there (newest journals present: {present}); the "
            "records after the mark were acknowledged (adds, fences, master keys) and may "
            "exist nowhere else",
            "restore that journal file from a copy. Do not move the lastMark files aside to "
            "start anyway: the adds, fences and keys only in the lost journal would be gone, "
            f"and a fenced ledger could take writes again. {REPLICA_ADVICE}",
        )
    return chosen


class JournalReplay:
    """Every record after a mark, in order, over the journals from the marked one on
    (BookieImpl.replay with Journal.scanJournal). Iterate it once; ``end_mark`` then says
    where replay ended, so the caller can advance lastMark past what it replayed (BookKeeper
    issue #2087). Padding is skipped; meta records with an unknown negative entry id are
    skipped with a note, as BookKeeper does. Notes go to ``progress`` and ``notes``.

    Where this differs from BookKeeper: a positive length above ``max_record_bytes`` is an
    invalid record (junk), where BookKeeper allocates that much and stops at the short read
    or dies of OutOfMemoryError; a record too short for its ids, a key or LAC record whose
    length field overruns it, and a negative padding length are invalid records too (in
    BookKeeper runtime exceptions that stop the bookie whatever skipReplayJournalInvalidRecord
    says); a mark offset inside the header starts at the header's end.

    ``limits.replay_chunk_bytes`` (impl/limits.py): the files are read that many bytes at a
    time (a longer record is read whole).
    """

    def __init__(
        self,
        fs: FileSystem,
        journal_dir: str,
        mark: LogMark,
        *,
        skip_invalid: bool,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        progress: Progress | None = None,
        limits: Limits = LIMITS,
        mark_file: str | None = None,
        bkref_mark: bool = False,
    ) -> None:
        assert max_record_bytes > 0, max_record_bytes
        #: The lastMark file that holds ``mark``, for messages (None: the caller's own mark).
        self._mark_file = mark_file
        #: The mark was written by bkref (its lastMark carries the index coverage): every
        #: journal after it was written by bkref, one group at a time (see ``_check_stop``).
        self._bkref_mark = bkref_mark
        #: The journal being scanned.
        self._current = 0
        self._fs = fs
        self._dir = journal_dir
        self._mark = mark
        self._skip_invalid = skip_invalid
        self._max_record_bytes = max_record_bytes
        self._chunk_bytes = limits.replay_chunk_bytes
        self._progress = progress
        self._files = list_journal_files(fs, journal_dir)
        self._ids = journals_to_replay(list(self._files), mark, journal_dir)
        self._end = mark
        self._started = False
        self._done = False
        self.notes: list[str] = []
        self.records_replayed = 0
        #: Stops ``_survey`` checked: (journal id, offset) -> the damage found, or None.
        self._verified: dict[tuple[int, int], str | None] = {}
        if self._ids and self._ids[0] == mark.journal_id:
            self._check_mark()
        self._survey()

    @property
    def journal_names(self) -> dict[int, str]:
        """Journal id -> its file name in the journal directory, for every journal found."""
        return dict(self._files)

    @property
    def journal_ids(self) -> list[int]:
        """The journals this replay reads, in order."""
        return list(self._ids)

    @property
    def end_mark(self) -> LogMark:
        """Where replay ended: the last journal read and the offset its scan stopped at.
        Only after the iteration has finished."""
        assert self._done, "end_mark is known only once the replay has been iterated to the end"
        return self._end

    def __iter__(self) -> Iterator[JournalRecord]:
        assert not self._started, "a JournalReplay is iterated once"
        self._started = True
        return self._replay()

    def _replay(self) -> Iterator[JournalRecord]:
        for journal_id in self._ids:
            start = self._mark.offset if journal_id == self._mark.journal_id else 0
            scan = self._scan(journal_id, start)
            while True:
                try:
                    batch = next(scan)
                except StopIteration as stop:
                    end_offset: int = stop.value
                    break
                yield from batch
            new_end = LogMark(journal_id, end_offset)
            assert new_end >= self._end, (new_end, self._end)
            self._end = new_end
        self._done = True

    def _say(self, line: str) -> None:
        self.notes.append(line)
        if self._progress is not None:
            self._progress(line)

    @contextlib.contextmanager
    def _reading(self, path: str) -> Iterator[FileHandle]:
        """A journal open for reading, closed after; RecoveryError (with what to do) when it
        cannot be opened or read."""
        try:
            handle = self._fs.open(path, read_only=True)
        except FsError as exc:
            raise RecoveryError(
                f"cannot open journal {path} for replay: {exc}. Check the journal directory's "
                "permissions and disk, then restart"
            ) from exc
        try:
            yield handle
        except FsError as exc:
            raise RecoveryError(
                f"cannot read journal {path} during replay: {exc}. Check the disk, then restart"
            ) from exc
        finally:
            handle.close()

    def _scan(self, journal_id: int, start: int) -> Generator[list[JournalRecord], None, int]:
        self._current = journal_id
        path = join(self._dir, self._files[journal_id])
        with self._reading(path) as handle:
            size = handle.size()
            version = decode_version(handle.pread(0, VERSION_HEADER_SIZE))
            if not MIN_COMPAT_VERSION <= version <= CURRENT_VERSION:
                raise _version_error(path, version)
            offset = max(start, header_size(version))
            self._say(
                f"replaying journal {path}: version {version}, {size} bytes, from offset {offset}"
            )
            return (yield from self._records(handle, journal_id, version, offset, size))

    def _records(
        self, handle: FileHandle, journal_id: int, version: int, offset: int, size: int
    ) -> Generator[list[JournalRecord], None, int]:
        """Journal.scanJournal's loop over one file, from ``offset``, yielding the records in
        batches; returns the offset it stopped at. ``_data_run`` takes the whole data records
        out of the chunk in hand; every other case (a chunk boundary, padding, a meta record,
        the end) is one ``_step``."""
        buf, base, i = b"", offset, 0
        where = (handle.path, version, size)
        while True:
            batch, i = _data_run(buf, i, base, journal_id, self._max_record_bytes)
            if batch:
                self.records_replayed += len(batch)
                yield batch
            buf, base, i, record, stop = self._step(handle, where, journal_id, buf, base, i)
            if stop is not None:
                return stop
            if record is not None:
                self.records_replayed += 1
                yield [record]

    def _read_at(self, handle: FileHandle, offset: int, need: int) -> bytes:
        """The file's bytes from ``offset``: ``replay_chunk_bytes``, or ``need`` if more, or
        fewer at the end of the file. Re-reading a record cut by the previous chunk from the
        file costs less than copying the chunk to prepend it."""
        return handle.pread(offset, max(self._chunk_bytes, need))

    def _step(
        self, handle: FileHandle, where: _Where, journal_id: int, buf: bytes, base: int, i: int
    ) -> tuple[bytes, int, int, JournalRecord | None, int | None]:
        """One step of scanJournal at ``buf[i]`` (file offset ``base + i``), reading more of
        the file when needed: (buf, base, index, record or None, stop offset or None)."""
        if len(buf) - i < RECORD_SIZE_PREFIX:
            buf, base, i = self._read_at(handle, base + i, RECORD_SIZE_PREFIX), base + i, 0
            if len(buf) < RECORD_SIZE_PREFIX:
                return buf, base, i, None, self._stopped(where, base, "the end of the file")
        length = _LEN.unpack_from(buf, i)[0]
        if length == 0:
            return (
                buf,
                base,
                i,
                None,
                self._stopped(where, base + i, "a zero length (the end)", handle),
            )
        if length < 0 and (length != PADDING_MASK or where[1] < V5):
            return buf, base, i, None, self._invalid(where, base + i, _negative(length, where[1]))
        if length == PADDING_MASK:
            return self._padding(handle, where, buf, base, i)
        if length > self._max_record_bytes:
            reason = _too_long(length, self._max_record_bytes)
            return buf, base, i, None, self._invalid(where, base + i, reason)
        end = i + RECORD_SIZE_PREFIX + length
        if end > len(buf):
            buf, base, i = self._read_at(handle, base + i, end - i), base + i, 0
            end = RECORD_SIZE_PREFIX + length
            if end > len(buf):
                return buf, base, i, None, self._stopped(where, base, "a record cut short", handle)
        if length < MIN_PAYLOAD_SIZE:
            return buf, base, i, None, self._invalid(where, base + i, _too_short(length))
        payload = buf[i + RECORD_SIZE_PREFIX : end]
        ledger_id, entry_id = _IDS.unpack_from(payload, 0)
        if entry_id >= 0:
            record = JournalRecord(
                "data", ledger_id, entry_id, payload, journal_id, base + i, base + end
            )
            return buf, base, end, record, None
        meta = self._meta(where, journal_id, base + i, payload)
        if isinstance(meta, int):
            return buf, base, i, None, meta
        return buf, base, end, meta, None

    def _padding(
        self, handle: FileHandle, where: _Where, buf: bytes, base: int, i: int
    ) -> tuple[bytes, int, int, JournalRecord | None, int | None]:
        """Skip a padding record (V5+): PADDING_MASK, int32 n, n zero bytes."""
        if len(buf) - i < PADDING_HEADER_SIZE:
            buf, base, i = self._read_at(handle, base + i, PADDING_HEADER_SIZE), base + i, 0
            if len(buf) < PADDING_HEADER_SIZE:
                return buf, base, i, None, self._stopped(where, base, "a padding record cut short")
        zeros = _LEN.unpack_from(buf, i + RECORD_SIZE_PREFIX)[0]
        if not 0 <= zeros <= self._max_record_bytes:
            reason = f"a padding record of {zeros} bytes"
            return buf, base, i, None, self._invalid(where, base + i, reason)
        end = i + PADDING_HEADER_SIZE + zeros
        if end > len(buf):
            buf, base, i = self._read_at(handle, base + i, end - i), base + i, 0
            end = PADDING_HEADER_SIZE + zeros
            if end > len(buf):
                return buf, base, i, None, self._stopped(where, base, "a padding record cut short")
        return buf, base, end, None, None

    def _meta(
        self, where: _Where, journal_id: int, offset: int, payload: bytes
    ) -> JournalRecord | int | None:
        """A meta record, None for one BookKeeper skips, or (int) the offset replay of this
        journal stops at because the record is invalid."""
        ledger_id, entry_id = _IDS.unpack_from(payload, 0)
        try:
            meta = decode_meta_record(where[1], ledger_id, entry_id, payload)
        except InvalidRecord as exc:
            return self._invalid(where, offset, exc.reason)
        end = offset + RECORD_SIZE_PREFIX + len(payload)
        if meta is None:
            self._say(
                f"journal {where[0]}: skipped a record of unknown kind at offset {offset} "
                f"(ledger {ledger_id}, entry id {entry_id}), as BookKeeper does"
            )
            return None
        kind, body = meta
        return JournalRecord(kind, ledger_id, entry_id, body, journal_id, offset, end)

    def _stopped(
        self, where: _Where, offset: int, why: str, handle: FileHandle | None = None
    ) -> int:
        """Replay of this journal stops at ``offset``. Given ``handle`` (a zero length or a
        record cut short, where data may follow), first check that a crash can leave it."""
        if handle is not None:
            key = (self._current, offset)
            if key in self._verified:
                damage = self._verified[key]
            else:
                reason: StopReason = "zero" if why.startswith("a zero") else "cut"
                damage = self._check_stop(handle, where, offset, reason)
            if damage is not None:
                return self._damaged(where, offset, damage)
        self._say(f"journal {where[0]}: replay stopped at offset {offset}: {why}")
        return offset

    # --- damage (spec/format/journal.md, "Damage"; the decisions are impl/journal/damage.py) ---

    def _check_stop(
        self, handle: FileHandle, where: _Where, offset: int, reason: StopReason
    ) -> str | None:
        """Why a stop at ``offset`` cannot come from a crash, or None when it can: the facts
        read from the file (``stop_facts``), judged by ``judge_stop`` (impl/journal/damage.py,
        the decision ``bkref inspect`` makes too). Strict (the later-group rule) in every
        journal after a lastMark bkref wrote, at the mark's own offset too: such a mark is the
        end of a group bkref synced (a start's recovery checkpoint puts its mark at the start
        of the new journal, impl/bookie/bookie.py), so a later group after it is damage."""
        _path, version, size = where
        facts = stop_facts(
            handle,
            version,
            offset,
            size,
            reason,
            chunk_bytes=self._chunk_bytes,
            max_record_bytes=self._max_record_bytes,
        )
        return judge_stop(facts, strict=self._bkref_mark).damage

    def _damaged(self, where: _Where, offset: int, problem: str, kind: str = "damaged") -> int:
        """A stop no crash leaves (``kind``: damaged, or an invalid record): skip the rest of
        this journal under skipReplayJournalInvalidRecord; otherwise refuse."""
        path, _version, size = where
        if self._skip_invalid:
            self._say(
                f"journal {path}: {kind} at offset {offset}: {problem}; "
                "skipReplayJournalInvalidRecord=true, so the rest of this journal "
                f"({max(0, size - offset)} bytes) is skipped"
            )
            return max(size, offset)
        raise DamagedFile(
            path,
            offset,
            problem if kind == "damaged" else f"{kind} at offset {offset}: {problem}",
            "restore the journal from a copy. skipReplayJournalInvalidRecord=true starts "
            f"without the records from offset {offset} to the end of this journal: the adds, "
            "fences and master keys among them are then lost on this bookie, and a fenced "
            "ledger could take writes again; do that only with the ledgers re-replicated. "
            f"{REPLICA_ADVICE}",
        )

    def _check_mark(self) -> None:
        """The mark must lie in its journal, on a record boundary (``mark_problem``). Raises
        DamagedFile otherwise, before anything is replayed: the lastMark's, or the journal's
        own for an invalid record before the mark."""
        problem, invalid = mark_problem(
            self._fs,
            self._dir,
            self._mark,
            skip_invalid=self._skip_invalid,
            max_record_bytes=self._max_record_bytes,
            chunk_bytes=self._chunk_bytes,
        )
        if invalid is not None:
            self._scan_refuses(self._mark.journal_id, invalid)
        if problem is not None:
            raise mark_damage(self._mark_file or "lastMark", problem)

    def _survey(self) -> None:
        """Before any record is yielded, find where the scan of each journal will stop and
        refuse a stop no crash leaves (``_check_stop``) or an invalid length: the caller then
        has written nothing. (An invalid meta record, which only decoding finds, is refused
        when the scan meets it.) Costs one more pass over the lengths of what is replayed."""
        for journal_id in self._ids:
            path = join(self._dir, self._files[journal_id])
            try:
                handle = self._fs.open(path, read_only=True)
            except FsError:
                continue  # the scan reports it
            try:
                size = handle.size()
                version = decode_version(handle.pread(0, VERSION_HEADER_SIZE))
                if not MIN_COMPAT_VERSION <= version <= CURRENT_VERSION:
                    raise _version_error(path, version)
                start = header_size(version)
                if journal_id == self._mark.journal_id:
                    start = max(start, self._mark.offset)
                stop, why = walk_lengths(
                    handle,
                    version,
                    size,
                    start,
                    size + 1,
                    max_record_bytes=self._max_record_bytes,
                    chunk_bytes=self._chunk_bytes,
                )
                where = (path, version, size)
                self._current = journal_id
                if why == "zero" or why == "cut":
                    damage = self._check_stop(handle, where, stop, why)
                    if damage is not None and not self._skip_invalid:
                        self._damaged(where, stop, damage)
                    self._verified[journal_id, stop] = damage
                elif why == "invalid" and not self._skip_invalid:
                    self._scan_refuses(journal_id, stop)
            except FsError:
                continue  # the scan reports it
            finally:
                handle.close()

    def _scan_refuses(self, journal_id: int, offset: int) -> None:
        """Let the scan raise its own error for the invalid record at ``offset``, before
        anything was yielded (the scan starts there, so nothing before it is read)."""
        self._current = journal_id
        scan = self._scan(journal_id, offset)
        while True:
            try:
                next(scan)
            except StopIteration:
                return

    def _invalid(self, where: _Where, offset: int, reason: str) -> int:
        hint = ""
        if where[1] == 1:
            hint = " (the file does not start with BKLG, so it was read as a version 1 journal)"
        return self._damaged(
            where,
            offset,
            f"{reason}{hint}; replay cannot go past it (BookKeeper refuses to start too)",
            kind="invalid record",
        )


def mark_problem(
    fs: FileSystem,
    journal_dir: str,
    mark: LogMark,
    *,
    skip_invalid: bool,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    chunk_bytes: int = LIMITS.replay_chunk_bytes,
) -> tuple[str | None, int | None]:
    """Why ``mark`` cannot be where a checkpoint left it in its journal (rows m6, m7, m10 of
    spec/format/journal.md; the decision is ``judge_mark``), with the journal's path; and the
    offset of an invalid record met before the mark (the journal's damage, which the scan
    reports). (None, None) when the mark is fine, or when its journal is absent, unreadable
    or of a version no reader takes: replay says so (rows j8, j13)."""
    path = join(journal_dir, journal_file_name(mark.journal_id))
    if mark.journal_id == 0 and mark.offset == 0:
        return None, None
    try:
        handle = fs.open(path, read_only=True)
    except FsError:
        return None, None
    try:
        size = handle.size()
        version = decode_version(handle.pread(0, VERSION_HEADER_SIZE))
        if not MIN_COMPAT_VERSION <= version <= CURRENT_VERSION:
            return None, None
        header_end = header_size(version)
        reached: int = header_end
        stop: WalkStop = ""
        if header_end < mark.offset <= size:
            reached, stop = walk_lengths(
                handle,
                version,
                size,
                header_end,
                mark.offset,
                max_record_bytes=max_record_bytes,
                chunk_bytes=chunk_bytes,
            )
    except FsError:
        return None, None
    finally:
        handle.close()
    problem = judge_mark(
        journal=path,
        mark_offset=mark.offset,
        size=size,
        header_end=header_end,
        reached=reached,
        stop=stop,
        skip_invalid=skip_invalid,
    )
    invalid = reached if stop == "invalid" and not skip_invalid else None
    if problem is None:
        return None, invalid
    return f"lastMark {mark} {problem}", invalid


def mark_damage(mark_file: str, problem: str) -> DamagedFile:
    """The refusal of a lastMark ``mark_problem`` found wrong, with what to do."""
    return DamagedFile(
        mark_file,
        None,
        f"{problem}; lastMark is written only once the journal bytes before it are durable, "
        "at the end of a group",
        "either lastMark or the journal is damaged. If the journal is intact (compare it with "
        "a copy), delete the lastMark files holding this mark: replay then starts from the "
        "largest other mark, or from the oldest journal present, and re-applies records the "
        "storage already holds, which loses nothing. If the journal lost bytes, restore it "
        f"from a copy. {REPLICA_ADVICE}",
    )


def walk_lengths(
    handle: FileHandle,
    version: int,
    size: int,
    start: int,
    target: int,
    *,
    max_record_bytes: int,
    chunk_bytes: int,
) -> tuple[int, WalkStop]:
    """Follow the records of a journal from ``start`` as the scan does, reading only the
    length fields, ``chunk_bytes`` at a time, to the first offset at or past ``target``:
    (that offset, ""), or (where the scan would stop before it, why): "end" (the end of the
    file, or a padding record cut short), "zero" (a zero length), "cut" (a record cut short)
    or "invalid" (an invalid length)."""
    position = start
    buf, base, in_hand = b"", position, 0
    unpack = _LEN.unpack_from
    while position < target:
        i = position - base
        if in_hand - i < PADDING_HEADER_SIZE:
            buf, base, i = handle.pread(position, chunk_bytes), position, 0
            in_hand = len(buf)
        if in_hand - i < RECORD_SIZE_PREFIX:
            return position, "end"
        length: int = unpack(buf, i)[0]
        if MIN_PAYLOAD_SIZE <= length <= max_record_bytes:
            position += RECORD_SIZE_PREFIX + length
            if position > size:
                return position - RECORD_SIZE_PREFIX - length, "cut"
        elif length == 0:
            return position, "zero"
        elif length == PADDING_MASK and version >= V5:
            if in_hand - i < PADDING_HEADER_SIZE:
                return position, "end"
            zeros: int = unpack(buf, i + RECORD_SIZE_PREFIX)[0]
            if not 0 <= zeros <= max_record_bytes:
                return position, "invalid"
            if position + PADDING_HEADER_SIZE + zeros > size:
                return position, "end"
            position += PADDING_HEADER_SIZE + zeros
        else:
            return position, "invalid"
    return position, ""


def stop_facts(
    handle: FileHandle,
    version: int,
    offset: int,
    size: int,
    reason: StopReason,
    *,
    chunk_bytes: int,
    max_record_bytes: int,
) -> StopFacts:
    """What the bytes of a journal say about a scan's stop at ``offset`` (impl/journal/
    damage.py judges them): how many bytes after it are not zero, whether a zero length
    there lies in sectors that hold data, and where a later group starts."""
    nonzero = _nonzero_after(handle, offset, size, chunk_bytes)
    in_data = False
    later = None
    if nonzero and version >= V5:
        in_data = reason == "zero" and _sectors_hold_data(handle, offset, size)
        later = _later_group(handle, offset, size, chunk_bytes, max_record_bytes)
    return StopFacts(version, reason, offset, size, nonzero, in_data, later)


def _nonzero_after(handle: FileHandle, offset: int, size: int, chunk_bytes: int) -> int:
    """How many bytes from ``offset`` to the end of the file are not zero."""
    count, position = 0, offset
    while position < size:
        chunk = handle.pread(position, min(chunk_bytes, size - position))
        if not chunk:
            break
        count += len(chunk) - chunk.count(0)
        position += len(chunk)
    return count


def _sectors_hold_data(handle: FileHandle, offset: int, size: int) -> bool:
    """Whether every 512-byte sector the length field at ``offset`` touches holds a byte that
    is not zero."""
    first, last = offset // SECTOR_SIZE, min(offset + RECORD_SIZE_PREFIX, size) - 1
    for sector in range(first, last // SECTOR_SIZE + 1):
        data = handle.pread(sector * SECTOR_SIZE, SECTOR_SIZE)
        if data.count(0) == len(data):
            return False
    return True


def _later_group(
    handle: FileHandle, offset: int, size: int, chunk_bytes: int, max_record_bytes: int
) -> int | None:
    """The offset of a group that starts after ``offset``: the end of a padding record found
    after it, on a sector boundary, before the end of the file, where a record or another
    padding record starts. None when there is none."""
    step = max(chunk_bytes, SECTOR_SIZE)
    start = offset + RECORD_SIZE_PREFIX
    for base in range(start, size, step):
        chunk = handle.pread(base, step + PADDING_HEADER_SIZE)
        found = chunk.find(_PADDING_HEAD)
        while 0 <= found < step:
            group = _padding_end(handle, base + found, size, max_record_bytes)
            if group is not None:
                return group
            found = chunk.find(_PADDING_HEAD, found + 1)
    return None


def _padding_end(handle: FileHandle, position: int, size: int, max_record_bytes: int) -> int | None:
    """Where the padding record at ``position`` ends, if it is one whose end is a sector
    boundary inside the file with a record (or padding) starting there."""
    head = handle.pread(position, PADDING_HEADER_SIZE)
    if len(head) < PADDING_HEADER_SIZE:
        return None
    zeros: int = _LEN.unpack_from(head, RECORD_SIZE_PREFIX)[0]
    end: int = position + PADDING_HEADER_SIZE + zeros
    if zeros < 0 or end % SECTOR_SIZE or end + RECORD_SIZE_PREFIX > size:
        return None
    if handle.pread(position + PADDING_HEADER_SIZE, zeros).count(0) != zeros:
        return None
    length = _LEN.unpack_from(handle.pread(end, RECORD_SIZE_PREFIX), 0)[0]
    if length == PADDING_MASK:
        return end
    if MIN_PAYLOAD_SIZE <= length <= max_record_bytes and (
        end + RECORD_SIZE_PREFIX + length <= size
    ):
        return end
    return None


def _version_error(path: str, version: int) -> DamagedFile:
    return DamagedFile(
        path,
        4,
        f"format version {version}; bkref (like BookKeeper) reads versions "
        f"{MIN_COMPAT_VERSION} to {CURRENT_VERSION}, so the file is not a journal, was damaged, "
        "or was written by a newer bookie",
        "if a newer bookie wrote it, start that bookie on these directories. Otherwise restore "
        "the file from a copy. Do not move it away to start: the adds, fences and master keys "
        f"after lastMark in it would be lost on this bookie. {REPLICA_ADVICE}",
    )


_Where = tuple[str, int, int]  # path, version, file size


def _data_run(
    buf: bytes, i: int, base: int, journal_id: int, max_record: int
) -> tuple[list[JournalRecord], int]:
    """The whole data records from ``buf[i:]`` on (``buf[0]`` at file offset ``base``), up to
    the first thing that is not one; and the index after them. The replay's hot loop: one
    unpack and one slice per record."""
    out: list[JournalRecord] = []
    append, unpack, record = out.append, _HEAD.unpack_from, JournalRecord
    in_hand = len(buf)
    while in_hand - i >= _HEAD.size:
        length, ledger_id, entry_id = unpack(buf, i)
        end = i + RECORD_SIZE_PREFIX + length
        if entry_id < 0 or not MIN_PAYLOAD_SIZE <= length <= max_record or end > in_hand:
            break
        payload = buf[i + RECORD_SIZE_PREFIX : end]
        append(record("data", ledger_id, entry_id, payload, journal_id, base + i, base + end))
        i = end
    return out, i


def _too_long(length: int, max_record: int) -> str:
    return (
        f"length {length} is larger than any record a bookie writes ({max_record} bytes, "
        "nettyMaxFrameSizeBytes): junk, not a record"
    )


def _too_short(length: int) -> str:
    return f"length {length} is too short for a ledger id and an entry id ({MIN_PAYLOAD_SIZE})"


def _negative(length: int, version: int) -> str:
    if length == PADDING_MASK:
        return f"a padding record in a version {version} journal (padding exists from V5)"
    return f"negative length {length}"


def replay(
    fs: FileSystem,
    journal_dir: str,
    mark: LogMark,
    *,
    skip_invalid: bool,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    progress: Progress | None = None,
    limits: Limits = LIMITS,
    mark_file: str | None = None,
    bkref_mark: bool = False,
) -> JournalReplay:
    """Every record after ``mark`` (see JournalReplay). Raises RecoveryError at once when the
    marked journal is missing, and while iterating on an unreadable journal or (unless
    ``skip_invalid``) an invalid record."""
    return JournalReplay(
        fs,
        journal_dir,
        mark,
        skip_invalid=skip_invalid,
        max_record_bytes=max_record_bytes,
        progress=progress,
        limits=limits,
        mark_file=mark_file,
        bkref_mark=bkref_mark,
    )
