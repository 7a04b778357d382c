"""Recovery: what a bookie does at start before it takes requests, and what journal replay does
with each record.

Spec pages: spec/format/journal.md ("Replay", "The lastMark file"), spec/format/ledger_index.md
("Rebuilding"), spec/properties.md (1 durability, 2 fence durability, 4 no resurrection, 6
forward progress). docs/design.md "Data flow" has the order of the steps.

The steps (BookieImpl's start, with InterleavedLedgerStorage):

0. fsync every file and directory the previous process left (impl/bookie/layout.py,
   ``sync_previous_run``: it may have died before its fsyncs);
1. read lastMark (refusing a damaged one), load the ledger index and check it holds what
   lastMark records it held;
2. finish or undo what interrupted compactions left (:func:`cleanup_compaction_leftovers`,
   impl/entrylog/compactor.py ``recover_leftovers``; spec/protocol/compaction.md): every
   ``.compacting`` is removed, every ``.compacted`` finished, the new locations going into the
   index, which is flushed before a source log is removed. Before the next checks, so that
   they and the rebuild see the logs as the finished compactions leave them: check that the
   entry logs hold what the index places in them, or rebuild the index from the entry logs
   when it was never persisted but logs exist (a directory written by BookKeeper: its index
   is rebuilt from the new log, not the source, which is gone);
3. replay the journal from lastMark, applying each record to the entry logs and the index
   (:class:`JournalReplayer`); the replay checks the mark and every journal's stop first;
4. a new journal file, and 5. a checkpoint at its durable mark (past every record replay
   read): both are the composition root's (impl/bookie/bookie.py, ``Bookie.open``), which
   owns the checkpoint and the journal.

Why the cut: the *decisions* are pure functions, state in and action out
(:func:`replay_action`, :func:`must_rebuild_index`), so each choice below is tested on its own
(tests/unit/impl/bookie/test_recovery.py); the *procedure* (:func:`recover`) is a function of
the parts it recovers and returns them, so it needs no bookie and the bookie is built only
once they are consistent.

Choices where BookKeeper leaves room, each on purpose (the bookie's module docstring lists the
ones of the request path):

- Replay re-adds a data record of a ledger whose key it does not know if the index knows
  the ledger: in a directory written by BookKeeper the keys live in BookKeeper's index files,
  read by the rebuild when readable (impl/index/bk_metadata.py), and the ledger is known from
  the rebuild of the entry logs. A ledger without either takes the key of its next caller. A
  data record of a ledger neither keyed nor
  indexed is skipped, as BookKeeper skips it (readMasterKey: NoLedgerException), so a record
  made of zeros cannot create ledger 0. A fence record is applied even to an unknown ledger
  (created fenced, without a key), where BookKeeper skips it: property 2 comes first.
- Replay skips a data record whose entry the index already has and that reads back with the
  same bytes (BookKeeper re-adds every record); otherwise it appends it again.
- Replay skips the records of deleted ledgers (a deleted ledger stays deleted).
- Explicit-LAC records are replayed as no-ops: bkref has no explicit LAC yet.

Damage (spec/format/journal.md, entry_log.md, ledger_index.md: "Damage"): every state of a
recovery input that no crash leaves, and that can be told, raises DamagedFile in steps 2 and
3 before anything is written (replay surveys each journal before it yields a record), so the
recovery checkpoint never makes the damage permanent. The advice in those errors never moves
the index or lastMark aside over lost data and never resurrects a delete. Each decision is one
function that ``bkref inspect`` calls too (:func:`index_coverage_damage`,
:func:`indexed_log_damage`, and impl/journal/damage.py for journals and lastMark), so the two
never disagree about what is damage (tests/unit/impl/bookie/test_damage.py runs every row of
the tables through both).

Not verified here: multiple journal directories.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from impl.bookie.held import HeldEntries
from impl.bookie.layout import BookieLayout, sync_previous_run
from impl.bookie.state import RecoveryReport
from impl.config.config import ServerConfig
from impl.entrylog.compactor import LeftoverReport, MovedEntry, recover_leftovers
from impl.entrylog.logger import EntryLogger
from impl.format.journal import MIN_PAYLOAD_SIZE, JournalRecord
from impl.format.ledger_index import DELETED_RECORD_SIZE, MASTER_KEY_MAX_BYTES
from impl.format.names import (
    COVERAGE_FILE_NAME,
    DELETED_FILE_NAME,
    journal_file_name,
    log_file_name,
    segment_file_name,
)
from impl.fs.api import FileSystem, join
from impl.index.ledger_index import LedgerIndex
from impl.index.rebuild import may_hold_bk_metadata, rebuild_index
from impl.journal.last_mark import (
    CheckedMark,
    DirMark,
    IndexCoverage,
    LogMark,
    checked_last_mark,
    read_coverage_record,
)
from impl.journal.replay import Progress, mark_damage, mark_problem, replay
from impl.limits import LIMITS, Limits
from spec.errors import (
    REPLICA_ADVICE,
    BkIndexDamaged,
    DamagedFile,
    EntryLogError,
    FsError,
    NoWritableLedgerDir,
    RecoveryError,
)
from spec.ids import EntryId, EntryLogId, LedgerId, location_log_id

__all__ = [
    "Progress",
    "Recovered",
    "ReplayAction",
    "check_coverage_record",
    "check_index_coverage",
    "check_indexed_logs",
    "check_other_marks",
    "cleanup_compaction_leftovers",
    "coverage_record_damage",
    "index_coverage_damage",
    "indexed_log_damage",
    "must_rebuild_index",
    "record_length_before",
    "recover",
    "replay_action",
]

# --- decisions (pure) -------------------------------------------------------------------------


class ReplayAction(enum.Enum):
    """What replay does with one journal record."""

    SET_KEY = "set the ledger's key"
    KEEP_KEY = "key already known (the first key sticks)"
    FENCE = "fence the ledger"
    RE_ADD = "append the entry again and index it"
    PRESENT = "the entry is indexed and reads back the same: nothing to do"
    SKIP_DELETED = "the ledger was deleted: skip"
    SKIP_UNKNOWN = "an entry of a ledger with no key and no index entry: skip (as BookKeeper)"
    SKIP_BAD_ID = "a negative ledger id (junk that parsed as a record): skip"
    IGNORE_LAC = "explicit LAC: not kept by bkref"
    HOLD = "no ledger directory has room: served from the journal (impl/bookie/held.py)"


def replay_action(
    kind: str,
    ledger_id: int,
    deleted: bool,
    known: bool,
    known_key: bytes | None,
    entry_present: bool,
) -> ReplayAction:
    """The decision for one record, from the ledger's state (BookieImpl.readJournal's
    scanner, with the choices listed in the module docstring). ``known``: the index has the
    ledger (a key, a fence or an entry); ``entry_present``: the index has the entry and it
    reads back with the record's bytes."""
    assert kind in ("data", "key", "fence", "lac"), kind
    assert known or known_key is None
    assert known or not entry_present
    if ledger_id < 0:
        return ReplayAction.SKIP_BAD_ID
    if deleted:
        return ReplayAction.SKIP_DELETED
    if kind == "key":
        return ReplayAction.SET_KEY if known_key is None else ReplayAction.KEEP_KEY
    if kind == "fence":
        return ReplayAction.FENCE
    if kind == "lac":
        return ReplayAction.IGNORE_LAC
    if not known:
        return ReplayAction.SKIP_UNKNOWN
    return ReplayAction.PRESENT if entry_present else ReplayAction.RE_ADD


def must_rebuild_index(
    index_persisted: bool, log_ids: Sequence[EntryLogId], bk_index_files: bool = False
) -> bool:
    """Whether recovery rebuilds the index from the entry logs: only when our index was never
    persisted and there are logs to index, or BookKeeper's ``.idx`` files to take keys and
    fences from (a directory written by BookKeeper). An index that was persisted is never
    rebuilt: it holds keys and fences the logs do not; one deleted or moved aside is refused
    before this (``check_index_coverage``) once a bkref lastMark records it."""
    return not index_persisted and (bool(log_ids) or bk_index_files)


def check_index_coverage(index: LedgerIndex, coverage: IndexCoverage | None) -> None:
    """Refuse an index that holds less than lastMark says it held (``index_coverage_damage``,
    rows i1, i3, d1, d2 of spec/format/ledger_index.md)."""
    damage = index_coverage_damage(
        index.index_dir, index.newest_segment_seq, index.deleted_records, coverage
    )
    if damage is not None:
        raise damage


def index_coverage_damage(
    index_dir: str, newest_seq: int, deleted_records: int, coverage: IndexCoverage | None
) -> DamagedFile | None:
    """Whether an index whose newest segment is ``newest_seq`` (0: none) and whose
    deleted-ledgers file holds ``deleted_records`` intact records holds less than lastMark
    says it held when the mark was written (impl/journal/last_mark.py): the refusal, or None.
    One decision for a start and for ``bkref inspect``. A checkpoint writes lastMark only
    after the index flush returned and every counted delete was fsynced, so no crash leaves
    less. Less is a deleted newest segment (or a deleted index), or a shortened or missing
    deleted-ledgers file. None (a lastMark BookKeeper or an older bkref wrote): nothing to
    check against."""
    if coverage is None:
        return None
    if newest_seq is not None and newest_seq < coverage.segment_seq:
        have = f"segment {newest_seq:016x}" if newest_seq else "no segment"
        return DamagedFile(
            join(index_dir, segment_file_name(coverage.segment_seq)),
            None,
            f"the ledger index was durable up to segment {coverage.segment_seq:016x} when "
            f"lastMark was written, and {index_dir} now holds {have}: segments were "
            "deleted (or the index directory moved). The journal before lastMark may be gone, "
            "so the master keys, fences and entries in the missing segments exist nowhere else",
            "restore the missing segment files (or the whole index directory) from a backup "
            "taken while the bookie was stopped, whose newest segment is "
            f"{coverage.segment_seq:016x} or later (an older one is refused the same way: the "
            "journal it would need may be trimmed). Do not start with the index as it is or "
            "moved aside: a rebuild from the entry logs loses master keys, fences and deletes. "
            f"{REPLICA_ADVICE}",
        )
    if deleted_records is not None and deleted_records < coverage.deleted_records:
        return DamagedFile(
            join(index_dir, DELETED_FILE_NAME),
            deleted_records * DELETED_RECORD_SIZE,
            f"lastMark records {coverage.deleted_records} durable deletes, and the file holds "
            f"{deleted_records} intact records: it was truncated or removed, and the "
            "ledgers deleted in the lost records would come back (unfenced, readable)",
            "restore the file from a backup taken while the bookie was stopped, or write the "
            "missing records back by hand (16 bytes each: 'BKDL', int64 ledger id, CRC32 of "
            f"those 12 bytes) if you know which ledgers were deleted. {REPLICA_ADVICE}",
        )
    return None


def check_coverage_record(
    fs: FileSystem, journal_dir: str, checked: CheckedMark, index: LedgerIndex
) -> None:
    """Refuse ledger directories older than the journal directory's coverage record
    (``coverage_record_damage``; spec/format/identity.md, "Old copies")."""
    record = read_coverage_record(fs, journal_dir)
    mark = checked.mark
    journal = join(journal_dir, journal_file_name(mark.journal_id))
    needed = mark.journal_id == 0 or fs.exists(journal)
    damage = coverage_record_damage(
        join(journal_dir, COVERAGE_FILE_NAME),
        record,
        mark if checked.marks else None,
        index.newest_segment_seq,
        index.deleted_records,
        journal_present=needed,
    )
    if damage is not None:
        raise damage


def coverage_record_damage(
    path: str,
    record: DirMark,
    largest_mark: LogMark | None,
    newest_seq: int | None,
    deleted_records: int | None,
    *,
    journal_present: bool = True,
) -> DamagedFile | None:
    """Whether the ledger directories hold less than the journal directory's coverage record
    ``record`` (read from ``path``) says they held: the refusal, or None. One decision for a
    start and for ``bkref inspect``.

    The record is written only after what it says was durable in every ledger directory
    (lastMark persisted, the index flushed, each delete fsynced: impl/bookie/checkpoint.py),
    so no crash leaves the ledger directories behind it. Behind it means an older copy of
    them put back (or their lastMark or deleted-ledgers files edited): the ledgers deleted
    after that copy was taken would come back, and journals its lastMark needs may be
    trimmed. ``largest_mark``: the largest lastMark in the ledger directories, None when
    none has one (then only the index is compared: deleting every lastMark is a remedy of
    spec/format/journal.md, "Damage"); ``newest_seq``/``deleted_records``: the index's, None
    when not known (``bkref inspect`` without the index's directory). A missing record
    checks nothing (a first start, a BookKeeper directory, bkref before it existed).
    ``journal_present``: the journal the
    ledger directories' lastMark names is there, so a start from them can replay (else the
    advice does not offer one: it would be refused, row j8)."""
    if record.damaged:
        return DamagedFile(
            path,
            None,
            f"{record.reason}; it is written whole through a rename, so no crash leaves it so",
            f"delete {path}: it only records what the ledger directories held, for the check "
            "of an old copy put back, and the next checkpoint writes it again (until then that "
            "check is skipped)",
        )
    if record.mark is None or record.coverage is None:
        return None
    mark, coverage = record.mark, record.coverage
    behind = []
    if largest_mark is not None and largest_mark < mark:
        behind.append(f"their lastMark is {largest_mark}, the record's {mark}")
    if deleted_records is not None and deleted_records < coverage.deleted_records:
        behind.append(
            f"their deleted-ledgers file holds {deleted_records} deletes, the record counts "
            f"{coverage.deleted_records}"
        )
    if newest_seq is not None and newest_seq < coverage.segment_seq:
        have = f"segment {newest_seq:016x}" if newest_seq else "no segment"
        behind.append(
            f"their index holds {have}, the record names segment {coverage.segment_seq:016x}"
        )
    if not behind:
        return None
    if deleted_records is None:
        comes_back = "the ledgers deleted after it was taken would come back"
    elif deleted_records < coverage.deleted_records:
        lost = coverage.deleted_records - deleted_records
        comes_back = (
            f"{lost} ledger{'s' if lost != 1 else ''} deleted after it was taken would come "
            "back (readable, unfenced)"
        )
    else:
        comes_back = (
            "the adds, fences and keys acknowledged after it was taken are only in the "
            "journals from its lastMark on"
        )
    anyway = (
        f"; to start from the old copy anyway, delete {path}: then {comes_back}"
        if journal_present
        else ". The old copy cannot start at all: the journal its lastMark names was trimmed, "
        "so what was acknowledged between that mark and the last checkpoint exists nowhere "
        "on this bookie"
    )
    return DamagedFile(
        path,
        None,
        "the ledger directories are an older copy than the journal directory: "
        + "; ".join(behind)
        + f". This record is written only once the ledger directories hold what it says, so "
        f"no crash leaves them behind it: an old copy was put back, and {comes_back}",
        "put back the ledger directories as the bookie left them (the copy taken when it "
        "last stopped, or the directories moved aside), then start. If this old copy is all "
        "there is, take the bookie out of service and let BookKeeper's autorecovery "
        f"re-replicate its ledgers from the other bookies{anyway}",
    )


def check_indexed_logs(fs: FileSystem, index: LedgerIndex, entry_logger: EntryLogger) -> None:
    """Refuse an index that places entries in an entry log that is missing, too short to
    hold them, or in more than one ledger directory (``indexed_log_damage``, rows e1, e2 and
    e9 of spec/format/entry_log.md)."""
    for log_id, (count, largest) in sorted(index.log_extents().items()):
        name = log_file_name(EntryLogId(log_id))
        copies = [
            join(directory, name)
            for directory in entry_logger.ledger_dirs.dirs
            if fs.exists(join(directory, name))
        ]
        path = copies[0] if copies else None
        size = last_length = None
        if path is not None:
            try:
                handle = fs.open(path, read_only=True)
                try:
                    size = handle.size()
                    last_length = record_length_before(handle.pread(largest - 4, 4))
                finally:
                    handle.close()
            except FsError as exc:
                raise RecoveryError(
                    f"cannot read entry log {path}: {exc}. Check the disk, then start again"
                ) from exc
        damage = indexed_log_damage(
            log_id, count, largest, path, size, last_length=last_length, copies=copies
        )
        if damage is not None:
            raise damage


def record_length_before(size_field: bytes) -> int | None:
    """The length an entry log record's int32 size field says (the 4 bytes before the
    payload offset an index location holds), or None when they are not all there."""
    if len(size_field) < 4:
        return None
    return int.from_bytes(size_field, "big", signed=True)


def indexed_log_damage(
    log_id: int,
    count: int,
    largest: int,
    path: str | None,
    size: int | None,
    *,
    last_length: int | None = None,
    copies: Sequence[str] = (),
) -> DamagedFile | None:
    """Whether entry log ``log_id``, found at ``path`` with ``size`` bytes (None: in no
    ledger directory), cannot hold the ``count`` entries the index places in it, the last at
    offset ``largest`` with ``last_length`` bytes by its size field (None: not read), or is
    found in several ledger directories (``copies``, every path of its name): the refusal,
    or None. One decision for a start and for ``bkref inspect``. A checkpoint forces the
    entry logs (and their names) before it flushes the index, so no crash leaves a log
    short of what the index places in it; reading on would answer those entries with
    io_error, and a replay would not re-add them (the index says they are there). bkref
    never writes one log id in two directories; a read takes the first directory's, which
    need not be the one the index meant."""
    name = log_file_name(log_id)
    if len(copies) > 1:
        return DamagedFile(
            copies[1],
            None,
            f"entry log {name} is in {len(copies)} ledger directories ({', '.join(copies)}), "
            f"and the ledger index places {count} entries in it: no crash leaves one log id "
            "twice (a log copied or restored into the wrong directory), and a read would take "
            f"{copies[0]} whichever the index meant",
            "keep the copy that holds the log's records (`bkref inspect` lists each file's "
            f"ledgers and entries) and move the other out of the ledger directories. "
            f"{REPLICA_ADVICE}",
        )
    if path is None or size is None:
        return DamagedFile(
            name,
            None,
            f"the ledger index places {count} entries in entry log {name}, which is in no "
            "ledger directory: it was deleted or moved",
            "put the file back into its ledger directory (look for it in a directory "
            f"removed from ledgerDirectories, or in a backup). {REPLICA_ADVICE}",
        )
    if size < largest + MIN_PAYLOAD_SIZE:
        return DamagedFile(
            path,
            size,
            f"the file ends at offset {size}, and the ledger index places an entry at "
            f"offset {largest}: the log was truncated after the checkpoint that made it "
            "durable",
            f"restore the log from a backup taken while the bookie was stopped. {REPLICA_ADVICE}",
        )
    if last_length is not None and last_length >= MIN_PAYLOAD_SIZE and largest + last_length > size:
        return DamagedFile(
            path,
            size,
            f"the file ends at offset {size}, inside the last entry the ledger index places "
            f"in it (at offset {largest}, {last_length} bytes by its size field): the log "
            "was truncated after the checkpoint that made it durable, or that size field was "
            "damaged",
            f"restore the log from a backup taken while the bookie was stopped. {REPLICA_ADVICE}",
        )
    return None


def check_other_marks(
    fs: FileSystem, journal_dir: str, checked: CheckedMark, config: ServerConfig, limits: Limits
) -> None:
    """Refuse a lastMark smaller than the one replay starts from that no checkpoint leaves:
    past the end of its journal or off a record boundary (row m10 of spec/format/journal.md;
    the largest is checked by replay itself, with the same ``mark_problem``). Recovery does
    not read it, but the advice for a damaged lastMark is to delete that file, and then this
    one would be where replay starts. A mark whose journal was trimmed is not judged."""
    seen = {checked.mark}
    for path, mark in checked.marks:
        if mark in seen:
            continue
        seen.add(mark)
        problem, _invalid = mark_problem(
            fs,
            journal_dir,
            mark,
            skip_invalid=config.skip_replay_journal_invalid_record,
            max_record_bytes=config.netty_max_frame_size_bytes,
            chunk_bytes=limits.replay_chunk_bytes,
        )
        if problem is not None:
            raise mark_damage(path, problem)


# --- the procedure ------------------------------------------------------------------------------


@attrs.frozen
class Recovered:
    """What recovery hands the bookie: the index, consistent with the entry logs and the
    journal up to ``report.end_mark``, and the report (``start_mark`` is the lastMark on disk,
    which the recovery checkpoint then moves to ``end_mark``)."""

    index: LedgerIndex
    report: RecoveryReport
    #: The entries no ledger directory had room for, served from the journal.
    held: HeldEntries


def _has_bk_index_files(fs: FileSystem, ledger_dirs: Sequence[str]) -> bool:
    """Whether BookKeeper ``.idx`` files are in the ledger directories (loaded only when a
    directory has sub-directories: a directory bkref wrote has none but its index)."""
    if not may_hold_bk_metadata(fs, ledger_dirs):
        return False
    from impl.index.bk_metadata import find_idx_files

    return bool(find_idx_files(fs, ledger_dirs)[0])


def cleanup_compaction_leftovers(
    fs: FileSystem,
    layout: BookieLayout,
    index: LedgerIndex,
    entry_logger: EntryLogger,
    say: Progress,
    *,
    limits: Limits = LIMITS,
) -> LeftoverReport:
    """Recovery step 2 (module docstring): ``recover_leftovers`` over the ledger directories,
    with the index update of phase 3 (spec/protocol/compaction.md, "Recovery"): for a live
    ledger, the new location replaces one in the source log, then the index is flushed. An
    entry the persisted index does not have is left alone: if it was acknowledged, its
    journal record is after lastMark and replay adds it again; if not, its record in the
    source was never journaled and indexing its copy would bring back an entry this bookie
    already answered as missing. The previous run's logs were fsynced by step 0 and
    recovery made the new log's name durable, so the flush names durable records only. An
    index never persisted (a BookKeeper directory) is not written: the rebuild that follows
    reads the new log, the source being gone by then. Raises RecoveryError on a disk
    error, DamagedFile for a malformed compaction log whose source is gone."""

    def apply_moves(moves: list[MovedEntry]) -> bool:
        """Put and flush; True (keep the source) when the index still places entries in the
        source that the compaction log does not hold (a scan stopped by damage in it):
        removing the source would lose them."""
        if not index.persisted or not moves:
            return False
        for move in moves:
            if index.is_deleted(move.ledger_id):
                continue
            now = index.get_location(move.ledger_id, move.entry_id)
            if now is not None and location_log_id(now) == location_log_id(move.old):
                index.put_entry(move.ledger_id, move.entry_id, move.new)
        index.flush()
        return location_log_id(moves[0].old) in index.log_extents()

    try:
        report = recover_leftovers(
            fs, list(layout.ledger_dirs), entry_logger, apply_moves, limits=limits
        )
    except (FsError, EntryLogError) as exc:
        raise RecoveryError(
            f"cannot finish an interrupted compaction: {exc}. What was done is kept and the "
            "rest is done again at the next start; check the disk, then start again"
        ) from exc
    for path in report.removed_compacting:
        say(f"removed {path}: a compaction log an interrupted compaction was still writing")
    for new_id, src_id in report.finished:
        say(
            f"finished the compaction of entry log {log_file_name(src_id)} into "
            f"{log_file_name(new_id)}"
        )
    for source in report.kept_sources:
        say(
            f"kept entry log {log_file_name(source)} beside its compaction log: the ledger "
            "index still places entries in it that the compaction did not copy (damage in "
            "the log may have stopped the copy's scan). Check the log with bkref inspect"
        )
    for path in report.removed_compacted:
        say(f"removed {path}: a compaction log that is not well formed; its source is kept")
    return report


def recover(
    fs: FileSystem,
    config: ServerConfig,
    layout: BookieLayout,
    entry_logger: EntryLogger,
    say: Progress,
    *,
    limits: Limits = LIMITS,
) -> Recovered:
    """Steps 0 to 3 (module docstring): the index, and the entry logs with every journal
    record after lastMark applied. Raises RecoveryError (or ConfigError from the parts) with
    what to do; what it wrote is then only what a later start writes again (replay is
    idempotent). The index, its rebuild and the replay get ``limits`` (impl/limits.py)."""
    sync_previous_run(fs, layout)  # (0)
    # lastMark first: a damaged one is refused before the index is even read. Nothing below
    # but the compaction leftovers' recovery writes before replay, and replay refuses damage
    # before the checkpoint (Bookie.open).
    checked = checked_last_mark(fs, list(layout.ledger_dirs))  # (1)
    index = LedgerIndex.load(fs, layout.index_dir, limits=limits)
    check_index_coverage(index, checked.coverage)
    check_coverage_record(fs, layout.journal_dir, checked, index)
    cleanup_compaction_leftovers(fs, layout, index, entry_logger, say, limits=limits)  # (2)
    check_indexed_logs(fs, index, entry_logger)
    rebuilt: int | None = None
    bk_files = not index.persisted and _has_bk_index_files(fs, layout.ledger_dirs)
    if must_rebuild_index(index.persisted, entry_logger.log_ids(), bk_files):
        say(f"ledger index not found in {layout.index_dir}: rebuilding it from entry logs")
        try:
            stats = rebuild_index(fs, list(layout.ledger_dirs), index, say, limits=limits)
        except FsError as exc:
            raise RecoveryError(
                f"cannot read an entry log while rebuilding the ledger index: {exc}. Nothing "
                "was persisted; check the disk, then start again (the rebuild starts over)"
            ) from exc
        except BkIndexDamaged as exc:
            raise RecoveryError(
                f"BookKeeper's ledger index file is damaged: {exc}. Nothing was persisted; "
                "start again once the file is restored"
            ) from exc
        if stats.logs < limits.rebuild_progress_every_logs and not stats.failures:
            say(stats.summary())  # rebuild_index prints it itself on large directories
        rebuilt = stats.entries_indexed
    mark = checked.mark  # (3)
    check_other_marks(fs, layout.journal_dir, checked, config, limits)
    records = replay(
        fs,
        layout.journal_dir,
        mark,
        skip_invalid=config.skip_replay_journal_invalid_record,
        max_record_bytes=config.netty_max_frame_size_bytes,
        progress=say,
        limits=limits,
        mark_file=checked.path,
        bkref_mark=checked.coverage is not None,
    )
    held = HeldEntries(fs, layout.journal_dir, records.journal_names)
    replayer = JournalReplayer(index, entry_logger, say, held)
    for record in records:
        replayer.apply(record)
    end = records.end_mark
    assert end >= mark, (end, mark)
    report = replayer.report(start_mark=mark, end_mark=end, entries_rebuilt=rebuilt)
    if report.records_replayed:
        say(f"replayed {report.records_replayed} journal records up to {end}")
    return Recovered(index, report, held)


# --- applying records -----------------------------------------------------------------------------


def _where(record: JournalRecord) -> str:
    """Where a record lies, for messages."""
    return f"journal {journal_file_name(record.journal_id)} offset {record.offset}"


class JournalReplayer:
    """Applies replayed journal records to the index and the entry logs, one at a time, in
    journal order (BookieImpl.readJournal's scanner), and counts what it did with each kind.
    Single-threaded: it runs before the bookie takes requests."""

    def __init__(
        self,
        index: LedgerIndex,
        entry_logger: EntryLogger,
        say: Progress,
        held: HeldEntries | None = None,
    ) -> None:
        """``held``: where entries go that no ledger directory has room for (served from
        the journal: impl/bookie/held.py); None refuses the start instead."""
        self._index = index
        self._entry_logger = entry_logger
        self._say = say
        self._held = held
        self._counts: dict[ReplayAction, int] = {}
        #: Ledgers whose skipped entries were reported once already.
        self._unknown_noted: set[LedgerId] = set()

    def apply(self, record: JournalRecord) -> ReplayAction:
        """Apply one record; returns what was done with it."""
        ledger_id = LedgerId(record.ledger_id)
        index = self._index
        if (
            record.kind == "data"
            and index.has_ledger(ledger_id)
            and index.get_location(ledger_id, EntryId(record.entry_id)) is None
        ):
            # replay_action's common case, inlined for replay speed: a known ledger (so not
            # deleted and a valid id) and an entry the index does not have -> RE_ADD.
            done = self._re_add(record)
            self._counts[done] = self._counts.get(done, 0) + 1
            return done
        present = record.kind == "data" and self._entry_reads_back(record)
        action = replay_action(
            record.kind,
            ledger_id,
            index.is_deleted(ledger_id),
            index.has_ledger(ledger_id),
            index.master_key(ledger_id),
            present,
        )
        action = self._act(action, record)
        self._counts[action] = self._counts.get(action, 0) + 1
        return action

    def _act(self, action: ReplayAction, record: JournalRecord) -> ReplayAction:
        """Do ``action``; returns what was done (RE_ADD may become HOLD)."""
        ledger_id = LedgerId(record.ledger_id)
        if action is ReplayAction.RE_ADD:
            return self._re_add(record)
        if action is ReplayAction.SET_KEY:
            self._set_key(record)
        elif action is ReplayAction.FENCE:
            self._index.set_fenced(ledger_id)
        elif action is ReplayAction.KEEP_KEY:
            if self._index.master_key(ledger_id) != record.payload:
                self._say(
                    f"{_where(record)}: a second, different key for ledger {ledger_id} is ignored"
                )
        elif action is ReplayAction.SKIP_BAD_ID:
            self._say(f"{_where(record)}: skipped a {record.kind} record of ledger id {ledger_id}")
        elif action is ReplayAction.SKIP_UNKNOWN and ledger_id not in self._unknown_noted:
            self._unknown_noted.add(ledger_id)
            self._say(
                f"{_where(record)}: skipping the entries of ledger {ledger_id}: no key record "
                "and not in the index (BookKeeper skips them too, as a deleted ledger's)"
            )
        return action

    def _set_key(self, record: JournalRecord) -> None:
        if len(record.payload) > MASTER_KEY_MAX_BYTES:
            raise DamagedFile(
                journal_file_name(record.journal_id),
                record.offset,
                f"the key record of ledger {record.ledger_id} holds a key of "
                f"{len(record.payload)} bytes, more than any bookie accepts "
                f"({MASTER_KEY_MAX_BYTES})",
                f"restore the journal from a copy. {REPLICA_ADVICE}",
            )
        self._index.set_master_key(LedgerId(record.ledger_id), record.payload)

    def _entry_reads_back(self, record: JournalRecord) -> bool:
        """The index has the record's entry and its bytes in the entry log are the record's."""
        ledger_id, entry_id = LedgerId(record.ledger_id), EntryId(record.entry_id)
        location = self._index.get_location(ledger_id, entry_id)
        if location is None:
            return False
        try:
            stored = self._entry_logger.read_entry(ledger_id, entry_id, location)
        except EntryLogError:
            return False
        return stored == record.payload

    def _re_add(self, record: JournalRecord) -> ReplayAction:
        """Append the entry again and index it (RE_ADD); when no ledger directory has room,
        hold it to be served from the journal (HOLD), or refuse the start without ``held``."""
        ledger_id, entry_id = LedgerId(record.ledger_id), EntryId(record.entry_id)
        try:
            location = self._entry_logger.add_entry(ledger_id, record.payload)
        except NoWritableLedgerDir as exc:
            if self._held is None:
                raise RecoveryError(
                    f"cannot replay entry {entry_id} of ledger {ledger_id} from journal "
                    f"{journal_file_name(record.journal_id)}: {exc}"
                ) from exc
            # No ledger directory has room (each was checked before replay, and this write
            # met ENOSPC): serve the entry from the journal until a checkpoint finds room.
            self._held.hold(record)
            return ReplayAction.HOLD
        except FsError as exc:
            raise RecoveryError(
                f"cannot replay entry {entry_id} of ledger {ledger_id} from journal "
                f"{journal_file_name(record.journal_id)}: {exc}. Check the disk, then start "
                "again: replay is idempotent."
            ) from exc
        self._index.put_entry(ledger_id, entry_id, location)
        return ReplayAction.RE_ADD

    def report(
        self, *, start_mark: LogMark, end_mark: LogMark, entries_rebuilt: int | None
    ) -> RecoveryReport:
        """The recovery report of this replay; ``entries_rebuilt`` None: no index rebuild."""
        counts = self._counts
        return RecoveryReport(
            index_rebuilt=entries_rebuilt is not None,
            entries_rebuilt=entries_rebuilt or 0,
            start_mark=start_mark,
            end_mark=end_mark,
            records_replayed=sum(counts.values()),
            keys_set=counts.get(ReplayAction.SET_KEY, 0),
            fences_set=counts.get(ReplayAction.FENCE, 0),
            entries_re_added=counts.get(ReplayAction.RE_ADD, 0),
            entries_present=counts.get(ReplayAction.PRESENT, 0),
            skipped_deleted=counts.get(ReplayAction.SKIP_DELETED, 0),
            skipped_unknown=counts.get(ReplayAction.SKIP_UNKNOWN, 0)
            + counts.get(ReplayAction.SKIP_BAD_ID, 0),
            ignored=counts.get(ReplayAction.KEEP_KEY, 0) + counts.get(ReplayAction.IGNORE_LAC, 0),
            entries_held=counts.get(ReplayAction.HOLD, 0),
        )

    def check_invariants(self) -> None:
        assert all(count > 0 for count in self._counts.values()), self._counts
        for ledger_id in self._unknown_noted:
            assert self._counts.get(ReplayAction.SKIP_UNKNOWN, 0) > 0, ledger_id
