"""The ``bkref adapter`` protocol, version 1: JSON lines in, JSON lines out.

Spec page: spec/adapter.md. This module is the protocol without the process: parsing and
validating one request line (:func:`parse_request`), encoding one response
(:func:`encode_response`), and the :class:`Dispatcher`, which hands a valid request to the
bookie and emits its response, at once for the synchronous operations and from the Ack's
callback (on the journal thread) for ``add`` and ``fence``, so that an add is answered only
once it is durable. The process around it (stdin, stdout, the driver threads, exit codes) is
proofs/cli/adapter.py.

Why a separate pure layer: the conformance kit and the tests drive every malformed input,
every error code and every completion order through it without a process, and the process
stays a thin loop.

Threads: :meth:`Dispatcher.handle_line` is called by one reader thread; Ack callbacks may run
on any thread. The Dispatcher serialises every call of ``emit`` with its own lock, so ``emit``
need not be thread-safe, and it keeps the set of requests in flight under a condition.

Not verified here: that the bookie's Ack completes only after the fsync that covers the
record (the bookie's contract, checked by its own tests and by the kill -9 test), and that
the client reads its responses while it writes (see "Flow control" on the spec page).
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, TypeAlias

import attrs

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
from spec.strict_json import STRICT_DECODER, describe

#: The protocol version this module speaks (spec/adapter.md, "Versioning").
PROTOCOL_VERSION = 1
#: Longest master key, in bytes (spec/adapter.md, "Limits").
KEY_MAX_BYTES = 1024
#: Bytes the bookie puts before the data in the stored entry: int64 ledger id, int64 entry id
#: (spec/format/entry_log.md, ``payload``).
ENTRY_HEADER_BYTES = 16
#: Room on a request line for everything but the data: the other fields, the hex key, JSON.
LINE_OVERHEAD_MAX_BYTES = 4 * KEY_MAX_BYTES + 4096
#: Default bound on requests in flight; the reader waits when it is reached.
IN_FLIGHT_MAX = 10_000
#: Default wait for in-flight responses after the bookie has shut down.
DRAIN_TIMEOUT_S = 10.0

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

_HEX = re.compile(r"[0-9a-fA-F]*")
_OPS_BY_NAME: Mapping[str, Op] = {op.value: op for op in Op}
_OP_NAMES = ", ".join(_OPS_BY_NAME)
#: The fields each op takes, as sets.
_OP_FIELD_SETS: Mapping[Op, frozenset[str]] = {op: frozenset(f) for op, f in OP_FIELDS.items()}


# --- limits --------------------------------------------------------------------------------


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
class Limits:
    """Every bound the protocol puts on a request (spec/adapter.md, "Limits")."""

    data_max_bytes: int = attrs.field(validator=attrs.validators.ge(0))
    key_max_bytes: int = attrs.field(default=KEY_MAX_BYTES, validator=attrs.validators.ge(0))

    @property
    def line_max_bytes(self) -> int:
        """Longest request line, newline excluded: the base64 data plus a fixed overhead."""
        return base64_size_bytes(self.data_max_bytes) + LINE_OVERHEAD_MAX_BYTES

    @classmethod
    def from_max_sane_entry_size(cls, max_sane_entry_size_bytes: int) -> Limits:
        """The limits for a bookie configured with this maxSaneEntrySize."""
        return cls(data_max_bytes=max_data_size_bytes(max_sane_entry_size_bytes))


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
    if not isinstance(value, int) or isinstance(value, bool):
        raise _FieldError(f"{name!r} must be an integer, got {describe(value)}")
    if not low <= value <= INT64_MAX:
        raise _FieldError(f"{name!r} must be from {low} to {INT64_MAX}, got {value}")
    return value


def _hex_value(name: str, value: object, limits: Limits) -> bytes:
    if not isinstance(value, str) or not _HEX.fullmatch(value) or len(value) % 2:
        raise _FieldError(f"{name!r} must be {Kind.HEX.value}, got {describe(value)}")
    if len(value) // 2 > limits.key_max_bytes:
        raise _FieldError(
            f"{name!r} is {len(value) // 2} bytes, more than the {limits.key_max_bytes} allowed"
        )
    return bytes.fromhex(value)


def _base64_value(name: str, value: object, limits: Limits) -> bytes:
    if not isinstance(value, str):
        raise _FieldError(f"{name!r} must be {Kind.BASE64.value}, got {describe(value)}")
    if len(value) > base64_size_bytes(limits.data_max_bytes):
        raise _FieldError(
            f"{name!r} holds more than the {limits.data_max_bytes} bytes an entry may carry "
            "(nettyMaxFrameSizeBytes - 500, less 16 bytes of ids); split the entry or raise "
            "nettyMaxFrameSizeBytes"
        )
    try:
        decoded = base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise _FieldError(f"{name!r} must be {Kind.BASE64.value}: {exc}") from None
    assert len(decoded) <= limits.data_max_bytes + 2, len(decoded)
    if len(decoded) > limits.data_max_bytes:
        raise _FieldError(
            f"{name!r} is {len(decoded)} bytes, more than the {limits.data_max_bytes} allowed"
        )
    return decoded


def _bool_value(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _FieldError(f"{name!r} must be {Kind.BOOL.value}, got {describe(value)}")
    return value


def _field(name: str, value: object, limits: Limits) -> int | bytes | bool:
    kind = FIELD_KINDS[name]
    if kind is Kind.ID:
        return _id_value(name, value, 0)
    if kind is Kind.HEX:
        return _hex_value(name, value, limits)
    if kind is Kind.BASE64:
        return _base64_value(name, value, limits)
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


def _fields(op: Op, document: dict[str, object], limits: Limits) -> dict[str, int | bytes | bool]:
    wanted = OP_FIELDS[op]
    unknown = sorted(set(document) - {"id", "op", *wanted})
    if unknown:
        takes = ", ".join(repr(name) for name in wanted) or "no fields"
        raise _FieldError(f"{op.value!r} does not take {unknown[0]!r}; it takes {takes}")
    missing = [name for name in wanted if name not in document]
    if missing:
        raise _FieldError(f"{op.value!r} needs {missing[0]!r} ({FIELD_KINDS[missing[0]].value})")
    return {name: _field(name, document[name], limits) for name in wanted}


def parse_request(line: str | bytes, limits: Limits) -> Request | Rejection:
    """The request on one line (without its newline), or why it is rejected. Pure.

    The id is echoed in the rejection whenever it could be read (spec/adapter.md, "Errors").
    """
    if len(line) > limits.line_max_bytes:
        return Rejection(None, "bad_request", _line_too_long(limits))
    try:
        document = _decode_json(line)
        if not isinstance(document, dict):
            raise _FieldError(f"a request is a JSON object, got {describe(document)}")
        request_id = _request_id(document)
    except _FieldError as exc:
        return Rejection(None, "bad_request", str(exc))
    try:
        op = _op(document)
        fields = _fields(op, document, limits)
    except _FieldError as exc:
        return Rejection(request_id, "bad_request", str(exc))
    return _request(request_id, op, fields)


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


def _line_too_long(limits: Limits) -> str:
    return (
        f"the request line is longer than {limits.line_max_bytes} bytes; the data of an add "
        f"is at most {limits.data_max_bytes} bytes"
    )


def overlong_line_rejection(limits: Limits) -> Rejection:
    """What a reader answers for a line it stopped reading at ``limits.line_max_bytes``."""
    return Rejection(None, "bad_request", _line_too_long(limits))


def is_blank(line: str | bytes) -> bool:
    """A line of only whitespace, which the protocol ignores."""
    return not line.strip()


# --- responses -----------------------------------------------------------------------------


def ok_response(request_id: int | None, **fields: JsonValue) -> Response:
    """``{"id": ..., "ok": true, ...fields}``."""
    assert "id" not in fields and "ok" not in fields, fields
    return {"id": request_id, "ok": True, **fields}


def error_response(request_id: int | None, code: str, message: str) -> Response:
    """``{"id": ..., "ok": false, "error": code, "message": message}``."""
    assert code in ERROR_CODES, code
    return {"id": request_id, "ok": False, "error": code, "message": message}


def ready_event(limits: Limits) -> Response:
    """The line the adapter writes once recovery is done (spec/adapter.md, "Start")."""
    return ok_response(
        None,
        event="ready",
        version=PROTOCOL_VERSION,
        max_data_bytes=limits.data_max_bytes,
        max_key_bytes=limits.key_max_bytes,
        max_line_bytes=limits.line_max_bytes,
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


# --- the bookie, as the dispatcher sees it -------------------------------------------------


class AckLike(Protocol):
    """What the dispatcher needs of impl.bookie.bookie.Ack."""

    @property
    def error(self) -> BookieError | None: ...

    def add_done_callback(self, fn: Callable[..., None], /) -> None: ...


class BookieLike(Protocol):
    """What the dispatcher needs of impl.bookie.bookie.Bookie (positional arguments only)."""

    def add_entry(
        self, ledger_id: LedgerId, entry_id: EntryId, master_key: bytes, data: bytes, /
    ) -> AckLike: ...

    def fence(self, ledger_id: LedgerId, master_key: bytes, /) -> AckLike: ...

    def read_entry(self, ledger_id: LedgerId, entry_id: EntryId, /) -> bytes: ...

    def delete_ledger(self, ledger_id: LedgerId, /) -> None: ...

    def checkpoint(self) -> object: ...

    def inspect(self) -> object: ...


class Outcome(enum.Enum):
    """What the reader does after a request: keep reading, or stop with this exit status."""

    CONTINUE = "continue"
    STOP = "stop"
    STOP_FAILED = "stop_failed"


def _ignore(_: str) -> None:
    pass


class Dispatcher:
    """Hands each request to the bookie and emits exactly one response per request.

    Spec page: spec/adapter.md ("Requests", "Request ids", "Shutdown"). ``emit`` receives
    each response as a dict, one call at a time (calls are serialised here, under the same
    lock that keeps the set of requests in flight, so a response and the removal of its id
    from that set are one step: a client that reuses an id after reading its response is
    never told the id is in flight). ``shutdown`` stops the bookie cleanly (the process
    passes "stop the driver, then Bookie.shutdown"); it is called by the ``shutdown`` op
    and by :meth:`close` at the end of input.

    An exception in an Ack callback (a bug, since ``emit`` must not raise) is logged and
    raised again on the reader thread at the next :meth:`handle_line`, so the journal thread
    that ran the callback carries on and the adapter still stops.
    """

    def __init__(
        self,
        bookie: BookieLike,
        emit: Callable[[Response], None],
        *,
        limits: Limits,
        shutdown: Callable[[], None],
        log: Callable[[str], None] = _ignore,
        in_flight_max: int = IN_FLIGHT_MAX,
        drain_timeout_s: float = DRAIN_TIMEOUT_S,
    ) -> None:
        assert in_flight_max >= 1, in_flight_max
        assert drain_timeout_s >= 0, drain_timeout_s
        self._bookie = bookie
        self._emit = emit
        self._limits = limits
        self._shutdown = shutdown
        self._log = log
        self._in_flight_max = in_flight_max
        self._drain_timeout_s = drain_timeout_s
        #: Guards everything below and serialises ``emit``.
        self._lock = threading.Condition()
        self._in_flight: dict[int, Op] = {}
        self._stopped = False
        self._callback_error: Exception | None = None
        self._registered = 0
        self._answered = 0
        self._rejected = 0
        self._sent = 0
        self._handlers: Mapping[Op, Callable[[Request], Outcome]] = {
            Op.ADD: self._add,
            Op.READ: self._read,
            Op.FENCE: self._fence,
            Op.WRITE_CLOSE: self._unsupported,
            Op.DELETE: self._delete,
            Op.CHECKPOINT: self._checkpoint,
            Op.GC: self._unsupported,
            Op.INSPECT: self._inspect,
            Op.SHUTDOWN: self._shutdown_op,
        }
        assert set(self._handlers) == set(Op)

    # --- public surface

    @property
    def limits(self) -> Limits:
        return self._limits

    def in_flight(self) -> frozenset[int]:
        """The ids of the requests not answered yet."""
        with self._lock:
            return frozenset(self._in_flight)

    def handle_line(self, line: str | bytes) -> Outcome:
        """Parse one request line (without its newline) and handle it."""
        self._raise_callback_error()
        if is_blank(line):
            return Outcome.CONTINUE
        parsed = parse_request(line, self._limits)
        if isinstance(parsed, Rejection):
            self.reject(parsed)
            return Outcome.CONTINUE
        return self.handle(parsed)

    def reject(self, rejection: Rejection) -> None:
        """Emit the response of a request that was not carried out."""
        with self._lock:
            assert not self._stopped, "reject after the dispatcher stopped"
            self._rejected += 1
            self._send(rejection.response())

    def handle(self, request: Request) -> Outcome:
        """Carry out one valid request. Its response is emitted now, or for ``add`` and
        ``fence`` when its Ack completes."""
        assert not self._stopped, "handle after the dispatcher stopped"
        if not self._register(request):
            self.reject(
                Rejection(
                    None,
                    "bad_request",
                    f"request id {request.id} is already in flight (op "
                    f"{request.op.value!r} was not carried out); use an id not in flight",
                )
            )
            return Outcome.CONTINUE
        return self._handlers[request.op](request)

    def close(self) -> Outcome:
        """The end of input: shut the bookie down cleanly, answer what is in flight, emit
        nothing more. STOP_FAILED when the bookie's shutdown failed (logged)."""
        failure = self._stop(keep=None)
        if failure is None:
            return Outcome.STOP
        self._log(f"clean shutdown failed: {error_message(failure)}")
        return Outcome.STOP_FAILED

    def check_invariants(self) -> None:
        with self._lock:
            assert len(self._in_flight) <= self._in_flight_max, len(self._in_flight)
            assert all(INT64_MIN <= key <= INT64_MAX for key in self._in_flight)
            assert self._registered == self._answered + len(self._in_flight)
            assert self._sent == self._answered + self._rejected
            assert not (self._stopped and self._in_flight), self._in_flight

    # --- operations

    def _add(self, request: Request) -> Outcome:
        try:
            ack = self._bookie.add_entry(
                request.ledger_id(), request.entry_id(), request.master_key(), request.payload()
            )
        except BkrefError as exc:
            self._finish(request.id, _error(request.id, exc))
            return Outcome.CONTINUE
        self._answer_when_done(request.id, ack)
        return Outcome.CONTINUE

    def _fence(self, request: Request) -> Outcome:
        try:
            ack = self._bookie.fence(request.ledger_id(), request.master_key())
        except BkrefError as exc:
            self._finish(request.id, _error(request.id, exc))
            return Outcome.CONTINUE
        self._answer_when_done(request.id, ack)
        return Outcome.CONTINUE

    def _read(self, request: Request) -> Outcome:
        def read() -> Response:
            data = self._bookie.read_entry(request.ledger_id(), request.entry_id())
            assert isinstance(data, bytes), type(data)
            return ok_response(request.id, data=base64.b64encode(data).decode("ascii"))

        return self._sync(request, read)

    def _delete(self, request: Request) -> Outcome:
        def delete() -> Response:
            self._bookie.delete_ledger(request.ledger_id())
            return ok_response(request.id)

        return self._sync(request, delete)

    def _checkpoint(self, request: Request) -> Outcome:
        def checkpoint() -> Response:
            self._bookie.checkpoint()
            return ok_response(request.id)

        return self._sync(request, checkpoint)

    def _inspect(self, request: Request) -> Outcome:
        return self._sync(request, lambda: ok_response(request.id, state=self._state()))

    def _state(self) -> JsonValue:
        state = to_json_safe(self._bookie.inspect())
        assert isinstance(state, dict), state
        return state

    def _unsupported(self, request: Request) -> Outcome:
        message = (
            f"{request.op.value!r} is not supported by this bookie yet (protocol version "
            f"{PROTOCOL_VERSION}); nothing was done"
        )
        self._finish(request.id, error_response(request.id, "unsupported", message))
        return Outcome.CONTINUE

    def _shutdown_op(self, request: Request) -> Outcome:
        failure = self._stop(keep=request.id)
        if failure is None:
            self._finish(request.id, ok_response(request.id))
        else:
            self._finish(request.id, _error(request.id, failure))
        with self._lock:
            assert not self._in_flight, self._in_flight
            self._stopped = True
        return Outcome.STOP if failure is None else Outcome.STOP_FAILED

    # --- steps

    def _sync(self, request: Request, run: Callable[[], Response]) -> Outcome:
        try:
            response = run()
        except BkrefError as exc:
            response = _error(request.id, exc)
        self._finish(request.id, response)
        return Outcome.CONTINUE

    def _answer_when_done(self, request_id: int, ack: AckLike) -> None:
        def done(*_: object) -> None:
            try:
                error = ack.error
                response = ok_response(request_id) if error is None else _error(request_id, error)
                self._finish(request_id, response)
            except Exception as exc:
                self._log(f"internal error answering request {request_id}: {exc!r}")
                with self._lock:
                    self._callback_error = self._callback_error or exc

        ack.add_done_callback(done)

    def _register(self, request: Request) -> bool:
        with self._lock:
            if request.id in self._in_flight:
                return False
            self._lock.wait_for(lambda: len(self._in_flight) < self._in_flight_max)
            self._in_flight[request.id] = request.op
            self._registered += 1
            return True

    def _finish(self, request_id: int, response: Response) -> None:
        """Emit the response of a request in flight, unless it was answered already."""
        assert response["id"] == request_id, (response, request_id)
        with self._lock:
            if self._in_flight.pop(request_id, None) is None:
                return
            self._answered += 1
            self._send(response)
            self._lock.notify_all()

    def _send(self, response: Response) -> None:
        self._sent += 1
        self._emit(response)

    def _stop(self, keep: int | None) -> BkrefError | None:
        """Shut the bookie down and wait for every request in flight but ``keep``; answer
        those still waiting after the timeout with io_error."""
        failure: BkrefError | None = None
        try:
            self._shutdown()
        except BkrefError as exc:
            failure = exc
        with self._lock:
            self._lock.wait_for(
                lambda: set(self._in_flight) <= {keep}, timeout=self._drain_timeout_s
            )
            left = sorted(set(self._in_flight) - {keep})
        for request_id in left:
            message = (
                "the bookie shut down before this request completed; it may or may not be "
                "durable: read it back after a restart"
            )
            self._finish(request_id, error_response(request_id, "io_error", message))
        if keep is None:
            with self._lock:
                self._stopped = True
        return failure

    def _raise_callback_error(self) -> None:
        with self._lock:
            error = self._callback_error
        if error is not None:
            raise error


def _error(request_id: int, error: BkrefError) -> Response:
    return error_response(request_id, error_code(error), error_message(error))
