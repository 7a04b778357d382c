"""impl/server/protocol.py and spec/strict_json.py: the protocol edges of issue 10, and the
class of inputs around them (huge numbers anywhere, escapes, surrogates, blank-looking lines,
non-canonical base64, over-long lines whose id is readable, ids in flight).

Each edge reproduces what was answered before (a Python-internal message with id null, a
non-canonical base64 accepted, a legal escaped add refused as too long with id null, lines of
form feeds ignored) and checks the answer spec/adapter.md now gives. The adapter process end to
end is tests/unit/proofs/cli/test_adapter_edges.py.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from impl.server.protocol import (
    JSON_CHAR_MAX_BYTES,
    Rejection,
    Request,
    RequestBounds,
    is_blank,
    leading_id,
    overlong_line_rejection,
    parse_request,
)
from spec.strict_json import STRICT_DECODER, HugeNumber
from tests.unit.impl.server.fakes import BOUNDS, FakeBookie, Harness, add

HUGE = "1" + "0" * 5000  # past Python's 4300-digit int-string limit


def _rejected(line: str | bytes, bounds: RequestBounds = BOUNDS) -> Rejection:
    parsed = parse_request(line, bounds)
    assert isinstance(parsed, Rejection), parsed
    assert parsed.code == "bad_request"
    return parsed


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (f'{{"id":7,"op":"read","ledger":{HUGE},"entry":0}}', 7),
        (f'{{"id":7,"op":"read","ledger":1,"entry":-{HUGE}}}', 7),
        (f'{{"id":7,"op":"read","ledger":1,"entry":0,"x":{HUGE}}}', 7),
        (f'{{"id":7,"op":"read","ledger":1,"entry":[{HUGE}]}}', 7),
        ('{"id":7,"op":"read","ledger":1e99999,"entry":0}', 7),
        (f'{{"id":7,"op":"read","ledger":{HUGE}.5e3,"entry":0}}', 7),
        (f'{{"id":{HUGE},"op":"checkpoint"}}', None),
        (f'{{"id":-{HUGE},"op":"checkpoint"}}', None),
        (f"[{HUGE}]", None),
    ],
)
def test_a_huge_number_is_refused_by_name_with_the_readable_id(
    line: str, request_id: int | None
) -> None:
    """Issue 10: the 4300-digit limit turned the whole line into "not JSON" with Python's
    message ("Exceeds the limit ...") and id null."""
    rejection = _rejected(line, RequestBounds(data_max_bytes=64, key_max_bytes=8 * 1024))
    assert rejection.id == request_id
    assert "Exceeds" not in rejection.message and "sys.set_int_max_str_digits" not in (
        rejection.message
    )


def test_huge_numbers_decode_to_a_marker_and_normal_ones_unchanged() -> None:
    value = STRICT_DECODER.decode(f"[{HUGE}, 1e999, -1e999, 5, 1.5, -9223372036854775808]")
    assert isinstance(value, list)
    assert isinstance(value[0], HugeNumber) and value[0].text_length == len(HUGE)
    assert isinstance(value[1], HugeNumber) and isinstance(value[2], HugeNumber)
    assert value[3:] == [5, 1.5, -9223372036854775808]


@pytest.mark.parametrize("data", ["aGVsbG9=", "QR==", "QUJ=", "AB==", "//9="])
def test_non_canonical_base64_is_refused(data: str) -> None:
    """Issue 10: ``aGVsbG9=`` (unused bits set) decoded as ``hello``; the page says strict."""
    line = json.dumps({"id": 3, "op": "add", "ledger": 1, "entry": 0, "key": "", "data": data})
    rejection = _rejected(line)
    assert rejection.id == 3 and "unused bits" in rejection.message


@pytest.mark.parametrize("data", [b"", b"h", b"he", b"hel", b"hello", bytes(range(64))])
def test_canonical_base64_of_every_tail_length_is_taken(data: bytes) -> None:
    parsed = parse_request(json.dumps(add(3, 1, 0, data)), BOUNDS)
    assert isinstance(parsed, Request) and parsed.data == data


def _escaped_everywhere(request: dict[str, object]) -> str:
    """``request`` as JSON with every character of every string as a \\uXXXX escape."""

    def text(value: str) -> str:
        return '"' + "".join(f"\\u{ord(c):04x}" for c in value) + '"'

    fields = ",".join(
        f"{text(k)}:{text(v) if isinstance(v, str) else json.dumps(v)}" for k, v in request.items()
    )
    return "{" + fields + "}"


def test_the_largest_add_written_with_any_legal_escapes_fits_the_line_limit() -> None:
    """Issue 10: a maximum-size add whose ``/`` were written ``\\/`` was refused as too long,
    with id null. The line limit now leaves room for every character escaped."""
    bounds = RequestBounds(data_max_bytes=3000, key_max_bytes=32)
    data = b"\xff" * bounds.data_max_bytes  # base64 all "/"
    request = add(9, 1, 2**63 - 1, data, key=b"\xab" * bounds.key_max_bytes)
    plain = json.dumps(request)
    slashes = plain.replace("/", "\\/")
    everything = _escaped_everywhere(request)
    assert len(everything) > 5 * len(plain) and len(everything) <= bounds.line_max_bytes
    for line in (plain, slashes, everything, everything.replace(",", " ,\t")):
        parsed = parse_request(line, bounds)
        assert isinstance(parsed, Request), parsed
        assert parsed.id == 9 and parsed.data == data
    assert bounds.line_max_bytes >= JSON_CHAR_MAX_BYTES * len(
        base64.b64encode(data) + bytes(2 * bounds.key_max_bytes)
    )


def test_an_overlong_line_is_answered_with_its_id_when_the_line_starts_with_it() -> None:
    bounds = RequestBounds(data_max_bytes=64, key_max_bytes=8)
    padding = "A" * bounds.line_max_bytes
    assert _rejected(f'{{"id": 12 ,"op":"add","data":"{padding}"}}', bounds).id == 12
    assert _rejected(f'{{"op":"add","id":12,"data":"{padding}"}}', bounds).id is None
    assert _rejected("x" * (bounds.line_max_bytes + 1), bounds).id is None
    assert leading_id(b'\t{ "id" :-5}') == -5
    assert leading_id(b'{"id":9223372036854775808,') is None  # out of range: unreadable
    assert leading_id(b'{"id":1.5,') is None and leading_id(b'{"id":01,') is None
    assert overlong_line_rejection(bounds, b'{"id":3,"op"').id == 3


@pytest.mark.parametrize("line", ["\x0b", "\x0c", " \x0c ", b"\x0b\x0c", "\u00a0", "\u2028"])
def test_lines_of_non_json_whitespace_are_answered_not_ignored(line: str | bytes) -> None:
    """Issue 10: ``str.strip`` took these for blank, and the line got no answer."""
    assert not is_blank(line)
    harness = Harness()
    harness.dispatcher.handle_line(line)
    assert len(harness.responses) == 1
    response = harness.last()
    assert (response["id"], response["error"]) == (None, "bad_request")


def test_json_whitespace_lines_are_still_blank() -> None:
    for line in ("", " ", "\t \r", b" \t", b"\r\n"):
        assert is_blank(line)


def test_a_malformed_request_whose_id_is_in_flight_is_answered_with_id_null() -> None:
    """The id in flight keeps exactly one answer of its own (spec/adapter.md)."""
    harness = Harness(FakeBookie(auto_complete=False))  # the add stays in flight
    harness.send(add(5, 1, 0, b"a"))
    assert 5 in harness.dispatcher.in_flight()
    harness.send('{"id":5,"op":"read","ledger":1}')
    response = harness.last()
    assert (response["id"], response["error"]) == (None, "bad_request")
    assert "in flight" in str(response["message"])
    assert harness.by_id(5) == []


@pytest.mark.parametrize(
    "line",
    [
        '{"id":1,"op":"read","ledger":1,"entry":0,"ledger":2}',  # duplicate key
        '{"id":1,"op":"\\ud800"}',  # lone surrogate
        '{"id":1,"op":"fence","ledger":1,"key":"\\udfff\\ud800"}',
        '{"id":1,"op":"read","ledger":1,"entry":0}' + "[" * 3000,
        '{"id":1,"op":"add","ledger":1,"entry":0,"key":"","data":"QQ=\\u003d"}',
        '{"id":1,"op":"\\u0061dd","ledger":1,"entry":0,"key":"","data":"QQ==\\n"}',
        "[" * 3000 + "]" * 3000,
        '{"id":1,"op":"read","ledger":-0,"entry":0}',
    ],
)
def test_spot_checks_of_the_class_get_one_typed_answer(line: str) -> None:
    parsed = parse_request(line, BOUNDS)
    if isinstance(parsed, Request):  # -0 is 0; an escaped "=" is "="
        return
    assert parsed.code == "bad_request" and parsed.message
    response = parsed.response()
    json.dumps(response, ensure_ascii=True, allow_nan=False)


_NUMBER_TEXTS = st.sampled_from(
    [HUGE, "-" + HUGE, "1e999", "-1e999", "1" * 30 + ".5", "9223372036854775808", "-0", "0.0"]
)
_FIELDS = st.sampled_from(["id", "op", "ledger", "entry", "key", "data", "force", "x"])


@given(
    fields=st.lists(st.tuples(_FIELDS, _NUMBER_TEXTS | st.just('"add"')), max_size=7),
    escape=st.booleans(),
)
def test_huge_numbers_in_any_field_get_one_answer_with_the_id_when_readable(
    fields: list[tuple[str, str]], escape: bool
) -> None:
    """The class of the huge-integer edge: numbers too large anywhere, with or without a
    readable id, field names escaped or not. Never an exception, never Python's wording,
    and the id echoed whenever it is a readable int64 and appears once."""
    pairs = [("id", "11"), *fields] if fields and fields[0][0] != "id" else fields
    name = (lambda n: "".join(f"\\u{ord(c):04x}" for c in n)) if escape else (lambda n: n)
    line = "{" + ",".join(f'"{name(k)}":{v}' for k, v in pairs) + "}"
    bounds = RequestBounds(data_max_bytes=64, key_max_bytes=8 * 1024)  # room for the lines
    assert len(line) <= bounds.line_max_bytes
    parsed = parse_request(line, bounds)
    if isinstance(parsed, Request):
        return
    assert "Exceeds" not in parsed.message and "int_max_str_digits" not in parsed.message
    ids = [v for k, v in pairs if k == "id"]
    keys = [k for k, _ in pairs]
    if ids == ["11"] and len(set(keys)) == len(keys):
        assert parsed.id == 11, parsed
    json.dumps(parsed.response(), ensure_ascii=True, allow_nan=False)
