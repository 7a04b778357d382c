"""The protocol edges of issue 10, end to end through the ``bkref adapter`` process
(spec/adapter.md, "Framing", "Malformed requests", ``delete``). The unit tests of the same
edges are tests/unit/impl/server/test_protocol_edges.py and
tests/unit/impl/bookie/test_bookie_delete_race.py.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from proofs.cli.adapter import EXIT_OK
from tests.unit.impl.server.fakes import add
from tests.unit.proofs.cli.test_adapter import AdapterProcess, dirs


def test_protocol_edges_are_answered_as_the_page_says(tmp_path: Path) -> None:
    with AdapterProcess(tmp_path, *dirs(tmp_path), "journalMaxGroupWaitMSec=0") as adapter:
        ready = adapter.ready()
        huge = "1" + "0" * 5000
        adapter.send(f'{{"id":1,"op":"read","ledger":{huge},"entry":0}}')
        answer = adapter.receive()
        assert (answer["id"], answer["error"]) == (1, "bad_request"), answer
        assert "Exceeds" not in str(answer["message"])
        adapter.send('{"id":2,"op":"add","ledger":1,"entry":0,"key":"","data":"aGVsbG9="}')
        answer = adapter.receive()
        assert (answer["id"], answer["error"]) == (2, "bad_request"), answer
        # Lines of vertical tabs or form feeds are not blank: each gets its answer.
        adapter.send("\x0b", "\x0c")
        for _ in range(2):
            answer = adapter.receive()
            assert (answer["id"], answer["error"]) == (None, "bad_request"), answer
        # The largest add, every "/" of its data written "\/": legal, so it is taken.
        data = b"\xff" * int(str(ready["max_data_bytes"]))
        line = json.dumps(add(3, 1, 0, data)).replace("/", "\\/")
        adapter.send(line)
        assert adapter.receive() == {"id": 3, "ok": True}
        read = adapter.call({"id": 4, "op": "read", "ledger": 1, "entry": 0})
        assert base64.b64decode(str(read["data"])) == data
        # Too long for any request: the id it starts with is echoed.
        adapter.send('{"id":5,"op":"add","data":"' + "A" * int(str(ready["max_line_bytes"])))
        answer = adapter.receive()
        assert (answer["id"], answer["error"]) == (5, "bad_request"), answer
        assert adapter.call({"id": 6, "op": "shutdown"}) == {"id": 6, "ok": True}
        assert adapter.wait() == EXIT_OK
        assert "Traceback" not in adapter.stderr()


def test_an_add_in_flight_at_its_ledgers_delete_is_never_answered_ok(tmp_path: Path) -> None:
    """Issue 10: pipelined, an add waiting for its group commit was answered ok after its
    ledger's delete was answered ok, and its entry was unreadable. The group wait (1 s) keeps
    the adds in flight while the delete is carried out: they are answered no_ledger."""
    settings = (*dirs(tmp_path), "journalMaxGroupWaitMSec=1000")
    with AdapterProcess(tmp_path, *settings) as adapter:
        adapter.ready()
        adapter.send(
            add(1, 7, 0, b"a"),
            add(2, 7, 1, b"b"),
            add(3, 8, 0, b"other"),
            {"id": 4, "op": "delete", "ledger": 7},
            {"id": 5, "op": "read", "ledger": 7, "entry": 0},
        )
        answers = [adapter.receive() for _ in range(5)]
        order = [answer["id"] for answer in answers]
        by_id = {answer["id"]: answer for answer in answers}
        assert by_id[4] == {"id": 4, "ok": True}
        assert by_id[5]["error"] == "no_ledger"
        for add_id in (1, 2):
            # Never ok after the delete's ok; here they were in flight: no_ledger.
            assert by_id[add_id].get("error") == "no_ledger", by_id[add_id]
            assert by_id[add_id]["ok"] is False or order.index(add_id) < order.index(4)
        assert by_id[3] == {"id": 3, "ok": True}
        adapter.close_stdin()
        assert adapter.wait() == EXIT_OK
    with AdapterProcess(tmp_path, *settings) as adapter:  # the delete holds across a restart
        adapter.ready()
        assert adapter.call({"id": 1, "op": "read", "ledger": 7, "entry": 1})["error"] == (
            "no_ledger"
        )
        assert adapter.call({"id": 2, "op": "read", "ledger": 8, "entry": 0})["ok"] is True
        adapter.close_stdin()
        assert adapter.wait() == EXIT_OK
