"""Every command's ``--help`` describes every option and says its exit codes (issue 26:
``replay --help`` left six options undescribed, ``dirs accept --help`` had no exit codes):
what a user reads before running a command must promise what it does."""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from proofs.cli.main import COMMANDS


def _problems(parser: argparse.ArgumentParser, name: str) -> list[str]:
    out: list[str] = []
    leaf = True
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            leaf = False
            for sub, subparser in action.choices.items():
                out += _problems(subparser, f"{name} {sub}")
            continue
        if not action.help:
            out.append(f"{name}: {'/'.join(action.option_strings) or action.dest} has no help")
    if leaf and not re.search(r"exit (status|codes?)", parser.format_help(), re.IGNORECASE):
        out.append(f"{name}: --help says no exit codes")
    return out


@pytest.mark.parametrize(("name", "module"), [(c[0], c[1]) for c in COMMANDS], ids=str)
def test_help_describes_every_option_and_the_exit_codes(name: str, module: str) -> None:
    parser = argparse.ArgumentParser(prog=f"bkref {name}")
    importlib.import_module(module).configure(parser)
    assert _problems(parser, name) == []
