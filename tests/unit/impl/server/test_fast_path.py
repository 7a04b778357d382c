"""The adapter's fast path for adds (impl/server/protocol.py, ``parse_add_fast``) against the
strict parser it stands in front of (``parse_request``), over many drawn lines.

The fast path may decline any line (the slow path then decides), but a line it accepts must
be one the slow path accepts as the same add: so the adapter rejects exactly what it
rejected before the fast path existed, with the same answer. Lines are drawn valid (the
common compact form, spaced, reordered) and then damaged the ways a client or a fuzzer
damages them: keys twice, floats and exponents, huge and negative integers, leading zeros,
bad base64 (unused bits set, padding missing or inside, whitespace, the URL-safe alphabet,
non-ASCII), JSON escapes, vertical tabs and form feeds, wrong types, unknown and missing
fields, another op, truncation and stray bytes. Two dispatchers, one with the fast path and
one without, then answer the same lines and must write the same responses.
"""

from __future__ import annotations

import base64
import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from impl.server.protocol import (
    Op,
    Rejection,
    Request,
    RequestBounds,
    parse_add_fast,
    parse_request,
)
from spec.ids import INT64_MAX, INT64_MIN
from tests.unit.impl.server.fakes import BOUNDS, Harness

#: Small bounds, so that the data and key limits are met by drawn lines, and the default.
ALL_BOUNDS = (BOUNDS, RequestBounds.from_max_sane_entry_size(5 * 1024 * 1024 - 500))
JSON_SPACES = (b"", b" ", b"\t", b"\r", b"\n", b"  ")
#: Bytes JSON does not take for whitespace, or anywhere outside a string.
NOT_SPACES = (b"\x0b", b"\x0c", b"\xa0", b"\xc2\xa0", b"\x00")


def _member(name: str, value: bytes) -> bytes:
    return b'"' + name.encode() + b'":' + value


def _add_members(
    request_id: int, ledger: int, entry: int, key: bytes, data: bytes
) -> list[tuple[str, bytes]]:
    return [
        ("id", str(request_id).encode()),
        ("op", b'"add"'),
        ("ledger", str(ledger).encode()),
        ("entry", str(entry).encode()),
        ("key", b'"' + key.hex().encode() + b'"'),
        ("data", b'"' + base64.b64encode(data) + b'"'),
    ]


def _render(members: list[tuple[str, bytes]], rng: random.Random, spaced: bool) -> bytes:
    def space() -> bytes:
        return rng.choice(JSON_SPACES) if spaced else b""

    parts = [space() + _member(n, v).replace(b":", space() + b":" + space(), 1) for n, v in members]
    return space() + b"{" + (space() + b",").join(parts) + space() + b"}" + space()


def _mutations(
    rng: random.Random, members: list[tuple[str, bytes]], bounds: RequestBounds
) -> bytes:
    """One damaged (or, for some, still valid) rendering of ``members``."""
    names = [name for name, _ in members]
    kind = rng.randrange(30)
    members = list(members)
    pick = rng.randrange(len(members))
    if kind == 0:  # a key twice
        members.insert(rng.randrange(len(members) + 1), members[pick])
    elif kind == 1:  # an integer field as a float, an exponent, -0, a leading zero
        field = rng.choice(["id", "ledger", "entry"])
        text = rng.choice([b"1.0", b"1e3", b"-0", b"01", b"0.5", b"1E2", b"-", b"+1", b"0x10"])
        members[names.index(field)] = (field, text)
    elif kind == 2:  # a huge or out of range integer
        field = rng.choice(["id", "ledger", "entry"])
        big = rng.choice(
            [str(n).encode() for n in (INT64_MAX, INT64_MAX + 1, INT64_MIN, INT64_MIN - 1)]
            + [b"-1", b"1" + b"0" * 19, b"9" * 25, b"1" + b"0" * 4400, b"-" + b"7" * 5000]
        )
        members[names.index(field)] = (field, big)
    elif kind == 3:  # unused bits set in the last group, or padding dropped
        data = members[names.index("data")][1][1:-1]
        if data.endswith(b"="):
            last = data.rstrip(b"=")
            alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
            data = last[:-1] + bytes([rng.choice(alphabet)]) + data[len(last) :]
        data = data.rstrip(b"=") if rng.random() < 0.3 else data
        members[names.index("data")] = ("data", b'"' + data + b'"')
    elif kind == 4:  # base64 damaged inside: whitespace, url-safe, '=' inside, a backslash
        damaged = bytearray(members[names.index("data")][1][1:-1])
        at = rng.randrange(len(damaged) + 1)
        damaged[at:at] = rng.choice(
            [b" ", b"\n", b"-", b"_", b"=", b"==", b"\\", b"\xc3\xa9", b"*"]
        )
        members[names.index("data")] = ("data", b'"' + bytes(damaged) + b'"')
    elif kind == 5:  # JSON escapes in a string: legal, and the slow path reads through them
        field = rng.choice(["key", "data", "op"])
        text = members[names.index(field)][1][1:-1]
        if text:
            at = rng.randrange(len(text))
            escaped = b"\\u%04x" % text[at] if rng.random() < 0.7 else b"\\/"
            text = text[:at] + escaped + text[at + 1 :]
        members[names.index(field)] = (field, b'"' + text + b'"')
    elif kind == 6:  # a wrong type
        field = rng.choice(names)
        wrong = [b'"1"', b"true", b"null", b"[1]", b'{"a":1}', b"1", b'"zz"', b"NaN", b"false"]
        members[names.index(field)] = (field, rng.choice(wrong))
    elif kind == 7:  # the key: odd length, not hex, longer than allowed, empty
        text = rng.choice(
            [b"abc", b"xy", b"0g", b"AbCd", b"", b"ab" * (bounds.key_max_bytes + 1), b"ab" * 2]
        )
        members[names.index("key")] = ("key", b'"' + text + b'"')
    elif kind == 8 and bounds.data_max_bytes < 1000:  # the data at and over its bound
        size = bounds.data_max_bytes + rng.choice([-1, 0, 1, 2, 3])
        data = base64.b64encode(rng.randbytes(size))
        members[names.index("data")] = ("data", b'"' + data + b'"')
    elif kind == 9:  # an unknown field, or one missing
        if rng.random() < 0.5:
            members.insert(rng.randrange(len(members) + 1), ("extra", b"1"))
        else:
            del members[pick]
    elif kind == 10:  # another op, or add spelled otherwise
        op = rng.choice([b'"read"', b'"ADD"', b'"add "', b'"fence"', b'"ad"', b'"addd"'])
        members[names.index("op")] = ("op", op)
    elif kind == 11:  # the fields in another order (valid)
        rng.shuffle(members)
    line = _render(members, rng, spaced=rng.random() < 0.5)
    if kind == 12:  # not whitespace where whitespace may go
        at = rng.choice([0, line.index(b":") + 1, len(line)])
        line = line[:at] + rng.choice(NOT_SPACES) + line[at:]
    elif kind == 13:  # cut short
        line = line[: rng.randrange(len(line))]
    elif kind == 14:  # a stray byte
        at = rng.randrange(len(line) + 1)
        line = line[:at] + bytes([rng.randrange(256)]) + line[at:]
    elif kind == 15:  # a byte dropped
        at = rng.randrange(len(line))
        line = line[:at] + line[at + 1 :]
    elif kind == 16:  # something after the object
        line = line + rng.choice([b"}", b",", b"{}", b"x", b'"', b" 1"])
    elif kind == 17:  # a JSON value that is not an object
        line = rng.choice([b"[" + line + b"]", b'"' + line + b'"'])
    elif kind == 18:  # the quote closing the data escaped
        at = line.rfind(b'"')
        line = line[:at] + b'\\"' + line[at + 1 :]
    return line


def _valid_members(rng: random.Random, bounds: RequestBounds) -> list[tuple[str, bytes]]:
    request_id = rng.choice(
        [0, 1, -1, rng.randrange(INT64_MIN, INT64_MAX + 1), INT64_MAX, INT64_MIN]
    )
    ledger = rng.choice([0, 1, 7, rng.randrange(INT64_MAX + 1), INT64_MAX])
    entry = rng.choice([0, 3, rng.randrange(INT64_MAX + 1), INT64_MAX])
    key = bytes(rng.randrange(256) for _ in range(rng.randrange(bounds.key_max_bytes + 1)))
    data = bytes(
        rng.randrange(256) for _ in range(rng.randrange(min(bounds.data_max_bytes, 200) + 1))
    )
    return _add_members(request_id, ledger, entry, key, data)


def _agree(line: bytes, bounds: RequestBounds) -> tuple[bool, bool]:
    """Check one line; returns (the fast path accepted it, the slow path accepted it)."""
    fast = parse_add_fast(line, bounds)
    slow = parse_request(line, bounds)
    if fast is not None:
        assert isinstance(slow, Request), (line, slow)
        assert slow.op is Op.ADD
        assert fast == (slow.id, slow.ledger, slow.entry, slow.key, slow.data), line
    return fast is not None, isinstance(slow, Request)


def test_the_common_form_takes_the_fast_path() -> None:
    # Without this the agreement below could hold because the fast path declines everything.
    rng = random.Random(12)
    for bounds in ALL_BOUNDS:
        for _ in range(300):
            members = _valid_members(rng, bounds)
            for spaced in (False, True):
                line = _render(members, rng, spaced)
                assert _agree(line, bounds) == (True, True), line
    line = b'{"id":1,"op":"add","ledger":7,"entry":0,"key":"c0ffee","data":"aGVsbG8="}'
    assert parse_add_fast(line, BOUNDS) == (1, 7, 0, bytes.fromhex("c0ffee"), b"hello")


def test_the_fast_path_never_accepts_what_the_slow_path_rejects() -> None:
    rng = random.Random(2026)
    counts = {(fast, slow): 0 for fast in (False, True) for slow in (False, True)}
    for round_ in range(12000):
        bounds = ALL_BOUNDS[round_ % 2]
        line = _mutations(rng, _valid_members(rng, bounds), bounds)
        counts[_agree(line, bounds)] += 1
    assert counts[(True, False)] == 0  # _agree asserts it too, with the line
    # Every class is met: damaged lines refused, valid odd forms left to the slow path,
    # valid common ones taken fast.
    assert counts[(False, False)] > 6000, counts
    assert counts[(False, True)] > 300, counts
    assert counts[(True, True)] > 1000, counts


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(ALL_BOUNDS))
def test_arbitrary_bytes_agree(line: bytes, bounds: RequestBounds) -> None:
    _agree(line, bounds)


@settings(max_examples=500, deadline=None)
@given(
    st.integers(INT64_MIN - 2, INT64_MAX + 2),
    st.integers(-2, INT64_MAX + 2),
    st.integers(-2, INT64_MAX + 2),
    st.text("0123456789abcdefABCDEFxg", max_size=20),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ \\", max_size=100),
    st.sampled_from(ALL_BOUNDS),
)
def test_drawn_field_texts_agree(
    request_id: int, ledger: int, entry: int, key: str, data: str, bounds: RequestBounds
) -> None:
    line = b'{"id":%d,"op":"add","ledger":%d,"entry":%d,"key":"%s","data":"%s"}' % (
        request_id,
        ledger,
        entry,
        key.encode(),
        data.encode(),
    )
    _agree(line, bounds)


def test_dispatchers_with_and_without_the_fast_path_answer_alike() -> None:
    # The whole request path, in-flight ids included (a duplicate id on the fast path must
    # be refused as the slow path refuses it): the same lines to both, the same answers.
    rng = random.Random(7)
    for bounds in ALL_BOUNDS:
        fast, slow = Harness(bounds=bounds), Harness(bounds=bounds, fast_path=False)
        for round_ in range(1500):
            if round_ % 3 == 0:
                line = _render(_valid_members(rng, bounds), rng, spaced=False)
            else:
                line = _mutations(rng, _valid_members(rng, bounds), bounds)
            if round_ % 50 == 0:  # ids in flight: the fake bookie holds these adds
                fast.bookie.auto_complete = slow.bookie.auto_complete = False
            elif round_ % 50 == 10:
                fast.bookie.auto_complete = slow.bookie.auto_complete = True
            for harness in (fast, slow):
                harness.dispatcher.handle_line(line)
                harness.dispatcher.check_invariants()
        assert fast.responses == slow.responses
        assert fast.bookie.calls == slow.bookie.calls
        assert len(fast.responses) > 1000
        assert any(r.get("ok") is False and r.get("id") is None for r in fast.responses)


def test_a_lone_padding_after_a_whole_group_is_refused() -> None:
    # Found by the comparison above: Python's strict decoder takes "AAAA=" as three zero
    # bytes, and the canonical-tail check let it through, so a byte string had two texts
    # (spec/adapter.md: "each byte string has one text"). Both paths refuse it now.
    for text in (b"AAAA=", b"aGVs=", b"aGVsbG8=A", b"QUFB=", b"QUFBQQ==="):
        line = b'{"id":1,"op":"add","ledger":1,"entry":0,"key":"ab","data":"%s"}' % text
        assert parse_add_fast(line, BOUNDS) is None
        rejection = parse_request(line, BOUNDS)
        assert isinstance(rejection, Rejection) and rejection.id == 1, (text, rejection)
        assert "'data' must be a string in standard base64" in rejection.message
    line = b'{"id":1,"op":"add","ledger":1,"entry":0,"key":"ab","data":"AAAA"}'
    assert parse_add_fast(line, BOUNDS) == (1, 1, 0, b"\xab", bytes(3))


def test_the_fast_path_sees_the_bounds_it_is_given() -> None:
    data = base64.b64encode(bytes(65)).decode()
    line = json.dumps(
        {"id": 1, "op": "add", "ledger": 1, "entry": 0, "key": "ab", "data": data},
        separators=(",", ":"),
    ).encode()
    assert parse_add_fast(line, BOUNDS) is None  # 65 bytes > 64
    assert isinstance(parse_request(line, BOUNDS), Rejection)
    assert parse_add_fast(line, ALL_BOUNDS[1]) is not None
    # The default bounds, at the largest data and one byte more (5 MiB lines: once each).
    largest = ALL_BOUNDS[1].data_max_bytes
    for size, accepted in ((largest, True), (largest + 1, False)):
        text = base64.b64encode(bytes(size))
        line = b'{"id":1,"op":"add","ledger":1,"entry":0,"key":"ab","data":"%s"}' % text
        assert (parse_add_fast(line, ALL_BOUNDS[1]) is not None) is accepted
        assert isinstance(parse_request(line, ALL_BOUNDS[1]), Request) is accepted
