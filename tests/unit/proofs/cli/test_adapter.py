"""proofs/cli/adapter.py: the ``bkref adapter`` process (spec/adapter.md, "Start", "Framing",
"Shutdown and end of input").

The real process on real directories through ``python -m proofs.cli.main adapter`` (an
exchange, a restart on the same directories, exit statuses), and the command line in process.
The serving loop with a fake bookie and byte streams is tested in
tests/unit/impl/server/test_stdio.py. AdapterProcess, the subprocess driver with a timeout on
every read, is shared with test_adapter_kill9.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO

import attrs
import pytest

import proofs.cli.adapter as adapter_cmd
import proofs.cli.main as cli
from impl.server.protocol import RequestBounds
from impl.server.stdio import Ending
from proofs.cli.adapter import (
    EXIT_BAD_CONFIG,
    EXIT_BY_ENDING,
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_OK,
)
from tests.paths import ROOT
from tests.unit.impl.server.fakes import add, b64

#: Every read from the child waits at most this long.
READ_TIMEOUT_S = 20.0


# --- the real process ----------------------------------------------------------------------


class AdapterProcess:
    """``python -m proofs.cli.main adapter`` as a child: requests in, responses read by a thread
    into a queue so that every read has a timeout. Use as a context manager: the child is
    killed on exit if it still runs. Every stdout line must be JSON (checked on receipt)."""

    def __init__(self, tmp_path: Path, *settings: str, args: tuple[str, ...] = ()) -> None:
        argv = [sys.executable, "-m", "proofs.cli.main", "adapter", *args]
        for setting in settings:
            argv += ["--set", setting]
        number = len(list(tmp_path.glob("stderr-*.txt")))
        self.stderr_path = tmp_path / f"stderr-{number}.txt"
        self._stderr: IO[bytes] = self.stderr_path.open("wb")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.child = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, cwd=ROOT,
            env=env,
        )  # fmt: skip
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.child.stdout is not None
        for line in self.child.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def __enter__(self) -> AdapterProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait(READ_TIMEOUT_S)
        for pipe in (self.child.stdin, self.child.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._stderr.close()

    def send(self, *requests: dict[str, object] | str) -> None:
        assert self.child.stdin is not None
        for request in requests:
            line = request if isinstance(request, str) else json.dumps(request)
            self.child.stdin.write(line.encode() + b"\n")
        self.child.stdin.flush()

    def receive(self, timeout_s: float = READ_TIMEOUT_S) -> dict[str, object]:
        """The next response. Fails the test on a timeout or the end of output."""
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            pytest.fail(f"no response within {timeout_s} s; stderr:\n{self.stderr()}")
        if line is None:
            pytest.fail(f"the adapter closed its output; stderr:\n{self.stderr()}")
        response = json.loads(line)
        assert isinstance(response, dict), line
        return response

    def ready(self) -> dict[str, object]:
        response = self.receive()
        assert response.get("event") == "ready", response
        return response

    def call(self, request: dict[str, object]) -> dict[str, object]:
        """Send one request and return its response (nothing else may be in flight)."""
        self.send(request)
        response = self.receive()
        assert response["id"] == request["id"], (request, response)
        return response

    def close_stdin(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()

    def wait(self, timeout_s: float = READ_TIMEOUT_S) -> int:
        return self.child.wait(timeout_s)

    def rest(self, timeout_s: float = READ_TIMEOUT_S) -> list[dict[str, object]]:
        """Every response until the end of output."""
        responses: list[dict[str, object]] = []
        while True:
            try:
                line = self._lines.get(timeout=timeout_s)
            except queue.Empty:
                pytest.fail(f"output did not end within {timeout_s} s")
            if line is None:
                return responses
            responses.append(json.loads(line))

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


def dirs(tmp_path: Path) -> tuple[str, str]:
    return (
        f"journalDirectories={tmp_path / 'journal'}",
        f"ledgerDirectories={tmp_path / 'ledgers0'},{tmp_path / 'ledgers1'}",
    )


def test_exchange_restart_and_shutdown(tmp_path: Path) -> None:
    with AdapterProcess(tmp_path, *dirs(tmp_path), "journalMaxGroupWaitMSec=0") as adapter:
        ready = adapter.ready()
        assert ready["version"] == 2
        assert ready["max_data_bytes"] == 5 * 1024 * 1024 - 516
        # spec/adapter.md, "Capabilities": bkref claims everything, with absolute directories.
        assert str(ready["bookie"]).startswith("bkref ")
        assert ready["ops"] == ["checkpoint", "gc", "inspect", "write_close"]
        assert (ready["state"], ready["answers"]) == ("full", "bkref")
        assert ready["format"] == {
            "journal_dirs": [str(tmp_path / "journal")],
            "ledger_dirs": [str(tmp_path / "ledgers0"), str(tmp_path / "ledgers1")],
        }
        adapter.send(add(1, 7, 0, b"hello"), add(2, 7, 1, b"world"))
        assert {adapter.receive()["id"], adapter.receive()["id"]} == {1, 2}
        assert adapter.call({"id": 3, "op": "read", "ledger": 7, "entry": 1}) == {
            "id": 3,
            "ok": True,
            "data": b64(b"world"),
        }
        assert adapter.call(add(4, 7, 2, b"x", key=b"\x0b\xad"))["error"] == "unauthorized"
        assert adapter.call({"id": 5, "op": "fence", "ledger": 7, "key": "c0ffee"})["ok"]
        assert adapter.call(add(6, 7, 2, b"x"))["error"] == "fenced"
        assert adapter.call({"id": 7, "op": "read", "ledger": 7, "entry": 9})["error"] == (
            "no_entry"
        )
        assert adapter.call({"id": 8, "op": "read", "ledger": 8, "entry": 0})["error"] == (
            "no_ledger"
        )
        assert adapter.call({"id": 9, "op": "checkpoint"}) == {"id": 9, "ok": True}
        state = adapter.call({"id": 10, "op": "inspect"})["state"]
        assert isinstance(state, dict)
        assert state["fenced_ledgers"] == [7]
        assert adapter.call({"id": 11, "op": "gc", "force": True}) == {
            "id": 11,
            "ok": True,
            "compaction": "major",
            "logs_deleted": 0,
            "logs_compacted": 0,
            "entries_moved": 0,
            "bytes_reclaimed": 0,
        }
        adapter.send("not json")
        assert adapter.receive()["id"] is None
        assert adapter.call({"id": 12, "op": "shutdown"}) == {"id": 12, "ok": True}
        assert adapter.wait() == EXIT_OK
        assert adapter.rest() == []
        assert "Traceback" not in adapter.stderr()
    with AdapterProcess(tmp_path, *dirs(tmp_path), args=("--seed", "5")) as adapter:
        adapter.ready()
        assert adapter.call({"id": 1, "op": "read", "ledger": 7, "entry": 0})["data"] == (
            b64(b"hello")
        )
        assert adapter.call(add(2, 7, 3, b"late"))["error"] == "fenced"
        adapter.close_stdin()
        assert adapter.wait() == EXIT_OK


def _log_files(tmp_path: Path) -> list[str]:
    return sorted(path.name for path in tmp_path.glob("ledgers*/current/*") if ".log" in path.name)


def test_gc_reclaims_a_deleted_ledger_and_the_live_one_still_reads(tmp_path: Path) -> None:
    """Two ledgers interleaved over several entry logs; ledger 2 is deleted; a forced gc
    compacts every log (each is half dead, below majorCompactionThreshold 0.8), answers what
    it did, and every entry of ledger 1 still reads, also after a restart."""
    settings = (*dirs(tmp_path), "journalMaxGroupWaitMSec=0", "logSizeLimit=4096")
    data = {entry: bytes([entry]) * 200 for entry in range(30)}
    with AdapterProcess(tmp_path, *settings) as adapter:
        adapter.ready()
        request_id = 0
        for entry, payload in data.items():
            for ledger in (1, 2):
                request_id += 1
                assert adapter.call(add(request_id, ledger, entry, payload))["ok"]
        assert adapter.call({"id": 100, "op": "checkpoint"})["ok"]
        before = _log_files(tmp_path)
        assert adapter.call({"id": 101, "op": "delete", "ledger": 2})["ok"]
        stats = adapter.call({"id": 102, "op": "gc", "force": True})
        assert stats["ok"] is True and stats["compaction"] == "major", stats
        compacted, moved = stats["logs_compacted"], stats["entries_moved"]
        assert isinstance(compacted, int) and compacted >= 1, stats
        assert isinstance(moved, int) and 1 <= moved < len(data), stats  # not the active log's
        reclaimed = stats["bytes_reclaimed"]
        assert isinstance(reclaimed, int) and reclaimed >= moved * 200, stats
        after = _log_files(tmp_path)
        assert not any(name.endswith(("compacting", "compacted")) for name in after), after
        assert after != before
        for entry, payload in data.items():
            read = adapter.call({"id": 200 + entry, "op": "read", "ledger": 1, "entry": entry})
            assert read["data"] == b64(payload), (entry, read)
        gone = adapter.call({"id": 300, "op": "read", "ledger": 2, "entry": 0})
        assert gone["error"] == "no_ledger"
        again = adapter.call({"id": 301, "op": "gc", "force": True})
        assert again["logs_compacted"] == 0 and again["entries_moved"] == 0, again
        assert adapter.call({"id": 302, "op": "shutdown"})["ok"]
        assert adapter.wait() == EXIT_OK
        assert "Traceback" not in adapter.stderr()
    with AdapterProcess(tmp_path, *settings) as adapter:
        adapter.ready()
        for entry, payload in data.items():
            read = adapter.call({"id": entry + 1, "op": "read", "ledger": 1, "entry": entry})
            assert read["data"] == b64(payload), (entry, read)
        adapter.close_stdin()
        assert adapter.wait() == EXIT_OK


def test_end_of_input_shuts_down_cleanly_and_answers_what_is_in_flight(tmp_path: Path) -> None:
    with AdapterProcess(tmp_path, *dirs(tmp_path), "journalMaxGroupWaitMSec=50") as adapter:
        adapter.ready()
        adapter.send(*(add(i, 1, i, bytes([i])) for i in range(20)))
        adapter.close_stdin()  # at once: most adds are still waiting for their group
        responses = adapter.rest()
        assert adapter.wait() == EXIT_OK
    assert sorted(r["id"] for r in responses) == list(range(20))  # type: ignore[type-var]
    assert all(r["ok"] for r in responses), responses
    with AdapterProcess(tmp_path, *dirs(tmp_path)) as adapter:
        adapter.ready()
        for i in range(20):
            read = {"id": i, "op": "read", "ledger": 1, "entry": i}
            assert adapter.call(read)["data"] == b64(bytes([i]))


def test_bad_configuration_exits_2_with_one_line(tmp_path: Path) -> None:
    with AdapterProcess(tmp_path, *dirs(tmp_path), "logSizeLimit=lots") as adapter:
        assert adapter.wait() == EXIT_BAD_CONFIG
        assert adapter.rest() == []
        lines = adapter.stderr().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("bkref adapter: configuration error:")
    assert "logSizeLimit" in lines[0]


def test_unusable_ledger_directory_exits_1_with_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    settings = (f"journalDirectories={tmp_path / 'j'}", f"ledgerDirectories={blocker}")
    with AdapterProcess(tmp_path, *settings, args=("--seed", "1")) as adapter:
        assert adapter.wait() == EXIT_FAILED
        assert adapter.rest() == []
        stderr = adapter.stderr()
    assert "Traceback" not in stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("bkref adapter: cannot ")
    assert str(blocker) in stderr


def test_page_lists_the_fields_of_the_inspected_state() -> None:
    from impl.bookie.bookie import BookieState
    from impl.entrylog.manager import LogState
    from tests.unit.impl.server.test_protocol import PAGE

    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("- `inspect` -> `state`") : text.index("- `shutdown`: the adapter")]
    rows = [line.strip() for line in section.splitlines() if line.strip().startswith("| `")]
    # The state's fields, then ledgers_maps, which the dispatcher adds (Bookie.ledgers_maps).
    fields = [f.name for f in attrs.fields(BookieState)]
    assert [row.split("`")[1] for row in rows] == [*fields, "ledgers_maps"]
    for state in LogState:
        assert f"`{state.value}`" in rows[0]


# --- the command line, in process ----------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["--set", "logSizeLimit=lots"], ["--conf", "/nonexistent/bk_server.conf"]],
)
def test_configuration_errors_exit_2_before_touching_stdout(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["adapter", *argv]) == EXIT_BAD_CONFIG
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("bkref adapter: configuration error:")
    assert err.count("\n") == 1


def test_adapter_is_in_the_command_table() -> None:
    assert ("adapter", "proofs.cli.adapter") in {(name, mod) for name, mod, _ in cli.COMMANDS}
    parser = cli.build_parser("adapter")
    args = parser.parse_args(["adapter", "--set", "a=b", "--seed", "3"])
    assert (args.set, args.seed, args.conf) == (["a=b"], 3, None)


def test_module_exit_statuses_are_distinct() -> None:
    codes = {EXIT_OK, EXIT_FAILED, EXIT_BAD_CONFIG, EXIT_INTERNAL}
    assert len(codes) == 4
    assert adapter_cmd.EXIT_BAD_CONFIG == 2 and adapter_cmd.EXIT_INTERNAL == 70
    assert RequestBounds.from_max_sane_entry_size(1000).data_max_bytes == 984


def test_every_ending_of_serve_has_the_exit_status_of_the_spec_table() -> None:
    # spec/adapter.md, "Start": 0 after a clean shutdown, 1 when it failed, 70 on a bug.
    assert EXIT_BY_ENDING == {
        Ending.CLEAN: 0,
        Ending.SHUTDOWN_FAILED: 1,
        Ending.INTERNAL_ERROR: 70,
        Ending.OUTPUT_FAILED: 1,
    }
    assert set(EXIT_BY_ENDING) == set(Ending)


def test_a_damaged_file_exits_1_with_one_line_naming_it_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """Issue 10: damage is refused before the ready line, with the file and what to do, and
    the directories are left as they were (the recovery checkpoint never ran)."""
    with AdapterProcess(tmp_path, *dirs(tmp_path), "journalMaxGroupWaitMSec=0") as adapter:
        adapter.ready()
        assert adapter.call(add(1, 7, 0, b"hello"))["ok"]
        assert adapter.call({"id": 2, "op": "delete", "ledger": 7})["ok"]
        assert adapter.call({"id": 3, "op": "shutdown"})["ok"]
        assert adapter.wait() == EXIT_OK
    deleted = tmp_path / "ledgers0" / "current" / "bkref-index" / "deleted-ledgers"
    record = bytearray(deleted.read_bytes())
    record[9] ^= 0x01  # a flipped bit in the ledger id of the only record
    deleted.write_bytes(bytes(record))
    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    with AdapterProcess(tmp_path, *dirs(tmp_path), args=("--seed", "1")) as adapter:
        assert adapter.wait() == EXIT_FAILED
        assert adapter.rest() == []
        stderr = adapter.stderr()
    assert "Traceback" not in stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("bkref adapter: cannot recover the bookie: damaged file ")
    assert f"{deleted} at offset 0" in stderr
    assert "What to do:" in stderr
    after = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    after = {p: data for p, data in after.items() if not p.name.startswith("stderr-")}
    before = {p: data for p, data in before.items() if not p.name.startswith("stderr-")}
    assert after == before


def test_a_standard_output_that_cannot_be_written_exits_1(tmp_path: Path) -> None:
    """Issue 26: ``bkref adapter > /dev/full`` exited 0 where every other command exits 1;
    a reader that closes the pipe early is not a failure (the client chose to stop)."""
    journal, ledgers = dirs(tmp_path)  # "journalDirectories=...", "ledgerDirectories=..."
    argv = [sys.executable, "-m", "proofs.cli.main", "adapter", "--seed", "1"]
    argv += ["--set", journal, "--set", ledgers]
    with (
        (ROOT / "docs" / "examples" / "requests.jsonl").open("rb") as requests,
        open("/dev/full", "wb") as full,
    ):
        result = subprocess.run(
            argv, stdin=requests, stdout=full, stderr=subprocess.PIPE, cwd=ROOT, timeout=60
        )
    assert result.returncode == EXIT_FAILED, result.stderr
    assert b"No space left on device" in result.stderr
    assert b"Traceback" not in result.stderr
