"""``bkref import``: copy a BookKeeper bookie into new, empty bkref directories and open it
there once, so that bkref never has to write into a directory BookKeeper owns.

Spec pages: spec/format/bk_index.md (what is carried over from BookKeeper's ledger metadata),
spec/format/journal.md and spec/format/entry_log.md (the files copied as they are).

Why a copy: opening a BookKeeper directory in place rewrites it (a new journal, a new
lastMark, bkref's own index), and a BookKeeper restarted there would skip what bkref
re-added. The source is only ever read: files are opened for reading, RocksDB databases are
copied to a private temporary directory before they are opened (rocksdict writes a file of its
own into every database it opens, read-only or not; spec/format/bk_index.md).

Steps: (1) check the target is empty and apart from the source; (2) copy every regular file
under each source directory's ``current/`` (journal, entry logs, lastId, lastMark, cookies,
``.idx`` files; symlinks, FIFOs and devices are reported, not copied), fsyncing each file and
directory; DbLedgerStorage's ``locations`` database is not copied (bkref rebuilds locations by
scanning the entry logs) and its ``ledgers`` database is read, not copied; (3) rebuild bkref's
index in the copy (impl/index/rebuild.py: entry logs, ``.idx`` keys and fences), give it the
keys and fences of the ``ledgers`` databases, and flush it; (4) open the bookie on the copy
once (journal replay from lastMark, a recovery checkpoint) and shut it down; (5) say on stderr
what was and was not carried over, and write ``<target>/bk_server.conf`` naming the new
directories.

Exit status: 0 when the bookie was copied and opened, 1 when it could not be (the message says
why; the target may then hold a partial copy: remove it and run again), 2 for bad arguments
or configuration.

Not verified here: a source bookie that is still running (stop it first: its files change
under the copy), several journal directories (refused), and BookKeeper's cookies (copied, not
checked).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from impl.config.config import ServerConfig, load_config
from impl.format import names
from impl.format.bk_index import decode_ledger_data
from impl.format.ledger_index import MASTER_KEY_MAX_BYTES
from impl.format.names import (
    CURRENT_DIR,
    DB_LEDGERS_DIR_NAME,
    DB_LOCATIONS_DIR_NAME,
    INDEX_DIR_NAME,
)
from impl.index.bk_metadata import BkIdxLedger, BkMetadata
from proofs.cli.config import read_conf_file
from spec.errors import BkIndexDamaged, BkrefError, ConfigError
from spec.ids import INT64_MAX, LedgerId

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_ARGS = 2
PREFIX = "bkref import: "
#: DbLedgerStorage's entry-location database: not copied, bkref rebuilds locations.
#: The configuration written into the target, naming the new directories.
TARGET_CONF_NAME = "bk_server.conf"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Copy a BookKeeper bookie (its journal and ledger directories) into new, empty bkref "
        "directories under TARGET, never changing the source; carry over its entries, and the "
        "master keys and fence flags of BookKeeper's ledger index (.idx files, or "
        "DbLedgerStorage's ledgers database with the optional rocksdict package); then open "
        "the copy once (journal replay, recovery checkpoint) and shut it down. Stderr says what "
        "was and was not carried over. Stop the BookKeeper bookie first."
    )
    parser.add_argument("target", metavar="TARGET", help="a new or empty directory")
    parser.add_argument(
        "--conf",
        metavar="FILE",
        help="the source bookie's bk_server.conf (journalDirectories, ledgerDirectories, "
        "indexDirectories are read from it)",
    )
    parser.add_argument("--journal-dir", metavar="DIR", help="the source journal directory")
    parser.add_argument(
        "--ledger-dirs",
        metavar="DIR[,DIR...]",
        help="the source ledger directories, in the source's configuration order",
    )
    parser.add_argument(
        "--index-dirs",
        metavar="DIR[,DIR...]",
        help="the source indexDirectories, when they differ from the ledger directories",
    )
    parser.add_argument(
        "--skip-db-metadata",
        action="store_true",
        help="go on without DbLedgerStorage's ledgers database when rocksdict is not "
        "installed (its ledgers then lose their master keys and fence flags)",
    )
    parser.epilog = (
        "Writes TARGET/journal, TARGET/ledgers0.. and TARGET/bk_server.conf (use it with "
        "`bkref adapter --conf`). Exit status: 0 done, 1 could not be done (remove TARGET and "
        "run again), 2 bad arguments or configuration."
    )


def say(line: str) -> None:
    print(PREFIX + line, file=sys.stderr, flush=True)


@attrs.frozen
class Source:
    """The source bookie's directories (the ones configured, not their ``current``)."""

    journal_dir: str
    ledger_dirs: tuple[str, ...]
    index_dirs: tuple[str, ...]


def source_from_args(args: argparse.Namespace) -> Source:
    """The source directories from ``--conf`` or ``--journal-dir``/``--ledger-dirs``.
    Raises ConfigError."""
    conf: str | None = args.conf
    index_dirs: tuple[str, ...] = ()
    if args.index_dirs:
        index_dirs = tuple(part for part in args.index_dirs.split(",") if part)
    if conf is not None:
        if args.journal_dir or args.ledger_dirs:
            raise ConfigError("give either --conf or --journal-dir and --ledger-dirs, not both")
        config = load_config(read_conf_file(conf), conf, [])
        journals = config.journal_directories
        ledgers = config.ledger_directories
        if not index_dirs:
            index_dirs = next(
                (ignored.items for ignored in config.ignored if ignored.key == "indexDirectories"),
                (),
            )
    else:
        if not args.journal_dir or not args.ledger_dirs:
            raise ConfigError("name the source: --conf FILE, or --journal-dir and --ledger-dirs")
        journals = (args.journal_dir,)
        ledgers = tuple(part for part in args.ledger_dirs.split(",") if part)
    if len(journals) != 1:
        raise ConfigError(
            f"the source has {len(journals)} journal directories: bkref supports exactly one"
        )
    if not ledgers:
        raise ConfigError("the source has no ledger directory")
    if index_dirs and len(index_dirs) != len(ledgers):
        raise ConfigError(
            f"{len(index_dirs)} index directories for {len(ledgers)} ledger directories: "
            "bkref pairs index directory i with ledger directory i"
        )
    return Source(journals[0], tuple(ledgers), tuple(index_dirs))


@attrs.define
class Report:
    """What the copy did, for the closing lines."""

    files: int = 0
    bytes: int = 0
    not_copied: list[tuple[str, str]] = attrs.Factory(list)
    db_ledgers: list[BkIdxLedger] = attrs.Factory(list)
    db_lacs: int = 0
    db_limbo: list[int] = attrs.Factory(list)
    db_not_read: list[str] = attrs.Factory(list)
    unrecognised: list[str] = attrs.Factory(list)
    #: (copy's current directory, source's current directory), to name source files.
    copied_from: list[tuple[str, str]] = attrs.Factory(list)

    def source_path(self, text: str) -> str:
        """``text`` with every path of the copy named by the source file it was copied from."""
        for copy, original in self.copied_from:
            text = text.replace(copy + "/", original + "/")
        return text


def _is_within(path: Path, other: Path) -> bool:
    return path == other or other in path.parents


def check_target(target: Path, source: Source) -> None:
    """The target must not exist or be an empty directory, and must not overlap the source."""
    if target.exists():
        if not target.is_dir():
            raise ConfigError(f"{target} exists and is not a directory: name a new directory")
        if any(target.iterdir()):
            raise ConfigError(
                f"{target} is not empty: bkref import writes only into a new or empty directory"
            )
    resolved = target.resolve()
    for directory in (source.journal_dir, *source.ledger_dirs, *source.index_dirs):
        other = Path(directory).resolve()
        if _is_within(resolved, other) or _is_within(other, resolved):
            raise ConfigError(f"{target} overlaps the source directory {directory}")
        if not (Path(directory) / CURRENT_DIR).is_dir():
            raise ConfigError(
                f"{directory} has no {CURRENT_DIR}/ directory: not a BookKeeper bookie directory"
            )


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dir(path: Path) -> None:
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    if created:
        _fsync_dir(path.parent)


def _walk(root: Path) -> Iterator[Path]:
    """Every entry under ``root``, parents before children, names in order; no symlink is
    followed."""
    for entry in sorted(root.iterdir()):
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry)


def recognised(relative: Path, journal: bool) -> bool:
    """Whether a file at ``relative`` under a ``current`` directory is one BookKeeper writes
    there (impl/format/names.py): journals and cookies in a journal directory; entry logs,
    compaction files, lastId, lastMark, cookies and ``.idx`` files in a ledger directory."""
    parts = relative.parts
    name = parts[-1]
    if len(parts) == 1 and name in (names.VERSION_FILE_NAME, names.INSTANCE_ID_FILE_NAME):
        return True
    if journal:
        return len(parts) == 1 and names.parse_journal_file_name(name) is not None
    if len(parts) == 3:
        parsed = names.parse_bk_index_file_name(name)
        return parsed is not None
    return len(parts) == 1 and (
        name in (names.LAST_ID_FILE_NAME, names.LAST_MARK_FILE_NAME)
        or names.parse_log_file_name(name) is not None
        or names.parse_compacting_file_name(name) is not None
        or names.parse_compacted_file_name(name) is not None
    )


def copy_current(
    src: Path, dst: Path, report: Report, *, skip: Sequence[str] = (), journal: bool = False
) -> None:
    """Copy the regular files under ``src`` (a ``current`` directory) to ``dst``, fsynced;
    top-level names in ``skip`` are left out (the caller reports them). Files BookKeeper
    does not write there are copied too, and reported."""
    _make_dir(dst)
    for entry in _walk(src):
        relative = entry.relative_to(src)
        if relative.parts[0] in skip:
            continue
        mode = entry.lstat().st_mode
        target = dst / relative
        if stat.S_ISDIR(mode):
            _make_dir(target)
        elif stat.S_ISREG(mode):
            with entry.open("rb") as reader, target.open("xb") as writer:
                shutil.copyfileobj(reader, writer, 1 << 20)
                writer.flush()
                os.fsync(writer.fileno())
            report.files += 1
            report.bytes += entry.lstat().st_size
            if not recognised(relative, journal):
                report.unrecognised.append(str(entry))
        else:
            kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
            report.not_copied.append((str(entry), kind))
    for entry in [dst, *(path for path in _walk(dst) if path.is_dir())]:
        _fsync_dir(entry)


def read_db_ledgers(db_dir: Path, report: Report) -> None:
    """The ledgers of one DbLedgerStorage ``ledgers`` database, read from a private copy
    (rocksdict writes into any database it opens). Raises ImportError without rocksdict,
    BkIndexDamaged for a value that is no LedgerData, BkrefError for a database that does
    not open."""
    from rocksdict import AccessType, Options, Rdict

    with tempfile.TemporaryDirectory(prefix="bkref-import-") as scratch:
        copy = Path(scratch) / DB_LEDGERS_DIR_NAME
        shutil.copytree(db_dir, copy, symlinks=True)
        try:
            db = Rdict(
                str(copy), options=Options(raw_mode=True), access_type=AccessType.read_only()
            )
        except Exception as exc:  # rocksdict raises plain Exception
            raise BkrefError(f"{db_dir}: cannot open the RocksDB database: {exc}") from exc
        try:
            for key, value in db.items():
                if not isinstance(key, bytes) or len(key) != 8:
                    raise BkIndexDamaged(
                        f"{db_dir} key {key!r}", 0, "a key that is not an 8-byte ledger id"
                    )
                where = f"{db_dir} key {key.hex()}"
                ledger_id = int.from_bytes(key, "big", signed=True)
                if not 0 <= ledger_id <= INT64_MAX or not isinstance(value, bytes):
                    raise BkIndexDamaged(where, 0, f"ledger id {ledger_id} is negative")
                data = decode_ledger_data(value, where)
                if not data.exists:
                    continue
                if len(data.master_key) > MASTER_KEY_MAX_BYTES:
                    raise BkrefError(
                        f"{where}: ledger {ledger_id}'s master key is {len(data.master_key)} "
                        f"bytes, more than bkref's index holds ({MASTER_KEY_MAX_BYTES}); "
                        "BookKeeper's own keys are 20-byte digests, so the database is damaged"
                    )
                report.db_lacs += data.explicit_lac is not None
                if data.limbo:
                    report.db_limbo.append(ledger_id)
                report.db_ledgers.append(
                    BkIdxLedger(LedgerId(ledger_id), where, data.master_key, data.fenced, data.lac)
                )
        finally:
            db.close()


def run(args: argparse.Namespace) -> int:
    try:
        source = source_from_args(args)
        target = Path(args.target)
        check_target(target, source)
    except ConfigError as exc:
        say(f"error: {exc}")
        return EXIT_BAD_ARGS
    try:
        return _import(source, target, args.skip_db_metadata)
    except BkrefError as exc:
        say(f"error: {exc}")
        say(f"the copy in {target} is incomplete: remove it, then run again")
        return EXIT_FAILED
    except OSError as exc:
        say(f"error: {exc}")
        say(f"the copy in {target} is incomplete: remove it, then run again")
        return EXIT_FAILED


def _import(source: Source, target: Path, skip_db_metadata: bool) -> int:
    report = Report()
    journal_dst = target / "journal"
    ledger_dsts = [target / f"ledgers{number}" for number in range(len(source.ledger_dirs))]
    _make_dir(target)
    say(f"copying the journal {source.journal_dir} to {journal_dst}")
    copy_current(
        Path(source.journal_dir) / CURRENT_DIR, journal_dst / CURRENT_DIR, report, journal=True
    )
    db_dirs: list[Path] = []
    for number, (src, dst) in enumerate(zip(source.ledger_dirs, ledger_dsts, strict=True)):
        say(f"copying the ledger directory {src} to {dst}")
        current = Path(src) / CURRENT_DIR
        skip = (DB_LEDGERS_DIR_NAME, DB_LOCATIONS_DIR_NAME, INDEX_DIR_NAME)
        _note_skipped(current, report)
        copy_current(current, dst / CURRENT_DIR, report, skip=skip)
        report.copied_from.append((str(dst / CURRENT_DIR), str(current)))
        index_current = current
        if source.index_dirs and Path(source.index_dirs[number]).resolve() != Path(src).resolve():
            index_current = Path(source.index_dirs[number]) / CURRENT_DIR
            say(f"copying the index directory {source.index_dirs[number]} into {dst}")
            _note_skipped(index_current, report)
            copy_current(index_current, dst / CURRENT_DIR, report, skip=skip)
            report.copied_from.append((str(dst / CURRENT_DIR), str(index_current)))
        if (index_current / DB_LEDGERS_DIR_NAME).is_dir():
            db_dirs.append(index_current / DB_LEDGERS_DIR_NAME)
    for db_dir in db_dirs:
        try:
            read_db_ledgers(db_dir, report)
        except ImportError:
            if not skip_db_metadata:
                say(
                    f"error: {db_dir} is DbLedgerStorage's ledgers database and reading it "
                    "needs rocksdict (pip install 'bkref[bookkeeper]'). Without it its ledgers "
                    "would take any master key and lose their fence flags; pass "
                    "--skip-db-metadata to import anyway"
                )
                return EXIT_FAILED
            report.db_not_read.append(str(db_dir))
    say(f"copied {report.files} files ({report.bytes} bytes)")
    config = load_config(
        None,
        "",
        [
            f"journalDirectories={journal_dst}",
            f"ledgerDirectories={','.join(str(path) for path in ledger_dsts)}",
        ],
    )
    _open_copy(config, report)
    conf_path = target / TARGET_CONF_NAME
    _write_conf(conf_path, journal_dst, ledger_dsts)
    _say_not_carried(report)
    say(f"done: open it with `bkref adapter --conf {conf_path}`")
    return EXIT_OK


def _write_conf(path: Path, journal: Path, ledgers: Sequence[Path]) -> None:
    text = (
        "# Written by bkref import: the directories of the imported bookie. Add the other\n"
        "# settings of the source bookie's configuration that you want bkref to use.\n"
        f"journalDirectories={journal}\n"
        f"ledgerDirectories={','.join(str(ledger) for ledger in ledgers)}\n"
    )
    with path.open("x", encoding="iso-8859-1") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    _fsync_dir(path.parent)


def _note_skipped(current: Path, report: Report) -> None:
    for name, why in (
        (
            DB_LOCATIONS_DIR_NAME,
            "DbLedgerStorage's locations database: not copied, bkref "
            "rebuilds the locations by scanning the entry logs",
        ),
        (
            DB_LEDGERS_DIR_NAME,
            "DbLedgerStorage's ledgers database: read (keys, fences), not copied",
        ),
        (INDEX_DIR_NAME, "an index of bkref's own in the source: not copied, rebuilt"),
    ):
        if (current / name).exists():
            report.not_copied.append((str(current / name), why))


def _open_copy(config: ServerConfig, report: Report) -> None:
    """Rebuild the index in the copy with every key and fence found, flush it, then open the
    bookie once (journal replay, recovery checkpoint) and shut it down."""
    from impl.bookie.bookie import Bookie
    from impl.bookie.layout import layout_from_config
    from impl.clock import SystemClock
    from impl.fs.os_backend import OsFileSystem
    from impl.index.ledger_index import LedgerIndex
    from impl.index.rebuild import apply_bk_metadata, rebuild_index

    fs = OsFileSystem()
    layout = layout_from_config(config)
    index = LedgerIndex.load(fs, layout.index_dir)
    try:
        stats = rebuild_index(fs, list(layout.ledger_dirs), index, _progress)
    except BkIndexDamaged as exc:
        raise BkrefError(
            "BookKeeper's ledger index file is damaged: " + report.source_path(str(exc))
        ) from exc
    db_keys, db_fences = apply_bk_metadata(BkMetadata(tuple(report.db_ledgers)), index)
    index.flush()  # the copy's files are fsynced: the locations it names are durable
    say(stats.summary())
    idx = stats.bk_metadata or BkMetadata()
    say(
        f"carried over: {stats.entries_indexed} entries from the entry logs; "
        f"{stats.bk_keys} master keys and {stats.bk_fences} fence flags from "
        f"{len(idx.ledgers)} .idx files; {db_keys} master keys and {db_fences} fence flags "
        f"from {len(report.db_ledgers)} ledgers of DbLedgerStorage's ledgers database"
    )
    for path, why in idx.torn:
        say(f"not carried over: {path}: {why}")
    for path, why in idx.ignored:
        say(f"not read: {path}: {why}")
    lacs = sum(1 for ledger in idx.ledgers if ledger.explicit_lac is not None) + report.db_lacs
    if lacs:
        say(f"not carried over: the explicit LAC of {lacs} ledgers (bkref keeps none)")
    bookie = Bookie.open(
        fs,
        config,
        clock=SystemClock(),
        rng=random.Random(0),
        progress=lambda line: say(f"recovery: {line}"),
        # The copy holds BookKeeper's files and no bkref stamp yet: writing there is what the
        # user asked for (the source is never opened; spec/format/identity.md).
        write_bookkeeper_dirs=True,
    )
    try:
        recovery = bookie.recovery
        say(
            f"opened the copy: {recovery.records_replayed} journal records replayed "
            f"({recovery.keys_set} keys, {recovery.fences_set} fences, "
            f"{recovery.entries_re_added} entries re-added)"
        )
    finally:
        bookie.shutdown()


def _progress(line: str) -> None:
    say(f"index: {line}")


def _say_not_carried(report: Report) -> None:
    for path, why in report.not_copied:
        say(f"not copied: {path}: {why}")
    for path in report.unrecognised:
        say(f"copied but not recognised (bkref does not use it): {path}")
    for ledger_id in report.db_limbo:
        say(
            f"not carried over: ledger {ledger_id} is in limbo in DbLedgerStorage (bkref has "
            "no limbo state): its data may be incomplete"
        )
    for path in report.db_not_read:
        say(
            f"not carried over: {path} was not read (--skip-db-metadata): its ledgers' master "
            "keys and fence flags are lost"
        )
