"""What a bookie directory is, judged from its names alone: empty, bkref's (with its identity
stamp), bkref's from before stamps existed, BookKeeper's, or not a bookie's at all.

Spec page: spec/format/identity.md ("Kinds of directory"). Why a module of its own, with no
bookie in it: the start (impl/bookie/identity.py) refuses to change a BookKeeper directory
unless asked and refuses directories that are not the ones it was stamped with, ``bkref dirs
accept`` must say what dropping a directory loses, and ``bkref inspect`` describes a
directory an operator hands it; all three need the same answer to "what is this directory?".

The judgement reads names (``listdir``) and the stamp; it opens no other file, so it is cheap
and cannot be misled by a damaged data file (damage is recovery's business).

Differences from BookKeeper: BookKeeper tells its directories apart by the ``VERSION`` cookie
in each and the copy in ZooKeeper (Cookie.verify); bkref has no ZooKeeper and reads its own
stamp (impl/format/identity.py) instead, and only recognises BookKeeper's files here.
"""

from __future__ import annotations

import enum

import attrs

from impl.format.identity import MAX_STAMP_BYTES, Stamp, StampFormatError, decode_stamp
from impl.format.names import (
    COVERAGE_FILE_NAME,
    CURRENT_DIR,
    DB_LEDGERS_DIR_NAME,
    DB_LOCATIONS_DIR_NAME,
    IDENTITY_FILE_NAME,
    INDEX_DIR_NAME,
    INSTANCE_ID_FILE_NAME,
    LAST_ID_FILE_NAME,
    LAST_MARK_FILE_NAME,
    RESERVE_FILE_NAME,
    VERSION_FILE_NAME,
    is_bk_index_dir_name,
    is_tmp_file_name,
    parse_compacted_file_name,
    parse_compacting_file_name,
    parse_journal_file_name,
    parse_log_file_name,
)
from impl.fs.api import FileSystem, join
from spec.errors import FsError

__all__ = ["DirInfo", "DirKind", "classify_dir", "stamp_path"]

#: DbLedgerStorage's RocksDB directories.
_BK_DB_DIRS = frozenset({DB_LEDGERS_DIR_NAME, DB_LOCATIONS_DIR_NAME})
#: Files only BookKeeper writes (bkref never does): their presence makes a directory
#: BookKeeper's even if bkref wrote into it before stamps existed.
_BK_ONLY_FILES = frozenset({VERSION_FILE_NAME, INSTANCE_ID_FILE_NAME})
_OLD_LAYOUT_SUFFIXES = (".txn", ".log", ".idx")


class DirKind(enum.Enum):
    """What a configured journal or ledger directory is."""

    MISSING = "missing (the path does not exist)"
    EMPTY = "empty (no bookie has written to it)"
    BKREF = "a bkref bookie's (it has bkref's identity stamp)"
    BKREF_PRE_STAMP = "a bkref bookie's from before identity stamps (bkref-index/, no stamp)"
    BOOKKEEPER = "a BookKeeper bookie's (its files, no bkref identity stamp)"
    NOT_A_BOOKIE = "not a bookie directory (it holds files no bookie writes)"


@attrs.frozen
class DirInfo:
    """A directory and what it is. ``path`` is the configured directory (``current/`` is
    below it). ``stamp_problem`` says why a stamp file that is there could not be read (kind
    BKREF with ``stamp`` None: damage). ``data`` lists the names whose loss loses
    acknowledged data (entry logs, journal files, an index), ``bookkeeper_only`` the names
    only BookKeeper writes, ``other`` the names no bookie writes."""

    path: str
    kind: DirKind
    stamp: Stamp | None = None
    stamp_problem: str | None = None
    bookie_files: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    bookkeeper_only: tuple[str, ...] = ()
    other: tuple[str, ...] = ()
    has_index: bool = False

    def evidence(self, limit: int = 4) -> str:
        """A few of the names that made the judgement, for messages."""
        names = self.bookkeeper_only + self.data + self.bookie_files + self.other
        seen = list(dict.fromkeys(names))
        shown = ", ".join(seen[:limit])
        return shown + (f" and {len(seen) - limit} more" if len(seen) > limit else "")


def stamp_path(directory: str) -> str:
    """Where the identity stamp of a configured directory lives."""
    return join(directory, CURRENT_DIR, IDENTITY_FILE_NAME)


#: Files of a bkref bookie that hold no data of their own (lastMark, lastId, the coverage
#: record and the reserve): a directory with them only is no BookKeeper data directory.
_BOOKIE_FILES = frozenset(
    {LAST_MARK_FILE_NAME, LAST_ID_FILE_NAME, COVERAGE_FILE_NAME, RESERVE_FILE_NAME}
)


def _read_stamp(fs: FileSystem, path: str) -> tuple[Stamp | None, str | None]:
    try:
        handle = fs.open(path, read_only=True)
    except FsError as exc:
        return None, f"cannot open it: {exc}"
    try:
        size = handle.size()
        if size > MAX_STAMP_BYTES:
            return None, f"{size} bytes, larger than any stamp"
        data = handle.pread(0, size)
    except FsError as exc:
        return None, f"cannot read it: {exc}"
    finally:
        handle.close()
    try:
        return decode_stamp(data), None
    except StampFormatError as exc:
        return None, str(exc)


def _old_layout(names: list[str]) -> bool:
    """BookKeeper's layout before ``current/`` (checkDirectoryStructure's upgrade check)."""
    return any(name.endswith(_OLD_LAYOUT_SUFFIXES) for name in names)


def classify_dir(fs: FileSystem, path: str) -> DirInfo:
    """What the configured directory ``path`` is (module docstring). Reads names and the
    stamp only; raises nothing for what it finds (a damaged stamp is reported in the
    result), only FsError when a directory cannot be listed."""
    if not fs.exists(path):
        return DirInfo(path, DirKind.MISSING)
    if not fs.is_dir(path):
        return DirInfo(path, DirKind.NOT_A_BOOKIE, other=(path,))
    current = join(path, CURRENT_DIR)
    if not fs.is_dir(current):
        names = fs.listdir(path)
        if not names:
            return DirInfo(path, DirKind.EMPTY)
        if _old_layout(names):
            found = tuple(n for n in names if n.endswith(_OLD_LAYOUT_SUFFIXES))
            return DirInfo(path, DirKind.BOOKKEEPER, data=found, bookkeeper_only=found)
        return DirInfo(path, DirKind.NOT_A_BOOKIE, other=tuple(names))
    stamp: Stamp | None = None
    problem: str | None = None
    bookie: list[str] = []
    data: list[str] = []
    bk_only: list[str] = []
    other: list[str] = []
    has_index = False
    for name in fs.listdir(current):
        full = join(current, name)
        if name == IDENTITY_FILE_NAME:
            stamp, problem = _read_stamp(fs, full)
        elif name == INDEX_DIR_NAME:
            has_index = True
            data.append(name)
        elif name in _BK_ONLY_FILES:
            bk_only.append(name)
        elif fs.is_dir(full):
            if is_bk_index_dir_name(name) or name in _BK_DB_DIRS:
                bk_only.append(name + "/")
                data.append(name + "/")
            else:
                other.append(name + "/")
        elif (
            parse_log_file_name(name) is not None
            or parse_journal_file_name(name) is not None
            or parse_compacting_file_name(name) is not None
            or parse_compacted_file_name(name) is not None
        ):
            data.append(name)
        elif name in _BOOKIE_FILES or is_tmp_file_name(name):
            bookie.append(name)
        else:
            other.append(name)
    if stamp is not None or problem is not None:
        kind = DirKind.BKREF
    elif has_index:
        kind = DirKind.BKREF_PRE_STAMP
    elif data or bk_only or bookie:
        # A stamp's own temporary file alone is what a crash during a first start leaves.
        leftovers = [n for n in bookie if n not in (IDENTITY_FILE_NAME + ".tmp", RESERVE_FILE_NAME)]
        kind = DirKind.BOOKKEEPER if (data or bk_only or leftovers) else DirKind.EMPTY
    elif other:
        kind = DirKind.NOT_A_BOOKIE
    else:
        kind = DirKind.EMPTY
    return DirInfo(
        path,
        kind,
        stamp=stamp,
        stamp_problem=problem,
        bookie_files=tuple(bookie),
        data=tuple(data),
        bookkeeper_only=tuple(bk_only),
        other=tuple(other),
        has_index=has_index,
    )
