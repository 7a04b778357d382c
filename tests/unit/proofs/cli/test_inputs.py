"""Inputs that never end (issue 26, item 4): every file a user names to a command is read
bounded (proofs/cli/input_file.py, the limits in impl/limits.py), ends in one line and a
non-zero exit, and never waits for ever on a FIFO without a writer; process substitution
(``--conf <(...)``) keeps working.

Each command runs in a subprocess under a timeout: the failures caught here are hangs and
memory that grows without end (``ulimit -v`` caps the child so that one shows as a crash,
not as a machine swapping).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from impl.limits import LIMITS
from proofs.cli.input_file import InputError, check_lines, read_input
from tests.paths import ROOT

#: Well above the FIFO writer wait (2 s) and a command's start, well below a hang.
TIMEOUT_S = 60
#: The child's address space: a command that reads /dev/zero whole dies well before this.
MEMORY_KB = 2_000_000


def bkref(*argv: str, shell: str | None = None) -> subprocess.CompletedProcess[str]:
    command = shell or " ".join(f"'{a}'" for a in [sys.executable, "-m", "proofs.cli.main", *argv])
    return subprocess.run(
        ["bash", "-c", f"ulimit -v {MEMORY_KB}; {command}"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


CONF_COMMANDS = [
    ["config", "--conf"],
    ["adapter", "--set", "journalDirectories=/tmp/x/j", "--conf"],
    ["dirs", "accept", "--conf"],
]
TRACE_COMMANDS = [["check-trace"], ["explain"]]


@pytest.mark.parametrize("argv", CONF_COMMANDS + TRACE_COMMANDS, ids=lambda a: a[0])
def test_dev_zero_ends_in_one_line_within_the_limit(argv: list[str]) -> None:
    began = time.monotonic()
    result = bkref(*argv, "/dev/zero")
    assert result.returncode == 2, (result.returncode, result.stderr)
    line = one_line(result)
    assert "/dev/zero: more than" in line and "bytes (Limits." in line, line
    assert time.monotonic() - began < TIMEOUT_S


@pytest.mark.parametrize("argv", CONF_COMMANDS + TRACE_COMMANDS, ids=lambda a: a[0])
def test_a_fifo_with_no_writer_ends_in_one_line(argv: list[str], tmp_path: Path) -> None:
    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    result = bkref(*argv, str(fifo))
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "a FIFO with no writer" in one_line(result)


def test_import_with_a_fifo_conf_ends_in_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "bk_server.conf"
    os.mkfifo(fifo)
    result = bkref("import", str(tmp_path / "copy"), "--conf", str(fifo))
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "a FIFO with no writer" in one_line(result)


def test_process_substitution_keeps_working() -> None:
    python = f"'{sys.executable}' -m proofs.cli.main"
    result = bkref(shell=f"{python} config --conf <(printf 'logSizeLimit=65536\\n') --json")
    assert result.returncode == 0, result.stderr
    assert '"logSizeLimit"' in result.stdout and "65536" in result.stdout
    trace = ROOT / "docs" / "examples" / "trace.jsonl"
    result = bkref(shell=f"{python} check-trace <(cat '{trace}')")
    assert result.returncode == 0, result.stderr
    result = bkref(shell=f"{python} config --conf <(true)")  # empty: BookKeeper's defaults
    assert result.returncode == 0, result.stderr


def test_a_fifo_whose_writer_comes_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "conf"
    os.mkfifo(fifo)
    python = f"'{sys.executable}' -m proofs.cli.main"
    result = bkref(
        shell=f"(sleep 0.5; printf 'gcWaitTime=1234\\n' > '{fifo}') & "
        f"{python} config --conf '{fifo}' --json; wait"
    )
    assert result.returncode == 0, result.stderr
    assert "1234" in result.stdout


def test_a_line_longer_than_the_limit_is_refused(tmp_path: Path) -> None:
    from impl.limits import Limits

    small = Limits(input_line_max_bytes=100, trace_file_max_bytes=10_000)
    path = tmp_path / "t"
    path.write_bytes(b"a\n" + b"x" * 101 + b"\nb\n")
    with pytest.raises(InputError, match="line 2 is longer than 100 bytes"):
        read_input(str(path), what="x", max_bytes=10_000, field="f", limits=small)
    check_lines(b"x" * 100 + b"\n" + b"y" * 100, "p", "x", small)  # at the bound: fine
    assert LIMITS.input_line_max_bytes <= LIMITS.trace_file_max_bytes


def test_a_regular_file_above_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.conf"
    with path.open("wb") as out:
        out.truncate(LIMITS.conf_file_max_bytes + 1)  # sparse: nothing to read, a size to see
    result = bkref("config", "--conf", str(path))
    assert result.returncode == 2
    assert "conf_file_max_bytes" in one_line(result)


def test_check_traces_skips_a_fifo_with_a_row_not_a_hang(tmp_path: Path) -> None:
    from proofs.campaign.traces import judge_file

    fifo = tmp_path / "stuck.jsonl"
    os.mkfifo(fifo)
    row = judge_file((str(fifo), "stuck.jsonl"))
    assert row["verdict"] == "error" and "a FIFO with no writer" in str(row["message"])
