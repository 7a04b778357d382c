"""``bkref inspect``: journals, lastMark and where replay would start and stop.

Spec page: spec/format/journal.md ("Replay", "The lastMark file", "Damage"). The JSON objects
are docs/inspect.md's ``journal``, ``last_mark`` and ``replay``.

Why a module of its own (split from proofs/cli/inspect.py): this is where inspect says what is
damage in a journal and a lastMark, and it must say what recovery says (issue 26: it did not).
So it decides nothing itself: a journal's records come from the engine's replay
(impl/journal/replay.py), where its scan stops from ``walk_lengths`` and ``stop_facts``,
judged by ``judge_stop`` (impl/journal/damage.py); a lastMark is read by ``read_dir_mark``
and judged by ``mark_problem``, the functions recovery calls; and the replay plan runs the
engine's replay with the mark, the lastMark file and the strictness recovery would use.
tests/unit/impl/bookie/test_damage.py runs every row of the page's Damage tables through
both.

Inspect knows less than a start: given one journal it does not know lastMark, so it judges
the journal as after a BookKeeper lastMark (lenient), and says in a warning what a start
after a bkref lastMark would refuse. Given a directory with the ledger directories
(``--ledger-dir``), it judges as a start would: strictly after a bkref lastMark, and damage in
a journal wholly before the mark, which replay never reads, is a warning.
"""

from __future__ import annotations

import attrs

from impl.bookie.recovery import coverage_record_damage
from impl.format.journal import (
    CURRENT_VERSION,
    DEFAULT_MAX_RECORD_BYTES,
    MIN_COMPAT_VERSION,
    VERSION_HEADER_SIZE,
    JournalRecord,
    decode_version,
    header_size,
)
from impl.format.names import COVERAGE_FILE_NAME, journal_file_name, parse_journal_file_name
from impl.fs.api import FileSystem, join, split
from impl.journal.damage import judge_stop
from impl.journal.last_mark import NO_MARK, LogMark, read_coverage_record, read_dir_mark
from impl.journal.replay import JournalReplay, mark_problem, stop_facts, walk_lengths
from impl.limits import LIMITS
from proofs.cli.inspect_fs import ReadOnlyFs, not_regular, read_small
from spec.errors import BkrefError, DamagedFile

__all__ = [
    "MarkContext",
    "choose_mark",
    "coverage_problem",
    "describe_coverage",
    "describe_journal",
    "describe_last_mark",
    "journal_summary",
    "mark_context",
    "other_mark_problems",
    "replay_plan",
    "replay_text",
]


def describe_journal(
    fs: FileSystem, path: str, *, strict: bool = False, replayed: bool = True
) -> dict[str, object]:
    """One journal file, scanned from its header by the engine's replay as if it were the
    only journal: its records, padding, and where and why the scan stops, judged as recovery
    judges it (``strict``: after a bkref lastMark). ``replayed`` False: the journal lies
    wholly before lastMark, so its damage is a warning (replay never reads it). Never raises
    for what the file holds."""
    directory, name = split(path)
    journal_id = parse_journal_file_name(name)
    out: dict[str, object] = {
        "name": name,
        "path": path,
        "journal_id": journal_id,
        "size_bytes": None,
        "version": None,
        "header_bytes": None,
        "records": [],
        "counts": {"data": 0, "key": 0, "fence": 0, "lac": 0},
        "padding_records": 0,
        "padding_bytes": 0,
        "scan_end_offset": None,
        "stop": None,
        "stop_reason": None,
        "bytes_after_stop": None,
        "problems": [],
        "warnings": [],
    }
    problems: list[str] = []
    warnings: list[str] = []
    out["problems"], out["warnings"] = problems, warnings
    if journal_id is None:
        problems.append(
            f"{name!r} is not a journal name BookKeeper reads (<hex id>.txn, id a Java long)"
        )
        return out
    reason = not_regular(path)
    if reason is not None:
        problems.append(reason)
        out["stop"] = "unreadable"
        return out
    ro = ReadOnlyFs(fs, only={directory: {name}})
    try:
        first = read_small(fs, path, VERSION_HEADER_SIZE)
        sized = ro.open(path)
        try:
            size = sized.size()
        finally:
            sized.close()
    except BkrefError as exc:
        problems.append(f"cannot read: {exc}")
        out["stop"] = "unreadable"
        return out
    version = decode_version(first)
    out["size_bytes"], out["version"] = size, version
    valid_version = MIN_COMPAT_VERSION <= version <= CURRENT_VERSION
    start = header_size(version) if valid_version else 0
    out["header_bytes"] = start if valid_version else None
    scanned = _scan(ro, directory, journal_id, start)
    out["counts"], out["records"] = scanned.counts, scanned.records
    if scanned.error is not None:
        # An invalid record (or version), which the walk of lengths may not see (a meta
        # record's own fields): replay refuses it as it is.
        stop_at = scanned.error_offset if scanned.error_offset is not None else scanned.end
        out["scan_end_offset"], out["bytes_after_stop"] = stop_at, max(0, size - stop_at)
        invalid = scanned.invalid
        out["stop"] = "invalid_record" if invalid else "damaged"
        out["stop_reason"] = scanned.error
        out["padding_records"], out["padding_bytes"] = scanned.pads, scanned.pad_bytes
        (problems if replayed else warnings).append(_before_mark(scanned.error, replayed))
        return out
    handle = ro.open(path, read_only=True)
    try:
        stop, why = walk_lengths(
            handle,
            version,
            size,
            start,
            size + 1,
            max_record_bytes=DEFAULT_MAX_RECORD_BYTES,
            chunk_bytes=LIMITS.replay_chunk_bytes,
        )
        if why == "":
            # The walk started at or past the end (a file cut inside its header): the scan
            # meets the end of the file at once.
            why = "end"
        assert why in ("end", "zero", "cut"), why  # "invalid" is the scan's error above
        facts = stop_facts(
            handle,
            version,
            stop,
            size,
            why,
            chunk_bytes=LIMITS.replay_chunk_bytes,
            max_record_bytes=DEFAULT_MAX_RECORD_BYTES,
        )
    finally:
        handle.close()
    verdict = judge_stop(facts, strict=strict)
    pads, pad_bytes = scanned.pads, scanned.pad_bytes
    if stop > scanned.end:
        pads, pad_bytes = pads + 1, pad_bytes + stop - scanned.end
    out["padding_records"], out["padding_bytes"] = pads, pad_bytes
    out["scan_end_offset"], out["bytes_after_stop"] = stop, size - stop
    out["stop"], out["stop_reason"] = verdict.code, verdict.text
    if verdict.damage is not None:
        text = f"{verdict.text}. Damage: {verdict.damage}"
        (problems if replayed else warnings).append(_before_mark(text, replayed))
    elif verdict.code != "end_of_file" and verdict.code != "preallocated_zeros":
        warnings.append(verdict.text)
    return out


def _before_mark(text: str, replayed: bool) -> str:
    if replayed:
        return text
    return f"{text} (this journal lies wholly before lastMark: replay never reads it)"


@attrs.define
class _Scanned:
    """What the engine's replay yields of one journal from its header."""

    records: list[dict[str, object]] = attrs.Factory(list)
    counts: dict[str, int] = attrs.Factory(dict)
    pads: int = 0
    pad_bytes: int = 0
    #: Where the last record yielded ends.
    end: int = 0
    error: str | None = None
    error_offset: int | None = None
    invalid: bool = False
    #: Replay raised before the end: the records come from a second scan.
    interrupted: bool = False


def _scan(fs: FileSystem, directory: str, journal_id: int, start: int) -> _Scanned:
    """The records replay yields from the header; an invalid record (or version) stops it
    with recovery's error. A stop no crash leaves is judged by the caller (strictly or not),
    so it is no error here. Replay refuses either before it yields a record, so the records
    before them come from a second scan under skipReplayJournalInvalidRecord's rule, which
    yields them and skips the rest."""
    first = _collect(fs, directory, journal_id, start, skip_invalid=False)
    if not first.interrupted:
        return first
    again = _collect(fs, directory, journal_id, start, skip_invalid=True)
    again.error, again.error_offset, again.invalid = first.error, first.error_offset, first.invalid
    return again


def _collect(
    fs: FileSystem, directory: str, journal_id: int, start: int, *, skip_invalid: bool
) -> _Scanned:
    out = _Scanned(counts={"data": 0, "key": 0, "fence": 0, "lac": 0}, end=start)
    try:
        replay = JournalReplay(fs, directory, LogMark(journal_id, 0), skip_invalid=skip_invalid)
        for record in replay:  # one at a time: the payloads are not kept
            out.counts[record.kind] += 1
            if record.offset > out.end:
                out.pads, out.pad_bytes = out.pads + 1, out.pad_bytes + record.offset - out.end
            out.end = record.end_offset
            out.records.append(_record_json(record))
    except DamagedFile as exc:
        out.interrupted = True
        if not exc.problem.startswith("a zero length"):  # else a stop, judged by the caller
            out.error, out.error_offset = str(exc), exc.offset
            out.invalid = "invalid record" in exc.problem
    except BkrefError as exc:
        out.interrupted = True
        out.error = str(exc)
    return out


def _record_json(record: JournalRecord) -> dict[str, object]:
    out: dict[str, object] = {
        "kind": record.kind,
        "ledger": record.ledger_id,
        "entry": record.entry_id,
        "offset": record.offset,
        "size": record.end_offset - record.offset - 4,
    }
    out["body_bytes"] = len(record.payload) if record.kind != "data" else len(record.payload) - 16
    return out


# --- lastMark -------------------------------------------------------------------------------


def describe_last_mark(fs: FileSystem, path: str) -> dict[str, object]:
    """A lastMark file, read by the reader recovery uses (``read_dir_mark``): the journal and
    offset it names (``lastMark.<n>`` is the mark of journal directory n when BookKeeper
    runs several journals). A missing or empty file is no mark, as at a start (rows m1, m2);
    a file no crash leaves is an error (m3 to m5)."""
    directory, name = split(path)
    index = name.partition(".")[2]
    out: dict[str, object] = {
        "name": name,
        "path": path,
        "journal_index": int(index) if index.isdigit() else 0,
        "journal_id": None,
        "journal_file": None,
        "offset": None,
        "size_bytes": None,
        "used": False,
        "index_segment": None,
        "index_deleted_records": None,
        "error": None,
        "note": None,
    }
    reason = not_regular(path)
    if reason is not None:
        out["error"] = f"not a lastMark: {reason}"
        return out
    try:
        size = len(read_small(fs, path, 64))
    except BkrefError as exc:
        out["error"] = f"not a lastMark: {exc}"
        return out
    out["size_bytes"] = size
    read = read_dir_mark(ReadOnlyFs(fs), directory, name)
    if read.damaged:
        out["error"] = read.reason
        return out
    if read.mark is None:
        out["note"] = f"no mark: {read.reason}"
        return out
    mark = read.mark
    out["journal_id"], out["offset"] = mark.journal_id, mark.offset
    if read.coverage is not None:
        out["index_segment"] = read.coverage.segment_seq
        out["index_deleted_records"] = read.coverage.deleted_records
    out["journal_file"] = journal_file_name(mark.journal_id)
    return out


def describe_coverage(fs: FileSystem, path: str) -> dict[str, object]:
    """The journal directory's coverage record (spec/format/journal.md, "The coverage
    record"), read by the reader a start uses (``read_coverage_record``): what the ledger
    directories held at least when the bookie last wrote it."""
    directory, name = split(path)
    out: dict[str, object] = {
        "name": name,
        "path": path,
        "journal_id": None,
        "journal_file": None,
        "offset": None,
        "index_segment": None,
        "index_deleted_records": None,
        "error": None,
    }
    reason = not_regular(path)
    if reason is not None:
        out["error"] = reason
        return out
    read = read_coverage_record(ReadOnlyFs(fs), directory)
    if read.damaged:
        out["error"] = read.reason
    elif read.mark is not None:
        out["journal_id"], out["offset"] = read.mark.journal_id, read.mark.offset
        out["journal_file"] = journal_file_name(read.mark.journal_id)
        if read.coverage is not None:
            out["index_segment"] = read.coverage.segment_seq
            out["index_deleted_records"] = read.coverage.deleted_records
    return out


def coverage_problem(
    fs: FileSystem,
    journal_dir: str,
    context: MarkContext,
    found_marks: bool,
    index: tuple[int, int] | None,
) -> str | None:
    """What a start says of the ledger directories against the journal directory's coverage
    record (``coverage_record_damage``, impl/bookie/recovery.py): ``found_marks``, lastMark
    files were read; ``index``, the index's newest segment and deletes (None: not given)."""
    path = join(journal_dir, COVERAGE_FILE_NAME)
    if not fs.exists(path) or not_regular(path) is not None:
        return None
    record = read_coverage_record(ReadOnlyFs(fs), journal_dir)
    mark = context.mark
    present = mark.journal_id == 0 or fs.exists(
        join(journal_dir, journal_file_name(mark.journal_id))
    )
    damage = coverage_record_damage(
        path,
        record,
        mark if found_marks else None,
        None if index is None else index[0],
        None if index is None else index[1],
        journal_present=present,
    )
    return None if damage is None else str(damage)


def choose_mark(marks: list[dict[str, object]]) -> dict[str, object] | None:
    """The mark recovery uses: the largest readable lastMark of journal 0 (LastLogMark.readLog);
    sets ``used`` on every mark."""
    usable = [
        m
        for m in marks
        if m["error"] is None and m["journal_index"] == 0 and m["journal_id"] is not None
    ]
    best = max(
        usable, key=lambda m: (int(str(m["journal_id"])), int(str(m["offset"]))), default=None
    )
    for mark in marks:
        mark["used"] = mark is best
    return best


@attrs.frozen
class MarkContext:
    """What a start would know of lastMark, from the marks inspect read: the mark replay
    starts from, its file, and whether bkref wrote it (its index coverage: then every
    journal from it on is judged strictly)."""

    mark: LogMark
    path: str | None
    strict: bool


def mark_context(marks: list[dict[str, object]]) -> MarkContext:
    best = choose_mark(marks)
    if best is None:
        return MarkContext(NO_MARK, None, False)
    mark = LogMark(int(str(best["journal_id"])), int(str(best["offset"])))
    return MarkContext(mark, str(best["path"]), best["index_segment"] is not None)


def other_mark_problems(
    fs: FileSystem, journal_dir: str, marks: list[dict[str, object]], context: MarkContext
) -> list[str]:
    """Every readable lastMark but the one replay starts from that no checkpoint leaves
    (row m10), judged by recovery's ``mark_problem``."""
    out = []
    seen = {context.mark}
    for entry in marks:
        if entry["error"] is not None or entry["journal_id"] is None:
            continue
        mark = LogMark(int(str(entry["journal_id"])), int(str(entry["offset"])))
        if mark in seen or entry["journal_index"] != 0:
            continue
        seen.add(mark)
        problem, _invalid = mark_problem(ReadOnlyFs(fs), journal_dir, mark, skip_invalid=False)
        if problem is not None:
            out.append(f"{entry['path']}: {problem}: a crash cannot leave this; damaged")
    return out


def replay_plan(
    fs: FileSystem, journal_dir: str | None, context: MarkContext, found_mark: bool
) -> tuple[dict[str, object], str | None]:
    """Where journal replay would start and stop, by the engine's replay as recovery runs it
    (the mark, its file, strictly after a bkref lastMark) over the journals of
    ``journal_dir`` (read-only): the ``replay`` object, and the problem when replay would
    refuse to start."""
    mark = context.mark
    out: dict[str, object] = {
        "last_mark": None
        if context.path is None
        else {
            "journal_file": journal_file_name(mark.journal_id),
            "journal_id": mark.journal_id,
            "offset": mark.offset,
        },
        "last_mark_path": context.path,
        "journals": [],
        "records": 0,
        "end": None,
        "error": None,
        "note": None,
    }
    if not found_mark:
        out["note"] = (
            "no lastMark found among the directories given (lastMark lives in the ledger "
            "directories: pass them with --ledger-dir); without one, replay reads every journal"
        )
    if journal_dir is None:
        return out, None
    try:
        replay = JournalReplay(
            ReadOnlyFs(fs),
            journal_dir,
            mark,
            skip_invalid=False,
            mark_file=context.path,
            bkref_mark=context.strict,
        )
        out["journals"] = [journal_file_name(jid) for jid in replay.journal_ids]
        count = 0
        for _ in replay:
            count += 1
        out["records"] = count
        end = replay.end_mark
        out["end"] = {
            "journal_file": journal_file_name(end.journal_id),
            "journal_id": end.journal_id,
            "offset": end.offset,
        }
    except BkrefError as exc:
        out["error"] = str(exc)
        return out, f"journal replay would fail: {exc}"
    return out, None


# --- text -----------------------------------------------------------------------------------


def journal_summary(journal: dict[str, object]) -> str:
    if journal["version"] is None:
        return "journal, not readable"
    counts = journal["counts"]
    assert isinstance(counts, dict)
    kinds = ", ".join(f"{counts[k]} {k}" for k in ("data", "key", "fence", "lac"))
    records = journal["records"]
    assert isinstance(records, list)
    return (
        f"journal version {journal['version']}, {journal['size_bytes']} bytes, "
        f"{len(records)} records ({kinds}), "
        f"{journal['padding_records']} padding ({journal['padding_bytes']} bytes); "
        f"the scan stops at offset {journal['scan_end_offset']}: {journal['stop_reason']}"
    )


def replay_text(replay: dict[str, object]) -> str:
    mark = replay["last_mark"]
    start = "the oldest journal (no lastMark)"
    if isinstance(mark, dict):
        start = f"journal {mark['journal_file']}, offset {mark['offset']} (lastMark)"
    text = f"would start at {start}"
    journals = replay["journals"]
    assert isinstance(journals, list)
    end = replay["end"]
    if isinstance(end, dict):
        text += (
            f", read {len(journals)} journal(s) ({', '.join(map(str, journals))}), "
            f"{replay['records']} records, and end at journal {end['journal_file']}, "
            f"offset {end['offset']}"
        )
    if replay["error"] is not None:
        text += f"; it would fail: {replay['error']}"
    if replay["note"] is not None:
        text += f". {replay['note']}"
    return text
