"""The crash checker finds these bugs: each known-bad variant must fail ``crash-check``.

The checker's strength is measured, not assumed. Each test swaps one method of the entry
logger for its variant from tests/quality/variants.py, runs the same small workload the CI
slice runs, and requires failures of the expected kind. The unchanged implementation passes
the same run (tests/unit/proofs/crash/test_entry_log_check.py).
"""

from __future__ import annotations

import pytest

from impl.entrylog.manager import SingleEntryLogManager
from proofs.crash.entry_log_check import run_check
from proofs.crash.explorer import Report
from tests.quality import variants


def _run(flush_entrylog_bytes: int = 0) -> Report:
    """The CI slice: small enough for seconds, big enough to rotate, checkpoint and flush."""
    return run_check(seed=1, entries=20, ledgers=2, flush_entrylog_bytes=flush_entrylog_bytes)


def _messages(report: Report) -> str:
    return "\n".join(failure.message for failure in report.failures)


def test_catches_a_log_whose_directory_is_never_fsynced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SingleEntryLogManager, "_allocate", variants.allocate_without_dir_fsync)
    report = _run()
    assert report.failures, "a log name that is never made durable went unnoticed"
    assert "lost" in _messages(report)


def test_catches_a_checkpoint_that_does_not_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SingleEntryLogManager, "checkpoint", variants.checkpoint_without_fsync)
    report = _run()
    assert report.failures, "a checkpoint without fsync went unnoticed"
    assert "lost" in _messages(report)


def test_catches_a_flush_that_forgets_rotated_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SingleEntryLogManager, "flush", variants.flush_forgetting_rotated_logs)
    report = _run()
    assert report.failures, "a flush that leaves rotated logs unsynced went unnoticed"
    assert "lost" in _messages(report)


def test_catches_log_ids_trusting_last_id_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    variants.allocator_trusting_last_id(monkeypatch)
    report = _run()
    assert report.failures, "a log id allocator that can reuse an existing id went unnoticed"
    messages = _messages(report)
    assert "after recovery" in messages or "reused" in messages
