"""One client for the direct pipe tests of the bookies written apart from bkref
(tests/conformance/test_js_bookie.py, test_c_bookie.py, test_rust_bookie.py): the request
lines of spec/adapter.md and a bookie as a child process that answers them.

Why one: each bookie's direct tests tell a bookie bug apart from a kit bug by talking to the
bookie with no runner between; the three had each written the same client (request
builders, send, receive, the ready line, responses by id, kill -9).
"""

from __future__ import annotations

import base64
import json
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.line_child import LineChild

#: The key the direct tests write with.
KEY = "c0ffee"
#: How long a direct test waits for a line or an exit.
TIMEOUT_S = 20.0


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def add(rid: int, ledger: int, entry: int, data: bytes = b"x", key: str = KEY) -> str:
    return json.dumps(
        {"id": rid, "op": "add", "ledger": ledger, "entry": entry, "key": key, "data": b64(data)}
    )


def read(rid: int, ledger: int, entry: int) -> str:
    return json.dumps({"id": rid, "op": "read", "ledger": ledger, "entry": entry})


def op(rid: int, name: str, **fields: object) -> str:
    return json.dumps({"id": rid, "op": name, **fields})


class PipeBookie(LineChild):
    """A bookie as a child on ``data_dir``, started by ``argv`` (tests/line_child.py)."""

    def __init__(
        self,
        data_dir: Path,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.data_dir = data_dir
        self.timeout_s = timeout_s
        super().__init__(argv, data_dir.parent, "bookie-stderr", timeout_s, env=env)

    def send(self, *lines: str | bytes) -> None:
        self.write(
            b"".join(line if isinstance(line, bytes) else line.encode() + b"\n" for line in lines)
        )

    def receive(self) -> dict[str, object]:
        line = self.raw()
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert line.isascii(), line
        response = json.loads(line)
        assert isinstance(response, dict), response
        return response

    def ready(self) -> dict[str, object]:
        line = self.receive()
        assert line["event"] == "ready", line
        return line

    def ask(self, *lines: str | bytes) -> dict[object, dict[str, object]]:
        """Send the lines in one write; their responses by id (one per non-blank line)."""
        self.send(*lines)
        count = sum(
            1 for line in lines if (line if isinstance(line, bytes) else line.encode()).strip()
        )
        return self.responses(count)

    def one(self, line: str | bytes) -> dict[str, object]:
        self.send(line)
        return self.receive()

    def responses(self, count: int) -> dict[object, dict[str, object]]:
        found: dict[object, dict[str, object]] = {}
        for _ in range(count):
            response = self.receive()
            key = response["id"]
            if key is None:
                key = ("null", len(found))
            found[key] = response
        return found

    def kill9(self) -> None:
        os.kill(self.child.pid, signal.SIGKILL)
        assert self.child.wait(self.timeout_s) == -signal.SIGKILL


#: Requests of the ops a bookie may leave unclaimed, for the worked example.
UNCLAIMED = {
    "gc": '{"id":%d,"op":"gc","force":true}',
    "checkpoint": '{"id":%d,"op":"checkpoint"}',
    "write_close": '{"id":%d,"op":"write_close","ledger":7,"key":"c0ffee"}',
}


def check_worked_example(start: Callable[[], PipeBookie], unclaimed: Sequence[str]) -> None:
    """spec/adapter.md's worked example, line by line, then a restart on the same directory
    (the entry reads back, the ledger stays fenced); ``unclaimed``: the optional ops the
    bookie does not claim, each answered ``unsupported``."""
    with start() as bookie:
        bookie.ready()
        answers = bookie.ask(
            '{"id":1,"op":"add","ledger":7,"entry":0,"key":"c0ffee","data":"aGVsbG8="}',
            '{"id":2,"op":"add","ledger":7,"entry":1,"key":"c0ffee","data":"d29ybGQ="}',
        )
        assert answers == {1: {"id": 1, "ok": True}, 2: {"id": 2, "ok": True}}
        assert bookie.one('{"id":3,"op":"read","ledger":7,"entry":1}') == {
            "id": 3, "ok": True, "data": "d29ybGQ=",
        }  # fmt: skip
        wrong = bookie.one('{"id":4,"op":"add","ledger":7,"entry":2,"key":"0badc0de","data":""}')
        assert (wrong["id"], wrong["error"]) == (4, "unauthorized")
        fence = bookie.one('{"id":5,"op":"fence","ledger":7,"key":"c0ffee"}')
        assert fence == {"id": 5, "ok": True}
        fenced = bookie.one('{"id":6,"op":"add","ledger":7,"entry":2,"key":"c0ffee","data":""}')
        assert (fenced["id"], fenced["error"]) == (6, "fenced")
        missing = bookie.one('{"id":7,"op":"read","ledger":7,"entry":9}')
        assert (missing["id"], missing["error"]) == (7, "no_entry")
        negative = bookie.one('{"id":8,"op":"read","ledger":7,"entry":-1}')
        assert (negative["id"], negative["error"]) == (8, "bad_request")
        assert "-1" in str(negative["message"])
        short = bookie.one('{"id":9,"op":"add","ledger":7}')
        assert (short["id"], short["error"]) == (9, "bad_request")
        assert "entry" in str(short["message"])
        junk = bookie.one("this is not json")
        assert (junk["id"], junk["error"]) == (None, "bad_request")
        rid = 10
        for name in unclaimed:
            answer = bookie.one(UNCLAIMED[name] % rid)
            assert (answer["id"], answer["error"]) == (rid, "unsupported"), name
            rid += 1
        assert bookie.one(op(rid, "shutdown")) == {"id": rid, "ok": True}
        assert bookie.child.wait(bookie.timeout_s) == 0
    with start() as bookie:
        bookie.ready()
        assert bookie.one('{"id":1,"op":"read","ledger":7,"entry":0}')["data"] == "aGVsbG8="
        assert bookie.one(add(2, 7, 2))["error"] == "fenced"
        assert bookie.close() == 0
