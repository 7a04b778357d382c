"""impl/server/adapter.py against spec/adapter.md, without a process: parsing, every malformed input
kind, every op and error code, pipelining with out-of-order completion, duplicate ids,
shutdown, and that ``emit`` is never entered by two threads at once.

The bookie is a small fake (FakeBookie) whose Acks the tests complete by hand, in any order
and from any thread; the real Bookie is exercised through the process in
tests/unit/proofs/cli/test_adapter.py and test_adapter_kill9.py.
"""

from __future__ import annotations

import base64
import enum
import json
import random
import re
import threading
from collections.abc import Callable

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.config.config import load_config
from impl.server.adapter import (
    ERROR_CLASSES,
    FIELD_KINDS,
    OP_FIELDS,
    PROTOCOL_VERSION,
    Dispatcher,
    JsonValue,
    Limits,
    Op,
    Outcome,
    Rejection,
    Request,
    Response,
    base64_size_bytes,
    encode_response,
    error_code,
    error_message,
    is_blank,
    overlong_line_rejection,
    parse_request,
    ready_event,
    to_json_safe,
)
from spec.errors import (
    BadRequest,
    BkrefError,
    BookieError,
    BookieIOError,
    Fenced,
    FsIOError,
    FsNoSpace,
    NoEntry,
    NoLedger,
    NoSpace,
    NoWritableLedgerDir,
    Unauthorized,
)
from spec.ids import INT64_MAX, INT64_MIN, EntryId, LedgerId
from spec.operations import ERROR_CODES
from tests.paths import ROOT

PAGE = ROOT / "spec" / "adapter.md"
#: Small limits so the size checks are cheap to reach.
LIMITS = Limits(data_max_bytes=64, key_max_bytes=8)
KEY = bytes.fromhex("c0ffee")


# --- the fake bookie ---------------------------------------------------------------------


class FakeAck:
    """An Ack completed by hand (complete), from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._error: BookieError | None = None
        self._callbacks: list[Callable[..., None]] = []

    @property
    def done(self) -> bool:
        return self._done

    @property
    def error(self) -> BookieError | None:
        return self._error

    def add_done_callback(self, fn: Callable[..., None], /) -> None:
        with self._lock:
            if not self._done:
                self._callbacks.append(fn)
                return
        fn(self)

    def complete(self, error: BookieError | None = None) -> None:
        with self._lock:
            assert not self._done
            self._done, self._error = True, error
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)


class Color(enum.Enum):
    RED = "red"


@attrs.frozen
class FakeState:
    """Every kind of value to_json_safe must handle."""

    logs: tuple[int, ...]
    fenced: frozenset[int]
    keys: dict[int, bytes]
    color: Color
    mark: tuple[int, int] | None


@attrs.define
class FakeLedger:
    key: bytes
    fenced: bool = False
    entries: dict[int, bytes] = attrs.Factory(dict)


class FakeBookie:
    """The bookie contract of impl.bookie.bookie, in memory. With ``auto_complete`` every Ack is
    done before it is returned; otherwise the test completes ``pending`` Acks itself.
    ``raise_on[method]`` makes that method raise (once)."""

    def __init__(self, *, auto_complete: bool = True) -> None:
        self.auto_complete = auto_complete
        self.ledgers: dict[int, FakeLedger] = {}
        self.deleted: set[int] = set()
        self.pending: list[FakeAck] = []
        self.raise_on: dict[str, BkrefError] = {}
        self.checkpoints = 0
        self.shut_down = False
        self.calls: list[str] = []

    def _enter(self, method: str) -> None:
        assert not self.shut_down, f"{method} after shutdown"
        self.calls.append(method)
        error = self.raise_on.pop(method, None)
        if error is not None:
            raise error

    def _writable(self, ledger_id: int, key: bytes) -> FakeLedger:
        if ledger_id in self.deleted:
            raise NoLedger(f"ledger {ledger_id} was deleted")
        ledger = self.ledgers.setdefault(ledger_id, FakeLedger(key))
        if ledger.key != key:
            raise Unauthorized(f"wrong key for ledger {ledger_id}")
        return ledger

    def _ack(self) -> FakeAck:
        ack = FakeAck()
        if self.auto_complete:
            ack.complete()
        else:
            self.pending.append(ack)
        return ack

    def add_entry(
        self, ledger_id: LedgerId, entry_id: EntryId, master_key: bytes, data: bytes, /
    ) -> FakeAck:
        self._enter("add_entry")
        ledger = self._writable(ledger_id, master_key)
        if ledger.fenced:
            raise Fenced(f"ledger {ledger_id} is fenced")
        ledger.entries[entry_id] = data
        return self._ack()

    def fence(self, ledger_id: LedgerId, master_key: bytes, /) -> FakeAck:
        self._enter("fence")
        self._writable(ledger_id, master_key).fenced = True
        return self._ack()

    def read_entry(self, ledger_id: LedgerId, entry_id: EntryId, /) -> bytes:
        self._enter("read_entry")
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            raise NoLedger(f"no ledger {ledger_id}")
        if entry_id not in ledger.entries:
            raise NoEntry(f"no entry {entry_id}")
        return ledger.entries[entry_id]

    def delete_ledger(self, ledger_id: LedgerId, /) -> None:
        self._enter("delete_ledger")
        self.deleted.add(ledger_id)
        self.ledgers.pop(ledger_id, None)

    def checkpoint(self) -> None:
        self._enter("checkpoint")
        self.checkpoints += 1

    def inspect(self) -> FakeState:
        self._enter("inspect")
        return FakeState(
            logs=(1, 2),
            fenced=frozenset(lid for lid, led in self.ledgers.items() if led.fenced),
            keys={lid: led.key for lid, led in self.ledgers.items()},
            color=Color.RED,
            mark=None,
        )

    def shutdown(self) -> None:
        self._enter("shutdown")
        pending, self.pending = self.pending, []
        for ack in pending:
            ack.complete()
        self.shut_down = True


class Harness:
    """A Dispatcher over a FakeBookie that records every response."""

    def __init__(
        self,
        bookie: FakeBookie | None = None,
        *,
        limits: Limits = LIMITS,
        emit: Callable[[Response], None] | None = None,
        in_flight_max: int = 100,
        drain_timeout_s: float = 5.0,
    ) -> None:
        self.bookie = bookie or FakeBookie()
        self.responses: list[Response] = []
        self.logs: list[str] = []
        self.dispatcher = Dispatcher(
            self.bookie,
            emit or self.responses.append,
            limits=limits,
            shutdown=self.bookie.shutdown,
            log=self.logs.append,
            in_flight_max=in_flight_max,
            drain_timeout_s=drain_timeout_s,
        )

    def send(self, request: dict[str, object] | str) -> Outcome:
        line = request if isinstance(request, str) else json.dumps(request)
        outcome = self.dispatcher.handle_line(line)
        self.dispatcher.check_invariants()
        return outcome

    def last(self) -> Response:
        return self.responses[-1]

    def by_id(self, request_id: int) -> list[Response]:
        return [r for r in self.responses if r["id"] == request_id]


def add(
    request_id: int, ledger: int, entry: int, data: bytes, key: bytes = KEY
) -> dict[str, object]:
    return {
        "id": request_id,
        "op": "add",
        "ledger": ledger,
        "entry": entry,
        "key": key.hex(),
        "data": base64.b64encode(data).decode(),
    }


# --- the page ------------------------------------------------------------------------------


def _section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _table(section: str, first_column: str) -> list[list[str]]:
    """The rows of the table in ``section`` whose first title is ``first_column``."""
    rows: list[list[str]] = []
    inside = False
    for line in section.splitlines():
        if not line.startswith("|"):
            inside = False
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] == first_column:
            inside = True
        elif inside and not line.startswith("| ---"):
            rows.append(cells)
    return rows


def _names(cell: str) -> tuple[str, ...]:
    return tuple(re.findall(r"`([a-z_]+)`", cell))


def test_page_field_table_equals_the_code() -> None:
    rows = _table(_section("Requests"), "field")
    assert len(rows) == 5
    assert {_names(r[0])[0]: r[1] for r in rows} == {k: v.value for k, v in FIELD_KINDS.items()}


def test_page_op_table_equals_the_code() -> None:
    rows = _table(_section("Requests"), "op")
    assert len(rows) == len(Op)
    assert {_names(r[0])[0]: _names(r[1]) for r in rows} == {
        op.value: fields for op, fields in OP_FIELDS.items()
    }


def test_page_error_codes_equal_the_code() -> None:
    rows = _table(_section("Responses"), "code")
    assert tuple(_names(r[0])[0] for r in rows) == ERROR_CODES
    assert tuple(cls.code for cls in ERROR_CLASSES) == ERROR_CODES


def test_page_ready_line_is_what_the_default_configuration_gives() -> None:
    config = load_config(None, "", [])
    limits = Limits.from_max_sane_entry_size(config.max_sane_entry_size_bytes)
    ready = encode_response(ready_event(limits))
    assert f'"version":{PROTOCOL_VERSION}' in ready
    assert ready in _section("Start")
    assert ready in _section("Worked example")
    assert f"({limits.data_max_bytes} by default)" in _section("Limits")
    assert limits.data_max_bytes == 5 * 1024 * 1024 - 500 - 16


def _example_lines() -> list[tuple[str, str]]:
    block = _section("Worked example").split("```")[1]
    lines = [line for line in block.splitlines() if line.strip()]
    return [(line[0], line[2:]) for line in lines]


def test_worked_example_replays() -> None:
    # The page's exchange, request by request, against the fake bookie. "..." stands for a
    # message of the bookie's own; every other response must match exactly.
    harness = Harness(limits=Limits(data_max_bytes=1024))
    lines = _example_lines()
    assert len(lines) > 20
    expected = [json.loads(text) for side, text in lines[1:] if side == "<"]
    outcome = Outcome.CONTINUE
    for side, text in lines[1:]:
        if side == ">":
            assert outcome is Outcome.CONTINUE
            outcome = harness.send(text)
    assert outcome is Outcome.STOP
    assert len(harness.responses) == len(expected)
    for got, want in zip(harness.responses, expected, strict=True):
        if want.get("message") == "...":
            want = {**want, "message": got.get("message")}
        assert got == want


# --- parsing: valid requests ---------------------------------------------------------------

_ids = st.integers(min_value=0, max_value=INT64_MAX)
_keys = st.binary(max_size=LIMITS.key_max_bytes)
_data = st.binary(max_size=LIMITS.data_max_bytes)


@st.composite
def _requests(draw: st.DrawFn) -> tuple[dict[str, object], Request]:
    op = draw(st.sampled_from(list(Op)))
    request_id = draw(st.integers(min_value=INT64_MIN, max_value=INT64_MAX))
    wire: dict[str, object] = {"id": request_id, "op": op.value}
    values: dict[str, object] = {}
    for name in OP_FIELDS[op]:
        if name in ("ledger", "entry"):
            values[name] = wire[name] = draw(_ids)
        elif name == "key":
            values[name] = key = draw(_keys)
            wire[name] = draw(st.sampled_from([key.hex(), key.hex().upper()]))
        elif name == "data":
            values[name] = data = draw(_data)
            wire[name] = base64.b64encode(data).decode()
        else:
            values[name] = wire[name] = draw(st.booleans())
    return wire, Request(id=request_id, op=op, **values)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(_requests(), st.randoms(use_true_random=False))
def test_valid_requests_parse_to_their_fields(
    drawn: tuple[dict[str, object], Request], rnd: random.Random
) -> None:
    # Field order does not matter; bytes and str lines and surrounding whitespace parse alike.
    wire, expected = drawn
    items = list(wire.items())
    rnd.shuffle(items)
    line = json.dumps(dict(items))
    assert parse_request(line, LIMITS) == expected
    assert parse_request(line.encode(), LIMITS) == expected
    assert parse_request("  " + line + " \r", LIMITS) == expected


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
_near_requests = st.fixed_dictionaries(
    {},
    optional={
        name: _json_values | st.sampled_from([op.value for op in Op])
        for name in ("id", "op", *FIELD_KINDS)
    },
)


@settings(max_examples=150, deadline=None)
@given(
    st.binary(max_size=200)
    | st.text(max_size=200)
    | _json_values.map(json.dumps)
    | _near_requests.map(json.dumps)
)
def test_any_line_parses_or_is_rejected_never_raises(line: str | bytes) -> None:
    parsed = parse_request(line, LIMITS)
    if isinstance(parsed, Rejection):
        assert parsed.code == "bad_request"
        json.loads(encode_response(parsed.response()))
    else:
        assert isinstance(parsed, Request)


def test_many_duplicate_keys_are_rejected_quickly() -> None:
    line = "{" + ",".join(['"id":1'] * 200_000) + "}"
    rejection = parse_request(line, Limits(data_max_bytes=10**7))
    assert isinstance(rejection, Rejection)
    assert "more than once" in rejection.message


def test_largest_data_and_key_are_accepted() -> None:
    request = add(1, 0, 0, b"x" * LIMITS.data_max_bytes, key=b"k" * LIMITS.key_max_bytes)
    parsed = parse_request(json.dumps(request), LIMITS)
    assert isinstance(parsed, Request)
    assert parsed.payload() == b"x" * LIMITS.data_max_bytes
    assert parsed.master_key() == b"k" * LIMITS.key_max_bytes


def test_the_longest_valid_add_fits_the_line_limit() -> None:
    limits = Limits(data_max_bytes=3000)
    request = add(INT64_MIN, INT64_MAX, INT64_MAX, b"\xff" * 3000, key=b"\xff" * 1024)
    line = json.dumps(request, indent=None, separators=(", ", ": "))
    assert len(line) <= limits.line_max_bytes
    assert isinstance(parse_request(line, limits), Request)
    assert base64_size_bytes(3000) == 4000
    assert base64_size_bytes(0) == 0
    assert base64_size_bytes(1) == 4


def test_blank_lines_are_ignored() -> None:
    harness = Harness()
    assert is_blank("  \t") and is_blank(b"") and not is_blank("{}")
    assert harness.send("   ") is Outcome.CONTINUE
    assert harness.responses == []


# --- parsing: every malformed kind ---------------------------------------------------------

_TOO_LONG_KEY = "ab" * (LIMITS.key_max_bytes + 1)
_TOO_LONG_DATA = base64.b64encode(b"x" * (LIMITS.data_max_bytes + 1)).decode()

#: (line, id in the rejection, a word the message must contain)
MALFORMED: list[tuple[str | bytes, int | None, str]] = [
    (b'{"id":1,"op":"\xff"}', None, "UTF-8"),
    ("this is not json", None, "not JSON"),
    ('{"id":1,"op":"checkpoint"', None, "not JSON"),
    ("[1, 2]", None, "JSON object"),
    ("42", None, "JSON object"),
    ('"checkpoint"', None, "JSON object"),
    ("null", None, "JSON object"),
    ("[" * 5000, None, "nested too deeply"),
    ('{"op":"checkpoint"}', None, '"id"'),
    ('{"id":true,"op":"checkpoint"}', None, "boolean"),
    ('{"id":1.0,"op":"checkpoint"}', None, "integer"),
    ('{"id":"1","op":"checkpoint"}', None, "string"),
    ('{"id":null,"op":"checkpoint"}', None, "null"),
    (f'{{"id":{INT64_MAX + 1},"op":"checkpoint"}}', None, "from"),
    (f'{{"id":{INT64_MIN - 1},"op":"checkpoint"}}', None, "from"),
    ('{"id":1,"id":2,"op":"checkpoint"}', None, "more than once"),
    ('{"id":1,"op":"gc","force":NaN}', None, "NaN"),
    ('{"id":1,"op":"gc","force":Infinity}', None, "Infinity"),
    ('{"id":1}', 1, '"op"'),
    ('{"id":1,"op":5}', 1, "string"),
    ('{"id":1,"op":"ADD"}', 1, "unknown op"),
    ('{"id":1,"op":"compact"}', 1, "unknown op"),
    ('{"id":1,"op":"checkpoint","force":true}', 1, "does not take 'force'"),
    ('{"id":1,"op":"read","ledger":1,"entry":2,"leger":1}', 1, "does not take 'leger'"),
    ('{"id":1,"op":"read","ledger":1}', 1, "needs 'entry'"),
    ('{"id":1,"op":"gc"}', 1, "needs 'force'"),
    ('{"id":1,"op":"read","ledger":true,"entry":0}', 1, "boolean"),
    ('{"id":1,"op":"read","ledger":-1,"entry":0}', 1, "from 0"),
    ('{"id":1,"op":"read","ledger":0,"entry":-1}', 1, "from 0"),
    (f'{{"id":1,"op":"read","ledger":{INT64_MAX + 1},"entry":0}}', 1, "from 0"),
    ('{"id":1,"op":"read","ledger":1.0,"entry":0}', 1, "integer"),
    ('{"id":1,"op":"read","ledger":1e3,"entry":0}', 1, "integer"),
    ('{"id":1,"op":"read","ledger":"1","entry":0}', 1, "integer"),
    ('{"id":1,"op":"read","ledger":[1],"entry":0}', 1, "array"),
    ('{"id":1,"op":"delete","ledger":{"id":1}}', 1, "object"),
    ('{"id":1,"op":"fence","ledger":1,"key":"xyz0"}', 1, "hex"),
    ('{"id":1,"op":"fence","ledger":1,"key":"abc"}', 1, "hex"),
    ('{"id":1,"op":"fence","ledger":1,"key":" ab"}', 1, "hex"),
    ('{"id":1,"op":"fence","ledger":1,"key":171}', 1, "hex"),
    (f'{{"id":1,"op":"fence","ledger":1,"key":"{_TOO_LONG_KEY}"}}', 1, "more than"),
    ('{"id":1,"op":"add","ledger":1,"entry":0,"key":"","data":"!!!!"}', 1, "base64"),
    ('{"id":1,"op":"add","ledger":1,"entry":0,"key":"","data":"QQ"}', 1, "base64"),
    ('{"id":1,"op":"add","ledger":1,"entry":0,"key":"","data":"QQ==QQ=="}', 1, "base64"),
    ('{"id":1,"op":"add","ledger":1,"entry":0,"key":"","data":"-_8="}', 1, "base64"),
    ('{"id":1,"op":"add","ledger":1,"entry":0,"key":"","data":"QUJD\\n"}', 1, "base64"),
    ('{"id":1,"op":"add","ledger":1,"entry":0,"key":"","data":"QUJ\\u00e9"}', 1, "base64"),
    ('{"id":1,"op":"add","ledger":1,"entry":0,"key":"","data":null}', 1, "base64"),
    (f'{{"id":1,"op":"add","ledger":1,"entry":0,"key":"","data":"{_TOO_LONG_DATA}"}}', 1, "more"),
    ('{"id":1,"op":"gc","force":"true"}', 1, "true or false"),
    ('{"id":1,"op":"gc","force":1}', 1, "true or false"),
    ("x" * (LIMITS.line_max_bytes + 1), None, "longer than"),
]


@pytest.mark.parametrize(("line", "request_id", "word"), MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_request_is_rejected_and_serving_goes_on(
    line: str | bytes, request_id: int | None, word: str
) -> None:
    rejection = parse_request(line, LIMITS)
    assert isinstance(rejection, Rejection)
    assert (rejection.id, rejection.code) == (request_id, "bad_request")
    assert word in rejection.message
    harness = Harness()
    assert harness.dispatcher.handle_line(line) is Outcome.CONTINUE
    assert harness.responses == [rejection.response()]
    assert harness.bookie.calls == []  # nothing was done
    assert harness.send({"id": 2, "op": "checkpoint"}) is Outcome.CONTINUE
    assert harness.last() == {"id": 2, "ok": True}


def test_data_one_byte_over_the_limit_is_rejected_after_decoding() -> None:
    # 65 bytes encode to the same length as 66, so the length check alone cannot catch it.
    data = base64.b64encode(b"y" * (LIMITS.data_max_bytes + 1)).decode()
    assert len(data) <= base64_size_bytes(LIMITS.data_max_bytes + 2)
    rejection = parse_request(json.dumps(add(9, 1, 0, b"") | {"data": data}), LIMITS)
    assert isinstance(rejection, Rejection)
    assert rejection.id == 9
    assert "65 bytes, more than the 64 allowed" in rejection.message


def test_overlong_line_rejection_has_no_id() -> None:
    rejection = overlong_line_rejection(LIMITS)
    assert rejection.id is None
    assert str(LIMITS.line_max_bytes) in rejection.message


# --- responses -----------------------------------------------------------------------------


def test_encode_response_is_one_ascii_line() -> None:
    line = encode_response({"id": 1, "ok": False, "error": "io_error", "message": "a\nb\r\u00e9"})
    assert "\n" not in line and "\r" not in line
    assert line.isascii()
    assert json.loads(line)["message"] == "a\nb\r\u00e9"


def test_encode_response_refuses_nan() -> None:
    with pytest.raises(ValueError):
        encode_response({"id": 1, "ok": True, "x": float("nan")})


def test_to_json_safe_converts_every_kind() -> None:
    state = FakeState(
        logs=(3, 1),
        fenced=frozenset({10, 2, -5}),
        keys={2: b"\x01\xff", 10: b""},
        color=Color.RED,
        mark=(1, 2),
    )
    assert to_json_safe(state) == {
        "logs": [3, 1],
        "fenced": [-5, 2, 10],
        "keys": {"2": "01ff", "10": ""},
        "color": "red",
        "mark": [1, 2],
    }
    with pytest.raises(TypeError):
        to_json_safe(object())


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (Fenced("f"), "fenced"),
        (Unauthorized("u"), "unauthorized"),
        (NoLedger("l"), "no_ledger"),
        (NoEntry("e"), "no_entry"),
        (NoSpace("s"), "no_space"),
        (NoWritableLedgerDir("all full"), "no_space"),
        (FsNoSpace("/x"), "no_space"),
        (FsIOError("/x", "fsync"), "io_error"),
        (BookieIOError("io"), "io_error"),
        (BadRequest("bad"), "bad_request"),
        (BkrefError("other"), "io_error"),
    ],
)
def test_error_code_of_each_error(error: BkrefError, code: str) -> None:
    assert error_code(error) == code


def test_error_message_falls_back_to_the_class_doc() -> None:
    assert error_message(Fenced()) == (Fenced.__doc__ or "").strip().splitlines()[0]
    assert error_message(Fenced("ledger 3 is fenced")) == "ledger 3 is fenced"


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
        "state": {"logs": [1, 2], "fenced": [3], "keys": {"3": "ab"}, "color": "red", "mark": None},
    }
    json.loads(encode_response(harness.last()))


@pytest.mark.parametrize(
    "request_",
    [
        {"id": 1, "op": "gc", "force": True},
        {"id": 1, "op": "gc", "force": False},
        {"id": 1, "op": "write_close", "ledger": 3, "key": "ab"},
    ],
)
def test_gc_and_write_close_are_unsupported(request_: dict[str, object]) -> None:
    harness = Harness()
    harness.send(request_)
    assert harness.last()["error"] == "unsupported"
    assert harness.last()["id"] == 1
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
    harness = Harness(FakeBookie(auto_complete=False), emit=emit, in_flight_max=adds)
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
    harness = Harness(FakeBookie(auto_complete=False), in_flight_max=2)
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
    harness = Harness(bookie, drain_timeout_s=0.05)
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


def _json_value(value: JsonValue) -> JsonValue:
    return value


def test_ready_event_names_version_and_limits() -> None:
    ready = ready_event(LIMITS)
    assert _json_value(ready) == {
        "id": None,
        "ok": True,
        "event": "ready",
        "version": 1,
        "max_data_bytes": 64,
        "max_key_bytes": 8,
        "max_line_bytes": LIMITS.line_max_bytes,
    }
