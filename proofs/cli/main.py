"""The ``bkref`` command line.

Each subcommand lives in its own module with two functions, ``configure(parser)`` to add its
arguments and ``run(args) -> int`` to carry it out, so the command line stays a thin table.
Errors a user can cause are caught here and printed as one line, never as a traceback.

Standard output is handled here once for every command (GuardedStdout): when its reader goes
away (``bkref config | head``), the rest of the output goes to /dev/null, as the Python
documentation recommends for SIGPIPE, and the command finishes with its own exit status (the
verdict does not depend on who reads it); when it cannot be written (``> /dev/full``), the
command stops with one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import sys
from collections.abc import Sequence
from typing import Any, Protocol, TextIO

from spec.errors import BkrefError, ConfigError

#: (name, module, one-line help). Modules are imported only when their command runs, so a
#: slow import (pyspark, later) never slows ``bkref --help``.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("inspect", "proofs.cli.inspect", "describe every file of a bookie directory, or one file"),
    ("config", "proofs.cli.config", "show the effective configuration, validated"),
    (
        "dirs",
        "proofs.cli.dirs",
        "accept a changed set of journal and ledger directories (rewrites identity stamps)",
    ),
    ("adapter", "proofs.cli.adapter", "serve a bookie over the JSON-lines protocol (stdio)"),
    (
        "crash-check",
        "proofs.cli.crash_check",
        "crash the entry logger and the bookie at every file-system operation, check recovery",
    ),
    (
        "damage-check",
        "proofs.cli.damage_check",
        "damage crash states every way the format pages name; a start must refuse or lose nothing",
    ),
    ("check-trace", "proofs.cli.check_trace", "replay a recorded trace against the model"),
    ("explain", "proofs.cli.explain", "tell a trace step by step: what became durable, and why"),
    (
        "record",
        "proofs.cli.record",
        "run a bookie's adapter (any implementation), relay its stdio, record a trace",
    ),
    (
        "conform",
        "proofs.cli.conform",
        "check any bookie through seeded scenarios, kill -9 and power loss, judged by the model",
    ),
    (
        "campaign",
        "proofs.cli.campaign",
        "run a verification campaign on Spark: seeded scenarios with crashes, judged by the model",
    ),
    (
        "replay",
        "proofs.cli.replay",
        "re-run one campaign scenario locally (no Spark) and print its trace",
    ),
    (
        "check-traces",
        "proofs.cli.check_traces",
        "judge a directory of recorded traces in parallel on Spark, one verdict row per trace",
    ),
    (
        "import",
        "proofs.cli.bk_import",
        "copy a BookKeeper bookie into new bkref directories (keys, fences) and open it once",
    ),
)


#: Exit status when standard output cannot be written.
EXIT_OUTPUT_FAILED = 1


class StdoutError(Exception):
    """Standard output could not be written (not a closed pipe: a full disk, an I/O error).
    Not an OSError, so that a command's own ``except OSError`` (reading a file) never
    mistakes it for its own."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.strerror or str(cause))


class GuardedStdout:
    """``sys.stdout`` while a command runs: writes and flushes go to the real stdout; a
    closed pipe sends everything after it to /dev/null, any other OSError raises
    StdoutError (after the same redirection, so the flush at exit cannot fail again).
    Every other attribute (``buffer``, ``fileno``, ...) is the real stdout's."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self._silenced = False

    def write(self, text: str) -> int:
        if not self._silenced:
            self._guarded(lambda: self._inner.write(text))
        return len(text)

    def flush(self) -> None:
        if not self._silenced:
            self._guarded(self._inner.flush)

    def _guarded(self, action: Any) -> None:
        try:
            action()
        except BrokenPipeError:
            self._silence()
        except OSError as exc:
            self._silence()
            raise StdoutError(exc) from exc

    def _silence(self) -> None:
        """Point the real stdout at /dev/null: the data still buffered, and everything
        written later, is dropped there (not at the reader, who has gone)."""
        self._silenced = True
        try:
            fd = self._inner.fileno()
        except (OSError, ValueError, io.UnsupportedOperation):
            return  # not a real file (a test's capture): nothing is flushed at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Command(Protocol):
    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _load(module: str) -> _Command:
    loaded: _Command = importlib.import_module(module)
    return loaded


def _selected(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first argument not starting with ``-``)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser. With ``only``, just that subcommand's module is imported and configured
    (the others are listed for --help but not loaded), so one slow or broken module never
    breaks another command; with None every subcommand is configured."""
    parser = argparse.ArgumentParser(
        prog="bkref",
        description=(
            "bkref: a model-checked reference implementation of Apache BookKeeper's bookie "
            "storage layer."
        ),
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module, help_text in COMMANDS:
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if only is None or only == name:
            _load(module).configure(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bkref`` console script. Returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    selected = _selected(arguments)
    name = f"bkref {selected}" if selected else "bkref"
    real_stdout = sys.stdout
    guarded = GuardedStdout(real_stdout)
    sys.stdout = guarded  # a TextIO in all but name
    try:
        try:
            code = _main(arguments)
        except SystemExit:  # argparse (--help, a usage error): flushed here, then raised on
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # inside the guard: a failure at exit would be a traceback
        return code
    except StdoutError as exc:
        print(f"{name}: error: cannot write to standard output: {exc}", file=sys.stderr)
        return EXIT_OUTPUT_FAILED
    finally:
        if sys.stdout is guarded:
            sys.stdout = real_stdout


def _main(arguments: list[str]) -> int:
    command = _selected(arguments)
    known = {name for name, _, _ in COMMANDS}
    parser = build_parser(command if command in known else None)
    args = parser.parse_args(arguments)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return _load(args._module).run(args)
    except ConfigError as exc:
        print(f"bkref {args.command}: configuration error: {exc}", file=sys.stderr)
        return 2
    except BkrefError as exc:
        print(f"bkref {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"bkref {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
