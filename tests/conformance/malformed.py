"""What every bookie of the adapter protocol must refuse, shared by the tests that speak to
the outsider bookies (JavaScript, C, Rust) through a pipe: the table of spec/adapter.md
"Malformed requests", row by row, and lines drawn at random (valid requests mutated byte by
byte, and requests built field by field from legal and illegal values) on which a bookie
must reject exactly what bkref's own parser rejects, since ``bkref record`` judges lines
with that parser.
"""

from __future__ import annotations

import json
import random

from impl.server.protocol import Rejection, RequestBounds, parse_request
from tests.conformance.pipe_client import PipeBookie

#: The limits every outsider bookie announces in its ready line.
MAX_DATA = 5242364
MAX_KEY = 1024
MAX_LINE = 41955304

# --- every row of "Malformed requests" ------------------------------------------------------

VALID_READ = b'"op":"read","ledger":1,"entry":0'
R = b'{"id":1,' + VALID_READ  # a read of id 1, its object left open
ADD0 = b'"op":"add","ledger":1,"entry":0,"key":"","data":'


def data(rid: int, text: bytes) -> bytes:
    """An add of id ``rid`` whose data is ``text`` (quoted)."""
    return b'{"id":%d,%s"%s"}' % (rid, ADD0, text)


HUGE = b"9" * 5000
LONG_KEY = b"ab" * (MAX_KEY + 1)

#: (row of the table, line, the id the response must carry). Not here: a line nested
#: thousands of levels deep, on which spec/adapter.md is silent (bkref's parser refuses it
#: as not JSON, at Python's recursion limit; the JavaScript bookie parses it and answers that
#: the op does not take the field, with the id).
MALFORMED: list[tuple[str, bytes, int | None]] = [
    ("not UTF-8", R + b',"x":"\xff"}', None),
    ("not UTF-8: a surrogate encoded", R + b',"x":"\xed\xa0\x80"}', None),
    ("not JSON: a byte order mark", b"\xef\xbb\xbf" + R + b"}", None),
    ("not JSON", b"this is not json", None),
    ("not JSON: NaN", b'{"id":1,"op":"read","ledger":NaN,"entry":0}', None),
    ("not JSON: Infinity", b'{"id":1,"op":"read","ledger":1,"entry":-Infinity}', None),
    ("not JSON: a key twice", R + b',"entry":0}', None),
    ("not JSON: a key twice, escaped", R + b',"\\u0065ntry":0}', None),
    ("not JSON: a key twice, nested", b'{"id":1,"op":"read","ledger":{"a":1,"a":2}}', None),
    ("not JSON: a raw control character", b'{"id":1,"op":"re\tad","ledger":1,"entry":0}', None),
    ("not JSON: a vertical tab", b"\x0b" + R + b"}", None),
    ("not JSON: a leading zero", b'{"id":01,' + VALID_READ + b"}", None),
    ("not JSON: a bare minus", b'{"id":-,' + VALID_READ + b"}", None),
    ("not JSON: a trailing dot", b'{"id":1.,' + VALID_READ + b"}", None),
    ("not JSON: a trailing comma", R + b",}", None),
    ("not JSON: trailing data", R + b"} {}", None),
    ("not JSON: an unknown escape", b'{"id":1,"op":"re\\qad"}', None),
    ("not JSON: a short \\u escape", b'{"id":1,"op":"\\u00"}', None),
    ("not an object", b"[1, 2]", None),
    ("not an object: a number", b"7", None),
    ("not an object: a string", b'"{}"', None),
    ("no id", b"{" + VALID_READ + b"}", None),
    ("id a float", b'{"id":1.0,' + VALID_READ + b"}", None),
    ("id in exponent form", b'{"id":1e3,' + VALID_READ + b"}", None),
    ("id a string", b'{"id":"1",' + VALID_READ + b"}", None),
    ("id true", b'{"id":true,' + VALID_READ + b"}", None),
    ("id null", b'{"id":null,' + VALID_READ + b"}", None),
    ("id above 2^63-1", b'{"id":9223372036854775808,' + VALID_READ + b"}", None),
    ("id below -2^63", b'{"id":-9223372036854775809,' + VALID_READ + b"}", None),
    ("id of thousands of digits", b'{"id":%s,' % HUGE + VALID_READ + b"}", None),
    ("no op", b'{"id":2,"ledger":1,"entry":0}', 2),
    ("op not a string", b'{"id":3,"op":7,"ledger":1,"entry":0}', 3),
    ("unknown op", b'{"id":4,"op":"reed","ledger":1,"entry":0}', 4),
    ("unknown op: __proto__", b'{"id":4,"op":"__proto__"}', 4),
    ("unknown op: a lone surrogate", b'{"id":4,"op":"read\\ud800"}', 4),
    ("missing field", b'{"id":5,"op":"add","ledger":1,"entry":0,"key":"00"}', 5),
    ("a field the op does not take", b'{"id":6,' + VALID_READ + b',"key":"00"}', 6),
    ("a field checkpoint does not take", b'{"id":6,"op":"checkpoint","force":true}', 6),
    ("ledger a string", b'{"id":7,"op":"read","ledger":"1","entry":0}', 7),
    ("entry a float", b'{"id":8,"op":"read","ledger":1,"entry":0.0}', 8),
    ("entry in exponent form", b'{"id":8,"op":"read","ledger":1,"entry":1E2}', 8),
    ("entry beyond any float", b'{"id":8,"op":"read","ledger":1,"entry":1e999}', 8),
    ("ledger true", b'{"id":9,"op":"read","ledger":true,"entry":0}', 9),
    ("ledger an array", b'{"id":9,"op":"delete","ledger":[1]}', 9),
    ("key a number", b'{"id":10,"op":"fence","ledger":1,"key":12}', 10),
    ("force a string", b'{"id":11,"op":"gc","force":"yes"}', 11),
    ("data null", b'{"id":12,' + ADD0 + b"null}", 12),
    ("negative ledger", b'{"id":13,"op":"read","ledger":-1,"entry":0}', 13),
    ("negative entry", b'{"id":14,"op":"read","ledger":1,"entry":-5}', 14),
    ("ledger above 2^63-1", b'{"id":15,"op":"read","ledger":9223372036854775808,"entry":0}', 15),
    ("entry of thousands of digits", b'{"id":16,"op":"read","ledger":1,"entry":%s}' % HUGE, 16),
    ("key not hex", b'{"id":17,"op":"fence","ledger":1,"key":"c0ffeg"}', 17),
    ("key of odd length", b'{"id":18,"op":"fence","ledger":1,"key":"c0ffe"}', 18),
    ("key above max_key_bytes", b'{"id":19,"op":"fence","ledger":1,"key":"%s"}' % LONG_KEY, 19),
    ("data without padding", data(20, b"aGVsbG8"), 20),
    ("data with nonzero pad bits", data(21, b"aGVsbG9="), 21),
    ("data with nonzero pad bits, one pad", data(21, b"aGVsbG9vcj="), 21),
    ("data with nonzero pad bits, two pads", data(21, b"YR=="), 21),
    ("data with whitespace", data(22, b"aGVs bG8="), 22),
    ("data with an escaped newline", data(22, b"aGVs\\nbG8="), 22),
    ("data URL-safe", data(23, b"-_8="), 23),
    ("data padding in the middle", data(24, b"aG==aGVs"), 24),
    ("data too much padding", data(25, b"a==="), 25),
    ("data not ASCII", data(26, b"\xc3\xa9\xc3\xa9"), 26),
]  # fmt: skip


# --- drawn lines, judged by bkref's parser ----------------------------------------------------

#: Requests to mutate: one of each op but shutdown (which would end the run).
REQUESTS = [
    b'{"id":1,"op":"add","ledger":7,"entry":0,"key":"c0ffee","data":"aGVsbG8="}',
    b'{"id": 2, "op": "read", "ledger": 7, "entry": 1}',
    b'{"id":3,"op":"fence","ledger":7,"key":"C0FFEE"}',
    b'{"id":4,"op":"delete","ledger":8}',
    b'{"id":5,"op":"gc","force":false}',
    b'{"id":6,"op":"write_close","ledger":1,"key":""}',
    b'{"id":-7,"op":"checkpoint"}',
    b'{"id":8,"op":"inspect"}',
]
#: Pieces a mutation inserts or substitutes.
PIECES = [
    b'"', b"{", b"}", b",", b":", b"0", b"1", b"-", b".", b"e", b"+", b"\\", b"u", b" ", b"\t",
    b"\x0b", b"\xc3\xa9", b"\xff", b"=", b"a", b"/", b"[", b"]", b"\\u0041", b"\\n", b"null",
    b"9223372036854775808", b"1.0", b"\x00", b',"id":1', b',"x":1', b',"entry":5', b"\\ud800",
    b"\\udc00", b"\\ud83d\\ude00", b"\xed\xa0\x80", b"E", b"00",
]  # fmt: skip
#: Field values, legal and not, for requests built field by field.
VALUES = [
    b"0", b"-1", b"-0", b"7", b"9223372036854775807", b"9223372036854775808",
    b"-9223372036854775808", b"-9223372036854775809", b"1" + b"0" * 60, b"1.0", b"1e3",
    b"1E+2", b"0.5e-3", b'""', b'"00"', b'"C0FFEE"', b'"abc"', b'"zz"',
    b'"%s"' % (b"ab" * MAX_KEY), b'"%s"' % LONG_KEY, b'"aGVsbG8="', b'"aGVsbG9="', b'"YQ=="',
    b'"YR=="', b'"YQ="', b'"Y==="', b'"aGVs\\u0062G8="', b'"ab+/"', b'"-_=="', b'" YQ=="',
    b'"YQ==\\n"', b'"\\u0030\\u0030"', b'"\\/w=="', b"true", b"false", b"null", b"[]", b"{}",
    b'"1"', b'[{"a":1,"a":2}]', b'{"b":[1,{"c":null}]}', b'"\\ud800"',
]  # fmt: skip
OP_FIELDS = {
    "add": ["ledger", "entry", "key", "data"], "read": ["ledger", "entry"],
    "fence": ["ledger", "key"], "delete": ["ledger"], "gc": ["force"],
    "write_close": ["ledger", "key"], "checkpoint": [], "inspect": [], "nope": [],
}  # fmt: skip


def drawn_line(rng: random.Random) -> bytes:
    if rng.random() < 0.3:  # a valid request, mutated byte-wise
        line = rng.choice(REQUESTS)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(line) + 1)
            kind = rng.randrange(3)
            piece = rng.choice(PIECES)
            if kind == 0:
                line = line[:i] + line[i + 1 :]
            elif kind == 1:
                line = line[:i] + piece + line[i:]
            else:
                line = line[:i] + piece + line[i + 1 :]
        return line
    name = rng.choice(list(OP_FIELDS))
    names = ["id", "op", *OP_FIELDS[name]]
    if rng.random() < 0.15:
        names.append(rng.choice(["id", "op", "ledger", "entry", "key", "data", "force", "x"]))
    if rng.random() < 0.15:
        names.pop(rng.randrange(len(names)))
    rng.shuffle(names)
    parts = []
    for field in names:
        if field == "op":
            value = json.dumps(name).encode() if rng.random() < 0.95 else rng.choice(VALUES)
        elif field == "id":
            good = rng.choice([b"1", b"-3", b"9223372036854775807"])
            value = good if rng.random() < 0.9 else rng.choice(VALUES)
        else:
            value = rng.choice(VALUES)
        parts.append(b'"%s"%s:%s' % (field.encode(), rng.choice([b"", b" ", b"\t"]), value))
    return b"{" + b",".join(parts) + b"}"


def check_rejects_what_bkref_rejects(bookie: PipeBookie, seed: int, lines: int = 3000) -> None:
    """Sends ``lines`` drawn lines (:func:`drawn_line`, none a shutdown), one at a time, to a
    ready ``bookie``: each bkref's parser rejects must be answered ``bad_request`` with the
    id the parser found, and none it accepts may be. Then closes the bookie, which must exit
    0. The draw must reject between a third and nearly all lines, some with an id."""
    rng = random.Random(seed)
    bounds = RequestBounds(data_max_bytes=MAX_DATA, key_max_bytes=MAX_KEY)
    rejected = with_id = checked = 0
    while checked < lines:
        line = drawn_line(rng)
        if b"\n" in line or line.endswith(b"\r") or not line.strip(b" \t\r"):
            continue
        if b'"shutdown"' in line:
            continue
        checked += 1
        want = parse_request(line, bounds)
        got = bookie.one(line + b"\n")
        if isinstance(want, Rejection):
            rejected += 1
            with_id += want.id is not None
            assert (got["id"], got.get("error")) == (want.id, want.code), (line, want, got)
        else:
            assert got.get("error") != "bad_request", (line, got)
    assert lines // 3 < rejected < lines * 29 // 30 and with_id > lines // 6, (rejected, with_id)
    assert bookie.close() == 0
