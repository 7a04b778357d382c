"""The ``bkref adapter`` wire protocol, version 2: JSON lines in, JSON lines out.

Spec page: spec/adapter.md. This module is what a line means, with no bookie and no process:
the request fields and their kinds, the request bounds, parsing and validating one request line
(:func:`parse_request`, which never raises: a bad line becomes a :class:`Rejection` saying
why), the responses and their encoding (:func:`encode_response`), the ready line, and the
error code of every error the bookie can raise. Version 2 added the capabilities of the
ready line (:class:`Claims`): what the bookie supports, which a conformance run holds it to.
impl/server/dispatcher.py hands the requests to the bookie; impl/server/stdio.py frames them
on standard input and output.

Why a pure layer: the tests drive every malformed input and every
error code through it without a bookie or a process, and the tables of the spec page are
checked against the constants here.
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import TypeAlias

import attrs

from impl.limits import LIMITS, Limits
from spec.errors import (
    BadRequest,
    BkrefError,
    BookieError,
    BookieIOError,
    Fenced,
    FsNoSpace,
    NoEntry,
    NoLedger,
    NoSpace,
    NoWritableLedgerDir,
    Unauthorized,
    Unsupported,
)
from spec.ids import INT64_MAX, INT64_MIN, EntryId, LedgerId
from spec.operations import ERROR_CODES
from spec.profile import ANSWER_PROFILES, STATE_PROFILES
from spec.strict_json import STRICT_DECODER, HugeNumber, describe

#: The protocol version this module speaks (spec/adapter.md, "Versioning").
PROTOCOL_VERSION = 2
#: Bytes the bookie puts before the data in the stored entry: int64 ledger id, int64 entry id
#: (spec/format/entry_log.md, ``payload``).
ENTRY_HEADER_BYTES = 16
#: Bytes one character of a JSON string may take on a request line: every character may be
#: written as a ``\\uXXXX`` escape (RFC 8259, section 7), and ``\\/`` is ``/``.
JSON_CHAR_MAX_BYTES = 6
#: Room on a request line for everything but the data and the key: the field names, the op,
#: the ids and whitespace between tokens, each written with escapes or not.
LINE_OVERHEAD_MAX_BYTES = 4096

#: The spec.errors class behind each code.
ERROR_CLASSES: tuple[type[BookieError], ...] = (
    Fenced,
    Unauthorized,
    NoLedger,
    NoEntry,
    NoSpace,
    BookieIOError,
    BadRequest,
    Unsupported,
)

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
Response: TypeAlias = dict[str, JsonValue]


class Op(enum.Enum):
    """The operations, by their name on the wire."""

    ADD = "add"
    READ = "read"
    FENCE = "fence"
    WRITE_CLOSE = "write_close"
    DELETE = "delete"
    CHECKPOINT = "checkpoint"
    GC = "gc"
    INSPECT = "inspect"
    SHUTDOWN = "shutdown"


class Kind(enum.Enum):
    """How a request field is written on the wire."""

    ID = "an integer from 0 to 9223372036854775807"
    HEX = "a string of hex digits (an even number of them)"
    BASE64 = "a string in standard base64 with padding (RFC 4648, section 4)"
    BOOL = "true or false"


#: The type of every request field (spec/adapter.md, "Requests").
FIELD_KINDS: Mapping[str, Kind] = {
    "ledger": Kind.ID,
    "entry": Kind.ID,
    "key": Kind.HEX,
    "data": Kind.BASE64,
    "force": Kind.BOOL,
}

#: The fields each operation takes, besides ``id`` and ``op``; all are required.
OP_FIELDS: Mapping[Op, tuple[str, ...]] = {
    Op.ADD: ("ledger", "entry", "key", "data"),
    Op.READ: ("ledger", "entry"),
    Op.FENCE: ("ledger", "key"),
    Op.WRITE_CLOSE: ("ledger", "key"),
    Op.DELETE: ("ledger",),
    Op.CHECKPOINT: (),
    Op.GC: ("force",),
    Op.INSPECT: (),
    Op.SHUTDOWN: (),
}

#: The fields of a ``gc`` answer besides ``id`` and ``ok`` (spec/adapter.md, "gc"): the
#: GcStats of the cycle (impl/bookie/gc.py), its candidate list left out.
GC_ANSWER_FIELDS: tuple[str, ...] = (
    "compaction",
    "logs_deleted",
    "logs_compacted",
    "entries_moved",
    "bytes_reclaimed",
)

#: The ops a bookie may leave out (spec/adapter.md, "Capabilities"); every other op is
#: required of every bookie.
OPTIONAL_OPS: tuple[Op, ...] = (Op.CHECKPOINT, Op.GC, Op.INSPECT, Op.WRITE_CLOSE)

_HEX = re.compile(r"[0-9a-fA-F]*")
_OPS_BY_NAME: Mapping[str, Op] = {op.value: op for op in Op}
_OP_NAMES = ", ".join(_OPS_BY_NAME)
#: The fields each op takes, as sets.
_OP_FIELD_SETS: Mapping[Op, frozenset[str]] = {op: frozenset(f) for op, f in OP_FIELDS.items()}


# --- request bounds ------------------------------------------------------------------------


def max_data_size_bytes(max_sane_entry_size_bytes: int) -> int:
    """Largest ``data`` an add may carry: the stored entry (16 bytes of ids + data) must not
    exceed BookKeeper's maxSaneEntrySize (nettyMaxFrameSizeBytes - 500), which its readers
    check (DefaultEntryLogger warns, DirectReader refuses)."""
    assert max_sane_entry_size_bytes > ENTRY_HEADER_BYTES, max_sane_entry_size_bytes
    return max_sane_entry_size_bytes - ENTRY_HEADER_BYTES


def base64_size_bytes(data_size_bytes: int) -> int:
    """Length of the padded standard base64 text of ``data_size_bytes`` bytes."""
    assert data_size_bytes >= 0, data_size_bytes
    return 4 * ((data_size_bytes + 2) // 3)


@attrs.frozen
class RequestBounds:
    """Every bound the protocol puts on a request (spec/adapter.md, "Limits"), derived from
    the configuration (the data) and the engine's Limits (the key, impl/limits.py). Not
    named Limits: that is the engine's object, which the dispatcher takes too."""

    data_max_bytes: int = attrs.field(validator=attrs.validators.ge(0))
    key_max_bytes: int = attrs.field(
        default=LIMITS.master_key_max_bytes, validator=attrs.validators.ge(0)
    )

    @property
    def line_max_bytes(self) -> int:
        """Longest request line, newline excluded. Every legal request fits, however its
        strings are escaped: the base64 data and the hex key at JSON_CHAR_MAX_BYTES per
        character, plus a fixed overhead. Measured on the raw line (the reader holds no more
        than this in memory); the data's own bound is checked on the decoded string. Issue
        10: the bound was the unescaped length, so a largest add whose ``/`` were written
        ``\\/`` (legal JSON) was refused as too long, with id null."""
        chars = base64_size_bytes(self.data_max_bytes) + 2 * self.key_max_bytes
        return JSON_CHAR_MAX_BYTES * chars + LINE_OVERHEAD_MAX_BYTES

    @functools.cached_property
    def fast_limits(self) -> tuple[int, int, int, int]:
        """The bounds parse_add_fast checks, computed once (it reads them for every add):
        the longest line, the longest key's hex, the longest data's base64, the data."""
        return (
            self.line_max_bytes,
            2 * self.key_max_bytes,
            base64_size_bytes(self.data_max_bytes),
            self.data_max_bytes,
        )

    @classmethod
    def from_max_sane_entry_size(
        cls, max_sane_entry_size_bytes: int, limits: Limits = LIMITS
    ) -> RequestBounds:
        """The bounds for a bookie configured with this maxSaneEntrySize and opened with
        ``limits`` (the longest key it accepts)."""
        return cls(
            data_max_bytes=max_data_size_bytes(max_sane_entry_size_bytes),
            key_max_bytes=limits.master_key_max_bytes,
        )


# --- requests ------------------------------------------------------------------------------


@attrs.frozen
class Request:
    """One valid request. The fields its op does not take are None (OP_FIELDS)."""

    id: int
    op: Op
    ledger: LedgerId | None = None
    entry: EntryId | None = None
    key: bytes | None = None
    data: bytes | None = None
    force: bool | None = None

    def __attrs_post_init__(self) -> None:
        assert INT64_MIN <= self.id <= INT64_MAX, self.id
        values = (self.ledger, self.entry, self.key, self.data, self.force)
        given = {name for name, value in zip(FIELD_KINDS, values, strict=True) if value is not None}
        assert given == _OP_FIELD_SETS[self.op], (self.op, given)
        assert self.ledger is None or 0 <= self.ledger <= INT64_MAX, self.ledger
        assert self.entry is None or 0 <= self.entry <= INT64_MAX, self.entry

    def ledger_id(self) -> LedgerId:
        assert self.ledger is not None, self
        return self.ledger

    def entry_id(self) -> EntryId:
        assert self.entry is not None, self
        return self.entry

    def master_key(self) -> bytes:
        assert self.key is not None, self
        return self.key

    def payload(self) -> bytes:
        assert self.data is not None, self
        return self.data


# Request's optional fields are FIELD_KINDS, in order (its post-init check relies on it).
assert tuple(f.name for f in attrs.fields(Request))[2:] == tuple(FIELD_KINDS)


@attrs.frozen
class Rejection:
    """A request that cannot be carried out as written. ``id`` is None when the request's id
    could not be read, or when it is already in flight (spec/adapter.md, "Request ids")."""

    id: int | None
    code: str
    message: str

    def __attrs_post_init__(self) -> None:
        assert self.code in ERROR_CODES, self.code
        assert self.message, self

    def response(self) -> Response:
        return error_response(self.id, self.code, self.message)


class _FieldError(Exception):
    """A field is missing, mistyped or out of range; the message says which and why."""


def _decode_json(line: str | bytes) -> object:
    """The JSON value of the line. Raises _FieldError saying what is wrong with it."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = f"{exc.reason} at byte {exc.start}"
            raise _FieldError(f"the request is not UTF-8 ({reason})") from None
    try:
        return STRICT_DECODER.decode(line)
    except RecursionError:
        raise _FieldError("the request is nested too deeply to be a request") from None
    except ValueError as exc:
        raise _FieldError(f"the request is not JSON: {exc}") from None


def _id_value(name: str, value: object, low: int) -> int:
    if isinstance(value, HugeNumber):
        raise _FieldError(f"{name!r} must be from {low} to {INT64_MAX}, got {describe(value)}")
    if not isinstance(value, int) or isinstance(value, bool):
        raise _FieldError(f"{name!r} must be an integer, got {describe(value)}")
    if not low <= value <= INT64_MAX:
        raise _FieldError(f"{name!r} must be from {low} to {INT64_MAX}, got {value}")
    return value


def _hex_value(name: str, value: object, bounds: RequestBounds) -> bytes:
    if not isinstance(value, str) or not _HEX.fullmatch(value) or len(value) % 2:
        raise _FieldError(f"{name!r} must be {Kind.HEX.value}, got {describe(value)}")
    if len(value) // 2 > bounds.key_max_bytes:
        raise _FieldError(
            f"{name!r} is {len(value) // 2} bytes, more than the {bounds.key_max_bytes} allowed"
        )
    return bytes.fromhex(value)


def _base64_value(name: str, value: object, bounds: RequestBounds) -> bytes:
    if not isinstance(value, str):
        raise _FieldError(f"{name!r} must be {Kind.BASE64.value}, got {describe(value)}")
    if len(value) > base64_size_bytes(bounds.data_max_bytes):
        raise _FieldError(
            f"{name!r} holds more than the {bounds.data_max_bytes} bytes an entry may carry "
            "(nettyMaxFrameSizeBytes - 500, less 16 bytes of ids); split the entry or raise "
            "nettyMaxFrameSizeBytes"
        )
    try:
        decoded = _b64decode_strict(value.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise _FieldError(f"{name!r} must be {Kind.BASE64.value}: {exc}") from None
    _require_canonical_tail(name, value, decoded)
    assert len(decoded) <= bounds.data_max_bytes + 2, len(decoded)
    if len(decoded) > bounds.data_max_bytes:
        raise _FieldError(
            f"{name!r} is {len(decoded)} bytes, more than the {bounds.data_max_bytes} allowed"
        )
    return decoded


def _b64decode_strict(text: bytes) -> bytes:
    """Standard base64, strictly (RFC 4648 section 4, with padding: no whitespace, no other
    alphabet, padding only at the end, whole groups of four), with the decoder of
    ``base64.b64decode(text, validate=True)`` (it calls the same), without its Python
    wrapper: one decoder for both paths. The unused bits of a padded group are checked
    apart (_require_canonical_tail). Issue 12: that decoder takes a lone ``=`` after a whole
    group (``AAAA=`` is three zero bytes, as is ``AAAA``), so a byte string had two texts;
    the length is now checked first."""
    if len(text) % 4:
        raise binascii.Error(
            f"it is {len(text)} characters, not a multiple of 4 (base64 is written in groups "
            "of four, the last padded with '=')"
        )
    return binascii.a2b_base64(text, strict_mode=True)


def _require_canonical_tail(name: str, text: str, decoded: bytes) -> None:
    """Strict base64 (RFC 4648, section 3.5): the bits a padded last group does not use must
    be zero, so each byte string has one text (``aGVsbG8=``, not ``aGVsbG9=``). Python's
    decoder ignores them. Only the last group can carry such bits, so only it is encoded
    again (O(1), on the hot path)."""
    padding = 2 if text.endswith("==") else 1 if text.endswith("=") else 0
    if not padding:
        return
    tail = decoded[len(decoded) - (3 - padding) :]
    canonical = base64.b64encode(tail).decode("ascii")
    if canonical != text[-4:]:
        raise _FieldError(
            f"{name!r} must be {Kind.BASE64.value}: its last group {text[-4:]!r} has unused "
            f"bits set; the canonical text of those bytes ends {canonical!r}"
        )


def _bool_value(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _FieldError(f"{name!r} must be {Kind.BOOL.value}, got {describe(value)}")
    return value


def _field(name: str, value: object, bounds: RequestBounds) -> int | bytes | bool:
    kind = FIELD_KINDS[name]
    if kind is Kind.ID:
        return _id_value(name, value, 0)
    if kind is Kind.HEX:
        return _hex_value(name, value, bounds)
    if kind is Kind.BASE64:
        return _base64_value(name, value, bounds)
    return _bool_value(name, value)


def _request_id(document: dict[str, object]) -> int:
    if "id" not in document:
        raise _FieldError('the request has no "id"; every request needs an integer "id"')
    return _id_value("id", document["id"], INT64_MIN)


def _op(document: dict[str, object]) -> Op:
    if "op" not in document:
        raise _FieldError('the request has no "op"')
    value = document["op"]
    op = _OPS_BY_NAME.get(value) if isinstance(value, str) else None
    if op is not None:
        return op
    if not isinstance(value, str):
        raise _FieldError(f'"op" must be a string, one of {_OP_NAMES}; got {describe(value)}')
    raise _FieldError(f"unknown op {describe(value)}; the ops are {_OP_NAMES}")


def _fields(
    op: Op, document: dict[str, object], bounds: RequestBounds
) -> dict[str, int | bytes | bool]:
    wanted = OP_FIELDS[op]
    unknown = sorted(set(document) - {"id", "op", *wanted})
    if unknown:
        takes = ", ".join(repr(name) for name in wanted) or "no fields"
        raise _FieldError(f"{op.value!r} does not take {unknown[0]!r}; it takes {takes}")
    missing = [name for name in wanted if name not in document]
    if missing:
        raise _FieldError(f"{op.value!r} needs {missing[0]!r} ({FIELD_KINDS[missing[0]].value})")
    return {name: _field(name, document[name], bounds) for name in wanted}


def parse_request(line: str | bytes, bounds: RequestBounds) -> Request | Rejection:
    """The request on one line (without its newline), or why it is rejected. Pure.

    The id is echoed in the rejection whenever it could be read (spec/adapter.md, "Errors").
    """
    if len(line) > bounds.line_max_bytes:
        return overlong_line_rejection(bounds, line[:LINE_OVERHEAD_MAX_BYTES])
    try:
        document = _decode_json(line)
        if not isinstance(document, dict):
            raise _FieldError(f"a request is a JSON object, got {describe(document)}")
        request_id = _request_id(document)
    except _FieldError as exc:
        return Rejection(None, "bad_request", str(exc))
    try:
        op = _op(document)
        fields = _fields(op, document, bounds)
    except _FieldError as exc:
        return Rejection(request_id, "bad_request", str(exc))
    return _request(request_id, op, fields)


#: What :func:`parse_add_fast` gives for an add: id, ledger, entry, key, data.
FastAdd: TypeAlias = tuple[int, LedgerId, EntryId, bytes, bytes]

_FAST_WS = rb"[ \t\n\r]*"
_FAST_UINT = rb"(0|[1-9][0-9]{0,18})"


def _fast_member(name: bytes, value: bytes, last: bool = False) -> bytes:
    after = b"" if last else _FAST_WS + b","
    return _FAST_WS + b'"' + name + b'"' + _FAST_WS + b":" + _FAST_WS + value + after


#: An add written as clients write it, up to the opening quote of its data: the fields in
#: OP_FIELDS order after ``id`` and ``op``, integers of at most 19 digits, the key plain hex,
#: no escapes anywhere, JSON whitespace between tokens. Anything else is left to the slow path.
_FAST_ADD_HEAD = re.compile(
    _FAST_WS
    + rb"\{"
    + _fast_member(b"id", rb"(-?(?:0|[1-9][0-9]{0,18}))")
    + _fast_member(b"op", b'"add"')
    + _fast_member(b"ledger", _FAST_UINT)
    + _fast_member(b"entry", _FAST_UINT)
    + _fast_member(b"key", rb'"([0-9a-fA-F]*)"')
    + _fast_member(b"data", b'"', last=True)
)
_FAST_WS_BYTES = b" \t\n\r"


def parse_add_fast(line: bytes, bounds: RequestBounds) -> FastAdd | None:
    """The fields of an add on ``line`` when it is written the common way and is valid, else
    None: then :func:`parse_request` decides (it accepts the same add in any other form and
    says why a bad line is bad). Never a different answer: every line this accepts,
    parse_request accepts as the same add (tests/unit/impl/server/test_fast_path.py draws
    valid and malformed lines and compares). Why: the strict JSON decoder, the field checks
    and the Request object cost the adapter more than the bookie's add itself (issue 12,
    docs/benchmarks.md "Adapter speed"); this is a handful of C calls.

    Why it agrees with the slow path: the head regex admits only ASCII, no escapes, no
    duplicate or unknown key (the keys are literal and in a fixed order), integers only
    (no fraction, exponent or leading zero) and no negative ledger or entry; the data is
    everything up to the next quote, which must be followed by ``}`` and JSON whitespace
    alone, and is decoded by the very call the slow path makes (:func:`_b64decode_strict`),
    which refuses a backslash, a quote's escape or any byte outside base64; the bounds
    are the slow path's, checked the same way.
    """
    line_max, key_hex_max, text_max, data_max = bounds.fast_limits
    if len(line) > line_max:
        return None
    head = _FAST_ADD_HEAD.match(line)
    if head is None:
        return None
    start = head.end()
    end = line.find(b'"', start)
    if end < 0 or line[end + 1 :].strip(_FAST_WS_BYTES) != b"}":
        return None
    id_text, ledger_text, entry_text, key_text = head.groups()
    request_id, ledger, entry = int(id_text), int(ledger_text), int(entry_text)
    if not (INT64_MIN <= request_id <= INT64_MAX and ledger <= INT64_MAX and entry <= INT64_MAX):
        return None
    if len(key_text) % 2 or len(key_text) > key_hex_max:
        return None
    text = line[start:end]
    if len(text) > text_max:
        return None
    try:
        data = _b64decode_strict(text)
    except binascii.Error:
        return None
    if len(data) > data_max or not _canonical_tail(text, data):
        return None
    return request_id, LedgerId(ledger), EntryId(entry), binascii.unhexlify(key_text), data


_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
#: By byte: 1 when it is a base64 digit whose two low bits are zero (the last digit before
#: one ``=`` carries 2 unused bits), resp. whose four low bits are (before ``==``: 4 bits).
_ZERO_LOW_2 = bytes(int(c in _B64_ALPHABET and _B64_ALPHABET.index(c) & 3 == 0) for c in range(256))
_ZERO_LOW_4 = bytes(
    int(c in _B64_ALPHABET and _B64_ALPHABET.index(c) & 15 == 0) for c in range(256)
)


def _canonical_tail(text: bytes, decoded: bytes) -> bool:
    """:func:`_require_canonical_tail`'s test on a text that decoded strictly: the unused
    bits of the padded last group are zero. Read off the last digit before the padding (the
    re-encoding the slow path compares differs from the text exactly when they are not)."""
    if text[-2:] == b"==":
        return _ZERO_LOW_4[text[-3]] == 1
    if text[-1:] == b"=":
        return _ZERO_LOW_2[text[-2]] == 1
    return True


def _request(request_id: int, op: Op, fields: Mapping[str, int | bytes | bool]) -> Request:
    """The Request of parsed fields (each already of its FIELD_KINDS type)."""
    ledger, entry = fields.get("ledger"), fields.get("entry")
    key, data, force = fields.get("key"), fields.get("data"), fields.get("force")
    assert ledger is None or (isinstance(ledger, int) and not isinstance(ledger, bool))
    assert entry is None or (isinstance(entry, int) and not isinstance(entry, bool))
    assert key is None or isinstance(key, bytes)
    assert data is None or isinstance(data, bytes)
    assert force is None or isinstance(force, bool)
    return Request(
        id=request_id,
        op=op,
        ledger=None if ledger is None else LedgerId(ledger),
        entry=None if entry is None else EntryId(entry),
        key=key,
        data=data,
        force=force,
    )


def _line_too_long(bounds: RequestBounds) -> str:
    return (
        f"the request line is longer than {bounds.line_max_bytes} bytes; the data of an add "
        f"is at most {bounds.data_max_bytes} bytes"
    )


#: A line that begins with its top-level "id": the id can be read from the line's start
#: alone (an int64 is at most 20 characters), though the rest is not read.
_WS = rb"[ \t\r\n]*"
_LEADING_ID = re.compile(
    _WS
    + rb"\{"
    + _WS
    + rb'"id"'
    + _WS
    + rb":"
    + _WS
    + rb"(-?(?:0|[1-9][0-9]{0,19}))"
    + _WS
    + rb"[,}]"
)


def leading_id(start: str | bytes) -> int | None:
    """The request id a line starts with (``{"id": 7, ...``), or None when the line does not
    start so or the id is out of range. For a line too long to be parsed whole: its id is
    echoed all the same (spec/adapter.md, "Malformed requests")."""
    if isinstance(start, str):
        start = start.encode("utf-8", "replace")
    found = _LEADING_ID.match(start)
    if found is None:
        return None
    value = int(found.group(1))
    return value if INT64_MIN <= value <= INT64_MAX else None


def overlong_line_rejection(bounds: RequestBounds, start: str | bytes = b"") -> Rejection:
    """What a reader answers for a line it stopped reading at ``bounds.line_max_bytes``:
    ``start`` is the line's beginning, whose leading id (if any) the answer carries."""
    return Rejection(leading_id(start), "bad_request", _line_too_long(bounds))


#: JSON's whitespace (RFC 8259, section 2): nothing else makes a line blank.
JSON_WHITESPACE = " \t\r\n"
_JSON_WHITESPACE_BYTES = JSON_WHITESPACE.encode("ascii")


def is_blank(line: str | bytes) -> bool:
    """A line of only JSON whitespace (space, tab, CR, LF), which the protocol ignores.
    Issue 10: ``str.strip`` also took vertical tab and form feed (and, for text, other
    Unicode spaces) for whitespace, so such lines were ignored instead of answered."""
    if isinstance(line, bytes):
        return not line.strip(_JSON_WHITESPACE_BYTES)
    return not line.strip(JSON_WHITESPACE)


# --- responses -----------------------------------------------------------------------------


def ok_response(request_id: int | None, **fields: JsonValue) -> Response:
    """``{"id": ..., "ok": true, ...fields}``."""
    assert "id" not in fields and "ok" not in fields, fields
    return {"id": request_id, "ok": True, **fields}


def error_response(request_id: int | None, code: str, message: str) -> Response:
    """``{"id": ..., "ok": false, "error": code, "message": message}``."""
    assert code in ERROR_CODES, code
    return {"id": request_id, "ok": False, "error": code, "message": message}


def _ops_claimed(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    assert set(ops) <= set(OPTIONAL_OPS), ops
    return tuple(op for op in OPTIONAL_OPS if op in ops)


@attrs.frozen
class Claims:
    """What a version 2 ready line says the bookie supports (spec/adapter.md,
    "Capabilities"): a conformance run holds the bookie to exactly this. ``ops``: the optional
    ops it serves (OPTIONAL_OPS order; the dispatcher answers the others ``unsupported``);
    ``state``: what ``inspect`` gives; ``answers``: its answer profile (spec/profile.py);
    ``journal_dirs``/``ledger_dirs``: absolute directories holding BookKeeper-format files,
    or None when that is not claimed (the ``format`` field is then null)."""

    bookie: str
    ops: tuple[Op, ...] = attrs.field(default=OPTIONAL_OPS, converter=_ops_claimed)
    state: str = attrs.field(default="full", validator=attrs.validators.in_(STATE_PROFILES))
    answers: str = attrs.field(default="bkref", validator=attrs.validators.in_(ANSWER_PROFILES))
    journal_dirs: tuple[str, ...] | None = None
    ledger_dirs: tuple[str, ...] | None = None

    def __attrs_post_init__(self) -> None:
        assert self.bookie, "a version 2 ready line names its bookie"
        assert (self.state == "none") == (Op.INSPECT not in self.ops), (self.state, self.ops)
        assert (self.journal_dirs is None) == (self.ledger_dirs is None), self
        for path in (*(self.journal_dirs or ()), *(self.ledger_dirs or ())):
            assert path.startswith("/"), f"format directories are absolute: {path!r}"

    def format_field(self) -> JsonValue:
        """The ready line's ``format``: the directories, or null when not claimed."""
        if self.journal_dirs is None or self.ledger_dirs is None:
            return None
        return {"journal_dirs": list(self.journal_dirs), "ledger_dirs": list(self.ledger_dirs)}


#: bkref's claims where the caller names none: every optional op, the full state, bkref's
#: answers, no format directories (proofs/cli/adapter.py adds its version and directories).
BKREF_CLAIMS = Claims(bookie="bkref")


def ready_event(bounds: RequestBounds, claims: Claims = BKREF_CLAIMS) -> Response:
    """The line the adapter writes once recovery is done (spec/adapter.md, "Start" and
    "Capabilities"): version 1's fields, then version 2's claims."""
    return ok_response(
        None,
        event="ready",
        version=PROTOCOL_VERSION,
        max_data_bytes=bounds.data_max_bytes,
        max_key_bytes=bounds.key_max_bytes,
        max_line_bytes=bounds.line_max_bytes,
        bookie=claims.bookie,
        ops=[op.value for op in claims.ops],
        state=claims.state,
        answers=claims.answers,
        format=claims.format_field(),
    )


def encode_response(response: Mapping[str, JsonValue]) -> str:
    """One line of ASCII JSON, without the newline. Rejects NaN and infinities."""
    assert "id" in response and isinstance(response.get("ok"), bool), response
    line = json.dumps(response, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    assert "\n" not in line and "\r" not in line, line
    return line


def error_code(error: BkrefError) -> str:
    """The protocol's code for an error the bookie raised or delivered."""
    if isinstance(error, BookieError):
        assert error.code in ERROR_CODES, error.code
        return error.code
    if isinstance(error, NoWritableLedgerDir | FsNoSpace):
        return "no_space"
    return "io_error"


def error_message(error: BkrefError) -> str:
    """The error's own text, or the first line of its class's docstring when it has none."""
    text = str(error)
    if text:
        return text
    doc = (type(error).__doc__ or type(error).__name__).strip()
    return doc.splitlines()[0]


def to_json_safe(value: object) -> JsonValue:
    """``value`` as JSON: attrs classes become objects, enums their value, bytes hex, sets
    sorted lists, tuples lists, mapping keys strings (spec/adapter.md, "inspect")."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        assert value == value and abs(value) != float("inf"), value
        return value
    if isinstance(value, enum.Enum):
        return to_json_safe(value.value)
    if isinstance(value, bytes):
        return value.hex()
    cls = type(value)
    if attrs.has(cls):
        return {f.name: to_json_safe(getattr(value, f.name)) for f in attrs.fields(cls)}
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda item: _sort_key(item[0]))
        return {str(to_json_safe(key)): to_json_safe(item) for key, item in items}
    if isinstance(value, set | frozenset):
        return [to_json_safe(item) for item in sorted(value, key=_sort_key)]
    if isinstance(value, Iterable):
        return [to_json_safe(item) for item in value]
    raise TypeError(f"cannot show {type(value).__name__} in JSON: {value!r}")


def _sort_key(value: object) -> tuple[int, int, str]:
    """Numbers in numeric order first, then everything else by its repr."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, repr(value))
