"""Where a bookie keeps its files (BookKeeper's layout), and the recovery step that makes what
a previous process left there durable before anything trusts it.

Spec pages: spec/format/journal.md ("File names and directories"), spec/format/entry_log.md
("File names"), spec/format/ledger_index.md ("Files"). BookKeeper's own layout, so bkref opens
BookKeeper's directories and the other way round:

- ``<journal dir>/current/<hex id>.txn``: journal files (impl/journal/journal.py);
- ``<ledger dir>/current/<hex id>.log``, ``lastId``: entry logs (impl/entrylog/logger.py);
- ``<ledger dir>/current/lastMark``: the checkpointed journal mark, in every ledger dir;
- ``<ledger dir>/current/bkref-index/``: our ledger index (spec/format/ledger_index.md), in
  the ledger directory the identity stamps name (impl/bookie/identity.py): the first listed
  one when the bookie was first started, wherever it is after a reordering;
- ``<journal or ledger dir>/current/bkref-identity``: the identity stamp
  (spec/format/identity.md).
  BookKeeper keeps its own index files in ``<ledger dir>/current/<xx>/<yy>/`` sub-directories;
  we never write those, and read their headers only to rebuild our index
  (spec/format/bk_index.md, impl/index/bk_metadata.py).

Only the first journal directory is supported: BookKeeper runs one journal per directory
with ``lastMark.<index>`` files; with more than one ``journalDirectories`` entry the bookie
refuses to start with a ConfigError saying so. The names themselves are impl/format/names.py.
"""

from __future__ import annotations

import attrs

from impl.config.config import ServerConfig
from impl.format.names import CURRENT_DIR, INDEX_DIR_NAME
from impl.fs.api import FileSystem, join, parent
from spec.errors import ConfigError

__all__ = [
    "CURRENT_DIR",
    "BookieLayout",
    "ensure_durable_dir",
    "layout_from_config",
    "sync_previous_run",
    "with_index_in",
]


@attrs.frozen
class BookieLayout:
    """Where everything lives: the ``current`` directories and our index directory."""

    journal_dir: str
    ledger_dirs: tuple[str, ...]
    index_dir: str

    def directories(self) -> tuple[str, ...]:
        """Every directory of the bookie: the journal's, the ledger directories, the index's."""
        return (self.journal_dir, *self.ledger_dirs, self.index_dir)


def layout_from_config(config: ServerConfig) -> BookieLayout:
    """BookKeeper's layout from journalDirectories and ledgerDirectories, with the index in
    the first ledger directory (``Bookie.open`` moves it where the stamps say). Pure. Raises
    ConfigError for several journal directories (see the module docstring)."""
    journals = config.journal_directories
    if len(journals) != 1:
        raise ConfigError(
            f"journalDirectories={','.join(journals)} lists {len(journals)} directories: "
            "bkref runs one journal and supports exactly one journal directory (BookKeeper's "
            "lastMark.<index> files for several journals are not implemented). Keep one."
        )
    ledgers = tuple(join(d, CURRENT_DIR) for d in config.ledger_directories)
    assert ledgers, "ServerConfig guarantees at least one ledger directory"
    return BookieLayout(
        journal_dir=join(journals[0], CURRENT_DIR),
        ledger_dirs=ledgers,
        index_dir=join(ledgers[0], INDEX_DIR_NAME),
    )


def with_index_in(layout: BookieLayout, ledger_dir: str) -> BookieLayout:
    """The layout with the index in ``ledger_dir`` (one of ``layout.ledger_dirs``, a
    ``current`` directory): where the identity stamps say it is."""
    assert ledger_dir in layout.ledger_dirs, (ledger_dir, layout.ledger_dirs)
    return attrs.evolve(layout, index_dir=join(ledger_dir, INDEX_DIR_NAME))


def ensure_durable_dir(fs: FileSystem, path: str) -> bool:
    """Create ``path`` and its missing parents, and fsync the parent of every directory made,
    so the layout survives a crash. Returns whether anything was created."""
    missing: list[str] = []
    probe = path
    while probe and not fs.is_dir(probe):
        missing.append(probe)
        up = parent(probe)
        if up == probe:
            break
        probe = up
    if not missing:
        return False
    fs.mkdir(path)
    for created in missing:
        fs.fsync_dir(parent(created) or ".")  # "" is the parent of a relative one-part path
    assert fs.is_dir(path), path
    return True


def sync_previous_run(fs: FileSystem, layout: BookieLayout) -> int:
    """Recovery step 0: fsync every file and directory of the bookie before trusting any.

    The previous process may have written bytes it never fsynced (it was killed, or a failed
    fsync made it stop), and a new process reads them back from the page cache exactly like
    durable bytes. Recovery relies on what it reads: replay skips a record whose entry the
    index already has and that reads back the same, and then moves lastMark past it. If those
    bytes were not durable, a power loss after recovery would lose an acknowledged entry that
    the journal no longer covers. PostgreSQL's crash recovery fsyncs its whole data directory
    for the same reason (SyncDataDirectory). Found by the refinement test (a restart after a
    failed shutdown, then a crash). Returns the number of files synced."""
    synced = 0
    for directory in layout.directories():
        if not fs.is_dir(directory):
            continue
        for name in sorted(fs.listdir(directory)):
            path = join(directory, name)
            if fs.is_dir(path):
                continue
            handle = fs.open(path, create=False, read_only=True)
            try:
                handle.fsync()
            finally:
                handle.close()
            synced += 1
        fs.fsync_dir(directory)
    return synced
