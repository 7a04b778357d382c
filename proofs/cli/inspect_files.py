"""``bkref inspect``'s description of one file of each kind a bookie writes beside its
entry logs and journals: lastId, BookKeeper's VERSION cookie, bkref's index segments and
deleted list, BookKeeper's ``.idx`` files, and the notes on the reserve and compaction
leftovers.

Why a module of its own (split from proofs/cli/inspect.py): each describer reads one file
through the engine's own decoder and is used both for a file given as PATH and for the
files found in a directory.
"""

from __future__ import annotations

import os
import re

import attrs

from impl.format.ledger_index import (
    SEGMENT_KIND_FULL,
    DeletedFileDamage,
    decode_deleted_file,
    decode_segment,
)
from impl.format.names import (
    DELETED_FILE_NAME,
    LAST_MARK_FILE_NAME,
    parse_bk_index_file_name,
    parse_segment_file_name,
)
from impl.fs.api import FileSystem, join, split
from impl.fs.os_backend import OsFileSystem
from impl.index.bk_metadata import describe_idx_file
from impl.index.ledger_index import LedgerIndex
from proofs.cli.inspect_fs import (
    ReadOnlyFs,
    read_small,
)
from proofs.cli.inspect_log import (
    as_list,
)
from spec.errors import BkrefError

HEX_ID = re.compile(r"[0-9a-fA-F]+")
LAST_MARK_NAME = re.compile(re.escape(LAST_MARK_FILE_NAME) + r"(?:\.(\d+))?")


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
    if HEX_ID.fullmatch(line) and int(line, 16) > 0:
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
        segments.append(describe_segment(ro, full, seq))
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


def describe_segment(fs: FileSystem, path: str, seq: int) -> dict[str, object]:
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


def idx_ledger(name: str) -> int | None:
    """The ledger of an ``<hex id>.idx`` name (impl/format/names.py), None for any other
    name (a ``.rloc`` copy included)."""
    parsed = parse_bk_index_file_name(name)
    return parsed[0] if parsed is not None and not parsed[1] else None


def describe_bk_index(path: str) -> dict[str, object]:
    """A BookKeeper ledger index file (InterleavedLedgerStorage,
    ``current/<hex (id >> 8) & 0xff>/<hex id & 0xff>/<hex id>.idx``): its ledger id from the
    name, its size, whether it sits where IndexPersistenceMgr.getLedgerName puts it, and its
    header and positions as impl/format/bk_index.py reads them (spec/format/bk_index.md).
    A torn header is a warning (a crash can leave one); a damaged one is a problem."""
    head, name = split(path)
    ledger_id = idx_ledger(name)
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


def bk_index_line(described: dict[str, object]) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """One ``.idx`` file's line, problems and warnings: a damaged header is a problem, a torn
    one (a crash can leave it: spec/format/bk_index.md) a warning."""
    contents = described["contents"]
    assert isinstance(contents, dict)
    warnings = tuple(map(str, as_list(described["warnings"])))
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


def cookie_summary(cookie: dict[str, object]) -> str:
    if cookie["error"] is not None:
        return f"BookKeeper cookie, unreadable: {cookie['error']}"
    return (
        f"BookKeeper cookie, layout {cookie['layout_version']}: bookie {cookie['bookie_host']}, "
        f"journal dirs {cookie['journal_dirs']}, ledger dirs {cookie['ledger_dirs']}, "
        f"index dirs {cookie['index_dirs']}, instance id {cookie['instance_id']}"
    )


def index_summary(index: dict[str, object]) -> str:
    if index["error"] is not None:
        return f"bkref's ledger index, damaged: {index['error']}"
    segments = as_list(index["segments"])
    return (
        f"bkref's ledger index: {len(segments)} segment(s), chain {index['chain']}, "
        f"{index['ledgers']} ledgers ({index['keyed_ledgers']} with a master key), "
        f"{index['entries']} entries, fenced {index['fenced_ledgers']}, "
        f"deleted {index['deleted_ledgers']}"
    )
