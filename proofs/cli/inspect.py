"""``bkref inspect PATH [--json]``: report on an entry log file or a ledger directory.

For operators and developers who want to know what is on a bookie's disk: the header, the
ledgers map or, when BookKeeper would not trust it, the scan and why, the entries per ledger,
a torn tail, and for a directory every log, ``lastId`` and compaction leftovers. It reads
through impl.fs.os_backend.OsFileSystem and impl.entrylog.reader, so what it reports is what
bkref's engine (and BookKeeper, spec/format/entry_log.md) would make of the same bytes.

It never writes, but it opens files read-write (the FileSystem seam has no read-only open),
so it needs write permission on what it reads. Not verified: that a file is not being written
while it is read (inspect a stopped bookie, or expect the active log to show a torn tail), and
the index, the journal and lastMark, which later versions of this command will read.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections.abc import Sequence

import attrs

from impl.entrylog.reader import (
    MetadataResult,
    ScanResult,
    extract_metadata,
    peek_header,
    read_header,
    scan,
)
from impl.format.entry_log import LOGFILE_HEADER_SIZE, MAGIC, MAX_LOG_ID, Header
from impl.format.names import (
    COMPACTED_SUFFIX,
    COMPACTING_SUFFIX,
    CURRENT_DIR,
    INSTANCE_ID_FILE_NAME,
    JOURNAL_FILE_SUFFIX,
    LAST_ID_FILE_NAME,
    LAST_MARK_FILE_NAME,
    LOG_SUFFIX,
    VERSION_FILE_NAME,
    log_id_prefix,
    parse_compacted_file_name,
)
from impl.fs.api import FileHandle, FileSystem, join, split
from impl.fs.os_backend import OsFileSystem
from spec.errors import BkrefError
from spec.ids import EntryLogId

#: Every log read and consistent; torn tails and padding are only warnings.
EXIT_OK = 0
#: A file is not an entry log, or cannot be read, or a directory is not a ledger directory.
EXIT_NOT_AN_ENTRY_LOG = 1
#: Bad command-line usage (argparse exits with it).
EXIT_USAGE = 2
#: A log's ledgers map disagrees with what a scan of the log finds.
EXIT_INCONSISTENT = 3

#: Print progress on stderr when a directory holds at least this many logs.
PROGRESS_MIN_LOGS = 20
#: The text report lists at most this many ledgers per log (--json lists all).
TEXT_LEDGERS_MAX = 40
#: The text report folds long lines at this many columns.
TEXT_WIDTH = 100

EPILOG = f"""\
PATH is an entry log (<hex id>.log, or a .compacting/.compacted compaction log) or a ledger
directory (BookKeeper keeps the logs in its current/ subdirectory; both are accepted).

A torn tail (bytes after the last whole record, left by a crash or by a log still being
written) is a warning, not an error: BookKeeper's scan stops there and every entry before it
is intact, so the log is valid and the exit code stays 0.

exit codes:
  {EXIT_OK}  every log was read; warnings (torn tail, padding) may have been printed
  {EXIT_NOT_AN_ENTRY_LOG}  a file is not an entry log (name not hex, shorter than its header,
     magic not BKLO) or cannot be read; or PATH is missing or is not a ledger directory
  {EXIT_USAGE}  bad command-line usage
  {EXIT_INCONSISTENT}  a log's ledgers map disagrees with a scan of the same log
"""

_HEX_ID = re.compile(r"[0-9a-fA-F]+")
#: Names a bookie keeps beside its entry logs that this command recognises but does not read.
_BOOKIE_FILES = (VERSION_FILE_NAME, LAST_MARK_FILE_NAME, INSTANCE_ID_FILE_NAME)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``bkref inspect``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("path", metavar="PATH", help="an entry log file or a ledger directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Inspect ``args.path``; print the report; return the exit code (see EPILOG)."""
    fs = OsFileSystem()
    path: str = args.path
    if fs.is_dir(path):
        report = inspect_dir(fs, path)
        print(json.dumps(dir_json(report)) if args.json else format_dir(report))
        return report.exit_code
    if not fs.exists(path):
        message = f"{path}: no such file or directory"
        if args.json:
            print(json.dumps({"path": path, "error": message}))
        print(f"bkref inspect: {message}", file=sys.stderr)
        return EXIT_NOT_AN_ENTRY_LOG
    log = inspect_log(fs, path)
    print(json.dumps(log_json(log)) if args.json else format_log(log))
    return log.exit_code


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
    def exit_code(self) -> int:
        if self.error is not None:
            return EXIT_NOT_AN_ENTRY_LOG
        if self.map_matches_scan is False:
            return EXIT_INCONSISTENT
        return EXIT_OK


def inspect_log(fs: FileSystem, path: str) -> LogReport:
    """Read one file as an entry log; never raises for what the file holds."""
    name = split(path)[1]
    log_id = log_id_prefix(name)
    bare = LogReport(path=path, name=name, log_id=log_id, size_bytes=None, header=None, error=None)
    if log_id is None:
        reason = f"the name {name!r} does not begin with a hex log id: not an entry log name"
        return attrs.evolve(bare, error=reason)
    if log_id > MAX_LOG_ID:
        return attrs.evolve(bare, error=f"log id {log_id:#x} is larger than a Java int")
    try:
        handle = fs.open(path, read_only=True)
    except BkrefError as exc:
        return attrs.evolve(bare, error=f"cannot open: {exc}")
    try:
        return _read_log(bare, handle, EntryLogId(log_id))
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
    """The JSON object of one log: the keys of the brief first, extra keys after."""
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


# --- a ledger directory ---------------------------------------------------------------------


@attrs.frozen
class DirReport:
    """What inspect found in a ledger directory (the one holding the logs)."""

    given_path: str
    path: str
    logs: tuple[LogReport, ...]
    last_id_text: str | None
    compacting: tuple[str, ...]
    compacted: tuple[str, ...]
    bookie_files: tuple[str, ...]
    unknown_files: tuple[str, ...]
    error: str | None = None

    @property
    def last_id(self) -> int | None:
        """lastId as BookKeeper reads it: hex on the first line; <= 0 or junk count as absent."""
        if self.last_id_text is None:
            return None
        line = self.last_id_text.split("\n", 1)[0]
        if not _HEX_ID.fullmatch(line):
            return None
        value = int(line, 16)
        return value if value > 0 else None

    @property
    def is_ledger_dir(self) -> bool:
        """Holds at least one file a bookie writes."""
        return bool(
            self.logs
            or self.last_id_text is not None
            or self.compacting
            or self.compacted
            or self.bookie_files
        )

    @property
    def exit_code(self) -> int:
        if self.error is not None or not self.is_ledger_dir:
            return EXIT_NOT_AN_ENTRY_LOG
        return max((log.exit_code for log in self.logs), default=EXIT_OK, key=_severity)


def _severity(code: int) -> int:
    return {EXIT_OK: 0, EXIT_INCONSISTENT: 1, EXIT_NOT_AN_ENTRY_LOG: 2}[code]


def inspect_dir(fs: FileSystem, given: str) -> DirReport:
    """Read every entry log of a ledger directory (or of its current/ subdirectory)."""
    current = join(given, CURRENT_DIR)
    path = current if fs.is_dir(current) else given
    try:
        names = fs.listdir(path)
    except BkrefError as exc:
        return DirReport(given, path, (), None, (), (), (), (), error=str(exc))
    kinds = _classify(fs, path, names)
    log_names = sorted(kinds["log"], key=lambda n: (log_id_prefix(n) is None, log_id_prefix(n), n))
    logs = []
    for done, name in enumerate(log_names, start=1):
        logs.append(inspect_log(fs, join(path, name)))
        _progress(done, len(log_names))
    return DirReport(
        given_path=given,
        path=path,
        logs=tuple(logs),
        last_id_text=_read_text(fs, join(path, LAST_ID_FILE_NAME)) if kinds["lastId"] else None,
        compacting=tuple(kinds["compacting"]),
        compacted=tuple(kinds["compacted"]),
        bookie_files=tuple(kinds["bookie"]),
        unknown_files=tuple(kinds["unknown"]),
    )


def _classify(fs: FileSystem, path: str, names: Sequence[str]) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {
        k: [] for k in ("log", "lastId", "compacting", "compacted", "bookie", "unknown")
    }
    for name in names:
        if name.endswith(LOG_SUFFIX):
            kinds["log"].append(name)
        elif name == LAST_ID_FILE_NAME:
            kinds["lastId"].append(name)
        elif name.endswith(COMPACTING_SUFFIX):
            kinds["compacting"].append(name)
        elif name.endswith(COMPACTED_SUFFIX):
            kinds["compacted"].append(name)
        elif (
            name in _BOOKIE_FILES
            or name.endswith(JOURNAL_FILE_SUFFIX)
            or fs.is_dir(join(path, name))
        ):
            kinds["bookie"].append(name)
        else:
            kinds["unknown"].append(name)
    return kinds


def _read_text(fs: FileSystem, path: str) -> str | None:
    try:
        handle = fs.open(path, read_only=True)
    except BkrefError:
        return None
    try:
        return handle.pread(0, 256).decode("utf-8", "backslashreplace")
    except BkrefError:
        return None
    finally:
        handle.close()


def _progress(done: int, total: int) -> None:
    if total < PROGRESS_MIN_LOGS:
        return
    step = max(1, total // 10)
    if done % step == 0 or done == total:
        print(f"bkref inspect: {done}/{total} logs read", file=sys.stderr)


def _compacted_json(name: str) -> dict[str, object]:
    ids = parse_compacted_file_name(name)
    if ids is None:
        return {"name": name, "log_id": None, "src_log_id": None}
    return {"name": name, "log_id": ids[0], "src_log_id": ids[1]}


def dir_json(report: DirReport) -> dict[str, object]:
    """The JSON object of a directory: its logs and the directory facts."""
    return {
        "path": report.given_path,
        "ledger_dir": report.path,
        "error": report.error,
        "logs": [log_json(log) for log in report.logs],
        "last_id": report.last_id,
        "last_id_text": report.last_id_text,
        "compacting": list(report.compacting),
        "compacted": [_compacted_json(name) for name in report.compacted],
        "bookie_files": list(report.bookie_files),
        "unknown_files": list(report.unknown_files),
        "is_ledger_dir": report.is_ledger_dir,
    }


def format_dir(report: DirReport) -> str:
    """The human report of a directory: one row per log, then the directory facts."""
    lines = [f"ledger directory  {report.path}"]
    if report.error is not None:
        lines.append(f"  error: {report.error}")
        return "\n".join(lines)
    if not report.is_ledger_dir:
        lines.append("  error: no entry log or other BookKeeper file here: not a ledger directory")
    lines.append(f"  lastId          {_last_id_text(report)}")
    lines.append(f"  entry logs      {len(report.logs)}")
    if report.logs:
        rows: list[tuple[str, ...]] = [
            ("log", "size", "source", "ledgers", "entries", "torn tail", "note")
        ]
        rows += [_log_row(log) for log in report.logs]
        lines.extend("    " + line for line in _aligned(rows, "lrlrrrl"))
    for label, names in (
        ("compacting", report.compacting),
        ("compacted", report.compacted),
        ("bookie files", report.bookie_files),
        ("unknown files", report.unknown_files),
    ):
        if names:
            lines.append(f"  {label:<15} {', '.join(names)}")
    if report.compacting or report.compacted:
        lines.append("  note: compaction recovery deletes .compacting and finishes .compacted")
    for log in report.logs:
        if log.error is not None:
            lines.append(_wrapped("  error: ", f"{log.name}: {log.error}"))
        elif log.scan is not None:
            lines.extend(_wrapped("  warning: ", f"{log.name}: {w}") for w in log_warnings(log))
    return "\n".join(lines)


def _last_id_text(report: DirReport) -> str:
    if report.last_id_text is None:
        return "absent"
    shown = json.dumps(report.last_id_text)
    if report.last_id is None:
        return f"unusable ({shown}); BookKeeper then uses the largest log id"
    ids = [log.log_id for log in report.logs if log.log_id is not None]
    behind = ids and max(ids) > report.last_id
    note = " (behind the largest log id: not fsynced before a crash?)" if behind else ""
    return f"{report.last_id:x} ({shown}){note}"


def _log_row(log: LogReport) -> tuple[str, ...]:
    size = "-" if log.size_bytes is None else str(log.size_bytes)
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
