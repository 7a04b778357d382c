"""A fake bookie and a recording dispatcher, for the tests of impl/server/ and of the
``bkref adapter`` command (spec/adapter.md).

The bookie is a small fake (FakeBookie) whose Acks the tests complete by hand, in any order
and from any thread; the real Bookie is exercised through the process in
tests/unit/proofs/cli/test_adapter.py and test_adapter_kill9.py.
"""

from __future__ import annotations

import base64
import enum
import json
import threading
from collections.abc import Callable

import attrs

from impl.limits import Limits
from impl.server.dispatcher import Dispatcher, Outcome
from impl.server.protocol import OPTIONAL_OPS, Op, RequestBounds, Response
from spec.errors import BkrefError, BookieError, Fenced, NoEntry, NoLedger, Unauthorized
from spec.ids import EntryId, LedgerId

#: Small request bounds so the size checks are cheap to reach.
BOUNDS = RequestBounds(data_max_bytes=64, key_max_bytes=8)
#: The dispatcher's engine limits in these tests: 100 requests in flight, 5 s to drain.
HARNESS_LIMITS = Limits(in_flight_max=100, drain_timeout_ms=5000)
KEY = bytes.fromhex("c0ffee")


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


@attrs.frozen
class FakeGcStats:
    """The fields of impl.bookie.gc.GcStats."""

    compaction: str
    logs_deleted: int
    logs_compacted: int
    entries_moved: int
    bytes_reclaimed: int
    candidates: tuple[int, ...]


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
        self.gc_forces: list[bool] = []
        self.shut_down = False
        self.calls: list[str] = []
        self.write_closed: set[int] = set()

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

    def write_close(self, ledger_id: LedgerId, master_key: bytes, /) -> None:
        self._enter("write_close")
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            raise NoLedger(f"ledger {ledger_id} does not exist")
        if ledger.key != master_key:
            raise Unauthorized(f"wrong key for ledger {ledger_id}")
        self.write_closed.add(ledger_id)

    def delete_ledger(self, ledger_id: LedgerId, /) -> None:
        self._enter("delete_ledger")
        self.deleted.add(ledger_id)
        self.ledgers.pop(ledger_id, None)

    def checkpoint(self) -> None:
        self._enter("checkpoint")
        self.checkpoints += 1

    def gc(self, force: bool, /) -> FakeGcStats:
        self._enter("gc")
        self.gc_forces.append(force)
        deleted = len(self.deleted)  # one log per deleted ledger, one compaction each
        kind = "major" if force else "none"
        return FakeGcStats(kind, deleted, deleted, 17 * deleted, 4096 * deleted, (9,))

    def ledgers_maps(self) -> tuple[tuple[int, bool], ...]:
        self._enter("ledgers_maps")
        return ((1, False), (2, True))

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
        bounds: RequestBounds = BOUNDS,
        emit: Callable[[Response], None] | None = None,
        limits: Limits = HARNESS_LIMITS,
        ops: tuple[Op, ...] = OPTIONAL_OPS,
        fast_path: bool = True,
    ) -> None:
        self.bookie = bookie or FakeBookie()
        self.responses: list[Response] = []
        self.logs: list[str] = []
        self.dispatcher = Dispatcher(
            self.bookie,
            emit or self.responses.append,
            bounds=bounds,
            shutdown=self.bookie.shutdown,
            log=self.logs.append,
            limits=limits,
            ops=ops,
            fast_path=fast_path,
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


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
