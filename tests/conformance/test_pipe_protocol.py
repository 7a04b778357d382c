"""The pipe protocol of spec/adapter.md, held against every bookie written apart from bkref
(tests/conformance/bookies.py: JavaScript, bare JavaScript, C, Rust), directly, as a client
sees it, without the kit's model.

Why one module: these rules do not depend on a bookie's design (every row of "Malformed
requests", bkref's own parser as the oracle of drawn lines, the valid edges, ASCII answers,
the size bounds, ids in flight, end of input, shutdown), so each bookie is held to the same
and strongest version of each check; the three bookies' own test files had grown their own
copies, each a little weaker somewhere. What depends on a design (files, recovery, group
commit's counters, each deliberate bug) stays in test_js_bookie.py, test_c_bookie.py and
test_rust_bookie.py. A bookie that cannot run here is skipped, saying why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.bookies import BOOKIES, Outsider
from tests.conformance.malformed import (
    MALFORMED,
    MAX_DATA,
    MAX_LINE,
    check_rejects_what_bkref_rejects,
)
from tests.conformance.pipe_client import KEY, PipeBookie, add, b64, op, read
from tests.conformance.rsbookie import BuildError

TIMEOUT_S = 30.0
U63 = 2**63 - 1

#: An add of 4 MB to a ledger of its own: parsing it keeps a bookie busy while the lines
#: written after it wait, so they are in flight together (a bookie that reads on another
#: thread, as the Rust one does, would otherwise answer each before the next arrives).
BUSY_ID = 424242
BUSY = add(BUSY_ID, 999, 0, b"\x5a" * 4_000_000)


@pytest.fixture(params=BOOKIES, ids=[b.name for b in BOOKIES])
def outsider(request: pytest.FixtureRequest) -> Outsider:
    chosen: Outsider = request.param
    missing = chosen.unavailable()
    if missing is not None:
        pytest.skip(missing)
    return chosen


@pytest.fixture
def start(outsider: Outsider, tmp_path: Path) -> Iterator[PipeBookie]:
    """The bookie, started on a fresh data directory, its ready line read."""
    try:
        argv = outsider.argv(str(tmp_path / "data"))
    except BuildError as exc:
        pytest.fail(str(exc))
    with PipeBookie(tmp_path / "data", argv, timeout_s=TIMEOUT_S) as running:
        running.ready()
        yield running


# --- every row of "Malformed requests", and bkref's parser as the oracle -------------------


@pytest.mark.parametrize(("row", "line", "want"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_requests_are_bad_request_and_the_bookie_keeps_serving(
    start: PipeBookie, row: str, line: bytes, want: int | None
) -> None:
    response = start.one(line + b"\n")
    assert response["ok"] is False and response["error"] == "bad_request", (row, response)
    assert response["id"] == want, (row, response)
    assert isinstance(response["message"], str) and response["message"], row
    # Nothing was done, and the bookie still serves.
    assert start.one(read(99, 1, 0))["error"] == "no_ledger"


def test_it_rejects_exactly_what_bkrefs_parser_rejects(start: PipeBookie) -> None:
    """``bkref record`` judges which requests are malformed with bkref's own parser; a bookie
    that disagreed would be recorded wrongly. 3000 drawn lines, one at a time."""
    check_rejects_what_bkref_rejects(start, seed=25)


def test_valid_edges_are_accepted(start: PipeBookie) -> None:
    lines = [
        b'{"id":-9223372036854775808,"op":"add","ledger":9223372036854775807,'
        b'"entry":9223372036854775807,"key":"C0FFEE","data":""}\r\n',
        b"  \t \r\n",  # blank: ignored
        b"\n",  # empty: ignored
        b'{"id":2,"op":"add","ledger":1,"entry":0,"key":"","data":"\\u0061GVsbG8\\u003d"}\n',
        b'{ "id" : 3 , "op" : "add" , "ledger" : 1 , "entry" : -0 , "key" : "" , "data" : "" }\n',
    ]
    answers = start.ask(*lines)
    assert answers == {
        -(2**63): {"id": -(2**63), "ok": True},
        2: {"id": 2, "ok": True},
        3: {"id": 3, "ok": True},
    }
    # Upper and lower case keys are the same key; -0 is entry 0 (overwritten by id 3).
    assert start.one(add(5, U63, 0, key="c0ffee")) == {"id": 5, "ok": True}
    assert start.one(read(6, U63, U63)) == {"id": 6, "ok": True, "data": ""}
    assert start.one(read(7, 1, 0)) == {"id": 7, "ok": True, "data": ""}
    # A last line without a newline at the end of input is a request.
    start.send(read(8, 1, 0).encode())
    assert start.close() == 0
    assert start.receive() == {"id": 8, "ok": True, "data": ""}


def test_responses_are_ascii_with_escapes(start: PipeBookie) -> None:
    start.send('{"id":1,"op":"r\u00e9ad\u2028\U0001f600"}')
    raw = start.raw()
    assert raw.isascii() and raw.count(b"\n") == 1
    assert "r\u00e9ad\u2028\U0001f600" in json.loads(raw)["message"]


# --- the size bounds ------------------------------------------------------------------------


def test_the_largest_add_and_a_line_too_long(start: PipeBookie) -> None:
    too_big = start.one(add(1, 1, 0, b"\0" * (MAX_DATA + 1)))
    assert (too_big["id"], too_big["error"]) == (1, "bad_request")
    assert start.one(add(2, 1, 0, b"\1" * MAX_DATA)) == {"id": 2, "ok": True}
    assert start.one(read(3, 1, 0))["data"] == b64(b"\1" * MAX_DATA)
    # The largest add with every character of its data written as a \u escape still fits.
    escaped = "".join(f"\\u{ord(c):04x}" for c in b64(b"\2" * MAX_DATA))
    line = f'{{"id":4,"op":"add","ledger":1,"entry":1,"key":"{KEY}","data":"{escaped}"}}'
    assert len(line) <= MAX_LINE
    assert start.one(line) == {"id": 4, "ok": True}
    filler = b"x" * (MAX_LINE + 10)
    with_id = b'{"id": 7, "op":"add","ledger":1,"entry":0,"key":"","data":"' + filler + b'"}\n'
    response = start.one(with_id)
    assert (response["id"], response["error"]) == (7, "bad_request")
    response = start.one(b'{"op":"add","id":8,"data":"' + filler + b'"}\n')
    assert (response["id"], response["error"]) == (None, "bad_request")
    # The rest of each line was skipped: the next line is a request again.
    assert start.one(add(9, 2, 0)) == {"id": 9, "ok": True}
    # The bound is on the line without its newline: max_line_bytes itself is a request.
    head, tail = b'{"id":10,', b'"op":"read","ledger":2,"entry":0}'
    exact = head + b" " * (MAX_LINE - len(head) - len(tail)) + tail
    assert len(exact) == MAX_LINE
    assert start.one(exact + b"\n") == {"id": 10, "ok": True, "data": b64(b"x")}
    over = start.one(exact[:-1] + b" }\n")
    assert (over["id"], over["error"]) == (10, "bad_request")


# --- ids in flight, end of input, shutdown --------------------------------------------------


def test_an_id_in_flight_is_answered_with_id_null(start: PipeBookie) -> None:
    answers = start.ask(BUSY, add(5, 1, 0), add(5, 1, 1), '{"id":5,"op":"nope"}')
    assert answers[5] == {"id": 5, "ok": True} and answers[BUSY_ID]["ok"]
    nulls = [a for k, a in answers.items() if k not in (5, BUSY_ID)]
    assert len(nulls) == 2 and all(a["id"] is None and a["error"] == "bad_request" for a in nulls)
    assert all("5" in str(a["message"]) for a in nulls)
    # The second add was not carried out; once answered, the id may be reused.
    assert start.one(read(5, 1, 1))["error"] == "no_entry"
    assert start.one(read(5, 1, 0))["data"] == b64(b"x")


def test_end_of_input_answers_every_request_in_flight_and_exits_0(start: PipeBookie) -> None:
    start.send(*(add(i, 1, i) for i in range(50)), op(50, "fence", ledger=1, key=KEY))
    start.send(b'{"id":51,"op":"read","ledger":1,"entry":3}')  # no newline: still a line
    assert start.close() == 0
    answers = start.responses(52)
    assert all(answers[i]["ok"] for i in range(51)), answers
    # The read was sent while entry 3's add was in flight, not acknowledged: either answer.
    assert answers[51] in ({"id": 51, "ok": True, "data": b64(b"x")}, {
        "id": 51, "ok": False, "error": "no_entry", "message": answers[51].get("message")
    }), answers[51]  # fmt: skip
    assert start.ended()  # nothing more


def test_shutdown_answers_in_flight_then_itself_and_reads_no_further(
    outsider: Outsider, start: PipeBookie
) -> None:
    start.send(add(1, 1, 0), add(2, 1, 1), op(3, "shutdown"), add(4, 1, 2))
    answers = [start.receive() for _ in range(3)]
    assert answers[-1] == {"id": 3, "ok": True}
    assert {a["id"] for a in answers[:2]} == {1, 2}
    assert start.child.wait(TIMEOUT_S) == 0
    data_dir = start.data_dir
    with PipeBookie(data_dir, outsider.argv(str(data_dir)), timeout_s=TIMEOUT_S) as again:
        again.ready()
        assert again.one(read(1, 1, 1))["ok"] is True
        assert again.one(read(2, 1, 2))["error"] == "no_entry"  # after shutdown: not read
