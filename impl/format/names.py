"""Every file and directory name of a bookie, made and parsed here and nowhere else.

Spec pages: spec/format/entry_log.md ("File names"), spec/format/journal.md ("File names and
directories"), spec/format/ledger_index.md ("Files"). Like LevelDB's filename.h, one module
owns the spelling of every name, so that a maker and a parser cannot drift apart.
BookKeeper #4804 is what drifting looks like: its compaction recovery parsed a log id from a
hex ``.compacted`` name and then wrote the recovered log under the id's *decimal* spelling
(``500.log`` for log ``0x1f4``), which its own scan never finds again.

Rules, each as BookKeeper has it:

- Makers always write lower-case hex without leading zeros (Java's ``Long.toHexString``);
  index segments, which are ours, use 16 fixed-width lower-case digits so that name order is
  sequence order.
- Parsers take exactly the BookKeeper patterns (``LedgerDirUtil``, ``Journal.listJournalIds``):
  hex digits in either case (``Long.parseLong(s, 16)`` accepts both), the whole name matched.
  An id above what the id type holds makes the name foreign (None): entry log ids are Java
  ints (``MAX_LOG_ID``), journal ids Java longs. Segment names are ours and lower-case only.
- :func:`log_id_prefix` is BookKeeper's ``fileName2LogId`` (the hex before the first dot, any
  size), for tools that report on any file a user hands them.

This module is pure: strings in, strings or ids out. Where each name lives (which directory)
is the bookie's layout (impl/bookie/layout.py).
"""

from __future__ import annotations

import re
from typing import Final

from impl.format.entry_log import MAX_LOG_ID
from spec.ids import INT64_MAX, EntryLogId

# --- directories ------------------------------------------------------------------------------

#: BookKeeper's ``current`` sub-directory of every journal and ledger directory.
CURRENT_DIR: Final = "current"
#: Our ledger index directory, under the first ledger directory's ``current``.
INDEX_DIR_NAME: Final = "bkref-index"

# --- fixed file names -------------------------------------------------------------------------

#: The last allocated entry log id, in every ledger directory.
LAST_ID_FILE_NAME: Final = "lastId"
#: The checkpointed journal mark, in every ledger directory.
LAST_MARK_FILE_NAME: Final = "lastMark"
#: The index's deleted-ledgers file, in the index directory.
DELETED_FILE_NAME: Final = "deleted-ledgers"
#: bkref's identity stamp, in every journal and ledger directory (spec/format/identity.md).
IDENTITY_FILE_NAME: Final = "bkref-identity"
#: What the ledger directories held at least (the last lastMark and the index's coverage,
#: its deletes counted as they are acknowledged), in the journal directory: an old copy of
#: the ledger directories cannot hide it (spec/format/journal.md, "The coverage record").
COVERAGE_FILE_NAME: Final = "bkref-coverage"
#: Room kept free for the bookie's own small writes on a disk its data filled (identity
#: stamps, lastMark, the index at a start), in every journal and ledger directory
#: (impl/bookie/reserve.py; spec/format/identity.md, "A full disk").
RESERVE_FILE_NAME: Final = "bkref-reserve"
#: BookKeeper's cookie and an instance id file: read and shown by ``bkref inspect`` only.
VERSION_FILE_NAME: Final = "VERSION"
INSTANCE_ID_FILE_NAME: Final = "instanceId"

# --- suffixes ---------------------------------------------------------------------------------

LOG_SUFFIX: Final = ".log"
#: A compaction log being written (EntryLoggerAllocator.createNewLogForCompaction).
COMPACTING_SUFFIX: Final = ".log.compacting"
#: A flushed compaction log whose index update is not done yet.
COMPACTED_SUFFIX: Final = ".compacted"
JOURNAL_FILE_SUFFIX: Final = ".txn"
SEGMENT_SUFFIX: Final = ".seg"
#: A file written under this suffix first, then renamed into place once durable.
TMP_SUFFIX: Final = ".tmp"

_HEX = r"([0-9a-fA-F]+)"
_LOG_NAME = re.compile(_HEX + re.escape(LOG_SUFFIX))
_COMPACTING_NAME = re.compile(_HEX + re.escape(COMPACTING_SUFFIX))
_COMPACTED_NAME = re.compile(
    _HEX + re.escape(LOG_SUFFIX + ".") + _HEX + re.escape(COMPACTED_SUFFIX)
)
_JOURNAL_NAME = re.compile(_HEX + re.escape(JOURNAL_FILE_SUFFIX))
_SEGMENT_NAME = re.compile(r"([0-9a-f]{16})" + re.escape(SEGMENT_SUFFIX))
_HEX_ONLY = re.compile(_HEX)
_SEGMENT_SEQ_MAX = 2**64 - 1


def _log_id(text: str) -> EntryLogId | None:
    """A hex entry log id, None above a Java int (``parseUnsignedInt`` would not give it)."""
    value = int(text, 16)
    return EntryLogId(value) if value <= MAX_LOG_ID else None


# --- entry logs -------------------------------------------------------------------------------


def log_file_name(log_id: int) -> str:
    """``<lower-case hex id>.log`` (Long.toHexString)."""
    assert 0 <= log_id <= MAX_LOG_ID, log_id
    return f"{log_id:x}{LOG_SUFFIX}"


def parse_log_file_name(name: str) -> EntryLogId | None:
    """The id of ``<hex>.log`` (hex in either case, LedgerDirUtil.FILE_PATTERN), else None."""
    match = _LOG_NAME.fullmatch(name)
    return None if match is None else _log_id(match.group(1))


def compacting_file_name(log_id: int) -> str:
    """``<hex id>.log.compacting``: a compaction log being written."""
    assert 0 <= log_id <= MAX_LOG_ID, log_id
    return f"{log_id:x}{COMPACTING_SUFFIX}"


def parse_compacting_file_name(name: str) -> EntryLogId | None:
    """The id of ``<hex>.log.compacting``, else None."""
    match = _COMPACTING_NAME.fullmatch(name)
    return None if match is None else _log_id(match.group(1))


def compacted_file_name(new_log_id: int, src_log_id: int) -> str:
    """``<hex new>.log.<hex src>.compacted``: a flushed compaction log of ``src``."""
    assert 0 <= new_log_id <= MAX_LOG_ID, new_log_id
    assert 0 <= src_log_id <= MAX_LOG_ID, src_log_id
    return f"{new_log_id:x}{LOG_SUFFIX}.{src_log_id:x}{COMPACTED_SUFFIX}"


def parse_compacted_file_name(name: str) -> tuple[EntryLogId, EntryLogId] | None:
    """(new id, source id) of ``<hex new>.log.<hex src>.compacted``
    (LedgerDirUtil.COMPACTED_FILE_PATTERN), else None."""
    match = _COMPACTED_NAME.fullmatch(name)
    if match is None:
        return None
    new_id, src_id = _log_id(match.group(1)), _log_id(match.group(2))
    if new_id is None or src_id is None:
        return None
    return new_id, src_id


def log_id_prefix(name: str) -> int | None:
    """BookKeeper's ``fileName2LogId``: the hex digits before the first dot, of any size (the
    caller checks the range, to say why a name is refused), None when they are not hex."""
    head = name.split(".", 1)[0]
    return int(head, 16) if _HEX_ONLY.fullmatch(head) else None


# --- journals ---------------------------------------------------------------------------------


def journal_file_name(journal_id: int) -> str:
    """``<lower-case hex id>.txn`` (Long.toHexString)."""
    assert 0 <= journal_id <= INT64_MAX, journal_id
    return f"{journal_id:x}{JOURNAL_FILE_SUFFIX}"


def parse_journal_file_name(name: str) -> int | None:
    """The id of a ``<hex>.txn`` name (either case of hex digit, as Long.parseLong), or None
    for any other name (``1.2.txn`` included, which BookKeeper would read as journal 1)."""
    match = _JOURNAL_NAME.fullmatch(name)
    if match is None:
        return None
    journal_id = int(match.group(1), 16)
    return journal_id if journal_id <= INT64_MAX else None


# --- the ledger index -------------------------------------------------------------------------


def segment_file_name(seq: int) -> str:
    """``<16 lower-case hex digits>.seg``: fixed width, so name order is sequence order."""
    assert 1 <= seq <= _SEGMENT_SEQ_MAX, seq
    return f"{seq:016x}{SEGMENT_SUFFIX}"


def parse_segment_file_name(name: str) -> int | None:
    """The sequence number of a segment file name, None for any other name."""
    match = _SEGMENT_NAME.fullmatch(name)
    return None if match is None else int(match.group(1), 16)


# --- BookKeeper's own ledger metadata (read, never written: spec/format/bk_index.md) ----------

#: InterleavedLedgerStorage's per-ledger index file (IndexPersistenceMgr.IDX).
IDX_SUFFIX: Final = ".idx"
#: An index file being relocated to another directory (IndexPersistenceMgr.RLOC).
RLOC_SUFFIX: Final = ".rloc"
#: DbLedgerStorage's ledger metadata database, a RocksDB directory under ``current``.
DB_LEDGERS_DIR_NAME: Final = "ledgers"
#: DbLedgerStorage's entry location database, a RocksDB directory beside it.
DB_LOCATIONS_DIR_NAME: Final = "locations"
_IDX_NAME = re.compile(_HEX + re.escape(IDX_SUFFIX))
_BK_INDEX_DIR_NAME = re.compile(r"[0-9a-fA-F]{1,2}")


def is_bk_index_dir_name(name: str) -> bool:
    """Whether ``name`` is a directory name IndexPersistenceMgr.getLedgerName makes at either
    level above an ``.idx`` file: one byte of the ledger id in hex, one or two digits."""
    return _BK_INDEX_DIR_NAME.fullmatch(name) is not None


def bk_index_path_parts(ledger_id: int) -> tuple[str, str, str]:
    """(grand parent, parent, file name) of a ledger's ``.idx`` file relative to an index
    directory (IndexPersistenceMgr.getLedgerName): the second-lowest and the lowest byte of
    the id in lower-case hex without leading zeros, then ``<hex id>.idx``."""
    assert 0 <= ledger_id <= INT64_MAX, ledger_id
    return (
        f"{(ledger_id >> 8) & 0xFF:x}",
        f"{ledger_id & 0xFF:x}",
        f"{ledger_id:x}{IDX_SUFFIX}",
    )


def parse_bk_index_file_name(name: str) -> tuple[int, bool] | None:
    """(ledger id, is a ``.rloc``) of ``<hex>.idx`` or ``<hex>.idx.rloc``, as BookKeeper's
    getActiveLedgers reads them (hex in either case, Long.parseLong: at most INT64_MAX), or
    None for any other name."""
    rloc = name.endswith(IDX_SUFFIX + RLOC_SUFFIX)
    stem = name[: -len(RLOC_SUFFIX)] if rloc else name
    match = _IDX_NAME.fullmatch(stem)
    if match is None:
        return None
    ledger_id = int(match.group(1), 16)
    return (ledger_id, rloc) if ledger_id <= INT64_MAX else None


# --- files written then renamed ---------------------------------------------------------------


def tmp_file_name(name: str) -> str:
    """The name ``name`` is written under before it is renamed into place."""
    assert name and not is_tmp_file_name(name), name
    return name + TMP_SUFFIX


def is_tmp_file_name(name: str) -> bool:
    """Whether ``name`` is a ``.tmp`` leftover (of any file written then renamed)."""
    return name.endswith(TMP_SUFFIX)
