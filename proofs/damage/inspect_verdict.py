"""What ``bkref inspect`` says of a damaged disk, for the damage check's second verdict.

Recovery and ``bkref inspect`` judge damage by the same functions (docs/inspect.md), and
tests/unit/impl/bookie/test_damage.py holds them to the same verdict on every row of the
format pages' tables. The damage check holds them to it on every generated damage too: the
simulated disk is written to real directories (inspect reads a real file system, as an
operator runs it), and inspect reads the journal directory with every ledger directory's
lastMark, and each ledger directory with the others. A problem anywhere is inspect's
"refuses"; none (warnings allowed) its "accepts".
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from impl.fs.api import join
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk
from proofs.cli.inspect import inspect_dir


def materialize(disk: SimDisk, root: Path) -> None:
    """The simulated disk's current tree, files and directories, under ``root``."""
    pending = ["/"]
    while pending:
        directory = pending.pop()
        (root / directory.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for name in disk.listdir(directory):
            path = join(directory, name)
            if disk.is_dir(path):
                pending.append(path)
            else:
                (root / path.lstrip("/")).write_bytes(disk.read_file(path))


def inspect_problems(disk: SimDisk, journal_dir: str, ledger_dirs: Sequence[str]) -> list[str]:
    """The problems ``bkref inspect`` reports for the bookie on ``disk`` (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="bkref-damage-") as temporary:
        root = Path(temporary)
        materialize(disk, root)
        ledgers = [str(root / d.lstrip("/")) for d in ledger_dirs]
        fs = OsFileSystem()
        problems = list(inspect_dir(fs, str(root / journal_dir.lstrip("/")), ledgers).problems)
        for ledger in ledgers:
            others = [other for other in ledgers if other != ledger]
            problems += inspect_dir(fs, ledger, others).problems
        return [problem.replace(temporary, "") for problem in problems]
