"""``bkref inspect`` on whole bookies: BookKeeper's directories, bkref's own, and hostile ones.

The BookKeeper-like trees are written with the pages' independent writers
(tests/unit/bk_layout.py, tests/unit/bk_journal_layout.py), never with bkref's codecs, so the
reports are checked against what was built. bkref's own bookie is made by the engine (adds,
fences, deletes, a checkpoint) and inspected afterwards; inspect must change none of its
bytes. FIFOs, symlink loops, closed pipes and full disks run inspect in a subprocess with a
timeout, because the failures they catch are hangs and tracebacks at exit.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import proofs.cli.inspect as inspect_cmd
import proofs.cli.main
from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import load_config
from impl.fs.os_backend import OsFileSystem
from spec.ids import EntryId, LedgerId
from tests.unit import bk_index_layout as bki
from tests.unit import bk_journal_layout as bkj
from tests.unit import bk_layout

REPO = Path(__file__).resolve().parents[4]
DOCS = REPO / "docs" / "inspect.md"
#: Generous: a hang is the failure; a passing run takes well under a second.
TIMEOUT_S = 60

JOURNAL_ID = 0x18BCFE56800
COOKIE = (
    "5\n"
    'bookieHost: "10.0.0.7:3181"\n'
    'journalDir: "/data/bk/journal"\n'
    'ledgerDirs: "2\\t/data/bk/ledgers0\\t/data/bk/ledgers1"\n'
    'instanceId: "0a1b2c3d-aaaa-bbbb-cccc-0123456789ab"\n'
)


@pytest.fixture(autouse=True)
def only_inspect(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    rows = tuple(row for row in proofs.cli.main.COMMANDS if row[0] == "inspect")
    monkeypatch.setattr(proofs.cli.main, "COMMANDS", rows)
    yield


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = proofs.cli.main.main(["inspect", *argv, "--json"])
    obj = json.loads(capsys.readouterr().out)
    assert isinstance(obj, dict)
    return code, obj


def run_text(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = proofs.cli.main.main(["inspect", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def subprocess_inspect(*argv: str, shell: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if shell is not None:
        return subprocess.run(
            ["bash", "-c", shell],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            cwd=REPO,
        )
    return subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "inspect", *argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
        cwd=REPO,
    )


# --- a BookKeeper bookie, built from the pages -------------------------------------------------


def bk_journal() -> bkj.JournalBuilder:
    journal = bkj.JournalBuilder(version=6)
    journal.key(1, b"pw")
    journal.entry(1, 0, b"hello")
    journal.flush()
    journal.entry(1, 1, b"world")
    journal.lac(1, b"\x00" * 8)
    journal.fence(1)
    journal.flush()
    return journal


def make_bk_bookie(root: Path) -> dict[str, object]:
    """A journal directory and a ledger directory as BookKeeper (InterleavedLedgerStorage,
    with a DbLedgerStorage directory beside it) leaves them after a clean close."""
    journal = bk_journal()
    mark_offset = journal.written[2].offset  # after the first flushed group and its padding
    jcur = root / "journal" / "current"
    write(jcur / bkj.journal_name(JOURNAL_ID), journal.file_bytes(zero_tail=4096))
    write(jcur / "VERSION", COOKIE.encode())
    lcur = root / "ledgers" / "current"
    log0 = bk_layout.build_log([(1, 0, b"hello"), (2, 0, b"two")])
    write(lcur / "0.log", log0.data)
    write(lcur / "1.log", b"")  # preallocated after the clean close
    write(lcur / "lastId", b"1\n")
    write(lcur / "lastMark", bkj.last_mark(JOURNAL_ID, mark_offset))
    write(lcur / "VERSION", COOKIE.encode())
    write(lcur / "instanceId", b"0a1b2c3d-aaaa-bbbb-cccc-0123456789ab\n")
    write(lcur / "0" / "1" / "1.idx", bytes(1024))  # ledger 1: (1 >> 8) & 0xff = 0, 1 & 0xff = 1
    write(lcur / "1" / "2" / "102.idx", bytes(64))  # ledger 0x102
    write(lcur / "ledgers" / "CURRENT", b"MANIFEST-000001\n")
    write(lcur / "ledgers" / "MANIFEST-000001", bytes(40))
    write(lcur / "ledgers" / "000003.log", bytes(10))
    write(lcur / "locations" / "CURRENT", b"MANIFEST-000001\n")
    write(lcur / "2.log.compacting", bk_layout.header())
    write(lcur / "3.log.0.compacted", bk_layout.build_log([(2, 0, b"two")]).data)
    return {"journal": journal, "mark_offset": mark_offset, "log0": log0}


def regular_files(root: Path) -> set[str]:
    """Every regular file under ``root``, relative, outside RocksDB's directories."""
    out = set()
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not re.match(r"current/(ledgers|locations)/", rel):
            out.add(rel)
    return out


def test_every_file_of_a_bookkeeper_ledger_directory_is_described(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = make_bk_bookie(tmp_path)
    before = snapshot(tmp_path)
    code, obj = run_json(capsys, str(tmp_path / "ledgers"))
    assert snapshot(tmp_path) == before, "inspect changed the bookie"
    assert code == 0, obj["problems"]
    files = obj["files"]
    assert isinstance(files, list)
    names = {f["name"] for f in files}
    assert regular_files(tmp_path / "ledgers") <= names
    kinds = {f["name"]: f["kind"] for f in files}
    assert kinds["current/1.log"] == "entry_log"
    assert kinds["current/0/1/1.idx"] == "bk_index_file"
    assert kinds["current/ledgers"] == kinds["current/locations"] == "rocksdb"
    assert kinds["current/2.log.compacting"] == "compacting_log"
    assert kinds["current/3.log.0.compacted"] == "compacted_log"
    assert "unknown" not in kinds.values()
    logs = obj["entry_logs"]
    assert isinstance(logs, list)
    assert [(log["name"], log["empty"]) for log in logs] == [("0.log", False), ("1.log", True)]
    log0 = built["log0"]
    assert isinstance(log0, bk_layout.BuiltLog)
    assert logs[0]["ledgers_map"] == {str(k): v for k, v in log0.ledgers.items()}
    assert obj["last_marks"] == [
        {
            "name": "lastMark",
            "path": str(tmp_path / "ledgers" / "current" / "lastMark"),
            "journal_index": 0,
            "journal_id": JOURNAL_ID,
            "journal_file": bkj.journal_name(JOURNAL_ID),
            "offset": built["mark_offset"],
            "size_bytes": 16,
            "used": True,
            "index_segment": None,
            "index_deleted_records": None,
            "error": None,
            "note": None,
        }
    ]
    assert obj["last_id"] == {
        "name": "lastId",
        "path": str(tmp_path / "ledgers" / "current" / "lastId"),
        "text": "1\n",
        "value": 1,
    }
    cookies = obj["cookies"]
    assert isinstance(cookies, list)
    assert {k: cookies[0][k] for k in ("layout_version", "bookie_host", "instance_id")} == {
        "layout_version": 5,
        "bookie_host": "10.0.0.7:3181",
        "instance_id": "0a1b2c3d-aaaa-bbbb-cccc-0123456789ab",
    }
    assert cookies[0]["ledger_dirs"] == ["/data/bk/ledgers0", "/data/bk/ledgers1"]
    assert cookies[0]["journal_dirs"] == ["/data/bk/journal"]
    assert cookies[0]["index_dirs"] is None and cookies[0]["error"] is None
    instance = obj["instance_ids"]
    assert isinstance(instance, list)
    assert instance[0]["text"] == "0a1b2c3d-aaaa-bbbb-cccc-0123456789ab\n"
    idx = obj["bk_index_files"]
    assert isinstance(idx, list)
    assert [(f["ledger_id"], f["size_bytes"], f["description"]) for f in idx] == [
        (1, 1024, "BookKeeper ledger index file"),
        (0x102, 64, "BookKeeper ledger index file"),
    ]
    assert all(f["warnings"] == [] for f in idx)
    rocks = obj["rocksdb_dirs"]
    assert isinstance(rocks, list)
    assert [(r["name"], r["files"], r["has_current"]) for r in rocks] == [
        ("ledgers", 3, True),
        ("locations", 1, True),
    ]
    leftovers = obj["compaction_leftovers"]
    assert isinstance(leftovers, list)
    # 2.log.compacting is removed; 3.log.0.compacted is well formed but its source 0.log is
    # here and 3.log is not yet: recovery links 3.log, moves the index, unlinks 0.log and it.
    assert [(x["name"], x["recovery"]) for x in leftovers] == [
        ("2.log.compacting", "remove"),
        ("3.log.0.compacted", "finish"),
    ]
    assert leftovers[1]["recovery_steps"][0] == "link 3.log"
    assert leftovers[1]["recovery_steps"][-1] == "unlink 3.log.0.compacted"
    assert obj["index"] is None
    assert obj["replay"] is None  # no journal here, no --ledger-dir
    assert obj["exit_code"] == 0


def test_the_text_report_of_a_bookkeeper_ledger_directory_names_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_bk_bookie(tmp_path)
    code, out, err = run_text(capsys, str(tmp_path / "ledgers"))
    assert code == 0, out
    assert err == ""
    for expected in (
        "2 (1 empty: preallocated, normal)",
        "preallocated, normal",
        f"journal {bkj.journal_name(JOURNAL_ID)}, offset",
        "(the largest inspected: recovery uses the largest of all)",
        "instance id 0a1b2c3d-aaaa-bbbb-cccc-0123456789ab",
        "2 BookKeeper ledger index files (.idx), ledgers 1, 258",
        "ledgers/: DbLedgerStorage's ledgers index",
        "2.log.compacting: a compaction log that was still being written",
        "Recovery removes it",
        "3.log.0.compacted: a flushed compaction log of log 0.log",
        "Recovery finishes it",
    ):
        assert expected in " ".join(out.split()), (expected, out)
    assert all(len(line) <= inspect_cmd.TEXT_WIDTH for line in out.splitlines())


def test_a_bookkeeper_journal_directory_tells_records_and_where_replay_starts_and_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = make_bk_bookie(tmp_path)
    journal = built["journal"]
    assert isinstance(journal, bkj.JournalBuilder)
    code, obj = run_json(
        capsys, str(tmp_path / "journal"), "--ledger-dir", str(tmp_path / "ledgers")
    )
    assert code == 0, obj["problems"]
    journals = obj["journals"]
    assert isinstance(journals, list) and len(journals) == 1
    found = journals[0]
    assert found["version"] == 6 and found["header_bytes"] == 512
    assert [(r["kind"], r["ledger"], r["entry"], r["offset"]) for r in found["records"]] == [
        (w.kind, w.ledger, w.entry, w.offset) for w in journal.written
    ]
    assert found["counts"] == {"data": 2, "key": 1, "fence": 1, "lac": 1}
    assert found["padding_records"] == 2
    assert found["scan_end_offset"] == len(journal.data)
    assert found["stop"] == "preallocated_zeros"
    assert found["bytes_after_stop"] == 4096
    replay = obj["replay"]
    assert isinstance(replay, dict)
    assert replay["last_mark"] == {
        "journal_file": bkj.journal_name(JOURNAL_ID),
        "journal_id": JOURNAL_ID,
        "offset": built["mark_offset"],
    }
    assert replay["records"] == 3  # entry 1, the LAC and the fence come after the mark
    assert replay["end"] == {
        "journal_file": bkj.journal_name(JOURNAL_ID),
        "journal_id": JOURNAL_ID,
        "offset": len(journal.data),
    }
    assert replay["error"] is None
    code, out, _ = run_text(capsys, str(tmp_path / "journal"))
    assert code == 0
    flat = " ".join(out.split())
    assert "5 records (2 data, 1 key, 1 fence, 1 lac)" in flat
    assert "zeros to the end of the file (4096 bytes): BookKeeper's preallocation" in flat
    assert "no lastMark found among the directories given" in flat


def test_one_journal_file_is_described_on_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_bk_bookie(tmp_path)
    path = tmp_path / "journal" / "current" / bkj.journal_name(JOURNAL_ID)
    code, obj = run_json(capsys, str(path))
    assert code == 0
    assert obj["name"] == bkj.journal_name(JOURNAL_ID)
    assert obj["journal_id"] == JOURNAL_ID
    code, out, _ = run_text(capsys, str(path))
    assert code == 0
    assert re.search(r"\b512\s+key\s+ledger 1\s+entry -4096", out), out


@pytest.mark.parametrize(
    ("damage", "stop", "code", "says"),
    [
        ("torn", "torn_record", 0, "a record cut short"),
        ("zeros_then_data", "zero_length_then_data", 1, "are not zero"),
        ("negative_length", "invalid_record", 1, "negative length -5"),
    ],
)
def test_a_journal_scan_says_where_and_why_it_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, stop: str, code: int, says: str
) -> None:
    journal = bk_journal()
    good_end = len(journal.data)
    if damage == "torn":
        data = journal.file_bytes() + bkj.record(bkj.entry_payload(1, 2, b"cut"))[:-2]
    elif damage == "zeros_then_data":
        data = journal.file_bytes() + bytes(4) + bkj.record(bkj.entry_payload(1, 2, b"lost"))
    else:
        data = journal.file_bytes() + (-5).to_bytes(4, "big", signed=True) + bytes(20)
    path = write(tmp_path / "current" / "a.txn", data)
    got, obj = run_json(capsys, str(path))
    assert got == code
    assert obj["stop"] == stop
    assert obj["scan_end_offset"] == good_end
    assert says in str(obj["stop_reason"])
    assert len(obj["records"]) == len(journal.written)  # type: ignore[arg-type]
    got, dir_obj = run_json(capsys, str(tmp_path))
    assert got == code
    assert (dir_obj["problems"] != []) == (code == 1)


@pytest.mark.parametrize(
    ("offset", "ok"), [("record_end", True), ("past_end", False), ("mid_record", False)]
)
def test_a_last_mark_a_crash_cannot_leave_is_a_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], offset: str, ok: bool
) -> None:
    journal = bk_journal()
    write(tmp_path / "current" / bkj.journal_name(5), journal.file_bytes())
    value = {
        "record_end": journal.written[2].offset,
        "past_end": len(journal.data) + 512,
        "mid_record": journal.written[1].offset + 3,
    }[offset]
    write(tmp_path / "current" / "lastMark", bkj.last_mark(5, value))
    code, obj = run_json(capsys, str(tmp_path))
    assert (code == 0) == ok, obj["problems"]
    problems = " ".join(map(str, obj["problems"]))  # type: ignore[call-overload]
    if not ok:  # said as a start says it (impl/journal/replay.py, mark_problem)
        assert "journal replay would fail" in problems
        assert re.search("points past the end|not on a record boundary", problems), problems
        assert "lastMark" in problems


def test_a_damaged_cookie_and_last_mark_are_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "current" / "VERSION", b"not a cookie\n")
    write(tmp_path / "current" / "lastMark", b"short")
    code, obj = run_json(capsys, str(tmp_path))
    assert code == 1
    problems = " ".join(map(str, obj["problems"]))  # type: ignore[call-overload]
    assert "is not a layout version" in problems
    assert "not a lastMark" in problems


# --- bkref's own bookie ---------------------------------------------------------------------


def make_bkref_bookie(root: Path) -> None:
    config = load_config(
        None,
        "",
        [
            f"journalDirectories={root / 'journal'}",
            f"ledgerDirectories={root / 'ledgers'}",
            "logSizeLimit=4096",
            "journalMaxGroupWaitMSec=0",
        ],
    )
    bookie = Bookie.open(OsFileSystem(), config, clock=ManualClock(), rng=random.Random(1))
    for entry in range(5):
        bookie.add_entry(LedgerId(1), EntryId(entry), b"key", b"x" * 100)
    bookie.add_entry(LedgerId(2), EntryId(0), b"key2", b"y")
    bookie.journal_force()
    bookie.checkpoint()
    bookie.fence(LedgerId(1), b"key")
    bookie.delete_ledger(LedgerId(2))
    bookie.add_entry(LedgerId(3), EntryId(0), b"k3", b"z")
    bookie.journal_force()
    bookie.shutdown()


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_bkrefs_own_bookie_is_described_and_left_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_bkref_bookie(tmp_path)
    before = snapshot(tmp_path)
    code, obj = run_json(capsys, str(tmp_path / "ledgers"))
    assert code == 0, obj["problems"]
    index = obj["index"]
    assert isinstance(index, dict)
    assert index["error"] is None
    assert index["fenced_ledgers"] == [1]
    assert index["deleted_ledgers"] == [2]
    assert index["ledgers"] >= 1
    assert index["chain"] and index["segments"]
    assert all(seg["error"] is None for seg in index["segments"])
    files = obj["files"]
    assert isinstance(files, list)
    assert regular_files(tmp_path / "ledgers") <= {f["name"] for f in files}
    code, jobj = run_json(
        capsys, str(tmp_path / "journal"), "--ledger-dir", str(tmp_path / "ledgers")
    )
    assert code == 0, jobj["problems"]
    replay = jobj["replay"]
    assert isinstance(replay, dict)
    marks = jobj["last_marks"]
    assert isinstance(marks, list) and marks[0]["used"] is True
    # bkref's lastMark carries the index coverage: the newest segment the checkpoint made.
    assert marks[0]["size_bytes"] == 40
    assert marks[0]["index_segment"] == max(seg["seq"] for seg in index["segments"])
    assert replay["last_mark"] == {k: marks[0][k] for k in ("journal_file", "journal_id", "offset")}
    assert replay["error"] is None
    journals = jobj["journals"]
    assert isinstance(journals, list)
    kinds = {r["kind"] for j in journals for r in j["records"]}
    assert {"data", "key", "fence"} <= kinds
    code, iobj = run_json(capsys, str(tmp_path / "ledgers" / "current" / "bkref-index"))
    assert code == 0
    assert iobj["index"] == index
    assert snapshot(tmp_path) == before, "inspect changed the bookie"


def test_a_damaged_bkref_index_is_a_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_bkref_bookie(tmp_path)
    index_dir = tmp_path / "ledgers" / "current" / "bkref-index"
    deleted = index_dir / "deleted-ledgers"
    data = bytearray(deleted.read_bytes())
    data[5] ^= 0xFF
    deleted.write_bytes(bytes(data) + deleted.read_bytes())  # damaged, then an intact record
    code, obj = run_json(capsys, str(tmp_path / "ledgers"))
    assert code == 1
    index = obj["index"]
    assert isinstance(index, dict)
    assert "deleted-ledgers" in str(index["error"])


# --- never hang, never follow, never traceback -------------------------------------------------


@pytest.mark.parametrize(
    "name", ["0.log", "5.txn", "lastMark", "VERSION", "bkref-index/0000000000000001.seg"]
)
def test_a_fifo_named_like_a_bookie_file_is_never_opened(tmp_path: Path, name: str) -> None:
    current = tmp_path / "current"
    write(current / "1.log", bk_layout.build_log([(1, 0, b"a")]).data)
    fifo = current / name
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    done = subprocess_inspect(str(tmp_path), "--json")
    assert "Traceback" not in done.stderr
    obj = json.loads(done.stdout)
    text = json.dumps(obj)
    assert "fifo" in text
    assert done.returncode == 1
    direct = subprocess_inspect(str(fifo))
    assert direct.returncode in (1, 2)
    assert "Traceback" not in direct.stderr


def test_symlinks_are_described_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    current = tmp_path / "current"
    write(current / "0.log", bk_layout.build_log([(1, 0, b"a")]).data)
    os.symlink("loop", current / "loop")
    os.symlink("..", current / "up")
    os.symlink("0.log", current / "1.log")
    code, obj = run_json(capsys, str(tmp_path))
    assert code == 0
    files = obj["files"]
    assert isinstance(files, list)
    links = {f["name"]: f for f in files if f["type"] == "symlink"}
    assert set(links) == {"current/loop", "current/up", "current/1.log"}
    assert all("not followed" in f["description"] for f in links.values())
    logs = obj["entry_logs"]
    assert isinstance(logs, list) and [log["name"] for log in logs] == ["0.log"]


@pytest.mark.parametrize("path", ["/", "empty", "home", "file"])
def test_a_path_that_is_not_part_of_a_bookie_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    target = {
        "/": Path("/"),
        "empty": tmp_path / "empty",
        "home": tmp_path / "home",
        "file": tmp_path / "notes.txt",
    }[path]
    (tmp_path / "empty").mkdir()
    write(tmp_path / "home" / ".bashrc", b"x")
    write(tmp_path / "home" / "ab" / "cd" / "x.txt", b"x")
    write(tmp_path / "notes.txt", b"x")
    code, out, err = run_text(capsys, str(target))
    assert code == inspect_cmd.EXIT_REFUSED == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("bkref inspect: ")


def big_bookie(root: Path) -> Path:
    journal = bkj.JournalBuilder(version=6)
    for entry in range(3000):
        journal.entry(1, entry, b"e" * 20)
    write(root / "current" / "1.txn", journal.file_bytes())
    return root


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """``| head -c 10`` closes the pipe at a moment that varies from run to run (the issue saw
    a BrokenPipeError now and then), so it runs several times; ``| true`` closes it before
    inspect writes, so the broken-pipe path is taken every time."""
    root = big_bookie(tmp_path)
    command = f"{sys.executable} -m proofs.cli.main inspect {root} --json"
    for reader in ["head -c 10"] * 5 + ["true"]:
        done = subprocess_inspect(shell=f'{command} | {reader}; echo " status=${{PIPESTATUS[0]}}"')
        assert done.stderr == "", done.stderr
        if reader != "true":
            assert done.stdout.startswith('{"path": ')
        status = int(done.stdout.rsplit("status=", 1)[1])
        assert status == 0, (reader, status)  # the status it would have had: a sound bookie


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_stdout_gives_one_line_and_a_nonzero_exit(tmp_path: Path) -> None:
    root = big_bookie(tmp_path)
    for small in (False, True):
        target = str(root / "current" / "1.txn") if small else str(root)
        done = subprocess_inspect(
            shell=f"{sys.executable} -m proofs.cli.main inspect {target} --json > /dev/full"
        )
        assert done.returncode == 1
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert "cannot write to standard output" in done.stderr


# --- docs/inspect.md documents every key ---------------------------------------------------------


def documented_keys() -> dict[str, set[str]]:
    """Per ``### `name` object`` heading of docs/inspect.md, the keys of its table."""
    out: dict[str, set[str]] = {}
    current: str | None = None
    for line in DOCS.read_text().splitlines():
        heading = re.match(r"### `(\w+)` object", line)
        if heading:
            current = heading.group(1)
            out[current] = set()
            continue
        if line.startswith("## "):
            current = None
        row = re.match(r"\| `(\w+)` \|", line)
        if row and current is not None:
            out[current].add(row.group(1))
    return out


def found_keys(capsys: pytest.CaptureFixture[str], root: Path) -> dict[str, set[str]]:
    make_bk_bookie(root / "bk")
    make_bkref_bookie(root / "own")
    write(root / "bk" / "ledgers" / "current" / "9.log", b"JUNKJUNKJUNKJUNKJUNKJUNK")
    found: dict[str, set[str]] = {}

    def add(kind: str, obj: object) -> None:
        assert isinstance(obj, dict), (kind, obj)
        found.setdefault(kind, set()).update(obj)

    reports = [
        run_json(capsys, str(root / "bk" / "ledgers"))[1],
        run_json(capsys, str(root / "bk" / "journal"), "--ledger-dir", str(root / "bk/ledgers"))[1],
        run_json(capsys, str(root / "own" / "ledgers"))[1],
    ]
    for report in reports:
        add("directory", report)
        for key, kind in (
            ("files", "file"),
            ("journals", "journal"),
            ("last_marks", "last_mark"),
            ("cookies", "cookie"),
            ("instance_ids", "instance_id"),
            ("bk_index_files", "bk_index_file"),
            ("rocksdb_dirs", "rocksdb_dir"),
            ("compaction_leftovers", "compaction_leftover"),
        ):
            for obj in report[key]:  # type: ignore[attr-defined]
                add(kind, obj)
        for idx in report["bk_index_files"]:  # type: ignore[attr-defined]
            add("bk_index_contents", idx["contents"])
        for log in report["entry_logs"]:  # type: ignore[attr-defined]
            add("entry_log_error" if log.get("error") else "entry_log", log)
            for entry in log.get("entries", []):
                add("log_entry", entry)
        for journal in report["journals"]:  # type: ignore[attr-defined]
            add("journal_counts", journal["counts"])
            for record in journal["records"]:
                add("journal_record", record)
        if report["replay"] is not None:
            add("replay", report["replay"])
            add("journal_position", report["replay"]["last_mark"])  # type: ignore[index]
            add("journal_position", report["replay"]["end"])  # type: ignore[index]
        if report["last_id"] is not None:
            add("last_id", report["last_id"])
        if report["index"] is not None:
            add("index", report["index"])
            for segment in report["index"]["segments"]:  # type: ignore[index]
                add("index_segment", segment)
    capsys.readouterr()
    proofs.cli.main.main(["inspect", str(root / "nothing-here"), "--json"])
    add("refusal", json.loads(capsys.readouterr().out))
    os.mkfifo(root / "lastMark")
    assert run_json(capsys, str(root / "lastMark"))[0] == 1
    proofs.cli.main.main(["inspect", str(root / "lastMark"), "--json"])
    add("unreadable_file", json.loads(capsys.readouterr().out))
    one_journal = root / "bk" / "journal" / "current" / bkj.journal_name(JOURNAL_ID)
    add("journal", run_json(capsys, str(one_journal))[1])
    add("identity", run_json(capsys, str(root / "own/ledgers/current/bkref-identity"))[1])
    deleted = root / "own/ledgers/current/bkref-index/deleted-ledgers"
    add("index_deleted", run_json(capsys, str(deleted))[1])
    add("coverage", run_json(capsys, str(root / "own/journal/current/bkref-coverage"))[1])
    add("reserve", run_json(capsys, str(root / "own/journal/current/bkref-reserve"))[1])
    return found


def test_docs_document_every_json_key_and_no_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documented = documented_keys()
    found = found_keys(capsys, tmp_path)
    assert set(documented) == set(found)
    for kind, keys in found.items():
        assert documented[kind] == keys, (kind, documented[kind] ^ keys)


def test_docs_are_linked_from_readme_and_design() -> None:
    assert "docs/inspect.md" in (REPO / "README.md").read_text()
    assert "inspect.md" in (REPO / "docs" / "design.md").read_text()


FUZZ_NAMES = (
    "0.log",
    "1.log",
    "5.txn",
    "6.txn",
    "lastMark",
    "lastMark.1",
    "lastId",
    "VERSION",
    "instanceId",
    "2.log.compacting",
    "3.log.1.compacted",
    "bkref-index/0000000000000001.seg",
    "bkref-index/0000000000000002.seg",
    "bkref-index/deleted-ledgers",
    "0/1/1.idx",
    "ledgers/CURRENT",
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.dictionaries(
        st.sampled_from(FUZZ_NAMES),
        st.one_of(
            st.binary(max_size=700),
            st.builds(lambda tail: bkj.header(6) + tail, st.binary(max_size=300)),
            st.builds(lambda tail: bk_layout.header() + tail, st.binary(max_size=300)),
        ),
        min_size=1,
    )
)
def test_any_bookie_directory_gives_a_report_never_an_exception(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, bytes]
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    for name, data in files.items():
        write(root / "current" / name, data)
    report = inspect_cmd.inspect_dir(OsFileSystem(), str(root))
    obj = inspect_cmd.dir_json(report)
    json.dumps(obj)
    assert report.is_bookie_dir
    assert report.exit_code in (0, 1, 3)
    assert (report.exit_code == 1) == bool(
        report.problems or any(log.error is not None for log in report.logs)
    )
    inspect_cmd.format_dir(report)


def test_bookkeepers_idx_files_are_read_key_fence_lac_and_positions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each ``.idx`` file's header and positions, as the page says (the files come from the
    page's independent writer, tests/unit/bk_index_layout.py); a torn header is a warning, a
    damaged one a problem (exit 1)."""
    current = tmp_path / "ledgers" / "current"
    lac = bki.lac_buffer(0x102, 4)
    good = bki.idx_file(
        b"k" * 20, {0: bki.location(3, 1024), 4: bki.location(3, 2048)}, fenced=True, lac=lac
    )
    write(current / bki.idx_path(0x102), good)
    write(current / bki.idx_path(7), bki.idx_file(b"", {}, version=0))
    code, report = run_json(capsys, str(tmp_path / "ledgers"))
    assert code == 0, report["problems"]
    by_ledger = {f["ledger_id"]: f["contents"] for f in report["bk_index_files"]}  # type: ignore[attr-defined]
    assert by_ledger[0x102]["master_key_bytes"] == 20
    assert by_ledger[0x102]["fenced"] is True
    assert by_ledger[0x102]["explicit_lac"] == 4
    assert (by_ledger[0x102]["positions"], by_ledger[0x102]["last_entry"]) == (2, 4)
    assert by_ledger[7]["fenced"] is False and by_ledger[7]["header_version"] == 0
    assert by_ledger[7]["explicit_lac"] is None and by_ledger[7]["error"] is None
    _, text, _ = run_text(capsys, str(tmp_path / "ledgers"))
    assert "ledgers 7, 258; 1 fenced, 0 with a header" in " ".join(text.split())

    write(current / bki.idx_path(9), bytes(100))  # short, all zero: a crash can leave it
    code, report = run_json(capsys, str(tmp_path / "ledgers"))
    assert code == 0 and report["problems"] == []
    assert any("9.idx" in w or "torn" in w.lower() for w in report["warnings"])  # type: ignore[attr-defined]
    write(current / bki.idx_path(9), bki.idx_file(b"k", {}, signature=b"XXXX"))
    code, report = run_json(capsys, str(tmp_path / "ledgers"))
    assert code == 1
    assert any("9.idx" in p for p in report["problems"])  # type: ignore[attr-defined]


# --- one file of bkref's own: the identity stamp and deleted-ledgers (issue 26) ---------------


def test_an_identity_stamp_given_alone_is_described_and_a_damaged_one_is_a_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 26, item 5: every stamp, valid or not, died with an AssertionError (exit 1)."""
    make_bkref_bookie(tmp_path)
    for directory in ("journal", "ledgers"):
        stamp = tmp_path / directory / "current" / "bkref-identity"
        code, obj = run_json(capsys, str(stamp))
        assert code == 0, obj
        assert obj["name"] == "bkref-identity"
        assert obj["error"] is None
        assert obj["generation"] == 1 and obj["sealed"] is True
        assert obj["directory"] == str(tmp_path / directory)
        code, text, err = run_text(capsys, str(stamp))
        assert code == 0 and re.search(r"generation +1\n", text), (text, err)
    stamp = tmp_path / "ledgers" / "current" / "bkref-identity"
    stamp.write_bytes(stamp.read_bytes().replace(b"generation=1", b"generation=2"))
    code, obj = run_json(capsys, str(stamp))
    assert code == 1
    assert "crc32" in str(obj["error"]), obj
    assert "bkref dirs accept" in str(obj["error"]), obj


def test_the_deleted_ledgers_file_given_alone_is_described(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 26, "Also": it was refused as "not a file a bookie writes"."""
    make_bkref_bookie(tmp_path)
    deleted = tmp_path / "ledgers" / "current" / "bkref-index" / "deleted-ledgers"
    code, obj = run_json(capsys, str(deleted))
    assert code == 0, obj
    assert obj["deleted_ledgers"] == [2]
    assert obj["records"] == 1 and obj["torn_bytes"] == 0 and obj["error"] is None
    deleted.write_bytes(deleted.read_bytes()[:-3])
    code, obj = run_json(capsys, str(deleted))
    assert code == 1 and "offset 0" in str(obj["error"]), obj
