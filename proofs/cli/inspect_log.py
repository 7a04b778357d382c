"""``bkref inspect``'s exit codes and text limits, and its report of one entry log: the
header, the ledgers map or the scan and why, the entries, a torn tail, and the checks of the
map against the scan (spec/format/entry_log.md).

Why a module of its own (split from proofs/cli/inspect.py, which had grown past 1,800 lines):
one entry log is described the same whether given alone or found in a directory.
"""

from __future__ import annotations

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
    log_id_prefix,
)
from impl.fs.api import FileHandle, FileSystem, split
from proofs.cli.inspect_fs import (
    not_regular,
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
        lines.append(wrapped("  note          ", EMPTY_LOG_NOTE))
        return "\n".join(lines)
    if log.error is not None or log.metadata is None or log.scan is None:
        lines.append(wrapped("  error         ", str(log.error)))
        return "\n".join(lines)
    meta = log.metadata
    if meta.source == "map":
        count, total = len(meta.metadata.ledgers), meta.metadata.total_bytes
        source = f"from the ledgers map ({_plural(count, 'ledger')}, {total} bytes)"
    else:
        source = f"from a scan, because {meta.fallback_reason}"
    lines.append(wrapped("  metadata      ", source))
    lines.append(
        f"  scan          {_plural(len(log.scan.records), 'entry', 'entries')}, "
        f"{_plural(log.scan.map_records, 'map record')}, ends at {log.scan.end_offset}"
    )
    lines.extend(_ledger_table(log))
    lines.extend(wrapped("  warning: ", w) for w in log_warnings(log))
    return "\n".join(lines)


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def wrapped(lead: str, text: str) -> str:
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
    lines = ["  " + line for line in aligned(shown, "lrr")]
    if len(rows) > len(shown):
        lines.append(f"  ... {len(rows) - len(shown)} more ledgers (--json lists all)")
    return lines


def aligned(rows: Sequence[Sequence[str]], align: str) -> list[str]:
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


def as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []
