"""``bkref adapter``: serve a bookie over the JSON-lines protocol of spec/adapter.md (v1).

Why: the conformance kit drives bookies through this protocol, and operators use it to poke a
bookie by hand. This module is the process only: configuration, the real file system, clock
and random source, recovery (progress on stderr), the driver's threads, the ready line, and a
loop that reads request lines from stdin and hands them to impl.server.adapter.Dispatcher, which
answers each one (at once, or from the journal thread once an add or fence is durable).

Standard output carries protocol lines only: before the bookie opens, the process keeps a
private copy of file descriptor 1 for responses and points descriptor 1 (and ``sys.stdout``)
at stderr, so a stray print or a native library's output cannot break the framing. Every
response is written under a lock and flushed on its own line.

End of input = clean shutdown (the same as the ``shutdown`` op, without its response);
``shutdown`` answers, shuts down, exits 0. Exit status: 0 after a clean shutdown, 1 when the
bookie cannot start or its shutdown failed, 2 for a configuration that cannot be used, 70 on
an internal error (a bug: the traceback goes to stderr and the process ends at once, without
a clean shutdown, as a crash would). Startup errors are one line on stderr, no traceback.

Not verified here: behaviour when stderr itself is closed (logs are then lost), and signals
(SIGINT/SIGTERM end the process like a crash; recovery handles it at the next start).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import traceback
from collections.abc import Callable
from typing import BinaryIO

from impl.server.adapter import (
    BookieLike,
    Dispatcher,
    Limits,
    Outcome,
    Response,
    encode_response,
    overlong_line_rejection,
    ready_event,
)
from proofs.cli.config import add_config_arguments, config_from_args
from spec.errors import BkrefError, ConfigError, RecoveryError

#: A clean shutdown after ``shutdown`` or at the end of input.
EXIT_OK = 0
#: The bookie cannot start, or its clean shutdown failed.
EXIT_FAILED = 1
#: The configuration cannot be used.
EXIT_BAD_CONFIG = 2
#: An internal error (EX_SOFTWARE of sysexits.h): a bug in bkref.
EXIT_INTERNAL = 70
#: Largest random seed drawn when --seed is not given.
SEED_MAX = 2**32 - 1

PREFIX = "bkref adapter: "


def configure(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the random choice of ledger directory (default: random, printed)",
    )
    parser.description = (
        "Serve a bookie on stdin/stdout: one JSON request per line in, one JSON response per "
        "line out (spec/adapter.md, version 1). Logs go to stderr."
    )
    parser.epilog = (
        "Exit status: 0 after a clean shutdown (the shutdown op, or end of input), 1 when the "
        "bookie cannot start or shut down, 2 for a configuration that cannot be used, 70 on an "
        "internal error."
    )


def say(line: str) -> None:
    """One log line on stderr."""
    print(PREFIX + line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        say(f"configuration error: {exc}")
        return EXIT_BAD_CONFIG
    for warning in config.warnings:
        say(f"warning: {warning}")
    seed: int | None = args.seed
    if seed is None:
        seed = random.SystemRandom().randint(0, SEED_MAX)
        say(f"random seed {seed} (repeat with --seed {seed})")
    out = _take_stdout()

    # Imported here so that `bkref --help` and configuration errors stay fast and so that
    # this module's protocol loop can be tested with a fake bookie.
    from impl.bookie.bookie import Bookie
    from impl.bookie.driver import BookieDriver
    from impl.clock import SystemClock
    from impl.fs.os_backend import OsFileSystem

    clock = SystemClock()
    try:
        bookie = Bookie.open(
            OsFileSystem(),
            config,
            clock=clock,
            rng=random.Random(seed),
            progress=lambda line: say(f"recovery: {line}"),
        )
    except ConfigError as exc:
        say(f"configuration error: {exc}")
        return EXIT_BAD_CONFIG
    except RecoveryError as exc:
        say(f"cannot recover the bookie: {exc}")
        return EXIT_FAILED
    except BkrefError as exc:
        say(f"cannot start the bookie: {exc}")
        return EXIT_FAILED
    driver = BookieDriver(bookie, clock, config)

    def shutdown() -> None:
        try:
            driver.stop()
        finally:
            bookie.shutdown()

    code = serve(
        bookie,
        start=driver.start,
        shutdown=shutdown,
        limits=Limits.from_max_sane_entry_size(config.max_sane_entry_size_bytes),
        stdin=sys.stdin.buffer,
        out=out,
        log=say,
    )
    if code == EXIT_INTERNAL:
        sys.stderr.flush()
        os._exit(code)  # like a crash: no clean shutdown, no waiting for threads
    return code


def _take_stdout() -> BinaryIO:
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
    limits: Limits,
    stdin: BinaryIO,
    out: BinaryIO,
    log: Callable[[str], None],
) -> int:
    """Start the background work, write the ready line, serve until ``shutdown`` or the end
    of input. Returns the exit status."""
    writer = LineWriter(out, log)
    dispatcher = Dispatcher(bookie, writer.write, limits=limits, shutdown=shutdown, log=log)
    try:
        start()
        writer.write(ready_event(limits))
        outcome = _serve_lines(dispatcher, stdin, limits)
    except Exception:
        log("internal error (a bug in bkref, please report it):\n" + traceback.format_exc())
        return EXIT_INTERNAL
    dispatcher.check_invariants()
    writer.check_invariants()
    return EXIT_OK if outcome is Outcome.STOP else EXIT_FAILED


def _serve_lines(dispatcher: Dispatcher, stdin: BinaryIO, limits: Limits) -> Outcome:
    # Room for the longest line plus "\r\n": a piece this long without "\n" is too long.
    piece_max = limits.line_max_bytes + 2
    while True:
        line = stdin.readline(piece_max)
        if not line:
            return dispatcher.close()
        if len(line) == piece_max and not line.endswith(b"\n"):
            _skip_rest_of_line(stdin, piece_max)
            dispatcher.reject(overlong_line_rejection(limits))
            continue
        outcome = dispatcher.handle_line(line.rstrip(b"\n").rstrip(b"\r"))
        if outcome is not Outcome.CONTINUE:
            return outcome


def _skip_rest_of_line(stdin: BinaryIO, piece_max: int) -> None:
    while True:
        piece = stdin.readline(piece_max)
        if not piece or piece.endswith(b"\n"):
            return
