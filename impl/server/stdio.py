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
flushed line each, under a lock, since the journal thread and the reader both answer.

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


def take_stdout() -> BinaryIO:
    """A private writer on the original stdout; fd 1 and sys.stdout now go to stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb")


class LineWriter:
    """Writes responses, one flushed line each, under a lock. A closed stdout (the client
    went away) is logged once; later responses are dropped, and the reader will see the end
    of input and shut down."""

    def __init__(self, out: BinaryIO, log: Callable[[str], None]) -> None:
        self._out = out
        self._log = log
        self._lock = threading.Lock()
        self._broken = False
        self.lines_written = 0

    def write(self, response: Response) -> None:
        data = encode_response(response).encode("ascii") + b"\n"
        with self._lock:
            if self._broken:
                return
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError) as exc:
                self._broken = True
                self._log(f"cannot write responses ({exc}); dropping them from now on")
                return
            self.lines_written += 1

    def check_invariants(self) -> None:
        with self._lock:
            assert self.lines_written >= 0, self.lines_written
            assert isinstance(self._broken, bool)


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
    writer = LineWriter(out, log)
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
