"""impl/server/dispatcher.py against spec/adapter.md, without a process: every op and error
code, pipelining with out-of-order completion, duplicate ids, flow control, shutdown, and that
``emit`` is never entered by two threads at once.

The bookie is the fake of fakes.py, whose Acks the tests complete by hand, in any order and
from any thread.
"""

from __future__ import annotations

import base64
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.limits import Limits
from impl.server.dispatcher import Outcome
from impl.server.protocol import OPTIONAL_OPS, Op, Response, encode_response, error_message
from spec.errors import (
    BadRequest,
    BkrefError,
    BookieIOError,
    FsIOError,
    FsNoSpace,
    NoSpace,
    NoWritableLedgerDir,
)
from tests.unit.impl.server.fakes import KEY, FakeBookie, Harness, add

# --- every op ------------------------------------------------------------------------------


def test_add_then_read_returns_the_same_bytes() -> None:
    harness = Harness()
    data = bytes(range(50))
    harness.send(add(1, 5, 0, data))
    harness.send({"id": 2, "op": "read", "ledger": 5, "entry": 0})
    assert harness.responses == [
        {"id": 1, "ok": True},
        {"id": 2, "ok": True, "data": base64.b64encode(data).decode()},
    ]


def test_empty_data_and_empty_key_are_allowed() -> None:
    harness = Harness()
    harness.send(add(1, 5, 0, b"", key=b""))
    harness.send({"id": 2, "op": "read", "ledger": 5, "entry": 0})
    assert harness.responses == [{"id": 1, "ok": True}, {"id": 2, "ok": True, "data": ""}]


def test_fence_then_add_is_fenced_and_wrong_key_is_unauthorized() -> None:
    harness = Harness()
    harness.send({"id": 1, "op": "fence", "ledger": 3, "key": KEY.hex()})
    harness.send(add(2, 3, 0, b"late"))
    harness.send({"id": 3, "op": "fence", "ledger": 3, "key": "00"})
    assert [r.get("error") for r in harness.responses] == [None, "fenced", "unauthorized"]
    assert harness.responses[0] == {"id": 1, "ok": True}
    assert all(isinstance(r.get("message"), str) for r in harness.responses[1:])


def test_delete_then_read_is_no_ledger() -> None:
    harness = Harness()
    harness.send(add(1, 4, 0, b"x"))
    harness.send({"id": 2, "op": "delete", "ledger": 4})
    harness.send({"id": 3, "op": "read", "ledger": 4, "entry": 0})
    assert harness.responses[1] == {"id": 2, "ok": True}
    assert harness.responses[2]["error"] == "no_ledger"
    assert harness.bookie.deleted == {4}


def test_read_of_missing_entry_is_no_entry() -> None:
    harness = Harness()
    harness.send(add(1, 4, 0, b"x"))
    harness.send({"id": 2, "op": "read", "ledger": 4, "entry": 1})
    assert harness.last()["error"] == "no_entry"


def test_checkpoint_calls_the_bookie() -> None:
    harness = Harness()
    harness.send({"id": 1, "op": "checkpoint"})
    assert harness.last() == {"id": 1, "ok": True}
    assert harness.bookie.checkpoints == 1


def test_inspect_returns_the_state_as_json() -> None:
    harness = Harness()
    harness.send({"id": 1, "op": "fence", "ledger": 3, "key": "ab"})
    harness.send({"id": 2, "op": "inspect"})
    assert harness.last() == {
        "id": 2,
        "ok": True,
        "state": {
            "logs": [1, 2],
            "fenced": [3],
            "keys": {"3": "ab"},
            "color": "red",
            "mark": None,
            "ledgers_maps": [[1, False], [2, True]],
        },
    }
    json.loads(encode_response(harness.last()))


def test_write_close_answers_the_ledger_and_refuses_unknown_ledgers_and_other_keys() -> None:
    """spec/protocol/write_close.md: ok with the ledger's id; no_ledger for a ledger that does
    not exist (a write close creates none); unauthorized for another key."""
    harness = Harness()
    harness.send({"id": 1, "op": "write_close", "ledger": 5, "key": KEY.hex()})
    assert harness.last()["error"] == "no_ledger"
    harness.send(add(2, 5, 0, b"x"))
    harness.send({"id": 3, "op": "write_close", "ledger": 5, "key": "ab"})
    assert harness.last()["error"] == "unauthorized"
    assert harness.bookie.write_closed == set()
    harness.send({"id": 4, "op": "write_close", "ledger": 5, "key": KEY.hex()})
    assert harness.last() == {"id": 4, "ok": True, "ledger": 5}
    assert harness.bookie.write_closed == {5}
    harness.send(add(5, 5, 1, b"y"))  # a hint, not a fence
    assert harness.last()["ok"] is True


def test_write_close_is_unsupported_when_not_claimed() -> None:
    harness = Harness(ops=tuple(op for op in OPTIONAL_OPS if op is not Op.WRITE_CLOSE))
    harness.send({"id": 1, "op": "write_close", "ledger": 3, "key": "ab"})
    assert harness.last()["error"] == "unsupported"
    assert harness.last()["id"] == 1
    assert harness.bookie.calls == []


@pytest.mark.parametrize(
    "request_",
    [
        {"id": 1, "op": "checkpoint"},
        {"id": 1, "op": "gc", "force": True},
        {"id": 1, "op": "inspect"},
    ],
)
def test_an_optional_op_the_ready_line_does_not_claim_is_unsupported(
    request_: dict[str, object],
) -> None:
    # spec/adapter.md, "Capabilities": a version 2 bookie answers every optional op it does
    # not list with unsupported, doing nothing; the ops it lists are served as before.
    op = Op(request_["op"])
    harness = Harness(ops=tuple(other for other in OPTIONAL_OPS if other is not op))
    harness.send(request_)
    assert harness.last()["error"] == "unsupported"
    assert harness.last()["id"] == 1
    assert op.value in str(harness.last()["message"])
    assert harness.bookie.calls == []
    served = Harness(ops=(op,))
    served.send(request_)
    assert served.last()["ok"] is True
    assert served.bookie.calls != []


@pytest.mark.parametrize("force", [True, False])
def test_gc_runs_a_cycle_and_answers_its_stats(force: bool) -> None:
    """spec/adapter.md, "gc": the cycle's GcStats, without the candidate list."""
    harness = Harness()
    harness.send({"id": 1, "op": "delete", "ledger": 4})
    harness.send({"id": 2, "op": "gc", "force": force})
    assert harness.bookie.gc_forces == [force]
    assert harness.last() == {
        "id": 2,
        "ok": True,
        "compaction": "major" if force else "none",
        "logs_deleted": 1,
        "logs_compacted": 1,
        "entries_moved": 17,
        "bytes_reclaimed": 4096,
    }
    json.loads(encode_response(harness.last()))


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (NoSpace("no room for a compaction log"), "no_space"),
        (BookieIOError("a read of the source failed"), "io_error"),
    ],
)
def test_a_failed_gc_answers_its_error_and_the_adapter_goes_on(
    error: BkrefError, code: str
) -> None:
    harness = Harness()
    harness.bookie.raise_on["gc"] = error
    harness.send({"id": 1, "op": "gc", "force": True})
    assert harness.last()["error"] == code
    assert str(error) in str(harness.last()["message"])
    harness.send({"id": 2, "op": "checkpoint"})
    assert harness.last() == {"id": 2, "ok": True}


@pytest.mark.parametrize("request_", [{"id": 1, "op": "gc"}, {"id": 1, "op": "gc", "force": 1}])
def test_gc_needs_a_boolean_force(request_: dict[str, object]) -> None:
    harness = Harness()
    harness.send(request_)
    assert harness.last()["error"] == "bad_request"
    assert "force" in str(harness.last()["message"])
    assert harness.bookie.calls == []


@pytest.mark.parametrize(
    ("method", "error", "code"),
    [
        ("add_entry", NoSpace("full"), "no_space"),
        ("add_entry", NoWritableLedgerDir("full"), "no_space"),
        ("add_entry", BadRequest("too big"), "bad_request"),
        ("add_entry", BookieIOError("failed"), "io_error"),
        ("fence", BookieIOError("failed"), "io_error"),
        ("read_entry", BookieIOError("damaged log"), "io_error"),
        ("read_entry", FsIOError("/l/0.log", "pread"), "io_error"),
        ("delete_ledger", BookieIOError("failed"), "io_error"),
        ("checkpoint", FsNoSpace("/l/lastMark"), "no_space"),
        ("inspect", BookieIOError("shut down"), "io_error"),
    ],
)
def test_errors_raised_by_the_bookie_become_error_responses(
    method: str, error: BkrefError, code: str
) -> None:
    requests = {
        "add_entry": add(7, 1, 0, b"x"),
        "fence": {"id": 7, "op": "fence", "ledger": 1, "key": "ab"},
        "read_entry": {"id": 7, "op": "read", "ledger": 1, "entry": 0},
        "delete_ledger": {"id": 7, "op": "delete", "ledger": 1},
        "checkpoint": {"id": 7, "op": "checkpoint"},
        "inspect": {"id": 7, "op": "inspect"},
    }
    harness = Harness()
    harness.bookie.raise_on[method] = error
    assert harness.send(requests[method]) is Outcome.CONTINUE
    assert harness.responses == [
        {"id": 7, "ok": False, "error": code, "message": error_message(error)}
    ]
    assert harness.dispatcher.in_flight() == frozenset()


@pytest.mark.parametrize("op", ["add", "fence"])
def test_error_delivered_through_the_ack(op: str) -> None:
    harness = Harness(FakeBookie(auto_complete=False))
    if op == "add":
        harness.send(add(1, 2, 0, b"x"))
    else:
        harness.send({"id": 1, "op": "fence", "ledger": 2, "key": "ab"})
    assert harness.responses == []
    harness.bookie.pending[0].complete(BookieIOError("fsync failed"))
    assert harness.responses == [
        {"id": 1, "ok": False, "error": "io_error", "message": "fsync failed"}
    ]


# --- durability and pipelining -------------------------------------------------------------


def test_add_is_answered_only_when_its_ack_completes() -> None:
    harness = Harness(FakeBookie(auto_complete=False))
    harness.send(add(1, 2, 0, b"x"))
    harness.send({"id": 2, "op": "fence", "ledger": 2, "key": KEY.hex()})
    assert harness.responses == []
    assert harness.dispatcher.in_flight() == {1, 2}
    harness.bookie.pending[0].complete()
    assert harness.responses == [{"id": 1, "ok": True}]
    harness.bookie.pending[1].complete()
    assert harness.responses == [{"id": 1, "ok": True}, {"id": 2, "ok": True}]
    assert harness.dispatcher.in_flight() == frozenset()
    harness.dispatcher.check_invariants()


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(8)), st.lists(st.integers(0, 7), max_size=4))
def test_pipelined_adds_are_answered_in_completion_order(
    order: list[int], reads_after: list[int]
) -> None:
    harness = Harness(FakeBookie(auto_complete=False))
    for i in range(8):
        harness.send(add(100 + i, i % 3, i, bytes([i])))
    # Reads written after the adds are answered at once, before the adds complete.
    for n, i in enumerate(reads_after):
        harness.send({"id": 200 + n, "op": "read", "ledger": i % 3, "entry": i})
    assert [r["id"] for r in harness.responses] == [200 + n for n in range(len(reads_after))]
    for i in order:
        harness.bookie.pending[i].complete()
        harness.dispatcher.check_invariants()
    add_ids = [r["id"] for r in harness.responses if isinstance(r["id"], int) and r["id"] < 200]
    assert add_ids == [100 + i for i in order]
    assert all(r["ok"] for r in harness.responses)


def test_duplicate_in_flight_id_is_rejected_without_an_id() -> None:
    harness = Harness(FakeBookie(auto_complete=False))
    harness.send(add(5, 1, 0, b"a"))
    harness.send({"id": 5, "op": "read", "ledger": 1, "entry": 0})
    assert harness.responses == [
        {
            "id": None,
            "ok": False,
            "error": "bad_request",
            "message": "request id 5 is already in flight (op 'read' was not carried out); "
            "use an id not in flight",
        }
    ]
    assert harness.bookie.calls == ["add_entry"]
    harness.bookie.pending[0].complete()
    assert harness.by_id(5) == [{"id": 5, "ok": True}]
    # Answered, so the id may be used again.
    harness.send({"id": 5, "op": "read", "ledger": 1, "entry": 0})
    assert harness.by_id(5)[-1]["data"] == base64.b64encode(b"a").decode()


def test_emit_is_never_entered_by_two_threads_at_once() -> None:
    inside = threading.Lock()
    overlaps: list[int] = []
    seen: list[Response] = []
    entered = threading.Event()

    def emit(response: Response) -> None:
        if not inside.acquire(blocking=False):
            overlaps.append(1)
            return
        try:
            entered.wait(0.0005)  # widen the window another thread could enter in
            seen.append(response)
        finally:
            inside.release()

    adds = 200
    harness = Harness(FakeBookie(auto_complete=False), emit=emit, limits=Limits(in_flight_max=adds))
    for i in range(adds):
        harness.send(add(i, 1, i, b"d"))
    acks = list(harness.bookie.pending)
    threads = [
        threading.Thread(target=lambda part=acks[k::8]: [ack.complete() for ack in part])
        for k in range(8)
    ]
    for thread in threads:
        thread.start()
    for n in range(20):  # the reader keeps answering synchronous requests meanwhile
        harness.dispatcher.handle_line(json.dumps({"id": adds + n, "op": "checkpoint"}))
    for thread in threads:
        thread.join(10)
    assert overlaps == []
    assert sorted(r["id"] for r in seen if isinstance(r["id"], int)) == list(range(adds + 20))
    harness.dispatcher.check_invariants()


def test_reader_waits_while_in_flight_is_full() -> None:
    harness = Harness(FakeBookie(auto_complete=False), limits=Limits(in_flight_max=2))
    harness.send(add(1, 1, 0, b"a"))
    harness.send(add(2, 1, 1, b"b"))
    third = threading.Thread(target=harness.send, args=(add(3, 1, 2, b"c"),))
    third.start()
    third.join(0.1)
    assert third.is_alive()  # blocked: two requests in flight
    assert harness.bookie.calls == ["add_entry", "add_entry"]
    harness.bookie.pending[0].complete()
    third.join(5)
    assert not third.is_alive()
    assert harness.bookie.calls == ["add_entry"] * 3
    assert harness.dispatcher.in_flight() == {2, 3}


def test_callback_failure_is_raised_on_the_reader_thread() -> None:
    def emit(response: Response) -> None:
        if response["id"] == 1:
            raise RuntimeError("stdout exploded")

    harness = Harness(FakeBookie(auto_complete=False), emit=emit)
    harness.send(add(1, 1, 0, b"a"))
    harness.bookie.pending[0].complete()  # the journal thread carries on
    assert any("stdout exploded" in line for line in harness.logs)
    with pytest.raises(RuntimeError, match="stdout exploded"):
        harness.dispatcher.handle_line(json.dumps({"id": 2, "op": "checkpoint"}))


# --- shutdown ------------------------------------------------------------------------------


def test_shutdown_answers_in_flight_requests_first() -> None:
    harness = Harness(FakeBookie(auto_complete=False))
    harness.send(add(1, 1, 0, b"a"))
    harness.send(add(2, 1, 1, b"b"))
    assert harness.send({"id": 3, "op": "shutdown"}) is Outcome.STOP
    assert harness.responses == [
        {"id": 1, "ok": True},
        {"id": 2, "ok": True},
        {"id": 3, "ok": True},
    ]
    assert harness.bookie.shut_down
    with pytest.raises(AssertionError):
        harness.dispatcher.handle_line(json.dumps({"id": 4, "op": "checkpoint"}))


def test_shutdown_failure_is_an_error_and_stop_failed() -> None:
    harness = Harness()
    harness.bookie.raise_on["shutdown"] = BookieIOError("journal fsync failed")
    assert harness.send({"id": 9, "op": "shutdown"}) is Outcome.STOP_FAILED
    assert harness.responses == [
        {"id": 9, "ok": False, "error": "io_error", "message": "journal fsync failed"}
    ]


def test_requests_the_bookie_never_completes_get_io_error_at_shutdown() -> None:
    bookie = FakeBookie(auto_complete=False)
    harness = Harness(bookie, limits=Limits(drain_timeout_ms=50))
    harness.send(add(1, 1, 0, b"a"))
    stuck = bookie.pending.pop()  # shutdown will not complete it
    assert harness.send({"id": 2, "op": "shutdown"}) is Outcome.STOP
    assert [r["id"] for r in harness.responses] == [1, 2]
    assert harness.responses[0]["error"] == "io_error"
    assert "may or may not be durable" in str(harness.responses[0]["message"])
    stuck.complete()  # too late: not answered twice
    assert len(harness.responses) == 2
    harness.dispatcher.check_invariants()


def test_close_at_end_of_input_shuts_down_without_a_response_of_its_own() -> None:
    harness = Harness(FakeBookie(auto_complete=False))
    harness.send(add(1, 1, 0, b"a"))
    assert harness.dispatcher.close() is Outcome.STOP
    assert harness.responses == [{"id": 1, "ok": True}]
    assert harness.bookie.shut_down
    harness.dispatcher.check_invariants()


def test_close_reports_a_failed_shutdown() -> None:
    harness = Harness()
    harness.bookie.raise_on["shutdown"] = BookieIOError("disk gone")
    assert harness.dispatcher.close() is Outcome.STOP_FAILED
    assert harness.responses == []
    assert any("disk gone" in line for line in harness.logs)
