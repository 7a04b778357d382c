"""The bookie crash check finds these bugs: each known-bad variant must fail it.

Same workload and checks as the CI slice in tests/unit/proofs/crash/test_bookie_check.py,
which the unchanged bookie passes. Every failure is a trace the model judges, so it also
replays: ``bkref check-trace`` exits 1 on a saved one.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from impl.bookie.bookie import Bookie
from impl.bookie.checkpoint import Checkpointer
from impl.journal.journal import Journal
from impl.journal.last_mark import LogMark
from proofs.cli.main import main
from proofs.crash.bookie_check import run_bookie_check
from proofs.crash.explorer import Report
from tests.paths import ROOT
from tests.quality import bookie_variants


def _caught() -> Report:
    # Every crash point until a few failures are in (a failing state is recovered and judged
    # in full, never reused, so a variant's whole run takes minutes).
    report = run_bookie_check(seed=1, adds=24, max_failures=20)
    assert report.failures, "the variant went unnoticed"
    return report


def _messages(report: Report) -> str:
    return "\n".join(failure.message for failure in report.failures)


def test_catches_acknowledging_before_the_journal_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Journal, "append", bookie_variants.journal_acking_at_once(Journal.append))
    report = _caught()
    # The model sees the bug before any crash can lose the entry: the first add is
    # acknowledged at once, while the model allows only "pending" until a journal force.
    assert report.failures[0].where.startswith("the workload without a crash, step 0 (add)")
    assert "answered ok; allowed: pending" in report.failures[0].message


def test_catches_last_mark_persisted_before_the_entry_logs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        Checkpointer, "complete", bookie_variants.checkpoint_persisting_last_mark_first
    )
    report = _caught()
    # Acknowledged adds or fences lost after a crash (properties 1 and 2): the model sees it
    # in the recovered state before any read, as a ledger missing, ending before its
    # acknowledged entries, or unfenced (the crash's outcomes, checked first, say so).
    lost = ("is missing", "for sure", "acknowledged", "durably fenced, is not fenced")
    for failure in report.failures:
        assert "(restart): " in failure.message, failure.message
        assert any(text in failure.message for text in lost), failure


def _recovery_not_advancing_the_mark(
    original: Callable[[Bookie, LogMark], None],
) -> Callable[[Bookie, LogMark], None]:
    """BookKeeper #2087: the post-replay checkpoint persists the mark replay started from."""

    def recovery_checkpoint(self: Bookie, end: LogMark) -> None:
        original(self, self._checkpointer.last_mark)

    return recovery_checkpoint


def test_catches_recovery_that_does_not_advance_last_mark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        Bookie,
        "_recovery_checkpoint",
        _recovery_not_advancing_the_mark(Bookie._recovery_checkpoint),
    )
    assert "replay did not advance the mark (BookKeeper #2087)" in _messages(_caught())


def _recovery_mark_in_memory_only(
    original: Callable[[Checkpointer, LogMark, Journal | None], None],
) -> Callable[[Checkpointer, LogMark, Journal | None], None]:
    """The post-replay checkpoint flushes and takes the new mark in memory but never writes
    it: the bookie's state says one lastMark, its disk another."""

    def complete(self: Checkpointer, mark: LogMark, journal: Journal | None) -> None:
        if journal is not None:
            original(self, mark, journal)
            return
        with self._state_lock:
            self._entry_logger.flush()
            self._index.flush()
        self._last_mark = mark

    return complete


def test_catches_a_recovered_mark_that_is_never_persisted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The recovered mark lives in memory only: the bookie reports it, the disk holds an older
    one. The state's durable lastMark (the harness reads it from the disk) shows that to the
    model, so the saved trace replays to the same failure. (Before the state carried it, this
    was the one check outside the trace: check-trace passed the saved trace.)"""
    monkeypatch.setenv("BKREF_TRACE_DIR", str(tmp_path))
    monkeypatch.setattr(
        Checkpointer, "complete", _recovery_mark_in_memory_only(Checkpointer.complete)
    )
    report = _caught()
    first = report.failures[0]
    assert "the lastMark the disk holds durably is" in first.message, first.message
    assert first.trace is not None
    assert main(["check-trace", first.trace.save()]) == 1


def test_a_failure_replays_with_check_trace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BKREF_TRACE_DIR", str(tmp_path))
    monkeypatch.setattr(
        Checkpointer, "complete", bookie_variants.checkpoint_persisting_last_mark_first
    )
    failure = _caught().failures[0]
    assert failure.plan is not None and failure.trace is not None
    lines = failure.replay_lines()
    path = failure.trace.save()
    assert Path(path).parent == tmp_path
    assert lines == [
        f"trace: {path}",
        f"replay: bkref check-trace {path}",
        f"explain: bkref explain {path}",
    ]
    capsys.readouterr()
    assert main(["check-trace", path]) == 1
    failing_step = failure.message.split(":")[0]  # "step N (restart)"
    assert failing_step.startswith("step ") and failing_step.endswith("(restart)")
    assert f"{failing_step} diverges" in capsys.readouterr().out
    # The same from a shell, as the report prints it (the variant lives in this process
    # only: the trace alone carries the failure).
    done = subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "check-trace", path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    capsys.readouterr()
    assert main(["explain", path]) == 1  # it tells the story up to the divergence
    assert "DIVERGENCE" in capsys.readouterr().out
