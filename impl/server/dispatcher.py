"""The dispatcher of the ``bkref adapter`` protocol: each request to the bookie, one response.

Spec page: spec/adapter.md ("Requests", "Request ids", "Flow control", "Shutdown and end of
input"). The :class:`Dispatcher` hands a valid request (impl/server/protocol.py) to the
bookie and emits its response, at once for the synchronous operations and from the Ack's
callback (on the journal thread) for ``add`` and ``fence``, so that an add is answered only
once it is durable. The stdio loop around it is impl/server/stdio.py.

Why a separate layer: the tests drive every op, every completion order, duplicate ids and
shutdown through it with a fake bookie and no process.

Threads: :meth:`Dispatcher.handle_line` is called by one reader thread; Ack callbacks may run
on any thread. The Dispatcher serialises every call of ``emit`` with its own lock, so ``emit``
need not be thread-safe, and it keeps the set of requests in flight under a condition.

Not verified here: that the bookie's Ack completes only after the fsync that covers the
record (the bookie's contract, checked by its own tests and by the kill -9 test), and that
the client reads its responses while it writes (see "Flow control" on the spec page).
"""

from __future__ import annotations

import base64
import enum
import threading
from collections.abc import Callable
from typing import Protocol

from impl.limits import LIMITS, Limits
from impl.server.protocol import (
    GC_ANSWER_FIELDS,
    OPTIONAL_OPS,
    PROTOCOL_VERSION,
    JsonValue,
    Op,
    Rejection,
    Request,
    RequestBounds,
    Response,
    error_code,
    error_message,
    error_response,
    is_blank,
    ok_response,
    parse_add_fast,
    parse_request,
    to_json_safe,
)
from spec.errors import BkrefError, BookieError
from spec.ids import INT64_MAX, INT64_MIN, EntryId, LedgerId

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

    def write_close(self, ledger_id: LedgerId, master_key: bytes, /) -> None: ...

    def checkpoint(self) -> object: ...

    def gc(self, force: bool, /) -> object:
        """A whole GC cycle; the answer has the GC_ANSWER_FIELDS attributes."""
        ...

    def inspect(self) -> object: ...

    def ledgers_maps(self) -> object: ...


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

    ``bounds``: what a request may hold (impl/server/protocol.py). ``limits``
    (impl/limits.py): the reader waits while ``in_flight_max`` requests are unanswered, and
    :meth:`close` waits ``drain_timeout_ms`` for the answers in flight. ``ops``: the
    optional ops (OPTIONAL_OPS) it serves, those the ready line claims; the others are
    answered ``unsupported`` with nothing done (spec/adapter.md, "Capabilities").
    ``fast_path``: try protocol.parse_add_fast before parse_request (off only in the test
    that compares the two, tests/unit/impl/server/test_fast_path.py).
    """

    def __init__(
        self,
        bookie: BookieLike,
        emit: Callable[[Response], None],
        *,
        bounds: RequestBounds,
        shutdown: Callable[[], None],
        log: Callable[[str], None] = _ignore,
        limits: Limits = LIMITS,
        ops: tuple[Op, ...] = OPTIONAL_OPS,
        fast_path: bool = True,
    ) -> None:
        assert set(ops) <= set(OPTIONAL_OPS), ops
        self._bookie = bookie
        self._fast_path = fast_path
        self._emit = emit
        self._bounds = bounds
        self._shutdown = shutdown
        self._log = log
        self._in_flight_max = limits.in_flight_max
        self._drain_timeout_s = limits.drain_timeout_ms / 1000
        #: Guards everything below and serialises ``emit``.
        self._lock = threading.Condition()
        self._in_flight: dict[int, Op] = {}
        self._stopped = False
        self._callback_error: Exception | None = None
        #: Threads waiting on the condition (the reader for room, a stop for the drain):
        #: an answer notifies only when there is one.
        self._waiting = 0
        self._registered = 0
        self._answered = 0
        self._rejected = 0
        self._sent = 0
        self._handlers: dict[Op, Callable[[Request], Outcome]] = {
            Op.ADD: self._add,
            Op.READ: self._read,
            Op.FENCE: self._fence,
            Op.WRITE_CLOSE: self._write_close,
            Op.DELETE: self._delete,
            Op.CHECKPOINT: self._checkpoint,
            Op.GC: self._gc,
            Op.INSPECT: self._inspect,
            Op.SHUTDOWN: self._shutdown_op,
        }
        assert set(self._handlers) == set(Op)
        for op in set(OPTIONAL_OPS) - set(ops):
            self._handlers[op] = self._unsupported

    # --- public surface

    @property
    def bounds(self) -> RequestBounds:
        return self._bounds

    def in_flight(self) -> frozenset[int]:
        """The ids of the requests not answered yet."""
        with self._lock:
            return frozenset(self._in_flight)

    def handle_line(self, line: str | bytes) -> Outcome:
        """Parse one request line (without its newline) and handle it. An add written the
        common way takes the fast path (protocol.parse_add_fast, which accepts only what
        parse_request accepts, as the same add), straight to the bookie."""
        if self._callback_error is not None:
            self._raise_callback_error()
        if self._fast_path and isinstance(line, bytes):
            fast = parse_add_fast(line, self._bounds)
            if fast is not None:
                request_id, ledger, entry, key, data = fast
                if not self._register(request_id, Op.ADD):
                    self._reject_in_flight(request_id, Op.ADD)
                    return Outcome.CONTINUE
                return self._add_entry(request_id, ledger, entry, key, data)
        if is_blank(line):
            return Outcome.CONTINUE
        parsed = parse_request(line, self._bounds)
        if isinstance(parsed, Rejection):
            self.reject(parsed)
            return Outcome.CONTINUE
        return self.handle(parsed)

    def reject(self, rejection: Rejection) -> None:
        """Emit the response of a request that was not carried out. A rejection whose id is
        in flight is answered with id null (spec/adapter.md, "Request ids"): the request in
        flight must still get exactly one response of its own."""
        with self._lock:
            assert not self._stopped, "reject after the dispatcher stopped"
            if rejection.id is not None and rejection.id in self._in_flight:
                rejection = Rejection(
                    None,
                    rejection.code,
                    f"{rejection.message} (request id {rejection.id} is in flight, so this "
                    "answer carries id null)",
                )
            self._rejected += 1
            self._send(rejection.response())

    def handle(self, request: Request) -> Outcome:
        """Carry out one valid request. Its response is emitted now, or for ``add`` and
        ``fence`` when its Ack completes."""
        if not self._register(request.id, request.op):
            self._reject_in_flight(request.id, request.op)
            return Outcome.CONTINUE
        return self._handlers[request.op](request)

    def _reject_in_flight(self, request_id: int, op: Op) -> None:
        self.reject(
            Rejection(
                None,
                "bad_request",
                f"request id {request_id} is already in flight (op "
                f"{op.value!r} was not carried out); use an id not in flight",
            )
        )

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
        return self._add_entry(
            request.id,
            request.ledger_id(),
            request.entry_id(),
            request.master_key(),
            request.payload(),
        )

    def _add_entry(
        self, request_id: int, ledger: LedgerId, entry: EntryId, key: bytes, data: bytes
    ) -> Outcome:
        try:
            ack = self._bookie.add_entry(ledger, entry, key, data)
        except BkrefError as exc:
            self._finish(request_id, _error(request_id, exc))
            return Outcome.CONTINUE
        self._answer_when_done(request_id, ack)
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

    def _write_close(self, request: Request) -> Outcome:
        def write_close() -> Response:
            ledger = request.ledger_id()
            self._bookie.write_close(ledger, request.master_key())
            return ok_response(request.id, ledger=ledger)

        return self._sync(request, write_close)

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

    def _gc(self, request: Request) -> Outcome:
        force = request.force
        assert force is not None, request

        def gc() -> Response:
            stats = self._bookie.gc(force)
            fields = {name: to_json_safe(getattr(stats, name)) for name in GC_ANSWER_FIELDS}
            return ok_response(request.id, **fields)

        return self._sync(request, gc)

    def _inspect(self, request: Request) -> Outcome:
        return self._sync(request, lambda: ok_response(request.id, state=self._state()))

    def _state(self) -> JsonValue:
        state = to_json_safe(self._bookie.inspect())
        assert isinstance(state, dict), state
        state["ledgers_maps"] = to_json_safe(self._bookie.ledgers_maps())
        return state

    def _unsupported(self, request: Request) -> Outcome:
        message = (
            f"{request.op.value!r} is not supported by this bookie (protocol version "
            f"{PROTOCOL_VERSION}; its ready line lists the optional ops it serves); nothing "
            "was done"
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
                if error is None:  # the common answer, without ok_response's checks
                    self._finish(request_id, {"id": request_id, "ok": True})
                else:
                    self._finish(request_id, _error(request_id, error))
            except Exception as exc:
                self._log(f"internal error answering request {request_id}: {exc!r}")
                with self._lock:
                    self._callback_error = self._callback_error or exc

        ack.add_done_callback(done)

    def _register(self, request_id: int, op: Op) -> bool:
        with self._lock:
            assert not self._stopped, "a request after the dispatcher stopped"
            if request_id in self._in_flight:
                return False
            while len(self._in_flight) >= self._in_flight_max:
                self._waiting += 1
                try:
                    self._lock.wait()
                finally:
                    self._waiting -= 1
            self._in_flight[request_id] = op
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
            if self._waiting:  # Condition.notify_all costs more than the rest of this
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
            self._waiting += 1
            try:
                self._lock.wait_for(
                    lambda: set(self._in_flight) <= {keep}, timeout=self._drain_timeout_s
                )
            finally:
                self._waiting -= 1
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
