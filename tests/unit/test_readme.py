"""README.md, "Using it": every example runs as written from the top of a clone.

Two checks. Every repository file an example names (an argument or a ``< FILE`` redirection
that is a relative path) exists, so no example points at a file the repository does not
ship. And the quick examples (``--help``, ``config``, ``check-trace``, ``explain``,
``inspect``) are run verbatim through bash from the repository root, each expected to exit
0. The program is the clone's ``.venv/bin/bkref`` when it exists (CI installs it); otherwise
a stand-in script that runs ``python -m proofs.cli.main`` with this interpreter, put in the
example's place; the rest of the line is unchanged. The slow or long-running ones
(crash-check, the adapter and record, which write under /tmp) only have their files checked.
"""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

PROGRAM = ".venv/bin/bkref"
#: The subcommands whose examples are run (fast, and they write nothing).
QUICK = ("--help", "config", "check-trace", "explain", "inspect")


def _examples() -> list[str]:
    """The command lines of the "Using it" section's first sh block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Using it\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    assert lines and all(line.startswith(PROGRAM + " ") for line in lines), lines
    return lines


#: Endings of file names an example may name without a directory ("bk_server.conf").
FILE_ENDINGS = (".conf", ".jsonl", ".json", ".log", ".txn")


def _named_files(line: str) -> list[str]:
    """The repository paths a command line names: relative paths among its words (options,
    KEY=VALUE settings, absolute paths, the program itself and the file ``--trace`` writes
    are not files it ships)."""
    words = shlex.split(line.split("  #", 1)[0])
    named = []
    for before, word in itertools.pairwise(words):
        looks_like_a_file = "/" in word or word.endswith(FILE_ENDINGS)
        if not looks_like_a_file or before == "--trace" or "=" in word:
            continue
        if not word.startswith(("/", "-", ".venv/")):
            named.append(word)
    return named


def test_a_bare_file_name_counts_as_named() -> None:
    """The README once named bk_server.conf and trace.jsonl, which no clone has."""
    line = f"{PROGRAM} config --conf bk_server.conf --set logSizeLimit=1  # trace.jsonl"
    assert _named_files(line) == ["bk_server.conf"]
    assert _named_files(f"{PROGRAM} check-trace trace.jsonl --json") == ["trace.jsonl"]
    assert _named_files(f"{PROGRAM} record --trace run.jsonl -- x < docs/a.jsonl") == [
        "docs/a.jsonl"
    ]


def test_the_examples_are_found() -> None:
    lines = _examples()
    assert len(lines) >= 8
    assert any(" config --conf docs/examples/bk_server.conf" in line for line in lines)


@pytest.mark.parametrize("line", _examples())
def test_every_file_an_example_names_is_in_the_repository(line: str) -> None:
    for name in _named_files(line):
        assert (ROOT / name).exists(), f"README example names {name}, which is not shipped"


def _program(tmp_path: Path) -> str:
    real = ROOT / PROGRAM
    if real.exists():
        return PROGRAM
    stand_in = tmp_path / "bkref"
    stand_in.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m proofs.cli.main "$@"\n',
        encoding="utf-8",
    )
    stand_in.chmod(0o755)
    return shlex.quote(str(stand_in))


@pytest.mark.parametrize(
    "line", [line for line in _examples() if line.split()[1] in QUICK], ids=lambda s: s[:60]
)
def test_the_quick_examples_run_verbatim(line: str, tmp_path: Path) -> None:
    command = _program(tmp_path) + line.removeprefix(PROGRAM)
    result = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, (line, result.stderr.decode(errors="replace"))
    assert result.stdout.strip(), line
    assert b"Traceback" not in result.stderr, result.stderr


# --- the import example (issue 26: it named /path/to/bookkeeper/bk_server.conf) ----------------

#: A BookKeeper bookie for the README's `bkref import` example, written by the pages'
#: independent writers (tests/unit/bk_layout.py, bk_journal_layout.py, bk_index_layout.py).
BOOKKEEPER_EXAMPLE = ROOT / "docs" / "examples" / "bookkeeper"


def write_bookkeeper_example(root: Path) -> None:
    """The example's directories under ``root`` (journal, ledgers0, ledgers1)."""
    from impl.fs.os_backend import OsFileSystem
    from tests.unit.impl.bookie.test_bookie_bk_metadata import add_idx_files
    from tests.unit.impl.bookie.test_bookie_interop import build_bk_directory

    add_idx_files(OsFileSystem(), build_bk_directory(OsFileSystem(), str(root)))


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name not in ("bk_server.conf", "README.md")
    }


def test_the_bookkeeper_example_is_what_the_independent_writers_write(tmp_path: Path) -> None:
    write_bookkeeper_example(tmp_path)
    assert _tree(BOOKKEEPER_EXAMPLE) == _tree(tmp_path)


def test_the_import_example_runs_verbatim(tmp_path: Path) -> None:
    (line,) = [line for line in _examples() if line.split()[1] == "import"]
    assert "/path/to" not in line
    command = _program(tmp_path) + line.removeprefix(PROGRAM)
    # The same bash runs the line and removes its target ($$ is that bash's process id).
    command = f"{command.split('  #', 1)[0]}; status=$?; rm -rf /tmp/bkref-import-$$; "
    command += "exit $status"
    before = _tree(BOOKKEEPER_EXAMPLE)
    result = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, (line, result.stderr.decode(errors="replace"))
    assert b"Traceback" not in result.stderr, result.stderr
    assert _tree(BOOKKEEPER_EXAMPLE) == before, "the import changed its source"
