"""The ``bkref`` command line.

Each subcommand lives in its own module with two functions, ``configure(parser)`` to add its
arguments and ``run(args) -> int`` to carry it out, so the command line stays a thin table.
Errors a user can cause are caught here and printed as one line, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Protocol

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
    ("check-trace", "proofs.cli.check_trace", "replay a recorded trace against the model"),
    ("explain", "proofs.cli.explain", "tell a trace step by step: what became durable, and why"),
    (
        "record",
        "proofs.cli.record",
        "run a bookie's adapter (any implementation), relay its stdio, record a trace",
    ),
    (
        "import",
        "proofs.cli.bk_import",
        "copy a BookKeeper bookie into new bkref directories (keys, fences) and open it once",
    ),
)


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
