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
import sys

from impl.format.names import (
    DELETED_FILE_NAME,
    INDEX_DIR_NAME,
    parse_segment_file_name,
)
from impl.fs.api import FileSystem, split
from impl.fs.os_backend import OsFileSystem
from proofs.cli.inspect_dir import (
    DirReport,
    describe_identity,
    describe_leftover,
    inspect_dir,
    name_kind,
    read_text,
)
from proofs.cli.inspect_files import (
    BK_INDEX_DESCRIPTION,
    RESERVE_NOTE,
    cookie_summary,
    describe_bk_index,
    describe_cookie,
    describe_deleted,
    describe_last_id,
    describe_segment,
    idx_ledger,
    index_summary,
)
from proofs.cli.inspect_fs import (
    ReadOnlyFs,
    not_regular,
)
from proofs.cli.inspect_journal import (
    describe_coverage,
    describe_journal,
    describe_last_mark,
    journal_summary,
    replay_text,
)
from proofs.cli.inspect_log import (
    EXIT_DAMAGED,
    EXIT_INCONSISTENT,
    EXIT_NOT_AN_ENTRY_LOG,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    PROGRESS_MIN_LOGS,
    TEXT_LEDGERS_MAX,
    TEXT_RECORDS_MAX,
    TEXT_WIDTH,
    LogReport,
    aligned,
    as_list,
    format_log,
    inspect_log,
    log_json,
    log_warnings,
    wrapped,
)

#: The command's entry points, and what its callers and tests read of the report modules.
__all__ = [
    "EXIT_DAMAGED",
    "EXIT_INCONSISTENT",
    "EXIT_NOT_AN_ENTRY_LOG",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "PROGRESS_MIN_LOGS",
    "TEXT_WIDTH",
    "DirReport",
    "LogReport",
    "configure",
    "describe_file",
    "dir_json",
    "format_dir",
    "format_log",
    "inspect_dir",
    "inspect_log",
    "log_json",
    "run",
]

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


# --- one file given as PATH -----------------------------------------------------------------


def describe_file(fs: FileSystem, path: str) -> tuple[dict[str, object], str, int] | None:
    """(JSON object, text, exit code) for one file of a bookie, None when its name is not
    one a bookie writes. An entry log keeps the object of ``log_json``; the others are the
    objects of the directory report's sections (docs/inspect.md)."""
    name = split(path)[1]
    kind = name_kind(name)
    if kind == "unknown" and name.endswith(".log"):
        kind = "entry_log"  # named like a log: say why it is not one
    parent_name = split(split(path)[0])[1]
    if kind == "unknown" and idx_ledger(name) is not None:
        obj = describe_bk_index(path)
        return obj, _lines_of(obj), EXIT_OK
    deleted_file = parent_name == INDEX_DIR_NAME and name == DELETED_FILE_NAME
    if kind == "unknown" and deleted_file and not_regular(path) is None:
        obj = describe_deleted(ReadOnlyFs(fs), path)
        return obj, _lines_of(obj), EXIT_OK if obj["error"] is None else EXIT_DAMAGED
    if kind == "unknown" and parent_name == INDEX_DIR_NAME:
        seq = parse_segment_file_name(name)
        if seq is not None:
            obj = describe_segment(ReadOnlyFs(fs), path, seq)
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
        obj = {"name": name, "path": path, "text": read_text(fs, path)}
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
    obj = describe_leftover(fs, path, kind)
    return obj, _lines_of(obj), EXIT_OK


def _lines_of(obj: dict[str, object]) -> str:
    """A small object as aligned ``key  value`` lines (the text of a one-file report)."""
    lines = [f"{obj.get('name', '')}  ({obj.get('path', '')})"]
    for key, value in obj.items():
        if key in ("name", "path") or value is None or value == [] or key == "log":
            continue
        lines.append(
            wrapped(f"  {key:<16} ", value if isinstance(value, str) else json.dumps(value))
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
        lines.extend("    " + line for line in aligned(rows, "lrlrrrl"))
    if report.journals:
        lines.append(f"  journals        {len(report.journals)}")
        for journal in report.journals:
            lines.append(wrapped("    ", f"{journal['name']}: {journal_summary(journal)}"))
    for mark in report.last_marks:
        used = " (the largest inspected: recovery uses the largest of all)" if mark["used"] else ""
        if mark["error"] is None:
            text = f"{mark['path']}: journal {mark['journal_file']}, offset {mark['offset']}{used}"
        else:
            text = f"{mark['path']}: {mark['error']}"
        lines.append(wrapped("  lastMark        ", text))
    if report.replay is not None:
        lines.append(wrapped("  replay          ", replay_text(report.replay)))
    if report.last_id is not None:
        lines.append(f"  lastId          {_last_id_text(report)}")
    for cookie in report.cookies:
        lines.append(wrapped("  VERSION         ", f"{cookie['path']}: {cookie_summary(cookie)}"))
    for instance in report.instance_ids:
        lines.append(wrapped("  instanceId      ", f"{instance['path']}: {instance['text']!r}"))
    if report.index is not None:
        lines.append(wrapped("  bkref index     ", index_summary(report.index)))
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
        lines.append(wrapped("  BookKeeper idx  ", text))
    for rocks in report.rocksdb_dirs:
        text = f"{rocks['name']}/: {rocks['storage']}, RocksDB, {rocks['files']} files, not read"
        lines.append(wrapped("  RocksDB         ", text))
    for leftover in report.compaction_leftovers:
        lines.append(wrapped("  compaction      ", f"{leftover['name']}: {leftover['note']}"))
    others = [i for i in report.items if i.kind in ("unknown", "special", "symlink", "tmp")]
    for item in others:
        size = "" if item.size_bytes is None else f", {item.size_bytes} bytes"
        lines.append(
            wrapped("  other           ", f"{item.name} ({item.type}{size}): {item.description}")
        )
    lines.extend(wrapped("  error: ", problem) for problem in report.problems)
    for log in report.logs:
        if log.error is not None:
            lines.append(wrapped("  error: ", f"{log.name}: {log.error}"))
        elif log.scan is not None:
            lines.extend(wrapped("  warning: ", f"{log.name}: {w}") for w in log_warnings(log))
    lines.extend(wrapped("  warning: ", warning) for warning in report.warnings)
    return "\n".join(lines)


def format_journal(journal: dict[str, object]) -> str:
    """The human report of one journal: summary, the first records, problems."""
    lines = [f"{journal['name']}  ({journal['path']})", wrapped("  ", journal_summary(journal))]
    records = as_list(journal["records"])
    for rec in records[:TEXT_RECORDS_MAX]:
        assert isinstance(rec, dict)
        lines.append(
            f"    {rec['offset']:>10}  {rec['kind']:<5}  ledger {rec['ledger']}  "
            f"entry {rec['entry']}  {rec['size']} bytes"
        )
    if len(records) > TEXT_RECORDS_MAX:
        lines.append(f"    ... {len(records) - TEXT_RECORDS_MAX} more records (--json lists all)")
    lines.extend(wrapped("  error: ", str(p)) for p in as_list(journal["problems"]))
    lines.extend(wrapped("  warning: ", str(w)) for w in as_list(journal["warnings"]))
    return "\n".join(lines)


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
