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

from spec.errors import BkrefError

#: (name, module, one-line help). Modules are imported only when their command runs, so a
#: slow import (pyspark, later) never slows ``bkref --help``.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("inspect", "proofs.inspect_cmd", "report on an entry log file or a ledger directory"),
    ("config", "proofs.config_cmd", "show the effective configuration, validated"),
    (
        "crash-check",
        "proofs.crashcheck",
        "write entry logs on the simulated disk, crash at every operation, check recovery",
    ),
)


class _Command(Protocol):
    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _load(module: str) -> _Command:
    loaded: _Command = importlib.import_module(module)  # type: ignore[assignment]
    return loaded


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every subcommand configured."""
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
        _load(module).configure(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bkref`` console script. Returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return _load(args._module).run(args)
    except BkrefError as exc:
        print(f"bkref {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"bkref {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
