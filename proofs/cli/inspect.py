"""``bkref inspect PATH [--json]``: describe every file of a bookie's directory, or one file.

Spec pages: spec/format/entry_log.md, spec/format/journal.md, spec/format/ledger_index.md.
For operators and developers who want to know what is on a bookie's disk, BookKeeper's or
bkref's: every entry log (header, ledgers map or the scan and why, entries, a torn tail; a
0-byte log is the empty log BookKeeper preallocates), every journal (version, records, padding,
key, fence and explicit-LAC records, where a scan stops and why), lastMark and which one
recovery would use, lastId, BookKeeper's VERSION cookie, bkref's own index (``bkref-index/``),
BookKeeper's ``.idx`` index files and DbLedgerStorage's RocksDB directories (named, not read),
compaction leftovers with what recovery will do with each (impl/entrylog/compactor.py's own
well-formedness check; spec/protocol/compaction.md), and anything else as an unknown file with
its size.

Why it reads through the engine's own code (impl/entrylog/reader.py, impl/journal/replay.py,
impl/journal/last_mark.py, impl/index/ledger_index.py) rather than parsers of its own: what it
reports is then what bkref's recovery (and BookKeeper, per the pages) would make of the same
bytes. That code takes a FileSystem; inspect hands it :class:`ReadOnlyFs`, which opens files
read-only, refuses every write, turns fsyncs into no-ops and opens nothing but regular files,
so inspect never changes a bookie and never hangs on a FIFO or a device named like a bookie
file (every name is ``lstat``-ed before anything opens it; symbolic links inside a directory
are described, never followed).

It refuses (exit 2, one line on stderr) a path that holds nothing a bookie writes: ``/``, a
home directory, an empty directory, a file whose name no bookie uses. The JSON output is
documented key by key in docs/inspect.md.

Not verified: that nothing writes the files while they are read (inspect a stopped bookie, or
expect the active log and journal to show a torn tail); what BookKeeper's ``.idx`` files and
RocksDB directories hold (named and sized only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
import textwrap
from collections.abc import Sequence

import attrs

from impl.bookie.identity import damaged_stamp_message
from impl.bookie.recovery import index_coverage_damage, indexed_log_damage
from impl.entrylog.compactor import malformed_compaction_log, malformed_leftover_damage
from impl.entrylog.reader import (
    MetadataResult,
    ScanResult,
    extract_metadata,
    peek_header,
    read_header,
    scan,
)
from impl.format.entry_log import LOGFILE_HEADER_SIZE, MAGIC, MAX_LOG_ID, Header
from impl.format.identity import MAX_STAMP_BYTES, StampFormatError, decode_stamp
from impl.format.ledger_index import (
    SEGMENT_KIND_FULL,
    DeletedFileDamage,
    decode_deleted_file,
    decode_segment,
)
from impl.format.names import (
    COMPACTED_SUFFIX,
    COMPACTING_SUFFIX,
    COVERAGE_FILE_NAME,
    CURRENT_DIR,
    DB_LEDGERS_DIR_NAME,
    DB_LOCATIONS_DIR_NAME,
    DELETED_FILE_NAME,
    IDENTITY_FILE_NAME,
    INDEX_DIR_NAME,
    INSTANCE_ID_FILE_NAME,
    JOURNAL_FILE_SUFFIX,
    LAST_ID_FILE_NAME,
    LAST_MARK_FILE_NAME,
    RESERVE_FILE_NAME,
    VERSION_FILE_NAME,
    is_bk_index_dir_name,
    log_file_name,
    log_id_prefix,
    parse_bk_index_file_name,
    parse_compacted_file_name,
    parse_compacting_file_name,
    parse_journal_file_name,
    parse_log_file_name,
    parse_segment_file_name,
)
from impl.fs.api import FileHandle, FileSystem, join, split
from impl.fs.os_backend import OsFileSystem
from impl.index.bk_metadata import describe_idx_file
from impl.index.ledger_index import LedgerIndex
from impl.journal.last_mark import IndexCoverage
from proofs.cli.inspect_fs import (
    ReadOnlyFs,
    file_type,
    not_regular,
    read_small,
)
from proofs.cli.inspect_journal import (
    MarkContext,
    coverage_problem,
    describe_coverage,
    describe_journal,
    describe_last_mark,
    journal_summary,
    mark_context,
    other_mark_problems,
    replay_plan,
    replay_text,
)
from spec.errors import BkrefError
from spec.ids import EntryLogId

#: Every file described; warnings (torn tails, padding, unknown files) may have been printed.
EXIT_OK = 0
#: A bookie file is damaged or unreadable: an entry log that is not one, a journal with an
#: invalid record, a lastMark or cookie that cannot be parsed, a damaged index.
EXIT_NOT_AN_ENTRY_LOG = 1
EXIT_DAMAGED = EXIT_NOT_AN_ENTRY_LOG
#: Bad command-line usage (argparse exits with it), or PATH is missing or not part of a bookie.
EXIT_USAGE = 2
EXIT_REFUSED = EXIT_USAGE
#: A log's ledgers map disagrees with what a scan of the log finds.
EXIT_INCONSISTENT = 3

#: Print progress on stderr when a directory holds at least this many logs.
PROGRESS_MIN_LOGS = 20
#: The text report lists at most this many ledgers per log (--json lists all).
TEXT_LEDGERS_MAX = 40
#: The text report lists at most this many journal records per journal (--json lists all).
TEXT_RECORDS_MAX = 20
#: The text report folds long lines at this many columns.
TEXT_WIDTH = 100

EPILOG = f"""\
PATH is a bookie's journal directory, a ledger directory, their current/ sub-directory,
bkref's index directory (current/bkref-index), or one file of them (an entry log <hex>.log,
a journal <hex>.txn, lastMark, lastId, VERSION, a compaction leftover, an index segment).
Every file is described: entry logs (a 0-byte log is the empty one BookKeeper preallocates),
journals (records, padding, key / fence / explicit-LAC records, where a scan stops and why),
lastMark and where replay would start, lastId, the VERSION cookie, bkref's index, BookKeeper's
.idx files and RocksDB directories (named, not read), compaction leftovers, unknown files.
Nothing is ever written; FIFOs, sockets and devices are never opened; symbolic links are
described, not followed.

A torn tail (bytes after the last whole record of an entry log or journal, left by a crash or
by a file still being written) is a warning, not an error: the scan stops there and every
record before it is intact. The JSON output (--json) is documented in docs/inspect.md.

exit codes:
  {EXIT_OK}  every file was described; warnings (torn tail, padding, unknown files) may have
     been printed
  {EXIT_DAMAGED}  a bookie file is damaged or unreadable (an entry log that is not one, a
     journal with an invalid record, a bad lastMark or cookie, a damaged index)
  {EXIT_REFUSED}  bad command-line usage, or PATH is missing or holds nothing a bookie writes
  {EXIT_INCONSISTENT}  a log's ledgers map disagrees with a scan of the same log
"""

_HEX_ID = re.compile(r"[0-9a-fA-F]+")
_LAST_MARK_NAME = re.compile(re.escape(LAST_MARK_FILE_NAME) + r"(?:\.(\d+))?")
#: DbLedgerStorage's RocksDB directories under current/.
ROCKSDB_DIRS = {
    DB_LEDGERS_DIR_NAME: "DbLedgerStorage's ledgers index (master keys, fence flags, explicit LAC)",
    DB_LOCATIONS_DIR_NAME: "DbLedgerStorage's entry location index",
}


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``bkref inspect``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "path",
        metavar="PATH",
        help="a journal or ledger directory (or its current/), or one file of a bookie",
    )
    parser.add_argument(
        "--ledger-dir",
        metavar="DIR",
        action="append",
        default=[],
        help=(
            "a ledger directory whose lastMark also counts when telling where journal replay "
            "would start (repeat it for each; BookKeeper uses the largest mark)"
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Inspect ``args.path``; print the report; return the exit code (see EPILOG)."""
    path: str = args.path
    as_json: bool = args.json
    refusal = _refusal(path)
    if refusal is None and os.path.isdir(path):
        report = inspect_dir(OsFileSystem(), path, extra_ledger_dirs=tuple(args.ledger_dir))
        if not report.is_bookie_dir:
            refusal = (
                f"{path} holds nothing a bookie writes (no entry log, journal, lastMark, lastId, "
                "VERSION cookie or index, in it or in its current/): not a journal or ledger "
                "directory. Give a bookie's journal or ledger directory, or one of its files"
            )
        else:
            text = json.dumps(dir_json(report)) if as_json else format_dir(report)
            return _emit(text, report.exit_code)
    elif refusal is None:
        described = describe_file(OsFileSystem(), path)
        if described is not None:
            obj, text, code = described
            return _emit(json.dumps(obj) if as_json else text, code)
        refusal = (
            f"{split(path)[1]!r} is not the name of a file a bookie writes (entry log <hex>.log, "
            "journal <hex>.txn, lastMark, lastId, VERSION, compaction leftovers, index "
            "segments): not inspected. Give a bookie's directory or one of its files"
        )
    assert refusal is not None
    print(f"bkref inspect: {refusal}", file=sys.stderr)
    if as_json:
        _emit(json.dumps({"path": path, "error": refusal}), EXIT_REFUSED)
    return EXIT_REFUSED


def _refusal(path: str) -> str | None:
    """Why ``path`` cannot be inspected at all, or None. Follows a symbolic link given as
    PATH (the operator named it); a loop is refused, not followed."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return f"{path}: no such file or directory"
    except OSError as exc:
        return f"{path}: cannot be examined: {exc.strerror or exc}"
    except ValueError as exc:  # a NUL byte in the path
        return f"{path!r}: not a usable path: {exc}"
    return None


def _emit(text: str, code: int) -> int:
    """Print the report and return ``code``. A closed pipe or an unwritable standard output
    is proofs/cli/main.py's business (GuardedStdout), the same for every command: quiet with
    the command's own status, or one line on stderr and exit 1."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return code


# --- one log --------------------------------------------------------------------------------


@attrs.frozen
class LogReport:
    """What inspect found in one file. ``error`` is set when it is not a readable entry log."""

    path: str
    name: str
    log_id: int | None
    size_bytes: int | None
    header: Header | None
    error: str | None
    metadata: MetadataResult | None = None
    scan: ScanResult | None = None

    @property
    def map_matches_scan(self) -> bool | None:
        """Whether a trusted map equals the scan (spec/properties.md, 7); None without a map."""
        if self.metadata is None or self.scan is None or self.metadata.source != "map":
            return None
        return dict(self.metadata.metadata.ledgers) == self.scan.ledgers()

    @property
    def empty(self) -> bool:
        """A 0-byte log: BookKeeper's preallocated next log, which its scan reads as empty."""
        return self.error is None and self.size_bytes == 0

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return EXIT_NOT_AN_ENTRY_LOG
        if self.map_matches_scan is False:
            return EXIT_INCONSISTENT
        return EXIT_OK


def inspect_log(fs: FileSystem, path: str) -> LogReport:
    """Read one file as an entry log; never raises for what the file holds, never opens
    anything but a regular file. A 0-byte log is the empty log BookKeeper preallocates (it
    scans it as empty): no error."""
    name = split(path)[1]
    log_id = log_id_prefix(name)
    bare = LogReport(path=path, name=name, log_id=log_id, size_bytes=None, header=None, error=None)
    if log_id is None:
        reason = f"the name {name!r} does not begin with a hex log id: not an entry log name"
        return attrs.evolve(bare, error=reason)
    if log_id > MAX_LOG_ID:
        return attrs.evolve(bare, error=f"log id {log_id:#x} is larger than a Java int")
    unreadable = not_regular(path)
    if unreadable is not None:
        return attrs.evolve(bare, error=unreadable)
    try:
        handle = fs.open(path, read_only=True)
    except BkrefError as exc:
        return attrs.evolve(bare, error=f"cannot open: {exc}")
    try:
        if handle.size() == 0:
            return attrs.evolve(bare, size_bytes=0)
        return _read_log(bare, handle, EntryLogId(log_id))
    except BkrefError as exc:
        return attrs.evolve(bare, error=f"cannot read: {exc}")
    finally:
        handle.close()


def _read_log(bare: LogReport, src: FileHandle, log_id: EntryLogId) -> LogReport:
    report = bare
    try:
        report = attrs.evolve(report, size_bytes=src.size(), header=peek_header(src))
        read_header(src, log_id)
        metadata = extract_metadata(src, log_id)
        scanned = metadata.scan if metadata.scan is not None else scan(src, log_id)
    except BkrefError as exc:
        return attrs.evolve(report, error=str(exc))
    return attrs.evolve(report, metadata=metadata, scan=scanned)


def log_warnings(log: LogReport) -> list[str]:
    """The things in a readable log an operator should know about."""
    assert log.scan is not None and log.header is not None and log.size_bytes is not None
    out: list[str] = []
    if log.size_bytes < LOGFILE_HEADER_SIZE:
        out.append(f"the file is shorter than the {LOGFILE_HEADER_SIZE}-byte header (torn)")
    if log.header.version not in (0, 1):
        out.append(f"unknown header version {log.header.version}")
    if log.scan.torn_tail_bytes:
        out.append(
            f"torn tail: {log.scan.torn_tail_bytes} bytes after offset {log.scan.end_offset} "
            "do not form a whole record; BookKeeper's scan stops there, entries before it are "
            "intact"
        )
    if log.scan.padding_bytes:
        out.append(f"{log.scan.padding_bytes} bytes of padding (size <= 0) skipped")
    if log.scan.undersized_records:
        count = len(log.scan.undersized_records)
        out.append(f"{count} records shorter than 16 bytes (BookKeeper counts them anyway)")
    if log.scan.skipped_records:
        out.append(f"{log.scan.skipped_records} records of negative ledger ids skipped")
    if log.map_matches_scan is False:
        out.append("the ledgers map disagrees with a scan of the log: the log is corrupt")
    return out


def _magic_text(header: Header | None) -> str | None:
    if header is None:
        return None
    return header.magic.decode("ascii", "backslashreplace")


def log_json(log: LogReport) -> dict[str, object]:
    """The JSON object of one log: the keys of the brief first, extra keys after
    (docs/inspect.md, "entry log object")."""
    if log.empty:
        return _empty_json(log)
    if log.error is not None or log.scan is None or log.metadata is None:
        return _error_json(log)
    assert log.header is not None
    return {
        "log_id": log.log_id,
        "version": log.header.version,
        "ledgers_map": {str(k): v for k, v in log.metadata.metadata.ledgers.items()},
        "ledgers_map_source": log.metadata.source,
        "entries": [
            {"ledger": r.ledger_id, "entry": r.entry_id, "offset": r.offset, "size": r.size}
            for r in log.scan.records
        ],
        "torn_tail_bytes": log.scan.torn_tail_bytes,
        "fallback_reason": log.metadata.fallback_reason,
        "name": log.name,
        "path": log.path,
        "size_bytes": log.size_bytes,
        "magic": _magic_text(log.header),
        "ledgers_map_offset": log.header.ledgers_map_offset,
        "ledgers_count": log.header.ledgers_count,
        "map_matches_scan": log.map_matches_scan,
        "scan_end_offset": log.scan.end_offset,
        "map_records": log.scan.map_records,
        "padding_bytes": log.scan.padding_bytes,
        "undersized_records": len(log.scan.undersized_records),
        "skipped_records": log.scan.skipped_records,
        "warnings": log_warnings(log),
        "empty": False,
    }


#: What inspect says of a 0-byte entry log.
EMPTY_LOG_NOTE = (
    "0 bytes: the empty log BookKeeper preallocates as the next log (it leaves one after "
    "every clean close); its scan reads it as holding nothing"
)


def _empty_json(log: LogReport) -> dict[str, object]:
    return {
        "log_id": log.log_id,
        "version": None,
        "ledgers_map": {},
        "ledgers_map_source": "empty",
        "entries": [],
        "torn_tail_bytes": 0,
        "fallback_reason": None,
        "name": log.name,
        "path": log.path,
        "size_bytes": 0,
        "magic": None,
        "ledgers_map_offset": None,
        "ledgers_count": None,
        "map_matches_scan": None,
        "scan_end_offset": 0,
        "map_records": 0,
        "padding_bytes": 0,
        "undersized_records": 0,
        "skipped_records": 0,
        "warnings": [],
        "empty": True,
    }


def _error_json(log: LogReport) -> dict[str, object]:
    header = log.header
    return {
        "log_id": log.log_id,
        "error": log.error,
        "name": log.name,
        "path": log.path,
        "size_bytes": log.size_bytes,
        "magic": _magic_text(header),
        "version": None if header is None else header.version,
    }


def format_log(log: LogReport) -> str:
    """The human report of one log: short, aligned, warnings last."""
    lines = [f"{log.name}  ({log.path})"]
    if log.log_id is not None:
        lines.append(f"  log id        {log.log_id} ({log.log_id:#x})")
    if log.size_bytes is not None:
        lines.append(f"  size          {log.size_bytes} bytes")
    if log.header is not None:
        lines.append(f"  header        {_header_text(log.header)}")
    if log.empty:
        lines.append(_wrapped("  note          ", EMPTY_LOG_NOTE))
        return "\n".join(lines)
    if log.error is not None or log.metadata is None or log.scan is None:
        lines.append(_wrapped("  error         ", str(log.error)))
        return "\n".join(lines)
    meta = log.metadata
    if meta.source == "map":
        count, total = len(meta.metadata.ledgers), meta.metadata.total_bytes
        source = f"from the ledgers map ({_plural(count, 'ledger')}, {total} bytes)"
    else:
        source = f"from a scan, because {meta.fallback_reason}"
    lines.append(_wrapped("  metadata      ", source))
    lines.append(
        f"  scan          {_plural(len(log.scan.records), 'entry', 'entries')}, "
        f"{_plural(log.scan.map_records, 'map record')}, ends at {log.scan.end_offset}"
    )
    lines.extend(_ledger_table(log))
    lines.extend(_wrapped("  warning: ", w) for w in log_warnings(log))
    return "\n".join(lines)


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _wrapped(lead: str, text: str) -> str:
    """``lead`` + ``text`` folded to TEXT_WIDTH columns, continuation lines indented."""
    return textwrap.fill(
        text, width=TEXT_WIDTH, initial_indent=lead, subsequent_indent=" " * len(lead)
    )


def _header_text(header: Header) -> str:
    magic = _magic_text(header)
    note = "" if header.magic == MAGIC else " (not BKLO)"
    return (
        f"magic {magic}{note}, version {header.version}, "
        f"map offset {header.ledgers_map_offset}, ledgers {header.ledgers_count}"
    )


def _ledger_table(log: LogReport) -> list[str]:
    assert log.metadata is not None and log.scan is not None
    entries: dict[int, int] = {}
    for rec in log.scan.records:
        entries[rec.ledger_id] = entries.get(rec.ledger_id, 0) + 1
    ledgers = dict(log.metadata.metadata.ledgers)
    ids = sorted(set(ledgers) | set(entries))
    rows = [("ledger", "entries", "bytes")]
    rows += [(str(i), str(entries.get(i, 0)), str(ledgers.get(i, "-"))) for i in ids]
    shown = rows[: TEXT_LEDGERS_MAX + 1]
    lines = ["  " + line for line in _aligned(shown, "lrr")]
    if len(rows) > len(shown):
        lines.append(f"  ... {len(rows) - len(shown)} more ledgers (--json lists all)")
    return lines


def _aligned(rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """Rows as text; ``align`` has one letter per column, ``l`` or ``r``."""
    assert all(len(row) == len(align) for row in rows), (rows, align)
    widths = [max(len(row[i]) for row in rows) for i in range(len(align))]
    out = []
    for row in rows:
        cells = [
            cell.ljust(width) if how == "l" else cell.rjust(width)
            for cell, width, how in zip(row, widths, align, strict=True)
        ]
        out.append("  ".join(cells).rstrip())
    return out


# --- one file of each kind ------------------------------------------------------------------


@attrs.frozen
class Item:
    """One name inspect found: what it is, in one line, and what is wrong with it."""

    name: str
    path: str
    type: str
    size_bytes: int | None
    kind: str
    description: str
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": self.path,
            "type": self.type,
            "size_bytes": self.size_bytes,
            "kind": self.kind,
            "description": self.description,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
        }


def describe_last_id(fs: FileSystem, path: str) -> dict[str, object]:
    """lastId as BookKeeper reads it: hex on the first line; <= 0 or junk count as absent."""
    out: dict[str, object] = {"name": split(path)[1], "path": path, "text": None, "value": None}
    try:
        text = read_small(fs, path, 256).decode("utf-8", "backslashreplace")
    except BkrefError:
        return out
    out["text"] = text
    line = text.split("\n", 1)[0]
    if _HEX_ID.fullmatch(line) and int(line, 16) > 0:
        out["value"] = int(line, 16)
    return out


_COOKIE_FIELDS = {
    "bookieHost": "bookie_host",
    "journalDir": "journal_dirs",
    "ledgerDirs": "ledger_dirs",
    "instanceId": "instance_id",
    "indexDirs": "index_dirs",
}


def describe_cookie(fs: FileSystem, path: str) -> dict[str, object]:
    """BookKeeper's VERSION cookie (Cookie.java): a layout version on the first line; from
    layout 4 on, protobuf text format of CookieFormat (bookieHost, journalDir, ledgerDirs,
    instanceId, indexDirs); layout 3, three plain lines. Directory lists are
    ``<count>\\t<dir>\\t<dir>...`` for ledger and index directories, comma-separated for
    journal directories."""
    out: dict[str, object] = {
        "name": split(path)[1],
        "path": path,
        "layout_version": None,
        "bookie_host": None,
        "journal_dirs": None,
        "ledger_dirs": None,
        "index_dirs": None,
        "instance_id": None,
        "error": None,
    }
    try:
        text = read_small(fs, path).decode("utf-8")
    except (BkrefError, UnicodeDecodeError) as exc:
        out["error"] = f"cannot read the cookie: {exc}"
        return out
    lines = text.splitlines()
    if not lines or not lines[0].strip().isdigit():
        first = lines[0] if lines else ""
        out["error"] = f"the first line {first!r} is not a layout version: not a cookie"
        return out
    layout = int(lines[0].strip())
    out["layout_version"] = layout
    raw: dict[str, str] = {}
    if layout == 3 and len(lines) >= 4:
        raw = {"bookieHost": lines[1], "journalDir": lines[2], "ledgerDirs": lines[3]}
    elif layout >= 4:
        for line in lines[1:]:
            match = re.fullmatch(r'\s*(\w+)\s*:\s*"(.*)"\s*', line)
            if match is None:
                if line.strip():
                    out["error"] = f"cannot parse the cookie line {line!r}"
                    return out
                continue
            raw[match.group(1)] = _unescape(match.group(2))
    else:
        out["error"] = f"layout version {layout}: BookKeeper reads cookies of layout 3 and later"
        return out
    for key, field in _COOKIE_FIELDS.items():
        if key in raw:
            out[field] = raw[key]
    for field in ("ledger_dirs", "index_dirs"):
        value = out[field]
        if isinstance(value, str):
            out[field] = value.split("\t")[1:] if "\t" in value else [value]
    if isinstance(out["journal_dirs"], str):
        out["journal_dirs"] = out["journal_dirs"].split(",")
    missing = [k for k in ("bookieHost", "journalDir", "ledgerDirs") if k not in raw]
    if missing:
        out["error"] = f"the cookie lacks {', '.join(missing)}"
    return out


def _unescape(text: str) -> str:
    """A protobuf text-format string body (C escapes) as text."""
    try:
        return text.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return text


def describe_index(fs: FileSystem, path: str) -> dict[str, object]:
    """bkref's own index (spec/format/ledger_index.md), loaded by the engine's code
    (LedgerIndex.load) through ReadOnlyFs, and each file decoded on its own."""
    return load_index(fs, path)[0]


def load_index(fs: FileSystem, path: str) -> tuple[dict[str, object], LedgerIndex | None]:
    """``describe_index``'s object and the index loaded (None when it does not load)."""
    out: dict[str, object] = {
        "path": path,
        "segments": [],
        "chain": [],
        "ledgers": 0,
        "entries": 0,
        "keyed_ledgers": 0,
        "fenced_ledgers": [],
        "deleted_ledgers": [],
        "deleted_torn_bytes": 0,
        "other_files": [],
        "error": None,
    }
    ro = ReadOnlyFs(fs)
    segments: list[dict[str, object]] = []
    other: list[str] = []
    try:
        names = ro.listdir(path)
    except BkrefError as exc:
        out["error"] = str(exc)
        return out, None
    for name in names:
        seq = parse_segment_file_name(name)
        full = join(path, name)
        if name == DELETED_FILE_NAME:
            deleted = describe_deleted(fs, full)
            if deleted["error"] is not None:
                out["error"] = deleted["error"]
            else:
                out["deleted_torn_bytes"] = deleted["torn_bytes"]
            continue
        if seq is None:
            other.append(name)
            continue
        segments.append(_describe_segment(ro, full, seq))
    out["segments"], out["other_files"] = segments, other
    try:
        index = LedgerIndex.load(ro, path)
    except BkrefError as exc:
        out["error"] = out["error"] or str(exc)
        return out, None
    ledgers = index.ledgers()
    out["chain"] = index.segment_seqs()
    out["ledgers"] = len(ledgers)
    out["entries"] = sum(len(index.entries(ledger)) for ledger in ledgers)
    out["keyed_ledgers"] = sum(index.master_key(ledger) is not None for ledger in ledgers)
    out["fenced_ledgers"] = [ledger for ledger in ledgers if index.is_fenced(ledger)]
    out["deleted_ledgers"] = sorted(index.deleted_ledgers())
    return out, index


def describe_deleted(fs: FileSystem, path: str) -> dict[str, object]:
    """bkref's deleted-ledgers file (spec/format/ledger_index.md), decoded by the codec the
    index load uses (``decode_deleted_file``): its ledgers, and the torn last record a crash
    may leave (rows d6; d3 to d7 are damage)."""
    out: dict[str, object] = {
        "name": split(path)[1],
        "path": path,
        "size_bytes": None,
        "records": None,
        "deleted_ledgers": None,
        "torn_bytes": None,
        "error": None,
    }
    try:
        data = read_small(fs, path, 1 << 62)
    except BkrefError as exc:
        out["error"] = f"{path}: {exc}"
        return out
    out["size_bytes"] = len(data)
    decoded = decode_deleted_file(data)
    if isinstance(decoded, DeletedFileDamage):
        out["error"] = f"{path}: offset {decoded.offset}: {decoded.problem}"
        return out
    ledgers, good = decoded
    out.update(records=len(ledgers), deleted_ledgers=sorted(ledgers), torn_bytes=len(data) - good)
    return out


def _describe_segment(fs: FileSystem, path: str, seq: int) -> dict[str, object]:
    out: dict[str, object] = {
        "name": split(path)[1],
        "seq": seq,
        "kind": None,
        "size_bytes": None,
        "ledgers": None,
        "entries": None,
        "error": None,
    }
    try:
        handle = fs.open(path, read_only=True)
        try:
            data = handle.pread(0, handle.size())
        finally:
            handle.close()
    except BkrefError as exc:
        out["error"] = str(exc)
        return out
    out["size_bytes"] = len(data)
    segment = decode_segment(data)
    if isinstance(segment, str):
        out["error"] = segment
        return out
    out["kind"] = "full" if segment.kind == SEGMENT_KIND_FULL else "delta"
    out["ledgers"], out["entries"] = len(segment.blocks), segment.entry_count
    if segment.seq != seq:
        out["error"] = f"its header says sequence {segment.seq:016x}"
    return out


#: What inspect says of a BookKeeper ``.idx`` file until its reader is wired in.
BK_INDEX_DESCRIPTION = "BookKeeper ledger index file"


def _idx_ledger(name: str) -> int | None:
    """The ledger of an ``<hex id>.idx`` name (impl/format/names.py), None for any other
    name (a ``.rloc`` copy included)."""
    parsed = parse_bk_index_file_name(name)
    return parsed[0] if parsed is not None and not parsed[1] else None


def _describe_bk_index(path: str) -> dict[str, object]:
    """A BookKeeper ledger index file (InterleavedLedgerStorage,
    ``current/<hex (id >> 8) & 0xff>/<hex id & 0xff>/<hex id>.idx``): its ledger id from the
    name, its size, whether it sits where IndexPersistenceMgr.getLedgerName puts it, and its
    header and positions as impl/format/bk_index.py reads them (spec/format/bk_index.md).
    A torn header is a warning (a crash can leave one); a damaged one is a problem."""
    head, name = split(path)
    ledger_id = _idx_ledger(name)
    try:
        size: int | None = os.lstat(path).st_size
    except OSError:
        size = None
    out: dict[str, object] = {
        "name": name,
        "path": path,
        "ledger_id": ledger_id,
        "size_bytes": size,
        "description": BK_INDEX_DESCRIPTION,
        "warnings": [],
    }
    if ledger_id is not None:
        grand, parent_dir = split(head)[0], split(head)[1]
        expected = (f"{(ledger_id >> 8) & 0xFF:x}", f"{ledger_id & 0xFF:x}")
        if (split(grand)[1], parent_dir) != expected:
            out["warnings"] = [
                f"BookKeeper keeps ledger {ledger_id}'s index in {expected[0]}/{expected[1]}/, "
                "not here: it would not find this file"
            ]
    out["contents"] = _bk_index_contents(path)
    return out


def _bk_index_line(described: dict[str, object]) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """One ``.idx`` file's line, problems and warnings: a damaged header is a problem, a torn
    one (a crash can leave it: spec/format/bk_index.md) a warning."""
    contents = described["contents"]
    assert isinstance(contents, dict)
    warnings = tuple(map(str, _as_list(described["warnings"])))
    text = f"{BK_INDEX_DESCRIPTION}, ledger {described['ledger_id']}"
    error = contents["error"]
    if error is not None:
        if contents["torn"]:
            return f"{text}, torn header", (), (*warnings, str(error))
        return f"{text}, damaged header", (str(error),), warnings
    fenced = "fenced" if contents["fenced"] else "not fenced"
    lac = contents["explicit_lac"]
    text += (
        f": master key of {contents['master_key_bytes']} bytes, {fenced}, "
        f"{contents['positions']} entry positions"
        + ("" if lac is None else f", explicit LAC {lac}")
    )
    return text, (), warnings


#: The keys of a ``bk_index_file``'s ``contents`` (docs/inspect.md), always all present.
BK_INDEX_CONTENT_KEYS = (
    "header_version",
    "master_key_bytes",
    "fenced",
    "state_bits",
    "explicit_lac",
    "positions",
    "last_entry",
    "tail_bytes",
    "header_slack_nonzero",
    "error",
    "torn",
)


def _bk_index_contents(path: str) -> dict[str, object]:
    """The decoded header and positions of one ``.idx`` file, read by the engine's reader
    (impl/index/bk_metadata.py, describe_idx_file; never raises): every key of
    :data:`BK_INDEX_CONTENT_KEYS`, None where it does not apply."""
    out: dict[str, object] = dict.fromkeys(BK_INDEX_CONTENT_KEYS)
    try:
        summary = describe_idx_file(ReadOnlyFs(OsFileSystem()), path)
    except BkrefError as exc:
        out["error"] = f"cannot read {path}: {exc}"
        out["torn"] = False
        return out
    for key in BK_INDEX_CONTENT_KEYS:
        out[key] = summary.get(key)
    if out["error"] is None:
        out["torn"] = None
    return out


RESERVE_NOTE = (
    "bkref's reserve: zeros the bookie frees when its own data fills the disk, for the "
    "writes that bring it back (spec/format/identity.md, A full disk)"
)
COMPACTING_NOTE = (
    "a compaction log that was still being written when the bookie stopped (its entries are "
    "still in the source log). Recovery removes it, bkref's as BookKeeper's "
    "(spec/protocol/compaction.md)"
)
COMPACTED_NOTE = (
    "a flushed compaction log of log {src}.log whose index update may not have finished. "
    "Recovery finishes it, bkref's as BookKeeper's (spec/protocol/compaction.md): {steps}"
)
COMPACTED_MALFORMED_NOTE = (
    "a compaction log of log {src}.log that is not well formed ({why}). {what}"
)


TMP_NOTE = (
    "a file bkref writes under this name and renames into place once durable; left by a "
    "write cut short. bkref never reads it and removes it on a later write"
)


# --- a directory ----------------------------------------------------------------------------

#: Kinds that show a directory is part of a bookie.
BOOKIE_KINDS = frozenset(
    {
        "entry_log",
        "journal",
        "last_mark",
        "last_id",
        "identity",
        "coverage",
        "reserve",
        "cookie",
        "instance_id",
        "bkref_index",
        "bk_index_file",
        "rocksdb",
        "compacting_log",
        "compacted_log",
    }
)
#: Kinds whose files inspect reads: anything else than a regular file there is a problem.
_READ_KINDS = frozenset(BOOKIE_KINDS - {"bkref_index", "rocksdb", "bk_index_file"})


@attrs.define
class DirReport:
    """What inspect found in a bookie directory: every name, and each kind's details."""

    given_path: str
    path: str
    items: list[Item] = attrs.Factory(list)
    logs: list[LogReport] = attrs.Factory(list)
    journals: list[dict[str, object]] = attrs.Factory(list)
    last_marks: list[dict[str, object]] = attrs.Factory(list)
    last_id: dict[str, object] | None = None
    cookies: list[dict[str, object]] = attrs.Factory(list)
    instance_ids: list[dict[str, object]] = attrs.Factory(list)
    index: dict[str, object] | None = None
    bk_index_files: list[dict[str, object]] = attrs.Factory(list)
    rocksdb_dirs: list[dict[str, object]] = attrs.Factory(list)
    compaction_leftovers: list[dict[str, object]] = attrs.Factory(list)
    replay: dict[str, object] | None = None
    #: Problems of the directory as a whole (a lastMark a crash cannot leave, replay failing).
    dir_problems: list[str] = attrs.Factory(list)
    error: str | None = None
    #: Journals found by the walk, described once lastMark is known: (rel, path, item).
    pending_journals: list[tuple[str, str, Item]] = attrs.Factory(list)
    #: The index loaded from ``bkref-index/``, for the checks a start makes against it.
    loaded_index: LedgerIndex | None = None
    #: The identity stamp of this directory, when it reads.
    identity: dict[str, object] | None = None

    @property
    def is_bookie_dir(self) -> bool:
        """Holds at least one thing a bookie writes."""
        return any(item.kind in BOOKIE_KINDS for item in self.items)

    @property
    def problems(self) -> list[str]:
        out = [f"{item.name}: {p}" for item in self.items for p in item.problems]
        out += self.dir_problems
        if self.error is not None:
            out.insert(0, self.error)
        return out

    @property
    def warnings(self) -> list[str]:
        return [f"{item.name}: {w}" for item in self.items for w in item.warnings]

    @property
    def exit_code(self) -> int:
        codes = [log.exit_code for log in self.logs]
        if self.problems or not self.is_bookie_dir:
            codes.append(EXIT_DAMAGED)
        return max(codes, default=EXIT_OK, key=_severity)


def _as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _severity(code: int) -> int:
    return {EXIT_OK: 0, EXIT_INCONSISTENT: 1, EXIT_DAMAGED: 2}[code]


def inspect_dir(fs: FileSystem, given: str, extra_ledger_dirs: Sequence[str] = ()) -> DirReport:
    """Describe every name of a bookie directory: its ``current/`` sub-directory when it has
    one (BookKeeper keeps everything there), and the names beside it. ``extra_ledger_dirs``
    are the bookie's other ledger directories: their lastMark joins this directory's, and
    their entry logs are where the index may place entries. What is damage is judged as a
    start judges it, by the same functions (docs/inspect.md; issue 26)."""
    current = join(given, CURRENT_DIR)
    has_current = os.path.isdir(current)
    report = DirReport(given_path=given, path=current if has_current else given)
    if split(given.rstrip("/"))[1] == INDEX_DIR_NAME:  # bkref's index directory itself
        _describe_subdir(fs, report, INDEX_DIR_NAME, given.rstrip("/"), [])
        return report
    try:
        names = sorted(os.listdir(given))
    except OSError as exc:
        report.error = f"{given}: cannot list: {exc.strerror or exc}"
        return report
    beside = [n for n in names if not (has_current and n == CURRENT_DIR)]
    places: list[tuple[str, str, list[str]]] = [("", given, beside)]
    if has_current:
        try:
            places.append((CURRENT_DIR + "/", current, sorted(os.listdir(current))))
        except OSError as exc:
            report.error = f"{current}: cannot list: {exc.strerror or exc}"
    logs_to_read: list[tuple[str, str]] = []
    for prefix, directory, entries in places:
        for name in entries:
            _describe_name(fs, report, prefix + name, join(directory, name), logs_to_read)
    logs_to_read.sort(key=lambda item: (log_id_prefix(split(item[1])[1]) or 0, item[1]))
    for done, (_rel, path) in enumerate(logs_to_read, start=1):
        log = inspect_log(fs, path)
        report.logs.append(log)
        _progress(done, len(logs_to_read))
    marks = list(report.last_marks)
    for directory in extra_ledger_dirs:
        base = _current_of(directory)
        path = join(base, LAST_MARK_FILE_NAME)
        if _lstat(path) is not None:
            marks.append(describe_last_mark(fs, path))
            report.last_marks.append(marks[-1])
    context = mark_context(marks)
    _describe_journals(fs, report, context)
    journal_dir = _journal_dir(report)
    if report.journals or extra_ledger_dirs or journal_dir is not None:
        report.replay, problem = replay_plan(fs, journal_dir, context, context.path is not None)
        if problem is not None:
            report.dir_problems.append(problem)
    if journal_dir is not None:
        report.dir_problems.extend(other_mark_problems(fs, journal_dir, marks, context))
        problem = coverage_problem(
            fs, journal_dir, context, bool(marks), _index_counts(fs, extra_ledger_dirs)
        )
        if problem is not None:
            report.dir_problems.append(problem)
    _index_problems(report, marks, extra_ledger_dirs)
    _leftover_problems(report, extra_ledger_dirs)
    report.items.sort(key=lambda item: item.name)
    return report


def _leftover_problems(report: DirReport, extra_ledger_dirs: Sequence[str]) -> None:
    """A malformed ``.compacted`` whose source is in no ledger directory given is refused by
    a start (``malformed_leftover_damage``, the error recovery raises); one whose source is
    in another ledger directory is removed."""
    for leftover in report.compaction_leftovers:
        if leftover["recovery"] != "refuse":
            continue
        source = log_file_name(int(str(leftover["src_log_id"])))
        if any(_lstat(join(_current_of(d), source)) is not None for d in extra_ledger_dirs):
            leftover["recovery"] = "remove"
            leftover["recovery_steps"] = [f"unlink {leftover['name']}"]
            continue
        damage = malformed_leftover_damage(
            str(leftover["path"]), int(str(leftover["src_log_id"])), str(leftover["malformed"])
        )
        report.dir_problems.append(str(damage))


def _index_counts(fs: FileSystem, ledger_dirs: Sequence[str]) -> tuple[int, int] | None:
    """The newest segment and the deletes of the index in one of ``ledger_dirs`` (the one
    holding ``bkref-index/``), loaded read-only; None when none holds one or it does not
    load (inspecting that directory says why)."""
    for directory in ledger_dirs:
        path = join(_current_of(directory), INDEX_DIR_NAME)
        if os.path.isdir(path):
            try:
                index = LedgerIndex.load(ReadOnlyFs(fs), path)
            except BkrefError:
                return None
            return index.newest_segment_seq, index.deleted_records
    return None


def _current_of(directory: str) -> str:
    current = join(directory, CURRENT_DIR)
    return current if os.path.isdir(current) else directory


def _describe_journals(fs: FileSystem, report: DirReport, context: MarkContext) -> None:
    """The journals the walk found, judged as a start after ``context``'s lastMark would judge
    them: strictly after a bkref lastMark; a journal wholly before the mark is never
    replayed, so its damage is a warning."""
    for _rel, path, item in sorted(report.pending_journals, key=lambda j: j[1]):
        journal_id = parse_journal_file_name(split(path)[1])
        replayed = journal_id is None or journal_id >= context.mark.journal_id
        journal = describe_journal(fs, path, strict=context.strict and replayed, replayed=replayed)
        report.journals.append(journal)
        report.items.append(
            attrs.evolve(
                item,
                description=journal_summary(journal),
                problems=tuple(map(str, _as_list(journal["problems"]))),
                warnings=tuple(map(str, _as_list(journal["warnings"]))),
            )
        )
    report.pending_journals.clear()
    report.journals.sort(key=lambda j: str(j["name"]))


def _journal_dir(report: DirReport) -> str | None:
    """Where the journals are: the one directory the journals found are in, or this
    directory when its identity stamp says it is a journal directory."""
    dirs = {split(str(j["path"]))[0] for j in report.journals}
    if len(dirs) == 1:
        return dirs.pop()
    stamp = report.identity
    if not dirs and stamp is not None and stamp["directory"] in _as_list(stamp["journal_dirs"]):
        return report.path
    return None


def _index_problems(
    report: DirReport, marks: list[dict[str, object]], extra_ledger_dirs: Sequence[str]
) -> None:
    """What a start checks of the index here against lastMark and the entry logs (rows i1,
    i3, d1, d2 and e1, e2), by recovery's own decisions: ``index_coverage_damage`` and
    ``indexed_log_damage`` (impl/bookie/recovery.py)."""
    stamp = report.identity
    holds_index = report.loaded_index is not None or (
        stamp is not None and stamp["index_dir"] == stamp["directory"]
    )
    if not holds_index:
        return
    index = report.loaded_index
    coverage = _coverage(marks)
    index_dir = join(report.path, INDEX_DIR_NAME)
    newest = index.newest_segment_seq if index is not None else 0
    deleted = index.deleted_records if index is not None else 0
    damage = index_coverage_damage(index_dir, newest, deleted, coverage)
    if damage is not None:
        report.dir_problems.append(str(damage))
    if index is None:
        return
    logs = _log_sizes(report, extra_ledger_dirs)
    for log_id, (count, largest) in sorted(index.log_extents().items()):
        path, size = logs.get(log_id, (None, None))
        damage = indexed_log_damage(log_id, count, largest, path, size)
        if damage is not None:
            report.dir_problems.append(str(damage))


def _coverage(marks: list[dict[str, object]]) -> IndexCoverage | None:
    """The index coverage a start checks against: the largest recorded in any lastMark read
    (impl/journal/last_mark.py, ``checked_last_mark``)."""
    found = [m for m in marks if m["error"] is None and m["index_segment"] is not None]
    if not found:
        return None
    return IndexCoverage(
        max(int(str(m["index_segment"])) for m in found),
        max(int(str(m["index_deleted_records"])) for m in found),
    )


def _log_sizes(
    report: DirReport, extra_ledger_dirs: Sequence[str]
) -> dict[int, tuple[str, int | None]]:
    """Every entry log of this directory and of ``extra_ledger_dirs``: id -> (path, size)."""
    out: dict[int, tuple[str, int | None]] = {}
    for log in report.logs:
        if log.log_id is not None:
            out[log.log_id] = (log.path, log.size_bytes)
    for directory in extra_ledger_dirs:
        base = _current_of(directory)
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            log_id = parse_log_file_name(name)
            st = _lstat(join(base, name))
            if log_id is not None and st is not None and stat.S_ISREG(st.st_mode):
                out.setdefault(log_id, (join(base, name), st.st_size))
    return out


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


#: How inspect names the accept command: it does not know the bookie's configuration.
_ACCEPT_HINT = "`bkref dirs accept` with the bookie's configuration (--conf FILE, --set ...)"


def describe_identity(fs: FileSystem, path: str) -> dict[str, object]:
    """bkref's identity stamp (spec/format/identity.md), decoded by the engine's codec; a
    stamp that does not decode is row D1, said as a start says it
    (impl/bookie/identity.py ``damaged_stamp_message``)."""
    out: dict[str, object] = {
        "name": split(path)[1],
        "path": path,
        "instance": None,
        "generation": None,
        "sealed": None,
        "directory": None,
        "journal_dirs": None,
        "ledger_dirs": None,
        "index_dir": None,
        "error": None,
    }
    try:
        stamp = decode_stamp(read_small(fs, path, MAX_STAMP_BYTES + 1))
    except (BkrefError, StampFormatError) as exc:
        out["error"] = damaged_stamp_message(path, str(exc), _ACCEPT_HINT)
        return out
    out.update(
        instance=stamp.instance,
        generation=stamp.generation,
        sealed=stamp.sealed,
        directory=stamp.directory,
        journal_dirs=list(stamp.journal_dirs),
        ledger_dirs=list(stamp.ledger_dirs),
        index_dir=stamp.index_dir,
    )
    return out


def _describe_identity(fs: FileSystem, path: str) -> tuple[str, tuple[str, ...]]:
    """The identity stamp in one line, or why it does not read (a problem: the next start
    refuses it)."""
    stamp = describe_identity(fs, path)
    if stamp["error"] is not None:
        return "bkref identity stamp", (str(stamp["error"]),)
    state = "sealed" if stamp["sealed"] else "pending (a first start or an accept not finished)"
    return (
        f"bkref identity stamp: instance {stamp['instance']}, generation "
        f"{stamp['generation']}, {state}; directory {stamp['directory']}; journal "
        f"{','.join(map(str, _as_list(stamp['journal_dirs'])))}; ledgers "
        f"{','.join(map(str, _as_list(stamp['ledger_dirs'])))}; index in {stamp['index_dir']}"
    ), ()


def _coverage_text(record: dict[str, object]) -> str:
    if record["error"] is not None:
        return "bkref coverage record, damaged"
    if record["journal_id"] is None:
        return "bkref coverage record, empty"
    return (
        f"bkref coverage record: the ledger directories held at least lastMark journal "
        f"{record['journal_file']}, offset {record['offset']}, index segment "
        f"{record['index_segment']}, {record['index_deleted_records']} deletes"
    )


def _name_kind(name: str) -> str:
    """What a regular file of this name would be in a bookie directory."""
    if name.endswith(COMPACTING_SUFFIX):
        return "compacting_log"
    if name.endswith(COMPACTED_SUFFIX) and parse_compacted_file_name(name) is not None:
        return "compacted_log"
    if parse_log_file_name(name) is not None or (
        name.endswith(".log") and log_id_prefix(name) is not None
    ):
        return "entry_log"
    if parse_journal_file_name(name) is not None or (
        name.endswith(JOURNAL_FILE_SUFFIX) and _HEX_ID.fullmatch(name[: -len(JOURNAL_FILE_SUFFIX)])
    ):
        return "journal"
    if _LAST_MARK_NAME.fullmatch(name):
        return "last_mark"
    if name == LAST_ID_FILE_NAME:
        return "last_id"
    if name == IDENTITY_FILE_NAME:
        return "identity"
    if name == COVERAGE_FILE_NAME:
        return "coverage"
    if name == RESERVE_FILE_NAME:
        return "reserve"
    if name == VERSION_FILE_NAME:
        return "cookie"
    if name == INSTANCE_ID_FILE_NAME:
        return "instance_id"
    if name.endswith(".tmp"):
        return "tmp"
    return "unknown"


def _describe_name(
    fs: FileSystem, report: DirReport, rel: str, path: str, logs: list[tuple[str, str]]
) -> None:
    """Add what ``path`` is to ``report``; lstat first, open only regular files."""
    st = _lstat(path)
    if st is None:
        report.items.append(Item(rel, path, "missing", None, "unknown", "vanished while read"))
        return
    kind_of_type = file_type(st.st_mode)
    name = split(path)[1]
    if kind_of_type == "symlink":
        try:
            target = os.readlink(path)
        except OSError as exc:
            target = f"? ({exc.strerror})"
        text = f"symbolic link to {target!r}: described, not followed"
        report.items.append(Item(rel, path, "symlink", None, "symlink", text))
        return
    if kind_of_type == "directory":
        _describe_subdir(fs, report, rel, path, logs)
        return
    size = st.st_size if kind_of_type == "file" else None
    kind = _name_kind(name)
    if kind_of_type != "file":
        text = f"a {kind_of_type}: never opened"
        problems: tuple[str, ...] = ()
        if kind in _READ_KINDS:
            problems = (f"named like a bookie file ({kind}) but a {kind_of_type}: never opened",)
        report.items.append(Item(rel, path, kind_of_type, None, "special", text, problems))
        return
    item = Item(rel, path, "file", size, kind, "")
    if kind == "entry_log":
        logs.append((rel, path))
        text = EMPTY_LOG_NOTE if size == 0 else "entry log"
        report.items.append(attrs.evolve(item, description=text))
    elif kind == "journal":
        report.pending_journals.append((rel, path, item))
    elif kind == "last_mark":
        mark = describe_last_mark(fs, path)
        report.last_marks.append(mark)
        error = mark["error"]
        text = f"lastMark: journal {mark['journal_file']}, offset {mark['offset']}"
        if mark["journal_id"] is None:
            text = f"lastMark: {mark['note'] or 'no mark'}"
        problems = (str(error),) if error is not None else ()
        report.items.append(
            attrs.evolve(item, description=text if not error else "lastMark", problems=problems)
        )
    elif kind == "last_id":
        report.last_id = describe_last_id(fs, path)
        report.items.append(
            attrs.evolve(item, description="lastId: the last entry log id allocated")
        )
    elif kind == "reserve":
        report.items.append(attrs.evolve(item, description=RESERVE_NOTE))
    elif kind == "coverage":
        record = describe_coverage(fs, path)
        problems = () if record["error"] is None else (str(record["error"]),)
        report.items.append(
            attrs.evolve(item, description=_coverage_text(record), problems=problems)
        )
    elif kind == "identity":
        stamp = describe_identity(fs, path)
        report.identity = stamp if stamp["error"] is None else None
        text, problems = _describe_identity(fs, path)
        report.items.append(attrs.evolve(item, description=text, problems=problems))
    elif kind == "cookie":
        cookie = describe_cookie(fs, path)
        report.cookies.append(cookie)
        error = cookie["error"]
        report.items.append(
            attrs.evolve(
                item,
                description=_cookie_summary(cookie),
                problems=(str(error),) if error is not None else (),
            )
        )
    elif kind == "instance_id":
        instance = _read_text(fs, path)
        report.instance_ids.append({"name": name, "path": path, "text": instance})
        report.items.append(attrs.evolve(item, description=f"instance id file: {instance!r}"))
    elif kind in ("compacting_log", "compacted_log"):
        leftover = _describe_leftover(fs, path, kind)
        report.compaction_leftovers.append(leftover)
        report.items.append(attrs.evolve(item, description=str(leftover["note"])))
    elif kind == "tmp":
        report.items.append(attrs.evolve(item, description=TMP_NOTE))
    else:
        report.items.append(
            attrs.evolve(item, description="unknown file: not a file a bookie writes")
        )


def _read_text(fs: FileSystem, path: str) -> str | None:
    try:
        return read_small(fs, path, 256).decode("utf-8", "backslashreplace")
    except BkrefError:
        return None


def _describe_leftover(fs: FileSystem, path: str, kind: str) -> dict[str, object]:
    """A ``.compacting`` or ``.compacted`` file and what recovery will do with it
    (impl/entrylog/compactor.py ``recover_leftovers``, spec/protocol/compaction.md)."""
    directory, name = split(path)
    log = inspect_log(fs, path)
    malformed: str | None = None
    source_present: bool | None = None
    new_log_present: bool | None = None
    if kind == "compacting_log":
        log_id: int | None = parse_compacting_file_name(name)
        src: int | None = None
        recovery = "remove"
        steps = [f"unlink {name}"]
        note = COMPACTING_NOTE
    else:
        ids = parse_compacted_file_name(name)
        assert ids is not None
        log_id, src = ids
        source_present = fs.exists(join(directory, log_file_name(src)))
        new_log_present = fs.exists(join(directory, log_file_name(log_id)))
        malformed = malformed_compaction_log(fs, path, EntryLogId(log_id))
        if malformed is None:
            recovery = "finish"
            steps = [] if new_log_present else [f"link {log_file_name(log_id)}"]
            steps += [
                f"point the index at the entries of {log_file_name(log_id)} that it places "
                f"in {log_file_name(src)}, then flush it",
                *([f"unlink {log_file_name(src)}"] if source_present else []),
                f"unlink {name}",
            ]
            note = COMPACTED_NOTE.format(src=f"{src:x}", steps="; ".join(steps))
        elif source_present:
            recovery = "remove"
            steps = [f"unlink {name}"]
            note = COMPACTED_MALFORMED_NOTE.format(
                src=f"{src:x}",
                why=malformed,
                what="Recovery removes it and keeps the source, which is in this directory",
            )
        else:
            recovery = "refuse"
            steps = []
            note = COMPACTED_MALFORMED_NOTE.format(
                src=f"{src:x}",
                why=malformed,
                what=(
                    "Its source is not in this directory: unless it is in another ledger "
                    "directory (then recovery removes this file), recovery refuses to start, "
                    "since the entries it copied exist nowhere else"
                ),
            )
    return {
        "name": name,
        "path": path,
        "kind": "compacting" if kind == "compacting_log" else "compacted",
        "log_id": log_id,
        "src_log_id": src,
        "size_bytes": log.size_bytes,
        "log": log_json(log),
        "source_present": source_present,
        "new_log_present": new_log_present,
        "malformed": malformed,
        "recovery": recovery,
        "recovery_steps": steps,
        "note": note,
    }


def _describe_subdir(
    fs: FileSystem, report: DirReport, rel: str, path: str, logs: list[tuple[str, str]]
) -> None:
    name = split(path)[1]
    if name == INDEX_DIR_NAME:
        index, report.loaded_index = load_index(fs, path)
        report.index = index
        error = index["error"]
        text = _index_summary(index)
        problems = (str(error),) if error is not None else ()
        report.items.append(Item(rel, path, "directory", None, "bkref_index", text, problems))
        _index_items(report, rel, path, index)
        return
    if name in ROCKSDB_DIRS:
        rocks = _describe_rocksdb(path)
        report.rocksdb_dirs.append(rocks)
        kind = "rocksdb" if rocks["has_current"] else "unknown"
        text = (
            f"{rocks['storage']} (RocksDB, {rocks['files']} files, "
            f"{rocks['size_bytes']} bytes): not read"
        )
        report.items.append(Item(rel, path, "directory", None, kind, text))
        return
    if is_bk_index_dir_name(name):
        found = _walk_bk_index(report, rel, path)
        text = f"BookKeeper ledger index sub-directory ({found} .idx files)"
        kind = "bk_index_dir" if found else "unknown"
        report.items.append(
            Item(
                rel, path, "directory", None, kind, text if found else "unknown directory: not read"
            )
        )
        return
    report.items.append(
        Item(rel, path, "directory", None, "unknown", "unknown directory: not read")
    )


def _walk_bk_index(report: DirReport, rel: str, path: str) -> int:
    """The ``<yy>/<hex>.idx`` files under a BookKeeper ``<xx>`` index directory; every other
    name is an unknown item. Never follows a link, never opens anything."""
    found = 0
    try:
        subs = sorted(os.listdir(path))
    except OSError:
        return 0
    for sub in subs:
        sub_path, sub_rel = join(path, sub), f"{rel}/{sub}"
        st = _lstat(sub_path)
        if st is None or not stat.S_ISDIR(st.st_mode) or not is_bk_index_dir_name(sub):
            kind_of_type = "missing" if st is None else file_type(st.st_mode)
            size = st.st_size if st is not None and stat.S_ISREG(st.st_mode) else None
            report.items.append(
                Item(sub_rel, sub_path, kind_of_type, size, "unknown", "unknown: not read")
            )
            continue
        try:
            files = sorted(os.listdir(sub_path))
        except OSError:
            continue
        for file_name in files:
            file_path, file_rel = join(sub_path, file_name), f"{sub_rel}/{file_name}"
            st = _lstat(file_path)
            regular = st is not None and stat.S_ISREG(st.st_mode)
            if regular and _idx_ledger(file_name) is not None:
                described = _describe_bk_index(file_path)
                report.bk_index_files.append(described)
                found += 1
                text, problems, warnings = _bk_index_line(described)
                report.items.append(
                    Item(
                        file_rel,
                        file_path,
                        "file",
                        st.st_size if st else None,
                        "bk_index_file",
                        text,
                        problems=problems,
                        warnings=warnings,
                    )
                )
                continue
            kind_of_type = "missing" if st is None else file_type(st.st_mode)
            size = st.st_size if regular and st is not None else None
            report.items.append(
                Item(file_rel, file_path, kind_of_type, size, "unknown", "unknown: not read")
            )
    return found


def _index_items(report: DirReport, rel: str, path: str, index: dict[str, object]) -> None:
    """One item per name in bkref's index directory (the index as a whole carries the
    problems: a damaged segment stops the whole load)."""
    segments = {
        str(seg["name"]): seg for seg in _as_list(index["segments"]) if isinstance(seg, dict)
    }
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return
    for name in names:
        full = join(path, name)
        st = _lstat(full)
        kind_of_type = "missing" if st is None else file_type(st.st_mode)
        size = st.st_size if st is not None and stat.S_ISREG(st.st_mode) else None
        if name in segments:
            seg = segments[name]
            kind = "index_segment"
            text = f"bkref index segment {seg['seq']}, {seg['kind']}, {seg['ledgers']} ledgers"
            if seg["error"] is not None:
                text = f"bkref index segment, damaged: {seg['error']}"
        elif name == DELETED_FILE_NAME:
            kind, text = "index_deleted", "bkref's deleted-ledgers file"
        elif name.endswith(".tmp"):
            kind, text = "tmp", TMP_NOTE
        else:
            kind, text = "unknown", "unknown: not read"
        report.items.append(Item(f"{rel}/{name}", full, kind_of_type, size, kind, text))


def _describe_rocksdb(path: str) -> dict[str, object]:
    """Names and sizes only: the files are RocksDB's, read by nothing in bkref."""
    files = total = 0
    has_current = False
    try:
        names = os.listdir(path)
    except OSError:
        names = []
    for name in names:
        st = _lstat(join(path, name))
        if st is not None and stat.S_ISREG(st.st_mode):
            files += 1
            total += st.st_size
            has_current = has_current or name == "CURRENT"
    return {
        "name": split(path)[1],
        "path": path,
        "storage": ROCKSDB_DIRS[split(path)[1]],
        "files": files,
        "size_bytes": total,
        "has_current": has_current,
    }


def _progress(done: int, total: int) -> None:
    if total < PROGRESS_MIN_LOGS:
        return
    step = max(1, total // 10)
    if done % step == 0 or done == total:
        print(f"bkref inspect: {done}/{total} logs read", file=sys.stderr)


# --- one file given as PATH -----------------------------------------------------------------


def describe_file(fs: FileSystem, path: str) -> tuple[dict[str, object], str, int] | None:
    """(JSON object, text, exit code) for one file of a bookie, None when its name is not
    one a bookie writes. An entry log keeps the object of ``log_json``; the others are the
    objects of the directory report's sections (docs/inspect.md)."""
    name = split(path)[1]
    kind = _name_kind(name)
    if kind == "unknown" and name.endswith(".log"):
        kind = "entry_log"  # named like a log: say why it is not one
    parent_name = split(split(path)[0])[1]
    if kind == "unknown" and _idx_ledger(name) is not None:
        obj = _describe_bk_index(path)
        return obj, _lines_of(obj), EXIT_OK
    deleted_file = parent_name == INDEX_DIR_NAME and name == DELETED_FILE_NAME
    if kind == "unknown" and deleted_file and not_regular(path) is None:
        obj = describe_deleted(ReadOnlyFs(fs), path)
        return obj, _lines_of(obj), EXIT_OK if obj["error"] is None else EXIT_DAMAGED
    if kind == "unknown" and parent_name == INDEX_DIR_NAME:
        seq = parse_segment_file_name(name)
        if seq is not None:
            obj = _describe_segment(ReadOnlyFs(fs), path, seq)
            return obj, _lines_of(obj), EXIT_OK if obj["error"] is None else EXIT_DAMAGED
    if kind == "entry_log":
        log = inspect_log(fs, path)
        return log_json(log), format_log(log), log.exit_code
    reason = not_regular(path)
    if kind in ("unknown", "tmp"):
        return None
    if reason is not None:
        obj = {"name": name, "path": path, "error": reason}
        return obj, _lines_of(obj), EXIT_DAMAGED
    if kind == "journal":
        obj = describe_journal(fs, path)
        return obj, format_journal(obj), EXIT_DAMAGED if obj["problems"] else EXIT_OK
    if kind == "last_mark":
        obj = describe_last_mark(fs, path)
        obj["used"] = obj["error"] is None
        return obj, _lines_of(obj), EXIT_DAMAGED if obj["error"] else EXIT_OK
    if kind == "last_id":
        obj = describe_last_id(fs, path)
        return obj, _lines_of(obj), EXIT_OK
    if kind == "cookie":
        obj = describe_cookie(fs, path)
        return obj, _lines_of(obj), EXIT_DAMAGED if obj["error"] else EXIT_OK
    if kind == "instance_id":
        obj = {"name": name, "path": path, "text": _read_text(fs, path)}
        return obj, _lines_of(obj), EXIT_OK
    if kind == "reserve":
        size = os.lstat(path).st_size
        obj = {"name": name, "path": path, "size_bytes": size, "note": RESERVE_NOTE}
        return obj, _lines_of(obj), EXIT_OK
    if kind == "coverage":
        obj = describe_coverage(fs, path)
        return obj, _lines_of(obj), EXIT_DAMAGED if obj["error"] else EXIT_OK
    if kind == "identity":
        obj = describe_identity(fs, path)
        return obj, _lines_of(obj), EXIT_DAMAGED if obj["error"] else EXIT_OK
    assert kind in ("compacting_log", "compacted_log"), kind
    obj = _describe_leftover(fs, path, kind)
    return obj, _lines_of(obj), EXIT_OK


def _lines_of(obj: dict[str, object]) -> str:
    """A small object as aligned ``key  value`` lines (the text of a one-file report)."""
    lines = [f"{obj.get('name', '')}  ({obj.get('path', '')})"]
    for key, value in obj.items():
        if key in ("name", "path") or value is None or value == [] or key == "log":
            continue
        lines.append(
            _wrapped(f"  {key:<16} ", value if isinstance(value, str) else json.dumps(value))
        )
    return "\n".join(lines)


# --- JSON and text of a directory -----------------------------------------------------------


def dir_json(report: DirReport) -> dict[str, object]:
    """The JSON object of a directory (docs/inspect.md, "directory object")."""
    return {
        "path": report.given_path,
        "dir": report.path,
        "is_bookie_dir": report.is_bookie_dir,
        "files": [item.as_json() for item in report.items],
        "entry_logs": [log_json(log) for log in report.logs],
        "journals": report.journals,
        "last_marks": report.last_marks,
        "replay": report.replay,
        "last_id": report.last_id,
        "cookies": report.cookies,
        "instance_ids": report.instance_ids,
        "index": report.index,
        "bk_index_files": report.bk_index_files,
        "rocksdb_dirs": report.rocksdb_dirs,
        "compaction_leftovers": report.compaction_leftovers,
        "problems": report.problems,
        "warnings": report.warnings,
        "exit_code": report.exit_code,
    }


def format_dir(report: DirReport) -> str:
    """The human report of a directory: a section per kind of file, problems last."""
    lines = [f"bookie directory  {report.path}"]
    if report.logs:
        empty = sum(log.empty for log in report.logs)
        note = f" ({empty} empty: preallocated, normal)" if empty else ""
        lines.append(f"  entry logs      {len(report.logs)}{note}")
        rows: list[tuple[str, ...]] = [
            ("log", "size", "source", "ledgers", "entries", "torn tail", "note")
        ]
        rows += [_log_row(log) for log in report.logs]
        lines.extend("    " + line for line in _aligned(rows, "lrlrrrl"))
    if report.journals:
        lines.append(f"  journals        {len(report.journals)}")
        for journal in report.journals:
            lines.append(_wrapped("    ", f"{journal['name']}: {journal_summary(journal)}"))
    for mark in report.last_marks:
        used = " (the largest inspected: recovery uses the largest of all)" if mark["used"] else ""
        if mark["error"] is None:
            text = f"{mark['path']}: journal {mark['journal_file']}, offset {mark['offset']}{used}"
        else:
            text = f"{mark['path']}: {mark['error']}"
        lines.append(_wrapped("  lastMark        ", text))
    if report.replay is not None:
        lines.append(_wrapped("  replay          ", replay_text(report.replay)))
    if report.last_id is not None:
        lines.append(f"  lastId          {_last_id_text(report)}")
    for cookie in report.cookies:
        lines.append(_wrapped("  VERSION         ", f"{cookie['path']}: {_cookie_summary(cookie)}"))
    for instance in report.instance_ids:
        lines.append(_wrapped("  instanceId      ", f"{instance['path']}: {instance['text']!r}"))
    if report.index is not None:
        lines.append(_wrapped("  bkref index     ", _index_summary(report.index)))
    if report.bk_index_files:
        ids = ", ".join(str(f["ledger_id"]) for f in report.bk_index_files[:TEXT_LEDGERS_MAX])
        more = " ..." if len(report.bk_index_files) > TEXT_LEDGERS_MAX else ""
        contents = [f["contents"] for f in report.bk_index_files]
        fenced = sum(1 for c in contents if isinstance(c, dict) and c["fenced"])
        unread = sum(1 for c in contents if isinstance(c, dict) and c["error"] is not None)
        text = (
            f"{len(report.bk_index_files)} {BK_INDEX_DESCRIPTION}s (.idx), ledgers "
            f"{ids}{more}; {fenced} fenced, {unread} with a header that does not read"
        )
        lines.append(_wrapped("  BookKeeper idx  ", text))
    for rocks in report.rocksdb_dirs:
        text = f"{rocks['name']}/: {rocks['storage']}, RocksDB, {rocks['files']} files, not read"
        lines.append(_wrapped("  RocksDB         ", text))
    for leftover in report.compaction_leftovers:
        lines.append(_wrapped("  compaction      ", f"{leftover['name']}: {leftover['note']}"))
    others = [i for i in report.items if i.kind in ("unknown", "special", "symlink", "tmp")]
    for item in others:
        size = "" if item.size_bytes is None else f", {item.size_bytes} bytes"
        lines.append(
            _wrapped("  other           ", f"{item.name} ({item.type}{size}): {item.description}")
        )
    lines.extend(_wrapped("  error: ", problem) for problem in report.problems)
    for log in report.logs:
        if log.error is not None:
            lines.append(_wrapped("  error: ", f"{log.name}: {log.error}"))
        elif log.scan is not None:
            lines.extend(_wrapped("  warning: ", f"{log.name}: {w}") for w in log_warnings(log))
    lines.extend(_wrapped("  warning: ", warning) for warning in report.warnings)
    return "\n".join(lines)


def format_journal(journal: dict[str, object]) -> str:
    """The human report of one journal: summary, the first records, problems."""
    lines = [f"{journal['name']}  ({journal['path']})", _wrapped("  ", journal_summary(journal))]
    records = _as_list(journal["records"])
    for rec in records[:TEXT_RECORDS_MAX]:
        assert isinstance(rec, dict)
        lines.append(
            f"    {rec['offset']:>10}  {rec['kind']:<5}  ledger {rec['ledger']}  "
            f"entry {rec['entry']}  {rec['size']} bytes"
        )
    if len(records) > TEXT_RECORDS_MAX:
        lines.append(f"    ... {len(records) - TEXT_RECORDS_MAX} more records (--json lists all)")
    lines.extend(_wrapped("  error: ", str(p)) for p in _as_list(journal["problems"]))
    lines.extend(_wrapped("  warning: ", str(w)) for w in _as_list(journal["warnings"]))
    return "\n".join(lines)


def _cookie_summary(cookie: dict[str, object]) -> str:
    if cookie["error"] is not None:
        return f"BookKeeper cookie, unreadable: {cookie['error']}"
    return (
        f"BookKeeper cookie, layout {cookie['layout_version']}: bookie {cookie['bookie_host']}, "
        f"journal dirs {cookie['journal_dirs']}, ledger dirs {cookie['ledger_dirs']}, "
        f"index dirs {cookie['index_dirs']}, instance id {cookie['instance_id']}"
    )


def _index_summary(index: dict[str, object]) -> str:
    if index["error"] is not None:
        return f"bkref's ledger index, damaged: {index['error']}"
    segments = _as_list(index["segments"])
    return (
        f"bkref's ledger index: {len(segments)} segment(s), chain {index['chain']}, "
        f"{index['ledgers']} ledgers ({index['keyed_ledgers']} with a master key), "
        f"{index['entries']} entries, fenced {index['fenced_ledgers']}, "
        f"deleted {index['deleted_ledgers']}"
    )


def _last_id_text(report: DirReport) -> str:
    assert report.last_id is not None
    text, value = report.last_id["text"], report.last_id["value"]
    if text is None:
        return "unreadable"
    shown = json.dumps(text)
    if not isinstance(value, int):
        return f"unusable ({shown}); BookKeeper then uses the largest log id"
    ids = [log.log_id for log in report.logs if log.log_id is not None]
    behind = ids and max(ids) > value
    note = " (behind the largest log id: not fsynced before a crash?)" if behind else ""
    return f"{value:x} ({shown}){note}"


def _log_row(log: LogReport) -> tuple[str, ...]:
    size = "-" if log.size_bytes is None else str(log.size_bytes)
    if log.empty:
        return (log.name, size, "empty", "0", "0", "0", "preallocated, normal")
    if log.error is not None or log.metadata is None or log.scan is None:
        return (log.name, size, "-", "-", "-", "-", "not an entry log")
    meta = log.metadata
    note = ""
    if meta.fallback_reason is not None:
        note = meta.fallback_reason.split(":", 1)[0]
    if log.map_matches_scan is False:
        note = "MAP DISAGREES WITH SCAN"
    return (
        log.name,
        size,
        meta.source,
        str(len(meta.metadata.ledgers)),
        str(len(log.scan.records)),
        str(log.scan.torn_tail_bytes),
        note,
    )
