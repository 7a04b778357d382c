"""The ``bkref adapter`` server on standard input and output: framing, the serving loop, stdout.

Spec page: spec/adapter.md ("Start", "Framing", "Flow control", "Shutdown and end of input").
:func:`serve` starts the bookie's background work, writes the ready line, then reads request
lines and hands each to the Dispatcher (impl/server/dispatcher.py), which answers it at once
or, for an add or fence, from the journal thread once it is durable. It stops at the
``shutdown`` op or at the end of input and says how it ended (:class:`Ending`); the process
around it (configuration, opening the bookie, exit statuses) is proofs/cli/adapter.py.

Framing: a line ends at ``\\n`` (a ``\\r`` before it is dropped), a last line without one is a
line, and a line longer than the protocol's limit is skipped to its end without being held
in memory and answered ``bad_request``. Responses are written by :class:`LineWriter`, one
flushed line each, under a lock, since the journal thread and the reader both answer;
in the adapter a writer thread of its own writes the lines queued together in one write.

Why this module is an OS seam (tests/unit/test_layering.py, IMPL_SEAMS): standard output must
carry protocol lines only, so :func:`take_stdout` keeps a private copy of file descriptor 1
for the responses and points descriptor 1 (and ``sys.stdout``) at stderr, so that a stray
print or a native library's output cannot break the framing. That needs ``os.dup`` and
``os.dup2`` on the process's own descriptors, which no FileSystem seam models. Everything else
here works on the streams it is given, so the tests drive it with byte buffers.

Not verified here: behaviour when stderr itself is closed (logs are then lost).
"""

from __future__ import annotations

import enum
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import BinaryIO

from impl.limits import LIMITS, Limits
from impl.server.dispatcher import BookieLike, Dispatcher, Outcome
from impl.server.protocol import (
    BKREF_CLAIMS,
    LINE_OVERHEAD_MAX_BYTES,
    Claims,
    RequestBounds,
    Response,
    encode_response,
    overlong_line_rejection,
    ready_event,
)


class Ending(enum.Enum):
    """How serving ended (spec/adapter.md, "Start", the exit status table)."""

    #: After the ``shutdown`` op or at the end of input, once the clean shutdown is done.
    CLEAN = "clean"
    #: The bookie's clean shutdown failed (logged, and answered to a ``shutdown`` op).
    SHUTDOWN_FAILED = "shutdown_failed"
    #: An internal error, a bug: the traceback was logged; no clean shutdown was attempted.
    INTERNAL_ERROR = "internal_error"
    #: Served and shut down cleanly, but the responses could not be written to standard
    #: output (a full disk: ``> /dev/full``), so the client never saw them (issue 26).
    OUTPUT_FAILED = "output_failed"


def take_stdout() -> BinaryIO:
    """A private writer on the original stdout; fd 1 and sys.stdout now go to stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb")


#: The answer of an add or fence that succeeded, the most common line: the same bytes
#: encode_response gives for ``{"id": N, "ok": true}``, without building JSON.
_OK_LINE = b'{"id":%d,"ok":true}\n'


def encode_line(response: Response) -> bytes:
    """One response as its line, newline included (protocol.encode_response)."""
    if len(response) == 2 and response.get("ok") is True:
        request_id = response.get("id")
        if type(request_id) is int:
            return _OK_LINE % request_id
    return encode_response(response).encode("ascii") + b"\n"


class LineWriter:
    """Writes responses, whole lines, in the order given. A closed stdout (the client went
    away) is logged once; later responses are dropped, and the reader will see the end of
    input and shut down.

    Without ``background`` each :meth:`write` writes and flushes its line at once (the
    tests' way). With it (the adapter's), :meth:`write` only queues the line and a writer
    thread writes everything queued in one write: the journal thread hands out a group's
    acks without a system call per answer, and so without giving up the GIL 32 times per
    group to the reader thread and waiting to get it back (issue 12, docs/benchmarks.md
    "Adapter speed"). Flow control stays as spec/adapter.md says: at most ``queued_max``
    lines wait, then :meth:`write` blocks until the client reads. :meth:`close` writes what
    is queued and stops the thread; it must be called before the process exits."""

    def __init__(
        self,
        out: BinaryIO,
        log: Callable[[str], None],
        *,
        background: bool = False,
        queued_max: int = LIMITS.in_flight_max,
    ) -> None:
        self._out = out
        self._log = log
        self._lock = threading.Condition(threading.Lock())
        self._broken = False
        #: Why standard output could not be written, when it was not the reader leaving
        #: (a closed pipe is the client's choice; a full disk is a failure).
        self.write_error: OSError | None = None
        self._closed = False
        self._queued: list[bytes] = []
        self._queued_max = queued_max
        #: True while the writer thread waits for lines (it needs a notify).
        self._idle = False
        #: Lines handed to write and not written or dropped yet (guarded by _lock).
        self._unwritten = 0
        self.lines_written = 0
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._run, name="bkref-stdout", daemon=True)
            self._thread.start()

    def write(self, response: Response) -> None:
        data = encode_line(response)
        if self._thread is None:
            with self._lock:
                self._write_now([data])
            return
        with self._lock:
            if self._broken or self._closed:
                return
            while len(self._queued) >= self._queued_max and not self._broken:
                self._lock.wait()
            self._queued.append(data)
            self._unwritten += 1
            if self._idle:
                self._lock.notify_all()

    def close(self) -> None:
        """Write every queued line, then stop the writer thread. Idempotent."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queued and not self._closed:
                    self._idle = True
                    self._lock.wait()
                self._idle = False
                batch, self._queued = self._queued, []
                self._lock.notify_all()  # writers blocked on a full queue
                if not batch:
                    return
            self._write_batch(batch)

    def _write_batch(self, batch: list[bytes]) -> None:
        # Outside the lock: the answers queued meanwhile go in the next write.
        broken = self._broken
        if not broken:
            broken = not self._write_out(b"".join(batch))
        with self._lock:
            self._unwritten -= len(batch)
            if broken:
                self._broken = True
                self._lock.notify_all()
            else:
                self.lines_written += len(batch)

    def _write_now(self, lines: list[bytes]) -> None:
        if self._broken:
            return
        if self._write_out(b"".join(lines)):
            self.lines_written += len(lines)
        else:
            self._broken = True

    def _write_out(self, data: bytes) -> bool:
        try:
            self._out.write(data)
            self._out.flush()
        except (OSError, ValueError) as exc:
            self._log(f"cannot write responses ({exc}); dropping them from now on")
            if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
                self.write_error = exc
            return False
        return True

    def check_invariants(self) -> None:
        with self._lock:
            assert self.lines_written >= 0, self.lines_written
            assert isinstance(self._broken, bool)
            assert self._unwritten >= len(self._queued) >= 0, self._unwritten
            assert self._thread is None or not self._closed or not self._queued


def serve(
    bookie: BookieLike,
    *,
    start: Callable[[], None],
    shutdown: Callable[[], None],
    bounds: RequestBounds,
    stdin: BinaryIO,
    out: BinaryIO,
    log: Callable[[str], None],
    limits: Limits = LIMITS,
    claims: Claims = BKREF_CLAIMS,
) -> Ending:
    """Start the background work, write the ready line, serve until ``shutdown`` or the end
    of input. Returns how serving ended. ``bounds``: what a request may hold; ``limits``
    (impl/limits.py): the dispatcher's requests in flight and drain timeout. ``claims``: what
    the ready line says the bookie supports; the dispatcher serves exactly those ops."""
    writer = LineWriter(out, log, background=True, queued_max=limits.in_flight_max)
    try:
        ending = _serve(writer, bookie, start, shutdown, bounds, stdin, log, limits, claims)
    finally:
        writer.close()  # every answer given is written before serve returns
    if ending is Ending.CLEAN and writer.write_error is not None:
        return Ending.OUTPUT_FAILED
    return ending


def _serve(
    writer: LineWriter,
    bookie: BookieLike,
    start: Callable[[], None],
    shutdown: Callable[[], None],
    bounds: RequestBounds,
    stdin: BinaryIO,
    log: Callable[[str], None],
    limits: Limits,
    claims: Claims,
) -> Ending:
    dispatcher = Dispatcher(
        bookie,
        writer.write,
        bounds=bounds,
        shutdown=shutdown,
        log=log,
        limits=limits,
        ops=claims.ops,
    )
    try:
        start()
        writer.write(ready_event(bounds, claims))
        outcome = _serve_lines(dispatcher, stdin, bounds)
    except Exception:
        log("internal error (a bug in bkref, please report it):\n" + traceback.format_exc())
        return Ending.INTERNAL_ERROR
    dispatcher.check_invariants()
    writer.close()
    writer.check_invariants()
    return Ending.CLEAN if outcome is Outcome.STOP else Ending.SHUTDOWN_FAILED


def _serve_lines(dispatcher: Dispatcher, stdin: BinaryIO, bounds: RequestBounds) -> Outcome:
    # Room for the longest line plus "\r\n": a piece this long without "\n" is too long.
    piece_max = bounds.line_max_bytes + 2
    while True:
        line = stdin.readline(piece_max)
        if not line:
            return dispatcher.close()
        if len(line) == piece_max and not line.endswith(b"\n"):
            _skip_rest_of_line(stdin, piece_max)
            dispatcher.reject(overlong_line_rejection(bounds, line[:LINE_OVERHEAD_MAX_BYTES]))
            continue
        outcome = dispatcher.handle_line(line.rstrip(b"\n").rstrip(b"\r"))
        if outcome is not Outcome.CONTINUE:
            return outcome


def _skip_rest_of_line(stdin: BinaryIO, piece_max: int) -> None:
    while True:
        piece = stdin.readline(piece_max)
        if not piece or piece.endswith(b"\n"):
            return
