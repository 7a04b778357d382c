"""impl/server/stdio.py in process (spec/adapter.md, "Start", "Framing", "Shutdown and end of
input"): ``serve`` with the fake bookie of fakes.py and byte streams (ready line, line
framing, over-long lines, end of input, the shutdown op, internal errors), and LineWriter.

How serving ended is checked as the exit status the process makes of it
(proofs/cli/adapter.py's EXIT_BY_ENDING); the process itself is tested in
tests/unit/proofs/cli/test_adapter.py.
"""

from __future__ import annotations

import io
import json
import threading

from impl.server.protocol import encode_response, ready_event
from impl.server.stdio import LineWriter, serve
from proofs.cli.adapter import EXIT_BY_ENDING, EXIT_FAILED, EXIT_INTERNAL, EXIT_OK
from spec.errors import BookieIOError
from tests.unit.impl.server.fakes import BOUNDS, FakeBookie, add, b64


class Served:
    """The outcome of one ``serve`` run on a fake bookie: how it ended, and the exit status
    the process makes of it (``code``)."""

    def __init__(self, stdin: bytes, bookie: FakeBookie | None = None) -> None:
        self.bookie = bookie or FakeBookie(auto_complete=False)
        self.logs: list[str] = []
        self.starts = 0
        self.stdin = io.BytesIO(stdin)
        out = io.BytesIO()
        self.ending = serve(
            self.bookie,
            start=self._start,
            shutdown=self.bookie.shutdown,
            bounds=BOUNDS,
            stdin=self.stdin,
            out=out,
            log=self.logs.append,
        )
        self.code = EXIT_BY_ENDING[self.ending]
        self.lines = out.getvalue().decode("ascii").splitlines(keepends=True)
        assert all(line.endswith("\n") for line in self.lines)
        self.responses = [json.loads(line) for line in self.lines]

    def _start(self) -> None:
        self.starts += 1


def lines(*requests: dict[str, object] | str, end: bytes = b"\n") -> bytes:
    encoded = [r if isinstance(r, str) else json.dumps(r) for r in requests]
    return b"".join(line.encode() + end for line in encoded)


def test_serve_writes_ready_first_and_shuts_down_at_end_of_input() -> None:
    served = Served(lines(add(1, 2, 0, b"a"), {"id": 2, "op": "read", "ledger": 2, "entry": 0}))
    assert served.code == EXIT_OK
    assert served.starts == 1
    assert served.lines[0] == encode_response(ready_event(BOUNDS)) + "\n"
    # The read is answered at once; the add only when the shutdown makes it durable.
    assert served.responses[1:] == [
        {"id": 2, "ok": True, "data": b64(b"a")},
        {"id": 1, "ok": True},
    ]
    assert served.bookie.shut_down


def test_serve_reads_crlf_blank_lines_and_a_last_line_without_newline() -> None:
    stdin = (
        lines({"id": 1, "op": "checkpoint"}, end=b"\r\n") + b"\n  \n" + b'{"id":2,"op":"inspect"}'
    )
    served = Served(stdin)
    assert [r["id"] for r in served.responses] == [None, 1, 2]
    assert served.responses[1] == {"id": 1, "ok": True}


def test_serve_skips_an_overlong_line_and_keeps_serving() -> None:
    overlong = "x" * (3 * BOUNDS.line_max_bytes)
    at_limit = "y" * BOUNDS.line_max_bytes
    served = Served(lines(overlong, {"id": 1, "op": "checkpoint"}, at_limit))
    assert [r["id"] for r in served.responses] == [None, None, 1, None]
    assert "longer than" in served.responses[1]["message"]
    assert served.responses[2] == {"id": 1, "ok": True}
    assert "not JSON" in served.responses[3]["message"]  # at the limit: read and parsed


def test_serve_stops_reading_at_the_shutdown_op() -> None:
    stdin = lines(add(1, 2, 0, b"a"), {"id": 2, "op": "shutdown"}, {"id": 3, "op": "checkpoint"})
    served = Served(stdin)
    assert served.code == EXIT_OK
    assert served.responses[1:] == [{"id": 1, "ok": True}, {"id": 2, "ok": True}]
    assert served.bookie.checkpoints == 0
    assert served.stdin.read() == lines({"id": 3, "op": "checkpoint"})


def test_serve_exits_1_when_the_shutdown_fails() -> None:
    bookie = FakeBookie()
    bookie.raise_on["shutdown"] = BookieIOError("journal fsync failed")
    served = Served(lines({"id": 1, "op": "shutdown"}), bookie)
    assert served.code == EXIT_FAILED
    assert served.responses[1]["error"] == "io_error"
    eof = FakeBookie()
    eof.raise_on["shutdown"] = BookieIOError("journal fsync failed")
    assert Served(b"", eof).code == EXIT_FAILED


def test_serve_reports_an_internal_error_with_its_traceback() -> None:
    bookie = FakeBookie()
    bookie.raise_on["checkpoint"] = RuntimeError("a bug")  # type: ignore[assignment]
    served = Served(lines({"id": 1, "op": "checkpoint"}, {"id": 2, "op": "inspect"}), bookie)
    assert served.code == EXIT_INTERNAL
    assert len(served.responses) == 1  # the ready line; nothing after the bug
    assert "internal error" in served.logs[-1]
    assert "Traceback" in served.logs[-1] and "RuntimeError: a bug" in served.logs[-1]
    assert not bookie.shut_down  # like a crash: no clean shutdown


def test_line_writer_survives_a_closed_output() -> None:
    out = io.BytesIO()
    logs: list[str] = []
    writer = LineWriter(out, logs.append)
    writer.write({"id": 1, "ok": True})
    out.close()
    writer.write({"id": 2, "ok": True})
    writer.write({"id": 3, "ok": True})
    assert writer.lines_written == 1
    assert len(logs) == 1 and "cannot write responses" in logs[0]


class _SlowOut(io.BytesIO):
    """An output whose writes wait until released, counting them (a client not reading)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.writes = 0

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.release.wait(10)
        self.writes += 1
        return super().write(data)


def test_background_line_writer_writes_every_line_in_order_and_batches_them() -> None:
    # The adapter's writer thread: lines queued while it writes go out together in the next
    # write, in the order given, and close() writes whatever is queued before it returns.
    out = _SlowOut()
    writer = LineWriter(out, print, background=True)
    for request_id in range(200):
        writer.write({"id": request_id, "ok": True})
    writer.write({"id": 200, "ok": False, "error": "fenced", "message": "m"})
    out.release.set()
    writer.close()
    writer.check_invariants()
    lines = out.getvalue().decode("ascii").splitlines()
    assert [json.loads(line)["id"] for line in lines] == list(range(201))
    assert lines[7] == encode_response({"id": 7, "ok": True})  # the precomputed ok line
    assert lines[200] == encode_response(
        {"id": 200, "ok": False, "error": "fenced", "message": "m"}
    )
    assert writer.lines_written == 201
    assert out.writes < 201 / 10  # batched: not one write per line


def test_background_line_writer_blocks_when_its_queue_is_full() -> None:
    # Flow control (spec/adapter.md): a client that does not read stops the adapter; the
    # queue holds at most queued_max lines, then write() waits.
    out = _SlowOut()
    writer = LineWriter(out, print, background=True, queued_max=3)
    done = threading.Event()

    def write_many() -> None:
        for request_id in range(20):
            writer.write({"id": request_id, "ok": True})
        done.set()

    thread = threading.Thread(target=write_many)
    thread.start()
    assert not done.wait(0.3)  # blocked: the output takes nothing
    out.release.set()
    assert done.wait(10)
    thread.join()
    writer.close()
    assert writer.lines_written == 20


def test_background_line_writer_survives_a_closed_output() -> None:
    out = io.BytesIO()
    logs: list[str] = []
    writer = LineWriter(out, logs.append, background=True)
    out.close()
    for request_id in range(5):
        writer.write({"id": request_id, "ok": True})
    writer.close()
    assert writer.lines_written == 0
    assert len(logs) == 1 and "cannot write responses" in logs[0]
