"""proofs/cli/record.py: ``bkref record`` (the mapping of its module docstring).

The window rule and the mapping are driven through the real command with a fake child
(record_fake_child.py) that decides when each response is written, so every test is
deterministic; the Recorder is also fed lines directly where a race between the two relay
directions would make a process test flaky. The end-to-end test records ``bkref adapter``
through several runs, a kill -9 among them; tests/quality/test_trace_mutations.py mutates
that trace.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from impl.server.protocol import Claims, RequestBounds, encode_response, ready_event
from proofs.cli.record import (
    EXIT_USAGE,
    Recorder,
    adapter_state,
    config_pairs,
    parse_profile,
)
from spec.crash import Unknown
from spec.errors import TraceError
from spec.operations import (
    CRASHED,
    OK,
    PENDING,
    Add,
    Completion,
    Crash,
    Fence,
    Gc,
    GcReport,
    Read,
    Restart,
    Result,
    Shutdown,
    failed,
)
from spec.profile import ADAPTER_PROFILE, Profile
from spec.trace import Step, Trace, TraceHeader, encode_header, read_trace, read_trace_bytes
from tests.line_child import LineChild
from tests.paths import ROOT
from tests.unit.proofs.cli import record_fake_child as fake

READ_TIMEOUT_S = 20.0
FAKE = str(Path(fake.__file__))
KEY = "c0ffee"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def add(rid: int, ledger: int, entry: int, data: bytes = b"x") -> dict[str, object]:
    return {"id": rid, "op": "add", "ledger": ledger, "entry": entry, "key": KEY, "data": b64(data)}


def read(rid: int, ledger: int, entry: int) -> dict[str, object]:
    return {"id": rid, "op": "read", "ledger": ledger, "entry": entry}


class Recording(LineChild):
    """``bkref record --trace TRACE -- CMD`` as a child (tests/line_child.py)."""

    def __init__(self, trace: Path, command: list[str], *options: str) -> None:
        argv = [sys.executable, "-m", "proofs.cli.main", "record", "--trace", str(trace)]
        super().__init__(
            [*argv, *options, "--", *command], trace.parent, "record-stderr", READ_TIMEOUT_S,
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip

    def send(self, *requests: dict[str, object] | str | bytes) -> None:
        lines = (
            request
            if isinstance(request, bytes)
            else (request if isinstance(request, str) else json.dumps(request)).encode() + b"\n"
            for request in requests
        )
        self.write(b"".join(lines))

    def receive(self) -> dict[str, object]:
        response = json.loads(self.raw())
        assert isinstance(response, dict), response
        return response

    def ready(self) -> None:
        assert self.receive().get("event") == "ready"

    def responses(self, count: int) -> dict[object, dict[str, object]]:
        """The next ``count`` responses, by id."""
        return {r["id"]: r for r in (self.receive() for _ in range(count))}

    def rest(self) -> list[bytes]:
        lines = []
        while (line := self._lines.get(timeout=READ_TIMEOUT_S)) is not None:
            lines.append(line)
        return lines

    def bookie_pid(self) -> int:
        """The recorded child's pid, from the recorder's start line on stderr."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            found = re.search(r"bkref record: started pid (\d+)", self.stderr())
            if found:
                return int(found.group(1))
            time.sleep(0.01)
        pytest.fail(f"no pid line; stderr:\n{self.stderr()}")


def fake_child(mode: str, *args: str) -> list[str]:
    return [sys.executable, FAKE, mode, *args]


def steps(path: Path) -> tuple[Step, ...]:
    return read_trace_bytes(path.read_bytes(), str(path)).steps


# --- the window rule, through the process -----------------------------------------------------


def test_a_synchronous_request_holds_the_next_line_so_the_order_is_the_bookies(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "t.jsonl"
    with Recording(trace, fake_child("lazy")) as rec:
        # All four at once: the add after the read must wait for the read's answer, or the
        # read would still be open when the add's step starts.
        rec.send(add(1, 7, 0, b"a"), read(2, 7, 0), add(3, 7, 1), {"id": 4, "op": "checkpoint"})
        answers = rec.responses(4)
        assert answers[2] == {"id": 2, "ok": True, "data": b64(b"a")}
        assert rec.close() == 0
    assert [(s.op, s.result, s.completed) for s in steps(trace)] == [
        (Add(7, 0, bytes.fromhex(KEY), b"a"), PENDING, ()),
        (Read(7, 0), Result(data=b"a"), (Completion(0),)),
        (Add(7, 1, bytes.fromhex(KEY), b"x"), PENDING, ()),
        (step_checkpoint := steps(trace)[3].op, OK, (Completion(2),)),
        (Shutdown(), OK, ()),
    ]
    assert step_checkpoint.name == "checkpoint"


def test_an_add_answered_in_its_own_window_gets_its_answer_as_result(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with Recording(trace, fake_child("eager")) as rec:
        rec.ready()
        rec.send(add(1, 7, 0))
        assert rec.receive() == {"id": 1, "ok": True}
        rec.send({"id": 2, "op": "fence", "ledger": 7, "key": KEY})
        assert rec.receive()["id"] == 2
        rec.send(add(3, 7, 1))
        assert rec.receive()["error"] == "fenced"
        assert rec.close() == 0
    assert [s.result for s in steps(trace)] == [OK, OK, failed("fenced"), OK]
    assert all(not s.completed for s in steps(trace))


def test_an_inspect_state_goes_to_the_latest_step(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with Recording(trace, fake_child("eager")) as rec:
        rec.ready()
        rec.send(add(1, 7, 0))
        rec.receive()
        rec.send(
            {"id": 2, "op": "inspect"},
            {"id": 3, "op": "write_close", "ledger": 7, "key": KEY},
            "junk",
        )
        rec.responses(3)
        assert rec.close() == 0
    first, shutdown = steps(trace)
    assert first.result == OK
    assert first.state is not None
    assert first.state.ledger(7) is not None
    log = first.state.log(0)
    assert log is not None and log.ledger_bytes == ((7, 25),)
    assert shutdown.op == Shutdown() and shutdown.state is None


def test_a_response_after_an_inspect_drops_the_state_it_predates(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with Recording(trace, fake_child("lazy")) as rec:
        # The inspect is answered while the add waits; write_close then releases the add's answer in
        # the same window: the state is older than the ack, so it is dropped.
        rec.send(
            add(1, 7, 0),
            {"id": 2, "op": "inspect"},
            {"id": 3, "op": "write_close", "ledger": 7, "key": KEY},
        )
        rec.responses(3)
        assert rec.close() == 0
    first = steps(trace)[0]
    assert first.result == OK  # its own answer, in its own window
    assert first.state is None


def test_end_of_input_is_a_shutdown_step_with_the_acks_written_after_it(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with Recording(trace, fake_child("lazy")) as rec:
        rec.send(add(1, 7, 0), add(2, 7, 1))
        assert rec.close() == 0
        assert len(rec.rest()) == 3  # ready, two acks
    assert [(s.op.name, s.result, s.completed) for s in steps(trace)] == [
        ("add", PENDING, ()),
        ("add", PENDING, ()),
        ("shutdown", OK, (Completion(0), Completion(1))),
    ]


def test_a_child_failing_at_the_end_of_input_is_no_shutdown(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with Recording(trace, fake_child("fail-at-eof")) as rec:
        rec.send(add(1, 7, 0), add(2, 7, 1))
        assert rec.close() == 1
    # The acks after the end of input stay in the last step's window.
    assert [(s.op.name, s.result, s.completed) for s in steps(trace)] == [
        ("add", PENDING, ()),
        ("add", OK, (Completion(0),)),
    ]


def test_later_runs_append_crash_and_restart_steps(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with Recording(trace, fake_child("lazy")) as rec:
        rec.send(add(1, 7, 0), read(2, 666, 0))  # the read kills the child, add in flight
        assert rec.child.wait(READ_TIMEOUT_S) == 128 + signal.SIGKILL
    assert [(s.op.name, s.result) for s in steps(trace)] == [("add", PENDING), ("read", CRASHED)]
    with Recording(trace, fake_child("eager")) as rec:
        rec.send(read(1, 7, 0))
        assert rec.responses(2)[1]["error"] == "no_entry"
        assert rec.close() == 0
    with Recording(trace, fake_child("eager")) as rec:
        assert rec.close() == 0
    assert [(s.index, s.op, s.result) for s in steps(trace)[2:]] == [
        (2, Crash(Unknown()), OK),
        (3, Restart(), OK),
        (4, Read(7, 0), failed("no_entry")),
        (5, Shutdown(), OK),
        (6, Restart(), OK),  # no crash: the previous run shut down cleanly
        (7, Shutdown(), OK),
    ]


def test_a_child_ending_before_its_ready_line_is_a_failed_restart(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with Recording(trace, fake_child("eager")) as rec:
        assert rec.close() == 0
    with Recording(trace, fake_child("noready")) as rec:
        rec.send(read(1, 7, 0))
        assert rec.child.wait(READ_TIMEOUT_S) == 3
    with Recording(trace, fake_child("eager")) as rec:
        assert rec.close() == 0
    assert [(s.op.name, s.result) for s in steps(trace)] == [
        ("shutdown", OK),
        ("restart", failed("io_error")),
        ("crash", OK),
        ("restart", OK),
        ("shutdown", OK),
    ]


def test_the_relay_is_byte_for_byte(tmp_path: Path) -> None:
    trace, copy = tmp_path / "t.jsonl", tmp_path / "copy.bin"
    sent = [
        b'{ "id" : 1, "op":"add","ledger":7,"entry":0,"key":"C0FFEE","data":""}\r\n',
        b"   \n",
        b"\xff\xfe not utf-8\n",
        b'{"id":2,"op":"read","ledger":7,"entry":0,"x":"\\u00e9"}\n',
        b'{"id":3,"op":"fence","ledger":7,"key":""}',  # the last line, without its newline
    ]
    with Recording(trace, fake_child("copy", str(copy))) as rec:
        rec.send(*sent)
        assert rec.close() == 0
        received = rec.rest()
    assert copy.read_bytes() == b"".join(sent)
    assert b"".join(received) == fake.READY + fake.RAW_OUTPUT
    # The add and the fence are steps; the read with a field it does not take is not. (The
    # copying fake answers nothing, and answers no synchronous request, so none is sent.)
    recorded = steps(trace)
    assert [s.op.name for s in recorded] == ["add", "fence", "shutdown"]
    assert recorded[0].op == Add(7, 0, bytes.fromhex(KEY), b"")
    assert recorded[1].op == Fence(7, b"") and recorded[1].result == PENDING


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a trace\n")
    # A trace of an older version: its steps and ours cannot share a file.
    old = tmp_path / "old.jsonl"
    old_text = '{"bkref_trace": 1, "source": "old", "config": {}}\n'
    old.write_text(old_text)
    base = [sys.executable, "-m", "proofs.cli.main", "record"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for argv in (
        [*base, "--trace", str(tmp_path / "t.jsonl")],
        [*base, "--trace", str(bad), "--", "true"],
        [*base, "--trace", str(old), "--", "true"],
        [*base, "--trace", str(tmp_path), "--", "true"],
        [*base, "--trace", str(tmp_path / "t.jsonl"), "--profile", "acks=sometimes", "--", "true"],
    ):
        done = subprocess.run(argv, capture_output=True, cwd=ROOT, env=env, timeout=60)
        assert done.returncode == EXIT_USAGE, (argv, done.stderr)
        assert len(done.stderr.decode().strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith(b"bkref record: ")
    assert bad.read_text() == "not a trace\n"
    assert old.read_text() == old_text
    assert not (tmp_path / "t.jsonl").exists()


# --- the recorder, fed directly ---------------------------------------------------------------


class Fed:
    """A Recorder fed lines by hand; ``lines`` are the step lines it wrote."""

    def __init__(self, **kwargs: int | bool) -> None:
        self.lines: list[str] = []
        self.said: list[str] = []
        self.recorder = Recorder(self.lines.append, self.said.append, **kwargs)  # type: ignore[arg-type]
        self.recorder.response(fake.READY)

    def request(self, obj: dict[str, object] | str) -> int | None:
        line = obj if isinstance(obj, str) else json.dumps(obj)
        return self.recorder.request(line.encode() + b"\n")

    def response(self, obj: dict[str, object]) -> None:
        self.recorder.response(json.dumps(obj).encode() + b"\n")

    def steps(self) -> tuple[Step, ...]:
        header = TraceHeader(config=(), source="t", profile=ADAPTER_PROFILE)
        return read_trace([encode_header(header), *self.lines]).steps


def test_a_version_2_ready_line_gives_its_limits_and_nothing_more() -> None:
    # spec/adapter.md, "Capabilities": record reads the max_* fields only; the claims after
    # them (bkref's own ready line here) neither break it nor change what it records.
    claims = Claims(bookie="bkref 0.1.0", journal_dirs=("/j",), ledger_dirs=("/l",))
    ready = encode_response(ready_event(RequestBounds(data_max_bytes=64, key_max_bytes=8), claims))
    lines: list[str] = []
    said: list[str] = []
    recorder = Recorder(lines.append, said.append)
    recorder.response(ready.encode() + b"\n")
    assert recorder.ready and said == []
    assert recorder.bounds == RequestBounds(data_max_bytes=64, key_max_bytes=8)


def test_holds_are_asked_for_synchronous_requests_only() -> None:
    fed = Fed()
    assert fed.request(add(1, 7, 0)) is None
    assert fed.request({"id": 2, "op": "fence", "ledger": 7, "key": KEY}) is None
    assert fed.request(read(3, 7, 0)) == 3
    assert not fed.recorder.answered(3)
    fed.response({"id": 3, "ok": True, "data": b64(b"x")})
    assert fed.recorder.answered(3)
    synchronous: list[dict[str, object]] = [
        {"op": "delete", "ledger": 7},
        {"op": "checkpoint"},
        {"op": "inspect"},
    ]
    for rid, request in enumerate(synchronous, start=4):
        assert fed.request({"id": rid, **request}) == rid
    assert fed.request({"id": 9, "op": "gc", "force": True}) == 9
    assert fed.request({"id": 11, "op": "write_close", "ledger": 7, "key": KEY}) is None
    assert fed.request({"id": 10, "op": "shutdown"}) == 10


def test_malformed_requests_and_reused_ids_are_not_steps() -> None:
    fed = Fed()
    fed.request(add(1, 7, 0))
    for bad in (
        "junk",
        add(1, 7, 1),  # id 1 is in flight: answered with id null
        {"id": 2, "op": "add", "ledger": 7},
        {"id": 3, "op": "read", "ledger": -1, "entry": 0},
        add(4, 7, 2, b"y" * 65),  # longer than the ready line's max_data_bytes (64)
        {"id": 5, "op": "write_close", "ledger": 7, "key": KEY},
    ):
        assert fed.request(bad) is None
    fed.response({"id": 1, "ok": True})
    fed.response({"id": None, "ok": False, "error": "bad_request", "message": "m"})
    fed.response({"id": 4, "ok": False, "error": "bad_request", "message": "m"})
    fed.recorder.finish(-9)
    assert [(s.op, s.result) for s in fed.steps()] == [(Add(7, 0, bytes.fromhex(KEY), b"x"), OK)]


def test_an_ack_after_the_state_drops_the_state_but_not_the_ack() -> None:
    fed = Fed()
    fed.request(add(1, 7, 0))
    fed.request(add(2, 7, 1))
    fed.request({"id": 3, "op": "inspect"})
    fed.response({"id": 3, "ok": True, "state": fake.STATE})
    fed.response({"id": 1, "ok": True})
    fed.request(add(4, 7, 2))
    fed.request({"id": 5, "op": "inspect"})
    fed.response({"id": 5, "ok": True, "state": fake.STATE})
    fed.recorder.finish(-9)
    _, second, third = fed.steps()
    assert second.completed == (Completion(0),) and second.state is None
    assert third.state is not None and third.result == PENDING


def test_a_state_that_does_not_convert_is_said_and_not_recorded() -> None:
    fed = Fed()
    fed.request(add(1, 7, 0))
    fed.request({"id": 3, "op": "inspect"})
    fed.response({"id": 3, "ok": True, "state": {**fake.STATE, "current_log_id": "zero"}})
    fed.recorder.finish(0)
    assert fed.steps()[0].state is None
    assert any("current_log_id" in line for line in fed.said)


def test_an_explicit_shutdown_is_the_last_step() -> None:
    fed = Fed()
    fed.request({"id": 1, "op": "fence", "ledger": 7, "key": KEY})
    assert fed.request({"id": 2, "op": "shutdown"}) == 2
    assert fed.request(add(3, 7, 0)) is None  # the adapter reads nothing after shutdown
    fed.response({"id": 1, "ok": True})
    fed.response({"id": 2, "ok": True})
    fed.recorder.end_of_input()
    fed.recorder.finish(0)
    assert [(s.op, s.result, s.completed) for s in fed.steps()] == [
        (Fence(7, bytes.fromhex(KEY)), PENDING, ()),
        (Shutdown(), OK, (Completion(0),)),
    ]


def test_adapter_state_drops_the_fields_the_trace_has_not() -> None:
    state = adapter_state(fake.STATE, "here")
    assert state.ledger(7) is not None and state.journal_mark == (1, 512)
    with pytest.raises(TraceError, match="here"):
        adapter_state({**fake.STATE, "unknown_field": 1}, "here")


def test_profile_and_config_options() -> None:
    assert parse_profile("") == ADAPTER_PROFILE
    assert parse_profile("state=none") == Profile(acks="async", state="none", answers="either")
    command = ["bkref", "adapter", "--set", "a=1", "--set=b=2", "--seed", "3", "--set", "a=4"]
    assert config_pairs(command, ["c=5", "b=6"]) == (("a", "4"), ("b", "6"), ("c", "5"))


# --- end to end: bkref adapter, kill -9 and restarts ------------------------------------------


def adapter_command(tmp_path: Path) -> list[str]:
    return [
        sys.executable, "-m", "proofs.cli.main", "adapter", "--seed", "7",
        "--set", f"journalDirectories={tmp_path / 'journal'}",
        "--set", f"ledgerDirectories={tmp_path / 'ledgers0'},{tmp_path / 'ledgers1'}",
        "--set", "journalMaxGroupWaitMSec=5", "--set", "logSizeLimit=2048",
    ]  # fmt: skip


def _data(ledger: int, entry: int) -> bytes:
    return f"ledger {ledger} entry {entry} ".encode() * (1 + entry % 5)


def record_scenario(tmp_path: Path) -> Path:
    """Four runs of ``bkref adapter`` through the recorder: pipelined adds, reads, a fence and
    an inspect, ended by the end of input; a burst of adds killed with kill -9 in flight; a
    restart that reads back, adds to the fenced ledger and shuts down by request; a last
    restart. Returns the trace."""
    trace = tmp_path / "scenario.jsonl"
    command = adapter_command(tmp_path)
    with Recording(trace, command) as rec:  # run 1: clean end of input
        rec.ready()
        rec.send(*(add(i, 1 + i % 3, i // 3, _data(1 + i % 3, i // 3)) for i in range(30)))
        rec.send({"id": 100, "op": "fence", "ledger": 3, "key": KEY})
        answers = rec.responses(31)
        assert all(a["ok"] for a in answers.values()), answers
        rec.send(read(101, 1, 4), {"id": 102, "op": "inspect"}, read(103, 3, 0))
        answers = rec.responses(3)
        assert answers[101]["data"] == b64(_data(1, 4))
        rec.send(add(104, 3, 10), add(105, 2, 10, _data(2, 10)))  # to the fenced ledger: refused
        answers = rec.responses(2)
        assert answers[104]["error"] == "fenced" and answers[105]["ok"]
        assert rec.close() == 0
    with Recording(trace, command) as rec:  # run 2: kill -9 with adds in flight
        rec.ready()
        rec.send(*(add(i, 4, i, _data(4, i)) for i in range(400)))
        acked = 0
        while acked < 50:
            acked += bool(rec.receive()["ok"])
        os.kill(rec.bookie_pid(), signal.SIGKILL)
        assert rec.child.wait(READ_TIMEOUT_S) == 128 + signal.SIGKILL
    with Recording(trace, command) as rec:  # run 3: restart, read back, shutdown request
        rec.ready()
        rec.send(read(1, 4, 0), read(2, 2, 10), {"id": 3, "op": "inspect"})
        answers = rec.responses(3)
        assert answers[1]["data"] == b64(_data(4, 0)), answers
        assert answers[2]["data"] == b64(_data(2, 10)), answers
        rec.send(add(4, 3, 11), {"id": 5, "op": "fence", "ledger": 2, "key": KEY})
        answers = rec.responses(2)
        assert answers[4]["error"] == "fenced" and answers[5]["ok"]
        rec.send({"id": 6, "op": "checkpoint"}, {"id": 7, "op": "delete", "ledger": 1})
        assert all(a["ok"] for a in rec.responses(2).values())
        rec.send({"id": 8, "op": "shutdown"})
        assert rec.receive() == {"id": 8, "ok": True}
        assert rec.close() == 0
    with Recording(trace, command) as rec:  # run 4: restart after a clean shutdown
        rec.ready()
        rec.send(add(1, 2, 11), read(2, 1, 0), read(3, 2, 10))
        answers = rec.responses(3)
        assert answers[1]["error"] == "fenced" and answers[2]["error"] == "no_ledger"
        assert rec.close() == 0
    return trace


def test_recording_bkref_adapter_through_crashes_and_restarts(tmp_path: Path) -> None:
    trace_path = record_scenario(tmp_path)
    trace: Trace = read_trace_bytes(trace_path.read_bytes(), str(trace_path))
    assert trace.header.profile == ADAPTER_PROFILE
    assert dict(trace.header.config)["journalMaxGroupWaitMSec"] == "5"
    ops = [s.op.name for s in trace.steps]
    # Run 2's burst: the adds the recorder relayed before the kill are steps.
    assert 50 < ops.count("add") - (30 + 2 + 1 + 1) <= 400
    requests = {"fence": 2, "read": 2 + 2 + 2, "checkpoint": 1}
    for name, count in requests.items():
        assert ops.count(name) == count, name
    assert ops.count("delete") == 1
    assert ops.count("restart") == 3 and ops.count("crash") == 1
    crash = ops.index("crash")
    assert ops[crash + 1] == "restart" and trace.steps[crash].op == Crash(Unknown())
    assert ops.count("shutdown") == 3  # end of input, the request, end of input
    # Every add of run 1 is acknowledged once, ok (an own answer or a completion).
    acked = {s.index for s in trace.steps if s.result.ok and s.op.name in ("add", "fence")}
    for step in trace.steps:
        acked |= {c.step for c in step.completed if c.error is None}
    assert all(i in acked for i in range(31))
    # Run 2's burst: some acks made it into the trace, and adds were still pending at the
    # kill (never completed afterwards).
    burst = range(ops.index("shutdown") + 1, crash)
    assert 50 <= len([i for i in burst if i in acked]) < 400
    assert any(s.state is not None for s in trace.steps)


def test_a_gc_is_a_step_with_its_statistics() -> None:
    fed = Fed()
    stats = {
        "compaction": "major",
        "logs_deleted": 2,
        "logs_compacted": 1,
        "entries_moved": 5,
        "bytes_reclaimed": 300,
    }
    assert fed.request({"id": 1, "op": "gc", "force": True}) == 1
    fed.response({"id": 1, "ok": True, **stats})
    for rid, broken in enumerate(
        (
            {k: v for k, v in stats.items() if k != "entries_moved"},
            {**stats, "logs_deleted": "2"},
            {**stats, "logs_deleted": True},
            {**stats, "compaction": "huge"},
            {**stats, "compaction": None},
        ),
        start=2,
    ):
        assert fed.request({"id": rid, "op": "gc", "force": False}) == rid
        fed.response({"id": rid, "ok": True, **broken})
    assert fed.request({"id": 9, "op": "gc", "force": False}) == 9
    fed.response({"id": 9, "ok": False, "error": "no_space", "message": "full"})
    fed.recorder.finish(0)
    steps = fed.steps()
    assert [s.op for s in steps] == [Gc(force=True)] + [Gc(force=False)] * 6
    assert steps[0].result == Result(gc=GcReport("major", 2, 1, 5, 300))
    assert [s.result for s in steps[1:6]] == [failed("io_error")] * 5
    assert steps[6].result == failed("no_space")
    assert sum("an ok gc without its statistics" in said for said in fed.said) == 5
