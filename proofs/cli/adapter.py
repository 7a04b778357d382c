"""``bkref adapter``: serve a bookie over the JSON-lines protocol of spec/adapter.md (v2).

Why: any bookie that speaks this protocol can be recorded (``bkref record``) and judged by the
model (``bkref check-trace``), and operators use it to poke a bookie by hand. This module is
the command only: its arguments, the configuration, the real file system, clock and random
source, opening the bookie (recovery progress on stderr), the driver's threads, and the exit
status. The server itself is impl/server/: stdio.py (the
serving loop on stdin and stdout, which takes stdout before the bookie opens so that it
carries protocol lines only), dispatcher.py (each request to the bookie) and protocol.py
(what a line means).

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
import importlib.metadata
import os
import random
import sys
from collections.abc import Mapping

from impl.config.config import ServerConfig
from impl.limits import LIMITS
from impl.server.protocol import Claims, RequestBounds
from impl.server.stdio import Ending, serve, take_stdout
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
#: The exit status of each way serving can end (spec/adapter.md, "Start").
EXIT_BY_ENDING: Mapping[Ending, int] = {
    Ending.CLEAN: EXIT_OK,
    Ending.SHUTDOWN_FAILED: EXIT_FAILED,
    Ending.INTERNAL_ERROR: EXIT_INTERNAL,
    Ending.OUTPUT_FAILED: EXIT_FAILED,
}
#: The buffer of standard input. Python's default (8 KiB) made a read system call every five
#: or so adds of 1 KiB, each giving up the GIL to the journal thread and waiting to get it
#: back; a pipe holds 64 KiB, so this reads whatever the client has written in one call.
STDIN_BUFFER_BYTES = 1 << 20
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
    parser.add_argument(
        "--write-bookkeeper-dirs",
        action="store_true",
        help=(
            "open directories that hold a BookKeeper bookie's files (and no bkref identity "
            "stamp) for writing: bkref adds its own files beside BookKeeper's. Without it such "
            "a directory is refused (spec/format/identity.md)"
        ),
    )
    parser.description = (
        "Serve a bookie on stdin/stdout: one JSON request per line in, one JSON response per "
        "line out (spec/adapter.md, version 2). Logs go to stderr."
    )
    parser.epilog = (
        "Exit status: 0 after a clean shutdown (the shutdown op, or end of input), 1 when the "
        "bookie cannot start or shut down, 2 for a configuration that cannot be used, 70 on an "
        "internal error."
    )


def bookie_name() -> str:
    """The ready line's ``bookie``: ``bkref`` and the installed package's version, or
    ``dev`` when it runs from a tree that is not installed."""
    try:
        version = importlib.metadata.version("bkref")
    except importlib.metadata.PackageNotFoundError:
        version = "dev"
    return f"bkref {version}"


def claims(config: ServerConfig) -> Claims:
    """What bkref's ready line claims (spec/adapter.md, "Capabilities"): every optional op,
    the full state, bkref's answers, and its journal and ledger directories as absolute
    paths, whose files are in BookKeeper's format (the format level)."""
    return Claims(
        bookie=bookie_name(),
        journal_dirs=tuple(os.path.abspath(d) for d in config.journal_directories),
        ledger_dirs=tuple(os.path.abspath(d) for d in config.ledger_directories),
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
    out = take_stdout()

    # Imported here so that `bkref --help` and configuration errors stay fast.
    from impl.bookie.bookie import Bookie
    from impl.bookie.driver import BookieDriver
    from impl.clock import SystemClock
    from impl.fs.os_backend import OsFileSystem

    clock = SystemClock()
    limits = LIMITS  # one object for the bookie, its driver and the server (impl/limits.py)
    # What the bookie says goes to stderr: "recovery: ..." while it opens, "bookie: ..."
    # while it serves (a failed background step, issue 26: once said nowhere).
    phase = ["recovery"]
    try:
        bookie = Bookie.open(
            OsFileSystem(),
            config,
            clock=clock,
            rng=random.Random(seed),
            progress=lambda line: say(f"{phase[0]}: {line}"),
            limits=limits,
            write_bookkeeper_dirs=args.write_bookkeeper_dirs,
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
    phase[0] = "bookie"
    driver = BookieDriver(bookie, clock, config, limits=limits, log=say)

    def shutdown() -> None:
        try:
            driver.stop()
        finally:
            bookie.shutdown()

    with open(sys.stdin.fileno(), "rb", buffering=STDIN_BUFFER_BYTES, closefd=False) as stdin:
        ending = serve(
            bookie,
            start=driver.start,
            shutdown=shutdown,
            bounds=RequestBounds.from_max_sane_entry_size(config.max_sane_entry_size_bytes, limits),
            stdin=stdin,
            out=out,
            log=say,
            limits=limits,
            claims=claims(config),
        )
    code = EXIT_BY_ENDING[ending]
    if ending is Ending.INTERNAL_ERROR:
        sys.stderr.flush()
        os._exit(code)  # like a crash: no clean shutdown, no waiting for threads
    return code
