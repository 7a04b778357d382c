"""The bookie crash check finds these bugs: each known-bad variant must fail it.

Same workload and checks as the CI slice in tests/unit/proofs/crash/test_bookie_check.py, which the
unchanged bookie passes.
"""

from __future__ import annotations

import pytest

from impl.bookie.checkpoint import Checkpointer
from impl.journal.journal import Journal
from proofs.crash.bookie_check import run_bookie_check
from tests.quality import bookie_variants


def _messages() -> str:
    report = run_bookie_check(seed=1, adds=24)
    assert report.failures, "the variant went unnoticed"
    return "\n".join(failure.message for failure in report.failures)


def test_catches_acknowledging_before_the_journal_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Journal, "append", bookie_variants.journal_acking_at_once(Journal.append))
    assert "lost" in _messages()


def test_catches_last_mark_persisted_before_the_entry_logs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        Checkpointer, "complete", bookie_variants.checkpoint_persisting_last_mark_first
    )
    assert "lost" in _messages()
