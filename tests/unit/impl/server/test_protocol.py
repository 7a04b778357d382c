"""impl/server/protocol.py against spec/adapter.md, without a process: the page's tables and
worked example, parsing, every malformed input kind, responses and error codes.

Requests are handed to a Dispatcher over the fake bookie of fakes.py where a test checks that
serving goes on; the dispatcher itself is tested in test_dispatcher.py.
"""

from __future__ import annotations

import base64
import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.config.config import load_config
from impl.server.dispatcher import Outcome
from impl.server.protocol import (
    ERROR_CLASSES,
    FIELD_KINDS,
    OP_FIELDS,
    OPTIONAL_OPS,
    PROTOCOL_VERSION,
    Claims,
    JsonValue,
    Op,
    Rejection,
    Request,
    RequestBounds,
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
from spec.ids import INT64_MAX, INT64_MIN
from spec.operations import ERROR_CODES
from spec.profile import ANSWER_PROFILES, STATE_PROFILES
from tests.paths import ROOT
from tests.unit.impl.server.fakes import BOUNDS, Color, FakeState, Harness, add

PAGE = ROOT / "spec" / "adapter.md"


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


#: The claims of the page's ready line: bkref 0.1.0 on /tmp/bk (README.md's adapter command).
PAGE_CLAIMS = Claims(
    bookie="bkref 0.1.0", journal_dirs=("/tmp/bk/journal",), ledger_dirs=("/tmp/bk/ledgers",)
)


def test_page_ready_line_is_what_the_default_configuration_gives() -> None:
    config = load_config(None, "", [])
    bounds = RequestBounds.from_max_sane_entry_size(config.max_sane_entry_size_bytes)
    ready = encode_response(ready_event(bounds, PAGE_CLAIMS))
    assert f'"version":{PROTOCOL_VERSION}' in ready
    assert ready in _section("Start")
    assert ready in _section("Worked example")
    assert f"({bounds.data_max_bytes} by default)" in _section("Limits")
    assert bounds.data_max_bytes == 5 * 1024 * 1024 - 500 - 16


def test_page_capability_table_equals_the_ready_line() -> None:
    section = _section("Capabilities")
    rows = _table(section, "field")
    v1_fields = ("id", "ok", "event", "version", "max_data_bytes", "max_key_bytes")
    v2_fields = [name for name in ready_event(BOUNDS) if name not in v1_fields]
    # ``config`` is for bookies whose settings the runner cannot read from their command;
    # bkref's adapter takes --set pairs, which the runner reads, and does not send it.
    documented = [_names(r[0])[0] for r in rows]
    assert documented[-1] == "config"
    assert documented[:-1] == v2_fields[1:]  # after max_line_bytes
    assert v2_fields[0] == "max_line_bytes"
    ops_row = rows[[_names(r[0])[0] for r in rows].index("ops")]
    assert _names(ops_row[1]) == tuple(op.value for op in OPTIONAL_OPS)
    state_row = rows[[_names(r[0])[0] for r in rows].index("state")]
    assert _names(state_row[1])[:3] == STATE_PROFILES
    answers_row = rows[[_names(r[0])[0] for r in rows].index("answers")]
    assert _names(answers_row[1]) == ANSWER_PROFILES
    for level in ("protocol", "structural", "format"):
        assert f"- **{level}**" in section


def test_ready_claims_refuse_contradictions() -> None:
    with pytest.raises(AssertionError):
        Claims(bookie="x", ops=(Op.CHECKPOINT,), state="full")  # state without inspect
    with pytest.raises(AssertionError):
        Claims(bookie="x", ops=(Op.ADD,))  # add is required, not optional
    with pytest.raises(AssertionError):
        Claims(bookie="x", journal_dirs=("relative",), ledger_dirs=("/abs",))
    with pytest.raises(ValueError):
        Claims(bookie="x", answers="maybe")
    claims = Claims(bookie="x", ops=(Op.INSPECT, Op.CHECKPOINT), state="protocol")
    assert claims.ops == (Op.CHECKPOINT, Op.INSPECT)  # the page's order
    ready = ready_event(BOUNDS, claims)
    assert ready["ops"] == ["checkpoint", "inspect"]
    assert ready["state"] == "protocol" and ready["format"] is None


def _example_lines() -> list[tuple[str, str]]:
    block = _section("Worked example").split("```")[1]
    lines = [line for line in block.splitlines() if line.strip()]
    return [(line[0], line[2:]) for line in lines]


def test_worked_example_replays() -> None:
    # The page's exchange, request by request, against the fake bookie. "..." stands for a
    # message of the bookie's own; every other response must match exactly.
    harness = Harness(bounds=RequestBounds(data_max_bytes=1024))
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


_keys = st.binary(max_size=BOUNDS.key_max_bytes)


_data = st.binary(max_size=BOUNDS.data_max_bytes)


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
    assert parse_request(line, BOUNDS) == expected
    assert parse_request(line.encode(), BOUNDS) == expected
    assert parse_request("  " + line + " \r", BOUNDS) == expected


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
    parsed = parse_request(line, BOUNDS)
    if isinstance(parsed, Rejection):
        assert parsed.code == "bad_request"
        json.loads(encode_response(parsed.response()))
    else:
        assert isinstance(parsed, Request)


def test_many_duplicate_keys_are_rejected_quickly() -> None:
    line = "{" + ",".join(['"id":1'] * 200_000) + "}"
    rejection = parse_request(line, RequestBounds(data_max_bytes=10**7))
    assert isinstance(rejection, Rejection)
    assert "more than once" in rejection.message


def test_largest_data_and_key_are_accepted() -> None:
    request = add(1, 0, 0, b"x" * BOUNDS.data_max_bytes, key=b"k" * BOUNDS.key_max_bytes)
    parsed = parse_request(json.dumps(request), BOUNDS)
    assert isinstance(parsed, Request)
    assert parsed.payload() == b"x" * BOUNDS.data_max_bytes
    assert parsed.master_key() == b"k" * BOUNDS.key_max_bytes


def test_the_longest_valid_add_fits_the_line_limit() -> None:
    bounds = RequestBounds(data_max_bytes=3000)
    request = add(INT64_MIN, INT64_MAX, INT64_MAX, b"\xff" * 3000, key=b"\xff" * 1024)
    line = json.dumps(request, indent=None, separators=(", ", ": "))
    assert len(line) <= bounds.line_max_bytes
    assert isinstance(parse_request(line, bounds), Request)
    assert base64_size_bytes(3000) == 4000
    assert base64_size_bytes(0) == 0
    assert base64_size_bytes(1) == 4


def test_blank_lines_are_ignored() -> None:
    harness = Harness()
    assert is_blank("  \t") and is_blank(b"") and not is_blank("{}")
    assert harness.send("   ") is Outcome.CONTINUE
    assert harness.responses == []


# --- parsing: every malformed kind ---------------------------------------------------------


_TOO_LONG_KEY = "ab" * (BOUNDS.key_max_bytes + 1)


_TOO_LONG_DATA = base64.b64encode(b"x" * (BOUNDS.data_max_bytes + 1)).decode()


#: (line, id in the rejection, a word the message must contain)
MALFORMED: list[tuple[str | bytes, int | None, str]] = [
    (b'{"id":1,"op":"\xff"}', None, "UTF-8"),
    ("this is not json", None, "not JSON"),
    ('{"id":1,"op":"checkpoint"', None, "not JSON"),
    ("[1, 2]", None, "JSON object"),
    ("42", None, "JSON object"),
    ('"checkpoint"', None, "JSON object"),
    ("null", None, "JSON object"),
    ("[" * 4000, None, "nested too deeply"),
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
    ("x" * (BOUNDS.line_max_bytes + 1), None, "longer than"),
]


@pytest.mark.parametrize(("line", "request_id", "word"), MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_request_is_rejected_and_serving_goes_on(
    line: str | bytes, request_id: int | None, word: str
) -> None:
    rejection = parse_request(line, BOUNDS)
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
    data = base64.b64encode(b"y" * (BOUNDS.data_max_bytes + 1)).decode()
    assert len(data) <= base64_size_bytes(BOUNDS.data_max_bytes + 2)
    rejection = parse_request(json.dumps(add(9, 1, 0, b"") | {"data": data}), BOUNDS)
    assert isinstance(rejection, Rejection)
    assert rejection.id == 9
    assert "65 bytes, more than the 64 allowed" in rejection.message


def test_overlong_line_rejection_has_no_id() -> None:
    rejection = overlong_line_rejection(BOUNDS)
    assert rejection.id is None
    assert str(BOUNDS.line_max_bytes) in rejection.message


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


def _json_value(value: JsonValue) -> JsonValue:
    return value


def test_ready_event_names_version_and_limits() -> None:
    ready = ready_event(BOUNDS)
    assert _json_value(ready) == {
        "id": None,
        "ok": True,
        "event": "ready",
        "version": 2,
        "max_data_bytes": 64,
        "max_key_bytes": 8,
        "max_line_bytes": BOUNDS.line_max_bytes,
        "bookie": "bkref",
        "ops": ["checkpoint", "gc", "inspect", "write_close"],
        "state": "full",
        "answers": "bkref",
        "format": None,
    }
