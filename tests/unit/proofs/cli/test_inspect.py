"""``bkref inspect`` through proofs.cli.main.main: reports, JSON and exit codes.

Logs are written with tests/unit/bk_layout.py (the page's independent writer), so the JSON
is checked against what was built, not against the reader that produced it. Junk of every
kind (JPEG, journal, empty, truncated, badly named, a directory of junk) must give a clear
report and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import proofs.cli.inspect as inspect_cmd
import proofs.cli.main
from impl.fs.os_backend import OsFileSystem
from tests.unit import bk_layout


@pytest.fixture(autouse=True)
def only_inspect(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # build_parser imports every subcommand's module; keep these tests about inspect alone,
    # whatever state the other subcommands (written concurrently) are in.
    rows = tuple(row for row in proofs.cli.main.COMMANDS if row[0] == "inspect")
    assert rows, "inspect is missing from proofs.cli.main.COMMANDS"
    monkeypatch.setattr(proofs.cli.main, "COMMANDS", rows)
    yield


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = proofs.cli.main.main(["inspect", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict[str, object]]:
    code, out, _ = run_cli(capsys, str(path), "--json")
    obj = json.loads(out)
    assert isinstance(obj, dict)
    return code, obj


BRIEF_KEYS = (
    "log_id",
    "version",
    "ledgers_map",
    "ledgers_map_source",
    "entries",
    "torn_tail_bytes",
)

FOUR_ADDS = [(1, 1, b"ledger-1-1"), (3, 1, b"ledger-3-1"), (2, 1, b"ledger-2-1"), (1, 2, b"x")]


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# --- one file -----------------------------------------------------------------------------


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entries=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 9), st.binary(max_size=20)), max_size=8
    ),
    log_id=st.integers(0, 2**31 - 1),
    rotated=st.booleans(),
)
def test_json_of_a_built_log_equals_what_was_built(
    entries: list[tuple[int, int, bytes]], log_id: int, rotated: bool
) -> None:
    built = bk_layout.build_log(entries, rotated=rotated)
    out = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(out):
        path = write(Path(tmp) / f"{log_id:x}.log", built.data)
        code = proofs.cli.main.main(["inspect", str(path), "--json"])
    assert code == 0
    report = json.loads(out.getvalue())
    source = "map" if rotated and built.ledgers else "scan"
    expected = built.as_inspect_json(log_id, source=source)
    assert {key: report[key] for key in BRIEF_KEYS} == expected
    assert list(report)[: len(BRIEF_KEYS)] == list(BRIEF_KEYS)


def test_json_of_a_sealed_log_printed_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    code, obj = run_json(capsys, write(tmp_path / "1f.log", built.data))
    assert code == 0
    assert {key: obj[key] for key in BRIEF_KEYS} == built.as_inspect_json(0x1F)
    assert obj["ledgers_map"] == {"1": 30 + 21, "2": 30, "3": 30}
    assert obj["map_matches_scan"] is True
    assert obj["fallback_reason"] is None


def test_an_unrotated_log_reports_the_scan_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = bk_layout.build_log(FOUR_ADDS, rotated=False)
    code, obj = run_json(capsys, write(tmp_path / "0.log", built.data))
    assert code == 0
    assert obj["ledgers_map_source"] == "scan"
    assert "offset is 0" in str(obj["fallback_reason"])
    code, out, _ = run_cli(capsys, str(tmp_path / "0.log"))
    assert "from a scan, because the header's map offset is 0" in out


def test_a_torn_tail_is_a_warning_and_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = bk_layout.build_log(FOUR_ADDS, rotated=False)
    path = write(tmp_path / "2.log", built.data[:-10])
    code, obj = run_json(capsys, path)
    assert code == 0
    assert obj["torn_tail_bytes"] == built.entries[-1].size + 4 - 10
    assert [e["ledger"] for e in obj["entries"]] == [1, 3, 2]  # type: ignore[attr-defined]
    code, out, _ = run_cli(capsys, str(path))
    assert code == 0
    assert "warning: torn tail:" in out


def test_the_text_report_is_aligned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    built = bk_layout.build_log([(7, 0, b"a" * 500), (12345, 0, b"b"), (7, 1, b"")])
    code, out, _ = run_cli(capsys, str(write(tmp_path / "a.log", built.data)))
    assert code == 0
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["ledger"])
    table = lines[start : start + 3]
    assert [line.split() for line in table] == [
        ["ledger", "entries", "bytes"],
        ["7", "2", str(516 + 4 + 16 + 4)],
        ["12345", "1", "21"],
    ]
    assert len({len(line) for line in table}) == 1
    assert "log id        10 (0xa)" in out
    assert all(len(line) <= inspect_cmd.TEXT_WIDTH for line in lines)


def test_a_map_that_disagrees_with_the_scan_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = bk_layout.build_log(FOUR_ADDS)
    second = built.entries[1].offset  # ledger 3's payload: make it ledger 4's
    data = built.data[:second] + struct.pack(">q", 4) + built.data[second + 8 :]
    path = write(tmp_path / "3.log", data)
    code, obj = run_json(capsys, path)
    assert code == inspect_cmd.EXIT_INCONSISTENT == 3
    assert obj["map_matches_scan"] is False
    code, out, _ = run_cli(capsys, str(path))
    assert code == 3
    assert "disagrees with a scan" in out


# --- junk ---------------------------------------------------------------------------------

JPEG = bytes.fromhex("ffd8ffe000104a46494600010100000100010000") + bytes(300)
JOURNAL = b"BKLG" + struct.pack(">i", 6) + bytes(600)


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("cafe.log", JPEG, "not b'BKLO'"),
        ("5.log", bk_layout.header()[:10], "fewer than the 20"),
        ("abc.log", JOURNAL, "not b'BKLO'"),
        ("-1.log", bk_layout.header(), "does not begin with a hex log id"),
        ("1ffffffff.log", bk_layout.header(), "larger than a Java int"),
    ],
)
def test_a_file_that_is_not_an_entry_log_exits_1_with_a_clear_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes, says: str
) -> None:
    path = write(tmp_path / name, data)
    code, out, err = run_cli(capsys, str(path))
    assert code == inspect_cmd.EXIT_NOT_AN_ENTRY_LOG == 1
    assert says in out
    assert "Traceback" not in out + err
    code, obj = run_json(capsys, path)
    assert code == 1
    assert says in str(obj["error"])


def test_a_journal_named_like_an_entry_log_reports_what_it_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, obj = run_json(capsys, write(tmp_path / "1.log", JOURNAL))
    assert code == 1
    assert obj["magic"] == "BKLG"
    assert obj["version"] == 6
    assert obj["size_bytes"] == len(JOURNAL)


def test_a_journal_is_never_read_as_an_entry_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, obj = run_json(capsys, write(tmp_path / "1.txn", JOURNAL))
    assert code == 0
    assert obj["version"] == 6
    assert obj["header_bytes"] == 512
    assert obj["records"] == []
    assert obj["stop"] == "preallocated_zeros"
    assert "magic" not in obj and "ledgers_map" not in obj


def test_an_empty_log_is_the_preallocated_one_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, obj = run_json(capsys, write(tmp_path / "0.log", b""))
    assert code == 0
    assert obj["empty"] is True
    assert obj["entries"] == []
    assert obj["ledgers_map_source"] == "empty"
    code, out, _ = run_cli(capsys, str(tmp_path / "0.log"))
    assert code == 0
    assert "preallocates" in out


def test_a_missing_path_is_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, str(tmp_path / "nope.log"))
    assert code == inspect_cmd.EXIT_REFUSED == 2
    assert "no such file or directory" in err
    assert len(err.splitlines()) == 1
    assert out == ""
    code, obj = run_json(capsys, tmp_path / "nope.log")
    assert code == 2
    assert "no such file or directory" in str(obj["error"])


def test_help_documents_the_exit_codes_and_the_torn_tail_choice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        proofs.cli.main.main(["inspect", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "exit codes:" in out
    for code in ("0", "1", "2", "3"):
        assert f"\n  {code}  " in out
    assert "torn tail" in out.lower()


# --- directories --------------------------------------------------------------------------


def make_ledger_dir(root: Path) -> dict[str, bk_layout.BuiltLog]:
    current = root / "current"
    logs = {
        "0.log": bk_layout.build_log(FOUR_ADDS),
        "1.log": bk_layout.build_log([(5, 0, b"five")]),
        "a.log": bk_layout.build_log([(6, 0, b"six")], rotated=False),
    }
    for name, built in logs.items():
        write(current / name, built.data)
    write(current / "lastId", b"a\n")
    write(current / "b.log.compacting", bk_layout.header())
    write(current / "c.log.1.compacted", bk_layout.build_log([(5, 0, b"five")]).data)
    write(current / "VERSION", b'4\nbookieHost: "h:3181"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\n')
    write(current / "notes.txt", b"hello")
    (current / "0").mkdir()
    return logs


@pytest.mark.parametrize("sub", ["", "current"])
def test_a_ledger_directory_reports_every_log_and_the_directory_facts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sub: str
) -> None:
    logs = make_ledger_dir(tmp_path)
    code, obj = run_json(capsys, tmp_path / sub if sub else tmp_path)
    assert code == 0, obj["problems"]
    assert obj["dir"] == str(tmp_path / "current")
    reported = obj["entry_logs"]
    assert isinstance(reported, list)
    assert [log["name"] for log in reported] == ["0.log", "1.log", "a.log"]
    for log in reported:
        built = logs[log["name"]]
        source = "map" if built.map_offset is not None else "scan"
        expected = built.as_inspect_json(int(log["name"][:-4], 16), source=source)
        assert {key: log[key] for key in BRIEF_KEYS} == expected
    assert obj["last_id"] == {
        "name": "lastId",
        "path": str(tmp_path / "current" / "lastId"),
        "text": "a\n",
        "value": 10,
    }
    leftovers = obj["compaction_leftovers"]
    assert isinstance(leftovers, list)
    assert [(x["name"], x["kind"], x["log_id"], x["src_log_id"]) for x in leftovers] == [
        ("b.log.compacting", "compacting", 11, None),
        ("c.log.1.compacted", "compacted", 12, 1),
    ]
    # What recovery will do: remove the .compacting; finish the .compacted (well formed, its
    # source 1.log here): link c.log, move the index off 1.log, unlink 1.log, then it.
    assert "Recovery removes it" in leftovers[0]["note"]
    assert (leftovers[0]["recovery"], leftovers[0]["recovery_steps"]) == (
        "remove",
        ["unlink b.log.compacting"],
    )
    finish = leftovers[1]
    assert (finish["malformed"], finish["source_present"], finish["new_log_present"]) == (
        None,
        True,
        False,
    )
    assert finish["recovery"] == "finish"
    assert finish["recovery_steps"][0] == "link c.log"
    assert finish["recovery_steps"][2:] == ["unlink 1.log", "unlink c.log.1.compacted"]
    assert "Recovery finishes it" in finish["note"] and "unlink 1.log" in finish["note"]
    files = obj["files"]
    assert isinstance(files, list)
    kinds = {f["name"].removeprefix("current/"): f["kind"] for f in files}
    assert kinds["VERSION"] == "cookie"
    cookies = obj["cookies"]
    assert isinstance(cookies, list)
    assert (cookies[0]["bookie_host"], cookies[0]["ledger_dirs"]) == ("h:3181", ["/l"])
    assert kinds["notes.txt"] == kinds["0"] == "unknown"
    assert kinds["lastId"] == "last_id"


def test_the_directory_text_report_has_one_aligned_row_per_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = make_ledger_dir(tmp_path)
    code, out, err = run_cli(capsys, str(tmp_path))
    assert code == 0
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["log", "size"])
    rows = lines[start + 1 : start + 4]
    assert [row.split()[:3] for row in rows] == [
        [name, str(len(built.data)), "map" if built.map_offset is not None else "scan"]
        for name, built in logs.items()
    ]
    assert len({line.index("map") for line in rows[:2]}) == 1
    assert "current/notes.txt (file, 5 bytes): unknown file" in out
    assert "lastId          a (" in out
    assert err == ""  # no progress line for three logs


def test_a_bad_log_in_a_directory_exits_1_and_the_others_are_still_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_ledger_dir(tmp_path)
    write(tmp_path / "current" / "d.log", JPEG)
    code, obj = run_json(capsys, tmp_path)
    assert code == 1
    logs = obj["entry_logs"]
    assert isinstance(logs, list)
    assert [log["name"] for log in logs] == ["0.log", "1.log", "a.log", "d.log"]
    assert logs[3]["error"] is not None
    assert logs[0]["ledgers_map_source"] == "map"


@pytest.mark.parametrize(
    "files", [{}, {"photo.jpg": JPEG, "readme": b"hi", "install.log": b"x", "ab/c": b""}]
)
def test_a_directory_without_bookie_files_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, bytes]
) -> None:
    for name, data in files.items():
        write(tmp_path / name, data)
    code, out, err = run_cli(capsys, str(tmp_path))
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert "holds nothing a bookie writes" in err
    code, obj = run_json(capsys, tmp_path)
    assert code == 2
    assert set(obj) == {"path", "error"}


def test_many_logs_print_progress_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    count = inspect_cmd.PROGRESS_MIN_LOGS + 5
    for log_id in range(count):
        write(tmp_path / f"{log_id:x}.log", bk_layout.build_log([(log_id, 0, b"")]).data)
    code, obj = run_json(capsys, tmp_path)
    assert code == 0
    logs = obj["entry_logs"]
    assert isinstance(logs, list)
    assert [log["log_id"] for log in logs] == list(range(count))  # numeric order, not names
    code, out, err = run_cli(capsys, str(tmp_path))
    assert f"{count}/{count} logs read" in err
    assert "logs read" not in out


@settings(max_examples=40, deadline=None)
@given(
    data=st.one_of(
        st.binary(max_size=1200),
        st.builds(
            lambda head, tail: bk_layout.header(*head) + tail,
            st.tuples(st.integers(-3, 3), st.integers(-5, 1300), st.integers(-2, 4)),
            st.binary(max_size=200),
        ),
    )
)
def test_any_file_gives_a_report_never_an_exception(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "7.log", data)
        log = inspect_cmd.inspect_log(OsFileSystem(), str(path))
    assert log.exit_code in (0, 1, 3)
    assert (log.exit_code == 1) == (log.error is not None)
    assert (log.error is None) == ((data.startswith(b"BKLO") and len(data) >= 20) or not data)
    json.dumps(inspect_cmd.log_json(log))
    assert inspect_cmd.format_log(log).startswith("7.log")


def test_compaction_leftovers_say_what_recovery_will_do_with_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A well-formed ``.compacted`` already linked is finished without a link; a malformed
    one is removed while its source is here and refused when it is not (recover_leftovers)."""
    current = tmp_path / "current"
    write(current / "1.log", bk_layout.build_log([(5, 0, b"five")]).data)
    write(current / "2.log", bk_layout.build_log([(6, 0, b"six")]).data)
    write(current / "lastId", b"20\n")
    compacted = bk_layout.build_log([(5, 0, b"five")]).data
    write(current / "1e.log.2.compacted", compacted)
    write(current / "1e.log", compacted)
    write(current / "1f.log.1.compacted", bk_layout.header() + b"\x00\x00\x00\x30torn")
    write(current / "20.log.3.compacted", b"not an entry log at all")
    code, obj = run_json(capsys, tmp_path)
    # A start refuses the last one (its source 3.log is in no ledger directory): so does
    # inspect, with the start's own error (issue 26: it said "refuse" and exited 0).
    assert code == 1, obj["problems"]
    problems = " ".join(map(str, obj["problems"]))  # type: ignore[call-overload]
    assert "20.log.3.compacted" in problems and "exist nowhere else" in problems
    leftovers = obj["compaction_leftovers"]
    assert isinstance(leftovers, list)
    by_name = {x["name"]: x for x in leftovers}
    linked = by_name["1e.log.2.compacted"]
    assert (linked["recovery"], linked["new_log_present"], linked["source_present"]) == (
        "finish",
        True,
        True,
    )
    assert not any(step.startswith("link") for step in linked["recovery_steps"])
    malformed_here = by_name["1f.log.1.compacted"]
    assert malformed_here["malformed"] is not None
    assert (malformed_here["recovery"], malformed_here["recovery_steps"]) == (
        "remove",
        ["unlink 1f.log.1.compacted"],
    )
    gone = by_name["20.log.3.compacted"]
    assert (gone["recovery"], gone["source_present"], gone["recovery_steps"]) == (
        "refuse",
        False,
        [],
    )
    assert "exist nowhere else" in gone["note"]
    code, out, _ = run_cli(capsys, str(tmp_path))
    text = " ".join(out.split())
    assert "1f.log.1.compacted: a compaction log of log 1.log that is not well formed" in text
    other = tmp_path / "other"
    write(other / "current" / "3.log", bk_layout.build_log([(7, 0, b"seven")]).data)
    code, out, _ = run_cli(capsys, str(tmp_path), "--ledger-dir", str(other), "--json")
    obj = json.loads(out)
    assert code == 0, obj["problems"]  # the source is in another ledger directory: removed
    leftovers = obj["compaction_leftovers"]
    assert isinstance(leftovers, list)
    gone = next(x for x in leftovers if x["name"] == "20.log.3.compacted")
    assert (gone["recovery"], gone["recovery_steps"]) == ("remove", ["unlink 20.log.3.compacted"])
