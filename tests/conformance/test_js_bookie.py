"""tests/conformance/js/bookie.js: the JavaScript bookie, through a pipe and through
``bkref record`` + ``bkref check-trace``.

Why: the bookie is the conformance kit's proof of language independence, so it is tested as
a client would see it (spec/adapter.md: the worked example, pipelining, kill -9 and
restart), and its deliberate bugs are each shown directly (the bookie really has the bug)
and through the checker (the model catches it). The rules every pipe bookie keeps alike
(malformed requests, bounds, ids in flight, end of input, shutdown) are held in
test_pipe_protocol.py, for every bookie written elsewhere. Skipped, with the reason, when
Node is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.jsbookie import (
    BUGS,
    JS_BOOKIE,
    js_bookie_argv,
    js_bookie_command,
    node_unavailable,
)
from tests.conformance.malformed import (
    MAX_DATA,
    MAX_KEY,
    MAX_LINE,
)
from tests.conformance.pipe_client import KEY, PipeBookie, add, b64, check_worked_example, op, read
from tests.paths import ROOT

NODE_MISSING = node_unavailable()
pytestmark = pytest.mark.skipif(NODE_MISSING is not None, reason=NODE_MISSING or "")

TIMEOUT_S = 20.0
U63 = 2**63 - 1


class Bookie(PipeBookie):
    """bookie.js as a child on a data directory (tests/conformance/pipe_client.py)."""

    def __init__(
        self,
        data_dir: Path,
        *bugs: str,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            data_dir, argv or js_bookie_argv(str(data_dir), *bugs), env=env, timeout_s=TIMEOUT_S
        )


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def bookie(data_dir: Path) -> Iterator[Bookie]:
    with Bookie(data_dir) as running:
        running.ready()
        yield running


# --- the command and the ready line -------------------------------------------------------


def test_the_command_has_the_data_dir_placeholder_and_the_bug_flags() -> None:
    command = js_bookie_command("stale-cache", "forget-fences")
    assert "{data_dir}" in command and JS_BOOKIE in command
    assert command.endswith("--bug stale-cache --bug forget-fences")
    with pytest.raises(ValueError, match="no bug"):
        js_bookie_command("lose-everything")


def test_the_ready_line_is_version_2_with_its_capabilities(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        ready = bookie.ready()
        assert ready == {
            "id": None,
            "ok": True,
            "event": "ready",
            "version": 2,
            "max_data_bytes": MAX_DATA,
            "max_key_bytes": MAX_KEY,
            "max_line_bytes": MAX_LINE,
            "bookie": ready["bookie"],
            "ops": ["checkpoint", "inspect"],
            "state": "protocol",
            "answers": "bkref",
        }
        assert bookie.close() == 0


def test_the_data_dir_may_come_from_the_environment(tmp_path: Path) -> None:
    env = {**os.environ, "BKREF_DATA_DIR": str(tmp_path / "env")}
    done = subprocess.run(
        ["node", JS_BOOKIE], input=add(1, 1, 0).encode() + b"\n", capture_output=True, env=env,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[1]) == {"id": 1, "ok": True}
    assert (tmp_path / "env" / "bookie.log").stat().st_size > 0


def test_a_bad_bug_flag_and_an_unusable_dir_exit_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        ["node", JS_BOOKIE, str(tmp_path), "--bug", "nope"], capture_output=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 2 and done.stdout == b"", done
    assert b"--bug needs one of" in done.stderr
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = subprocess.run(
        ["node", JS_BOOKIE, str(blocker / "data")], capture_output=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 1 and done.stdout == b"", done
    assert b"cannot recover the log" in done.stderr


# --- the worked example of spec/adapter.md --------------------------------------------------


def test_the_worked_example(data_dir: Path) -> None:
    check_worked_example(lambda: Bookie(data_dir), ["gc", "write_close"])


# --- pipelining and group commit ------------------------------------------------------------


def test_pipelined_adds_share_group_commits(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        count = 600
        answers = bookie.ask(*(add(i, 1 + i % 4, i, bytes([i % 256]) * 100) for i in range(count)))
        assert all(a == {"id": i, "ok": True} for i, a in answers.items()), answers
        reads = bookie.ask(*(read(10000 + i, 1 + i % 4, i) for i in range(0, count, 7)))
        for k, a in reads.items():
            assert a["data"] == b64(bytes([(int(str(k)) - 10000) % 256]) * 100), a
        assert bookie.close() == 0
        stats = re.search(r"(\d+) records in (\d+) writes, (\d+) fdatasyncs", bookie.stderr())
        assert stats is not None, bookie.stderr()
        records, writes, syncs = map(int, stats.groups())
        assert records == count
        assert writes == syncs < count // 10, "adds read in one turn share a write and a sync"


def test_delete_is_durable_and_refuses_adds_in_flight(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 3, 0)) == {"id": 1, "ok": True}
        answers = bookie.ask(add(2, 3, 1), op(3, "delete", ledger=3), add(4, 3, 2))
        assert answers[2]["error"] == "no_ledger", "in flight when its ledger was deleted"
        assert answers[3] == {"id": 3, "ok": True}
        assert answers[4]["error"] == "no_ledger", "a deleted ledger is never written again"
        assert bookie.one(op(5, "fence", ledger=3, key=KEY))["error"] == "no_ledger"
        assert bookie.one(op(6, "delete", ledger=12345)) == {"id": 6, "ok": True}
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(read(1, 3, 0))["error"] == "no_ledger"
        state = bookie.one(op(2, "inspect"))["state"]
        assert isinstance(state, dict)
        assert state["deleted_ledgers"] == [3, 12345] and state["ledgers"] == []


def test_inspect_shows_the_protocol_state(bookie: Bookie) -> None:
    bookie.send(
        add(1, 2, 5), add(2, 2, 3), add(3, 9, 0, key="aa"), op(4, "fence", ledger=9, key="aa")
    )
    bookie.send(op(5, "fence", ledger=4, key="bb"), op(6, "checkpoint"), op(7, "inspect"))
    answers = bookie.responses(7)
    assert all(a["ok"] for a in answers.values())
    assert answers[7]["state"] == {
        "entry_logs": [],
        "least_unflushed_log_id": 0,
        "last_mark": {"journal_id": 0, "offset": 0},
        "journal_mark": {"journal_id": 0, "offset": 0},
        "current_log_id": None,
        "ledgers": [
            {"ledger_id": 2, "last_entry": 5, "fenced": False},
            {"ledger_id": 4, "last_entry": None, "fenced": True},
            {"ledger_id": 9, "last_entry": 0, "fenced": True},
        ],
        "fenced_ledgers": [4, 9],
        "deleted_ledgers": [],
        "compaction_files": [],
    }


# --- crashes -----------------------------------------------------------------------------------


def test_kill_9_and_restart_keep_acked_adds_and_fences(data_dir: Path) -> None:
    acked: dict[tuple[int, int], bytes] = {}
    with Bookie(data_dir) as bookie:
        bookie.ready()
        bookie.send(*(add(i, 1 + i % 3, i, f"entry {i}".encode() * (i % 7)) for i in range(300)))
        bookie.send(op(1000, "fence", ledger=3, key=KEY))
        for _ in range(150):
            answer = bookie.receive()
            if answer.get("ok") and answer["id"] != 1000:
                i = int(str(answer["id"]))
                acked[(1 + i % 3, i)] = f"entry {i}".encode() * (i % 7)
        bookie.kill9()
    assert len(acked) >= 100
    with Bookie(data_dir) as bookie:
        bookie.ready()
        ids = list(acked)
        answers = bookie.ask(*(read(n, ledger, entry) for n, (ledger, entry) in enumerate(ids)))
        for n, key in enumerate(ids):
            assert answers[n]["data"] == b64(acked[key]), key
        assert bookie.one(op(5000, "fence", ledger=2, key=KEY)) == {"id": 5000, "ok": True}
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 2, 9999))["error"] == "fenced"
        assert bookie.close() == 0


def test_a_torn_tail_is_cut_at_start(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.ask(add(1, 1, 0, b"kept"), add(2, 1, 1, b"kept too"))[2]["ok"]
        bookie.kill9()
    log = data_dir / "bookie.log"
    size = log.stat().st_size
    good = log.read_bytes()
    # A torn record: a length promising more than is there; then one whose checksum fails.
    for torn in (good[:8] + b"\xff" * 5, good[: size // 2][-30:] + b"\0" * 40):
        log.write_bytes(good + torn)
        with Bookie(data_dir) as bookie:
            bookie.ready()
            assert bookie.one(read(1, 1, 1)) == {"id": 1, "ok": True, "data": b64(b"kept too")}
            assert bookie.one(add(2, 1, 2, b"after")) == {"id": 2, "ok": True}
            bookie.kill9()
        assert "cut a torn tail" in bookie.stderr()
        with Bookie(data_dir) as bookie:
            bookie.ready()
            assert bookie.one(read(1, 1, 2))["data"] == b64(b"after")
            assert bookie.close() == 0
        log.write_bytes(good)


def test_a_crash_before_the_first_record_leaves_an_empty_log_that_starts(data_dir: Path) -> None:
    data_dir.mkdir()
    (data_dir / "bookie.log").write_bytes(b"\0" * 4096)  # size made durable, data not
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(read(1, 1, 0))["error"] == "no_ledger"
        assert bookie.close() == 0
    assert (data_dir / "bookie.log").stat().st_size == 0


# --- the bugs, shown directly --------------------------------------------------------------


def _working_strace() -> str | None:
    """strace, if it is installed and may trace here (containers often forbid ptrace)."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    try:
        done = subprocess.run([strace, "-o", os.devnull, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return strace if done.returncode == 0 else None


def _syscalls(trace: Path) -> list[str]:
    """The fdatasync, pwrite (to the log) and write(1) (responses) calls, in order."""
    order = []
    for line in trace.read_text().splitlines():
        if re.search(r"\bfdatasync\(", line):
            order.append("sync")
        elif re.search(r"\bpwrite64\(", line):
            order.append("log")
        elif re.search(r'\bwrite\(1, "\{\\"id\\":\d+,\\"ok\\":true', line):
            order.append("ack")
    return order


@pytest.mark.parametrize("bug", [None, "ack-before-fsync"])
def test_ack_before_fsync_acknowledges_adds_before_their_fdatasync(
    tmp_path: Path, bug: str | None
) -> None:
    """The bookie's own count, and (where strace is installed) the order of its system calls:
    without the bug every ack follows the fdatasync of its write; with it, none does."""
    data = tmp_path / "data"
    bugs = (bug,) if bug else ()
    strace = _working_strace()
    trace = tmp_path / "strace.txt"
    argv = js_bookie_argv(str(data), *bugs)
    if strace is not None:
        calls = "trace=fdatasync,pwrite64,write"
        argv = [strace, "-f", "-qq", "-e", calls, "-o", str(trace), *argv]
    with Bookie(data, argv=argv) as bookie:
        bookie.ready()
        for i in range(5):
            assert bookie.one(add(i, 1, i)) == {"id": i, "ok": True}
        assert bookie.close() == 0
    early = re.search(r"(\d+) acks before their fdatasync", bookie.stderr())
    assert early is not None, bookie.stderr()
    assert int(early.group(1)) == (5 if bug else 0)
    if strace is None:
        return
    order = _syscalls(trace)
    acks = [i for i, call in enumerate(order) if call == "ack"]
    assert len(acks) == 5, order
    unsynced = [
        i for i in acks if order[max(j for j in range(i) if order[j] in ("log", "sync"))] == "log"
    ]
    if bug is None:
        assert not unsynced, f"every ack follows the fdatasync of its write: {order}"
    else:
        assert unsynced == acks, f"each add is acked right after its write: {order}"


def test_forget_fences_undoes_a_fence_at_restart(data_dir: Path) -> None:
    for bug, want in ((None, "fenced"), ("forget-fences", None)):
        shutil.rmtree(data_dir, ignore_errors=True)
        bugs = (bug,) if bug else ()
        with Bookie(data_dir, *bugs) as bookie:
            bookie.ready()
            assert bookie.one(add(1, 5, 0))["ok"]
            assert bookie.one(op(2, "fence", ledger=5, key=KEY)) == {"id": 2, "ok": True}
            assert bookie.one(add(3, 5, 1))["error"] == "fenced"  # within the run: fenced
            bookie.kill9()
        with Bookie(data_dir, *bugs) as bookie:
            bookie.ready()
            assert bookie.one(add(1, 5, 1)).get("error") == want, bug
            assert bookie.close() == 0


def test_stale_cache_serves_a_cached_no_entry_after_the_add_is_acked(bookie: Bookie) -> None:
    for bug, want in ((None, True), ("stale-cache", False)):
        data = bookie.data_dir.parent / f"data-{bug}"
        with Bookie(data, *((bug,) if bug else ())) as running:
            running.ready()
            assert running.one(add(1, 1, 0))["ok"]
            assert running.one(read(2, 1, 1))["error"] == "no_entry"
            assert running.one(add(3, 1, 1, b"now")) == {"id": 3, "ok": True}
            assert running.one(read(4, 1, 1))["ok"] is want, bug
            # A missing ledger is cached for all its entries.
            assert running.one(read(5, 2, 0))["error"] == "no_ledger"
            assert running.one(add(6, 2, 7)) == {"id": 6, "ok": True}
            assert running.one(read(7, 2, 7))["ok"] is want, bug
            # A deleted entry stays readable from the cache.
            assert running.one(read(8, 1, 0))["ok"] is True
            assert running.one(op(9, "delete", ledger=1)) == {"id": 9, "ok": True}
            assert running.one(read(10, 1, 0)).get("error") == ("no_ledger" if want else None)
            assert running.close() == 0


# --- recorded by bkref record, judged by bkref check-trace ------------------------------------


def _bkref(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", *args],
        input=stdin, capture_output=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip


class Recorded(Bookie):
    """bookie.js under ``bkref record``; kill9 kills the bookie (the recorder records it)."""

    def __init__(self, trace: Path, data_dir: Path, *bugs: str) -> None:
        argv = [
            sys.executable, "-m", "proofs.cli.main", "record", "--trace", str(trace),
            "--profile", "state=protocol,answers=bkref",
            "--", *js_bookie_argv(str(data_dir), *bugs),
        ]  # fmt: skip
        super().__init__(data_dir, argv=argv, env={**os.environ, "PYTHONPATH": str(ROOT)})

    def kill9(self) -> None:
        pid = _bookie_pid(self)
        os.kill(pid, signal.SIGKILL)
        assert self.child.wait(TIMEOUT_S) == 128 + signal.SIGKILL


def _bookie_pid(recorded: Bookie) -> int:
    for _ in range(2000):
        found = re.search(r"bkref record: started pid (\d+)", recorded.stderr())
        if found:
            return int(found.group(1))
        threading.Event().wait(0.01)
    pytest.fail(f"no pid line; stderr:\n{recorded.stderr()}")


def record_run(tmp_path: Path, *bugs: str) -> Path:
    """A scripted run of bookie.js under ``bkref record``: pipelined adds, a fence, a read
    that misses, kill -9 with adds in flight, a restart that reads back and adds to the fenced
    ledger, a delete, an inspect, the end of input. Returns the trace."""
    trace = tmp_path / "js.jsonl"
    data = tmp_path / "data"
    with Recorded(trace, data, *bugs) as rec:
        rec.ready()
        answers = rec.ask(*(add(i, 1 + i % 2, i // 2, f"d{i}".encode()) for i in range(20)))
        assert all(a["ok"] for a in answers.values())
        assert rec.one(read(100, 1, 50))["error"] == "no_entry"  # a miss (cached by stale-cache)
        assert rec.one(op(101, "fence", ledger=2, key=KEY)) == {"id": 101, "ok": True}
        assert rec.one(add(102, 1, 50, b"late")) == {"id": 102, "ok": True}
        rec.one(read(103, 1, 50))  # stale-cache: no_entry after the ack; the checker says so
        rec.send(*(add(200 + i, 3, i, b"burst" * i) for i in range(200)))
        for _ in range(20):
            rec.receive()
        rec.kill9()
    with Recorded(trace, data, *bugs) as rec:
        rec.ready()
        answers = rec.ask(read(1, 1, 0), read(2, 2, 9), add(3, 2, 10), op(4, "inspect"))
        rec.ask(op(5, "delete", ledger=1), read(6, 1, 0), op(7, "checkpoint"), op(8, "inspect"))
        assert rec.close() == 0
    return trace


def test_recorded_run_passes_check_trace(tmp_path: Path) -> None:
    trace = record_run(tmp_path)
    text = trace.read_text()
    assert '"op": "crash"' in text and '"op": "restart"' in text
    assert '"state": {' in text  # the inspects' states are judged
    done = _bkref("check-trace", str(trace))
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


@pytest.mark.parametrize(
    ("bug", "named"),
    [
        ("forget-fences", r"add 2:10 answered ok; allowed: fenced"),
        ("stale-cache", r"read 1:50 answered failed: no_entry; allowed: data"),
    ],
    ids=["forget-fences", "stale-cache"],
)
def test_recorded_run_with_a_bug_fails_check_trace(tmp_path: Path, bug: str, named: str) -> None:
    trace = record_run(tmp_path, bug)
    done = _bkref("check-trace", str(trace))
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 1, out
    assert re.search(named, out), out


def test_ack_before_fsync_survives_kill_9_so_check_trace_passes(tmp_path: Path) -> None:
    """Its acks are early, but SIGKILL keeps the page cache: only a power loss (bkref's lazy
    disk) can catch it, never a kill -9."""
    trace = record_run(tmp_path, "ack-before-fsync")
    done = _bkref("check-trace", str(trace))
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


def test_every_bug_has_a_test() -> None:
    assert set(BUGS) == {"ack-before-fsync", "forget-fences", "stale-cache", "unsynced-recovery"}
