"""Bookies ``bkref conform`` knows how to start: bkref's own adapter.

Spec pages: spec/adapter.md ("Start"), docs/conformance.md ("bkref itself").

Why a function and not a constant: the command runs the Python that runs the runner
(``sys.executable``), so the bookie under test is the bkref of this checkout, in this
virtual environment. The settings are the refinement checks' small ones (impl/limits.py
TEST_SETTINGS: 1400-byte entry logs so a few adds rotate them, no group-commit wait), so a
short scenario reaches rotations, flushes and compactions. Preallocation stays on (as in
BookKeeper): the model lets an unseen preallocation hold the next id at any time under
asynchronous acks, and the runner inspects right after each gc, so the ids the compactions
took are seen before a rotation can take another.
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
    }
    for key, value in settings.items():
        words += ["--set", f"{key}={value}"]
    return shlex.join(words)
