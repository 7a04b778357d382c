"""Find and read BookKeeper's per-ledger index files (``.idx``) in a bookie's directories.

Spec page: spec/format/bk_index.md ("Where index files live", "Relocation: .rloc", "Which
states are possible"). BookKeeper's sources: IndexPersistenceMgr.getActiveLedgers (the walk
and the ``.rloc`` rule), findIndexFile (the first directory in configuration order wins),
getLedgerName (the path a ledger's file must have). The bytes are impl/format/bk_index.py,
the names impl/format/names.py.

Why: when bkref rebuilds its index from a directory BookKeeper wrote (impl/index/rebuild.py),
the keys and fence flags older than lastMark are only here. This module never writes: it
settles the ``.rloc`` leftovers in its head the way getActiveLedgers settles them on disk, so
that opening a BookKeeper directory reads the same ledgers BookKeeper would.

Only headers are read (the first 1024 bytes of each file); the positions are for ``bkref
inspect`` (``describe_idx_file``). DbLedgerStorage's ``ledgers`` database is only noticed here
(``db_ledgers_dirs``): reading RocksDB needs a binding that does I/O outside the FileSystem
seam, so ``bkref import`` reads it (proofs/cli/bk_import.py).

Not verified here: a FIFO or device named like an index file (its open may block).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from impl.format.bk_index import IDX_START_OF_DATA, IdxHeader, decode_idx_header, describe_idx
from impl.format.names import (
    DB_LEDGERS_DIR_NAME,
    bk_index_path_parts,
    parse_bk_index_file_name,
)
from impl.fs.api import FileSystem, join
from spec.errors import BkIndexTorn, FsError
from spec.ids import LedgerId

__all__ = [
    "BkIdxLedger",
    "BkMetadata",
    "describe_idx_file",
    "find_idx_files",
    "read_bk_metadata",
]


@attrs.frozen
class IdxFileRef:
    """One index file found: its ledger, its path, and whether it is a ``.rloc``."""

    ledger_id: LedgerId
    path: str
    rloc: bool


@attrs.frozen
class BkIdxLedger:
    """What one ``.idx`` header says of its ledger."""

    ledger_id: LedgerId
    path: str
    master_key: bytes
    fenced: bool
    #: The explicit LAC value, None when the header has none (bkref does not keep it).
    explicit_lac: int | None


@attrs.frozen
class BkMetadata:
    """Everything found in the index directories. ``ledgers``: one per ledger whose header
    was read; ``torn``: (path, what) for headers a crash left unreadable (those ledgers'
    keys and fences come only from the journal); ``ignored``: (path, why) for files not read
    (a superseded ``.rloc``, a second copy, a misplaced or foreign file);
    ``db_ledgers_dirs``: DbLedgerStorage ``ledgers`` databases seen (not read here)."""

    ledgers: tuple[BkIdxLedger, ...] = ()
    torn: tuple[tuple[str, str], ...] = ()
    ignored: tuple[tuple[str, str], ...] = ()
    db_ledgers_dirs: tuple[str, ...] = ()

    @property
    def found_anything(self) -> bool:
        """Whether the directories hold any BookKeeper ledger metadata at all."""
        return bool(self.ledgers or self.torn or self.db_ledgers_dirs)

    def summary(self) -> str:
        """One line for the bookie's log."""
        keys = sum(1 for ledger in self.ledgers if ledger.master_key)
        fenced = sum(1 for ledger in self.ledgers if ledger.fenced)
        lacs = sum(1 for ledger in self.ledgers if ledger.explicit_lac is not None)
        line = (
            f"BookKeeper index files: {len(self.ledgers)} ledgers read ({keys} with a non-empty "
            f"master key, {fenced} fenced, {lacs} with an explicit LAC, not carried over)"
        )
        if self.torn:
            line += f", {len(self.torn)} torn headers"
        if self.ignored:
            line += f", {len(self.ignored)} files not read"
        return line


def find_idx_files(
    fs: FileSystem, index_dirs: Sequence[str]
) -> tuple[list[IdxFileRef], list[tuple[str, str]]]:
    """Every index file BookKeeper would use, and (path, why) for every file it would not.

    Walks ``<dir>/<any>/<any>/`` in each directory (getActiveLedgers); a file counts only at
    the path getLedgerName gives for its id, the first directory (configuration order)
    holding a ledger wins (findIndexFile), and a ``.rloc`` counts only when no ``.idx`` of its
    ledger exists in any directory (getActiveLedgers deletes it then, or renames it)."""
    candidates: list[IdxFileRef] = []
    ignored: list[tuple[str, str]] = []
    for directory in index_dirs:
        for grand in _subdirs(fs, directory):
            for par in _subdirs(fs, join(directory, grand)):
                where = join(directory, grand, par)
                for name in _names(fs, where):
                    path = join(where, name)
                    if fs.is_dir(path):
                        ignored.append((path, "a directory where index files live"))
                        continue
                    parsed = parse_bk_index_file_name(name)
                    if parsed is None:
                        ignored.append((path, "not an index file name (<hex id>.idx)"))
                        continue
                    ledger_id, rloc = parsed
                    expected = bk_index_path_parts(ledger_id)
                    if (grand, par) != expected[:2] or name.split(".")[0] != f"{ledger_id:x}":
                        ignored.append(
                            (
                                path,
                                f"ledger {ledger_id}'s index file would be "
                                f"{'/'.join(expected)}: BookKeeper never opens this one",
                            )
                        )
                        continue
                    candidates.append(IdxFileRef(LedgerId(ledger_id), path, rloc))
    with_idx = {ref.ledger_id for ref in candidates if not ref.rloc}
    chosen: dict[LedgerId, IdxFileRef] = {}
    for ref in candidates:  # configuration order, then path order
        if ref.rloc and ref.ledger_id in with_idx:
            ignored.append((ref.path, "a relocation copy superseded by the ledger's .idx"))
        elif ref.ledger_id in chosen:
            ignored.append(
                (ref.path, f"a second index file of ledger {ref.ledger_id}: the first wins")
            )
        else:
            chosen[ref.ledger_id] = ref
    return [chosen[ledger_id] for ledger_id in sorted(chosen)], ignored


def _subdirs(fs: FileSystem, directory: str) -> list[str]:
    return [name for name in _names(fs, directory) if fs.is_dir(join(directory, name))]


def _names(fs: FileSystem, directory: str) -> list[str]:
    try:
        return fs.listdir(directory)
    except FsError:
        return []  # gone, or not a directory: nothing of BookKeeper's index there


def read_header(fs: FileSystem, path: str) -> IdxHeader:
    """The header of one index file (its first 1024 bytes). Raises BkIndexTorn,
    BkIndexDamaged, or FsError when the file cannot be read."""
    handle = fs.open(path, read_only=True)
    try:
        data = handle.pread(0, IDX_START_OF_DATA)
    finally:
        handle.close()
    return decode_idx_header(data, path)


def read_bk_metadata(fs: FileSystem, index_dirs: Sequence[str]) -> BkMetadata:
    """Read the header of every index file in ``index_dirs`` (a bookie's ``current``
    directories). Torn headers are collected, not raised; BkIndexDamaged and FsError
    propagate: recovery refuses damage rather than carrying a ledger over without its key."""
    refs, ignored = find_idx_files(fs, index_dirs)
    ledgers: list[BkIdxLedger] = []
    torn: list[tuple[str, str]] = []
    for ref in refs:
        try:
            header = read_header(fs, ref.path)
        except BkIndexTorn as exc:
            torn.append((ref.path, str(exc)))
            continue
        ledgers.append(
            BkIdxLedger(ref.ledger_id, ref.path, header.master_key, header.fenced, header.lac)
        )
    db_dirs = tuple(
        join(directory, DB_LEDGERS_DIR_NAME)
        for directory in index_dirs
        if fs.is_dir(join(directory, DB_LEDGERS_DIR_NAME))
    )
    return BkMetadata(tuple(ledgers), tuple(torn), tuple(ignored), db_dirs)


def describe_idx_file(fs: FileSystem, path: str) -> dict[str, object]:
    """``bkref inspect``'s summary of one index file (impl/format/bk_index.describe_idx),
    with the ledger id from the file name. Raises FsError when the file cannot be read."""
    parsed = parse_bk_index_file_name(path.rsplit("/", 1)[-1])
    handle = fs.open(path, read_only=True)
    try:
        data = handle.pread(0, handle.size())
    finally:
        handle.close()
    summary = describe_idx(None if parsed is None else parsed[0], data, path)
    summary["path"] = path
    summary["relocation_copy"] = parsed is not None and parsed[1]
    return summary
