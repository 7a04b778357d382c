"""``bkref inspect``'s report of a directory (a journal or ledger directory, its current/,
bkref's index directory) and of one file given as PATH: what each name is, the journals
and lastMark, compaction leftovers and what recovery will do with each, the index and its
coverage, and the JSON and text of the whole (docs/inspect.md).

Why a module of its own (split from proofs/cli/inspect.py): the command's entry point
stays small; this is where the files of a directory are judged together.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence

import attrs

from impl.bookie.identity import damaged_stamp_message
from impl.bookie.recovery import (
    index_coverage_damage,
    indexed_log_damage,
    record_length_before,
)
from impl.entrylog.compactor import malformed_compaction_log, malformed_leftover_damage
from impl.format.identity import MAX_STAMP_BYTES, StampFormatError, decode_stamp
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
    parse_compacted_file_name,
    parse_compacting_file_name,
    parse_journal_file_name,
    parse_log_file_name,
)
from impl.fs.api import FileSystem, join, split
from impl.index.ledger_index import LedgerIndex
from impl.journal.last_mark import IndexCoverage
from proofs.cli.inspect_files import (
    COMPACTED_MALFORMED_NOTE,
    COMPACTED_NOTE,
    COMPACTING_NOTE,
    HEX_ID,
    LAST_MARK_NAME,
    RESERVE_NOTE,
    TMP_NOTE,
    Item,
    bk_index_line,
    cookie_summary,
    describe_bk_index,
    describe_cookie,
    describe_last_id,
    idx_ledger,
    index_summary,
    load_index,
)
from proofs.cli.inspect_fs import (
    ReadOnlyFs,
    file_type,
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
)
from proofs.cli.inspect_log import (
    EMPTY_LOG_NOTE,
    EXIT_DAMAGED,
    EXIT_INCONSISTENT,
    EXIT_OK,
    PROGRESS_MIN_LOGS,
    LogReport,
    as_list,
    inspect_log,
    log_json,
)
from spec.errors import BkrefError
from spec.ids import EntryLogId

#: DbLedgerStorage's RocksDB directories under current/.
ROCKSDB_DIRS = {
    DB_LEDGERS_DIR_NAME: "DbLedgerStorage's ledgers index (master keys, fence flags, explicit LAC)",
    DB_LOCATIONS_DIR_NAME: "DbLedgerStorage's entry location index",
}


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
        # As a start compares: the largest lastMark that reads (an empty file is no mark;
        # a damaged one is reported on its own).
        readable = context.path is not None
        problem = coverage_problem(
            fs, journal_dir, context, readable, _index_counts(fs, extra_ledger_dirs)
        )
        if problem is not None:
            report.dir_problems.append(problem)
    _index_problems(fs, report, marks, extra_ledger_dirs)
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
                problems=tuple(map(str, as_list(journal["problems"]))),
                warnings=tuple(map(str, as_list(journal["warnings"]))),
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
    if not dirs and stamp is not None and stamp["directory"] in as_list(stamp["journal_dirs"]):
        return report.path
    return None


def _index_problems(
    fs: FileSystem,
    report: DirReport,
    marks: list[dict[str, object]],
    extra_ledger_dirs: Sequence[str],
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
        copies = logs.get(log_id, [])
        path, size = copies[0] if copies else (None, None)
        last_length = None
        if path is not None and largest >= 4:
            try:
                handle = fs.open(path, read_only=True)
                try:
                    last_length = record_length_before(handle.pread(largest - 4, 4))
                finally:
                    handle.close()
            except BkrefError:
                last_length = None  # unreadable: the log's own description says so
        damage = indexed_log_damage(
            log_id,
            count,
            largest,
            path,
            size,
            last_length=last_length,
            copies=[copy for copy, _size in copies],
        )
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
) -> dict[int, list[tuple[str, int | None]]]:
    """Every entry log of this directory and of ``extra_ledger_dirs``: id -> every (path,
    size) of that name, this directory's first (a start reads the first ledger directory
    that has it; the order of the others is the order they were given)."""
    out: dict[int, list[tuple[str, int | None]]] = {}
    for log in report.logs:
        if log.log_id is not None:
            out.setdefault(log.log_id, []).append((log.path, log.size_bytes))
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
                out.setdefault(log_id, []).append((join(base, name), st.st_size))
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
        f"{','.join(map(str, as_list(stamp['journal_dirs'])))}; ledgers "
        f"{','.join(map(str, as_list(stamp['ledger_dirs'])))}; index in {stamp['index_dir']}"
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


def name_kind(name: str) -> str:
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
        name.endswith(JOURNAL_FILE_SUFFIX) and HEX_ID.fullmatch(name[: -len(JOURNAL_FILE_SUFFIX)])
    ):
        return "journal"
    if LAST_MARK_NAME.fullmatch(name):
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
    kind = name_kind(name)
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
                description=cookie_summary(cookie),
                problems=(str(error),) if error is not None else (),
            )
        )
    elif kind == "instance_id":
        instance = read_text(fs, path)
        report.instance_ids.append({"name": name, "path": path, "text": instance})
        report.items.append(attrs.evolve(item, description=f"instance id file: {instance!r}"))
    elif kind in ("compacting_log", "compacted_log"):
        leftover = describe_leftover(fs, path, kind)
        report.compaction_leftovers.append(leftover)
        report.items.append(attrs.evolve(item, description=str(leftover["note"])))
    elif kind == "tmp":
        report.items.append(attrs.evolve(item, description=TMP_NOTE))
    else:
        report.items.append(
            attrs.evolve(item, description="unknown file: not a file a bookie writes")
        )


def read_text(fs: FileSystem, path: str) -> str | None:
    try:
        return read_small(fs, path, 256).decode("utf-8", "backslashreplace")
    except BkrefError:
        return None


def describe_leftover(fs: FileSystem, path: str, kind: str) -> dict[str, object]:
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
        text = index_summary(index)
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
            if regular and idx_ledger(file_name) is not None:
                described = describe_bk_index(file_path)
                report.bk_index_files.append(described)
                found += 1
                text, problems, warnings = bk_index_line(described)
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
        str(seg["name"]): seg for seg in as_list(index["segments"]) if isinstance(seg, dict)
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
