"""issue 10, "Tracebacks and hangs": each one reproduced through the real process.

A NUL byte in a directory path, nettyMaxFrameSizeBytes 501 to 516, a journal named
7fffffffffffffff.txn, a FIFO or a socket under a bookie file's name, a standard output
whose reader goes away early (``| head``) and one that cannot be written (``> /dev/full``).
Each runs ``python -m proofs.cli.main`` as a child with a timeout, and each must end with
its documented exit status and at most a line of explanation: never a traceback, never a
hang. (``inspect``'s own reading of such files is tested with inspect.)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pytest

from impl.fs.os_backend import OsFileSystem
from spec.errors import FsNotAFile
from tests.paths import ROOT

#: Every child must be done within this long: a hang fails the test instead of the run.
TIMEOUT_S = 60.0
SHUTDOWN = b'{"id":1,"op":"shutdown"}\n'
#: A trace the repository ships, judged valid (check-trace exits 0 on it).
TRACE = "docs/traces/crash-in-checkpoint.jsonl"
#: Commands that write to stdout and finish quickly, with the exit status each has when all
#: is well: the status must be the same when the reader of stdout went away.
QUICK_COMMANDS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("--help",), 0),
    (("config",), 0),
    (("config", "--json"), 0),
    (("config", "--help"), 0),
    (("check-trace", TRACE), 0),
    (("check-trace", TRACE, "--json"), 0),
    (("explain", TRACE, "--state"), 0),
    (("inspect", "docs/examples/bookie/ledgers", "--json"), 0),
    (("inspect", "docs/examples/bookie/ledgers/current/0.log"), 0),
    (("crash-check", "--target", "entry-log", "--entries", "4", "--flush-entrylog-bytes", "0"), 0),
    (("crash-check", "--target", "entry-log", "--entries", "4", "--quiet"), 0),
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _bkref(
    *args: str, stdin: bytes = b"", stdout: int | IO[bytes] = subprocess.PIPE
) -> subprocess.CompletedProcess[bytes]:
    """The child, its stderr captured; stdout captured unless given (a pipe, a file)."""
    argv = [sys.executable, "-m", "proofs.cli.main", *args]
    return subprocess.run(
        argv,
        input=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=TIMEOUT_S,
        cwd=ROOT,
        env=_env(),
    )


def _adapter(tmp_path: Path, *settings: str) -> subprocess.CompletedProcess[bytes]:
    args = ["adapter", "--seed", "1"]
    defaults = [f"journalDirectories={tmp_path / 'j'}", f"ledgerDirectories={tmp_path / 'l'}"]
    for setting in [*defaults, *settings]:
        args += ["--set", setting]
    return _bkref(*args, stdin=SHUTDOWN)


def _no_traceback(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    assert "Error:" not in text.replace("error:", ""), text  # no Python exception line
    return text


# --- configuration -------------------------------------------------------------------------


def test_a_nul_byte_in_a_directory_path_is_a_configuration_error(tmp_path: Path) -> None:
    conf = tmp_path / "bk.conf"
    conf.write_text(f"ledgerDirectories={tmp_path}/l\\u0000x\n", encoding="ascii")
    result = _bkref("adapter", "--conf", str(conf), "--set", f"journalDirectories={tmp_path}/j")
    err = _no_traceback(result.stderr)
    assert result.returncode == 2, err
    assert f"{conf}:1: bad value" in err
    assert "ledgerDirectories: a path cannot contain a NUL byte" in err
    assert result.stdout == b""


@pytest.mark.parametrize("frame", [501, 510, 516])
def test_a_frame_size_too_small_for_an_entry_is_refused(tmp_path: Path, frame: int) -> None:
    result = _adapter(tmp_path, f"nettyMaxFrameSizeBytes={frame}")
    err = _no_traceback(result.stderr)
    assert result.returncode == 2, err
    assert "nettyMaxFrameSizeBytes: out of range; allowed: an integer from 517" in err


def test_the_smallest_frame_size_serves_one_byte_of_data(tmp_path: Path) -> None:
    result = _adapter(tmp_path, "nettyMaxFrameSizeBytes=517")
    _no_traceback(result.stderr)
    assert result.returncode == 0
    assert b'"max_data_bytes":1,' in result.stdout.splitlines()[0]


# --- files that cannot be a bookie's -------------------------------------------------------


def _a_bookie(tmp_path: Path) -> None:
    """A bookie's directories, stamped by one clean start and shutdown: the files each test
    then plants are in a bookie's own directories, not a foreign one (spec/format/identity.md)."""
    result = _adapter(tmp_path)
    assert result.returncode == 0, result.stderr


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_journal_with_the_largest_id_is_refused_at_start(tmp_path: Path) -> None:
    _a_bookie(tmp_path)
    current = tmp_path / "j" / "current"
    (current / "7fffffffffffffff.txn").write_bytes(b"")
    before = _tree(tmp_path)
    result = _adapter(tmp_path)
    err = _no_traceback(result.stderr)
    assert result.returncode == 1, err
    assert f"{current}/7fffffffffffffff.txn: journal id 7fffffffffffffff is the largest" in err
    assert result.stdout == b""  # refused before the ready line
    assert _tree(tmp_path) == before  # untouched


def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


def _socket(path: Path) -> socket.socket:
    path.parent.mkdir(parents=True, exist_ok=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("l/current/0.log", "FIFO"),
        ("l/current/lastId", "FIFO"),
        ("j/current/1.txn", "FIFO"),
        ("j/current/lastMark", "FIFO"),
        ("l/current/3.log", "socket"),
    ],
)
def test_a_special_file_named_like_a_bookie_file_is_refused_without_hanging(
    tmp_path: Path, name: str, kind: str
) -> None:
    """Before: the adapter blocked for ever opening the FIFO, before its ready line."""
    _a_bookie(tmp_path)
    path = tmp_path / name
    path.unlink(missing_ok=True)
    server = _socket(path) if kind == "socket" else None
    if server is None:
        _fifo(path)
    try:
        result = _adapter(tmp_path)  # a hang is a TimeoutExpired, failing the test
    finally:
        if server is not None:
            server.close()
    err = _no_traceback(result.stderr)
    assert result.returncode == 1, err
    assert f"{path}: is a {kind}" in err
    assert "not a regular file" in err
    assert result.stdout == b""


@pytest.mark.parametrize("read_only", [True, False])
def test_os_backend_open_refuses_a_fifo_without_blocking(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "0.log"
    _fifo(path)
    outcome: list[BaseException | None] = []

    def open_it() -> None:
        try:
            OsFileSystem().open(str(path), read_only=read_only).close()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=open_it, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "open blocked on a FIFO"
    assert isinstance(outcome[0], FsNotAFile), outcome
    assert outcome[0].path == str(path)
    assert outcome[0].kind == "FIFO (named pipe)"


def test_os_backend_open_refuses_a_socket(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    server = _socket(path)
    try:
        with pytest.raises(FsNotAFile, match="is a socket or device"):
            OsFileSystem().open(str(path))
    finally:
        server.close()


def test_os_backend_open_still_opens_and_creates_regular_files(tmp_path: Path) -> None:
    fs = OsFileSystem()
    handle = fs.open(str(tmp_path / "a"), create=True, exclusive=True)
    handle.pwrite(0, b"abc")
    handle.close()
    again = fs.open(str(tmp_path / "a"), read_only=True)
    assert again.pread(0, 3) == b"abc"
    again.close()


# --- standard output -----------------------------------------------------------------------


def _ids(case: tuple[tuple[str, ...], int]) -> str:
    return " ".join(case[0])


@pytest.mark.parametrize("case", QUICK_COMMANDS, ids=_ids)
def test_a_closed_stdout_is_quiet_and_keeps_the_exit_status(
    case: tuple[tuple[str, ...], int],
) -> None:
    """Deterministic: the pipe's read end is closed before the child starts, so its very
    first write meets EPIPE."""
    args, status = case
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = _bkref(*args, stdout=write_end)
    finally:
        os.close(write_end)
    err = _no_traceback(result.stderr)
    assert "BrokenPipe" not in err and "Broken pipe" not in err, err
    assert result.returncode == status, err


@pytest.mark.parametrize("case", QUICK_COMMANDS, ids=_ids)
def test_head_in_a_shell_pipe_never_gives_a_traceback(case: tuple[tuple[str, ...], int]) -> None:
    """The way the issue met it (intermittently): ``bkref ... | head -c 10``, a few times."""
    args, status = case
    command = " ".join([f"'{sys.executable}'", "-m", "proofs.cli.main", *args])
    script = f'{command} | head -c 10 > /dev/null; echo "status=${{PIPESTATUS[0]}}" >&2'
    for _ in range(3):
        result = subprocess.run(
            ["bash", "-c", script], capture_output=True, timeout=TIMEOUT_S, cwd=ROOT, env=_env()
        )
        err = _no_traceback(result.stderr)
        assert "Broken" not in err, err
        assert err.strip().splitlines()[-1] == f"status={status}", err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("case", QUICK_COMMANDS, ids=_ids)
def test_an_unwritable_stdout_is_one_line_and_exit_1(case: tuple[tuple[str, ...], int]) -> None:
    args, _ = case
    with open("/dev/full", "wb") as full:
        result = _bkref(*args, stdout=full)
    err = _no_traceback(result.stderr)
    assert result.returncode == 1, err
    lines = [line for line in err.splitlines() if "cannot write to standard output" in line]
    assert lines == [
        f"bkref{' ' + args[0] if not args[0].startswith('-') else ''}: error: cannot write to "
        "standard output: No space left on device"
    ], err


# --- configuration keys bkref reads but does not act on ------------------------------------


def test_the_adapter_warns_at_start_about_a_key_it_does_not_act_on(tmp_path: Path) -> None:
    result = _adapter(tmp_path, "useTransactionalCompaction=false")
    err = _no_traceback(result.stderr)
    assert result.returncode == 0, err
    assert (
        "bkref adapter: warning: useTransactionalCompaction=false (--set): accepted but has no "
        "effect in bkref: bkref always compacts transactionally" in err
    )


def test_the_adapter_starts_with_per_ledger_entry_logs_without_a_word(tmp_path: Path) -> None:
    result = _adapter(tmp_path, "entryLogPerLedgerEnabled=true")
    err = _no_traceback(result.stderr)
    assert result.returncode == 0, err
    assert "entryLogPerLedgerEnabled" not in err


def test_the_adapter_refuses_a_forced_read_only_bookie(tmp_path: Path) -> None:
    result = _adapter(tmp_path, "forceReadOnlyBookie=true")
    err = _no_traceback(result.stderr)
    assert result.returncode == 2, err
    assert "forceReadOnlyBookie=true (--set): not implemented by bkref" in err
    assert result.stdout == b""
    assert not (tmp_path / "l").exists()  # refused before any directory was made


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_record_says_once_that_it_cannot_relay_to_an_unwritable_stdout(tmp_path: Path) -> None:
    """record relays the bookie's responses; its exit status is the bookie's (proofs/cli/
    record.py), so an unwritable stdout is said on stderr and the recording goes on."""
    child = [sys.executable, "-m", "proofs.cli.main", "adapter", "--seed", "1"]
    child += ["--set", f"journalDirectories={tmp_path / 'j'}"]
    child += ["--set", f"ledgerDirectories={tmp_path / 'l'}"]
    trace = tmp_path / "t.jsonl"
    requests = (ROOT / "docs" / "examples" / "requests.jsonl").read_bytes()
    with open("/dev/full", "wb") as full:
        result = _bkref("record", "--trace", str(trace), "--", *child, stdin=requests, stdout=full)
    err = _no_traceback(result.stderr)
    assert result.returncode == 0, err
    assert err.count("bkref record: cannot write the bookie's responses to standard output") == 1
    assert len(trace.read_text(encoding="utf-8").splitlines()) == 7  # a header, 6 steps
