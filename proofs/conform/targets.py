"""Bookies ``bkref conform`` knows how to start: bkref's own adapter.

Spec pages: spec/adapter.md ("Start"), docs/conformance.md ("bkref itself").

Why a function and not a constant: the command runs the Python that runs the runner
(``sys.executable``), so the bookie under test is the bkref of this checkout, in this
virtual environment. The settings are the refinement checks' small ones (impl/limits.py
TEST_SETTINGS: 1400-byte entry logs so a few adds rotate them, no group-commit wait), so a
short scenario reaches rotations, flushes and compactions. Preallocation is off: a bookie
that creates its next entry log ahead of need on its own thread makes the ids of compaction
logs and of new logs ambiguous (which took the next id depends on whether the preallocation
ran first), and the model cannot yet judge that layout from states alone (docs/model.md,
"Profiles"); the in-process refinement check drives preallocation as a step of its own.
"""

from __future__ import annotations

import shlex
import sys

from impl.limits import TEST_SETTINGS


def bkref_adapter_command(*, python: str | None = None) -> str:
    """The CMD of bkref's adapter on ``{data_dir}`` (journal and ledgers beneath it)."""
    words = [python or sys.executable, "-m", "proofs.cli.main", "adapter", "--seed", "1"]
    settings = {
        "journalDirectories": "{data_dir}/journal",
        "ledgerDirectories": "{data_dir}/ledgers",
        **TEST_SETTINGS,
        "entryLogFilePreallocationEnabled": "false",
    }
    for key, value in settings.items():
        words += ["--set", f"{key}={value}"]
    return shlex.join(words)
